//! How far a unit's own byte transitions carry every string of a token slice: the static
//! proof a sliced walk uses where its pair proof cannot end.
//!
//! A string whose length is bounded by its automaton (`minLength`/`maxLength` with a searched
//! `pattern`: the product of a character counter and the pattern's states, hundreds of states
//! in a chain) dies after its last character on every slice string long enough, so the pair
//! proof of [`walk_sliced`](crate::vocab::walk_sliced), which asks for survival of strings of
//! every length, fails in each of its states, and each position of the string walked the whole
//! trie through Earley rows (MaskBench Github_hard---o45481: 147k tokens allowed, ~7 ms a
//! step). A token has at most [`Vocab::max_token_len`](crate::vocab::Vocab::max_token_len)
//! bytes, so surviving that many is enough: here that is read off the unit's transitions, the
//! length of the shortest slice string each (unit state, slice state) pair rejects.
//!
//! A state that calls a unit which alone, by its own transitions, takes every string of the
//! slice from there survives every string too: a property name outside a bounded pattern
//! (`^[a-zA-Z0-9_-]{0,250}$` in `patternProperties`, any other name allowed) counts its
//! characters in one unit and, at the first one outside the pattern, calls the shared text of
//! any name. Without that call every position of such a name walked the whole trie (MaskBench
//! Github_easy---o64731: ~1.1 ms a step, 4.5 ms after `{"`). Other calls stay unknown, so the
//! bound stays sound: a callee that ends and returns is never counted on.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use crate::base::byteset::ByteSet;
use crate::cfg::chart::Halt;
use crate::cfg::program::{Program, CALLS, COUNTED, DEAD, MULTI};
use crate::limits::Budget;
use crate::vocab::{SliceState, TokenSlice};

/// Shortest rejected lengths, by (slice index with calls in the high bit, unit state, slice
/// state), capped at [`Horizons::CAP`]; kept with the grammar's shared row DFA, whose byte
/// limit counts them.
#[derive(Default)]
pub(crate) struct Horizons {
    known: FxHashMap<(u8, u32, SliceState), u16>,
    /// By (slice index, slice state): the least byte of each class the slice goes on with
    /// (inside a UTF-8 character, a few of the grammar's ~80 classes).
    goes_on: FxHashMap<(u8, SliceState), Box<[u8]>>,
}

/// Most callees of one state whose start states are explored: each exploration may visit
/// [`MAX_PAIRS`], and a state calling many units (an alternation's branches) is not the shape
/// this is for (a name's tail call into the shared text).
const MAX_CALLEES: usize = 4;

/// Most pairs one exploration visits: a chain of a 255-character string's states, each at
/// every UTF-8 position, is a few thousand; past it the walk falls back to its pair proof.
const MAX_PAIRS: usize = 1 << 16;

impl Horizons {
    /// Lengths at or past it are all alike ("never within a token").
    pub(crate) const CAP: u16 = u16::MAX;

    /// Bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.known.capacity() * (std::mem::size_of::<((u8, u32, SliceState), u16)>() + 1)
            + self.goes_on.values().map(|b| b.len() + 32).sum::<usize>()
    }

    /// How many bytes of every string of slice `k`'s language from slice state `at` does
    /// `state` alone take by its unit's own byte transitions, or by a callee that takes them
    /// all (`usize::MAX`: all)? `classes` are the bytes both the slice and the program treat
    /// alike, by least byte. 0 also when not known (too many pairs).
    ///
    /// Where a transition has several targets, the items it makes reject a string only if
    /// each does, so their shortest rejected length is at least the longest of theirs: that
    /// bound is what is kept (exact for deterministic units, sound for the rest).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn horizon(
        &mut self,
        prog: &Program,
        k: usize,
        slice: &TokenSlice,
        classes: &[(u8, ByteSet)],
        state: u32,
        at: SliceState,
        budget: &Budget,
    ) -> Result<usize, Halt> {
        let query = Query {
            prog,
            k: k as u8,
            slice,
            classes,
            budget,
        };
        Ok(taken(self.shortest_rejected(&query, state, at, true)?))
    }

    /// Does a unit `state` calls take every string of slice `k` from `at` by its own
    /// transitions? Its start state's shortest rejected length is found without looking at
    /// its own calls, so this never goes deeper than one call. A callee not built yet halts
    /// ([`Halt::Unbuilt`]).
    fn callee_takes_all(&mut self, q: &Query, state: u32, at: SliceState) -> Result<bool, Halt> {
        let prog = q.prog;
        let st = prog.state(state);
        let calls = prog.calls_of(state);
        if st.flags & CALLS == 0 || st.flags & COUNTED != 0 || calls.len() > MAX_CALLEES {
            return Ok(false);
        }
        for call in calls {
            let callee = &prog.units[call.unit as usize];
            // Built like a unit a walk's parse enters (the state is reached by a slice
            // string): a proof kept without it would stay unknown after it is built.
            if !callee.is_built() {
                return Err(Halt::Unbuilt(vec![call.unit]));
            }
            let start = callee.start;
            if self.shortest_rejected(q, start, at, false)? == Horizons::CAP {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The shortest rejected length of (`state`, `at`) (see [`Horizons::horizon`]); with
    /// `calls`, a state with a callee that takes every string rejects none. Past
    /// [`MAX_PAIRS`] the asked pair is kept as rejecting a byte: nothing known, not asked again.
    // Long: one exploration of the pairs reachable from the asked one, then a pass backwards
    // from the pairs that reject a byte, sharing the node numbering.
    fn shortest_rejected(
        &mut self,
        query: &Query,
        state: u32,
        at: SliceState,
        calls: bool,
    ) -> Result<u16, Halt> {
        let Query {
            prog,
            k,
            slice,
            classes,
            budget,
        } = *query;
        // Lengths found with calls and without are kept apart: one found without stands
        // for less than it could with.
        let memo = k | u8::from(calls) << 7;
        if let Some(&shortest) = self.known.get(&(memo, state, at)) {
            return Ok(shortest);
        }
        // Nodes: pairs (explored in order of discovery, or known from earlier explorations)
        // and, for a transition with several targets, a node standing for all of them.
        let mut index: FxHashMap<(u32, SliceState), u32> = FxHashMap::default();
        let mut nodes: Vec<Node> = vec![Node::Pair(state, at)];
        index.insert((state, at), 0);
        let mut shortest: Vec<u16> = vec![Horizons::CAP];
        let mut predecessors: Vec<Vec<u32>> = vec![Vec::new()];
        let mut pair_of = |pair: (u32, SliceState),
                           known: &FxHashMap<(u8, u32, SliceState), u16>,
                           nodes: &mut Vec<Node>,
                           shortest: &mut Vec<u16>,
                           predecessors: &mut Vec<Vec<u32>>|
         -> Option<u32> {
            if let Some(&id) = index.get(&pair) {
                return Some(id);
            }
            if nodes.len() >= MAX_PAIRS {
                return None;
            }
            let id = nodes.len() as u32;
            index.insert(pair, id);
            let known = known.get(&(memo, pair.0, pair.1)).copied();
            nodes.push(match known {
                Some(_) => Node::Known,
                None => Node::Pair(pair.0, pair.1),
            });
            shortest.push(known.unwrap_or(Horizons::CAP));
            predecessors.push(Vec::new());
            Some(id)
        };
        let mut i = 0;
        while i < nodes.len() {
            let Node::Pair(q, s) = nodes[i] else {
                i += 1;
                continue;
            };
            let from = i as u32;
            i += 1;
            if calls && self.callee_takes_all(query, q, s)? {
                // Rejects nothing: its shortest stays the cap, and no successor lowers it.
                nodes[from as usize] = Node::Known;
                continue;
            }
            let goes_on = self.goes_on.entry((k, s)).or_insert_with(|| {
                let on = classes.iter().map(|&(b, _)| b);
                on.filter(|&b| slice.next(s, b).is_some()).collect()
            });
            budget.spend(goes_on.len() as u64)?;
            // Runs of classes lead to the same targets (a string's characters): an edge each.
            let mut previous = None;
            for &byte in goes_on.iter() {
                let s2 = slice.next(s, byte).expect("the slice goes on");
                let e = prog.entry(q, prog.alphabet.class_of[byte as usize] as usize);
                if e == DEAD {
                    shortest[from as usize] = 1;
                    break;
                }
                if previous.replace((e, s2)) == Some((e, s2)) {
                    continue;
                }
                // Several targets: a node standing for all of them, between them and `from`.
                let (targets, parent) = match e & MULTI {
                    0 => (std::slice::from_ref(&e), from),
                    _ => {
                        let targets = prog.targets(e);
                        nodes.push(Node::All(targets.len() as u32));
                        shortest.push(Horizons::CAP);
                        predecessors.push(vec![from]);
                        (targets, nodes.len() as u32 - 1)
                    }
                };
                for &t in targets {
                    let pair = (t, s2);
                    let known = &self.known;
                    let Some(id) =
                        pair_of(pair, known, &mut nodes, &mut shortest, &mut predecessors)
                    else {
                        return Ok(self.unknown(memo, state, at));
                    };
                    predecessors[id as usize].push(parent);
                }
            }
        }
        // Shortest rejected lengths in increasing order (Knuth's generalization of Dijkstra,
        // unit weights): a pair is one more than its least successor, a node for several
        // targets is their greatest, known when the last of them is.
        let mut heap: BinaryHeap<Reverse<(u16, u32)>> = (0..nodes.len() as u32)
            .filter(|&p| shortest[p as usize] < Horizons::CAP)
            .map(|p| Reverse((shortest[p as usize], p)))
            .collect();
        let mut done = vec![false; nodes.len()];
        while let Some(Reverse((d, p))) = heap.pop() {
            if std::mem::replace(&mut done[p as usize], true) {
                continue;
            }
            for &q in &predecessors[p as usize] {
                let q = q as usize;
                let candidate = match &mut nodes[q] {
                    Node::All(left) => {
                        *left -= 1;
                        if *left > 0 {
                            continue;
                        }
                        d
                    }
                    _ => d.saturating_add(1),
                };
                if candidate < shortest[q] {
                    shortest[q] = candidate;
                    heap.push(Reverse((candidate, q as u32)));
                }
            }
        }
        for (&(q, s), &id) in &index {
            if !matches!(nodes[id as usize], Node::All(_)) {
                self.known.insert((memo, q, s), shortest[id as usize]);
            }
        }
        Ok(shortest[0])
    }

    /// Keeps the asked pair as rejecting a byte (nothing known: a sound bound, and the
    /// exploration past [`MAX_PAIRS`] is not tried again) and returns that.
    fn unknown(&mut self, memo: u8, state: u32, at: SliceState) -> u16 {
        self.known.insert((memo, state, at), 1);
        1
    }
}

/// The bytes taken before the shortest rejected length.
fn taken(shortest: u16) -> usize {
    match shortest {
        Horizons::CAP => usize::MAX,
        shortest => shortest as usize - 1,
    }
}

/// What the explorations of one [`Horizons::horizon`] read: the program, the slice (by index
/// and automaton), the bytes both treat alike by least byte, and the budget.
#[derive(Clone, Copy)]
struct Query<'a> {
    prog: &'a Program,
    k: u8,
    slice: &'a TokenSlice,
    classes: &'a [(u8, ByteSet)],
    budget: &'a Budget,
}

/// A node of [`Horizons::horizon`]' exploration.
enum Node {
    /// A unit state and a slice state, explored.
    Pair(u32, SliceState),
    /// A pair whose shortest rejected length an earlier exploration found.
    Known,
    /// The items of a transition with several targets: the targets not yet known.
    All(u32),
}
