//! The operator backend's [`Matcher`].

use std::sync::Arc;

use super::cursor::{Threads, Walker, MAX_THREADS};
use super::leaf::{Unit, SPECIAL_BASE};
use super::masks::{leaf_of, Runtime};
use super::program::Program;
use crate::base::bitmask::set_bit;
use crate::base::token::TokenId;
use crate::limits::{LimitExceeded, LimitKind};
use crate::matcher::{rollback_to, MatchError, MatchErrorKind, Matcher};
use crate::vocab::TokenKind;

/// Longest forced stretch computed for jump-forward.
const MAX_FORCED: usize = 4096;

/// Follows one operator program token by token.
///
/// State is the cursor (usually one thread of a few frames) plus one snapshot per consumed
/// token for `rollback`. Masks come from the runtime's global cache.
///
/// # Example
///
/// ```
/// use formwork::ops::{RegexCompiler, Runtime, OpsMatcher};
/// use formwork::vocab::Vocab;
/// use formwork::Matcher;
///
/// let vocab = Vocab::from_token_bytes(
///     vec![b"1".to_vec(), b"2".to_vec(), b".".to_vec(), b"12".to_vec(), b"</s>".to_vec()],
///     &[4], &[4],
/// ).unwrap();
/// let runtime = Runtime::new(vocab, 1 << 20);
/// let program = RegexCompiler::new().compile(r"\d+(\.\d+)*").unwrap();
/// let mut m = OpsMatcher::new(runtime, program);
/// let mut mask = vec![0u32; 1];
/// m.fill_mask(&mut mask).unwrap();
/// assert_eq!(mask[0], 0b01011); // "1", "2", "12"; not "." nor EOS
/// m.consume(3).unwrap();
/// m.consume(2).unwrap();
/// assert!(!m.is_accepting());
/// assert!(m.consume(2).is_err()); // ".." is rejected, state unchanged
/// m.consume(0).unwrap();
/// assert!(m.is_accepting());
/// m.consume(4).unwrap(); // EOS
/// assert!(m.is_terminated());
/// ```
/// Cloning is cheap (the program and runtime are shared): a fork for beam search or
/// speculative decoding.
#[derive(Clone)]
pub struct OpsMatcher {
    runtime: Arc<Runtime>,
    program: Arc<Program>,
    threads: Threads,
    history: Vec<Threads>,
    /// EOS tokens consumed: the last `eos` steps of the history (more than one when EOS is
    /// consumed again, as the mask then allows and the Earley matcher counts).
    eos: usize,
    scratch: Threads,
}

impl std::fmt::Debug for OpsMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpsMatcher")
            .field("threads", &self.threads.len())
            .field("consumed", &self.history.len())
            .field("eos", &self.eos)
            .finish()
    }
}

impl OpsMatcher {
    /// A matcher at the start of `program`.
    pub fn new(runtime: Arc<Runtime>, program: Arc<Program>) -> OpsMatcher {
        let threads = Walker::new(&program).initial();
        OpsMatcher {
            runtime,
            program,
            threads,
            history: Vec::new(),
            eos: 0,
            scratch: Threads::new(),
        }
    }

    /// Number of readings of the input the cursor holds (1 for a deterministic program).
    pub fn num_threads(&self) -> usize {
        self.threads.len()
    }

    fn reject(&self, token: TokenId, at_byte: usize) -> MatchError {
        MatchError::new(MatchErrorKind::Rejected {
            token,
            step: self.history.len(),
            at_byte,
        })
    }

    /// Steps `units` on a copy of the cursor: the new threads, or the index of the failing unit.
    fn advance(
        program: &Program,
        threads: &Threads,
        units: impl Iterator<Item = u32>,
        scratch: &mut Threads,
    ) -> Result<Threads, Result<usize, MatchError>> {
        let walker = Walker::new(program);
        let mut threads = threads.clone();
        for (i, u) in units.enumerate() {
            if !walker.step(&mut threads, u, scratch) {
                return Err(Ok(i));
            }
            if threads.len() > MAX_THREADS {
                return Err(Err(MatchError::new(MatchErrorKind::Limit(LimitExceeded {
                    kind: LimitKind::Readings,
                    value: threads.len() as u64,
                    max: MAX_THREADS as u64,
                }))));
            }
        }
        Ok(threads)
    }

    /// The forced units from the current state, and whether the stretch reaches the end of the
    /// program with nothing else possible.
    fn forced_units(&self) -> (Vec<u32>, bool) {
        let walker = Walker::new(&self.program);
        let mut threads = self.threads.clone();
        let mut scratch = Threads::new();
        let mut units = Vec::new();
        while units.len() < MAX_FORCED {
            if threads.iter().any(|t| t.is_end()) {
                return (units, threads.len() == 1);
            }
            let mut forced = threads
                .iter()
                .map(|t| leaf_of(&walker, t.top().op).forced_unit(t.top().state));
            let Some(Some(u)) = forced.next() else { break };
            if !forced.all(|f| f == Some(u)) || !walker.step(&mut threads, u, &mut scratch) {
                break;
            }
            units.push(u);
        }
        (units, false)
    }
}

impl Matcher for OpsMatcher {
    fn fill_mask(&mut self, out: &mut [u32]) -> Result<(), MatchError> {
        let vocab = &self.runtime.vocab;
        if out.len() != vocab.mask_words() {
            return Err(MatchError::new(MatchErrorKind::MaskSize {
                expected: vocab.mask_words(),
                got: out.len(),
            }));
        }
        if self.eos > 0 {
            out.fill(0);
            vocab.eos_tokens().iter().for_each(|&t| set_bit(out, t));
            return Ok(());
        }
        self.runtime
            .fill(&Walker::new(&self.program), &self.threads, out);
        Ok(())
    }

    fn consume(&mut self, token: TokenId) -> Result<(), MatchError> {
        let vocab = &self.runtime.vocab;
        let kind = vocab.kind(token).ok_or_else(|| {
            MatchError::new(MatchErrorKind::UnknownToken {
                token,
                mask_width: vocab.mask_width(),
            })
        })?;
        if self.eos > 0 {
            if !vocab.is_eos(token) {
                return Err(MatchError::new(MatchErrorKind::Terminated));
            }
            self.history.push(self.threads.clone());
            self.eos += 1;
            return Ok(());
        }
        let (program, threads, scratch) = (&self.program, &self.threads, &mut self.scratch);
        let stepped = match kind {
            TokenKind::Text => {
                let bytes = vocab.token_bytes(token).iter().map(|&b| b as u32);
                Self::advance(program, threads, bytes, scratch)
            }
            TokenKind::Special => Self::advance(
                program,
                threads,
                std::iter::once(SPECIAL_BASE + token),
                scratch,
            ),
            TokenKind::Unused => Err(Ok(0)),
        };
        match stepped {
            Ok(threads) => {
                let before = std::mem::replace(&mut self.threads, threads);
                self.history.push(before);
                Ok(())
            }
            // A special token the program does not name here may still end the sequence.
            Err(Ok(_)) if vocab.is_eos(token) && self.is_accepting() => {
                self.history.push(self.threads.clone());
                self.eos = 1;
                Ok(())
            }
            Err(Ok(at_byte)) => Err(self.reject(token, at_byte)),
            Err(Err(limit)) => Err(limit),
        }
    }

    fn rollback(&mut self, n: usize) -> Result<(), MatchError> {
        let Some(keep) = rollback_to(n, self.history.len())? else {
            return Ok(());
        };
        self.threads = self.history.drain(keep..).next().expect("n >= 1 snapshots");
        self.eos = self.eos.saturating_sub(n);
        Ok(())
    }

    fn is_accepting(&self) -> bool {
        self.threads.iter().any(|t| t.is_end())
    }

    fn is_terminated(&self) -> bool {
        self.eos > 0
    }

    fn forced_bytes(&self) -> Vec<u8> {
        if self.eos > 0 {
            return Vec::new();
        }
        self.forced_units()
            .0
            .into_iter()
            .take_while(|&u| u < SPECIAL_BASE)
            .map(|u| u as u8)
            .collect()
    }

    fn forced_tokens(&self) -> Vec<TokenId> {
        if self.eos > 0 {
            return Vec::new();
        }
        let (units, reaches_end) = self.forced_units();
        forced_units_to_tokens(&self.runtime.vocab, &units, reaches_end)
    }

    fn num_consumed(&self) -> usize {
        self.history.len()
    }

    fn reset(&mut self) {
        self.threads = Walker::new(&self.program).initial();
        self.history.clear();
        self.eos = 0;
    }

    fn consume_bytes(&mut self, bytes: &[u8]) -> Result<(), MatchError> {
        if self.eos > 0 {
            return Err(MatchError::new(MatchErrorKind::Terminated));
        }
        let units = bytes.iter().map(|&b| b as u32);
        match Self::advance(&self.program, &self.threads, units, &mut self.scratch) {
            Ok(threads) => {
                let before = std::mem::replace(&mut self.threads, threads);
                self.history.push(before);
                Ok(())
            }
            Err(Ok(at_byte)) => Err(MatchError::new(MatchErrorKind::TextRejected {
                step: self.history.len(),
                at_byte,
            })),
            Err(Err(limit)) => Err(limit),
        }
    }
}

/// Canonical tokens for a forced stretch of units: text runs through the tokenizer, special
/// tokens as themselves. The last text token is held back unless the stretch ends the
/// constraint or a special token follows it, because the model may merge it with what comes
/// next.
pub(crate) fn forced_units_to_tokens(
    vocab: &crate::vocab::Vocab,
    units: &[u32],
    reaches_end: bool,
) -> Vec<TokenId> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < units.len() {
        if units[i] >= SPECIAL_BASE {
            out.push(units[i] - SPECIAL_BASE);
            i += 1;
            continue;
        }
        let run_end = units[i..]
            .iter()
            .position(|&u| u >= SPECIAL_BASE)
            .map_or(units.len(), |p| i + p);
        let bytes: Vec<u8> = units[i..run_end]
            .iter()
            .map(|&u| Unit::from_code(u))
            .map(|u| match u {
                Unit::Byte(b) => b,
                Unit::Special(_) => unreachable!(),
            })
            .collect();
        let mut tokens = text_tokens(vocab, &bytes);
        if run_end == units.len() && !reaches_end {
            tokens.pop();
        }
        out.extend(tokens);
        i = run_end;
    }
    out
}

/// Tokens whose bytes are exactly `bytes`: the tokenizer's canonical encoding when it
/// round-trips (it may not, e.g. under NFC normalization or mid-UTF-8), else longest match.
fn text_tokens(vocab: &crate::vocab::Vocab, bytes: &[u8]) -> Vec<TokenId> {
    if let Ok(text) = std::str::from_utf8(bytes) {
        if let Ok(ids) = vocab.encode(text) {
            let round_trip = ids
                .iter()
                .flat_map(|&t| vocab.token_bytes(t).iter().copied());
            if round_trip.eq(bytes.iter().copied())
                && ids.iter().all(|&t| vocab.kind(t) == Some(TokenKind::Text))
            {
                return ids;
            }
        }
    }
    vocab.encode_greedy(bytes).unwrap_or_default()
}
