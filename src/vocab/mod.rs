//! The vocabulary: the exact bytes of every token, which tokens are special, EOS, and the token
//! trie the mask walks use.
//!
//! formwork never looks at token *strings*: a byte-level BPE token `Ġhello` is the bytes
//! ` hello`, a SentencePiece piece `<0x0A>` is the byte `\n`. Tokens marked `special: true` in the
//! tokenizer's added tokens are symbols, not text: they match only where a constraint names them.
//! A non-special added token (Qwen3's `<tool_call>`) is ordinary text.

mod config;
mod error;
mod hf;
mod holding;
mod slice;
mod sliced_walk;
mod token_kind;
mod trie;

use std::collections::HashMap;
use std::fmt;
use std::io::Read;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use crate::base::bitmask::set_bit;
use crate::base::sorted::walk_sorted;
use crate::base::token::TokenId;

pub use config::{VocabConfig, MAX_MASK_WIDTH, MAX_TOKENIZER_BYTES};
use error::{check_width, without_panics};
pub use error::{VocabError, VocabErrorKind};
pub(crate) use holding::Holding;
pub(crate) use slice::{SliceState, TokenSlice};
pub(crate) use sliced_walk::{walk_sliced, SliceProbe, SliceProofs};
pub use token_kind::TokenKind;
pub use trie::{Subtree, TokenTrie, TrieStep, TrieVisitor};

/// The Qwen3 tokenizer shipped inside the crate (gzip of the original `tokenizer.json`).
const EMBEDDED_QWEN3_TOKENIZER: &[u8] =
    include_bytes!("../../data/tokenizers/qwen3/tokenizer.json.gz");
const EMBEDDED_QWEN3_CONFIG: &[u8] =
    include_bytes!("../../data/tokenizers/qwen3/tokenizer_config.json");

fn gunzip_if_compressed<'a>(
    raw: &'a [u8],
    source: &str,
) -> Result<std::borrow::Cow<'a, [u8]>, VocabError> {
    if !raw.starts_with(&[0x1f, 0x8b]) {
        return Ok(std::borrow::Cow::Borrowed(raw));
    }
    // A few KiB of gzip can inflate to gigabytes.
    let out = read_capped(flate2::read::GzDecoder::new(raw)).map_err(|e| {
        VocabError::new(VocabErrorKind::Parse, format!("{source}: bad gzip: {e}")).caused_by(e)
    })?;
    let out = out.ok_or_else(|| {
        VocabError::new(
            VocabErrorKind::Config,
            format!("{source}: inflates to more than {MAX_TOKENIZER_BYTES} bytes"),
        )
    })?;
    Ok(std::borrow::Cow::Owned(out))
}

/// All of `reader`, or `None` past [`MAX_TOKENIZER_BYTES`] (read one byte past it, no more).
fn read_capped(reader: impl Read) -> std::io::Result<Option<Vec<u8>>> {
    let mut out = Vec::new();
    reader
        .take(MAX_TOKENIZER_BYTES as u64 + 1)
        .read_to_end(&mut out)?;
    Ok((out.len() <= MAX_TOKENIZER_BYTES).then_some(out))
}

/// The bytes of the file at `path`, refused past [`MAX_TOKENIZER_BYTES`] before more is read:
/// a path may name a device or a pipe that never ends (`/dev/zero` was read into 23 GB).
fn read_tokenizer_file(path: &Path) -> Result<Vec<u8>, VocabError> {
    let out = std::fs::File::open(path)
        .and_then(read_capped)
        .map_err(|e| {
            VocabError::new(VocabErrorKind::Io, format!("{}: {e}", path.display())).caused_by(e)
        })?;
    out.ok_or_else(|| {
        VocabError::new(
            VocabErrorKind::Config,
            format!(
                "{}: longer than {MAX_TOKENIZER_BYTES} bytes",
                path.display()
            ),
        )
    })
}

/// A model vocabulary as formwork sees it: per token its exact bytes and kind, the EOS ids, the
/// mask width, and the [`TokenTrie`] of text tokens.
///
/// Cheap to clone (shared behind an `Arc`).
///
/// # Example
///
/// ```
/// use formwork::vocab::Vocab;
///
/// let vocab = Vocab::from_token_bytes(
///     vec![b"a".to_vec(), b"b".to_vec(), b"ab".to_vec(), b"</s>".to_vec()],
///     &[3],
///     &[3],
/// ).unwrap();
/// assert_eq!(vocab.token_bytes(2), b"ab");
/// assert!(vocab.is_special(3));
/// assert_eq!(vocab.eos_tokens(), &[3]);
/// ```
#[derive(Clone)]
pub struct Vocab {
    inner: Arc<VocabInner>,
}

struct VocabInner {
    bytes: Vec<u8>,
    offsets: Vec<u32>,
    kinds: Vec<TokenKind>,
    specials: HashMap<String, TokenId>,
    eos: Vec<TokenId>,
    mask_width: usize,
    trie: TokenTrie,
    text_mask: Vec<u32>,
    /// Built on first use: only byte-level mask walks need them.
    slices: OnceLock<Vec<TokenSlice>>,
    /// Per byte, built on first use: the few bytes sliced walks leave out.
    holding: [OnceLock<Holding>; 256],
    /// Text tokens longest first, built on first use.
    by_length: OnceLock<Box<[TokenId]>>,
    /// Mask words of the text tokens holding `"` three times or more, built on first use.
    three_quotes: OnceLock<Box<[u32]>>,
    tokenizer: Option<tokenizers::Tokenizer>,
    source: String,
}

impl fmt::Debug for Vocab {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Vocab")
            .field("source", &self.inner.source)
            .field("tokens", &self.len())
            .field("mask_width", &self.inner.mask_width)
            .field("eos", &self.inner.eos)
            .finish()
    }
}

impl Vocab {
    /// The Qwen3 tokenizer embedded in the crate (151,669 tokens, EOS `<|im_end|>` and
    /// `<|endoftext|>`, mask width 151,936 as in the Qwen3 models' embedding matrix).
    pub fn embedded_qwen3() -> Result<Vocab, VocabError> {
        Vocab::embedded_qwen3_with(VocabConfig::new())
    }

    /// The embedded Qwen3 tokenizer with options; those left unset keep the embedded
    /// defaults (mask width 151,936, EOS `<|im_end|>` and `<|endoftext|>`).
    ///
    /// ```
    /// use formwork::vocab::{Vocab, VocabConfig, VocabErrorKind};
    ///
    /// let wide = Vocab::embedded_qwen3_with(VocabConfig::new().mask_width(Some(152_064))).unwrap();
    /// assert_eq!(wide.mask_width(), 152_064);
    /// let absurd = Vocab::embedded_qwen3_with(VocabConfig::new().mask_width(Some(1 << 40)));
    /// assert_eq!(absurd.unwrap_err().kind(), &VocabErrorKind::Config);
    /// ```
    pub fn embedded_qwen3_with(config: VocabConfig) -> Result<Vocab, VocabError> {
        let json = gunzip_if_compressed(EMBEDDED_QWEN3_TOKENIZER, "embedded:qwen3")?;
        let config = VocabConfig {
            mask_width: config.mask_width.or(Some(151_936)),
            eos: config
                .eos
                .or_else(|| Some(vec!["<|im_end|>".into(), "<|endoftext|>".into()])),
            config_json: config
                .config_json
                .or_else(|| Some(EMBEDDED_QWEN3_CONFIG.to_vec())),
        };
        Vocab::from_loaded(hf::load(&json, "embedded:qwen3", config)?)
    }

    /// Loads a HuggingFace `tokenizer.json` (or a gzip of it). A `tokenizer_config.json` in the
    /// same folder, if any, supplies the EOS token.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Vocab, VocabError> {
        Vocab::from_file_with(path, VocabConfig::new())
    }

    /// Loads a HuggingFace `tokenizer.json` with options.
    pub fn from_file_with(
        path: impl AsRef<Path>,
        config: VocabConfig,
    ) -> Result<Vocab, VocabError> {
        let path = path.as_ref();
        let raw = read_tokenizer_file(path)?;
        let config = match config.config_json {
            Some(_) => config,
            None => {
                // Optional: a file that cannot be read is no file, but one past the ceiling
                // is an error as the tokenizer's own would be.
                let beside =
                    match read_tokenizer_file(&path.with_file_name("tokenizer_config.json")) {
                        Ok(bytes) => Some(bytes),
                        Err(e) if e.kind() == &VocabErrorKind::Io => None,
                        Err(e) => return Err(e),
                    };
                config.config_json(beside)
            }
        };
        Vocab::from_json_bytes(&raw, &path.display().to_string(), config)
    }

    /// Loads a HuggingFace `tokenizer.json` (or a gzip of it) held in memory; `source` names
    /// it in errors. EOS comes from `config`: names, or the contents of a
    /// `tokenizer_config.json`, else a well-known end token.
    ///
    /// ```
    /// use formwork::vocab::{Vocab, VocabConfig, VocabErrorKind};
    ///
    /// let bad = Vocab::from_json_bytes(br#"{"model": 3}"#, "upload", VocabConfig::new());
    /// let e = bad.unwrap_err();
    /// assert_eq!(e.kind(), &VocabErrorKind::Parse);
    /// assert!(e.to_string().starts_with("upload: "));
    /// ```
    pub fn from_json_bytes(
        json: &[u8],
        source: &str,
        config: VocabConfig,
    ) -> Result<Vocab, VocabError> {
        let json = gunzip_if_compressed(json, source)?;
        Vocab::from_loaded(hf::load(&json, source, config)?)
    }

    /// Builds a vocabulary from raw token bytes (id = index), for tests and for engines that
    /// already hold the bytes. `special` lists the ids that are special symbols.
    pub fn from_token_bytes(
        tokens: Vec<Vec<u8>>,
        special: &[TokenId],
        eos: &[TokenId],
    ) -> Result<Vocab, VocabError> {
        let n = tokens.len();
        let mut kinds = vec![TokenKind::Text; n];
        let mut specials = HashMap::new();
        for &s in special {
            let kind = kinds.get_mut(s as usize).ok_or_else(|| {
                VocabError::new(VocabErrorKind::Config, format!("special id {s} >= {n}"))
            })?;
            *kind = TokenKind::Special;
            // `kinds` has one entry per token: `s` was just found in it.
            specials.insert(String::from_utf8_lossy(&tokens[s as usize]).into_owned(), s);
        }
        for (i, t) in tokens.iter().enumerate() {
            if t.is_empty() && kinds[i] == TokenKind::Text {
                kinds[i] = TokenKind::Unused;
            }
        }
        Vocab::assemble(
            tokens,
            kinds,
            specials,
            eos.to_vec(),
            n,
            None,
            "bytes".into(),
        )
    }

    fn from_loaded(l: hf::Loaded) -> Result<Vocab, VocabError> {
        let source = l.source.to_string();
        let tokenizer = Some(l.tokenizer);
        Vocab::assemble(
            l.tokens,
            l.kinds,
            l.specials,
            l.eos,
            l.mask_width,
            tokenizer,
            source,
        )
    }

    fn assemble(
        tokens: Vec<Vec<u8>>,
        kinds: Vec<TokenKind>,
        specials: HashMap<String, TokenId>,
        eos: Vec<TokenId>,
        mask_width: usize,
        tokenizer: Option<tokenizers::Tokenizer>,
        source: String,
    ) -> Result<Vocab, VocabError> {
        check_width(mask_width, &source, "mask width")?;
        if mask_width < tokens.len() {
            return Err(VocabError::new(
                VocabErrorKind::Config,
                format!(
                    "{source}: mask width {mask_width} < tokenizer size {}",
                    tokens.len()
                ),
            ));
        }
        if let Some(&bad) = eos.iter().find(|&&e| e as usize >= tokens.len()) {
            return Err(VocabError::new(
                VocabErrorKind::Config,
                format!("{source}: EOS id {bad} is outside the vocabulary"),
            ));
        }
        let mut bytes = Vec::new();
        let mut offsets = Vec::with_capacity(tokens.len() + 1);
        offsets.push(0);
        for t in &tokens {
            bytes.extend_from_slice(t);
            let end = u32::try_from(bytes.len()).map_err(|_| {
                VocabError::new(
                    VocabErrorKind::Config,
                    format!("{source}: the tokens' bytes add up to more than 4 GiB"),
                )
            })?;
            offsets.push(end);
        }
        let trie = TokenTrie::new(
            tokens
                .iter()
                .enumerate()
                .filter(|&(i, _)| kinds[i] == TokenKind::Text)
                .map(|(i, t)| (i as TokenId, t.as_slice())),
        );
        let mut text_mask = vec![0u32; mask_width.div_ceil(32)];
        for (i, k) in kinds.iter().enumerate() {
            if *k == TokenKind::Text {
                text_mask[i / 32] |= 1 << (i % 32);
            }
        }
        Ok(Vocab {
            inner: Arc::new(VocabInner {
                bytes,
                offsets,
                kinds,
                specials,
                eos,
                mask_width,
                trie,
                text_mask,
                slices: OnceLock::new(),
                holding: std::array::from_fn(|_| OnceLock::new()),
                by_length: OnceLock::new(),
                three_quotes: OnceLock::new(),
                tokenizer,
                source,
            }),
        })
    }

    /// Number of token ids the tokenizer defines (the mask may be wider, see
    /// [`Vocab::mask_width`]).
    pub fn len(&self) -> usize {
        self.inner.kinds.len()
    }

    /// True when the vocabulary has no tokens.
    pub fn is_empty(&self) -> bool {
        self.inner.kinds.is_empty()
    }

    /// Number of token ids a mask covers (the model's vocabulary size).
    pub fn mask_width(&self) -> usize {
        self.inner.mask_width
    }

    /// Number of u32 words of a mask: `ceil(mask_width / 32)`.
    pub fn mask_words(&self) -> usize {
        self.inner.mask_width.div_ceil(32)
    }

    /// Where the vocabulary came from (a path, `embedded:qwen3`, ...).
    pub fn source(&self) -> &str {
        &self.inner.source
    }

    /// The kind of `token`; ids past the tokenizer but inside the mask width are `Unused`.
    /// Returns `None` for ids outside the mask width.
    pub fn kind(&self, token: TokenId) -> Option<TokenKind> {
        match self.inner.kinds.get(token as usize) {
            Some(&k) => Some(k),
            None if (token as usize) < self.inner.mask_width => Some(TokenKind::Unused),
            None => None,
        }
    }

    /// True if `token` is a special symbol.
    pub fn is_special(&self, token: TokenId) -> bool {
        self.kind(token) == Some(TokenKind::Special)
    }

    /// The bytes of `token` (for a special token: its content, for display). Empty for ids with
    /// no token.
    pub fn token_bytes(&self, token: TokenId) -> &[u8] {
        let i = token as usize;
        if i >= self.inner.kinds.len() {
            return &[];
        }
        &self.inner.bytes[self.inner.offsets[i] as usize..self.inner.offsets[i + 1] as usize]
    }

    /// The id of the special token with this content, e.g. `<|vision_start|>`.
    pub fn special_id(&self, content: &str) -> Option<TokenId> {
        self.inner.specials.get(content).copied()
    }

    /// Every special token, by content.
    pub fn specials(&self) -> impl Iterator<Item = (&str, TokenId)> {
        self.inner.specials.iter().map(|(k, &v)| (k.as_str(), v))
    }

    /// The end-of-sequence token ids.
    pub fn eos_tokens(&self) -> &[TokenId] {
        &self.inner.eos
    }

    /// True if `token` ends the sequence.
    pub fn is_eos(&self, token: TokenId) -> bool {
        self.inner.eos.contains(&token)
    }

    /// The trie of all text tokens.
    pub fn trie(&self) -> &TokenTrie {
        &self.inner.trie
    }

    /// Mask words with a bit set for every text token (the universe of byte-level masks).
    pub fn text_mask(&self) -> &[u32] {
        &self.inner.text_mask
    }

    /// Steps each of `tokens` from `root`, reusing the states of the prefix it shares with the
    /// previous token. Tokens sharing a prefix must be contiguous (trie order, or trie order
    /// within each first byte); see [`walk_sorted`] for what is reported and how `advance`
    /// writes a state into a reused slot.
    pub(crate) fn walk_tokens<S: Clone, E>(
        &self,
        tokens: &[TokenId],
        root: S,
        advance: impl FnMut(&S, u8, &mut S) -> Result<bool, E>,
        report: impl FnMut(&[TokenId], bool, &S),
    ) -> Result<(), E> {
        walk_sorted(tokens, |t| self.token_bytes(t), root, advance, report)
    }

    /// The token slices mask walks may take whole (see `slice.rs`), built on first use with
    /// the length order the walks that take a slice in part read.
    pub(crate) fn slices(&self) -> &[TokenSlice] {
        self.inner.slices.get_or_init(|| {
            self.by_length();
            TokenSlice::all(self)
        })
    }

    /// The text tokens holding `byte`, found on first use.
    pub(crate) fn holding(&self, byte: u8) -> &Holding {
        self.inner.holding[byte as usize].get_or_init(|| Holding::new(self, byte))
    }

    /// Mask words of the text tokens holding `"` three times or more (found on first use):
    /// the only tokens that can close a JSON string, then open and close another.
    pub(crate) fn holding_three_quotes(&self) -> &[u32] {
        self.inner.three_quotes.get_or_init(|| {
            let mut words = vec![0u32; self.mask_words()];
            for &p in self.holding(b'"').positions.iter() {
                let token = self.trie().token_at(p);
                if memchr::memchr_iter(b'"', self.token_bytes(token)).count() >= 3 {
                    set_bit(&mut words, token);
                }
            }
            words.into()
        })
    }

    /// The text tokens, longest first (ordered on first use).
    pub(crate) fn by_length(&self) -> &[TokenId] {
        self.inner
            .by_length
            .get_or_init(|| holding::by_length(self))
    }

    /// The text tokens longer than `n` bytes.
    pub(crate) fn longer_than(&self, n: usize) -> &[TokenId] {
        let tokens = self.by_length();
        &tokens[..tokens.partition_point(|&t| self.token_bytes(t).len() > n)]
    }

    /// Length in bytes of the longest text token.
    pub fn max_token_len(&self) -> usize {
        self.inner.trie.max_depth()
    }

    /// Tokenizes `text` exactly: no BOS, no added prefix space, so the concatenated bytes of the
    /// result are `text` (up to the tokenizer's normalizer, e.g. NFC for Qwen3). Special-token
    /// contents in the text (`<|im_end|>`) become those special tokens.
    pub fn encode(&self, text: &str) -> Result<Vec<TokenId>, VocabError> {
        match &self.inner.tokenizer {
            Some(tok) => {
                let encoded = without_panics(|| tok.encode(text, false))
                    .and_then(|r| r.map_err(|e| e.to_string()));
                encoded.map(|e| e.get_ids().to_vec()).map_err(|e| {
                    VocabError::new(
                        VocabErrorKind::Encode,
                        format!("{}: encode: {e}", self.source()),
                    )
                })
            }
            None => self.encode_greedy(text.as_bytes()),
        }
    }

    /// Longest-match tokenization of raw bytes over the trie; the fallback when no tokenizer is
    /// attached, and a way to tokenize byte strings that are not UTF-8.
    pub fn encode_greedy(&self, mut bytes: &[u8]) -> Result<Vec<TokenId>, VocabError> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            let (len, id) = self.longest_prefix_token(bytes).ok_or_else(|| {
                VocabError::new(
                    VocabErrorKind::Encode,
                    format!("no token starts with byte 0x{:02x}", bytes[0]),
                )
            })?;
            out.push(id);
            bytes = &bytes[len..];
        }
        Ok(out)
    }

    fn longest_prefix_token(&self, bytes: &[u8]) -> Option<(usize, TokenId)> {
        // Follows the single trie path spelled by `bytes`; tokens are reported shallow to deep.
        struct Longest<'a> {
            input: &'a [u8],
            best: Option<(usize, TokenId)>,
        }
        impl TrieVisitor for Longest<'_> {
            type State = usize;
            fn step(&mut self, _: &usize, byte: u8, depth: usize, _: Subtree) -> TrieStep<usize> {
                if self.input.get(depth - 1) == Some(&byte) {
                    TrieStep::Enter(depth)
                } else {
                    TrieStep::Skip
                }
            }
            fn tokens(&mut self, &depth: &usize, tokens: &[TokenId]) {
                // The trie reports only nodes where tokens end.
                self.best = Some((depth, tokens[0]));
            }
        }
        let mut v = Longest {
            input: bytes,
            best: None,
        };
        self.inner.trie.walk(0, &mut v);
        v.best
    }

    /// A printable form of a token: its text, escaped, or `<special>` contents.
    pub fn display_token(&self, token: TokenId) -> String {
        match self.kind(token) {
            Some(TokenKind::Special) => {
                String::from_utf8_lossy(self.token_bytes(token)).into_owned()
            }
            Some(TokenKind::Text) => {
                format!("{:?}", String::from_utf8_lossy(self.token_bytes(token)))
            }
            _ => format!("<unused {token}>"),
        }
    }
}
