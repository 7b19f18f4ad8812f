//! The operator backend's [`Matcher`].

use std::collections::VecDeque;
use std::sync::Arc;

use smallvec::SmallVec;

use super::leaf::{Unit, SPECIAL_BASE};
use super::program::Program;
use super::runtime::{leaf_of, Runtime};
use super::walker::{Frame, Thread, Threads, Walker};
use crate::base::bitmask::get_bit;
use crate::base::token::TokenId;
use crate::limits::{Budget, LimitExceeded};
use crate::matcher::{rollback_to, MatchError, Matcher, Progress};
use crate::vocab::TokenKind;

/// Longest forced stretch computed for jump-forward.
const MAX_FORCED: usize = 4096;

/// Follows one operator program token by token.
///
/// State is the cursor (usually one thread of a few frames) plus one snapshot per consumed
/// token for `rollback`, at most [`Limits::history`](crate::limits::Limits::history) of them.
/// Masks come from the runtime's global cache.
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
    history: History,
    progress: Progress,
    scratch: Threads,
}

impl std::fmt::Debug for OpsMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpsMatcher")
            .field("threads", &self.threads.len())
            .field("consumed", &self.progress.consumed())
            .field("terminated", &self.progress.is_terminated())
            .finish()
    }
}

/// Snapshots of the cursor before each consumed token, oldest first, packed into one array
/// of words (about 12 bytes per frame instead of a 100-byte inline thread), at most `cap` of
/// them.
#[derive(Clone, Debug, Default)]
struct History {
    /// Per thread: `pos, frames, (op, state, count) per frame`; per snapshot: the thread
    /// count first.
    words: Vec<u32>,
    /// Where each snapshot starts, as an offset from the first word ever pushed.
    starts: VecDeque<usize>,
    /// Offset of `words[0]` from the first word ever pushed.
    dropped: usize,
    cap: usize,
}

impl History {
    fn new(cap: usize) -> History {
        History {
            cap,
            ..History::default()
        }
    }

    fn len(&self) -> usize {
        self.starts.len()
    }

    fn push(&mut self, threads: &Threads) {
        if self.cap == 0 {
            return;
        }
        if self.starts.len() == self.cap {
            self.starts.pop_front();
            let live = self
                .starts
                .front()
                .map_or(self.dropped + self.words.len(), |&s| s);
            // Drop the words of forgotten snapshots once they are half of the array.
            if (live - self.dropped) * 2 > self.words.len() {
                self.words.drain(..live - self.dropped);
                self.dropped = live;
            }
        }
        self.starts.push_back(self.dropped + self.words.len());
        self.words.push(threads.len() as u32);
        for t in threads {
            self.words.push(t.pos);
            self.words.push(t.frames.len() as u32);
            for f in &t.frames {
                self.words.extend([f.op, f.state, f.count]);
            }
        }
    }

    /// Keeps the first `keep` snapshots and returns the one after them (the cursor before the
    /// token rolled back to). `keep < len()`.
    fn restore(&mut self, keep: usize) -> Threads {
        let at = self.starts[keep] - self.dropped;
        let mut words = self.words[at..].iter().copied();
        let mut next = || words.next().unwrap_or_default();
        let n = next();
        let threads = (0..n)
            .map(|_| {
                let pos = next();
                let frames: SmallVec<[Frame; 8]> = (0..next())
                    .map(|_| Frame {
                        op: next(),
                        state: next(),
                        count: next(),
                    })
                    .collect();
                Thread { frames, pos }
            })
            .collect();
        self.words.truncate(at);
        self.starts.truncate(keep);
        threads
    }

    fn clear(&mut self) {
        self.words.clear();
        self.starts.clear();
        self.dropped = 0;
    }
}

impl OpsMatcher {
    /// A matcher at the start of `program`.
    pub fn new(runtime: Arc<Runtime>, program: Arc<Program>) -> OpsMatcher {
        let history = History::new(runtime.limits.history_cap());
        let mut m = OpsMatcher {
            runtime,
            program,
            threads: Threads::new(),
            history,
            progress: Progress::default(),
            scratch: Threads::new(),
        };
        m.start();
        m
    }

    /// The cursor at the start of the program, nothing consumed (over its limit if the
    /// start alone has too many readings).
    fn start(&mut self) {
        self.progress = Progress::default();
        let budget = self.runtime.limits.budget();
        match Walker::new(&self.program).initial(&budget) {
            Ok(threads) => self.threads = threads,
            Err(e) => {
                self.threads = Threads::new();
                self.progress.over(e);
            }
        }
    }

    /// Number of readings of the input the cursor holds (1 for a deterministic program).
    #[cfg(feature = "internals")]
    pub fn num_threads(&self) -> usize {
        self.threads.len()
    }

    /// Steps `units` on a copy of the cursor: the new threads, or the index of the failing unit.
    fn advance(
        program: &Program,
        threads: &Threads,
        units: impl Iterator<Item = u32>,
        scratch: &mut Threads,
        budget: &Budget,
    ) -> Result<Threads, Result<usize, LimitExceeded>> {
        let walker = Walker::new(program);
        let mut threads = threads.clone();
        for (i, u) in units.enumerate() {
            match walker.step(&mut threads, u, scratch, budget) {
                Ok(true) => {}
                Ok(false) => return Err(Ok(i)),
                Err(e) => return Err(Err(e)),
            }
        }
        Ok(threads)
    }

    /// Would the mask of the current state allow `token`? Within the work budget, unless a
    /// mask was computed on this very state already (then it is known to fit).
    fn mask_allows(&self, token: TokenId) -> Result<bool, LimitExceeded> {
        let budget = self.progress.mask_check_budget(&self.runtime.limits);
        let mut mask = vec![0u32; self.runtime.vocab.mask_words()];
        let walker = Walker::new(&self.program);
        self.runtime
            .fill(&walker, &self.threads, &mut mask, &budget)?;
        Ok(get_bit(&mask, token))
    }

    /// Records a consumed token, the cursor before it going to the history.
    fn advanced(&mut self, before: &Threads) {
        self.history.push(before);
        self.progress.stepped();
    }

    /// The forced units from the current state, and whether the stretch reaches the end of the
    /// program with nothing else possible.
    fn forced_units(&self) -> (Vec<u32>, bool) {
        let walker = Walker::new(&self.program);
        let budget = self.runtime.limits.budget();
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
            if !forced.all(|f| f == Some(u))
                || walker.step(&mut threads, u, &mut scratch, &budget) != Ok(true)
            {
                break;
            }
            units.push(u);
        }
        (units, false)
    }
}

impl Matcher for OpsMatcher {
    fn fill_mask(&mut self, out: &mut [u32]) -> Result<(), MatchError> {
        if self.progress.fill_mask_prologue(out, &self.runtime.vocab)? {
            return Ok(());
        }
        let budget = self.runtime.limits.budget();
        self.runtime
            .fill(&Walker::new(&self.program), &self.threads, out, &budget)?;
        self.progress.masked();
        Ok(())
    }

    fn consume(&mut self, token: TokenId) -> Result<(), MatchError> {
        let vocab = &self.runtime.vocab;
        let Some(kind) = self.progress.consume_prologue(vocab, token)? else {
            let before = self.threads.clone();
            self.advanced(&before);
            self.progress.ended();
            return Ok(());
        };
        let budget = self.runtime.limits.budget();
        let (program, threads, scratch) = (&self.program, &self.threads, &mut self.scratch);
        let stepped = match kind {
            TokenKind::Text => {
                let bytes = vocab.token_bytes(token).iter().map(|&b| b as u32);
                Self::advance(program, threads, bytes, scratch, &budget)
            }
            TokenKind::Special => Self::advance(
                program,
                threads,
                std::iter::once(SPECIAL_BASE + token),
                scratch,
                &budget,
            ),
            TokenKind::Unused => Err(Ok(0)),
        };
        match stepped {
            Ok(threads) => {
                let before = std::mem::replace(&mut self.threads, threads);
                self.advanced(&before);
                Ok(())
            }
            // A special token the program does not name here may still end the sequence.
            Err(Ok(_)) if vocab.is_eos(token) && self.is_accepting() => {
                let before = self.threads.clone();
                self.advanced(&before);
                self.progress.ended();
                Ok(())
            }
            Err(Ok(at_byte)) => Err(self.progress.rejected(token, at_byte)),
            // A limit never refuses a token the constraint allows here: the token is consumed
            // and the matcher stays over its limit until rolled back.
            Err(Err(limit)) => match self.mask_allows(token) {
                Ok(true) => {
                    let before = self.threads.clone();
                    self.advanced(&before);
                    self.progress.over(limit);
                    Ok(())
                }
                Ok(false) => Err(limit.into()),
                Err(e) => Err(e.into()),
            },
        }
    }

    fn rollback(&mut self, n: usize) -> Result<(), MatchError> {
        let Some(keep) = rollback_to(n, self.history.len())? else {
            return Ok(());
        };
        self.threads = self.history.restore(keep);
        self.progress.rolled_back(n);
        Ok(())
    }

    fn is_accepting(&self) -> bool {
        self.progress
            .is_accepting(|| self.threads.iter().any(|t| t.is_end()))
    }

    fn is_terminated(&self) -> bool {
        self.progress.is_terminated()
    }

    fn forced_bytes(&self) -> Vec<u8> {
        if !self.progress.is_live() {
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
        if !self.progress.is_live() {
            return Vec::new();
        }
        let (units, reaches_end) = self.forced_units();
        forced_units_to_tokens(&self.runtime.vocab, &units, reaches_end)
    }

    fn num_consumed(&self) -> usize {
        self.progress.consumed()
    }

    fn reset(&mut self) {
        self.start();
        self.history.clear();
    }

    fn consume_bytes(&mut self, bytes: &[u8]) -> Result<(), MatchError> {
        self.progress.text_prologue()?;
        // Text no mask offered: a limit reached on it refuses it, changing nothing.
        let budget = self.runtime.limits.budget();
        let units = bytes.iter().map(|&b| b as u32);
        match Self::advance(
            &self.program,
            &self.threads,
            units,
            &mut self.scratch,
            &budget,
        ) {
            Ok(threads) => {
                let before = std::mem::replace(&mut self.threads, threads);
                self.advanced(&before);
                Ok(())
            }
            Err(Ok(at_byte)) => Err(self.progress.text_rejected(at_byte)),
            Err(Err(limit)) => Err(limit.into()),
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
                Unit::Special(_) => unreachable!("codes below SPECIAL_BASE are bytes"),
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
