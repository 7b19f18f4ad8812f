//! The built units to one program: which units derive anything and which derive the empty
//! string (fixpoints over the call graph), each automaton trimmed to its useful states, the
//! reachable units laid out in one state array with one transition table.

use std::collections::VecDeque;

use super::*;
use crate::cfg::program::{Call, State, Unit, CALLS, COUNTED, FINAL, MULTI, SCANS, SPECIALS};
use crate::error::CompileErrorKind;

impl CfgLowering<'_> {
    /// Productivity, nullability, trimming and layout.
    // Long: the steps of finishing in order (unit facts, trimming, reachability, state offsets
    // within the limits, then one match laying out each kind of unit), each reading the last.
    pub(super) fn finish(self, start: u32) -> Result<Program, CompileError> {
        let deadline = self.options.deadline;
        let n = self.units.len();
        let mut fsms: Vec<Option<Fsm>> = Vec::with_capacity(n);
        let mut counted: Vec<Option<Counted>> = Vec::with_capacity(n);
        for (_, body) in self.units {
            match body {
                UnitBody::Fsm(f) => {
                    fsms.push(Some(f));
                    counted.push(None);
                }
                UnitBody::Counted(c) => {
                    fsms.push(None);
                    counted.push(Some(c));
                }
                // `compile` builds every queued unit before it finishes.
                UnitBody::Pending => unreachable!("every queued unit is built"),
            }
        }
        let mut callers: Vec<Vec<u32>> = vec![Vec::new(); n];
        for u in 0..n {
            for v in unit_callees(&fsms[u], &counted[u]) {
                callers[v as usize].push(u as u32);
            }
        }
        // Past the deadline, the error names the unit being worked on.
        let g = self.g;
        let unit_rules = &self.unit_rules;
        let late = |u: usize, e: LimitExceeded| compile_time(e).or_at(rule_place(g, unit_rules[u]));
        // Productive: derives some string. Nullable: derives the empty string.
        let productive = fixpoint(n, &callers, &late, deadline, |u, known| {
            match (&fsms[u], &counted[u]) {
                (Some(f), _) => reaches_final(f, |c| known[c as usize], true),
                (None, Some(c)) => c.min == 0 || known[c.body as usize],
                _ => false,
            }
        })?;
        if !productive[start as usize] {
            return Err(CompileError::unplaced(
                CompileErrorKind::EmptyLanguage,
                "the grammar's start rule derives no string at all",
            ));
        }
        let nullable = fixpoint(n, &callers, &late, deadline, |u, known| {
            match (&fsms[u], &counted[u]) {
                (Some(f), _) => {
                    reaches_final(f, |c| known[c as usize] && productive[c as usize], false)
                }
                (None, Some(c)) => c.min == 0 || known[c.body as usize],
                _ => false,
            }
        })?;
        // Trim every automaton to the states on some path from start to final.
        for (u, f) in fsms.iter_mut().enumerate() {
            if let Some(f) = f {
                deadline.check().map_err(|e| late(u, e))?;
                trim(f, |c| productive[c as usize]);
            }
        }
        let (order, new_id) = reachable_units(start, &fsms, &counted, &productive);
        let mut prog = Program {
            states: Vec::new(),
            units: Vec::with_capacity(order.len()),
            start_unit: 0,
            alphabet: self.alphabet,
            live: Vec::new(),
            trans: Vec::new(),
            multi: Vec::new(),
            calls: Vec::new(),
            special_edges: Vec::new(),
            specials: self.specials,
            unit_rules: order
                .iter()
                .map(|&u| {
                    self.g
                        .rule(self.unit_rules[u as usize])
                        .name
                        .as_str()
                        .into()
                })
                .collect(),
            follow: Vec::new(),
            slices: 0,
        };
        // First pass: state offsets, and the entries the states' transitions take (one per
        // grammar class a byte edge reads).
        let mut offset = Vec::with_capacity(order.len());
        let mut total = 0u32;
        let mut entries = 0usize;
        // The unit with the most states (named when the program is over the limits).
        let mut largest = (0, start);
        for &u in &order {
            offset.push(total);
            let Some(f) = &fsms[u as usize] else {
                total += 1;
                continue;
            };
            total += f.states.len() as u32;
            largest = largest.max((f.states.len(), u));
            for s in &f.states {
                for group in s.bytes.chunk_by(|a, b| a.0 == b.0) {
                    entries += f.classes[group[0].0 as usize].len();
                }
            }
        }
        let largest_place = || rule_place(g, self.unit_rules[largest.1 as usize]);
        if total as usize > self.options.max_states {
            let what = format!(
                "the grammar's automata (the largest this rule's: {} states)",
                largest.0
            );
            let e = too_many_states(total as usize, self.options.max_states, &what);
            return Err(e.or_at(largest_place()));
        }
        // Each state's entries cost as much as its edges: the table is bounded at 64 entries
        // per allowed state.
        if entries > self.options.max_states.saturating_mul(64) {
            return Err(too_many_states(
                entries.div_ceil(64),
                self.options.max_states,
                "the grammar's transition table (in rows of 64 entries)",
            )
            .or_at(largest_place()));
        }
        prog.live = vec![ByteSet::EMPTY; total as usize];
        prog.trans = Vec::with_capacity(entries);
        for (k, &u) in order.iter().enumerate() {
            deadline.tick().map_err(|e| late(u as usize, e))?;
            let base = offset[k];
            let uid = k as u32;
            match (&fsms[u as usize], &counted[u as usize]) {
                (Some(f), _) => {
                    lay_out_states(&mut prog, f, base, uid, &new_id);
                    prog.units.push(Unit {
                        start: base,
                        end: base + f.states.len() as u32,
                        nullable: nullable[u as usize],
                        counted: None,
                    });
                }
                (None, Some(c)) if !productive[c.body as usize] => {
                    // The body derives nothing: zero iterations is all there is (min is 0, or
                    // the unit would be unproductive and unreachable).
                    prog.states.push(State {
                        unit: uid,
                        flags: FINAL,
                        calls: (prog.calls.len() as u32, prog.calls.len() as u32),
                        specials: (
                            prog.special_edges.len() as u32,
                            prog.special_edges.len() as u32,
                        ),
                        row: prog.trans.len() as u32,
                    });
                    prog.units.push(Unit {
                        start: base,
                        end: base + 1,
                        nullable: true,
                        counted: None,
                    });
                }
                (None, Some(c)) => {
                    let body = new_id[c.body as usize];
                    let body_nullable = nullable[c.body as usize];
                    // Empty iterations change nothing but the count, so a nullable body needs
                    // no minimum: any shortfall is made up by empty iterations.
                    let min = if body_nullable { 0 } else { c.min };
                    let calls_start = prog.calls.len() as u32;
                    prog.calls.push(Call {
                        unit: body,
                        ret: base,
                    });
                    prog.states.push(State {
                        unit: uid,
                        flags: CALLS | COUNTED,
                        calls: (calls_start, calls_start + 1),
                        specials: (
                            prog.special_edges.len() as u32,
                            prog.special_edges.len() as u32,
                        ),
                        row: prog.trans.len() as u32,
                    });
                    prog.units.push(Unit {
                        start: base,
                        end: base + 1,
                        nullable: nullable[u as usize],
                        counted: Some(Counted {
                            body,
                            min,
                            max: c.max,
                        }),
                    });
                }
                // Every built unit is an automaton or a counted loop.
                _ => unreachable!("a unit is an automaton or a counted loop"),
            }
        }
        Ok(prog)
    }
}

/// The units reachable from `start` through productive calls, in discovery order, and each
/// unit's index in that order (`u32::MAX` for the others).
fn reachable_units(
    start: u32,
    fsms: &[Option<Fsm>],
    counted: &[Option<Counted>],
    productive: &[bool],
) -> (Vec<u32>, Vec<u32>) {
    let mut order: Vec<u32> = vec![start];
    let mut new_id = vec![u32::MAX; fsms.len()];
    new_id[start as usize] = 0;
    let mut i = 0;
    while i < order.len() {
        let u = order[i] as usize;
        i += 1;
        for v in unit_callees(&fsms[u], &counted[u]) {
            if productive[v as usize] && new_id[v as usize] == u32::MAX {
                new_id[v as usize] = order.len() as u32;
                order.push(v);
            }
        }
    }
    (order, new_id)
}

/// Appends the states of automaton `f`, unit `uid` of the program laid out from state `base`,
/// with their calls (to units renumbered by `new_id`), special edges and transitions.
fn lay_out_states(prog: &mut Program, f: &Fsm, base: u32, uid: u32, new_id: &[u32]) {
    // The unit class of each grammar class the unit reads, and a state's entry per unit class.
    let mut local_of = [0u8; 256];
    for (local, classes) in f.classes.iter().enumerate() {
        classes
            .iter()
            .for_each(|c| local_of[c as usize] = local as u8);
    }
    let mut entry_of = vec![0u32; f.classes.len()];
    for (si, s) in f.states.iter().enumerate() {
        let gid = base + si as u32;
        let calls_start = prog.calls.len() as u32;
        for &(cu, t) in &s.calls {
            prog.calls.push(Call {
                unit: new_id[cu as usize],
                ret: base + t,
            });
        }
        let sp_start = prog.special_edges.len() as u32;
        prog.special_edges
            .extend(s.specials.iter().map(|&(sid, t)| (sid, base + t)));
        let mut flags = 0;
        if s.final_ {
            flags |= FINAL;
        }
        if !s.calls.is_empty() {
            flags |= CALLS;
        }
        if !s.specials.is_empty() {
            flags |= SPECIALS;
        }
        if !s.bytes.is_empty() {
            flags |= SCANS;
        }
        prog.states.push(State {
            unit: uid,
            flags,
            calls: (calls_start, prog.calls.len() as u32),
            specials: (sp_start, prog.special_edges.len() as u32),
            row: prog.trans.len() as u32,
        });
        // Group targets by unit class, then enter them under each grammar class the unit
        // class stands for, in class order.
        let mut live = ByteSet::EMPTY;
        for group in s.bytes.chunk_by(|a, b| a.0 == b.0) {
            let local = group[0].0;
            entry_of[local as usize] = match group {
                [(_, t)] => base + t,
                _ => {
                    let at = MULTI | prog.multi.len() as u32;
                    prog.multi.push(group.len() as u32);
                    prog.multi.extend(group.iter().map(|&(_, t)| base + t));
                    at
                }
            };
            live = live.union(&f.classes[local as usize]);
        }
        prog.live[gid as usize] = live;
        let entries = live.iter().map(|c| entry_of[local_of[c as usize] as usize]);
        prog.trans.extend(entries);
    }
}

/// The units a unit calls.
pub(super) fn unit_callees(fsm: &Option<Fsm>, counted: &Option<Counted>) -> Vec<u32> {
    match (fsm, counted) {
        (Some(f), _) => f
            .states
            .iter()
            .flat_map(|s| s.calls.iter().map(|c| c.0))
            .collect(),
        (None, Some(c)) => vec![c.body],
        _ => vec![],
    }
}

/// Least fixpoint of a monotone per-unit property, re-checking callers when a unit flips
/// (`late`: the error past the deadline, while working on a unit).
pub(super) fn fixpoint(
    n: usize,
    callers: &[Vec<u32>],
    late: &dyn Fn(usize, LimitExceeded) -> CompileError,
    deadline: &Deadline,
    check: impl Fn(usize, &[bool]) -> bool,
) -> Result<Vec<bool>, CompileError> {
    let mut known = vec![false; n];
    let mut queued = vec![true; n];
    // Units are numbered callers first: checking callees first settles most units at their
    // first check (each check walks the unit's automaton).
    let mut work: VecDeque<usize> = (0..n).rev().collect();
    while let Some(u) = work.pop_front() {
        deadline.tick().map_err(|e| late(u, e))?;
        queued[u] = false;
        if known[u] || !check(u, &known) {
            continue;
        }
        known[u] = true;
        for &c in &callers[u] {
            if !known[c as usize] && !queued[c as usize] {
                queued[c as usize] = true;
                work.push_back(c as usize);
            }
        }
    }
    Ok(known)
}

/// Is a final state reachable from the start, through calls `ok` allows (and, if `consume`,
/// through byte and special edges)?
pub(super) fn reaches_final(f: &Fsm, ok: impl Fn(u32) -> bool, consume: bool) -> bool {
    let mut seen = vec![false; f.states.len()];
    let mut stack = vec![0u32];
    seen[0] = true;
    while let Some(s) = stack.pop() {
        let st = &f.states[s as usize];
        if st.final_ {
            return true;
        }
        let mut push = |t: u32| {
            if !seen[t as usize] {
                seen[t as usize] = true;
                stack.push(t);
            }
        };
        st.calls.iter().filter(|c| ok(c.0)).for_each(|c| push(c.1));
        if consume {
            st.bytes.iter().for_each(|b| push(b.1));
            st.specials.iter().for_each(|b| push(b.1));
        }
    }
    false
}

/// Drops calls to unproductive units and every state not on a start-to-final path; the start
/// stays state 0.
pub(super) fn trim(f: &mut Fsm, productive: impl Fn(u32) -> bool) {
    let n = f.states.len();
    let useful = useful_states(f, &productive);
    let keep = |s: u32| useful[s as usize];
    if !keep(0) {
        f.states = vec![FState::default()];
        return;
    }
    // The usual case: nothing to drop, and no copy.
    let unproductive_call = |s: &FState| s.calls.iter().any(|c| !productive(c.0));
    if (0..n as u32).all(keep) && !f.states.iter().any(unproductive_call) {
        return;
    }
    let mut map = vec![u32::MAX; n];
    let mut order = Vec::new();
    for s in 0..n as u32 {
        if keep(s) {
            map[s as usize] = order.len() as u32;
            order.push(s);
        }
    }
    let states = order
        .iter()
        .map(|&s| {
            let st = &f.states[s as usize];
            FState {
                final_: st.final_,
                bytes: retarget(&st.bytes, |_, t| keep(t), &map),
                specials: retarget(&st.specials, |_, t| keep(t), &map),
                calls: retarget(&st.calls, |c, t| productive(c) && keep(t), &map),
            }
        })
        .collect();
    f.states = states;
}

/// The targets of state `s`'s edges, calls to unproductive units left out.
fn useful_targets<'a>(
    s: &'a FState,
    productive: &'a impl Fn(u32) -> bool,
) -> impl Iterator<Item = u32> + 'a {
    let calls = s.calls.iter().filter(|c| productive(c.0));
    s.bytes
        .iter()
        .map(|b| b.1)
        .chain(s.specials.iter().map(|b| b.1))
        .chain(calls.map(|c| c.1))
}

/// Which states of `f` are on some path from the start to a final state.
fn useful_states(f: &Fsm, productive: &impl Fn(u32) -> bool) -> Vec<bool> {
    let n = f.states.len();
    // Forward from the start. Edges reversed into one array grouped by target (a counting
    // sort: `into[t]..into[t + 1]` are the sources of `t`'s incoming edges).
    let mut fwd = vec![false; n];
    let mut stack = vec![0u32];
    fwd[0] = true;
    let mut into = vec![0u32; n + 1];
    while let Some(s) = stack.pop() {
        for t in useful_targets(&f.states[s as usize], productive) {
            into[t as usize + 1] += 1;
            if !fwd[t as usize] {
                fwd[t as usize] = true;
                stack.push(t);
            }
        }
    }
    for i in 0..n {
        into[i + 1] += into[i];
    }
    let mut sources = vec![0u32; into[n] as usize];
    let mut fill = into.clone();
    for s in (0..n as u32).filter(|&s| fwd[s as usize]) {
        for t in useful_targets(&f.states[s as usize], productive) {
            sources[fill[t as usize] as usize] = s;
            fill[t as usize] += 1;
        }
    }
    let mut bwd = vec![false; n];
    let mut stack: Vec<u32> = (0..n as u32)
        .filter(|&s| fwd[s as usize] && f.states[s as usize].final_)
        .collect();
    stack.iter().for_each(|&s| bwd[s as usize] = true);
    while let Some(s) = stack.pop() {
        for &p in &sources[into[s as usize] as usize..into[s as usize + 1] as usize] {
            if !bwd[p as usize] {
                bwd[p as usize] = true;
                stack.push(p);
            }
        }
    }
    (0..n).map(|s| fwd[s] && bwd[s]).collect()
}

/// The `(label, target)` edges that `keep` keeps, targets renumbered by `map`.
pub(super) fn retarget<C: Copy>(
    edges: &[(C, u32)],
    keep: impl Fn(C, u32) -> bool,
    map: &[u32],
) -> Vec<(C, u32)> {
    edges
        .iter()
        .filter(|&&(c, t)| keep(c, t))
        .map(|&(c, t)| (c, map[t as usize]))
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::cfg::lower::tests::compile_for_test;
    use crate::cfg::program::DEAD;

    /// A state's transitions take an entry per class it reads, not a row over all of the
    /// grammar's classes: the alternation of 400 words over the lowercase letters compiles to
    /// a trie whose states read one or a few letters each, among dozens of classes.
    #[test]
    fn transitions_take_an_entry_per_class_a_state_reads() {
        let word = |mut i: usize| {
            let mut w = String::new();
            for _ in 0..4 {
                w.push((b'a' + (i % 26) as u8) as char);
                i = i / 26 + 7;
            }
            w
        };
        let alternatives: Vec<String> = (0..400).map(|i| format!("\"{}\"", word(i))).collect();
        let gbnf = format!("root ::= {}", alternatives.join(" | "));
        let prog = compile_for_test(&crate::front::gbnf::gbnf_to_ir(&gbnf, "g").unwrap());
        let states = prog.states.len() as u32;
        assert!(prog.n_classes() >= 26 && states > 400, "{states} states");
        let read: usize = (0..states).map(|s| prog.transitions(s).count()).sum();
        assert_eq!(prog.trans.len(), read);
        assert!(
            read < 2 * states as usize,
            "{read} entries for {states} states"
        );
        // The sparse rows answer as dense ones would.
        for s in 0..states {
            let mut listed = prog.transitions(s).peekable();
            for c in 0..prog.n_classes() {
                let expected = match listed.next_if(|&(class, _)| class == c) {
                    Some((_, entry)) => entry,
                    None => DEAD,
                };
                assert_eq!(prog.entry(s, c), expected, "state {s} class {c}");
            }
        }
    }
}
