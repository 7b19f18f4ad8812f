//! llguidance 1.9 beside formwork: its tokenizer environment for a formwork vocabulary's
//! `tokenizer.json` (for the llguidance differential tests and `cargo bench --bench peers`),
//! and differential driving on Qwen3, masks compared at every step.
//!
//! Masks must be equal except where a documented semantic choice differs (DESIGN.md,
//! Semantics), and each difference is checked to be one of them:
//!
//! - **added tokens**: llguidance treats every added token written `<...>` as a special
//!   symbol; formwork treats only `special: true` tokens so, and a non-special added token
//!   (Qwen3's `<think>`, `<tool_call>`, ...) is its text. Differences there: formwork allows
//!   the token, llguidance does not.
//! - **forced stretches**: where the constraint forces the next bytes, llguidance allows only
//!   the canonical tokenization of them; formwork allows every token consistent with the bytes
//!   and offers the canonical ones through `forced_tokens()`. Differences there: formwork
//!   allows a token whose bytes agree with the forced bytes, llguidance does not.
//! - **EOS**: compared as "EOS allowed" (llguidance has one EOS id, formwork the vocabulary's
//!   EOS set).
//! - **JSON strings, RFC 8259 in full**: by default llguidance's JSON strings exclude U+007F
//!   and the escapes `\/` and `\uXXXX`; RFC 8259 allows all three (only U+0000..U+001F must be
//!   escaped), and so does formwork. Differences there: formwork allows a token containing the
//!   byte 0x7F or continuing a backslash with `/` or `u`, llguidance does not.
//! - **JSON Schema `pattern` classes**: formwork reads patterns as ECMA-262, as the JSON Schema
//!   specification says (`\d` = `[0-9]`, `\w` ASCII, `\s` with U+FEFF and without U+0085);
//!   llguidance reads them as Rust regexes (Unicode classes). Differences there, either way:
//!   a token containing a character those definitions disagree on.
//! - **Canonical object keys**: formwork writes object keys as a JSON serializer does (only
//!   `"`, `\\` and the controls escaped, `\u00xx` for controls without a short escape), so an
//!   undeclared key is a plain complement of the declared names; llguidance's keys take `\u`
//!   escapes of any character. Differences there: formwork rejects a token continuing a key
//!   with a backslash escape llguidance allows.
//! - **Negative zero**: `-0` is a JSON number equal to 0, so formwork allows it under
//!   `minimum: 0`; llguidance does not. Differences there: formwork allows a token spelling a
//!   prefix of `-0` (`-`, `-0`), llguidance does not.
//! - **Exponents under bounds**: formwork compares a bounded number's value exactly, whatever
//!   its notation (`1E5` is at least 1); llguidance's range expressions take no exponent.
//!   Differences there: after a digit, formwork allows a token that goes on with digits or a
//!   fraction into `e`/`E`, llguidance does not.

use std::io::Read;
use std::path::Path;

use formwork::vocab::TokenKind;
use formwork::{Matcher, TokenId};
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::TokEnv;
use llguidance::ParserFactory;

use crate::tokenizers::{qwen3, tokenizer_path};

/// The tokenizer file's JSON text, gunzipped if the name ends in `.gz`.
pub fn tokenizer_json(path: &Path) -> Vec<u8> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut json = Vec::new();
    if path.extension().is_some_and(|e| e == "gz") {
        flate2::read::GzDecoder::new(file).read_to_end(&mut json)
    } else {
        std::io::BufReader::new(file).read_to_end(&mut json)
    }
    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    json
}

/// llguidance's environment for the tokenizer at `path`, its masks `mask_width` bits wide (the
/// model's vocabulary size, as formwork's).
pub fn tok_env(path: &Path, mask_width: usize) -> TokEnv {
    toktrie_hf_tokenizers::ByteTokenizer::from_json_bytes(&tokenizer_json(path))
        .expect("llguidance reads the tokenizer")
        .into_tok_env(Some(mask_width))
        .expect("llguidance's token environment")
}

fn llg_env() -> TokEnv {
    tok_env(&tokenizer_path("qwen3"), qwen3().mask_width())
}

/// The documented semantic differences (module docs), in the order they are checked.
#[derive(Clone, Copy, Debug)]
enum Difference {
    NonSpecialAddedToken,
    ForcedStretch,
    Rfc8259String,
    CanonicalKey,
    NegativeZero,
    BoundedExponent,
    EcmaPatternClass,
}

impl Difference {
    const ALL: [Difference; 7] = [
        Difference::NonSpecialAddedToken,
        Difference::ForcedStretch,
        Difference::Rfc8259String,
        Difference::CanonicalKey,
        Difference::NegativeZero,
        Difference::BoundedExponent,
        Difference::EcmaPatternClass,
    ];
}

/// Which documented difference explains token `t` being allowed by formwork iff
/// `formwork_allows`, after the bytes `before`, with each engine's forced bytes.
fn documented(
    vocab: &formwork::vocab::Vocab,
    t: TokenId,
    formwork_allows: bool,
    before: &[u8],
    forced: [&[u8]; 2],
) -> Option<Difference> {
    let bytes = vocab.token_bytes(t);
    // Qwen3's added tokens are ids 151643.. (shared/data README).
    let non_special_added = vocab.kind(t) == Some(TokenKind::Text)
        && t as usize >= 151_643
        && bytes.starts_with(b"<")
        && bytes.ends_with(b">");
    let agrees = |forced: &[u8]| {
        let n = bytes.len().min(forced.len());
        !forced.is_empty() && bytes[..n] == forced[..n]
    };
    let rfc_escape = |b: &u8| *b == b'/' || *b == b'u';
    let rfc_string = bytes.contains(&0x7f)
        || bytes.windows(2).any(|w| w[0] == b'\\' && rfc_escape(&w[1]))
        || (before.ends_with(b"\\") && bytes.first().is_some_and(rfc_escape))
        // where a pattern leaves only characters llguidance cannot escape
        || bytes.ends_with(b"\\");
    // A token ending part-way into a character may be the start of one they disagree on.
    let ends_in_a_character = std::str::from_utf8(bytes).is_err_and(|e| e.error_len().is_none());
    let ecma_class = ends_in_a_character
        || String::from_utf8_lossy(bytes)
            .chars()
            .any(|c| (c.is_alphanumeric() && !c.is_ascii()) || c == '\u{feff}' || c == '\u{85}');
    let mantissa = bytes
        .iter()
        .take_while(|b| b.is_ascii_digit() || **b == b'.');
    let exponent = before.last().is_some_and(u8::is_ascii_digit)
        && matches!(bytes.get(mantissa.count()), Some(b'e' | b'E'));
    match formwork_allows {
        true if non_special_added => Some(Difference::NonSpecialAddedToken),
        true if forced.iter().any(|f| agrees(f)) => Some(Difference::ForcedStretch),
        true if rfc_string => Some(Difference::Rfc8259String),
        false if rfc_string && in_object_key(before) => Some(Difference::CanonicalKey),
        true if bytes == b"-" || bytes == b"-0" => Some(Difference::NegativeZero),
        true if exponent => Some(Difference::BoundedExponent),
        _ if ecma_class => Some(Difference::EcmaPatternClass),
        _ => None,
    }
}

/// Does `before` (a prefix of compact or spaced JSON) end inside an object key, or where one
/// starts?
fn in_object_key(before: &[u8]) -> bool {
    let mut containers = Vec::new();
    // Inside a string (and whether it is a key), after a backslash, expecting a key.
    let (mut string, mut key, mut escaped, mut expect_key) = (false, false, false, false);
    for &b in before {
        if string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => (string, key, expect_key) = (true, expect_key, false),
            b'{' | b'[' => {
                containers.push(b);
                expect_key = b == b'{';
            }
            b'}' | b']' => {
                containers.pop();
                expect_key = false;
            }
            b',' => expect_key = containers.last() == Some(&b'{'),
            b':' => expect_key = false,
            _ => {}
        }
    }
    (string && key) || (!string && expect_key)
}

/// Walks each text through a fresh formwork matcher and a fresh llguidance matcher of the same
/// language; every mask difference must be a documented one.
pub fn differential(
    theirs: impl Fn() -> TopLevelGrammar,
    ours: impl Fn() -> Box<dyn Matcher>,
    texts: &[&str],
) {
    let vocab = qwen3();
    let env = llg_env();
    let factory = ParserFactory::new_simple(&env).unwrap();
    let llg_eos = env.tok_trie().eos_token();
    let mut differences = [0usize; Difference::ALL.len()];
    for text in texts {
        let tokens = vocab.encode(text).unwrap();
        let mut llg_matcher = llguidance::Matcher::new(factory.create_parser(theirs()));
        let mut m = ours();
        for step in 0..=tokens.len() {
            let mut words = vec![0u32; vocab.mask_words()];
            m.fill_mask(&mut words).unwrap();
            let mask = formwork::mask::TokenMask::from_words(words, vocab.mask_width());
            let llg = llg_matcher.compute_mask_or_eos().unwrap();
            // Either engine's forced bytes: formwork forces nothing where an escape could spell
            // the same character (`\u0070` for `p`), llguidance, without such escapes, does.
            let forced = m.forced_bytes();
            let llg_forced = llg_matcher.compute_ff_bytes();
            let ours_eos = vocab.eos_tokens().iter().any(|&t| mask.contains(t));
            assert_eq!(
                ours_eos,
                llg.is_allowed(llg_eos),
                "{text:?} step {step}: EOS"
            );
            for t in 0..vocab.len() as TokenId {
                if vocab.is_eos(t) || t == llg_eos {
                    continue;
                }
                let (a, b) = (mask.contains(t), llg.is_allowed(t));
                if a == b {
                    continue;
                }
                let bytes = vocab.token_bytes(t);
                let before: Vec<u8> = tokens[..step]
                    .iter()
                    .flat_map(|&t| vocab.token_bytes(t).to_vec())
                    .collect();
                let Some(why) = documented(vocab, t, a, &before, [&forced, &llg_forced]) else {
                    panic!(
                        "{text:?} step {step} (after {:?}): token {} {bytes:x?} is {} by \
                         formwork and {} by llguidance",
                        String::from_utf8_lossy(&before),
                        vocab.display_token(t),
                        if a { "allowed" } else { "rejected" },
                        if b { "allowed" } else { "rejected" },
                    )
                };
                differences[why as usize] += 1;
            }
            let Some(&t) = tokens.get(step) else { break };
            m.consume(t).unwrap();
            if llg_matcher.compute_mask_or_eos().unwrap().is_allowed(t) {
                llg_matcher.consume_token(t).unwrap();
            } else {
                // A token llguidance takes for a symbol: give it the same bytes one at a time.
                for &b in vocab.token_bytes(t) {
                    llg_matcher
                        .consume_token(vocab.encode_greedy(&[b]).unwrap()[0])
                        .unwrap();
                }
            }
        }
    }
    let counts: Vec<String> = Difference::ALL
        .iter()
        .zip(differences)
        .map(|(d, n)| format!("{n} {d:?}"))
        .collect();
    eprintln!("differences: {}", counts.join(", "));
}
