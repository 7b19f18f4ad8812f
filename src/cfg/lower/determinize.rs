//! A unit's NFA to its automaton: the subset construction within a work budget, or plain
//! epsilon removal past it.

use super::*;
use crate::automata::determinize::{Closure, Stop, Worklist};
use crate::automata::interner::SliceInterner;

/// NFA states the subset construction of one unit may visit (summed over the subsets it
/// expands and the ones it closes) before it gives up like past its state budget, and the
/// units of one grammar together. A unit whose subsets are large (nested optional repeats:
/// every subset holds a state per level) could otherwise spend seconds before reaching that
/// budget, and such a grammar has hundreds of them. On MaskBench one unit visits at most
/// 785k, and the largest schema (eslintrc, 1.2M states) 67M in all.
pub(super) const DETERMINIZE_WORK: usize = 1 << 22;

pub(super) const TOTAL_DETERMINIZE_WORK: usize = 1 << 26;

/// How [`determinize`] builds a unit's automaton.
pub(super) enum Construction<'w> {
    /// The subset construction, within the NFA states its subsets may visit (summed over
    /// them, what is left is written back) and the DFA state budget; `None` past either.
    Subsets(&'w mut usize),
    /// Plain epsilon removal: one state per NFA state, several targets per class allowed.
    /// A state takes the edges of its whole closure, so nested optional parts give it
    /// quadratically many; its states and edges count toward the grammar size, of which the
    /// program has `used` already (a `GrammarSize` error past it).
    EpsilonFree { used: usize },
}

/// The automaton of a unit's NFA, built as `construction` says; `None` past the subset
/// construction's state cap or work budget.
// Long: one worklist loop of the subset construction (or epsilon removal); the closures it
// calls per state share the work budget, the marks and the edge buffers reused across states.
pub(super) fn determinize(
    nfa: &Nfa,
    labels: &[ByteSet],
    nc: usize,
    start: u32,
    accept: u32,
    options: &CompileOptions,
    deadline: &Deadline,
    construction: Construction,
) -> Result<Option<Fsm>, CompileError> {
    // DFA states are sets of NFA states (closed under epsilon); with epsilon removal, single
    // NFA states, closed when they are expanded.
    let (dfa, mut sets, mut size) = match construction {
        Construction::Subsets(work) => {
            let sets = Worklist::new(SliceInterner::default(), options.max_dfa_states);
            (true, sets.with_work(work), 0)
        }
        Construction::EpsilonFree { used } => {
            let sets = Worklist::new(SliceInterner::default(), usize::MAX);
            (false, sets, used)
        }
    };
    let mut closure = Closure::new(nfa.len());
    let eps = |s: u32| nfa.eps[s as usize].iter().copied();
    let mut members: Vec<u32> = vec![start];
    if dfa {
        closure.close(&mut members, eps);
    }
    sets.add(&members);
    let mut fsm = Fsm::default();
    let mut by_class: Vec<Vec<u32>> = vec![Vec::new(); nc];
    // `(special or unit, target)` of the members' special and call edges.
    let mut specials: Vec<(u32, u32)> = Vec::new();
    let mut calls: Vec<(u32, u32)> = Vec::new();
    let mut scratch: Vec<u32> = Vec::new();
    let mut ids_out: SmallVec<[u32; 4]> = SmallVec::new();
    // The state's edges, built here and copied out at their exact size (growing three vectors
    // per state was a third of the subset construction's time, in the allocator).
    let mut bytes_out: Vec<(u8, u32)> = Vec::new();
    let mut labelled_out: Vec<(u32, u32)> = Vec::new();
    // The loop, with `?` for the worklist's stops and errors alike.
    let mut expand = || -> Result<(), Failure> {
        while let Some(id) = sets.next(deadline)? {
            members.clear();
            members.extend_from_slice(sets.key(id));
            sets.spend(members.len())?;
            if !dfa {
                closure.close(&mut members, eps);
            }
            // The classes some member reads: a state reads a few of the unit's classes, and
            // scanning all of them per state was a twentieth of the construction.
            let mut read = ByteSet::EMPTY;
            specials.clear();
            calls.clear();
            for &s in &members {
                for &(label, t) in &nfa.edges[s as usize] {
                    match label {
                        Label::Classes(k) => labels[k as usize].iter().for_each(|c| {
                            read.insert(c);
                            by_class[c as usize].push(t);
                        }),
                        Label::Special(sid) => specials.push((sid, t)),
                        Label::Call(u) => calls.push((u, t)),
                    }
                }
            }
            // The states reached from the targets in `scratch`: one closed subset (dfa), or
            // the targets themselves (epsilon removal). Closing the targets of every class is
            // where large subsets cost, so it spends the work budget.
            let mut intern =
                |scratch: &mut Vec<u32>, out: &mut SmallVec<[u32; 4]>| -> Result<(), Stop> {
                    out.clear();
                    if dfa {
                        closure.close(scratch, eps);
                        sets.spend(scratch.len())?;
                        scratch.dedup();
                        out.push(sets.add(scratch));
                    } else {
                        scratch.sort_unstable();
                        scratch.dedup();
                        out.extend(scratch.iter().map(|&t| sets.add(&[t])));
                    }
                    Ok(())
                };
            // Consecutive classes often share their targets.
            bytes_out.clear();
            let mut prev: Option<u8> = None;
            for c in read.iter() {
                if prev.is_none_or(|p| by_class[p as usize] != by_class[c as usize]) {
                    scratch.clear();
                    scratch.extend_from_slice(&by_class[c as usize]);
                    intern(&mut scratch, &mut ids_out)?;
                    if let Some(p) = prev {
                        by_class[p as usize].clear();
                    }
                    prev = Some(c);
                } else {
                    by_class[c as usize].clear();
                }
                bytes_out.extend(ids_out.iter().map(|&id| (c, id)));
            }
            if let Some(p) = prev {
                by_class[p as usize].clear();
            }
            let mut grouped = |edges: &mut Vec<(u32, u32)>, out: &mut Vec<(u32, u32)>| {
                edges.sort_unstable();
                out.clear();
                for group in edges.chunk_by(|a, b| a.0 == b.0) {
                    scratch.clear();
                    scratch.extend(group.iter().map(|e| e.1));
                    intern(&mut scratch, &mut ids_out)?;
                    out.extend(ids_out.iter().map(|&id| (group[0].0, id)));
                }
                Ok::<_, Stop>(out.as_slice().into())
            };
            let specials = grouped(&mut specials, &mut labelled_out)?;
            let calls = grouped(&mut calls, &mut labelled_out)?;
            let st = FState {
                final_: members.binary_search(&accept).is_ok(),
                bytes: bytes_out.as_slice().into(),
                specials,
                calls,
            };
            if !dfa {
                size += st.size();
                if size > options.max_states {
                    return Err(Failure::Error(too_many_states(
                        size,
                        options.max_states,
                        "a nondeterministic unit of the grammar",
                    )));
                }
            }
            fsm.states.push(st);
        }
        Ok(())
    };
    match expand() {
        Ok(()) => Ok(Some(fsm)),
        Err(Failure::Stopped(Stop::States | Stop::Work)) => Ok(None),
        Err(Failure::Stopped(Stop::Time(exceeded))) => Err(compile_time(exceeded)),
        Err(Failure::Error(e)) => Err(e),
    }
}

/// Why the subset construction gave up: a limit of its own (its caller then removes epsilons
/// instead) or an error.
enum Failure {
    Stopped(Stop),
    Error(CompileError),
}

impl From<Stop> for Failure {
    fn from(stop: Stop) -> Failure {
        Failure::Stopped(stop)
    }
}
