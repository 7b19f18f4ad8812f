//! Structural hashes of units and states: the keys of the cross-grammar mask cache.
//!
//! A state's hash identifies everything its classification depends on: its unit's automaton
//! (byte sets, special tokens, final states, counted bounds) and, through call edges, the
//! hashes of the units it can enter. States are numbered canonically (breadth-first from the
//! unit's start, edges in byte order), so two grammars that compile a sub-structure to the same
//! automaton get the same hashes wherever it appears. Mutually recursive units are hashed as
//! one group (each member by its position in it, as XGrammar 2's cycle hashing does).
//!
//! Equal hashes imply equal structure (up to a 128-bit collision): the serialization is
//! complete. Structures that are equal but numbered differently may hash differently, which
//! only costs sharing.

use super::program::{Program, MULTI};
use crate::base::byteset::ByteSet;
use crate::base::collections::FastMap;
use crate::error::CompileError;
use crate::ir::graph::strongly_connected;
use crate::ir::StructHasher;
use crate::limits::Deadline;

const UNIT_DOMAIN: u64 = 0x6366_6775_6e69_7401; // "cfgunit"
const SCC_DOMAIN: u64 = 0x6366_6773_6363_0002;
const STATE_DOMAIN: u64 = 0x6366_6773_7461_0003;

/// Hashes of every unit and state of a program.
#[derive(Debug)]
pub(crate) struct Hashes {
    state: Vec<u128>,
}

impl Hashes {
    /// The hashes of `prog`'s units and states (a tick of `deadline` per state).
    pub fn new(prog: &Program, deadline: &Deadline) -> Result<Hashes, CompileError> {
        let n = prog.units.len();
        let callees: Vec<Vec<usize>> = (0..n).map(|u| unit_callees(prog, u)).collect();
        let sccs = strongly_connected(n, |u| callees[u].clone());
        let mut unit_hash = vec![0u128; n];
        let mut canon = vec![u32::MAX; prog.states.len()];
        let mut member = vec![usize::MAX; n];
        for scc in &sccs {
            let mut members = scc.clone();
            members.sort_unstable();
            members.iter().enumerate().for_each(|(i, &u)| member[u] = i);
            let recursive = members.len() > 1 || callees[members[0]].contains(&members[0]);
            let callee_code = |u: usize| -> (u64, u128) {
                if member[u] != usize::MAX {
                    (1, member[u] as u128)
                } else {
                    (2, unit_hash[u])
                }
            };
            let locals: Vec<u128> = members
                .iter()
                .map(|&u| unit_local_hash(prog, u, &callee_code, &mut canon, deadline))
                .collect::<Result<_, _>>()?;
            if recursive {
                let mut h = StructHasher::new(SCC_DOMAIN);
                locals.iter().for_each(|&l| {
                    h.hash(l);
                });
                let group = h.finish();
                for (i, &u) in members.iter().enumerate() {
                    unit_hash[u] = StructHasher::new(SCC_DOMAIN)
                        .hash(group)
                        .word(i as u64)
                        .finish();
                }
            } else {
                unit_hash[members[0]] = locals[0];
            }
            members.iter().for_each(|&u| member[u] = usize::MAX);
        }
        let state = (0..prog.states.len())
            .map(|s| {
                let u = prog.states[s].unit as usize;
                StructHasher::new(STATE_DOMAIN)
                    .hash(unit_hash[u])
                    .word(canon[s] as u64)
                    .finish()
            })
            .collect();
        Ok(Hashes { state })
    }

    /// The hash of a state.
    #[inline]
    pub fn state(&self, s: u32) -> u128 {
        self.state[s as usize]
    }
}

fn unit_callees(prog: &Program, u: usize) -> Vec<usize> {
    let unit = &prog.units[u];
    (unit.start..unit.end)
        .flat_map(|s| prog.calls_of(s).iter().map(|c| c.unit as usize))
        .collect()
}

/// Hash of a unit's automaton with callees given by `callee_code`; records the canonical
/// number of each of its states in `canon`.
fn unit_local_hash(
    prog: &Program,
    u: usize,
    callee_code: &dyn Fn(usize) -> (u64, u128),
    canon: &mut [u32],
    deadline: &Deadline,
) -> Result<u128, CompileError> {
    let unit = &prog.units[u];
    let mut h = StructHasher::new(UNIT_DOMAIN);
    if let Some(c) = unit.counted {
        let (kind, code) = callee_code(c.body as usize);
        h.word(1)
            .word(c.min as u64)
            .word(c.max as u64)
            .word(kind)
            .hash(code);
        canon[unit.start as usize] = 0;
        return Ok(h.finish());
    }
    h.word(0);
    // Breadth-first numbering from the start, edges in canonical order.
    let mut order: Vec<u32> = vec![unit.start];
    canon[unit.start as usize] = 0;
    let mut i = 0;
    let mut edges = Edges::default();
    while i < order.len() {
        deadline.tick().map_err(|e| {
            CompileError::over_limit(e, prog.unit_place(u as u32), "grammar hashing")
        })?;
        let s = order[i];
        i += 1;
        canonical_edges(prog, s, callee_code, &mut edges);
        let mut number = |t: u32, order: &mut Vec<u32>| -> u64 {
            if canon[t as usize] == u32::MAX {
                canon[t as usize] = order.len() as u32;
                order.push(t);
            }
            canon[t as usize] as u64
        };
        h.word(prog.state(s).flags as u64);
        h.word(edges.bytes.len() as u64);
        for (_, set, t) in &edges.bytes {
            set.words().iter().for_each(|&w| {
                h.word(w);
            });
            let n = number(*t, &mut order);
            h.word(n);
        }
        h.word(edges.specials.len() as u64);
        for (name, t) in &edges.specials {
            h.bytes(name.as_bytes());
            let n = number(*t, &mut order);
            h.word(n);
        }
        h.word(edges.calls.len() as u64);
        for ((kind, code), t) in &edges.calls {
            h.word(*kind).hash(*code);
            let n = number(*t, &mut order);
            h.word(n);
        }
    }
    Ok(h.finish())
}

/// Targets a state's byte groups are scanned for before they are indexed.
const GROUPS_SCANNED: usize = 16;

/// A state's edges in canonical order (buffers reused from state to state).
#[derive(Default)]
struct Edges<'a> {
    /// Bytes grouped by target, ordered by least byte (the group's first class) and target.
    bytes: Vec<(usize, ByteSet, u32)>,
    /// Each target's group in `bytes`, once a state has many (a nondeterministic unit's state
    /// may reach thousands of states on one byte; finding each in a list was quadratic).
    group_of: FastMap<u32, usize>,
    specials: Vec<(&'a str, u32)>,
    calls: Vec<((u64, u128), u32)>,
}

fn canonical_edges<'a>(
    prog: &'a Program,
    s: u32,
    callee_code: &dyn Fn(usize) -> (u64, u128),
    out: &mut Edges<'a>,
) {
    out.bytes.clear();
    out.group_of.clear();
    // Classes are numbered by least byte, so a group's first class orders it by least byte.
    for (c, e) in prog.transitions(s) {
        let set = prog.alphabet.sets[c];
        let single = [e];
        let targets: &[u32] = if e & MULTI == 0 {
            &single
        } else {
            prog.targets(e)
        };
        // A state usually has a few targets: a scan beats hashing them.
        for &t in targets {
            let found = match out.bytes.len() > GROUPS_SCANNED {
                true => {
                    if out.group_of.is_empty() {
                        let groups = out.bytes.iter().enumerate().map(|(i, g)| (g.2, i));
                        out.group_of.extend(groups);
                    }
                    out.group_of.get(&t).copied()
                }
                false => out.bytes.iter().position(|(_, _, u)| *u == t),
            };
            match found {
                Some(i) => out.bytes[i].1 = out.bytes[i].1.union(&set),
                None => {
                    if !out.group_of.is_empty() {
                        out.group_of.insert(t, out.bytes.len());
                    }
                    out.bytes.push((c, set, t));
                }
            }
        }
    }
    out.bytes.sort_unstable_by_key(|&(first, _, t)| (first, t));
    out.specials.clear();
    out.specials.extend(
        prog.specials_of(s)
            .iter()
            .map(|&(sid, t)| (&*prog.specials[sid as usize].0, t)),
    );
    out.specials.sort_unstable();
    out.calls.clear();
    out.calls.extend(
        prog.calls_of(s)
            .iter()
            .map(|c| (callee_code(c.unit as usize), c.ret)),
    );
    out.calls.sort_unstable();
}
