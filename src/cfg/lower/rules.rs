//! What the rule graph decides about lowering: which rules recurse, which recurse only in
//! tail position (loops), and which are built in place of their only-last references.

use super::compile_time;
use crate::base::collections::FastSet;
use crate::error::CompileError;
use crate::ir::graph::strongly_connected;
use crate::ir::{Expr, ExprId, Grammar, RuleId};
use crate::limits::Deadline;

/// How many places refer to each rule (the builder interns `Expr::Rule(r)` once, so these
/// are the references to that expression).
pub(super) fn rule_refs(g: &Grammar) -> Vec<u32> {
    let mut refs = vec![0u32; g.rules().len()];
    let mut count = |e: &ExprId| {
        if let Expr::Rule(r) = g.expr(*e) {
            refs[r.index()] += 1;
        }
    };
    for x in g.exprs() {
        match x {
            Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().for_each(&mut count),
            Expr::Repeat { body, .. } => count(body),
            _ => {}
        }
    }
    g.rules().iter().for_each(|rule| count(&rule.body));
    refs
}

/// Which rules reach themselves through references, and which of those only ever reach
/// their strongly connected component in tail position (right-linear: a loop, no stack).
pub(super) fn recursive_rules(
    g: &Grammar,
    deadline: &Deadline,
) -> Result<(Vec<bool>, Vec<bool>), CompileError> {
    let n = g.rules().len();
    let refs: Vec<Vec<usize>> = g
        .rule_graph()
        .iter()
        .map(|refs| refs.iter().map(|x| x.index()).collect())
        .collect();
    let sccs = strongly_connected(n, |u| refs[u].clone());
    let mut recursive = vec![false; n];
    let mut tail_only = vec![false; n];
    let mut scc_of = vec![0u32; n];
    for (i, scc) in sccs.iter().enumerate() {
        scc.iter().for_each(|&u| scc_of[u] = i as u32);
    }
    let last = last_components(g, &scc_of);
    for (i, scc) in sccs.iter().enumerate() {
        deadline.tick().map_err(compile_time)?;
        let cyclic = scc.len() > 1 || refs[scc[0]].contains(&scc[0]);
        if cyclic {
            let mut tail = true;
            for &u in scc {
                let body = g.rules()[u].body;
                tail &= references_only_in_tail(g, body, i as u32, &last, deadline)?;
            }
            for &u in scc {
                recursive[u] = true;
                tail_only[u] = tail;
            }
        }
    }
    Ok((recursive, tail_only))
}

/// The rules built into their caller's automaton, never called: the tail-recursive ones
/// (loops), and rules that are not recursive and referred to only as the last step of rule
/// bodies. Such a rule continues where its referrer would have ended, so building it in place
/// adds no stack, while a call per reference grew the Earley stack by an item at each one: an
/// automaton written as right-linear rules (a pattern within a length, one rule per state)
/// stacked an item per character.
///
/// Not so a rule its grammar keeps called
/// ([`GrammarBuilder::keep_called`](crate::ir::GrammarBuilder::keep_called)), nor one that may
/// reach its own last reference without reading a byte (`nullable` by expression): a chain of
/// those is skipped through, so every state of a unit holding it in place held the rest of the
/// chain, and every unit reaching it held a copy. An object's optional members in schema order
/// are such a chain (its rules of 8 members): each block's first-member unit held every later
/// member, quadratic in the members (o39532's 153: 40k states built on entering the object,
/// ~10 ms of one mask).
pub(super) fn jump_rules(
    g: &Grammar,
    recursive: &[bool],
    mut jumps: Vec<bool>,
    nullable: &[bool],
    deadline: &Deadline,
) -> Result<Vec<bool>, CompileError> {
    let n = g.rules().len();
    let mut referred = vec![false; n];
    let mut inside = vec![false; n];
    let roots = g.rules().iter().map(|r| r.body);
    rule_references(g, roots, deadline, |r, tail| {
        referred[r.index()] = true;
        inside[r.index()] |= !tail;
        true
    })?;
    for r in 0..n {
        if g.rules()[r].called {
            // Loops included: an object's rules per set of properties written loop on an
            // undeclared member, and built in place put all `2^n` sets into one automaton
            // (29k states, 117 ms of one mask, on o40454 in any order).
            jumps[r] = false;
        } else if !recursive[r] && referred[r] && !inside[r] {
            let body = g.rules()[r].body;
            jumps[r] |= !skips_to_last_reference(g, body, nullable, deadline)?;
        }
    }
    Ok(jumps)
}

/// Can `body` reach a rule reference in its last step without reading a byte?
fn skips_to_last_reference(
    g: &Grammar,
    body: ExprId,
    nullable: &[bool],
    deadline: &Deadline,
) -> Result<bool, CompileError> {
    let mut seen = FastSet::default();
    let mut stack: Vec<(ExprId, bool)> = vec![(body, true)];
    while let Some((e, last)) = stack.pop() {
        deadline.tick().map_err(compile_time)?;
        if !seen.insert((e, last)) {
            continue;
        }
        match g.expr(e) {
            Expr::Rule(_) if last => return Ok(true),
            Expr::Seq(xs) => {
                for (i, &x) in xs.iter().enumerate() {
                    stack.push((x, last && i + 1 == xs.len()));
                    if !nullable[x.index()] {
                        break;
                    }
                }
            }
            Expr::Alt(xs) => stack.extend(xs.iter().map(|&x| (x, last))),
            _ => {}
        }
    }
    Ok(false)
}

/// Per expression (index = `ExprId`), one more than the last component (in the callees-first
/// order of [`strongly_connected`], `scc_of` each rule's) of the rules referred to inside it,
/// 0 if none. A rule's body refers only to its own component and earlier ones, so a part of
/// the body whose number is its component's holds a reference to that component, and one
/// with another number none.
fn last_components(g: &Grammar, scc_of: &[u32]) -> Vec<u32> {
    let mut last = vec![0u32; g.exprs().len()];
    // The builder makes an expression's parts before it: one pass in id order.
    for (i, e) in g.exprs().iter().enumerate() {
        let of = |x: &ExprId| {
            debug_assert!(x.index() < i, "parts come before their expression");
            last[x.index()]
        };
        last[i] = match e {
            Expr::Rule(r) => scc_of[r.index()] + 1,
            Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().map(of).max().unwrap_or(0),
            Expr::Repeat { body, .. } => of(body),
            _ => 0,
        };
    }
    last
}

/// Does `body`, of a rule of component `scc`, refer to that component only as its last step?
/// Only the parts holding such a reference are visited (see [`last_components`]): the rules
/// of an object in any order, one per set of properties written, each repeat every member's
/// value, and walking all of them for each rule was most of compiling that grammar.
fn references_only_in_tail(
    g: &Grammar,
    body: ExprId,
    scc: u32,
    last: &[u32],
    deadline: &Deadline,
) -> Result<bool, CompileError> {
    let mut seen = FastSet::default();
    let mut stack: Vec<(ExprId, bool)> = vec![(body, true)];
    while let Some((e, tail)) = stack.pop() {
        deadline.tick().map_err(compile_time)?;
        if last[e.index()] != scc + 1 || !seen.insert((e, tail)) {
            continue;
        }
        if !tail {
            return Ok(false);
        }
        match g.expr(e) {
            Expr::Seq(xs) => {
                let end = xs.len().saturating_sub(1);
                stack.extend(xs.iter().enumerate().map(|(i, &x)| (x, i == end)));
            }
            Expr::Alt(xs) => stack.extend(xs.iter().map(|&x| (x, true))),
            Expr::Repeat { body, .. } => stack.push((*body, false)),
            _ => {}
        }
    }
    Ok(true)
}

/// Visits the rule references under `roots` with whether each is the last step of its root
/// (through sequences' last parts and alternatives; never inside a repeat or before something
/// else), until `visit` returns false; returns false if it did.
pub(super) fn rule_references(
    g: &Grammar,
    roots: impl IntoIterator<Item = ExprId>,
    deadline: &Deadline,
    mut visit: impl FnMut(RuleId, bool) -> bool,
) -> Result<bool, CompileError> {
    let mut seen = FastSet::default();
    let mut stack: Vec<(ExprId, bool)> = roots.into_iter().map(|e| (e, true)).collect();
    while let Some((e, tail)) = stack.pop() {
        deadline.tick().map_err(compile_time)?;
        if !seen.insert((e, tail)) {
            continue;
        }
        match g.expr(e) {
            Expr::Rule(r) if !visit(*r, tail) => return Ok(false),
            Expr::Seq(xs) => {
                let last = xs.len().saturating_sub(1);
                stack.extend(xs.iter().enumerate().map(|(i, &x)| (x, tail && i == last)));
            }
            Expr::Alt(xs) => stack.extend(xs.iter().map(|&x| (x, tail))),
            Expr::Repeat { body, .. } => stack.push((*body, false)),
            _ => {}
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::lower::tests::compile_for_test;
    use crate::cfg::program::CALLS;

    #[test]
    fn recursion_only_in_tail_position_is_a_loop() {
        let g = crate::front::gbnf::gbnf_to_ir(
            r#"
root  ::= text
text  ::= [^<] text | "<call>" item "</call>" after | ""
after ::= "\n" text | ""
item  ::= [a-z]+ | "[" item ("," item)* "]"
"#,
            "g",
        )
        .unwrap();
        let (recursive, tail) = recursive_rules(&g, &Deadline::never()).unwrap();
        let flags = |name: &str| {
            let r = g.rules().iter().position(|r| r.name == name).unwrap();
            (recursive[r], tail[r])
        };
        assert_eq!(flags("root"), (false, false));
        assert_eq!(flags("text"), (true, true));
        assert_eq!(flags("after"), (true, true));
        assert_eq!(flags("item"), (true, false));
    }

    /// The grammar `root ::= "<" s0 ">" | "!" s0 "?"`, `s{i} ::= body(i)` for each link and
    /// an empty last one, and which of its rules are built in place.
    fn chain(links: usize, body: impl Fn(usize) -> String) -> (Grammar, Vec<bool>) {
        let mut text = String::from("root ::= \"<\" s0 \">\" | \"!\" s0 \"?\"\n");
        for i in 0..links {
            text.push_str(&format!("s{i} ::= {}\n", body(i)));
        }
        text.push_str(&format!("s{links} ::= \"\"\n"));
        let g = crate::front::gbnf::gbnf_to_ir(&text, "g").unwrap();
        let jumps = jumps(&g);
        (g, jumps)
    }

    /// The rules of `g` built in place ([`jump_rules`]).
    fn jumps(g: &Grammar) -> Vec<bool> {
        let (recursive, tail) = recursive_rules(g, &Deadline::never()).unwrap();
        let nullable = crate::ir::facts::Derivations::new(g, &Deadline::never())
            .unwrap()
            .nullable;
        jump_rules(g, &recursive, tail, &nullable, &Deadline::never()).unwrap()
    }

    /// A chain of rules each referred to as the last step of the one before (an automaton
    /// written as rules), too long to inline: built in place, with no call, where calls
    /// stacked an Earley item per rule.
    #[test]
    fn rules_referred_to_only_last_are_built_in_place() {
        let (g, jumps) = chain(300, |i| format!("[a-z] s{} | \"\"", i + 1));
        let rule = |name: &str| g.rules().iter().position(|r| r.name == name).unwrap();
        assert!(!jumps[rule("root")] && !jumps[rule("s0")]);
        assert!((1..=300).all(|i| jumps[rule(&format!("s{i}"))]));
        let prog = compile_for_test(&g);
        // `s0` is referred to twice in the middle of `root`: one unit, called; the chain
        // below it is that unit's automaton.
        assert_eq!(prog.units.len(), 2);
        let s0 = &prog.units[1];
        assert!((s0.start..s0.end).all(|s| prog.state(s).flags & CALLS == 0));
    }

    /// A loop its grammar keeps called (an object's rules per set of properties written loop
    /// on an undeclared member) is called: built in place, every unit reaching one of the
    /// family held all of them.
    #[test]
    fn loops_kept_called_are_called() {
        let mut g = crate::ir::GrammarBuilder::new();
        let (root, again) = (g.rule("root"), g.rule("again"));
        let (a, b, open, call) = (g.text("a"), g.text("b"), g.text("<"), g.rule_ref(again));
        let step = g.seq([a, call]);
        let body = g.alt([step, b]);
        g.define(again, body).unwrap();
        g.keep_called(again);
        let root_body = g.seq([open, call]);
        g.define(root, root_body).unwrap();
        let g = g.finish(root).unwrap();
        let again = g.rules().iter().position(|r| r.name == "again").unwrap();
        let (recursive, tail) = recursive_rules(&g, &Deadline::never()).unwrap();
        assert!(recursive[again] && tail[again], "a loop");
        assert!(!jumps(&g)[again]);
    }

    /// A chain whose rules reach the next one without reading a byte (optional parts before
    /// it, as an object's optional members) is called rule by rule: built in place, each unit
    /// reaching it would hold the whole rest of the chain in each of its states.
    #[test]
    fn rules_skipped_to_their_last_reference_are_called() {
        let (g, jumps) = chain(20, |i| format!("\"a{i}\"? (\"b\" | \"c\")* s{}", i + 1));
        let rule = |name: &str| g.rules().iter().position(|r| r.name == name).unwrap();
        assert!((1..=19).all(|i| !jumps[rule(&format!("s{i}"))]));
    }
}
