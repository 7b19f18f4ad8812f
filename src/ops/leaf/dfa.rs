//! The table-driven leaf automaton over units ([`Dfa`]) and its constructions: from a DFA
//! under construction ([`RawDfa`], trimmed and class-compressed), as a trie of strings, and
//! from a regex through regex-automata ([`dfa_from_hir`]).

use std::collections::{HashMap, VecDeque};

use regex_automata::dfa::{dense, Automaton};
use regex_automata::util::start;
use regex_automata::{Anchored, MatchKind};

use super::{leaf_limit, DEAD, NONE, SPECIAL_BASE};
use crate::error::{CompileError, CompileErrorKind};
use crate::ir::StructHasher;
use crate::limits::Deadline;

/// A trimmed DFA over units: byte transitions in a class-compressed table, special-token
/// transitions in a sparse side table.
#[derive(Debug)]
pub struct Dfa {
    classes: [u8; 256],
    stride: usize,
    pub(super) table: Box<[u32]>,
    pub(super) specials: Box<[(u32, u32)]>,
    pub(super) special_ranges: Box<[u32]>,
    pub(super) exit: Box<[u32]>,
    pub(super) has_out: Box<[bool]>,
    pub(super) forced: Box<[u32]>,
    pub(super) text_to_exit: Box<[u32]>,
    /// Some byte string leads from a state back to it: the leaf reads text of any length.
    pub(super) loops: bool,
    pub(super) start: u32,
    pub(super) num_exits: u32,
    pub(super) hash: u128,
}

impl Dfa {
    #[inline]
    pub(super) fn step(&self, state: u32, unit: u32) -> u32 {
        if unit < SPECIAL_BASE {
            self.table[state as usize * self.stride + self.classes[unit as usize] as usize]
        } else {
            self.specials_of(state)
                .iter()
                .find(|&&(u, _)| u == unit)
                .map_or(DEAD, |&(_, next)| next)
        }
    }

    pub(super) fn specials_of(&self, state: u32) -> &[(u32, u32)] {
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
    // Long: the phases of completing a raw automaton in order (co-reachability, canonical
    // renumbering, byte classes, specials), each reading the tables of the one before.
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
    // Long: one pass per per-state fact (units leaving a state, forced unit, text distance to
    // an exit, structural hash), all over the same class-compressed table and the classes'
    // representative bytes.
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
        // A cycle of byte edges, by Kahn's algorithm: states left unpopped lie on or after one.
        let mut in_degree: Vec<u32> = (0..m).map(|t| rev_start[t + 1] - rev_start[t]).collect();
        let mut acyclic: Vec<u32> = (0..m as u32)
            .filter(|&t| in_degree[t as usize] == 0)
            .collect();
        let mut i = 0;
        while i < acyclic.len() {
            let s = acyclic[i] as usize;
            i += 1;
            for &t in row(s).iter().filter(|&&t| t != DEAD) {
                in_degree[t as usize] -= 1;
                if in_degree[t as usize] == 0 {
                    acyclic.push(t);
                }
            }
        }
        let loops = acyclic.len() < m;
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
            loops,
            start: 0,
            num_exits,
            hash,
        }
    }

    /// A trie over `strings` (sorted, deduplicated, non-empty): one class per byte that occurs
    /// plus one for all others, states numbered in the trie's pre-order. The trie is a function
    /// of the set, so the set's hash is the automaton's: equal sets share cached masks.
    pub(super) fn trie(strings: &[&[u8]]) -> Dfa {
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
