//! Errors of loading and using a vocabulary, and the guards that turn bad tokenizer files into
//! them.

use std::fmt;
use std::sync::Arc;

use super::config::MAX_MASK_WIDTH;

/// The kind of a [`VocabError`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum VocabErrorKind {
    /// The tokenizer file could not be read.
    Io,
    /// The file is not a tokenizer the `tokenizers` crate can load (corrupt, truncated, not JSON).
    Parse,
    /// The tokenizer's piece encoding is not one formwork can turn back into bytes.
    UnsupportedEncoding,
    /// A configuration value is inconsistent (mask width too small, unknown EOS, ...).
    Config,
    /// Text could not be tokenized.
    Encode,
}

/// An error loading or using a vocabulary. It names the file (when there is one) and what was
/// wrong; an error of the file system, gzip, JSON or the `tokenizers` crate is its source.
#[derive(Clone, Debug)]
pub struct VocabError {
    kind: VocabErrorKind,
    message: String,
    cause: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl VocabError {
    pub(crate) fn new(kind: VocabErrorKind, message: impl Into<String>) -> VocabError {
        VocabError {
            kind,
            message: message.into(),
            cause: None,
        }
    }

    /// The same error with `cause` as its [`source`](std::error::Error::source).
    pub(crate) fn caused_by(
        mut self,
        cause: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> VocabError {
        self.cause = Some(Arc::from(cause.into()));
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> &VocabErrorKind {
        &self.kind
    }
}

impl fmt::Display for VocabError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for VocabError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.cause
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// Runs a call into the `tokenizers` crate, turning a panic into an error message. The crate
/// panics on some malformed files (found by fuzzing 0.23.2: an `expect` in its decoder
/// deserializer, slice indexing while it builds BPE merges); a tokenizer file is input, so
/// its panic must be the file's typed error, not the server's end.
pub(crate) fn without_panics<T>(call: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).map_err(|panic| {
        let message = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("no message");
        format!("the tokenizers crate panicked: {message}")
    })
}

/// `Err` when `width` ids (a mask width, or a token id + 1 read from a tokenizer file) is past
/// [`MAX_MASK_WIDTH`], before anything of that size is allocated.
pub(crate) fn check_width(width: usize, source: &str, what: &str) -> Result<(), VocabError> {
    match width > MAX_MASK_WIDTH {
        true => Err(VocabError::new(
            VocabErrorKind::Config,
            format!(
                "{source}: {what} {width} is past the widest supported mask ({MAX_MASK_WIDTH} ids)"
            ),
        )),
        false => Ok(()),
    }
}
