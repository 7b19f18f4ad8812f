//! Leaf operators: the small deterministic automata at the bottom of an operator program.
//!
//! A leaf consumes *units*: a text byte (0..=255) or a special token (`SPECIAL_BASE + id`). Its
//! state is one `u32`. From a state a leaf may *exit* (with an exit index: which terminator of a
//! `Wait` matched) and/or continue; every state of a built leaf can still reach an exit, so a
//! token that stays inside a leaf is always allowed — that is what makes a leaf's mask
//! context-independent and cacheable.

use std::collections::{HashMap, VecDeque};

use regex_automata::dfa::{dense, Automaton};
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};

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
    /// `suffix_keys[p]`: hash of the units from position p on; two Writes with the same
    /// remaining units share masks.
    suffix_keys: Box<[u128]>,
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
        let mut suffix_keys = vec![0u128; units.len() + 1];
        suffix_keys[units.len()] = StructHasher::new(0x57).finish();
        for p in (0..units.len()).rev() {
            suffix_keys[p] = StructHasher::new(0x57)
                .hash(suffix_keys[p + 1])
                .word(units[p] as u64)
                .finish();
        }
        Leaf::Write(WriteLeaf {
            units,
            text_to_end: text_to_end.into(),
            suffix_keys: suffix_keys.into(),
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
            Leaf::Write(w) => w.suffix_keys[0],
            Leaf::Dfa(d) => d.hash,
        }
    }

    /// Identifies what is left of the leaf from `state`: equal keys accept the same suffixes,
    /// so they share cached masks (a Write by its remaining units, a DFA by hash and state).
    pub fn state_key(&self, state: u32) -> u128 {
        match self {
            Leaf::Write(w) => w.suffix_keys[state as usize],
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

/// A trimmed DFA over units: byte transitions in a class-compressed table, special-token
/// transitions in a sparse side table.
#[derive(Debug)]
pub struct Dfa {
    classes: [u8; 256],
    stride: usize,
    table: Box<[u32]>,
    specials: Box<[(u32, u32)]>,
    special_ranges: Box<[u32]>,
    exit: Box<[u32]>,
    has_out: Box<[bool]>,
    forced: Box<[u32]>,
    text_to_exit: Box<[u32]>,
    start: u32,
    num_exits: u32,
    hash: u128,
}

impl Dfa {
    #[inline]
    fn step(&self, state: u32, unit: u32) -> u32 {
        if unit < SPECIAL_BASE {
            self.table[state as usize * self.stride + self.classes[unit as usize] as usize]
        } else {
            self.specials_of(state)
                .iter()
                .find(|&&(u, _)| u == unit)
                .map_or(DEAD, |&(_, next)| next)
        }
    }

    fn specials_of(&self, state: u32) -> &[(u32, u32)] {
        let s = state as usize;
        &self.specials[self.special_ranges[s] as usize..self.special_ranges[s + 1] as usize]
    }
}

/// A DFA under construction: full 256-wide rows, states numbered from 0, `DEAD` for no edge.
#[derive(Default)]
pub(crate) struct RawDfa {
    pub rows: Vec<[u32; 256]>,
    pub specials: Vec<Vec<(u32, u32)>>,
    pub exit: Vec<u32>,
    pub start: u32,
}

impl RawDfa {
    pub fn add_state(&mut self, exit: Option<u32>) -> u32 {
        self.rows.push([DEAD; 256]);
        self.specials.push(Vec::new());
        self.exit.push(exit.unwrap_or(NONE));
        (self.rows.len() - 1) as u32
    }

    /// Drops states that cannot reach an exit, renumbers, compresses byte classes. `None` if
    /// the start state itself cannot reach an exit (the empty language).
    pub fn finish(self) -> Option<Dfa> {
        let n = self.rows.len();
        // Co-reachability: reverse edges, BFS from exit states.
        let mut rev: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (s, row) in self.rows.iter().enumerate() {
            for &t in row.iter().filter(|&&t| t != DEAD) {
                rev[t as usize].push(s as u32);
            }
            for &(_, t) in &self.specials[s] {
                rev[t as usize].push(s as u32);
            }
        }
        let mut live = vec![false; n];
        let mut queue: VecDeque<u32> = (0..n as u32)
            .filter(|&s| self.exit[s as usize] != NONE)
            .collect();
        queue.iter().for_each(|&s| live[s as usize] = true);
        while let Some(s) = queue.pop_front() {
            for &p in &rev[s as usize] {
                if !live[p as usize] {
                    live[p as usize] = true;
                    queue.push_back(p);
                }
            }
        }
        if !live[self.start as usize] {
            return None;
        }
        // Renumber live states reachable from the start, in BFS order (canonical numbering).
        let mut id = vec![DEAD; n];
        let mut order = vec![self.start];
        id[self.start as usize] = 0;
        let mut i = 0;
        while i < order.len() {
            let s = order[i] as usize;
            i += 1;
            let succ = self.rows[s]
                .iter()
                .copied()
                .chain(self.specials[s].iter().map(|x| x.1));
            for t in succ {
                if t != DEAD && live[t as usize] && id[t as usize] == DEAD {
                    id[t as usize] = order.len() as u32;
                    order.push(t);
                }
            }
        }
        let remap = |t: u32| {
            if t != DEAD && live[t as usize] {
                id[t as usize]
            } else {
                DEAD
            }
        };
        let rows: Vec<[u32; 256]> = order
            .iter()
            .map(|&s| std::array::from_fn(|b| remap(self.rows[s as usize][b])))
            .collect();

        // Byte classes: bytes whose columns agree in every state share a class.
        let mut classes = [0u8; 256];
        let mut reps: Vec<u8> = Vec::new();
        let mut by_column: HashMap<Vec<u32>, u8> = HashMap::new();
        for b in 0..256 {
            let column: Vec<u32> = rows.iter().map(|r| r[b]).collect();
            let next = by_column.len() as u8;
            let c = *by_column.entry(column).or_insert_with(|| {
                reps.push(b as u8);
                next
            });
            classes[b] = c;
        }
        let stride = reps.len();
        let table: Box<[u32]> = rows
            .iter()
            .flat_map(|r| reps.iter().map(move |&b| r[b as usize]))
            .collect();

        let mut specials = Vec::new();
        let mut special_ranges = vec![0u32];
        for &s in &order {
            let mut sp: Vec<(u32, u32)> = self.specials[s as usize]
                .iter()
                .map(|&(u, t)| (u, remap(t)))
                .filter(|&(_, t)| t != DEAD)
                .collect();
            sp.sort_unstable();
            specials.extend(sp);
            special_ranges.push(specials.len() as u32);
        }
        let exit: Vec<u32> = order.iter().map(|&s| self.exit[s as usize]).collect();
        Some(Dfa::from_table(
            classes,
            stride,
            table,
            specials,
            special_ranges,
            exit,
            None,
        ))
    }
}

impl Dfa {
    /// Completes a DFA from its class-compressed table (state 0 starts; every state must reach
    /// an exit): the per-state facts the cursor and the masks read, and the structural hash
    /// (unless the caller has one that identifies the automaton more cheaply). Works class by
    /// class, so small alphabets (a choice trie) build in time linear in the table, not in 256
    /// × states.
    fn from_table(
        classes: [u8; 256],
        stride: usize,
        table: Box<[u32]>,
        specials: Vec<(u32, u32)>,
        special_ranges: Vec<u32>,
        exit: Vec<u32>,
        hash: Option<u128>,
    ) -> Dfa {
        let m = exit.len();
        let num_exits = exit
            .iter()
            .filter(|&&e| e != NONE)
            .map(|&e| e + 1)
            .max()
            .unwrap_or(0);
        // The two smallest bytes of each class: enough to tell "no unit", "one unit", "more".
        let mut class_bytes = vec![[NONE; 2]; stride];
        for b in 0..256u32 {
            let c = &mut class_bytes[classes[b as usize] as usize];
            if c[0] == NONE {
                c[0] = b;
            } else if c[1] == NONE {
                c[1] = b;
            }
        }
        let row = |s: usize| &table[s * stride..(s + 1) * stride];
        // The units leaving each state: at most two are needed (has any? exactly one?).
        let first_two_outs = |s: usize| -> (Option<u32>, Option<u32>) {
            let mut bytes = [NONE; 2];
            for (c, &t) in row(s).iter().enumerate() {
                if t == DEAD {
                    continue;
                }
                for b in class_bytes[c] {
                    if b < bytes[0] {
                        bytes = [b, bytes[0]];
                    } else if b < bytes[1] {
                        bytes[1] = b;
                    }
                }
            }
            let sp = specials[special_ranges[s] as usize..special_ranges[s + 1] as usize]
                .iter()
                .map(|x| x.0);
            let mut it = bytes.into_iter().filter(|&b| b != NONE).chain(sp);
            (it.next(), it.next())
        };
        let outs: Vec<(Option<u32>, Option<u32>)> = (0..m).map(first_two_outs).collect();
        let has_out: Vec<bool> = outs.iter().map(|o| o.0.is_some()).collect();
        let forced: Vec<u32> = outs
            .iter()
            .map(|o| match o {
                (Some(u), None) => *u,
                _ => NONE,
            })
            .collect();
        // Fewest text bytes to an exit: BFS backwards from exits over byte edges only. The
        // reverse edges live in one flat array: predecessors of t are
        // `rev[rev_start[t]..rev_start[t + 1]]`.
        let mut rev_start = vec![0u32; m + 1];
        for &t in table.iter().filter(|&&t| t != DEAD) {
            rev_start[t as usize + 1] += 1;
        }
        for i in 0..m {
            rev_start[i + 1] += rev_start[i];
        }
        let mut rev = vec![0u32; rev_start[m] as usize];
        let mut fill = rev_start.clone();
        for s in 0..m {
            for &t in row(s).iter().filter(|&&t| t != DEAD) {
                rev[fill[t as usize] as usize] = s as u32;
                fill[t as usize] += 1;
            }
        }
        let mut text_to_exit = vec![NONE; m];
        let mut queue: VecDeque<u32> = (0..m as u32)
            .filter(|&s| exit[s as usize] != NONE)
            .collect();
        queue.iter().for_each(|&s| text_to_exit[s as usize] = 0);
        while let Some(s) = queue.pop_front() {
            let (from, to) = (rev_start[s as usize], rev_start[s as usize + 1]);
            for &p in &rev[from as usize..to as usize] {
                if text_to_exit[p as usize] == NONE {
                    text_to_exit[p as usize] = text_to_exit[s as usize] + 1;
                    queue.push_back(p);
                }
            }
        }

        let hash = hash.unwrap_or_else(|| {
            let mut h = StructHasher::new(0xdf);
            h.word(m as u64).word(stride as u64);
            classes.iter().for_each(|&c| {
                h.word(c as u64);
            });
            table.iter().for_each(|&t| {
                h.word(t as u64);
            });
            specials.iter().for_each(|&(u, t)| {
                h.word(((u as u64) << 32) | t as u64);
            });
            special_ranges.iter().chain(exit.iter()).for_each(|&x| {
                h.word(x as u64);
            });
            h.finish()
        });
        Dfa {
            classes,
            stride,
            table,
            specials: specials.into(),
            special_ranges: special_ranges.into(),
            exit: exit.into(),
            has_out: has_out.into(),
            forced: forced.into(),
            text_to_exit: text_to_exit.into(),
            start: 0,
            num_exits,
            hash,
        }
    }

    /// A trie over `strings` (sorted, deduplicated, non-empty): one class per byte that occurs
    /// plus one for all others, states numbered in the trie's pre-order. The trie is a function
    /// of the set, so the set's hash is the automaton's: equal sets share cached masks.
    fn trie(strings: &[&[u8]]) -> Dfa {
        let mut classes = [0u8; 256];
        let mut used = [false; 256];
        strings
            .iter()
            .flat_map(|s| s.iter())
            .for_each(|&b| used[b as usize] = true);
        // Class 0 holds the bytes no string uses, if there are any.
        let mut stride = usize::from(used.contains(&false));
        for b in 0..256 {
            if used[b] {
                classes[b] = stride as u8;
                stride += 1;
            }
        }
        let mut table: Vec<u32> = vec![DEAD; stride];
        let mut exit = vec![NONE];
        for s in strings {
            let mut state = 0usize;
            for &b in s.iter() {
                let slot = state * stride + classes[b as usize] as usize;
                if table[slot] == DEAD {
                    table[slot] = exit.len() as u32;
                    exit.push(NONE);
                    table.extend(std::iter::repeat_n(DEAD, stride));
                }
                state = table[slot] as usize;
            }
            exit[state] = 0;
        }
        let mut h = StructHasher::new(0xc401);
        h.word(strings.len() as u64);
        strings.iter().for_each(|s| {
            h.bytes(s);
        });
        let m = exit.len();
        Dfa::from_table(
            classes,
            stride,
            table.into(),
            Vec::new(),
            vec![0; m + 1],
            exit,
            Some(h.finish()),
        )
    }
}

/// A compile-time limit reached while building a leaf.
fn leaf_limit(e: LimitExceeded) -> CompileError {
    CompileError::over_limit(e, Location::None, "operator leaf")
}

/// Builds a leaf DFA from a regex-syntax HIR through regex-automata's determinizer. Returns
/// `Ok(None)` if the DFA would exceed `state_limit` states (the caller then composes operators
/// instead), `Err` with kind `EmptyLanguage` if the HIR matches nothing, or `Limit` past the
/// deadline. regex-automata's own size limits bound the NFA and the determinization (the
/// caller keeps the HIR small: see `FUSION_WORK` in `lower.rs`); the copy into a leaf ticks
/// the deadline per state.
pub(crate) fn dfa_from_hir(
    hir: &regex_syntax::hir::Hir,
    state_limit: usize,
    deadline: &Deadline,
) -> Result<Option<Dfa>, CompileError> {
    use regex_automata::nfa::thompson;
    let nfa = match thompson::Compiler::new()
        .configure(
            thompson::Config::new()
                .utf8(false)
                .shrink(true)
                .which_captures(thompson::WhichCaptures::None)
                .nfa_size_limit(Some(state_limit.saturating_mul(2048))),
        )
        .build_from_hir(hir)
    {
        Ok(nfa) => nfa,
        Err(_) => return Ok(None),
    };
    // The dense DFA's size limit is in bytes; a state costs a row of (at most) 257 u32s.
    let byte_limit = state_limit.saturating_mul(257 * 4);
    let dfa = match dense::Builder::new()
        .configure(
            dense::Config::new()
                .start_kind(regex_automata::dfa::StartKind::Anchored)
                .match_kind(MatchKind::All)
                .minimize(false)
                .dfa_size_limit(Some(byte_limit))
                .determinize_size_limit(Some(byte_limit.saturating_mul(2))),
        )
        .build_from_nfa(&nfa)
    {
        Ok(dfa) => dfa,
        Err(_) => return Ok(None),
    };
    let start = dfa
        .start_state(&start::Config::new().anchored(Anchored::Yes))
        .map_err(|e| CompileError::unplaced(CompileErrorKind::Unsupported, e.to_string()))?;
    let mut raw = RawDfa::default();
    let mut ids: HashMap<regex_automata::util::primitives::StateID, u32> = HashMap::new();
    let mut queue = VecDeque::new();
    let accepts = |s| dfa.is_match_state(dfa.next_eoi_state(s));
    ids.insert(start, raw.add_state(accepts(start).then_some(0)));
    queue.push_back(start);
    while let Some(s) = queue.pop_front() {
        deadline.tick().map_err(leaf_limit)?;
        // Every queued state was numbered when it was queued.
        let from = ids[&s];
        for b in 0..=255u8 {
            let t = dfa.next_state(s, b);
            if dfa.is_dead_state(t) || dfa.is_quit_state(t) {
                continue;
            }
            let to = match ids.get(&t) {
                Some(&to) => to,
                None => {
                    let to = raw.add_state(accepts(t).then_some(0));
                    ids.insert(t, to);
                    queue.push_back(t);
                    to
                }
            };
            raw.rows[from as usize][b as usize] = to;
        }
        if raw.rows.len() > state_limit {
            return Ok(None);
        }
    }
    raw.finish()
        .map(Some)
        .ok_or_else(|| CompileError::unplaced(CompileErrorKind::EmptyLanguage, "matches no string"))
}

/// What ends a `Wait`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Terminator {
    /// A text literal.
    Text(Vec<u8>),
    /// A special token.
    Special(TokenId),
}

/// Builds the leaf of a `Wait`: content (strings of `content`, a leaf whose exit states mark
/// where content may stop) up to the *first* occurrence of any terminator; exit index `i` =
/// terminator `i` matched. When two text terminators end at the same byte, the earlier one in
/// the list wins.
///
/// The product of the content DFA and an Aho–Corasick automaton over the text terminators:
/// the content DFA is fed only *committed* bytes — bytes that can no longer be the start of a
/// terminator — so the terminator itself is never content.
pub(crate) fn wait_leaf(
    content: &Leaf,
    terminators: &[Terminator],
    max_states: usize,
    deadline: &Deadline,
) -> Result<Leaf, CompileError> {
    use aho_corasick::automaton::Automaton as _;
    let texts: Vec<(usize, &[u8])> = terminators
        .iter()
        .enumerate()
        .filter_map(|(i, t)| match t {
            Terminator::Text(b) if !b.is_empty() => Some((i, b.as_slice())),
            Terminator::Text(_) => None,
            Terminator::Special(_) => None,
        })
        .collect();
    if terminators
        .iter()
        .any(|t| matches!(t, Terminator::Text(b) if b.is_empty()))
    {
        return Err(CompileError::unplaced(
            CompileErrorKind::Invalid,
            "a Wait terminator is empty",
        ));
    }
    if terminators.is_empty() {
        return Err(CompileError::unplaced(
            CompileErrorKind::Invalid,
            "a Wait needs a terminator",
        ));
    }
    let ac = aho_corasick::dfa::DFA::builder()
        .match_kind(aho_corasick::MatchKind::Standard)
        .start_kind(aho_corasick::StartKind::Unanchored)
        .build(texts.iter().map(|t| t.1))
        .map_err(|e| {
            CompileError::unplaced(CompileErrorKind::Limit, format!("terminators: {e}"))
        })?;
    let ac_start = ac.start_state(aho_corasick::Anchored::No).map_err(|e| {
        CompileError::unplaced(CompileErrorKind::Limit, format!("terminators: {e}"))
    })?;
    // Pending bytes of an AC state: the shortest path to it is the terminator prefix it stands for.
    let mut pending: HashMap<aho_corasick::automaton::StateID, Vec<u8>> = HashMap::new();
    pending.insert(ac_start, Vec::new());
    let mut queue = VecDeque::from([ac_start]);
    while let Some(a) = queue.pop_front() {
        deadline.tick().map_err(leaf_limit)?;
        for b in 0..=255u8 {
            let t = ac.next_state(aho_corasick::Anchored::No, a, b);
            if !ac.is_match(t) && !pending.contains_key(&t) {
                // `a` was given its pending bytes before it was queued.
                let mut p = pending[&a].clone();
                p.push(b);
                pending.insert(t, p);
                queue.push_back(t);
            }
        }
    }
    let feed = |mut c: u32, bytes: &[u8]| {
        for &b in bytes {
            if c == DEAD {
                break;
            }
            c = content.step(c, b as u32);
        }
        c
    };
    let content_accepts = |c: u32| c != DEAD && content.exit(c).is_some();

    let mut raw = RawDfa::default();
    let finals: Vec<u32> = (0..terminators.len())
        .map(|i| raw.add_state(Some(i as u32)))
        .collect();
    let mut ids: HashMap<(u32, aho_corasick::automaton::StateID), u32> = HashMap::new();
    let mut queue = VecDeque::new();
    let start = (content.start(), ac_start);
    raw.start = raw.add_state(None);
    ids.insert(start, raw.start);
    queue.push_back(start);
    while let Some((c, a)) = queue.pop_front() {
        deadline.tick().map_err(leaf_limit)?;
        // Queued pairs were numbered when queued, and every non-matching AC state has its
        // pending bytes (the first pass visited them all).
        let from = ids[&(c, a)];
        let pend = &pending[&a];
        for b in 0..=255u8 {
            let t = ac.next_state(aho_corasick::Anchored::No, a, b);
            let target = if ac.is_match(t) {
                // A match state matches at least one pattern.
                let pattern = (0..ac.match_len(t))
                    .map(|i| ac.match_pattern(t, i).as_usize())
                    .min()
                    .unwrap_or_default();
                let (index, term) = texts[pattern];
                // Content is everything before the terminator.
                let mut all = pend.clone();
                all.push(b);
                let before = &all[..all.len() - term.len()];
                if !content_accepts(feed(c, before)) {
                    continue;
                }
                finals[index]
            } else {
                let next_pend = &pending[&t];
                let committed = pend.len() + 1 - next_pend.len();
                let mut all = pend.clone();
                all.push(b);
                let c2 = feed(c, &all[..committed]);
                if c2 == DEAD {
                    continue;
                }
                match ids.get(&(c2, t)) {
                    Some(&s) => s,
                    None => {
                        let s = raw.add_state(None);
                        ids.insert((c2, t), s);
                        queue.push_back((c2, t));
                        s
                    }
                }
            };
            raw.rows[from as usize][b as usize] = target;
        }
        for (i, term) in terminators.iter().enumerate() {
            if let Terminator::Special(id) = term {
                if content_accepts(feed(c, pend)) {
                    raw.specials[from as usize].push((SPECIAL_BASE + id, finals[i]));
                }
            }
        }
        if raw.rows.len() > max_states {
            let exceeded = LimitExceeded {
                kind: LimitKind::AutomatonStates,
                value: raw.rows.len() as u64,
                max: max_states as u64,
            };
            return Err(CompileError::over_limit(
                exceeded,
                Location::None,
                "Wait automaton",
            ));
        }
    }
    raw.finish().map(Leaf::Dfa).ok_or_else(|| {
        CompileError::unplaced(CompileErrorKind::EmptyLanguage, "Wait can never end")
    })
}
