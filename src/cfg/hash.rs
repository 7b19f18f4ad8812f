//! Hashes of states: the keys of the cross-grammar mask cache.
//!
//! A state's hash identifies everything its classification depends on: its unit's automaton
//! (byte sets, special tokens, final states, counted bounds) and, through call edges, the
//! hashes of the units it can enter. States are numbered canonically (breadth-first from the
//! unit's start, edges in byte order), so two grammars that compile a sub-structure to the same
//! automaton get the same hashes wherever it appears. Mutually recursive units are hashed as
//! one group (each member by its position in it, as XGrammar 2's cycle hashing does).
//!
//! Only a unit whose callees are all built, and theirs, can be hashed so: units are built when
//! a parse first enters them (`lower`), and strings, numbers, any-JSON values and small
//! objects — what grammars share — are complete soon. Until its unit is complete a state has a
//! hash of its own, made of a number no other grammar of the process has and the state's
//! number ([`local`]): its classifications are shared by the grammar's matchers, not across
//! grammars. When the unit becomes complete its states get their structural hashes; what was
//! computed under the old ones stays correct, only unshared.
//!
//! Equal hashes imply equal structure (up to a 128-bit collision): the serialization is
//! complete. Structures that are equal but numbered differently may hash differently, which
//! only costs sharing.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

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
const LOCAL_DOMAIN: u64 = 0x6366_676c_6f63_0004;

/// A number no other grammar of the process gets: the first word of its own hashes.
pub(crate) fn nonce() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Gives the states `states` hashes of their grammar's own (`nonce`).
pub(crate) fn local(prog: &mut Program, nonce: u64, states: Range<u32>) {
    for s in states {
        prog.hashes[s as usize] = StructHasher::new(LOCAL_DOMAIN)
            .word(nonce)
            .word(s as u64)
            .finish();
    }
}

/// Gives the built units whose automata are complete — every unit they can enter is built —
/// their structural hashes (`unit_hashes`, by unit: those known from an earlier call are
/// kept), and their states theirs (a tick of `deadline` per state). Called as units are built:
/// a group of mutually recursive units (a JSON value and its arrays and objects) gets its
/// hashes once its last member is built.
pub(crate) fn structural(
    prog: &mut Program,
    unit_hashes: &mut Vec<Option<u128>>,
    deadline: &Deadline,
) -> Result<(), CompileError> {
    let n = prog.units.len();
    unit_hashes.resize(n, None);
    // Complete: built, and every callee complete (a greatest fixpoint: the units with a callee
    // not built, and their callers, are not).
    let mut complete: Vec<bool> = (0..n)
        .map(|u| unit_hashes[u].is_some() || prog.units[u].is_built())
        .collect();
    let mut callers: Vec<Vec<u32>> = vec![Vec::new(); n];
    let mut open: Vec<u32> = Vec::new();
    for u in (0..n as u32).filter(|&u| unit_hashes[u as usize].is_none() && complete[u as usize]) {
        for v in prog.callees(u) {
            callers[v as usize].push(u);
            if !complete[v as usize] {
                open.push(u);
            }
        }
    }
    while let Some(u) = open.pop() {
        if std::mem::replace(&mut complete[u as usize], false) {
            open.extend(callers[u as usize].iter().copied());
        }
    }
    // The complete units to hash now.
    let fresh: Vec<bool> = (0..n)
        .map(|u| complete[u] && unit_hashes[u].is_none())
        .collect();
    let callees: Vec<Vec<usize>> = (0..n)
        .map(|u| match fresh[u] {
            true => prog
                .callees(u as u32)
                .map(|v| v as usize)
                .filter(|&v| fresh[v])
                .collect(),
            false => Vec::new(),
        })
        .collect();
    let sccs = strongly_connected(n, |u| callees[u].clone());
    let mut member = vec![usize::MAX; n];
    for scc in sccs.iter().filter(|scc| fresh[scc[0]]) {
        let mut members = scc.clone();
        members.sort_unstable();
        members.iter().enumerate().for_each(|(i, &u)| member[u] = i);
        let recursive = members.len() > 1 || callees[members[0]].contains(&members[0]);
        // Per member, its hash and its states' canonical numbers.
        let locals: Vec<(u128, Vec<u32>)> = {
            let known: &[Option<u128>] = unit_hashes;
            let callee_code = |u: usize| -> (u64, u128) {
                match member[u] {
                    usize::MAX => (
                        2,
                        known[u].expect("a complete unit's callees are hashed first"),
                    ),
                    i => (1, i as u128),
                }
            };
            members
                .iter()
                .map(|&u| {
                    let mut canon = Vec::new();
                    unit_local_hash(prog, u, &callee_code, &mut canon, deadline).map(|h| (h, canon))
                })
                .collect::<Result<_, _>>()?
        };
        if recursive {
            let mut h = StructHasher::new(SCC_DOMAIN);
            locals.iter().for_each(|(l, _)| {
                h.hash(*l);
            });
            let group = h.finish();
            for (i, &u) in members.iter().enumerate() {
                unit_hashes[u] = Some(
                    StructHasher::new(SCC_DOMAIN)
                        .hash(group)
                        .word(i as u64)
                        .finish(),
                );
            }
        } else {
            unit_hashes[members[0]] = Some(locals[0].0);
        }
        members.iter().for_each(|&u| member[u] = usize::MAX);
        for (&u, (_, canon)) in members.iter().zip(&locals) {
            let unit = &prog.units[u];
            let hash = unit_hashes[u].expect("hashed above");
            for (s, &number) in (unit.start..unit.end).zip(canon) {
                prog.hashes[s as usize] = StructHasher::new(STATE_DOMAIN)
                    .hash(hash)
                    .word(number as u64)
                    .finish();
            }
        }
    }
    Ok(())
}

/// Hash of a unit's automaton with callees given by `callee_code`; `canon` gets the canonical
/// number of each of its states (by its place in the unit: a unit's edges stay inside it).
fn unit_local_hash(
    prog: &Program,
    u: usize,
    callee_code: &dyn Fn(usize) -> (u64, u128),
    canon: &mut Vec<u32>,
    deadline: &Deadline,
) -> Result<u128, CompileError> {
    let unit = &prog.units[u];
    let base = unit.start;
    canon.clear();
    canon.resize((unit.end - unit.start) as usize, u32::MAX);
    let mut h = StructHasher::new(UNIT_DOMAIN);
    if let Some(c) = unit.counted {
        let (kind, code) = callee_code(c.body as usize);
        h.word(1)
            .word(c.min as u64)
            .word(c.max as u64)
            .word(kind)
            .hash(code);
        canon[0] = 0;
        return Ok(h.finish());
    }
    h.word(0);
    // Breadth-first numbering from the start, edges in canonical order.
    let mut order: Vec<u32> = vec![unit.start];
    canon[0] = 0;
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
            let local = (t - base) as usize;
            if canon[local] == u32::MAX {
                canon[local] = order.len() as u32;
                order.push(t);
            }
            canon[local] as u64
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
    // A state reads runs of classes with one entry (a string's characters: dozens of classes),
    // each run's classes joining the group the run's first one found.
    let mut last: Option<(u32, usize)> = None;
    for (c, e) in prog.transitions(s) {
        let set = prog.alphabet.sets[c];
        if let Some((_, group)) = last.filter(|&(entry, _)| entry == e && e & MULTI == 0) {
            out.bytes[group].1 = out.bytes[group].1.union(&set);
            continue;
        }
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
            let group = match found {
                Some(i) => {
                    out.bytes[i].1 = out.bytes[i].1.union(&set);
                    i
                }
                None => {
                    if !out.group_of.is_empty() {
                        out.group_of.insert(t, out.bytes.len());
                    }
                    out.bytes.push((c, set, t));
                    out.bytes.len() - 1
                }
            };
            last = Some((e, group));
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
