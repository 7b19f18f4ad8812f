//! Lowering a [`CharDfa`] to right-linear grammar IR, its characters spelled by the caller's
//! [`TextEncoding`].

use super::{CharDfa, DEAD};
use crate::error::CompileError;
use crate::front::guard::tick;
use crate::front::regex::TextEncoding;
use crate::ir::{ExprId, GrammarBuilder, RuleId};
use crate::limits::Deadline;

impl CharDfa {
    /// The language as right-linear grammar IR, one rule `{name} state {i}` per state (all are
    /// live, see [`CharDfa`]): the empty string if the state accepts, and for each target state
    /// one class of the characters going there, then the target's rule; a state that takes
    /// every string is `any_text` (the caller's expression for it). Returns a reference to the
    /// start rule, or [`GrammarBuilder::nothing`] for the empty language. `name` must be new in
    /// `g` (a rule defined twice is the error of [`GrammarBuilder::define`]).
    pub fn lower(
        &self,
        name: &str,
        g: &mut GrammarBuilder,
        enc: &mut dyn TextEncoding,
        any_text: ExprId,
        deadline: &Deadline,
    ) -> Result<ExprId, CompileError> {
        if self.is_empty() {
            return Ok(g.nothing());
        }
        let width = self.atoms.len();
        let rules: Vec<RuleId> = (0..self.accept.len())
            .map(|i| g.rule(&format!("{name} state {i}")))
            .collect();
        // Where each target's arc is in `arcs` for the state at hand (`arc_of[t].0 == s`).
        let mut arc_of: Vec<(usize, usize)> = vec![(usize::MAX, 0); self.accept.len()];
        for (s, &rule) in rules.iter().enumerate() {
            tick(deadline)?;
            let row = &self.next[s * width..(s + 1) * width];
            // The state that takes every string (a name past what the patterns tell apart):
            // the caller's shared text, which the mask cache knows from every other string,
            // instead of a loop of this automaton's own.
            if self.accept[s] && row.iter().all(|&t| t == s as u32) {
                g.define(rule, any_text)?;
                continue;
            }
            let mut arcs: Vec<(u32, Vec<(char, char)>)> = Vec::new();
            for (a, (&t, &(lo, hi))) in row.iter().zip(&self.atoms).enumerate() {
                if t == DEAD {
                    continue;
                }
                // Consecutive atoms are adjacent characters (across the surrogate gap too), so
                // a run of them to one target is one range.
                let run = a > 0 && row[a - 1] == t;
                match arc_of[t as usize] {
                    (seen, k) if seen == s => {
                        let ranges = &mut arcs[k].1;
                        match ranges.last_mut() {
                            Some(last) if run => last.1 = hi,
                            _ => ranges.push((lo, hi)),
                        }
                    }
                    _ => {
                        arc_of[t as usize] = (s, arcs.len());
                        arcs.push((t, vec![(lo, hi)]));
                    }
                }
            }
            let mut branches = Vec::with_capacity(arcs.len() + 1);
            if self.accept[s] {
                branches.push(g.empty());
            }
            for (t, ranges) in arcs {
                let class = enc.class(g, &ranges);
                let then = g.rule_ref(rules[t as usize]);
                branches.push(g.seq([class, then]));
            }
            let body = g.alt(branches);
            g.define(rule, body)?;
        }
        // The start state 0 exists in every automaton.
        Ok(g.rule_ref(rules[0]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::CompileErrorKind;
    use crate::front::chars::tests::{alphabet, budget, dfa, never, samples, Rng};
    use crate::front::chars::ALL;
    use crate::front::regex::Utf8;
    use crate::ir::recognizer::{Recognizer, Terminal};
    use crate::ir::Expr;

    /// The grammar of `d` under the name `t`, and the expression of its language.
    fn lowered(d: &CharDfa) -> (GrammarBuilder, ExprId) {
        let mut g = GrammarBuilder::new();
        let any = any_utf8(&mut g);
        let e = d.lower("t", &mut g, &mut Utf8, any, never()).unwrap();
        (g, e)
    }

    /// Any string, as UTF-8.
    fn any_utf8(g: &mut GrammarBuilder) -> ExprId {
        let char = Utf8.class(g, &[ALL]);
        g.repeat(char, 0, None)
    }

    /// The reference recognizer of `e` as the start rule.
    fn recognizer(mut g: GrammarBuilder, e: ExprId) -> Recognizer {
        let start = g.rule("start");
        g.define(start, e).unwrap();
        Recognizer::new(&g.finish(start).unwrap())
    }

    #[test]
    fn chars_lowering_matches_the_automaton() {
        let mut rng = Rng(42);
        let dfas = [
            dfa(r"^[A-Z][a-z0-9_-]{2,7}$"),
            dfa(r"[\x{D7FF}\x{E000}]+é?"),
            dfa(r"(?s:.)*[😀é](?s:.)*")
                .intersect(
                    &CharDfa::length(0, Some(4), &budget(64)).unwrap(),
                    &budget(4096),
                )
                .unwrap(),
            dfa(r"^[a-z]+$")
                .complement(never())
                .unwrap()
                .intersect(
                    &CharDfa::strings(&["ab", "x"], &budget(4096))
                        .unwrap()
                        .complement(never())
                        .unwrap(),
                    &budget(4096),
                )
                .unwrap(),
            dfa(r"(?:a|b)*abb"),
        ];
        for d in &dfas {
            let (g, e) = lowered(d);
            let rules = (0..)
                .take_while(|i| g.find_rule(&format!("t state {i}")).is_some())
                .count();
            assert_eq!(rules, d.accept.len());
            let rec = recognizer(g, e);
            for s in samples(d, &alphabet("Aabxz09_-"), &mut rng, 400) {
                // At each character, the grammar goes on exactly when the automaton is alive:
                // it never admits a prefix that cannot be completed.
                let (mut chart, mut at, width) = (rec.start(), Some(0), d.atoms.len());
                for c in s.chars() {
                    let pushed = c
                        .encode_utf8(&mut [0; 4])
                        .bytes()
                        .all(|b| chart.push(&rec, Terminal::Byte(b)));
                    at = at
                        .map(|q| d.next[q * width + d.atom(c)])
                        .filter(|&t| t != DEAD)
                        .map(|t| t as usize);
                    assert_eq!(pushed, at.is_some(), "{s:?} at {c:?}");
                    if !pushed {
                        break;
                    }
                }
                assert_eq!(
                    at.is_some() && chart.is_accepting(&rec),
                    d.matches(&s),
                    "{s:?}"
                );
            }
        }
    }

    #[test]
    fn chars_lowering_the_empty_language_is_nothing() {
        let d = dfa(r"^a{3}$")
            .intersect(
                &CharDfa::length(0, Some(2), &budget(64)).unwrap(),
                &budget(64),
            )
            .unwrap();
        assert!(d.is_empty());
        let (g, e) = lowered(&d);
        assert_eq!(g.expr(e), &Expr::Nothing);
        assert_eq!(g.find_rule("t state 0"), None);
        let rec = recognizer(g, e);
        let mut chart = rec.start();
        assert!(!chart.is_accepting(&rec));
        assert!(!chart.push(&rec, Terminal::Byte(b'a')));
        // A name already used is the builder's error, not a panic.
        let (mut g, _) = lowered(&dfa("ab"));
        let any = any_utf8(&mut g);
        let err = dfa("ab")
            .lower("t", &mut g, &mut Utf8, any, never())
            .unwrap_err();
        assert_eq!(err.kind(), CompileErrorKind::Invalid);
    }
}
