//! Loading a HuggingFace `tokenizer.json`: token pieces back to their exact bytes.

use std::collections::HashMap;

use tokenizers::decoders::DecoderWrapper;
use tokenizers::pre_tokenizers::metaspace::PrependScheme;
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::Tokenizer;

use super::{
    check_width, without_panics, TokenId, TokenKind, Vocab, VocabConfig, VocabError, VocabErrorKind,
};

/// How the tokenizer spells bytes in its pieces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PieceEncoding {
    /// GPT-2's byte-to-unicode table (Qwen, Llama 3, GPT-2).
    ByteLevel,
    /// SentencePiece: `▁` is a space, `<0xHH>` a raw byte (Mistral, Llama 2).
    SentencePiece,
}

/// Tokens ending a sequence in common chat and base models, tried when no config names EOS.
const WELL_KNOWN_EOS: &[&str] = &[
    "<|im_end|>",
    "<|eot_id|>",
    "<|end_of_text|>",
    "<|endoftext|>",
    "</s>",
    "<|end|>",
    "<eos>",
];

pub(super) fn load(json: &[u8], source: &str, config: VocabConfig) -> Result<Vocab, VocabError> {
    let parsed =
        without_panics(|| Tokenizer::from_bytes(json)).and_then(|r| r.map_err(|e| e.to_string()));
    let mut tokenizer = parsed.map_err(|e| {
        VocabError::new(
            VocabErrorKind::Parse,
            format!("{source}: not a tokenizer.json: {e}"),
        )
    })?;
    let encoding = piece_encoding(&tokenizer).ok_or_else(|| {
        VocabError::new(
            VocabErrorKind::UnsupportedEncoding,
            format!("{source}: the decoder is neither ByteLevel nor SentencePiece byte-fallback"),
        )
    })?;
    never_prepend_space(&mut tokenizer);
    // Continuation text is never cut or padded: a truncating tokenizer.json would drop bytes.
    tokenizer
        .with_truncation(None)
        .map(|t| t.with_padding(None))
        .map_err(|e| VocabError::new(VocabErrorKind::Parse, format!("{source}: {e}")))?;

    let model_vocab = tokenizer.get_vocab(false);
    let added = tokenizer.get_added_tokens_decoder();
    let size = model_vocab
        .values()
        .chain(added.keys())
        .map(|&id| id as usize + 1)
        .max()
        .unwrap_or(0);
    // A tokenizer file is input: one id of 4 billion must not allocate tables of that size.
    check_width(size, source, "token id + 1")?;

    let byte_of_char = byte_level_decoding_table();
    let mut tokens = vec![Vec::new(); size];
    let mut kinds = vec![TokenKind::Unused; size];
    for (piece, &id) in &model_vocab {
        let bytes = match encoding {
            PieceEncoding::ByteLevel => piece
                .chars()
                .map(|c| byte_of_char.get(&c).copied())
                .collect::<Option<Vec<u8>>>()
                .ok_or_else(|| {
                    VocabError::new(
                        VocabErrorKind::UnsupportedEncoding,
                        format!("{source}: piece {piece:?} (id {id}) is not byte-level encoded"),
                    )
                })?,
            PieceEncoding::SentencePiece => sentencepiece_bytes(piece),
        };
        // `size` is past every id of `model_vocab`.
        if kinds[id as usize] != TokenKind::Unused {
            return Err(VocabError::new(
                VocabErrorKind::Config,
                format!(
                    "{source}: id {id} has two pieces in the model's vocabulary (one is {piece:?})"
                ),
            ));
        }
        tokens[id as usize] = bytes;
        kinds[id as usize] = TokenKind::Text;
    }
    let mut specials = HashMap::new();
    for (&id, token) in &added {
        // Added tokens hold their content verbatim, never in the model's piece encoding.
        // `size` is past every id of `added`.
        tokens[id as usize] = token.content.as_bytes().to_vec();
        if token.special {
            kinds[id as usize] = TokenKind::Special;
            specials.insert(token.content.clone(), id);
        } else {
            kinds[id as usize] = TokenKind::Text;
        }
    }
    for (i, t) in tokens.iter().enumerate() {
        if t.is_empty() {
            kinds[i] = TokenKind::Unused;
        }
    }

    let eos = eos_ids(&config, &specials, source)?;
    let mask_width = config.mask_width.unwrap_or(size);
    Vocab::assemble(
        tokens,
        kinds,
        specials,
        eos,
        mask_width,
        Some(tokenizer),
        source.to_string(),
    )
}

fn piece_encoding(tokenizer: &Tokenizer) -> Option<PieceEncoding> {
    fn classify(d: &DecoderWrapper) -> Option<PieceEncoding> {
        match d {
            DecoderWrapper::ByteLevel(_) => Some(PieceEncoding::ByteLevel),
            DecoderWrapper::ByteFallback(_) | DecoderWrapper::Metaspace(_) => {
                Some(PieceEncoding::SentencePiece)
            }
            DecoderWrapper::Sequence(seq) => seq.get_decoders().iter().find_map(classify),
            _ => None,
        }
    }
    tokenizer.get_decoder().and_then(classify)
}

/// SentencePiece tokenizers prepend `▁` to the first word; formwork tokenizes continuation
/// text, whose bytes must come back unchanged, so the prefix space is switched off.
fn never_prepend_space(tokenizer: &mut Tokenizer) {
    fn fix(p: &mut PreTokenizerWrapper) -> bool {
        match p {
            PreTokenizerWrapper::Metaspace(m) => {
                m.set_prepend_scheme(PrependScheme::Never);
                true
            }
            PreTokenizerWrapper::Sequence(seq) => {
                seq.as_mut().iter_mut().map(fix).fold(false, |a, b| a | b)
            }
            _ => false,
        }
    }
    if let Some(mut pre) = tokenizer.get_pre_tokenizer().cloned() {
        if fix(&mut pre) {
            tokenizer.with_pre_tokenizer(Some(pre));
        }
    }
}

fn sentencepiece_bytes(piece: &str) -> Vec<u8> {
    if let Some(hex) = piece.strip_prefix("<0x").and_then(|p| p.strip_suffix('>')) {
        if hex.len() == 2 {
            if let Ok(b) = u8::from_str_radix(hex, 16) {
                return vec![b];
            }
        }
    }
    piece.replace('\u{2581}', " ").into_bytes()
}

/// GPT-2's `bytes_to_unicode`, inverted: printable Latin-1 bytes stand for themselves, the other
/// 68 bytes are shifted to U+0100 and up, in byte order.
fn byte_level_decoding_table() -> HashMap<char, u8> {
    let printable = |b: u8| matches!(b, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF);
    let mut shifted = 0u32;
    (0..=255u8)
        .map(|b| {
            if printable(b) {
                (char::from(b), b)
            } else {
                shifted += 1;
                // At most 68 bytes are shifted: U+0100..=U+0143, all scalar values.
                (
                    char::from_u32(0xFF + shifted).expect("a Latin Extended-A character"),
                    b,
                )
            }
        })
        .collect()
}

fn eos_ids(
    config: &VocabConfig,
    specials: &HashMap<String, TokenId>,
    source: &str,
) -> Result<Vec<TokenId>, VocabError> {
    if let Some(names) = &config.eos {
        return names
            .iter()
            .map(|n| {
                specials.get(n).copied().ok_or_else(|| {
                    VocabError::new(
                        VocabErrorKind::Config,
                        format!("{source}: EOS token {n:?} is not a special token"),
                    )
                })
            })
            .collect();
    }
    if let Some(json) = &config.config_json {
        let value: serde_json::Value = serde_json::from_slice(json).map_err(|e| {
            VocabError::new(
                VocabErrorKind::Parse,
                format!("{source}: tokenizer_config.json: {e}"),
            )
        })?;
        let name = match &value["eos_token"] {
            serde_json::Value::String(s) => Some(s.as_str()),
            serde_json::Value::Object(o) => o.get("content").and_then(|c| c.as_str()),
            _ => None,
        };
        if let Some(id) = name.and_then(|n| specials.get(n)) {
            return Ok(vec![*id]);
        }
    }
    Ok(WELL_KNOWN_EOS
        .iter()
        .filter_map(|n| specials.get(*n).copied())
        .take(1)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_level_table_is_a_bijection_with_gpt2_anchors() {
        let table = byte_level_decoding_table();
        assert_eq!(table.len(), 256);
        assert_eq!(table[&'Ġ'], b' ');
        assert_eq!(table[&'Ċ'], b'\n');
        assert_eq!(table[&'ĉ'], b'\t');
        assert_eq!(table[&'a'], b'a');
        assert_eq!(table[&'Ā'], 0);
    }

    #[test]
    fn sentencepiece_pieces() {
        assert_eq!(sentencepiece_bytes("<0x0A>"), b"\n");
        assert_eq!(sentencepiece_bytes("▁hello"), b" hello");
        assert_eq!(sentencepiece_bytes("<0xZZ>"), b"<0xZZ>");
    }
}
