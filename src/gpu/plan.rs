//! The index rules of applying a bitmask to logits, shared by the CPU reference and the CUDA
//! kernel: which rows are touched, which mask row each reads, and which logits become `-inf`.
//!
//! The contract is xgrammar's `apply_token_bitmask_inplace` (`vocab_size`, `indices`), with one
//! deliberate difference: logits columns past the vocabulary are masked, as vLLM's and
//! llguidance's kernels do, where xgrammar leaves them alone. A column without a token must never
//! be sampled, and formwork never leaves a mask looser than asked.

use std::fmt;

/// Why an apply call was refused. Nothing is written when an apply call fails.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ApplyError {
    /// The logits buffer is not a whole number of rows.
    LogitsShape {
        /// Logits given.
        len: usize,
        /// Logits per row.
        row_len: usize,
    },
    /// The bitmask buffer is not a whole number of rows.
    MaskShape {
        /// Words given.
        len: usize,
        /// Words per row.
        row_words: usize,
    },
    /// No index list, and the logits and the bitmask have different numbers of rows.
    BatchMismatch {
        /// Rows of logits.
        logits_rows: usize,
        /// Rows of bitmask.
        mask_rows: usize,
    },
    /// An entry of the index list names a row that the logits or the bitmask lack.
    IndexOutOfRange {
        /// Position in the index list.
        position: usize,
        /// The row it names.
        row: u32,
        /// Rows of logits.
        logits_rows: usize,
        /// Rows of bitmask.
        mask_rows: usize,
    },
    /// The vocabulary has more tokens than a bitmask row has bits.
    MaskTooNarrow {
        /// Tokens of the vocabulary.
        vocab_size: usize,
        /// Bits of a bitmask row (`32 × row_words`).
        mask_bits: usize,
    },
    /// The vocabulary has more tokens than a logits row has columns.
    LogitsTooNarrow {
        /// Tokens of the vocabulary.
        vocab_size: usize,
        /// Logits per row.
        row_len: usize,
    },
    /// More rows to touch than one CUDA launch can address (the grid's y dimension).
    TooManyRows {
        /// Rows to touch.
        rows: usize,
        /// The limit.
        max: usize,
    },
}

impl fmt::Display for ApplyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ApplyError::LogitsShape { len, row_len } => {
                write!(
                    f,
                    "{len} logits are not a whole number of rows of {row_len}"
                )
            }
            ApplyError::MaskShape { len, row_words } => {
                write!(
                    f,
                    "{len} bitmask words are not a whole number of rows of {row_words}"
                )
            }
            ApplyError::BatchMismatch {
                logits_rows,
                mask_rows,
            } => write!(
                f,
                "{logits_rows} logits rows but {mask_rows} bitmask rows (give an index list to \
                 touch only some rows)"
            ),
            ApplyError::IndexOutOfRange {
                position,
                row,
                logits_rows,
                mask_rows,
            } => write!(
                f,
                "index list entry {position} names row {row}, but there are {logits_rows} logits \
                 rows and {mask_rows} bitmask rows"
            ),
            ApplyError::MaskTooNarrow {
                vocab_size,
                mask_bits,
            } => write!(
                f,
                "vocabulary of {vocab_size} tokens does not fit a bitmask row of {mask_bits} bits"
            ),
            ApplyError::LogitsTooNarrow {
                vocab_size,
                row_len,
            } => write!(
                f,
                "vocabulary of {vocab_size} tokens is wider than a logits row of {row_len}"
            ),
            ApplyError::TooManyRows { rows, max } => {
                write!(f, "{rows} rows to touch, at most {max} per launch")
            }
        }
    }
}

impl std::error::Error for ApplyError {}

/// Shapes and options of one apply call.
///
/// Logits are `rows × row_len` values, row-major; the bitmask is `rows × row_words` u32 words
/// (bit `t % 32` of word `t / 32` set = token `t` allowed). For every touched row `r`, logit
/// `t` of row `r` becomes `-inf` unless `t < vocab_size` and bit `t` of bitmask row `r` is set.
///
/// - `vocab_size` defaults to `min(row_len, 32 × row_words)` (xgrammar's detection); given, it
///   must fit both. Bits of the bitmask at or past it are ignored (as if 0), and logits columns
///   at or past it are masked (padding columns of the model's head, a row wider than the mask).
/// - Without an index list every row is touched and the logits and the bitmask must have the
///   same number of rows. With one, only the rows it names are touched, each reading the bitmask
///   row of the same number; the two batches may then differ in size. A row named twice is
///   simply masked twice (masking is idempotent).
///
/// # Example
///
/// ```
/// use formwork::gpu::{apply_bitmask, ApplyConfig};
///
/// // Two rows of 40 logits, masks of 2 words (64 bits) per row, vocabulary of 36 tokens.
/// let mut logits = vec![0.0f32; 80];
/// let mask = [0b101, 0, u32::MAX, u32::MAX];
/// let config = ApplyConfig::new(40, 2).vocab_size(36).indices(&[1]);
/// apply_bitmask(&mut logits, &mask, &config).unwrap();
/// assert!(logits[..40].iter().all(|&x| x == 0.0)); // row 0 untouched
/// assert!(logits[40..76].iter().all(|&x| x == 0.0)); // row 1: tokens 0..36 allowed
/// assert!(logits[76..].iter().all(|&x| x == f32::NEG_INFINITY)); // past the vocabulary
/// ```
#[derive(Clone, Copy, Debug)]
pub struct ApplyConfig<'a> {
    row_len: usize,
    row_words: usize,
    vocab_size: Option<usize>,
    indices: Option<&'a [u32]>,
}

impl<'a> ApplyConfig<'a> {
    /// Logits rows of `row_len` values, bitmask rows of `row_words` words; every row touched.
    pub fn new(row_len: usize, row_words: usize) -> ApplyConfig<'a> {
        ApplyConfig {
            row_len,
            row_words,
            vocab_size: None,
            indices: None,
        }
    }

    /// The real vocabulary size: tokens at or past it are masked whatever the bitmask says.
    pub fn vocab_size(mut self, vocab_size: usize) -> ApplyConfig<'a> {
        self.vocab_size = Some(vocab_size);
        self
    }

    /// Touch only these rows (e.g. the constrained requests of a mixed batch).
    pub fn indices(mut self, indices: &'a [u32]) -> ApplyConfig<'a> {
        self.indices = Some(indices);
        self
    }

    /// Checks the shapes against buffers of `logits_len` values and `mask_len` words.
    pub fn plan(&self, logits_len: usize, mask_len: usize) -> Result<ApplyPlan<'a>, ApplyError> {
        let rows_of = |len: usize, width: usize| match (len, width) {
            (0, _) => Some(0),
            (_, 0) => None,
            _ => (len % width == 0).then_some(len / width),
        };
        let logits_rows = rows_of(logits_len, self.row_len).ok_or(ApplyError::LogitsShape {
            len: logits_len,
            row_len: self.row_len,
        })?;
        let mask_rows = rows_of(mask_len, self.row_words).ok_or(ApplyError::MaskShape {
            len: mask_len,
            row_words: self.row_words,
        })?;
        let mask_bits = 32 * self.row_words;
        let vocab = self.vocab_size.unwrap_or(self.row_len.min(mask_bits));
        if vocab > mask_bits {
            return Err(ApplyError::MaskTooNarrow {
                vocab_size: vocab,
                mask_bits,
            });
        }
        if vocab > self.row_len {
            return Err(ApplyError::LogitsTooNarrow {
                vocab_size: vocab,
                row_len: self.row_len,
            });
        }
        match self.indices {
            None if logits_rows != mask_rows => {
                return Err(ApplyError::BatchMismatch {
                    logits_rows,
                    mask_rows,
                })
            }
            None => {}
            Some(indices) => {
                let bad = indices
                    .iter()
                    .position(|&r| r as usize >= logits_rows || r as usize >= mask_rows);
                if let Some(position) = bad {
                    return Err(ApplyError::IndexOutOfRange {
                        position,
                        row: indices[position],
                        logits_rows,
                        mask_rows,
                    });
                }
            }
        }
        Ok(ApplyPlan {
            row_len: self.row_len,
            row_words: self.row_words,
            vocab,
            logits_rows,
            indices: self.indices,
        })
    }
}

/// A checked apply call: every row and word it names exists.
#[derive(Clone, Copy, Debug)]
pub struct ApplyPlan<'a> {
    row_len: usize,
    row_words: usize,
    vocab: usize,
    logits_rows: usize,
    indices: Option<&'a [u32]>,
}

impl ApplyPlan<'_> {
    /// Logits per row.
    pub fn row_len(&self) -> usize {
        self.row_len
    }

    /// Words per bitmask row.
    pub fn row_words(&self) -> usize {
        self.row_words
    }

    /// The vocabulary size in force (tokens at or past it are masked).
    pub fn vocab_size(&self) -> usize {
        self.vocab
    }

    /// The index list, if one was given.
    pub fn indices(&self) -> Option<&[u32]> {
        self.indices
    }

    /// Number of rows touched (the index list's length, or every row).
    pub fn touched(&self) -> usize {
        self.indices.map_or(self.logits_rows, <[u32]>::len)
    }

    /// The `i`-th touched row: the row of the logits and of the bitmask it reads.
    pub fn row(&self, i: usize) -> usize {
        self.indices.map_or(i, |idx| idx[i] as usize)
    }

    /// Which of logits `32 w .. 32 w + 32` of a row survive (bit `j` set = logit `32 w + j`
    /// kept), given that row's bitmask words. The CUDA kernel computes exactly this.
    #[inline]
    pub fn keep_bits(&self, mask_row: &[u32], w: usize) -> u32 {
        let start = 32 * w;
        if start >= self.vocab {
            return 0;
        }
        // start < vocab <= 32 × row_words, so word w exists.
        match self.vocab - start {
            valid @ 1..32 => mask_row[w] & ((1u32 << valid) - 1),
            _ => mask_row[w],
        }
    }

    /// Is logit `t` of the row with these bitmask words set to `-inf`?
    pub fn is_masked(&self, mask_row: &[u32], t: usize) -> bool {
        self.keep_bits(mask_row, t / 32) & (1 << (t % 32)) == 0
    }
}
