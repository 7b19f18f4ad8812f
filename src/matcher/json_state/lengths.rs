//! Strings whose `maxLength` the matcher counts: a pattern's automaton times a length bound is
//! a product of their states (an email format with `maxLength: 1024` needs over 100k), while
//! the pattern alone is small. The grammar keeps the pattern (and `minLength`); this state
//! keeps the count.
//!
//! A prefix of the string is valid iff some completion of it is in the pattern's language with
//! `min..=max` characters. That depends only on the pattern automaton's state `q` and the
//! characters read `n`, through the lengths of the suffixes `q` accepts, so a table says it for
//! every `(q, n)` ([`LengthBound::viable`]). A character split across tokens (a UTF-8 sequence
//! or an escape not yet complete) is viable iff one of the characters it may still become is.

use super::chars::{CharTable, Decoded, Spelling, DEAD};
use crate::base::bitmask::clear_bit;
use crate::base::token::TokenId;
use crate::limits::{Deadline, LimitExceeded};
use crate::vocab::{Subtree, TrieStep, TrieVisitor};

/// A pattern's automaton over characters with the string's length bounds.
#[derive(Debug)]
pub(crate) struct LengthBound {
    pattern: CharTable,
    min: u32,
    max: u32,
    /// Words of [`Self::viable`]'s table per state.
    row: usize,
    /// Bit `n` of state `q`'s row: after `n` characters in state `q`, some completion ends the
    /// string in the language with `min..=max` characters.
    viable: Vec<u64>,
    /// Bit `n`: after `n` characters, every state is viable (one bit per length, not a
    /// count: a schema may hold many bounds of a million characters).
    all_viable: Vec<u64>,
    /// The least `n` after which some state is not viable (`max + 1` at most).
    first_unsafe: u32,
}

/// What one byte of a string's raw content did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// Still inside the string, which can still be completed.
    Open,
    /// The closing quote, of a string in the language and within the bounds.
    Closed,
    /// No completion is within the bounds, or the string cannot close here.
    Refused,
}

impl LengthBound {
    /// Bits of the tables for an automaton of `states` states and a bound of `max`
    /// characters (a row per state and one for all of them): what a caller checks against
    /// its budget before [`Self::new`].
    pub fn table_bits(states: usize, max: u64) -> u64 {
        (states as u64 + 1).saturating_mul(max.saturating_add(1))
    }

    /// From a pattern's automaton and the bounds; work in the product of its edges and `max`,
    /// against `deadline`.
    pub fn new(
        pattern: CharTable,
        min: u32,
        max: u32,
        deadline: &Deadline,
    ) -> Result<LengthBound, LimitExceeded> {
        let states = pattern.states();
        // Predecessors of each state, each once.
        let mut preds: Vec<Vec<u32>> = vec![Vec::new(); states];
        for q in 0..states {
            let mut targets: Vec<u32> = pattern.targets(q as u32).collect();
            targets.sort_unstable();
            targets.dedup();
            for t in targets {
                preds[t as usize].push(q as u32);
            }
        }
        // `lengths`: bit `l` of state `q`'s row when `q` accepts a suffix of `l` characters,
        // found length by length: the states accepting `l` characters are the predecessors of
        // those accepting `l - 1`.
        let row = (max as usize + 1).div_ceil(64);
        let mut lengths = vec![0u64; states * row];
        let mut level: Vec<u32> = (0..states as u32).filter(|&q| pattern.accepts(q)).collect();
        let mut seen = vec![u32::MAX; states];
        for l in 0..=max as usize {
            deadline.tick()?;
            for &q in &level {
                lengths[q as usize * row + l / 64] |= 1 << (l % 64);
            }
            let mut up = Vec::new();
            for &t in &level {
                for &p in &preds[t as usize] {
                    if seen[p as usize] != l as u32 {
                        seen[p as usize] = l as u32;
                        up.push(p);
                    }
                }
            }
            level = up;
        }
        // `viable(q, n)`: some length `l` of `q` with `min <= n + l <= max`, read from the
        // least length at or above each `l`.
        let mut viable = vec![0u64; states * row];
        let mut least_from = vec![u32::MAX; max as usize + 2];
        for q in 0..states {
            deadline.tick()?;
            let bits = &lengths[q * row..(q + 1) * row];
            for l in (0..=max as usize).rev() {
                least_from[l] = match bits[l / 64] >> (l % 64) & 1 {
                    1 => l as u32,
                    _ => least_from[l + 1],
                };
            }
            for n in 0..=max {
                let lo = min.saturating_sub(n) as usize;
                if least_from[lo] <= max - n {
                    viable[q * row + n as usize / 64] |= 1 << (n % 64);
                }
            }
        }
        let mut all_viable = vec![u64::MAX; row];
        for q in 0..states {
            for (all, &v) in all_viable.iter_mut().zip(&viable[q * row..(q + 1) * row]) {
                *all &= v;
            }
        }
        let first_unsafe = (0..=max)
            .find(|&n| all_viable[n as usize / 64] >> (n % 64) & 1 == 0)
            .unwrap_or(max + 1);
        Ok(LengthBound {
            pattern,
            min,
            max,
            row,
            viable,
            all_viable,
            first_unsafe,
        })
    }

    /// Is no string of the pattern within the bounds? (The start state is `0`, as in
    /// [`Count::new`].)
    pub fn admits_none(&self) -> bool {
        !self.viable(0, 0)
    }

    /// After `n` characters in state `q`, can the string still end within the bounds?
    fn viable(&self, q: u32, n: u32) -> bool {
        n <= self.max && self.viable[q as usize * self.row + n as usize / 64] >> (n % 64) & 1 == 1
    }

    /// Can the string close after `n` characters in state `q`?
    fn closes(&self, q: u32, n: u32) -> bool {
        self.pattern.accepts(q) && self.min <= n && n <= self.max
    }

    /// Can no token of at most `bytes` more bytes, from `n` characters read, leave the
    /// bounds? Closing below `min` is the grammar's to refuse (see the module).
    pub fn safe_for(&self, n: u32, bytes: usize) -> bool {
        let reach = n as u64 + bytes as u64 + 1;
        if reach > self.max as u64 {
            return false;
        }
        // Every length from `n` through `reach` viable in every state, a word at a time.
        let (lo, hi) = (n as usize, reach as usize);
        (lo / 64..=hi / 64).all(|w| {
            let from = if w == lo / 64 { lo % 64 } else { 0 };
            let to = if w == hi / 64 { hi % 64 } else { 63 };
            let wanted = (u64::MAX >> (63 - to)) & (u64::MAX << from);
            self.all_viable[w] & wanted == wanted
        })
    }

    /// Bytes a token holding `"` may have without opening a string of this bound and leaving
    /// it (see [`Self::safe_for`]) within itself.
    pub fn safe_token_len(&self) -> usize {
        (self.first_unsafe as usize).saturating_sub(2)
    }
}

/// The count of one string open at a bounded place: the bound's number, the pattern
/// automaton's state and the characters read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Count {
    pub bound: u32,
    q: u32,
    pub n: u32,
    spelling: Spelling,
}

impl Count {
    /// At the start of a string held to bound number `bound`.
    pub fn new(bound: u32) -> Count {
        Count {
            bound,
            q: 0,
            n: 0,
            spelling: Spelling::Whole,
        }
    }

    /// Reads byte `b` of the string's raw content, or its closing quote.
    pub fn read(&mut self, b: u8, bound: &LengthBound) -> Read {
        if self.spelling == Spelling::Whole && b == b'"' {
            return match bound.closes(self.q, self.n) {
                true => Read::Closed,
                false => Read::Refused,
            };
        }
        match self.spelling.read(b) {
            Decoded::Invalid => return Read::Refused,
            Decoded::Partial => {}
            Decoded::Char(c) => {
                self.q = bound.pattern.step(self.q, c);
                self.n += 1;
                if self.q == DEAD {
                    return Read::Refused;
                }
            }
        }
        let viable = match self.spelling.candidates(false) {
            None => bound.viable(self.q, self.n),
            Some((ranges, len)) => bound
                .pattern
                .any_through(self.q, &ranges[..len], |t| bound.viable(t, self.n + 1)),
        };
        match viable {
            true => Read::Open,
            false => Read::Refused,
        }
    }
}

/// The trie walk clearing the tokens that, from a string's count, leave its bounds before
/// they close it. A subtree is skipped once no token in it can (its longest token is within
/// [`LengthBound::safe_for`]) or once the string closes: what follows is the grammar's.
pub(crate) struct LengthWalk<'a> {
    pub bound: &'a LengthBound,
    pub out: &'a mut [u32],
}

impl TrieVisitor for LengthWalk<'_> {
    type State = Count;

    fn step(
        &mut self,
        parent: &Count,
        byte: u8,
        depth: usize,
        subtree: Subtree,
    ) -> TrieStep<Count> {
        let mut count = *parent;
        match count.read(byte, self.bound) {
            Read::Refused => {
                for &t in subtree.tokens() {
                    clear_bit(self.out, t);
                }
                TrieStep::Skip
            }
            Read::Closed => TrieStep::Skip,
            Read::Open => {
                let rest = subtree.deepest().saturating_sub(depth);
                match self.bound.safe_for(count.n, rest) {
                    true => TrieStep::Skip,
                    false => TrieStep::Enter(count),
                }
            }
        }
    }

    fn tokens(&mut self, _: &Count, _: &[TokenId]) {}
}
