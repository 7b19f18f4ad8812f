//! Deterministic automata over Unicode characters (scalar values).
//!
//! JSON Schema constrains the *decoded* string: a `pattern` together with `minLength` and
//! `maxLength`, keys that must be none of the declared names. The grammar IR can concatenate
//! and alternate but not intersect or complement, so those combinations are computed here on
//! minimal DFAs and only the result is lowered, as right-linear rules whose characters the
//! caller's [`TextEncoding`] spells.
//!
//! This file holds the automaton type and the operations on it (lengths, name sets, product,
//! complement) with the minimization every constructor ends in; building one from a regex is
//! in [`nfa`], lowering one to grammar rules in [`lower`].

mod lower;
mod nfa;

use std::hash::Hash;

use crate::automata::determinize::{Stop, Worklist};
use crate::automata::interner::{KeyInterner, Numbering, SliceInterner};
use crate::automata::minimize::hopcroft;
use crate::error::{CompileError, Location};
use crate::front::guard::{over_time, tick};
use crate::limits::{Deadline, LimitExceeded, LimitKind};
use crate::matcher::json_state::{CharTable, LengthBound};

/// The missing transition.
const DEAD: u32 = u32::MAX;

/// Every character.
const ALL: (char, char) = ('\0', char::MAX);

/// Most entries of one transition table (states × atoms, 64 MiB): an alphabet of many atoms
/// (a class of thousands of separate characters) leaves room for fewer states.
const MAX_TABLE: usize = 1 << 24;

/// What one construction may spend: states, and time.
#[derive(Clone, Copy)]
pub(crate) struct Budget<'d> {
    /// Most states of the automaton built (fewer when its alphabet is wide, see [`MAX_TABLE`]).
    pub max_states: usize,
    /// The compilation's deadline, checked once per state and per NFA node.
    pub deadline: &'d Deadline,
}

impl Budget<'_> {
    /// The most states an automaton over `width` atoms may have.
    fn states_for(&self, width: usize) -> usize {
        self.max_states.min(MAX_TABLE / width.max(1))
    }
}

/// A minimal DFA over characters, stored flat like regex-automata's dense DFAs.
///
/// Invariants after every constructor: the start state is 0, every state is reachable, and
/// every state but the start of the empty language can reach acceptance (minimization merges
/// the states that cannot with the implicit sink, which is [`DEAD`]). Lowering relies on it: a
/// grammar built from a live state never admits a prefix that cannot be completed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CharDfa {
    /// A sorted partition of all characters into ranges no transition tells apart; adjacent
    /// ranges always differ in some state, so the partition is as coarse as it can be.
    atoms: Vec<(char, char)>,
    /// `next[state * atoms.len() + atom]`, [`DEAD`] where the string can no longer match.
    next: Vec<u32>,
    /// Whether each state ends a string of the language.
    accept: Vec<bool>,
}

impl CharDfa {
    /// Every string of `min..=max` characters (`None`: no upper bound); a `Limit` error if
    /// counting to the larger bound takes more than `max_states` states.
    pub fn length(min: u64, max: Option<u64>, budget: &Budget) -> Result<CharDfa, CompileError> {
        if max.is_some_and(|m| m < min) {
            return Ok(CharDfa::nothing());
        }
        // State i: i characters read; the last one loops when there is no upper bound.
        let needed = max.unwrap_or(min).saturating_add(1);
        let states = usize::try_from(needed)
            .ok()
            .filter(|&n| n <= budget.max_states)
            .ok_or_else(|| too_many(needed, budget.max_states))?;
        let next = (0..states)
            .map(|i| match (i + 1 < states, max) {
                (true, _) => i as u32 + 1,
                (false, None) => i as u32,
                (false, Some(_)) => DEAD,
            })
            .collect();
        let accept = (0..states).map(|i| i as u64 >= min).collect();
        finish(vec![ALL], next, accept, budget.deadline)
    }

    /// Exactly these strings (a trie, then minimized: names share their suffixes too); a
    /// `Limit` error if the trie would outgrow the budget.
    pub fn strings(strings: &[&str], budget: &Budget) -> Result<CharDfa, CompileError> {
        let atoms = partition(
            strings
                .iter()
                .flat_map(|s| s.chars())
                .flat_map(|c| [c].into_iter().chain(after(c)))
                .collect(),
        );
        let width = atoms.len();
        let max_states = budget.states_for(width);
        // The trie has a state per character at most, besides its root: checked before the
        // table is allocated.
        let chars = strings
            .iter()
            .map(|s| s.chars().count() as u64)
            .sum::<u64>();
        if chars.saturating_add(1) > max_states as u64 {
            return Err(too_many(chars.saturating_add(1), max_states));
        }
        let (mut next, mut accept) = (vec![DEAD; width], vec![false]);
        for s in strings {
            let mut at = 0;
            for c in s.chars() {
                tick(budget.deadline)?;
                let slot = at * width + atom_of(&atoms, c);
                if next[slot] == DEAD {
                    next[slot] = accept.len() as u32;
                    accept.push(false);
                    next.resize(next.len() + width, DEAD);
                }
                at = next[slot] as usize;
            }
            accept[at] = true;
        }
        finish(atoms, next, accept, budget.deadline)
    }

    /// The automaton of a deterministic machine over the characters of `alphabet` (every other
    /// character is rejected): its states are explored breadth first from `start`, `step`
    /// giving the state after a character (`None`: rejected) and `accept` the strings that
    /// end there. For languages a regex would state badly (remainders of decimal numbers, see
    /// `json_schema::numbers`); a `Limit` error past the budget's states.
    pub fn explore<K: Clone + Eq + Hash>(
        start: K,
        alphabet: &[char],
        mut step: impl FnMut(&K, char) -> Option<K>,
        accept: impl Fn(&K) -> bool,
        budget: &Budget,
    ) -> Result<CharDfa, CompileError> {
        let atoms = partition(
            alphabet
                .iter()
                .flat_map(|&c| [c].into_iter().chain(after(c)))
                .collect(),
        );
        let width = atoms.len();
        let max_states = budget.states_for(width);
        let mut states = Worklist::new(KeyInterner::default(), max_states);
        states.add(&start);
        let mut next = Vec::new();
        while let Some(id) = expand_next(&mut states, max_states, budget.deadline)? {
            let key = states.key(id).clone();
            let mut row = vec![DEAD; width];
            for &c in alphabet {
                if let Some(to) = step(&key, c) {
                    row[atom_of(&atoms, c)] = states.add(&to);
                }
            }
            next.extend(row);
        }
        let accept = (0..states.len() as u32)
            .map(|id| accept(states.key(id)))
            .collect();
        finish(atoms, next, accept, budget.deadline)
    }

    /// The strings both automata accept: the product on the common refinement of their atoms,
    /// a `Limit` error past the budget's states.
    pub fn intersect(&self, other: &CharDfa, budget: &Budget) -> Result<CharDfa, CompileError> {
        let starts = self.atoms.iter().chain(&other.atoms).map(|a| a.0).collect();
        let atoms = partition(starts);
        let pairs: Vec<(usize, usize)> = atoms
            .iter()
            .map(|&(lo, _)| (self.atom(lo), other.atom(lo)))
            .collect();
        let (wa, wb) = (self.atoms.len(), other.atoms.len());
        let max_states = budget.states_for(atoms.len());
        let mut states = Worklist::new(KeyInterner::default(), max_states);
        states.add(&(0, 0));
        let mut next = Vec::new();
        while let Some(id) = expand_next(&mut states, max_states, budget.deadline)? {
            let (x, y) = *states.key(id);
            for &(a, b) in &pairs {
                let (tx, ty) = (self.next[x * wa + a], other.next[y * wb + b]);
                next.push(match tx == DEAD || ty == DEAD {
                    true => DEAD,
                    false => states.add(&(tx as usize, ty as usize)),
                });
            }
        }
        let accept = (0..states.len() as u32)
            .map(|id| {
                let (x, y) = *states.key(id);
                self.accept[x] && other.accept[y]
            })
            .collect();
        finish(atoms, next, accept, budget.deadline)
    }

    /// The strings any of `parts` accepts, as the complement of the strings each rejects: a
    /// `Limit` error past the budget's states.
    pub fn union(parts: &[&CharDfa], budget: &Budget) -> Result<CharDfa, CompileError> {
        if let [one] = parts {
            return Ok((*one).clone());
        }
        let mut rejected = CharDfa::nothing().complement(budget.deadline)?;
        for part in parts {
            rejected = rejected.intersect(&part.complement(budget.deadline)?, budget)?;
        }
        rejected.complement(budget.deadline)
    }

    /// The strings of `within` (every string if `None`) split by the automata of `parts` that
    /// accept them: each nonempty class with its set (bit `i`: `parts[i]` accepts), in the
    /// order of the sets. One product of them all, explored once, and each class minimized
    /// from it: splitting by one part at a time made a product per class and part, most of
    /// them as large as the parts. `None` past `max_classes` classes; a `Limit` error past
    /// the budget's states.
    pub fn split(
        parts: &[CharDfa],
        within: Option<&CharDfa>,
        max_classes: usize,
        budget: &Budget,
    ) -> Result<Option<Vec<(usize, CharDfa)>>, CompileError> {
        debug_assert!(parts.len() < usize::BITS as usize);
        // A state: each part's state, DEAD once it rejects every continuation; `within`'s last.
        let automata: Vec<&CharDfa> = parts.iter().chain(within).collect();
        let starts = automata
            .iter()
            .flat_map(|d| d.atoms.iter().map(|a| a.0))
            .collect();
        let atoms = partition(starts);
        // Each automaton's atom under each atom of the product.
        let columns: Vec<Vec<usize>> = automata
            .iter()
            .map(|d| atoms.iter().map(|&(lo, _)| d.atom(lo)).collect())
            .collect();
        let max_states = budget.states_for(atoms.len());
        let mut states = Worklist::new(SliceInterner::default(), max_states);
        let (mut at, mut to) = (
            vec![0u32; automata.len()],
            Vec::with_capacity(automata.len()),
        );
        states.add(&at);
        let mut next = Vec::new();
        while let Some(id) = expand_next(&mut states, max_states, budget.deadline)? {
            at.copy_from_slice(states.key(id));
            for a in 0..atoms.len() {
                to.clear();
                to.extend(automata.iter().zip(&at).zip(&columns).map(
                    |((d, &q), column)| match q {
                        DEAD => DEAD,
                        q => d.next[q as usize * d.atoms.len() + column[a]],
                    },
                ));
                let alive = within.is_none() || to[parts.len()] != DEAD;
                next.push(match alive {
                    true => states.add(&to),
                    false => DEAD,
                });
            }
        }
        // Each state's class, `None` where the string it ends is not in `within`.
        let class: Vec<Option<usize>> = (0..states.len() as u32)
            .map(|id| {
                let at = states.key(id);
                let inside = within.is_none_or(|w| w.accept[at[parts.len()] as usize]);
                inside.then(|| {
                    parts
                        .iter()
                        .zip(at)
                        .enumerate()
                        .filter(|(_, (d, &q))| q != DEAD && d.accept[q as usize])
                        .fold(0, |set, (i, _)| set | 1 << i)
                })
            })
            .collect();
        let mut sets: Vec<usize> = class.iter().flatten().copied().collect();
        sets.sort_unstable();
        sets.dedup();
        if sets.len() > max_classes {
            return Ok(None);
        }
        let mut out = Vec::with_capacity(sets.len());
        for set in sets {
            let accept = class.iter().map(|&c| c == Some(set)).collect();
            out.push((
                set,
                finish(atoms.clone(), next.clone(), accept, budget.deadline)?,
            ));
        }
        Ok(Some(out))
    }

    /// Every string the automaton rejects, including those it would die on (they go to an
    /// accepting sink).
    pub fn complement(&self, deadline: &Deadline) -> Result<CharDfa, CompileError> {
        let sink = self.accept.len() as u32;
        let next = self
            .next
            .iter()
            .map(|&t| if t == DEAD { sink } else { t })
            .chain(std::iter::repeat_n(sink, self.atoms.len()))
            .collect();
        let accept = self.accept.iter().map(|a| !a).chain([true]).collect();
        finish(self.atoms.clone(), next, accept, deadline)
    }

    /// True if no string is accepted; exact, since every state left can reach acceptance
    /// unless the language is empty.
    pub fn is_empty(&self) -> bool {
        !self.accept.iter().any(|&a| a)
    }

    /// Does every prefix of the language have infinitely many completions in it? Every state
    /// is live, so that holds iff every state reaches a cycle: states with no successor left
    /// are peeled off until none is (Kahn's algorithm), and none may be.
    pub fn infinite_from_every_state(&self) -> bool {
        let width = self.atoms.len();
        let states = self.accept.len();
        let mut successors = vec![0usize; states];
        let mut predecessors = vec![Vec::new(); states];
        for (from, row) in self.next.chunks(width).enumerate() {
            for &to in row.iter().filter(|&&t| t != DEAD) {
                successors[from] += 1;
                predecessors[to as usize].push(from);
            }
        }
        let mut peeled: Vec<usize> = (0..states).filter(|&s| successors[s] == 0).collect();
        let mut any_peeled = !peeled.is_empty();
        while let Some(s) = peeled.pop() {
            for &p in &predecessors[s] {
                successors[p] -= 1;
                if successors[p] == 0 {
                    peeled.push(p);
                    any_peeled = true;
                }
            }
        }
        !any_peeled && !self.is_empty()
    }

    /// How many states it has.
    pub fn states(&self) -> usize {
        self.accept.len()
    }

    /// The language's strings of `min..=max` characters as a [`LengthBound`]: the matcher
    /// counts what this automaton times the bounds would need as states (see
    /// `matcher::json_state`).
    pub fn length_bound(
        &self,
        min: u32,
        max: u32,
        deadline: &Deadline,
    ) -> Result<LengthBound, CompileError> {
        LengthBound::new(self.table(), min, max, deadline).map_err(over_time)
    }

    /// The automaton as the matcher steps it, over code points.
    pub fn table(&self) -> CharTable {
        let atoms = self
            .atoms
            .iter()
            .map(|&(lo, hi)| (lo as u32, hi as u32))
            .collect();
        debug_assert_eq!(DEAD, crate::matcher::json_state::DEAD);
        CharTable::new(atoms, self.next.clone(), self.accept.clone())
    }

    /// Whether `s` is in the language (how tests compare languages, and how the matcher tells
    /// property names apart by pattern).
    pub fn matches(&self, s: &str) -> bool {
        let mut at = 0;
        for c in s.chars() {
            match self.next[at * self.atoms.len() + self.atom(c)] {
                DEAD => return false,
                t => at = t as usize,
            }
        }
        self.accept[at]
    }

    /// The empty language.
    fn nothing() -> CharDfa {
        CharDfa {
            atoms: vec![ALL],
            next: vec![DEAD],
            accept: vec![false],
        }
    }

    /// Index of the atom holding `c`.
    fn atom(&self, c: char) -> usize {
        atom_of(&self.atoms, c)
    }
}

/// The error of a construction that needed `needed` states (at least) past its budget.
fn too_many(needed: u64, max_states: usize) -> CompileError {
    let exceeded = LimitExceeded {
        kind: LimitKind::AutomatonStates,
        value: needed,
        max: max_states as u64,
    };
    CompileError::over_limit(exceeded, Location::None, "the character automaton")
}

/// The character after `c` in scalar values, skipping the surrogates.
fn after(c: char) -> Option<char> {
    match c {
        '\u{d7ff}' => Some('\u{e000}'),
        c => char::from_u32(c as u32 + 1),
    }
}

/// The atoms whose starts are `cuts` (and `'\0'`).
fn partition(mut cuts: Vec<char>) -> Vec<(char, char)> {
    cuts.push('\0');
    cuts.sort_unstable();
    cuts.dedup();
    let ends = cuts.iter().skip(1).map(|&c| {
        // Below a cut: `c - 1`, or U+D7FF below U+E000.
        char::from_u32((c as u32).saturating_sub(1)).unwrap_or('\u{d7ff}')
    });
    cuts.iter().copied().zip(ends.chain([char::MAX])).collect()
}

/// Index of the atom holding `c` (atoms start at `'\0'`, so one always does).
fn atom_of(atoms: &[(char, char)], c: char) -> usize {
    atoms.partition_point(|a| a.0 <= c).saturating_sub(1)
}

/// The next state of a construction to expand; a `Limit` error once it has found more than
/// `max_states` states.
fn expand_next<N: Numbering>(
    states: &mut Worklist<N>,
    max_states: usize,
    deadline: &Deadline,
) -> Result<Option<u32>, CompileError> {
    states.next(deadline).map_err(|stop| match stop {
        Stop::Time(exceeded) => over_time(exceeded),
        Stop::States | Stop::Work => too_many(max_states as u64 + 1, max_states),
    })
}

/// The minimal, trimmed, canonically numbered (breadth first from the start, atom by atom)
/// automaton of the language of `next`/`accept`.
fn finish(
    atoms: Vec<(char, char)>,
    next: Vec<u32>,
    accept: Vec<bool>,
    deadline: &Deadline,
) -> Result<CharDfa, CompileError> {
    let (atoms, next) = merge_atoms(atoms, next, accept.len());
    let width = atoms.len();
    // One block per state and one for the sink: indices up to `accept.len()` exist.
    let block = minimize(width, &next, &accept, deadline)?;
    let dead = block[accept.len()];
    if block[0] == dead {
        return Ok(CharDfa::nothing());
    }
    let mut id = vec![DEAD; accept.len() + 1];
    id[block[0]] = 0;
    let mut reps = vec![0];
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&s) = reps.get(i) {
        for &t in &next[s * width..(s + 1) * width] {
            let b = if t == DEAD { dead } else { block[t as usize] };
            if b != dead && id[b] == DEAD {
                id[b] = reps.len() as u32;
                reps.push(t as usize);
            }
            out.push(if b == dead { DEAD } else { id[b] });
        }
        i += 1;
    }
    let accept: Vec<bool> = reps.iter().map(|&s| accept[s]).collect();
    let (atoms, next) = merge_atoms(atoms, out, accept.len());
    Ok(CharDfa {
        atoms,
        next,
        accept,
    })
}

/// Joins adjacent atoms that every state treats alike.
fn merge_atoms(
    atoms: Vec<(char, char)>,
    next: Vec<u32>,
    states: usize,
) -> (Vec<(char, char)>, Vec<u32>) {
    let width = atoms.len();
    let same = |a: usize| (0..states).all(|s| next[s * width + a] == next[s * width + a - 1]);
    let mut kept: Vec<usize> = Vec::with_capacity(width);
    let mut merged: Vec<(char, char)> = Vec::with_capacity(width);
    for (a, &atom) in atoms.iter().enumerate() {
        match merged.last_mut() {
            Some(last) if same(a) => last.1 = atom.1,
            _ => {
                kept.push(a);
                merged.push(atom);
            }
        }
    }
    if kept.len() == width {
        return (atoms, next);
    }
    let rows = next.chunks(width.max(1));
    let next = rows.flat_map(|row| kept.iter().map(|&a| row[a])).collect();
    (merged, next)
}

/// The block of each state (and of a sink `n` standing for [`DEAD`], shared by every state
/// that cannot accept) in the coarsest partition respecting acceptance and transitions:
/// Hopcroft's refinement of the partial automaton of the states that can accept, edges into
/// the others dropped. Past that trim a missing edge is the only way to fail, so two states
/// differ on a label iff one has an edge there or their targets differ. The complete
/// automaton, with a sink, gave the sink an edge from every state on every atom it fails
/// on, and the refinement went through all of them each time the sink's block was a
/// splitter.
fn minimize(
    width: usize,
    next: &[u32],
    accept: &[bool],
    deadline: &Deadline,
) -> Result<Vec<usize>, CompileError> {
    let n = accept.len();
    let target = |s: usize, a: usize| Some(next[s * width + a]).filter(|&t| t != DEAD);
    // Predecessors of each state, as one flat array, to find the states that can accept.
    let mut pred_start = vec![0u32; n + 1];
    for s in 0..n {
        for t in (0..width).filter_map(|a| target(s, a)) {
            pred_start[t as usize + 1] += 1;
        }
    }
    for i in 0..n {
        pred_start[i + 1] += pred_start[i];
    }
    let mut fill = pred_start.clone();
    let mut preds = vec![0u32; pred_start[n] as usize];
    for s in 0..n {
        tick(deadline)?;
        for t in (0..width).filter_map(|a| target(s, a)) {
            preds[fill[t as usize] as usize] = s as u32;
            fill[t as usize] += 1;
        }
    }
    let mut live = accept.to_vec();
    let mut stack: Vec<u32> = (0..n as u32).filter(|&s| accept[s as usize]).collect();
    while let Some(t) = stack.pop() {
        let (lo, hi) = (pred_start[t as usize], pred_start[t as usize + 1]);
        for &s in &preds[lo as usize..hi as usize] {
            if !std::mem::replace(&mut live[s as usize], true) {
                stack.push(s);
            }
        }
    }
    let mut edges = Vec::new();
    for s in (0..n).filter(|&s| live[s]) {
        for a in 0..width {
            if let Some(t) = target(s, a).filter(|&t| live[t as usize]) {
                edges.push((a as u32, s as u32, t));
            }
        }
    }
    let (block, blocks) = hopcroft(accept, &edges, deadline).map_err(over_time)?;
    // The states that cannot accept have no edge left and are not final, so they share a
    // block of their own, which becomes the sink's.
    let mut block: Vec<usize> = block.into_iter().map(|b| b as usize).collect();
    for (s, b) in block.iter_mut().enumerate() {
        if !live[s] {
            *b = blocks;
        }
    }
    block.push(blocks);
    Ok(block)
}

#[cfg(test)]
mod tests {
    //! The helpers here are shared by the tests of [`super::nfa`] and [`super::lower`].

    use super::*;
    use crate::error::CompileErrorKind;

    /// A deadline that never passes, for as long as a test needs it (a `Deadline` counts its
    /// ticks in a `Cell`, so it cannot be a shared static).
    pub(super) fn never() -> &'static Deadline {
        Box::leak(Box::new(Deadline::never()))
    }

    /// A budget of `max_states` states and no deadline.
    pub(super) fn budget(max_states: usize) -> Budget<'static> {
        Budget {
            max_states,
            deadline: never(),
        }
    }

    /// xorshift64: deterministic and dependency-free.
    pub(super) struct Rng(pub(super) u64);

    impl Rng {
        /// A number in `0..n` (0 for `n == 0`).
        pub(super) fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n.max(1) as u64) as usize
        }
    }

    /// Characters beyond the patterns' own: multi-byte ones, both sides of the surrogate gap,
    /// controls, and the Kelvin sign that `(?i)k` matches.
    const EXTRA: &str = "abcxzAZK09-_.:@ \n\t\0\x1féü😀\u{FFFF}\u{E000}\u{D7FF}\u{10FFFF}\u{212A}";

    /// The automaton of a regex in regex-syntax's own (Unicode) dialect.
    pub(super) fn dfa(pattern: &str) -> CharDfa {
        let hir = regex_syntax::Parser::new().parse(pattern).unwrap();
        CharDfa::from_hir(&hir, &budget(4096)).unwrap()
    }

    /// A walk through the automaton's transitions, a character at a time, stopping at random
    /// in an accepting state: strings of the language, which random strings rarely are (their
    /// mutations are strings just outside it).
    fn walk(d: &CharDfa, rng: &mut Rng) -> String {
        let (mut s, mut at, width) = (String::new(), 0, d.atoms.len());
        for _ in 0..14 {
            let row = &d.next[at * width..(at + 1) * width];
            let mut targets: Vec<u32> = row.iter().copied().filter(|&t| t != DEAD).collect();
            targets.sort_unstable();
            targets.dedup();
            if targets.is_empty() || (d.accept[at] && rng.below(3) == 0) {
                break;
            }
            // A target first, then an atom to it: `\w` has hundreds of atoms, `@` one.
            let t = targets[rng.below(targets.len())];
            let arcs: Vec<usize> = (0..width).filter(|&a| row[a] == t).collect();
            let a = arcs[rng.below(arcs.len())];
            let (lo, hi) = d.atoms[a];
            let inside =
                char::from_u32(lo as u32 + rng.below((hi as u32 - lo as u32 + 1) as usize) as u32);
            s.push([lo, hi, inside.unwrap_or(lo)][rng.below(3)]);
            at = d.next[at * width + a] as usize;
        }
        s
    }

    /// `count` test strings for `d`: random ones over `alphabet`, walks, and walks with one
    /// character inserted, deleted or replaced; plus the empty string.
    pub(super) fn samples(
        d: &CharDfa,
        alphabet: &[char],
        rng: &mut Rng,
        count: usize,
    ) -> Vec<String> {
        let mut out = vec![String::new()];
        while out.len() < count {
            let mut s: Vec<char> = match rng.below(3) {
                0 => (0..rng.below(9))
                    .map(|_| alphabet[rng.below(alphabet.len())])
                    .collect(),
                _ => walk(d, rng).chars().collect(),
            };
            if rng.below(2) == 0 {
                let (i, c) = (rng.below(s.len() + 1), alphabet[rng.below(alphabet.len())]);
                match rng.below(3) {
                    0 => s.insert(i, c),
                    _ if i == s.len() => {}
                    1 => drop(s.remove(i)),
                    _ => s[i] = c,
                }
            }
            out.push(s.into_iter().collect());
        }
        out
    }

    /// [`EXTRA`] and the characters of `extra` (a pattern's own literals, among others).
    pub(super) fn alphabet(extra: &str) -> Vec<char> {
        let mut chars: Vec<char> = EXTRA.chars().chain(extra.chars()).collect();
        chars.sort_unstable();
        chars.dedup();
        chars
    }

    #[test]
    fn chars_operations_agree_with_their_definitions() {
        let mut rng = Rng(7);
        let named = ["ab", "abc", "", "é😀"];
        let mut check = |what: &str, d: &CharDfa, want: &dyn Fn(&str) -> bool| {
            let mut strings = samples(d, &alphabet("abcfg09"), &mut rng, 2000);
            strings.extend(named.iter().map(|s| s.to_string()));
            for s in strings {
                assert_eq!(d.matches(&s), want(&s), "{what} on {s:?}");
            }
        };
        let lower = dfa(r"^[a-z]+$");
        let hex = dfa(r"(?s:.)*[0-9a-fA-F]+(?s:.)*");
        let names = CharDfa::strings(&named, &budget(4096)).unwrap();
        let len = |min, max| CharDfa::length(min, max, &budget(64)).unwrap();
        let both = lower.intersect(&hex, &budget(4096)).unwrap();
        check("lower ∩ hex", &both, &|s| {
            lower.matches(s) && hex.matches(s)
        });
        check("¬lower", &lower.complement(never()).unwrap(), &|s| {
            !lower.matches(s)
        });
        check(
            "¬¬hex",
            &hex.complement(never())
                .unwrap()
                .complement(never())
                .unwrap(),
            &|s| hex.matches(s),
        );
        let count = |s: &str| s.chars().count();
        check("2..=5", &len(2, Some(5)), &|s| (2..=5).contains(&count(s)));
        check("3..", &len(3, None), &|s| count(s) >= 3);
        check("0..=0", &len(0, Some(0)), &str::is_empty);
        check("names", &names, &|s| named.contains(&s));
        let short = lower.intersect(&len(0, Some(3)), &budget(4096)).unwrap();
        check("lower, ≤3", &short, &|s| {
            lower.matches(s) && count(s) <= 3
        });
        let other = lower
            .complement(never())
            .unwrap()
            .intersect(&names.complement(never()).unwrap(), &budget(4096));
        let other_key = |s: &str| !lower.matches(s) && !named.contains(&s);
        check("¬lower ∩ ¬names", &other.unwrap(), &other_key);
        // Minimal and trimmed: the textbook four states, one for `a*`, `length` a chain.
        assert_eq!(dfa(r"(?:a|b)*abb").accept.len(), 4);
        assert_eq!(dfa(r"a*").accept.len(), 1);
        assert_eq!(
            CharDfa::length(2, Some(5), &budget(64))
                .unwrap()
                .accept
                .len(),
            6
        );
        assert_eq!(
            CharDfa::strings(&["ab", "cb"], &budget(4096))
                .unwrap()
                .accept
                .len(),
            3
        );
    }

    /// `split` puts each string of `within` in the class of exactly the parts that accept it,
    /// every class it returns is nonempty and minimal (as `intersect` makes it), and past the
    /// class cap it gives up.
    #[test]
    fn chars_split_by_parts() {
        let mut rng = Rng(11);
        let parts = [
            dfa(r"^a[a-c]*$"),
            dfa(r"^[b-c]+a$"),
            dfa(r"c"),
            dfa(r"^ab?$"),
        ];
        let within = dfa(r"^[a-c]{2,4}$");
        let alphabet = alphabet("abcx");
        for (n, within) in [(4, None), (4, Some(&within)), (2, Some(&within)), (1, None)] {
            let parts = &parts[..n];
            let classes = CharDfa::split(parts, within, 16, &budget(4096))
                .unwrap()
                .unwrap();
            for (set, class) in &classes {
                assert!(!class.is_empty(), "class {set:b} is empty");
                let mut expected = within.cloned().unwrap_or_else(|| {
                    CharDfa::strings(&[], &budget(64))
                        .unwrap()
                        .complement(never())
                        .unwrap()
                });
                for (i, p) in parts.iter().enumerate() {
                    let side = match set >> i & 1 {
                        1 => p.clone(),
                        _ => p.complement(never()).unwrap(),
                    };
                    expected = expected.intersect(&side, &budget(4096)).unwrap();
                }
                assert_eq!(class.accept.len(), expected.accept.len(), "class {set:b}");
            }
            for s in samples(&parts[0], &alphabet, &mut rng, 500) {
                let set = (0..n)
                    .filter(|&i| parts[i].matches(&s))
                    .fold(0, |m, i| m | 1 << i);
                for (class_set, class) in &classes {
                    let inside = within.is_none_or(|w| w.matches(&s)) && *class_set == set;
                    assert_eq!(class.matches(&s), inside, "{s:?} in class {class_set:b}");
                }
            }
        }
        assert!(CharDfa::split(&parts, None, 2, &budget(4096))
            .unwrap()
            .is_none());
    }

    #[test]
    fn chars_emptiness() {
        assert!(dfa(r"^a$")
            .intersect(&dfa(r"^b$"), &budget(64))
            .unwrap()
            .is_empty());
        assert!(dfa(r"(?s).*").complement(never()).unwrap().is_empty());
        assert!(CharDfa::length(3, Some(2), &budget(64)).unwrap().is_empty());
        assert!(CharDfa::strings(&[], &budget(4096)).unwrap().is_empty());
        assert!(dfa(r"a^b").is_empty());
        assert!(!dfa(r"^a$").is_empty());
        assert!(CharDfa::strings(&[""], &budget(4096)).unwrap().matches(""));
        assert!(!dfa(r"a*").complement(never()).unwrap().is_empty());
    }

    /// Infinitely many completions from every prefix: the items `uniqueItems` lets the
    /// matcher tell apart (`json_schema::tracked`).
    #[test]
    fn chars_infinite_from_every_state() {
        for p in [
            r"^[a-z][a-z0-9_]*$",
            r"^.+$",
            r"^a*b[cd]*$",
            r"^(ab|c)+$",
            r"^x.*y$",
        ] {
            assert!(dfa(p).infinite_from_every_state(), "{p}");
        }
        // A state with finitely many completions: the end of `x`, of `yes`, of four digits.
        for p in [
            r"^[0-9]+x$",
            r"^(?:yes|y+)$",
            r"^[0-9]{4}$",
            r"^a*b$",
            r"a^b",
        ] {
            assert!(!dfa(p).infinite_from_every_state(), "{p}");
        }
        assert!(!CharDfa::length(0, Some(5), &budget(64))
            .unwrap()
            .infinite_from_every_state());
        assert!(CharDfa::length(2, None, &budget(64))
            .unwrap()
            .infinite_from_every_state());
    }

    #[test]
    fn chars_limits() {
        let limit = |r: Result<CharDfa, CompileError>| r.unwrap_err().kind();
        assert_eq!(
            limit(CharDfa::length(0, Some(1_000_000), &budget(4096))),
            CompileErrorKind::Limit
        );
        assert_eq!(
            limit(CharDfa::length(u64::MAX, None, &budget(4096))),
            CompileErrorKind::Limit
        );
        assert!(CharDfa::length(0, Some(4095), &budget(4096)).is_ok());
        for p in [r"(a|b)*a(a|b){20}", r"(?:a{1000}){1000}"] {
            let hir = regex_syntax::Parser::new().parse(p).unwrap();
            assert_eq!(
                limit(CharDfa::from_hir(&hir, &budget(4096))),
                CompileErrorKind::Limit,
                "{p}"
            );
        }
        let six = dfa(r"(a|b)*a(a|b){5}");
        assert_eq!(six.accept.len(), 64);
        assert_eq!(
            limit(six.intersect(&dfa(r"(?:(?:a|b){3})*"), &budget(100))),
            CompileErrorKind::Limit
        );
    }
}
