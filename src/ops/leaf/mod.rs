//! Leaf operators: the small deterministic automata at the bottom of an operator program.
//!
//! A leaf consumes *units*: a text byte (0..=255) or a special token (`SPECIAL_BASE + id`). Its
//! state is one `u32`. From a state a leaf may *exit* (with an exit index: which terminator of a
//! `Wait` matched) and/or continue; every state of a built leaf can still reach an exit, so a
//! token that stays inside a leaf is always allowed — that is what makes a leaf's mask
//! context-independent and cacheable.
//!
//! This file holds the unit, the leaf and the literal (`Write`) leaf; the table-driven leaf
//! automaton and its constructions are in `dfa`, the `Wait` leaf in `wait`.

mod dfa;
mod wait;

pub use dfa::Dfa;
pub(crate) use dfa::{dfa_from_hir, RawDfa};
pub(crate) use wait::wait_leaf;
pub use wait::Terminator;

use crate::base::token::TokenId;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::ir::StructHasher;
use crate::limits::{Deadline, LimitExceeded, LimitKind, Limits};

/// Units at or above this value are special tokens (`unit - SPECIAL_BASE` is the token id).
pub(crate) const SPECIAL_BASE: u32 = 256;
/// "No state": the transition is rejected.
pub(crate) const DEAD: u32 = u32::MAX;
/// "No exit" / "no forced unit" / "unreachable distance".
const NONE: u32 = u32::MAX;

/// One input unit of an operator program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    /// A text byte.
    Byte(u8),
    /// A special token, by id.
    Special(TokenId),
}

impl Unit {
    pub(crate) fn code(self) -> u32 {
        match self {
            Unit::Byte(b) => b as u32,
            Unit::Special(t) => SPECIAL_BASE + t,
        }
    }

    pub(crate) fn from_code(code: u32) -> Unit {
        if code < SPECIAL_BASE {
            Unit::Byte(code as u8)
        } else {
            Unit::Special(code - SPECIAL_BASE)
        }
    }
}

/// A leaf automaton.
// Leaves live behind `Arc`, one per operator: boxing the DFA would add an indirection to
// every byte step for no memory saved.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum Leaf {
    /// A forced literal (`Write`): state = position.
    Write(WriteLeaf),
    /// A table-driven DFA (regex pieces, character classes, choices, `Wait` content).
    Dfa(Dfa),
}

/// A literal of units.
#[derive(Debug)]
pub struct WriteLeaf {
    units: Box<[u32]>,
    /// `text_to_end[p]`: text bytes from position p to the end, or NONE past a special.
    text_to_end: Box<[u32]>,
    /// Hash of all the units: the leaf's structure.
    hash: u128,
    /// `state_keys[p]`: hash of the units from position p up to the first special unit
    /// (included), or to the end. Two Writes with the same such units share masks: no token
    /// gets past a special unit, so what follows it cannot change a mask. After an outline
    /// record's `<|vision_end|>`, `"\n" <|vision_start|>` has one key whatever id follows.
    state_keys: Box<[u128]>,
}

impl Leaf {
    /// A literal of units.
    pub fn write(units: &[Unit]) -> Leaf {
        let units: Box<[u32]> = units.iter().map(|u| u.code()).collect();
        let mut text_to_end = vec![0; units.len() + 1];
        for p in (0..units.len()).rev() {
            text_to_end[p] = if units[p] >= SPECIAL_BASE || text_to_end[p + 1] == NONE {
                NONE
            } else {
                text_to_end[p + 1] + 1
            };
        }
        let end = StructHasher::new(0x57).finish();
        let (mut hash, mut state_keys) = (end, vec![end; units.len() + 1]);
        for p in (0..units.len()).rev() {
            let link = |next: u128| {
                StructHasher::new(0x57)
                    .hash(next)
                    .word(units[p] as u64)
                    .finish()
            };
            hash = link(hash);
            state_keys[p] = match units[p] >= SPECIAL_BASE {
                true => link(end),
                false => link(state_keys[p + 1]),
            };
        }
        Leaf::Write(WriteLeaf {
            units,
            text_to_end: text_to_end.into(),
            hash,
            state_keys: state_keys.into(),
        })
    }

    /// `Wait`'s leaf: strings of `content` (a leaf whose exits mark where content may stop, e.g.
    /// `(?s:.)*` for any UTF-8 text) up to the first occurrence of a terminator; exit `i` means
    /// terminator `i` matched (the earlier one in the list when two end on the same byte).
    ///
    /// # Example
    ///
    /// ```
    /// use formwork::ops::leaf::Terminator;
    /// use formwork::ops::{Leaf, RegexCompiler};
    ///
    /// let text = RegexCompiler::new().leaf(r"(?s:.)*").unwrap();
    /// let wait = Leaf::wait(&text, &[Terminator::Text(b"</a>".to_vec())]).unwrap();
    /// let mut s = wait.start();
    /// for b in b"x</b></a" {
    ///     s = wait.step(s, *b as u32);
    /// }
    /// assert_eq!(wait.exit(s), None);
    /// assert_eq!(wait.exit(wait.step(s, b'>' as u32)), Some(0));
    /// ```
    pub fn wait(content: &Leaf, terminators: &[Terminator]) -> Result<Leaf, CompileError> {
        let max_states = Limits::new().get(LimitKind::AutomatonStates);
        let max_states = usize::try_from(max_states).unwrap_or(usize::MAX);
        wait_leaf(content, terminators, max_states, &Deadline::never())
    }

    /// One of `strings`, exactly (a trie-shaped DFA, built in time linear in the strings: this
    /// is how a request's set of IDs becomes a leaf). Order and duplicates do not matter.
    ///
    /// # Example
    ///
    /// ```
    /// use formwork::ops::Leaf;
    ///
    /// let ids = Leaf::choice(["1", "1.1", "2"].map(str::as_bytes)).unwrap();
    /// let run = |text: &[u8]| text.iter().try_fold(ids.start(), |s, &b| {
    ///     Some(ids.step(s, b as u32)).filter(|&n| n != u32::MAX)
    /// });
    /// assert!(run(b"1.1").is_some_and(|s| ids.exit(s).is_some()));
    /// assert!(run(b"1.").is_some_and(|s| ids.exit(s).is_none()));
    /// assert!(run(b"3").is_none());
    /// let same = Leaf::choice(["2", "1.1", "1", "2"].map(str::as_bytes)).unwrap();
    /// assert_eq!(ids.hash(), same.hash());
    /// ```
    pub fn choice<'s>(strings: impl IntoIterator<Item = &'s [u8]>) -> Result<Leaf, CompileError> {
        let mut strings: Vec<&[u8]> = strings.into_iter().collect();
        if strings.is_empty() {
            return Err(CompileError::unplaced(
                CompileErrorKind::EmptyLanguage,
                "a choice among no strings matches nothing",
            ));
        }
        strings.sort_unstable();
        strings.dedup();
        Ok(Leaf::Dfa(Dfa::trie(&strings)))
    }

    /// Structural hash: equal for leaves accepting the same way.
    pub fn hash(&self) -> u128 {
        match self {
            Leaf::Write(w) => w.hash,
            Leaf::Dfa(d) => d.hash,
        }
    }

    /// Identifies what is left of the leaf from `state` as far as text can tell: equal keys
    /// accept the same byte strings and the same next special unit, so they share cached
    /// masks (a Write by its remaining units up to the first special one, a DFA by hash and
    /// state).
    pub fn state_key(&self, state: u32) -> u128 {
        match self {
            Leaf::Write(w) => w.state_keys[state as usize],
            Leaf::Dfa(d) => StructHasher::new(0xd5)
                .hash(d.hash)
                .word(state as u64)
                .finish(),
        }
    }

    /// Initial state.
    #[inline]
    pub fn start(&self) -> u32 {
        match self {
            Leaf::Write(_) => 0,
            Leaf::Dfa(d) => d.start,
        }
    }

    /// Next state on `unit`, or `DEAD`.
    #[inline]
    pub fn step(&self, state: u32, unit: u32) -> u32 {
        match self {
            Leaf::Write(w) => {
                if w.units.get(state as usize) == Some(&unit) {
                    state + 1
                } else {
                    DEAD
                }
            }
            Leaf::Dfa(d) => d.step(state, unit),
        }
    }

    /// The exit index if the leaf may end in `state`.
    #[inline]
    pub fn exit(&self, state: u32) -> Option<u32> {
        match self {
            Leaf::Write(w) => (state as usize == w.units.len()).then_some(0),
            Leaf::Dfa(d) => {
                let e = d.exit[state as usize];
                (e != NONE).then_some(e)
            }
        }
    }

    /// True if some unit continues from `state`.
    #[inline]
    pub fn has_out(&self, state: u32) -> bool {
        match self {
            Leaf::Write(w) => (state as usize) < w.units.len(),
            Leaf::Dfa(d) => d.has_out[state as usize],
        }
    }

    /// The only unit that continues from `state`, if there is exactly one.
    pub fn forced_unit(&self, state: u32) -> Option<u32> {
        match self {
            Leaf::Write(w) => w.units.get(state as usize).copied(),
            Leaf::Dfa(d) => {
                let f = d.forced[state as usize];
                (f != NONE).then_some(f)
            }
        }
    }

    /// Fewest text bytes from `state` to an exit, or `None` if only a special token leads out.
    pub fn text_to_exit(&self, state: u32) -> Option<u32> {
        let d = match self {
            Leaf::Write(w) => w.text_to_end[state as usize],
            Leaf::Dfa(d) => d.text_to_exit[state as usize],
        };
        (d != NONE).then_some(d)
    }

    /// True if some byte string leads from a state back to it. A leaf without such a loop (a
    /// literal, a choice among IDs) reads at most its longest string, so it cannot survive
    /// every string of a token slice (all of which go on for ever).
    pub(crate) fn loops(&self) -> bool {
        match self {
            Leaf::Write(_) => false,
            Leaf::Dfa(d) => d.loops,
        }
    }

    /// Special tokens accepted from `state`.
    pub fn specials(&self, state: u32) -> Vec<TokenId> {
        match self {
            Leaf::Write(w) => match w.units.get(state as usize) {
                Some(&u) if u >= SPECIAL_BASE => vec![u - SPECIAL_BASE],
                _ => vec![],
            },
            Leaf::Dfa(d) => d
                .specials_of(state)
                .iter()
                .map(|&(u, _)| u - SPECIAL_BASE)
                .collect(),
        }
    }

    /// Number of exit indices.
    pub fn num_exits(&self) -> u32 {
        match self {
            Leaf::Write(_) => 1,
            Leaf::Dfa(d) => d.num_exits,
        }
    }

    /// Number of states.
    pub fn num_states(&self) -> usize {
        match self {
            Leaf::Write(w) => w.units.len() + 1,
            Leaf::Dfa(d) => d.exit.len(),
        }
    }

    /// Bytes its tables hold on the heap.
    pub(crate) fn heap_bytes(&self) -> usize {
        match self {
            Leaf::Write(w) => w.units.len() * (4 + 4 + 16) + 20,
            Leaf::Dfa(d) => {
                (d.table.len() + d.special_ranges.len()) * 4
                    + d.specials.len() * 8
                    + d.exit.len() * (4 + 1 + 4 + 4)
            }
        }
    }
}

/// A compile-time limit reached while building a leaf.
fn leaf_limit(e: LimitExceeded) -> CompileError {
    CompileError::over_limit(e, Location::None, "operator leaf")
}
