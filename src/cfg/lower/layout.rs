//! A built unit into the program: its automaton trimmed to its useful states (calls to units
//! that derive nothing dropped), its states appended to the one state array and its
//! transitions to the one transition table, with hashes of its own (see `hash`).

use super::*;
use crate::cfg::program::{Call, State, CALLS, COUNTED, FINAL, MULTI, SCANS, SPECIALS};

impl Lowering {
    /// Appends unit `u`, built as `body`, to the program.
    pub(super) fn lay_out(&mut self, u: u32, body: UnitBody) -> Result<(), CompileError> {
        let productive = &self.productive;
        let prog = Arc::make_mut(&mut self.prog);
        let base = prog.states.len() as u32;
        let (end, counted) = match body {
            UnitBody::Fsm(mut f) => {
                trim(&mut f, |c| productive[c as usize]);
                // Each state's entries cost as much as its edges: the table is bounded at 64
                // entries per allowed state.
                for s in &f.states {
                    for group in s.bytes.chunk_by(|a, b| a.0 == b.0) {
                        self.entries += f.classes[group[0].0 as usize].len();
                    }
                }
                if self.entries > self.options.max_states.saturating_mul(64) {
                    return Err(too_many_states(
                        self.entries.div_ceil(64),
                        self.options.max_states,
                        "the grammar's transition table (in rows of 64 entries)",
                    ));
                }
                lay_out_states(prog, &f, base, u);
                (base + f.states.len() as u32, None)
            }
            UnitBody::Counted(c) if !productive[c.body as usize] => {
                // The body derives nothing: zero iterations is all there is (the minimum is
                // 0, or the unit would derive nothing and never be called).
                prog.push_state(State {
                    unit: u,
                    flags: FINAL,
                    calls: (prog.calls.len() as u32, prog.calls.len() as u32),
                    specials: (
                        prog.special_edges.len() as u32,
                        prog.special_edges.len() as u32,
                    ),
                    row: prog.trans.len() as u32,
                });
                (base + 1, None)
            }
            UnitBody::Counted(c) => {
                // Empty iterations change nothing but the count, so a nullable body needs no
                // minimum: any shortfall is made up by empty iterations.
                let min = match prog.units[c.body as usize].nullable {
                    true => 0,
                    false => c.min,
                };
                let calls_start = prog.calls.len() as u32;
                prog.calls.push(Call {
                    unit: c.body,
                    ret: base,
                });
                prog.push_state(State {
                    unit: u,
                    flags: CALLS | COUNTED,
                    calls: (calls_start, calls_start + 1),
                    specials: (
                        prog.special_edges.len() as u32,
                        prog.special_edges.len() as u32,
                    ),
                    row: prog.trans.len() as u32,
                });
                (base + 1, Some(Counted { min, ..c }))
            }
        };
        let unit = &mut prog.units[u as usize];
        unit.start = base;
        unit.end = end;
        unit.counted = counted;
        hash::local(prog, self.nonce, base..end);
        prog.slices = prog.slices_worth_trying(&self.vocab, &self.first, base..end, prog.slices);
        Ok(())
    }
}

/// Appends the states of automaton `f`, unit `uid` of the program laid out from state `base`,
/// with their calls, special edges and transitions.
fn lay_out_states(prog: &mut Program, f: &Fsm, base: u32, uid: u32) {
    // The unit class of each grammar class the unit reads, and a state's entry per unit class.
    let mut local_of = [0u8; 256];
    for (local, classes) in f.classes.iter().enumerate() {
        classes
            .iter()
            .for_each(|c| local_of[c as usize] = local as u8);
    }
    let mut entry_of = vec![0u32; f.classes.len()];
    for s in &f.states {
        let calls_start = prog.calls.len() as u32;
        for &(cu, t) in &s.calls {
            prog.calls.push(Call {
                unit: cu,
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
        let row = prog.trans.len() as u32;
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
        let entries = live.iter().map(|c| entry_of[local_of[c as usize] as usize]);
        prog.trans.extend(entries);
        prog.push_state(State {
            unit: uid,
            flags,
            calls: (calls_start, prog.calls.len() as u32),
            specials: (sp_start, prog.special_edges.len() as u32),
            row,
        });
        let last = prog.live.len() - 1;
        prog.live[last] = live;
    }
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
