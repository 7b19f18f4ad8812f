//! Equivalent states of a unit merged: Hopcroft's algorithm (`automata::minimize`) for
//! deterministic units, bisimulation by signatures for the others.

use super::{compile_time, FState, Fsm};
use crate::automata::interner::SliceInterner;
use crate::automata::minimize::hopcroft;
use crate::error::CompileError;
use crate::limits::Deadline;

/// Merges equivalent states: equivalent states of a unit become one, so they share one cached
/// mask classification and one structural hash.
///
/// A deterministic automaton (with `CfgConfig::minimize`; the epsilon-removal fallback may
/// happen to be one) is refined with Hopcroft's algorithm, `O(m log n)`: the subset construction of a keyword trie with
/// JSON escapes yields chains hundreds of states deep, on which signature refinement needs
/// one full pass per level. The nondeterministic fallback is refined to bisimilarity by
/// signatures (sound there too: bisimilar states accept the same language).
///
/// Bisimulation needs a pass per level of the automaton's longest distinguishing chain, so it
/// gets a budget of passes over its edges (`work`, what is left of the grammar's; each unit
/// at most [`BISIMULATION_WORK`]); past it the automaton is kept as it is (correct, with larger
/// Earley rows). A 10 MB grammar's fallback unit took 50 s and 2 GB without one.
pub(super) fn minimize(f: Fsm, deadline: &Deadline, work: &mut usize) -> Result<Fsm, CompileError> {
    let partition = match edge_labels(&f) {
        Some(labels) => {
            let finals: Vec<bool> = f.states.iter().map(|s| s.final_).collect();
            Some(hopcroft(&finals, &labels, deadline).map_err(compile_time)?)
        }
        None => {
            let mut allowance = BISIMULATION_WORK.min(*work);
            let blocks = bisimulation(&f, &mut allowance, deadline)?;
            *work -= BISIMULATION_WORK.min(*work) - allowance;
            blocks
        }
    };
    match partition {
        Some((block, blocks)) if blocks < f.states.len() => quotient(&f, &block, blocks, deadline),
        _ => Ok(f),
    }
}

/// Edges [`bisimulation`] may visit in all its passes (each pass visits every edge), per unit
/// and per grammar.
pub(super) const BISIMULATION_WORK: usize = 1 << 24;

pub(super) const TOTAL_BISIMULATION_WORK: usize = 1 << 25;

/// Every edge of `f` as `(label, source, target)`, labels dense (byte classes, then specials,
/// then calls); `None` if some state has two edges with one label.
pub(super) fn edge_labels(f: &Fsm) -> Option<Vec<(u32, u32, u32)>> {
    let specials = f
        .states
        .iter()
        .flat_map(|s| &s.specials)
        .map(|e| e.0 + 1)
        .max();
    let special_base = 256;
    let call_base = special_base + specials.unwrap_or(0);
    let mut edges = Vec::new();
    for (i, s) in f.states.iter().enumerate() {
        let first = edges.len();
        let i = i as u32;
        edges.extend(s.bytes.iter().map(|&(c, t)| (c as u32, i, t)));
        edges.extend(s.specials.iter().map(|&(x, t)| (special_base + x, i, t)));
        edges.extend(s.calls.iter().map(|&(u, t)| (call_base + u, i, t)));
        let mine = &mut edges[first..];
        mine.sort_unstable();
        if mine.windows(2).any(|w| w[0].0 == w[1].0) {
            return None;
        }
    }
    Some(edges)
}

/// Coarsest bisimulation of a nondeterministic automaton by signature refinement: the block of
/// each state and the number of blocks; `None` if the passes would visit more than `work`
/// edges (a partition coarser than the bisimulation would merge states that differ, so
/// there is no stopping half way).
pub(super) fn bisimulation(
    f: &Fsm,
    work: &mut usize,
    deadline: &Deadline,
) -> Result<Option<(Vec<u32>, usize)>, CompileError> {
    let n = f.states.len();
    let edges = f.size();
    let mut block: Vec<u32> = f.states.iter().map(|s| s.final_ as u32).collect();
    let mut blocks = 0;
    let mut ids = SliceInterner::default();
    let mut sig: Vec<u32> = Vec::new();
    let mut triples: Vec<(u32, u32, u32)> = Vec::new();
    loop {
        *work = match work.checked_sub(edges) {
            Some(left) => left,
            None => {
                // Giving up wasted what was given.
                *work = 0;
                return Ok(None);
            }
        };
        ids.clear();
        let mut next = vec![0u32; n];
        for (i, s) in f.states.iter().enumerate() {
            deadline.tick().map_err(compile_time)?;
            // (kind, label, target block): bytes 0, specials 1, calls 2.
            triples.clear();
            triples.extend(
                s.bytes
                    .iter()
                    .map(|&(c, t)| (0, c as u32, block[t as usize])),
            );
            triples.extend(s.specials.iter().map(|&(x, t)| (1, x, block[t as usize])));
            triples.extend(s.calls.iter().map(|&(u, t)| (2, u, block[t as usize])));
            triples.sort_unstable();
            triples.dedup();
            sig.clear();
            sig.push(block[i]);
            sig.extend(triples.iter().flat_map(|&(a, b, c)| [a, b, c]));
            next[i] = ids.intern(&sig).0;
        }
        block = next;
        if ids.len() == blocks {
            return Ok(Some((block, blocks)));
        }
        blocks = ids.len();
    }
}

/// The automaton of the blocks; the start's block is state 0, the others in order of first
/// appearance.
pub(super) fn quotient(
    f: &Fsm,
    block: &[u32],
    blocks: usize,
    deadline: &Deadline,
) -> Result<Fsm, CompileError> {
    let mut order = vec![u32::MAX; blocks];
    let mut count = 0;
    order[block[0] as usize] = 0;
    count += 1;
    for &b in block {
        if order[b as usize] == u32::MAX {
            order[b as usize] = count;
            count += 1;
        }
    }
    let mut states = vec![FState::default(); blocks];
    let mut done = vec![false; blocks];
    for (i, s) in f.states.iter().enumerate() {
        deadline.tick().map_err(compile_time)?;
        let b = order[block[i] as usize] as usize;
        if std::mem::replace(&mut done[b], true) {
            continue;
        }
        let map = |t: u32| order[block[t as usize] as usize];
        let mut bytes: Vec<(u8, u32)> = s.bytes.iter().map(|&(c, t)| (c, map(t))).collect();
        bytes.sort_unstable();
        bytes.dedup();
        let mut specials: Vec<(u32, u32)> = s.specials.iter().map(|&(x, t)| (x, map(t))).collect();
        specials.sort_unstable();
        specials.dedup();
        let mut calls: Vec<(u32, u32)> = s.calls.iter().map(|&(x, t)| (x, map(t))).collect();
        calls.sort_unstable();
        calls.dedup();
        states[b] = FState {
            final_: s.final_,
            bytes,
            specials,
            calls,
        };
    }
    Ok(Fsm {
        states,
        classes: f.classes.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::byteset::ByteSet;

    fn next(seed: &mut u64, n: u32) -> u32 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        (*seed % n as u64) as u32
    }

    /// Edges on some of `labels` labels, to random states of `n`.
    fn edges(seed: &mut u64, labels: u32, n: u32) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        for label in 0..labels {
            if next(seed, 3) > 0 {
                out.push((label, next(seed, n)));
            }
        }
        out
    }

    /// A random partial deterministic automaton over 4 byte classes, 2 specials and 2 calls.
    fn random_dfa(seed: &mut u64) -> Fsm {
        let n = 1 + next(seed, 40);
        let mut states = Vec::new();
        for _ in 0..n {
            let bytes = edges(seed, 4, n);
            states.push(FState {
                final_: next(seed, 4) == 0,
                bytes: bytes.into_iter().map(|(c, t)| (c as u8, t)).collect(),
                specials: edges(seed, 2, n),
                calls: edges(seed, 2, n),
            });
        }
        Fsm {
            states,
            classes: (0..4).map(ByteSet::byte).collect(),
        }
    }

    #[test]
    fn hopcroft_finds_the_partition_of_signature_refinement() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..500 {
            let f = random_dfa(&mut seed);
            let labels = edge_labels(&f).expect("deterministic by construction");
            let never = Deadline::never();
            let finals: Vec<bool> = f.states.iter().map(|s| s.final_).collect();
            let (fast, fast_blocks) = hopcroft(&finals, &labels, &never).unwrap();
            let (slow, slow_blocks) = bisimulation(&f, &mut { usize::MAX }, &never)
                .unwrap()
                .unwrap();
            assert_eq!(fast_blocks, slow_blocks);
            for i in 0..f.states.len() {
                for j in 0..f.states.len() {
                    assert_eq!(fast[i] == fast[j], slow[i] == slow[j], "states {i}, {j}");
                }
            }
        }
    }

    /// A nondeterministic chain a thousand states long needs a pass per state: past its
    /// budget of edge visits bisimulation gives up (a coarser partition would merge states
    /// that differ), and minimization keeps the automaton as it is.
    #[test]
    fn bisimulation_gives_up_past_its_budget() {
        let n = 1_000;
        let mut f = Fsm {
            states: vec![FState::default(); n + 1],
            classes: vec![ByteSet::byte(0)],
        };
        for i in 0..n {
            f.states[i].bytes = vec![(0, i as u32 + 1)];
        }
        f.states[0].bytes.push((0, 0));
        f.states[n].final_ = true;
        let never = Deadline::never();
        assert!(edge_labels(&f).is_none());
        assert!(bisimulation(&f, &mut (100 * n), &never).unwrap().is_none());
        let (_, blocks) = bisimulation(&f, &mut { usize::MAX }, &never)
            .unwrap()
            .unwrap();
        assert_eq!(blocks, n + 1);
        let mut work = 100 * n;
        assert_eq!(
            minimize(f.clone(), &never, &mut work).unwrap().states.len(),
            n + 1
        );
        assert_eq!(work, 0, "the work given is spent");
    }

    #[test]
    fn two_edges_with_one_label_are_refined_by_signatures() {
        let mut f = Fsm {
            states: vec![FState::default(); 3],
            classes: vec![ByteSet::byte(0)],
        };
        f.states[0].bytes = vec![(0, 1), (0, 2)];
        f.states[1].final_ = true;
        f.states[2].final_ = true;
        assert!(edge_labels(&f).is_none());
        // The two targets are bisimilar: one state of three goes.
        let never = Deadline::never();
        assert_eq!(
            minimize(f, &never, &mut { usize::MAX })
                .unwrap()
                .states
                .len(),
            2
        );
    }
}
