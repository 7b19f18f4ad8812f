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

use crate::base::bitmask::clear_bit;
use crate::base::token::TokenId;
use crate::limits::{Deadline, LimitExceeded};
use crate::vocab::{Subtree, TrieStep, TrieVisitor};

/// No transition, in [`LengthBound::new`]'s table.
pub(crate) const DEAD: u32 = u32::MAX;

/// The largest Unicode scalar value.
const MAX_CHAR: u32 = 0x10_FFFF;

/// A pattern's automaton over characters with the string's length bounds.
#[derive(Debug)]
pub(crate) struct LengthBound {
    /// A sorted partition of the characters (code points) into ranges no transition tells
    /// apart.
    atoms: Vec<(u32, u32)>,
    /// `next[q * atoms.len() + a]`, or [`DEAD`].
    next: Vec<u32>,
    accept: Vec<bool>,
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

    /// From a DFA over characters (its atoms as code point ranges, `next` and `accept` laid out
    /// as in [`LengthBound`]'s fields) and the bounds; work in the product of its edges and
    /// `max`, against `deadline`.
    pub fn new(
        atoms: Vec<(u32, u32)>,
        next: Vec<u32>,
        accept: Vec<bool>,
        min: u32,
        max: u32,
        deadline: &Deadline,
    ) -> Result<LengthBound, LimitExceeded> {
        let states = accept.len();
        let width = atoms.len();
        // Predecessors of each state, each once.
        let mut preds: Vec<Vec<u32>> = vec![Vec::new(); states];
        for q in 0..states {
            let mut targets: Vec<u32> = next[q * width..(q + 1) * width]
                .iter()
                .copied()
                .filter(|&t| t != DEAD)
                .collect();
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
        let mut level: Vec<u32> = (0..states as u32).filter(|&q| accept[q as usize]).collect();
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
            atoms,
            next,
            accept,
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
        self.accept[q as usize] && self.min <= n && n <= self.max
    }

    /// The state after character `c` from `q`.
    fn step(&self, q: u32, c: u32) -> u32 {
        let a = self.atoms.partition_point(|&(_, hi)| hi < c);
        match self.atoms.get(a) {
            Some(&(lo, _)) if lo <= c => self.next[q as usize * self.atoms.len() + a],
            _ => DEAD,
        }
    }

    /// Does some character of `ranges` lead from `q` to a state viable after `n + 1`?
    fn viable_through(&self, q: u32, n: u32, ranges: &[(u32, u32)]) -> bool {
        let width = self.atoms.len();
        ranges.iter().any(|&(lo, hi)| {
            let first = self.atoms.partition_point(|&(_, end)| end < lo);
            self.atoms[first..]
                .iter()
                .take_while(|&&(start, _)| start <= hi)
                .enumerate()
                .any(|(k, _)| {
                    let t = self.next[q as usize * width + first + k];
                    t != DEAD && self.viable(t, n + 1)
                })
        })
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

/// A character split across bytes: what is read of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pending {
    None,
    /// A UTF-8 sequence: the code point's bits so far, the continuation bytes left, and the
    /// least code point of its length (shorter ones are overlong: no character).
    Utf8 {
        bits: u32,
        left: u8,
        least: u32,
    },
    /// `\`.
    Escape,
    /// `\u` and `digits` hex digits of `unit`; after a high surrogate `high` (0: none).
    Hex {
        unit: u32,
        digits: u8,
        high: u32,
    },
    /// A high surrogate, waiting for its low one's `\` (`backslash` false) or `u`.
    Low {
        high: u32,
        backslash: bool,
    },
}

/// The count of one string open at a bounded place: the bound's number, the pattern
/// automaton's state and the characters read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Count {
    pub bound: u32,
    q: u32,
    pub n: u32,
    pending: Pending,
}

impl Count {
    /// At the start of a string held to bound number `bound`.
    pub fn new(bound: u32) -> Count {
        Count {
            bound,
            q: 0,
            n: 0,
            pending: Pending::None,
        }
    }

    /// Reads byte `b` of the string's raw content, or its closing quote.
    pub fn read(&mut self, b: u8, bound: &LengthBound) -> Read {
        let done = match (self.pending, b) {
            (Pending::None, b'"') => {
                return match bound.closes(self.q, self.n) {
                    true => Read::Closed,
                    false => Read::Refused,
                }
            }
            (Pending::None, b'\\') => self.wait(Pending::Escape),
            (Pending::None, 0..=0x7F) => Some(b as u32),
            (Pending::None, 0xC0..=0xDF) => self.wait(utf8(b & 0x1F, 1, 0x80)),
            (Pending::None, 0xE0..=0xEF) => self.wait(utf8(b & 0x0F, 2, 0x800)),
            (Pending::None, 0xF0..=0xF7) => self.wait(utf8(b & 0x07, 3, 0x1_0000)),
            (Pending::Utf8 { bits, left, least }, 0x80..=0xBF) => {
                let bits = bits << 6 | (b & 0x3F) as u32;
                match left {
                    1 => Some(bits),
                    _ => self.wait(Pending::Utf8 {
                        bits,
                        left: left - 1,
                        least,
                    }),
                }
            }
            (Pending::Escape, b'u') => self.wait(hex(0)),
            (Pending::Escape, _) => short_escape(b),
            (Pending::Hex { unit, digits, high }, _) => match (b as char).to_digit(16) {
                Some(d) => self.hex_digit(unit << 4 | d, digits + 1, high),
                None => return Read::Refused,
            },
            (Pending::Low { high, backslash }, _) => match (backslash, b) {
                (false, b'\\') => self.wait(Pending::Low {
                    high,
                    backslash: true,
                }),
                (true, b'u') => self.wait(hex(high)),
                _ => return Read::Refused,
            },
            _ => return Read::Refused,
        };
        if let Some(c) = done {
            self.pending = Pending::None;
            self.q = bound.step(self.q, c);
            self.n += 1;
            if self.q == DEAD {
                return Read::Refused;
            }
        }
        let viable = match self.candidates() {
            None => bound.viable(self.q, self.n),
            Some(ranges) => bound.viable_through(self.q, self.n, &ranges.0[..ranges.1]),
        };
        match viable {
            true => Read::Open,
            false => Read::Refused,
        }
    }

    /// Waits for more bytes of the character (`None`: none completed).
    fn wait(&mut self, pending: Pending) -> Option<u32> {
        self.pending = pending;
        None
    }

    /// The `digits`-th hex digit of a `\u` escape read (`unit` so far).
    fn hex_digit(&mut self, unit: u32, digits: u8, high: u32) -> Option<u32> {
        if digits < 4 {
            return self.wait(Pending::Hex { unit, digits, high });
        }
        match (high, unit) {
            (0, 0xD800..=0xDBFF) => self.wait(Pending::Low {
                high: unit,
                backslash: false,
            }),
            (0, 0xDC00..=0xDFFF) => Some(DEAD),
            (0, _) => Some(unit),
            (_, 0xDC00..=0xDFFF) => Some(pair(high, unit)),
            _ => Some(DEAD),
        }
    }

    /// The characters a pending one may still become (`None`: nothing pending), as up to
    /// three code point ranges and how many there are.
    fn candidates(&self) -> Option<([(u32, u32); 3], usize)> {
        let mut out = [(0, 0); 3];
        let mut len = 0;
        let mut push = |lo: u32, hi: u32| {
            if lo <= hi {
                out[len] = (lo, hi);
                len += 1;
            }
        };
        match self.pending {
            Pending::None => return None,
            Pending::Utf8 { bits, left, least } => {
                // A lead byte `E0` or `F0` (and `F0 80`..`F0 8F`) spans overlong code points
                // too: they are no characters, and may be viable where the true ones are not.
                let lo = (bits << (6 * left as u32)).max(least);
                let hi = (lo | ((1 << (6 * left as u32)) - 1)).min(MAX_CHAR);
                push(lo, hi.min(0xD7FF));
                push(lo.max(0xE000), hi);
            }
            Pending::Escape => {
                push(0, 0xD7FF);
                push(0xE000, MAX_CHAR);
            }
            Pending::Hex { unit, digits, high } => {
                let span = 1u32 << (4 * (4 - digits as u32));
                let (lo, hi) = (unit * span, unit * span + span - 1);
                if high != 0 {
                    let (a, b) = (lo.max(0xDC00), hi.min(0xDFFF));
                    if a <= b {
                        push(pair(high, a), pair(high, b));
                    }
                } else {
                    push(lo, hi.min(0xD7FF));
                    push(lo.max(0xE000), hi);
                    let (a, b) = (lo.max(0xD800), hi.min(0xDBFF));
                    if a <= b {
                        push(pair(a, 0xDC00), pair(b, 0xDFFF));
                    }
                }
            }
            Pending::Low { high, .. } => push(pair(high, 0xDC00), pair(high, 0xDFFF)),
        }
        Some((out, len))
    }
}

fn utf8(bits: u8, left: u8, least: u32) -> Pending {
    Pending::Utf8 {
        bits: bits as u32,
        left,
        least,
    }
}

fn hex(high: u32) -> Pending {
    Pending::Hex {
        unit: 0,
        digits: 0,
        high,
    }
}

/// The character of a surrogate pair.
fn pair(high: u32, low: u32) -> u32 {
    0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
}

/// The character of a short escape's letter ([`DEAD`] for no escape).
fn short_escape(letter: u8) -> Option<u32> {
    Some(match letter {
        b'"' | b'\\' | b'/' => letter as u32,
        b'b' => 0x08,
        b'f' => 0x0C,
        b'n' => 0x0A,
        b'r' => 0x0D,
        b't' => 0x09,
        _ => DEAD,
    })
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
