//! The step bookkeeping every backend's matcher keeps beside its parse state, and the checks
//! the [`Matcher`](super::Matcher) contract puts at the start of `fill_mask`, `consume` and
//! `consume_bytes` (over its limit, after EOS), so that each backend states them once.

use super::{MatchError, MatchErrorKind};
use crate::base::bitmask::set_bit;
use crate::base::token::TokenId;
use crate::limits::{Budget, LimitExceeded, Limits};
use crate::vocab::{TokenKind, Vocab};

/// What a matcher counts besides its parse state: the steps taken, the EOS tokens among the
/// last ones, the limit a consumed token reached and whether the current state was masked.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Progress {
    /// Tokens consumed since the start (the history may hold fewer).
    consumed: usize,
    /// EOS tokens consumed (the last ones).
    eos: usize,
    /// The limit a consumed token reached (see [`Matcher`](super::Matcher)): every call but
    /// `rollback` and `reset` fails with it.
    over_limit: Option<LimitExceeded>,
    /// The last `fill_mask` succeeded on the current state.
    masked: bool,
}

impl Progress {
    /// Tokens consumed since the start, EOS included.
    pub fn consumed(&self) -> usize {
        self.consumed
    }

    /// EOS was consumed.
    pub fn is_terminated(&self) -> bool {
        self.eos > 0
    }

    /// Neither terminated nor over a limit: the parse state is the one to read for what is
    /// forced next.
    pub fn is_live(&self) -> bool {
        self.eos == 0 && self.over_limit.is_none()
    }

    /// The output so far is complete: EOS was consumed, or the parse state `parse_accepts`
    /// (asked only when it matters); never while over a limit.
    pub fn is_accepting(&self, parse_accepts: impl FnOnce() -> bool) -> bool {
        self.over_limit.is_none() && (self.eos > 0 || parse_accepts())
    }

    /// The start of `fill_mask`: a buffer of the wrong size and a matcher over its limit are
    /// errors, and once EOS is consumed the mask allows EOS alone. `Ok(true)` when `out`
    /// already holds the whole mask, `Ok(false)` when the backend must fill it.
    pub fn fill_mask_prologue(&self, out: &mut [u32], vocab: &Vocab) -> Result<bool, MatchError> {
        if out.len() != vocab.mask_words() {
            return Err(MatchError::new(MatchErrorKind::MaskSize {
                expected: vocab.mask_words(),
                got: out.len(),
            }));
        }
        self.check_limit()?;
        if self.is_terminated() {
            out.fill(0);
            vocab.eos_tokens().iter().for_each(|&t| set_bit(out, t));
        }
        Ok(self.is_terminated())
    }

    /// The start of `consume`: an id outside the vocabulary and a matcher over its limit are
    /// errors, and after EOS only EOS may follow. `Ok(None)` when `token` is one more EOS
    /// after termination (the backend records the step and calls [`Progress::ended`]),
    /// otherwise the token's kind for the backend to step through.
    pub fn consume_prologue(
        &self,
        vocab: &Vocab,
        token: TokenId,
    ) -> Result<Option<TokenKind>, MatchError> {
        let kind = vocab.kind(token).ok_or_else(|| {
            MatchError::new(MatchErrorKind::UnknownToken {
                token,
                mask_width: vocab.mask_width(),
            })
        })?;
        self.check_limit()?;
        match self.is_terminated() {
            false => Ok(Some(kind)),
            true if vocab.is_eos(token) => Ok(None),
            true => Err(MatchError::new(MatchErrorKind::Terminated)),
        }
    }

    /// The start of `consume_bytes`: over a limit or after EOS, no text is taken.
    pub fn text_prologue(&self) -> Result<(), MatchError> {
        self.check_limit()?;
        match self.is_terminated() {
            true => Err(MatchError::new(MatchErrorKind::Terminated)),
            false => Ok(()),
        }
    }

    fn check_limit(&self) -> Result<(), MatchError> {
        self.over_limit.map_or(Ok(()), |e| Err(e.into()))
    }

    /// The error for `token` failing `at_byte` of its bytes at this step.
    pub fn rejected(&self, token: TokenId, at_byte: usize) -> MatchError {
        MatchError::new(MatchErrorKind::Rejected {
            token,
            step: self.consumed,
            at_byte,
        })
    }

    /// The error for text of `consume_bytes` failing at `at_byte`.
    pub fn text_rejected(&self, at_byte: usize) -> MatchError {
        MatchError::new(MatchErrorKind::TextRejected {
            step: self.consumed,
            at_byte,
        })
    }

    /// The budget for asking whether the current state's mask allows a token: unmetered
    /// once a mask of this very state succeeded (the token is then known to fit).
    pub fn mask_check_budget(&self, limits: &Limits) -> Budget {
        match self.masked {
            true => Budget::unmetered(limits),
            false => limits.budget(),
        }
    }

    /// A mask of the current state succeeded.
    pub fn masked(&mut self) {
        self.masked = true;
    }

    /// A token (or a text) was consumed.
    pub fn stepped(&mut self) {
        self.consumed += 1;
        self.masked = false;
    }

    /// The step just taken was an EOS that ends (or follows the end of) the output.
    pub fn ended(&mut self) {
        self.eos += 1;
    }

    /// The step just taken reached `limit` (see [`Matcher`](super::Matcher), Limits).
    pub fn over(&mut self, limit: LimitExceeded) {
        self.over_limit = Some(limit);
    }

    /// The last `n` steps were undone: a limit they reached goes with them.
    pub fn rolled_back(&mut self, n: usize) {
        self.consumed -= n;
        self.eos -= n.min(self.eos);
        self.over_limit = None;
        self.masked = false;
    }
}

/// The history length to keep when rolling back `n` of `available` steps: `None` when there
/// is nothing to undo, an error (state untouched) when `n` reaches past the start.
pub(crate) fn rollback_to(n: usize, available: usize) -> Result<Option<usize>, MatchError> {
    match n {
        0 => Ok(None),
        _ if n > available => Err(MatchError::new(MatchErrorKind::RollbackTooFar {
            requested: n,
            available,
        })),
        _ => Ok(Some(available - n)),
    }
}
