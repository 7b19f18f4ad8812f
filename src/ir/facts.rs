//! What each expression of a grammar can derive, read off the IR alone: whether it derives
//! any string (*productive*), the empty string (*nullable*), which bytes its strings start
//! with (*first*) and which bytes may come right after it in the grammar (*follow*).
//!
//! The Earley compiler builds its units when a parse first enters them (see `cfg::lower`),
//! so what it needs to know of a unit before building it comes from here: a unit is nullable
//! exactly when the expression it is built from is, and a call to an unproductive unit is
//! dropped from its caller. The JSON Schema front end asks whether a schema's grammar is
//! productive at all. Each analysis is a worklist, linear in the grammar (each expression's
//! set only grows, a bounded number of times), and iterative: rule chains are as long as the
//! grammar.
//!
//! The meaning of each expression is the one its automaton has: a repeat whose maximum is
//! below its minimum derives nothing, a special token is not a byte (it starts and follows
//! nothing byte-wise).

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{Expr, ExprId, Grammar};
use crate::base::byteset::ByteSet;
use crate::limits::{Deadline, LimitExceeded};

/// Which expressions derive some string and which the empty string (index = `ExprId`).
#[derive(Debug)]
pub(crate) struct Derivations {
    pub productive: Vec<bool>,
    pub nullable: Vec<bool>,
    /// Kept for [`Boundaries::new`].
    users: Users,
}

/// What an expression needs before it holds.
enum Need {
    /// It never holds.
    Never,
    /// It holds whatever its parts do.
    Now,
    /// It holds once this many of its parts do (counted per occurrence).
    Parts(u32),
}

impl Derivations {
    /// The derivations of every expression of `g` (a tick of `deadline` per expression and
    /// per use of one).
    pub fn new(g: &Grammar, deadline: &Deadline) -> Result<Derivations, LimitExceeded> {
        let users = Users::new(g);
        let productive = holds(g, &users, deadline, |e| match e {
            Expr::Nothing => Need::Never,
            Expr::Class(c) if c.is_empty() => Need::Never,
            _ => Need::Now,
        })?;
        let nullable = holds(g, &users, deadline, |e| match e {
            Expr::Empty => Need::Now,
            _ => Need::Never,
        })?;
        Ok(Derivations {
            productive,
            nullable,
            users,
        })
    }
}

/// Who uses each expression: the expressions it is a part of (once per occurrence), and the
/// references to the rules it is the body of. In one array, grouped by expression (a vector
/// per expression was most of these analyses' time, in the allocator).
#[derive(Debug)]
struct Users {
    /// `at[e]..at[e + 1]` are `e`'s users in `users`.
    at: Vec<u32>,
    users: Vec<u32>,
}

impl Users {
    fn new(g: &Grammar) -> Users {
        let exprs = g.exprs();
        let rules = g.rules();
        // Each (part, user) pair, visited twice: to count, then to place.
        let each = |visit: &mut dyn FnMut(usize, u32)| {
            for (i, e) in exprs.iter().enumerate() {
                let user = i as u32;
                match e {
                    Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().for_each(|x| visit(x.index(), user)),
                    Expr::Repeat { body, .. } => visit(body.index(), user),
                    Expr::Rule(r) => visit(rules[r.index()].body.index(), user),
                    _ => {}
                }
            }
        };
        let mut at = vec![0u32; exprs.len() + 1];
        each(&mut |part, _| at[part + 1] += 1);
        for i in 0..exprs.len() {
            at[i + 1] += at[i];
        }
        let mut users = vec![0u32; at[exprs.len()] as usize];
        let mut fill = at.clone();
        each(&mut |part, user| {
            users[fill[part] as usize] = user;
            fill[part] += 1;
        });
        Users { at, users }
    }

    fn of(&self, e: usize) -> &[u32] {
        &self.users[self.at[e] as usize..self.at[e + 1] as usize]
    }
}

/// The expressions for which a property holds, from the leaves up: a leaf as `leaf` says;
/// a sequence once all its parts hold, an alternation, a reference or a repeat of a nonzero
/// minimum once one does (a rule's references once its body does); a repeat of minimum 0
/// always, one whose maximum is below its minimum never.
fn holds(
    g: &Grammar,
    users: &Users,
    deadline: &Deadline,
    leaf: impl Fn(&Expr) -> Need,
) -> Result<Vec<bool>, LimitExceeded> {
    let exprs = g.exprs();
    let mut missing: Vec<u32> = vec![0; exprs.len()];
    let mut ready: Vec<u32> = Vec::new();
    for (i, e) in exprs.iter().enumerate() {
        deadline.tick()?;
        let need = match e {
            Expr::Seq(xs) => Need::Parts(xs.len() as u32),
            Expr::Alt(_) | Expr::Rule(_) => Need::Parts(1),
            Expr::Repeat { min, max, .. } if max.is_some_and(|m| m < *min) => Need::Never,
            Expr::Repeat { min: 0, .. } => Need::Now,
            Expr::Repeat { .. } => Need::Parts(1),
            Expr::Nothing | Expr::Empty | Expr::Bytes(_) | Expr::Class(_) | Expr::Special(_) => {
                leaf(e)
            }
        };
        missing[i] = match need {
            Need::Never => u32::MAX,
            Need::Now => 0,
            Need::Parts(n) => n,
        };
        if missing[i] == 0 {
            ready.push(i as u32);
        }
    }
    let mut done = vec![false; exprs.len()];
    while let Some(i) = ready.pop() {
        deadline.tick()?;
        let i = i as usize;
        if std::mem::replace(&mut done[i], true) {
            continue;
        }
        for &u in users.of(i) {
            let u = u as usize;
            missing[u] = missing[u].saturating_sub(1);
            if missing[u] == 0 && !done[u] {
                ready.push(u as u32);
            }
        }
    }
    Ok(done)
}

/// The bytes each expression's strings may start with and may be followed by, where it is
/// reachable from the start rule (index = `ExprId`; empty elsewhere). Both are supersets
/// only where expressions are shared: an expression used in several places is followed by
/// what follows any of them, as a unit called from several places is.
#[derive(Clone, Debug)]
pub(crate) struct Boundaries {
    pub first: Vec<ByteSet>,
    pub follow: Vec<ByteSet>,
}

impl Boundaries {
    /// The boundaries of `g`'s productive expressions, by `d`.
    pub fn new(
        g: &Grammar,
        d: &Derivations,
        deadline: &Deadline,
    ) -> Result<Boundaries, LimitExceeded> {
        let first = first_bytes(g, &d.users, d, deadline)?;
        let follow = follow_bytes(g, d, &first, deadline)?;
        Ok(Boundaries { first, follow })
    }
}

/// What a productive expression may start with: a least fixpoint from the leaves up, each
/// expression recomputed from its parts when one of them grows. Parts are interned before the
/// expressions made of them, so taking the lowest id first settles each expression of a rule's
/// body in one visit; only references to rules defined later come back.
fn first_bytes(
    g: &Grammar,
    users: &Users,
    d: &Derivations,
    deadline: &Deadline,
) -> Result<Vec<ByteSet>, LimitExceeded> {
    let exprs = g.exprs();
    let rules = g.rules();
    let mut first = vec![ByteSet::EMPTY; exprs.len()];
    let of = |first: &[ByteSet], x: &ExprId| match d.productive[x.index()] {
        true => first[x.index()],
        false => ByteSet::EMPTY,
    };
    let bytes_of = |first: &[ByteSet], i: usize| match &exprs[i] {
        Expr::Empty | Expr::Nothing | Expr::Special(_) => ByteSet::EMPTY,
        Expr::Bytes(b) => ByteSet::byte(b[0]),
        Expr::Class(c) => *c,
        Expr::Seq(xs) => {
            let mut acc = ByteSet::EMPTY;
            for x in xs.iter() {
                acc = acc.union(&of(first, x));
                if !d.nullable[x.index()] {
                    break;
                }
            }
            acc
        }
        Expr::Alt(xs) => xs
            .iter()
            .fold(ByteSet::EMPTY, |acc, x| acc.union(&of(first, x))),
        Expr::Repeat { body, .. } => of(first, body),
        Expr::Rule(r) => of(first, &rules[r.index()].body),
    };
    // One sweep in index order settles almost everything, as an expression's parts are built
    // before it; only a rule's references can come before its body, and the worklist (in
    // index order too) takes what their changes reach. A worklist of every expression was
    // most of this pass.
    let mut work: BinaryHeap<Reverse<u32>> = BinaryHeap::new();
    let mut queued = vec![false; exprs.len()];
    let mut sweep = 0..exprs.len();
    loop {
        let (i, swept) = match sweep.next() {
            Some(i) => (i, true),
            None => match work.pop() {
                Some(Reverse(i)) => (i as usize, false),
                None => break,
            },
        };
        deadline.tick()?;
        queued[i] = false;
        if !d.productive[i] {
            continue;
        }
        let f = bytes_of(&first, i);
        if f != first[i] {
            first[i] = f;
            // During the sweep, users after `i` are still to come.
            for &u in users.of(i).iter().filter(|&&u| !swept || u as usize <= i) {
                if !std::mem::replace(&mut queued[u as usize], true) {
                    work.push(Reverse(u));
                }
            }
        }
    }
    Ok(first)
}

/// What may follow each reachable productive expression: from the start rule down, a
/// sequence's part is followed by the first bytes of the parts after it (and, while those can
/// be empty, by what follows the sequence), an alternative and a rule's body by what follows
/// their parent, a repeated body also by its own first bytes when another round may come.
/// The highest id first: an expression's users come after it, so a shared expression takes
/// what follows all of them before it passes it on.
fn follow_bytes(
    g: &Grammar,
    d: &Derivations,
    first: &[ByteSet],
    deadline: &Deadline,
) -> Result<Vec<ByteSet>, LimitExceeded> {
    let exprs = g.exprs();
    let rules = g.rules();
    let mut follow = vec![ByteSet::EMPTY; exprs.len()];
    let mut seen = vec![false; exprs.len()];
    let mut queued = vec![false; exprs.len()];
    let root = rules[g.start().index()].body.index();
    let mut work: BinaryHeap<u32> = BinaryHeap::from([root as u32]);
    (seen[root], queued[root]) = (true, true);
    // `(child, bytes it is followed by)` of the expression being expanded.
    let mut out: Vec<(usize, ByteSet)> = Vec::new();
    while let Some(p) = work.pop() {
        deadline.tick()?;
        let p = p as usize;
        queued[p] = false;
        if !d.productive[p] {
            continue;
        }
        let after = follow[p];
        out.clear();
        match &exprs[p] {
            Expr::Seq(xs) => {
                let mut acc = after;
                for x in xs.iter().rev() {
                    out.push((x.index(), acc));
                    acc = match d.nullable[x.index()] {
                        true => first[x.index()].union(&acc),
                        false => first[x.index()],
                    };
                }
            }
            Expr::Alt(xs) => out.extend(xs.iter().map(|x| (x.index(), after))),
            Expr::Repeat { body, max, .. } => {
                let again = match max {
                    Some(m) if *m < 2 => ByteSet::EMPTY,
                    _ => first[body.index()],
                };
                out.push((body.index(), after.union(&again)));
            }
            Expr::Rule(r) => out.push((rules[r.index()].body.index(), after)),
            _ => {}
        }
        for &(c, bytes) in &out {
            let grown = follow[c].union(&bytes);
            if grown != follow[c] || !seen[c] {
                follow[c] = grown;
                seen[c] = true;
                if !std::mem::replace(&mut queued[c], true) {
                    work.push(c as u32);
                }
            }
        }
    }
    Ok(follow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::gbnf::gbnf_to_ir;

    fn facts(gbnf: &str) -> (Grammar, Derivations, Boundaries) {
        let g = gbnf_to_ir(gbnf, "test").unwrap();
        let never = Deadline::never();
        let d = Derivations::new(&g, &never).unwrap();
        let b = Boundaries::new(&g, &d, &never).unwrap();
        (g, d, b)
    }

    fn rule_body(g: &Grammar, name: &str) -> usize {
        let r = g.rules().iter().find(|r| r.name == name).unwrap();
        r.body.index()
    }

    fn set(bytes: &[u8]) -> ByteSet {
        bytes
            .iter()
            .fold(ByteSet::EMPTY, |a, &b| a.union(&ByteSet::byte(b)))
    }

    #[test]
    fn derivations_follow_the_automata() {
        let (g, d, _) = facts(
            r#"root ::= a | b | e
               a ::= "x" a
               b ::= "y"? "z"*
               e ::= a | "v""#,
        );
        let body = |n| rule_body(&g, n);
        // `a` only recurses: no string at all; `e` has a way out.
        assert!(!d.productive[body("a")]);
        assert!(d.productive[body("e")] && !d.nullable[body("e")]);
        assert!(d.productive[body("b")] && d.nullable[body("b")]);
        assert!(d.productive[body("root")] && d.nullable[body("root")]);
        // A repeat whose maximum is below its minimum is empty, as its automaton (front ends
        // refuse to write one; the IR can hold it).
        let mut b = crate::ir::GrammarBuilder::new();
        let w = b.text("w");
        let empty_range = b.repeat(w, 3, Some(2));
        let root = b.rule("root");
        b.define(root, empty_range).unwrap();
        let g = b.finish(root).unwrap();
        let d = Derivations::new(&g, &Deadline::never()).unwrap();
        assert!(!d.productive[empty_range.index()] && !d.nullable[empty_range.index()]);
    }

    #[test]
    fn follow_takes_every_place_and_loops_back() {
        let (g, _, b) = facts(
            r#"root ::= "[" item ("," item)* "]" | "<" item ">"
               item ::= [0-9]+ x
               x ::= "k"?"#,
        );
        let item = rule_body(&g, "item");
        assert_eq!(b.first[item], set(b"0123456789"));
        assert_eq!(b.follow[item], set(b",]>"));
        // `x` may be empty, so what follows `item` also follows the digits, and a digit may
        // follow a digit.
        let Expr::Seq(parts) = g.expr(ExprId::from_index(item)) else {
            panic!("item is a sequence")
        };
        let digits = parts[0].index();
        assert_eq!(b.follow[digits], set(b"k,]>"));
        let Expr::Repeat { body: digit, .. } = g.expr(parts[0]) else {
            panic!("digits repeat")
        };
        assert_eq!(b.follow[digit.index()], set(b"0123456789k,]>"));
        assert_eq!(b.follow[rule_body(&g, "root")], ByteSet::EMPTY);
    }
}
