//! The one API every backend implements: an inference engine asks for a mask, consumes the
//! sampled token, and may roll back or jump forward.

mod error;
pub(crate) mod json_state;
mod progress;

pub use error::{MatchError, MatchErrorKind};
pub(crate) use progress::{rollback_to, Progress};

use crate::base::token::TokenId;

/// A constraint's state during decoding.
///
/// Every backend (operator FSMs, Earley) implements it, so an inference engine drives them
/// alike. Masks are exact: a token is allowed iff the output so far followed by its bytes can
/// still be completed to a string of the constraint's language (DESIGN.md, Semantics); EOS is
/// allowed iff the output so far is in the language. Whatever a mask allows, `consume`
/// accepts.
///
/// # Limits
///
/// A matcher works under its engine's [`Limits`](crate::limits::Limits): one `fill_mask` or
/// `consume` call may spend at most `mask_work` units of work, and no position may be read in
/// more than `readings` ways at once. A limit never makes `consume` refuse a token the
/// constraint allows here (one a mask would allow): if consuming such a token reaches a limit,
/// the token is consumed and the matcher is *over its limit*. Then `fill_mask` and `consume`
/// fail with that [`MatchErrorKind::Limit`], `is_accepting` is false and nothing is forced,
/// until `rollback` (of that token, or more) or `reset`. Any other call that fails on a limit
/// changes nothing: `fill_mask` on a state whose mask costs more than the budget, or `consume`
/// of a token whose fate would (no mask of that state allowed it).
///
/// # After EOS
///
/// Once EOS is consumed, the mask allows only the EOS tokens and `consume` accepts an EOS token
/// again (counted as a step, so `rollback` undoes each); any other token is `Terminated`.
/// Either rule alone would break the contract above, and a batch that keeps stepping its
/// finished sequences (padding) always has a token to sample that is accepted.
pub trait Matcher: Send {
    /// Writes the allowed-token bitmask into `out` (`ceil(mask_width / 32)` words, every bit
    /// written). After EOS was consumed, only EOS is allowed.
    fn fill_mask(&mut self, out: &mut [u32]) -> Result<(), MatchError>;

    /// Advances by one sampled token. A rejected token is an error and changes nothing.
    fn consume(&mut self, token: TokenId) -> Result<(), MatchError>;

    /// Undoes the last `n` consumed tokens (EOS included). Only the last
    /// [`Limits::history`](crate::limits::Limits::history) tokens can be undone; past them
    /// the error is `RollbackTooFar` with the number that can.
    fn rollback(&mut self, n: usize) -> Result<(), MatchError>;

    /// True if the output so far is a complete string of the language (EOS is allowed).
    fn is_accepting(&self) -> bool;

    /// True once EOS was consumed.
    fn is_terminated(&self) -> bool;

    /// The bytes every continuation must start with (empty when the next byte is not forced).
    fn forced_bytes(&self) -> Vec<u8>;

    /// Canonical tokens of the forced stretch, for jump-forward decoding: consuming them is
    /// always allowed. A forced stretch that ends before the constraint's end keeps its last
    /// token back, since the model may merge it with the free text that follows.
    fn forced_tokens(&self) -> Vec<TokenId>;

    /// Number of tokens consumed since the start or the last `reset`, EOS included
    /// (`rollback` can undo the last [`Limits::history`](crate::limits::Limits::history) of
    /// them).
    fn num_consumed(&self) -> usize;

    /// Back to the initial state.
    fn reset(&mut self);

    /// Consumes tokens in order; stops at the first error, after which the tokens before it
    /// remain consumed.
    fn consume_all(&mut self, tokens: &[TokenId]) -> Result<(), MatchError> {
        tokens.iter().try_for_each(|&t| self.consume(t))
    }

    /// Advances by text that does not come from sampling (a prompt's tail, a jump-forward
    /// string): exactly as consuming any tokenization of `bytes` would, but as one step, so
    /// `rollback(1)` undoes all of it (xgrammar's `accept_string`). The bytes are text: a
    /// special token's content here is its characters, never the special token. Rejected
    /// text (`TextRejected`, with the failing byte) changes nothing.
    fn consume_bytes(&mut self, bytes: &[u8]) -> Result<(), MatchError>;

    /// How many of `tokens` (a speculative draft) would be consumed in order before the first
    /// one the constraint rejects (or one after EOS), without consuming any: the state is the
    /// same afterwards. A token that is no token of the vocabulary, or a limit reached, is
    /// that error, once the accepted tokens are undone: a draft is cut where the constraint
    /// says no, not where the matcher could not tell. Undoing them fails past the history the
    /// matcher keeps (`Limits::history`); the accepted tokens then stay consumed.
    fn validate_tokens(&mut self, tokens: &[TokenId]) -> Result<usize, MatchError> {
        let mut accepted = 0;
        let mut failed = None;
        for &t in tokens {
            match self.consume(t) {
                Ok(()) => accepted += 1,
                Err(e) => {
                    let refused = matches!(
                        e.kind(),
                        MatchErrorKind::Rejected { .. } | MatchErrorKind::Terminated
                    );
                    failed = (!refused).then_some(e);
                    break;
                }
            }
        }
        self.rollback(accepted)?;
        failed.map_or(Ok(accepted), Err)
    }
}

// Pointers to matchers are matchers, so a batch can be a slice of borrowed matchers of mixed
// backends (`&mut [&mut dyn Matcher]`) or own them (`Vec<Box<dyn Matcher>>`).
macro_rules! forward_matcher {
    ($($ptr:ty),*) => {$(
        impl<M: Matcher + ?Sized> Matcher for $ptr {
            fn fill_mask(&mut self, out: &mut [u32]) -> Result<(), MatchError> {
                (**self).fill_mask(out)
            }
            fn consume(&mut self, token: TokenId) -> Result<(), MatchError> {
                (**self).consume(token)
            }
            fn rollback(&mut self, n: usize) -> Result<(), MatchError> {
                (**self).rollback(n)
            }
            fn is_accepting(&self) -> bool {
                (**self).is_accepting()
            }
            fn is_terminated(&self) -> bool {
                (**self).is_terminated()
            }
            fn forced_bytes(&self) -> Vec<u8> {
                (**self).forced_bytes()
            }
            fn forced_tokens(&self) -> Vec<TokenId> {
                (**self).forced_tokens()
            }
            fn num_consumed(&self) -> usize {
                (**self).num_consumed()
            }
            fn reset(&mut self) {
                (**self).reset()
            }
            fn consume_all(&mut self, tokens: &[TokenId]) -> Result<(), MatchError> {
                (**self).consume_all(tokens)
            }
            fn consume_bytes(&mut self, bytes: &[u8]) -> Result<(), MatchError> {
                (**self).consume_bytes(bytes)
            }
            fn validate_tokens(&mut self, tokens: &[TokenId]) -> Result<usize, MatchError> {
                (**self).validate_tokens(tokens)
            }
        }
    )*};
}

forward_matcher!(&mut M, Box<M>);
