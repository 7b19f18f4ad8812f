//! The matcher contract, checked while a matcher is driven through random operations.
//!
//! Rules (DESIGN.md, Semantics and Untrusted input; `formwork::Matcher`):
//! - whatever a mask allows, `consume` accepts (a limit acts on the mask, never only on
//!   `consume`);
//! - a token the mask refuses is rejected, and the rejection changes nothing;
//! - `rollback(n)` restores the masks seen `n` tokens earlier (and is refused past the
//!   start or the steps the history keeps), `reset` the first one, and a clone (a fork) has
//!   the masks of its original;
//! - EOS is allowed iff the matcher accepts (where the constraint cannot name EOS as a
//!   symbol); after EOS only EOS is allowed, and consuming what that mask allows succeeds;
//! - forced tokens can always be consumed;
//! - `consume_bytes` of an allowed text token's bytes succeeds and leads to the masks that
//!   consuming the token leads to (and `rollback(1)` undoes it); text it refuses changes nothing;
//! - failures are typed: a mask may fail only with a `Limit` error.
//!
//! A broken rule is a panic whose message says which, so a fuzzer reports it as a crash.

use std::sync::OnceLock;

use arbitrary::Unstructured;
use formwork::bitmask::{get_bit, iter_ones};
use formwork::vocab::TokenKind;
use formwork::{ConstraintMatcher, MatchErrorKind, Matcher, TokenId, Vocab};

/// One operation of a drive.
#[derive(Clone, Copy, Debug)]
pub enum Op {
    /// Fill the mask and consume its `n % count`-th allowed token.
    Allowed(u32),
    /// Consume an arbitrary id (allowed or not: the mask decides what must happen).
    Any(TokenId),
    /// Consume EOS if the mask allows it.
    Eos,
    /// Roll back `n` tokens (too far is an error that changes nothing).
    Rollback(u8),
    /// Back to the start.
    Reset,
    /// Continue on a clone.
    Fork,
    /// Consume the forced tokens, if any.
    Forced,
    /// On a fork, `consume_bytes` of the `n % count`-th allowed text token's bytes.
    AllowedText(u32),
    /// On a fork, `consume_bytes` of the first `len % 5` of these bytes.
    Text([u8; 4], u8),
}

/// How a drive ended, for the callers that check verdicts.
#[derive(Clone, Debug, Default)]
pub struct Drive {
    /// Bytes of the text tokens consumed on the final path (specials as their content).
    pub output: Vec<u8>,
    /// Whether the matcher accepted at the end.
    pub accepting: bool,
    /// A `Limit` error stopped the drive (a typed refusal, not a failure).
    pub limited: bool,
    /// Masks filled.
    pub masks: usize,
}

/// A matcher under observation: the masks seen at each length of the consumed path.
pub struct Checked<'v> {
    vocab: &'v Vocab,
    matcher: ConstraintMatcher,
    /// `seen[i]`: the mask after the first `i` tokens of `path`, once filled.
    seen: Vec<Option<Vec<u32>>>,
    path: Vec<TokenId>,
    /// The constraint may name EOS ids as symbols (templates, GBNF, tags): then an EOS bit
    /// in a mask does not mean the text is complete.
    eos_may_be_symbol: bool,
    /// The matcher's [`Limits::history`](formwork::Limits): how many of the last steps it
    /// keeps for rollback.
    history: usize,
    /// Steps of `path` the matcher can still roll back.
    kept: usize,
    drive: Drive,
}

/// Why a drive stops early.
enum Stop {
    Limit,
}

impl<'v> Checked<'v> {
    /// Starts observing `matcher`, fresh from its constraint.
    pub fn new(vocab: &'v Vocab, matcher: ConstraintMatcher, eos_may_be_symbol: bool) -> Self {
        Checked {
            vocab,
            matcher,
            seen: vec![None],
            path: Vec::new(),
            eos_may_be_symbol,
            history: usize::MAX,
            kept: 0,
            drive: Drive::default(),
        }
    }

    /// The matcher keeps only its last `steps` steps for rollback (its constraint was
    /// compiled under `Limits::history(steps)`): a rollback past them must be refused.
    pub fn with_history(mut self, steps: usize) -> Self {
        self.history = steps;
        self
    }

    /// Runs the operations read from `u` (at most `max_ops`), checking every rule.
    pub fn run(mut self, u: &mut Unstructured<'_>, max_ops: usize) -> Drive {
        for _ in 0..max_ops {
            let Ok(op) = op(u, self.vocab) else { break };
            if let Err(Stop::Limit) = self.apply(op) {
                self.drive.limited = true;
                break;
            }
        }
        self.finish()
    }

    /// Consumes `tokens` in order while each is allowed; returns how many were (the rest
    /// were refused by their mask, or a limit stopped the walk).
    pub fn walk(mut self, tokens: &[TokenId]) -> (usize, Drive) {
        let mut taken = 0;
        for &t in tokens {
            match self.mask() {
                Err(Stop::Limit) => {
                    self.drive.limited = true;
                    return (taken, self.finish());
                }
                Ok(mask) if get_bit(&mask, t) => {
                    if let Err(Stop::Limit) = self.consume_allowed(t) {
                        self.drive.limited = true;
                        return (taken, self.finish());
                    }
                    taken += 1;
                }
                Ok(_) => {
                    self.consume_refused(t);
                    break;
                }
            }
        }
        if taken == tokens.len() && self.mask().is_err() {
            self.drive.limited = true;
        }
        (taken, self.finish())
    }

    fn finish(mut self) -> Drive {
        self.drive.accepting = self.matcher.is_accepting();
        self.drive.output = self
            .path
            .iter()
            .filter(|&&t| !self.vocab.is_eos(t))
            .flat_map(|&t| self.vocab.token_bytes(t).to_vec())
            .collect();
        self.drive
    }

    fn apply(&mut self, op: Op) -> Result<(), Stop> {
        match op {
            Op::Allowed(n) => {
                let mask = self.mask()?;
                let allowed: Vec<u32> = iter_ones(&mask).collect();
                if !allowed.is_empty() {
                    self.consume_allowed(allowed[n as usize % allowed.len()])?;
                }
            }
            Op::Any(t) => {
                let mask = self.mask()?;
                match (t as usize) < self.vocab.mask_width() && get_bit(&mask, t) {
                    true => self.consume_allowed(t)?,
                    false => self.consume_refused(t),
                }
            }
            Op::Eos => {
                let mask = self.mask()?;
                if let Some(&eos) = self.vocab.eos_tokens().iter().find(|&&e| get_bit(&mask, e)) {
                    self.consume_allowed(eos)?;
                }
            }
            Op::Rollback(n) => self.rollback(n as usize)?,
            Op::Reset => {
                self.matcher.reset();
                self.path.clear();
                self.kept = 0;
                self.seen.truncate(1);
                self.mask()?;
            }
            Op::Fork => {
                let fork = self.matcher.clone();
                let before = self.mask()?;
                self.matcher = fork;
                let here = self.path.len();
                self.seen[here] = None;
                let after = self.mask()?;
                assert!(before == after, "a fork's mask differs from its original's");
            }
            Op::Forced => {
                let forced = self.matcher.forced_tokens();
                for t in forced {
                    let mask = self.mask()?;
                    assert!(
                        get_bit(&mask, t),
                        "forced token {t} ({}) is not in the mask after {:?}",
                        self.vocab.display_token(t),
                        self.path_text()
                    );
                    self.consume_allowed(t)?;
                }
            }
            Op::AllowedText(n) => {
                let mask = self.mask()?;
                let text: Vec<TokenId> = iter_ones(&mask)
                    .filter(|&t| self.vocab.kind(t) == Some(TokenKind::Text))
                    .collect();
                if self.matcher.is_terminated() || text.is_empty() {
                    return Ok(());
                }
                let t = text[n as usize % text.len()];
                let mut by_bytes = self.matcher.clone();
                if let Err(e) = by_bytes.consume_bytes(self.vocab.token_bytes(t)) {
                    match e.kind() {
                        MatchErrorKind::Limit(_) => return Err(Stop::Limit),
                        _ => panic!(
                            "the mask allowed token {t} ({}) after {:?} but consume_bytes of its \
                             bytes failed: {e}",
                            self.vocab.display_token(t),
                            self.path_text()
                        ),
                    }
                }
                let mut undone = by_bytes.clone();
                self.consume_allowed(t)?;
                let after_token = self.mask()?;
                let after_bytes = fill(self.vocab, &mut by_bytes).ok_or(Stop::Limit)?;
                assert!(
                    after_bytes == after_token,
                    "consume_bytes of token {t} ({}) after {:?} leads to another mask than \
                     consuming the token",
                    self.vocab.display_token(t),
                    self.path_text()
                );
                if self.history > 0 {
                    undone.rollback(1).expect("one step of text to undo");
                    let here = self.path.len() - 1;
                    assert!(
                        fill(self.vocab, &mut undone).as_ref() == self.seen[here].as_ref(),
                        "rollback(1) after consume_bytes does not restore the mask before it"
                    );
                }
            }
            Op::Text(bytes, len) => {
                let before = self.mask()?;
                let mut fork = self.matcher.clone();
                if let Err(e) = fork.consume_bytes(&bytes[..len as usize % 5]) {
                    assert!(
                        matches!(
                            e.kind(),
                            MatchErrorKind::TextRejected { .. }
                                | MatchErrorKind::Terminated
                                | MatchErrorKind::Limit(_)
                        ),
                        "consume_bytes failed with {e}"
                    );
                    assert!(
                        fill(self.vocab, &mut fork).is_none_or(|after| after == before),
                        "consume_bytes of refused text changed the mask after {:?}",
                        self.path_text()
                    );
                }
            }
        }
        Ok(())
    }

    /// The mask at the current position, checked against the one seen here before.
    fn mask(&mut self) -> Result<Vec<u32>, Stop> {
        let mut mask = vec![0u32; self.vocab.mask_words()];
        if let Err(e) = self.matcher.fill_mask(&mut mask) {
            match e.kind() {
                MatchErrorKind::Limit(_) => return Err(Stop::Limit),
                other => panic!(
                    "fill_mask failed with {other:?} after {:?}",
                    self.path_text()
                ),
            }
        }
        self.drive.masks += 1;
        let terminated = self.matcher.is_terminated();
        let eos_allowed = self.vocab.eos_tokens().iter().any(|&e| get_bit(&mask, e));
        if terminated {
            assert!(
                iter_ones(&mask).all(|t| self.vocab.is_eos(t)),
                "after EOS the mask allows more than EOS ({:?})",
                self.path_text()
            );
        } else {
            if self.matcher.is_accepting() {
                assert!(
                    eos_allowed,
                    "accepting, but EOS not allowed after {:?}",
                    self.path_text()
                );
            }
            if eos_allowed && !self.eos_may_be_symbol {
                assert!(
                    self.matcher.is_accepting(),
                    "EOS allowed but not accepting after {:?}",
                    self.path_text()
                );
            }
        }
        let here = self.path.len();
        match &self.seen[here] {
            Some(seen) => assert!(
                *seen == mask,
                "the mask after {:?} changed when it was filled again (rollback, reset, fork or a \
                 refused token lost state)",
                self.path_text()
            ),
            None => self.seen[here] = Some(mask.clone()),
        }
        Ok(mask)
    }

    fn consume_allowed(&mut self, t: TokenId) -> Result<(), Stop> {
        if self.matcher.is_terminated() && skipped("eos-after-eos") {
            return Ok(());
        }
        match self.matcher.consume(t) {
            Ok(()) => {
                self.path.push(t);
                self.kept = (self.kept + 1).min(self.history);
                self.seen.push(None);
                Ok(())
            }
            Err(e) => panic!(
                "the mask allowed token {t} ({}) after {:?} but consume failed: {e}",
                self.vocab.display_token(t),
                self.path_text()
            ),
        }
    }

    fn consume_refused(&mut self, t: TokenId) {
        match self.matcher.consume(t) {
            Ok(()) => panic!(
                "consume took token {t} ({}) that the mask refused after {:?}",
                self.vocab.display_token(t),
                self.path_text()
            ),
            Err(e) => assert!(
                matches!(
                    e.kind(),
                    MatchErrorKind::Rejected { .. }
                        | MatchErrorKind::UnknownToken { .. }
                        | MatchErrorKind::Terminated
                ),
                "a refused token gave {e}"
            ),
        }
    }

    fn rollback(&mut self, n: usize) -> Result<(), Stop> {
        let result = self.matcher.rollback(n);
        match (result, n <= self.kept) {
            (Ok(()), true) => {
                self.path.truncate(self.path.len() - n);
                self.seen.truncate(self.path.len() + 1);
                self.kept -= n;
                self.mask().map(drop)
            }
            (Err(e), false) => {
                assert!(
                    matches!(e.kind(), MatchErrorKind::RollbackTooFar { .. }),
                    "rollback({n}) past the start or the history gave {e}"
                );
                Ok(())
            }
            (Ok(()), false) => panic!(
                "rollback({n}) succeeded with {} consumed, {} kept",
                self.path.len(),
                self.kept
            ),
            (Err(e), true) => panic!(
                "rollback({n}) failed with {} consumed, {} kept: {e}",
                self.path.len(),
                self.kept
            ),
        }
    }

    fn path_text(&self) -> String {
        let bytes: Vec<u8> = self
            .path
            .iter()
            .flat_map(|&t| self.vocab.token_bytes(t).to_vec())
            .collect();
        let text = String::from_utf8_lossy(&bytes);
        let start = text.char_indices().rev().nth(80).map_or(0, |(i, _)| i);
        format!("{} tokens, ending {:?}", self.path.len(), &text[start..])
    }
}

/// The mask of a matcher beside the observed one, or `None` when a limit refused it.
fn fill(vocab: &Vocab, matcher: &mut ConstraintMatcher) -> Option<Vec<u32>> {
    let mut mask = vec![0u32; vocab.mask_words()];
    match matcher.fill_mask(&mut mask) {
        Ok(()) => Some(mask),
        Err(e) if matches!(e.kind(), MatchErrorKind::Limit(_)) => None,
        Err(e) => panic!("fill_mask failed with {e}"),
    }
}

/// Whether a fuzzing campaign set `rule` aside (`FORMWORK_FUZZ_SKIP=eos-after-eos,...`) while
/// a known bug breaking it is being fixed, so that every run does not stop at the same crash.
/// The corpus replay and the tests never set it.
fn skipped(rule: &str) -> bool {
    static SKIPPED: OnceLock<Vec<String>> = OnceLock::new();
    SKIPPED
        .get_or_init(|| {
            std::env::var("FORMWORK_FUZZ_SKIP")
                .unwrap_or_default()
                .split(',')
                .map(str::to_string)
                .collect()
        })
        .iter()
        .any(|r| r == rule)
}

fn op(u: &mut Unstructured<'_>, vocab: &Vocab) -> arbitrary::Result<Op> {
    Ok(match u.int_in_range(0..=17u8)? {
        0..=8 => Op::Allowed(u.arbitrary()?),
        9 => Op::Any(u.int_in_range(0..=vocab.mask_width() as u32 + 2)?),
        10 => Op::Eos,
        11 => Op::Rollback(u.int_in_range(0..=8)?),
        12 => Op::Reset,
        13 => Op::Fork,
        14 => Op::Forced,
        15 => Op::Rollback(u.arbitrary()?),
        16 => Op::AllowedText(u.arbitrary()?),
        _ => Op::Text(u.arbitrary()?, u.arbitrary()?),
    })
}
