//! The compiled form of a grammar: a flat *program* of small automata.
//!
//! Every IR rule that needs its own stack frame (recursive rules, big rules, big shared
//! sub-expressions, rules referred to from several places, the chunks of long sequences)
//! becomes a *unit*: an automaton whose edges read a byte class, read a special token, or
//! *call* another unit. Everything else is inlined into its caller's automaton, so a JSON
//! string or number is a handful of states inside its caller instead of a chain of Earley
//! items; rules that recurse only in tail position (free text around tool calls) are loops
//! inside it, not calls. Fragments are built once per continuation, so branches that end
//! alike share their ending. Unit automata are determinized where that stays small (and
//! minimized on request), so an Earley row inside a terminal-heavy region holds a single item
//! and a byte costs one table lookup.
//!
//! Counted repeats (`x{0,100000}`, `x{500,}`) are not unrolled: they become a *counted unit*, a
//! single state whose Earley items carry a repetition counter (XGrammar 2's repetition
//! compression, done exactly: the counter is part of the item, and the mask cache abstracts it
//! to its distance from the bounds, see `cache/`).
//!
//! All states of all units live in one array; transitions are over the grammar's byte classes
//! (bytes no rule distinguishes share a class), stored sparsely: per state, a bitmap of the
//! classes it has a transition on and their entries packed in class order. A state has edges
//! on a few of the grammar's classes (a property-name trie node on one or two letters of
//! dozens), and a dense row per state was most of a large grammar's compile: Kubernetes or
//! JSON Schema Store schemas compile to 100k–700k states over ~80 classes, a table of
//! 40–220 MB to clear, fill and read back (the layout, the structural hashes and the slice
//! check each walked every row).

use crate::base::byteset::ByteSet;
use crate::base::collections::FastSet;
use crate::base::token::TokenId;
use crate::error::Location;
use crate::ir::{Expr, Grammar};

/// No transition.
pub(crate) const DEAD: u32 = u32::MAX;

/// High bit of a transition entry: the rest indexes `Program::multi` (several targets).
pub(crate) const MULTI: u32 = 1 << 31;

/// `max` of a counted unit without upper bound.
pub(crate) const UNBOUNDED: u32 = u32::MAX;

/// The state ends its unit (the unit's rule is complete here).
pub(crate) const FINAL: u8 = 1;

/// The state has call edges (or is a counted state, which calls its body).
pub(crate) const CALLS: u8 = 2;

/// The state is the single state of a counted unit.
pub(crate) const COUNTED: u8 = 4;

/// The state has special-token edges.
pub(crate) const SPECIALS: u8 = 8;

/// The state has byte transitions: it can read the next byte of a text token itself.
pub(crate) const SCANS: u8 = 16;

/// One state of a unit automaton.
#[derive(Clone, Copy, Debug)]
pub(crate) struct State {
    pub unit: u32,
    pub flags: u8,
    /// Range of `Program::calls`.
    pub calls: (u32, u32),
    /// Range of `Program::special_edges`.
    pub specials: (u32, u32),
    /// Where the state's entries start in `Program::trans`.
    pub row: u32,
}

/// A call edge: predict `unit`; when it completes, continue at `ret`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Call {
    pub unit: u32,
    pub ret: u32,
}

/// Bounds of a counted unit: `body{min,max}`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counted {
    pub body: u32,
    pub min: u32,
    /// [`UNBOUNDED`] for no upper bound.
    pub max: u32,
}

/// Counter of a counted item whose bounds are ignored: it may always iterate and complete. The
/// mask cache classifies tokens against such a relaxed item (its rows repeat, so the trie walk
/// memoizes them) and checks the few tokens a real bound could affect exactly.
pub(crate) const RELAXED: u32 = u32::MAX;

impl Counted {
    /// The counter after one more iteration. Without an upper bound, counts past `min` are all
    /// alike, so they are capped there (otherwise every row would hold a new item).
    #[inline]
    pub fn inc(&self, count: u32) -> u32 {
        if count == RELAXED {
            RELAXED
        } else if self.max == UNBOUNDED {
            (count + 1).min(self.min)
        } else {
            count + 1
        }
    }

    /// May another iteration start at this count?
    #[inline]
    pub fn can_iterate(&self, count: u32) -> bool {
        count == RELAXED || self.max == UNBOUNDED || count < self.max
    }

    /// May the repetition end at this count?
    #[inline]
    pub fn complete(&self, count: u32) -> bool {
        count == RELAXED || count >= self.min
    }

    /// Iterations left before the upper bound (`None`: unbounded or relaxed).
    #[inline]
    pub fn left(&self, count: u32) -> Option<u32> {
        (count != RELAXED && self.max != UNBOUNDED).then(|| self.max - count)
    }
}

/// `Unit::start` of a unit no parse has entered yet: its automaton is not built.
pub(crate) const UNBUILT: u32 = u32::MAX;

/// A unit: its states are `start..end` in the global state array; `start` is its start state
/// ([`UNBUILT`] until the unit is built). Whether it is nullable is known before it is built.
#[derive(Clone, Debug)]
pub(crate) struct Unit {
    pub start: u32,
    pub end: u32,
    pub nullable: bool,
    pub counted: Option<Counted>,
}

impl Unit {
    /// Is the unit's automaton in the program?
    #[inline]
    pub fn is_built(&self) -> bool {
        self.start != UNBUILT
    }
}

/// The grammar's byte classes: bytes that every byte set of the grammar treats alike.
#[derive(Clone, Debug)]
pub(crate) struct Alphabet {
    pub class_of: [u8; 256],
    pub sets: Vec<ByteSet>,
}

impl Alphabet {
    pub(crate) fn new(grammar: &Grammar) -> Alphabet {
        let mut distinct: FastSet<ByteSet> = FastSet::default();
        let mut literal = ByteSet::EMPTY;
        for e in grammar.exprs() {
            match e {
                Expr::Class(c) => {
                    distinct.insert(*c);
                }
                Expr::Bytes(b) => b.iter().for_each(|&x| literal.insert(x)),
                _ => {}
            }
        }
        distinct.extend(literal.iter().map(ByteSet::byte));
        let sets = refine(ByteSet::FULL, distinct.iter());
        let mut class_of = [0u8; 256];
        for (id, class) in sets.iter().enumerate() {
            class.iter().for_each(|b| class_of[b as usize] = id as u8);
        }
        Alphabet { class_of, sets }
    }

    /// The classes a byte set covers (as a set of class ids).
    pub(crate) fn classes(&self, set: &ByteSet) -> ByteSet {
        let mut out = ByteSet::EMPTY;
        for b in set.iter() {
            out.insert(self.class_of[b as usize]);
        }
        out
    }
}

/// The coarsest partition of `universe` that every set splits into whole parts, in order of
/// each part's least byte.
///
/// Partition refinement a set at a time, touching only the bytes of the smaller side of each
/// cut (the set or its complement in `universe`): a JSON schema has hundreds of distinct sets,
/// most of them a few letters or everything but a few, and splitting every part by every set
/// cost a sixth of a schema's Earley compile.
pub(crate) fn refine<'s>(
    universe: ByteSet,
    sets: impl Iterator<Item = &'s ByteSet>,
) -> Vec<ByteSet> {
    let total = universe.len();
    let mut part_of = [0u8; 256];
    let mut size = vec![total as u16];
    // Bytes of the current cut in each part, and the part its cut bytes move to.
    let mut hit = [0u16; 256];
    let mut moved_to = [0u8; 256];
    let mut touched: Vec<u8> = Vec::new();
    for set in sets {
        if size.len() == total {
            break;
        }
        let inside = set.intersection(&universe);
        let outside = universe.intersection(&set.complement());
        let cut = if inside.len() <= outside.len() {
            inside
        } else {
            outside
        };
        touched.clear();
        for b in cut.iter() {
            let p = part_of[b as usize];
            if hit[p as usize] == 0 {
                touched.push(p);
            }
            hit[p as usize] += 1;
        }
        for &p in &touched {
            let n = hit[p as usize];
            moved_to[p as usize] = match n < size[p as usize] {
                true => {
                    size[p as usize] -= n;
                    size.push(n);
                    (size.len() - 1) as u8
                }
                false => p,
            };
            hit[p as usize] = 0;
        }
        for b in cut.iter() {
            part_of[b as usize] = moved_to[part_of[b as usize] as usize];
        }
    }
    let mut parts = vec![ByteSet::EMPTY; size.len()];
    for b in universe.iter() {
        parts[part_of[b as usize] as usize].insert(b);
    }
    parts.sort_unstable_by_key(|p| p.iter().next());
    parts
}

/// A compiled grammar: the units built so far (the rest are built when a parse first enters
/// them, see `lower`); states are only ever appended, so a state or unit number means the same
/// in every later program of the grammar.
#[derive(Clone, Debug)]
pub(crate) struct Program {
    pub states: Vec<State>,
    pub units: Vec<Unit>,
    pub start_unit: u32,
    pub alphabet: Alphabet,
    /// Per state, the classes it has a transition on.
    pub live: Vec<ByteSet>,
    /// Per state from its `row`, one entry per class set in `live`, in class order: target
    /// state or [`MULTI`] | index.
    pub trans: Vec<u32>,
    /// `[n, t1, .., tn]` lists for nondeterministic entries.
    pub multi: Vec<u32>,
    pub calls: Vec<Call>,
    /// `(special index, target)`.
    pub special_edges: Vec<(u32, u32)>,
    /// Special tokens the grammar names: content and vocabulary id.
    pub specials: Vec<(Box<str>, TokenId)>,
    /// Per unit, the name of the grammar rule it is (part of): where limit errors point.
    pub unit_rules: Vec<Box<str>>,
    /// Per unit, the bytes that may come right after it completes, in any caller (a
    /// superset). A token the unit alone rejects on a byte outside them, after completing,
    /// is rejected in every context: the mask cache need not ask the context about it.
    pub follow: Vec<ByteSet>,
    /// Bit `k`: the vocabulary's slice `k` is worth a proof in this grammar
    /// ([`Program::slices_worth_trying`]).
    pub slices: u32,
    /// Per state, its structural hash: the key of its classifications in the mask cache
    /// (see `hash`).
    pub hashes: Vec<u128>,
}

impl Program {
    /// A program with no unit yet, over the grammar's classes.
    pub fn new(alphabet: Alphabet) -> Program {
        Program {
            states: Vec::new(),
            units: Vec::new(),
            start_unit: 0,
            alphabet,
            live: Vec::new(),
            trans: Vec::new(),
            multi: Vec::new(),
            calls: Vec::new(),
            special_edges: Vec::new(),
            specials: Vec::new(),
            unit_rules: Vec::new(),
            follow: Vec::new(),
            slices: 0,
            hashes: Vec::new(),
        }
    }

    /// Number of units whose automata are built.
    pub fn num_built_units(&self) -> usize {
        self.units.iter().filter(|u| u.is_built()).count()
    }

    /// Appends a state (no transition, no hash yet).
    pub fn push_state(&mut self, state: State) {
        self.states.push(state);
        self.live.push(ByteSet::EMPTY);
        self.hashes.push(0);
    }

    /// The units built unit `u` calls (a counted unit: its body), in order, with repeats.
    pub fn callees(&self, u: u32) -> impl Iterator<Item = u32> + '_ {
        let unit = &self.units[u as usize];
        let body = unit.counted.map(|c| c.body);
        let states = match body {
            Some(_) => 0..0,
            None => unit.start..unit.end,
        };
        let calls = states.flat_map(|s| self.calls_of(s).iter().map(|c| c.unit));
        body.into_iter().chain(calls)
    }

    #[inline]
    pub fn n_classes(&self) -> usize {
        self.alphabet.sets.len()
    }

    #[inline]
    pub fn state(&self, s: u32) -> &State {
        &self.states[s as usize]
    }

    /// The units a prediction of built unit `u` predicts in the same row: those called from
    /// its start state, or from a state its nullable callees return to from there.
    pub fn predicted_with(&self, u: u32) -> Vec<u32> {
        let unit = &self.units[u as usize];
        if let Some(c) = unit.counted {
            return vec![c.body];
        }
        let mut states = vec![unit.start];
        let mut units = Vec::new();
        let mut i = 0;
        while let Some(&s) = states.get(i) {
            i += 1;
            for c in self.calls_of(s) {
                units.push(c.unit);
                if self.units[c.unit as usize].nullable && !states.contains(&c.ret) {
                    states.push(c.ret);
                }
            }
        }
        units
    }

    #[inline]
    pub fn calls_of(&self, s: u32) -> &[Call] {
        let (a, b) = self.states[s as usize].calls;
        &self.calls[a as usize..b as usize]
    }

    #[inline]
    pub fn specials_of(&self, s: u32) -> &[(u32, u32)] {
        let (a, b) = self.states[s as usize].specials;
        &self.special_edges[a as usize..b as usize]
    }

    /// The hash of state `s` (see `hash`).
    #[inline]
    pub fn hash(&self, s: u32) -> u128 {
        self.hashes[s as usize]
    }

    /// The classes state `s` has a transition on.
    #[inline]
    pub fn live(&self, s: u32) -> ByteSet {
        self.live[s as usize]
    }

    /// The raw transition entry of `s` on byte class `class` ([`DEAD`] if none).
    #[inline]
    pub fn entry(&self, s: u32, class: usize) -> u32 {
        let live = self.live[s as usize].words();
        let (word, bit) = (class / 64, class % 64);
        if live[word] >> bit & 1 == 0 {
            return DEAD;
        }
        let below = live[..word].iter().map(|w| w.count_ones()).sum::<u32>()
            + (live[word] & ((1u64 << bit) - 1)).count_ones();
        self.trans[(self.states[s as usize].row + below) as usize]
    }

    /// The classes on which `s` has transition entry `entry` (its dead classes for [`DEAD`],
    /// classes past the alphabet's included).
    pub(crate) fn classes_with_entry(&self, s: u32, entry: u32) -> ByteSet {
        let live = &self.live[s as usize];
        if entry == DEAD {
            return live.complement();
        }
        let mut classes = ByteSet::EMPTY;
        for (c, e) in self.transitions(s) {
            if e == entry {
                classes.insert(c as u8);
            }
        }
        classes
    }

    /// State `s`'s transitions: `(class, entry)` for each class it has one on, in class order.
    #[inline]
    pub fn transitions(&self, s: u32) -> impl Iterator<Item = (usize, u32)> + '_ {
        let row = self.states[s as usize].row as usize;
        let classes = self.live[s as usize].iter().map(usize::from);
        classes.zip(self.trans[row..].iter().copied())
    }

    /// The targets of a transition entry.
    #[inline]
    pub fn targets(&self, entry: u32) -> &[u32] {
        let i = (entry & !MULTI) as usize;
        let n = self.multi[i] as usize;
        &self.multi[i + 1..i + 1 + n]
    }

    /// The bytes on which `s` has a transition.
    pub fn first_bytes(&self, s: u32) -> ByteSet {
        self.transitions(s).fold(ByteSet::EMPTY, |out, (c, _)| {
            out.union(&self.alphabet.sets[c])
        })
    }

    /// Unit `u`'s rule as an error's location.
    pub fn unit_place(&self, u: u32) -> Location {
        Location::Rule(self.unit_rules[u as usize].to_string())
    }

    /// The special index of a vocabulary token, if the grammar names it.
    pub fn special_index(&self, token: TokenId) -> Option<u32> {
        self.specials
            .iter()
            .position(|(_, t)| *t == token)
            .map(|i| i as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(seed: &mut u64, n: u32) -> u32 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        (*seed % n as u64) as u32
    }

    #[test]
    fn refine_groups_bytes_by_the_sets_they_are_in() {
        let mut seed = 0x2545_f491_4f6c_dd1d;
        for round in 0..200 {
            // Ranges, single bytes and near-complements, as schemas have.
            let sets: Vec<ByteSet> = (0..1 + next(&mut seed, 40))
                .map(|_| {
                    let lo = next(&mut seed, 256) as u8;
                    let hi = lo.saturating_add(next(&mut seed, 64) as u8);
                    match next(&mut seed, 3) {
                        0 => ByteSet::range(lo, hi),
                        1 => ByteSet::byte(lo),
                        _ => ByteSet::range(lo, hi).complement(),
                    }
                })
                .collect();
            let universe = match round % 2 {
                0 => ByteSet::FULL,
                _ => sets.iter().fold(ByteSet::EMPTY, |a, s| a.union(s)),
            };
            let parts = refine(universe, sets.iter());
            let membership = |b: u8| sets.iter().map(|s| s.contains(b)).collect::<Vec<_>>();
            assert_eq!(
                parts.iter().fold(ByteSet::EMPTY, |a, p| a.union(p)),
                universe
            );
            for (i, p) in parts.iter().enumerate() {
                let first = p.iter().next().expect("parts are not empty");
                assert!(p.iter().all(|b| membership(b) == membership(first)));
                for q in &parts[i + 1..] {
                    let other = q.iter().next().unwrap();
                    assert!(first < other, "parts in order of their least byte");
                    assert_ne!(membership(first), membership(other));
                }
            }
        }
    }
}
