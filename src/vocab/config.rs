//! Options and ceilings for loading a vocabulary.

/// The widest mask (and so the largest token id + 1) a vocabulary may have: 2^24 ids, a
/// 2 MiB mask. The largest model vocabularies have about 2^18 tokens; a wider value in a
/// tokenizer file or a configuration is an error, not an allocation of its size.
pub const MAX_MASK_WIDTH: usize = 1 << 24;

/// The largest `tokenizer.json` (or `tokenizer_config.json`) read from a file or inflated from
/// a gzip: 256 MiB, ten times the largest real ones (Qwen3's is 11 MiB).
pub const MAX_TOKENIZER_BYTES: usize = 256 << 20;

/// Options for loading a vocabulary.
///
/// # Example
///
/// ```no_run
/// use formwork::vocab::{Vocab, VocabConfig};
///
/// let vocab = Vocab::from_file_with(
///     "tokenizer.json",
///     VocabConfig::new().mask_width(Some(151_936)).eos(Some(vec!["<|im_end|>".into()])),
/// ).unwrap();
/// assert_eq!(vocab.mask_width(), 151_936);
/// ```
#[derive(Clone, Debug, Default)]
pub struct VocabConfig {
    pub(super) mask_width: Option<usize>,
    pub(super) eos: Option<Vec<String>>,
    pub(super) config_json: Option<Vec<u8>>,
}

impl VocabConfig {
    /// Default options: mask width = the tokenizer's size, EOS from `tokenizer_config.json` beside
    /// the tokenizer (or well-known end tokens).
    pub fn new() -> VocabConfig {
        VocabConfig::default()
    }

    /// The model's vocabulary size, when larger than the tokenizer's (padding rows in the
    /// embedding matrix). Ids past the tokenizer are never allowed. At most
    /// [`MAX_MASK_WIDTH`].
    pub fn mask_width(mut self, width: Option<usize>) -> VocabConfig {
        self.mask_width = width;
        self
    }

    /// The end-of-sequence tokens, by content (e.g. `<|im_end|>`), overriding the config.
    pub fn eos(mut self, tokens: Option<Vec<String>>) -> VocabConfig {
        self.eos = tokens;
        self
    }

    /// The contents of a `tokenizer_config.json` to read EOS from.
    pub fn config_json(mut self, json: Option<Vec<u8>>) -> VocabConfig {
        self.config_json = json;
        self
    }
}
