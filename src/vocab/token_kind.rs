//! What a token id stands for.

/// What a token id stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenKind {
    /// Ordinary text: its bytes.
    Text,
    /// A special token (`special: true`): a symbol that never matches as text.
    Special,
    /// An id inside the mask width with no token behind it; never allowed.
    Unused,
}
