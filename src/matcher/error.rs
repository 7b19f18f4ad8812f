//! Why a [`Matcher`](super::Matcher) call failed.

use std::fmt;

use crate::base::token::TokenId;
use crate::error::Location;
use crate::limits::LimitExceeded;

/// The kind of a [`MatchError`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum MatchErrorKind {
    /// The token is not allowed here; the matcher's state is unchanged.
    Rejected {
        /// The token consumed.
        token: TokenId,
        /// How many tokens had been consumed before it.
        step: usize,
        /// Byte offset inside the token where the constraint failed (0 for a special token).
        at_byte: usize,
    },
    /// The id is outside the vocabulary's mask width.
    UnknownToken {
        /// The token consumed.
        token: TokenId,
        /// The mask width of the vocabulary.
        mask_width: usize,
    },
    /// The matcher already consumed EOS.
    Terminated,
    /// `rollback(n)` asked for more tokens than were consumed, or than the history keeps
    /// ([`Limits::history`](crate::limits::Limits::history)).
    RollbackTooFar {
        /// Tokens asked for.
        requested: usize,
        /// Tokens that can be rolled back.
        available: usize,
    },
    /// The output buffer of `fill_mask` has the wrong number of words.
    MaskSize {
        /// Words expected: `ceil(mask_width / 32)`.
        expected: usize,
        /// Words given.
        got: usize,
    },
    /// A limit of [`Limits`](crate::limits::Limits) was reached (too many simultaneous
    /// readings, too much work for one call): the call changed nothing, or the matcher is
    /// over its limit (see [`Matcher`](super::Matcher), Limits).
    Limit(LimitExceeded),
    /// Text given to [`Matcher::consume_bytes`](super::Matcher::consume_bytes) leaves the language; the state is unchanged.
    TextRejected {
        /// How many steps had been consumed before the text.
        step: usize,
        /// Byte offset inside the text where the constraint failed.
        at_byte: usize,
    },
}

/// Why a [`Matcher`](super::Matcher) call failed. A failed call never changes the matcher's state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatchError {
    kind: MatchErrorKind,
    location: Location,
}

impl MatchError {
    /// An error of this kind.
    pub fn new(kind: MatchErrorKind) -> MatchError {
        MatchError {
            kind,
            location: Location::None,
        }
    }

    /// The same error placed at `location` in the grammar (a `Limit` names the rule the
    /// matcher was in).
    pub fn at(mut self, location: Location) -> MatchError {
        self.location = location;
        self
    }

    /// What went wrong.
    pub fn kind(&self) -> &MatchErrorKind {
        &self.kind
    }

    /// Where in the grammar, if known ([`Location::None`] otherwise).
    pub fn location(&self) -> &Location {
        &self.location
    }
}

/// A limit reached is a [`MatchErrorKind::Limit`] error.
impl From<LimitExceeded> for MatchError {
    fn from(exceeded: LimitExceeded) -> MatchError {
        MatchError::new(MatchErrorKind::Limit(exceeded))
    }
}

impl fmt::Display for MatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.location != Location::None {
            write!(f, "{}: ", self.location)?;
        }
        match &self.kind {
            MatchErrorKind::Rejected {
                token,
                step,
                at_byte,
            } => {
                write!(
                    f,
                    "token {token} rejected at step {step} (byte {at_byte} of the token)"
                )
            }
            MatchErrorKind::UnknownToken { token, mask_width } => {
                write!(
                    f,
                    "token id {token} is outside the vocabulary (mask width {mask_width})"
                )
            }
            MatchErrorKind::Terminated => f.write_str("the matcher has already consumed EOS"),
            MatchErrorKind::RollbackTooFar {
                requested,
                available,
            } => {
                write!(
                    f,
                    "cannot roll back {requested} tokens, only {available} (consumed and kept \
                     in the history)"
                )
            }
            MatchErrorKind::MaskSize { expected, got } => {
                write!(f, "mask buffer has {got} words, expected {expected}")
            }
            MatchErrorKind::Limit(exceeded) => write!(f, "{exceeded}"),
            MatchErrorKind::TextRejected { step, at_byte } => {
                write!(
                    f,
                    "text rejected at step {step} (byte {at_byte} of the text)"
                )
            }
        }
    }
}

/// A `Limit` error has the [`LimitExceeded`] as its source.
impl std::error::Error for MatchError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            MatchErrorKind::Limit(exceeded) => Some(exceeded),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;
    use crate::limits::{LimitKind, Limits};

    #[test]
    fn a_limit_error_has_the_limit_as_source() {
        let exceeded = Limits::new()
            .readings(4)
            .check(LimitKind::Readings, 5)
            .unwrap_err();
        let e = MatchError::new(MatchErrorKind::Limit(exceeded));
        assert_eq!(
            e.source().map(|s| s.to_string()),
            Some(exceeded.to_string())
        );
        assert!(MatchError::new(MatchErrorKind::Terminated)
            .source()
            .is_none());
    }
}
