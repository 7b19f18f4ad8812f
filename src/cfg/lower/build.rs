//! Expressions to NFA fragments: inlined rules and sub-expressions, unrolled or counted
//! repeats, calls to other units.

use super::determinize::{determinize, Construction, DETERMINIZE_WORK};
use super::minimize::minimize;
use super::*;
use crate::cfg::program::refine;

/// Most entries the table of built fragments keeps between drafts: emptying it costs its
/// capacity at every draft, most of which are a few dozen states.
const MAX_BUILT_SCRATCH: usize = 1 << 14;

impl Lowering {
    /// The NFA of the sequence `parts` (one expression, or a suffix unit's parts), rules
    /// built in place included.
    pub(super) fn draft_fsm(&mut self, parts: &[ExprId]) -> Result<Box<NfaDraft>, CompileError> {
        // The grammar apart from `self`: the construction reads it while changing the
        // lowering, and a clone of the `Arc` per expression was a sixth of drafting.
        let g = Arc::clone(&self.g);
        let mut nfa = Nfa {
            built: std::mem::take(&mut self.built_scratch),
            ..Nfa::default()
        };
        let accept = nfa.state();
        let start = match parts {
            [root] => self.fragment(&g, &mut nfa, *root, 0, accept)?,
            _ => self.sequence(&g, &mut nfa, parts, 0, accept)?,
        };
        nfa.in_place = true;
        while let Some((rule, next, entry)) = nfa.pending.pop() {
            self.tick()?;
            let body = self.fragment(&g, &mut nfa, g.rule(rule).body, 1, next)?;
            nfa.eps(entry, body);
        }
        // What only construction needs goes: a draft may wait for a parse to enter its unit.
        // The table is kept for the next draft, unless one unit made it larger than most.
        let mut built = std::mem::take(&mut nfa.built);
        if built.capacity() <= MAX_BUILT_SCRATCH {
            built.clear();
            self.built_scratch = built;
        }
        Ok(Box::new(NfaDraft { nfa, start, accept }))
    }

    /// The automaton of a drafted unit: determinized (or left nondeterministic past the
    /// subset construction's budgets), counted toward the grammar size.
    pub(super) fn finish_fsm(&mut self, draft: Box<NfaDraft>) -> Result<Fsm, CompileError> {
        let NfaDraft { nfa, start, accept } = *draft;
        let distinct: FastSet<ByteSet> = nfa.class_sets.iter().copied().collect();
        let used = distinct.iter().fold(ByteSet::EMPTY, |a, s| a.union(s));
        let classes = refine(used, distinct.iter());
        // Each label as a set of the unit's classes (a unit class lies inside a label's set
        // or outside it, so one member decides).
        let labels: Vec<ByteSet> = nfa
            .class_sets
            .iter()
            .map(|set| {
                let mut local = ByteSet::EMPTY;
                for (i, c) in classes.iter().enumerate() {
                    if c.iter().next().is_some_and(|g| set.contains(g)) {
                        local.insert(i as u8);
                    }
                }
                local
            })
            .collect();
        let nc = classes.len();
        let given = DETERMINIZE_WORK.min(self.determinize_left);
        let mut allowance = given;
        let (options, deadline) = (&self.options, &self.deadline);
        let construct = |how: Construction<'_>| {
            determinize(&nfa, &labels, nc, start, accept, options, deadline, how)
        };
        let subsets = construct(Construction::Subsets(&mut allowance))?;
        self.determinize_left -= given - allowance;
        let (mut fsm, deterministic) = match subsets {
            Some(d) => (d, true),
            None => {
                let used = self.total_states;
                let fsm = construct(Construction::EpsilonFree { used })?
                    .expect("epsilon removal has no state cap or work budget to stop at");
                (fsm, false)
            }
        };
        fsm.classes = classes;
        // The subset construction over these fragments is close to minimal (MaskBench: 6% more
        // states than minimal), and minimizing cost a sixth of compile time without changing
        // mask time; the epsilon-free automaton is always reduced, since every state of it an
        // Earley row holds at once is one more item.
        let fsm = match deterministic && !self.options.minimize {
            true => fsm,
            false => minimize(fsm, &self.deadline, &mut self.bisimulate_left)?,
        };
        self.total_states += match deterministic {
            true => fsm.states.len(),
            false => fsm.size(),
        };
        if self.total_states > self.options.max_states {
            return Err(too_many_states(
                self.total_states,
                self.options.max_states,
                "the grammar's automata",
            ));
        }
        Ok(fsm)
    }

    /// The parts `xs` one after another, leading to `next`. A long sequence (more than
    /// `SPLIT_EXPR_MAX`) is cut into chunks, each from a boundary on a unit of its own that
    /// the chunk before calls: the boundaries fall where the cost counted from the end passes
    /// a multiple of `SPLIT_EXPR_MAX`, so sequences that end alike cut their common end alike
    /// and share its units. An object's "first member written" branches are such sequences
    /// (member k, then the optional members after it): each branch over the budget was a unit
    /// inlining every later member, quadratic in the members (detekt: 226k states).
    fn sequence(
        &mut self,
        g: &Grammar,
        nfa: &mut Nfa,
        xs: &[ExprId],
        depth: usize,
        next: u32,
    ) -> Result<u32, CompileError> {
        let boundary = match nfa.in_place {
            true => None,
            false => self.chunk_boundary(xs),
        };
        let (inline, next) = match boundary {
            Some(cut) => {
                let id = self.suffix(&xs[cut..]);
                let u = self.unit(UnitKey::Suffix(id));
                let a = nfa.state();
                nfa.edge(a, Label::Call(u), next);
                (&xs[..cut], a)
            }
            None => (xs, next),
        };
        let mut cur = next;
        for &x in inline.iter().rev() {
            cur = self.fragment(g, nfa, x, depth + 1, cur)?;
        }
        Ok(cur)
    }

    /// The first chunk boundary of `xs` after its first part, if it is long enough to cut.
    fn chunk_boundary(&self, xs: &[ExprId]) -> Option<usize> {
        let total = xs
            .iter()
            .fold(0u32, |a, &x| a.saturating_add(self.use_cost(x)));
        if total <= SPLIT_EXPR_MAX {
            return None;
        }
        let mut from_end = 0u32;
        let mut first = None;
        for j in (1..xs.len()).rev() {
            let before = from_end;
            from_end = from_end.saturating_add(self.use_cost(xs[j]));
            if from_end / SPLIT_EXPR_MAX != before / SPLIT_EXPR_MAX {
                first = Some(j);
            }
        }
        first
    }

    /// The number of the suffix `parts`, new or found.
    fn suffix(&mut self, parts: &[ExprId]) -> u32 {
        if let Some(&id) = self.suffix_ids.get(parts) {
            return id;
        }
        let id = self.suffixes.len() as u32;
        self.suffixes.push(parts.into());
        self.suffix_ids.insert(parts.into(), id);
        id
    }

    /// Thompson construction of `e` inside the current unit, built backwards: reading `e` from
    /// the returned entry state leads to `next`. An expression is built once per continuation
    /// (`Nfa::built`), so a sub-expression that several branches continue with the same way
    /// is one fragment: an object's optional properties continue every "first property
    /// written" branch with the same suffix, which inlined copies made quadratic.
    pub(super) fn fragment(
        &mut self,
        g: &Grammar,
        nfa: &mut Nfa,
        e: ExprId,
        depth: usize,
        next: u32,
    ) -> Result<u32, CompileError> {
        self.tick()?;
        if nfa.len() > self.options.max_states {
            return Err(too_many_states(
                nfa.len(),
                self.options.max_states,
                "a grammar rule",
            ));
        }
        if let Some(&entry) = nfa.built.get(&(e, next)) {
            return Ok(entry);
        }
        let entry = self.fragment_uncached(g, nfa, e, depth, next)?;
        nfa.built.insert((e, next), entry);
        Ok(entry)
    }

    // Recursive over the IR's nesting, but at most `MAX_INLINE_DEPTH` deep: a deeper
    // sub-expression becomes a unit of its own, built from depth 0.
    // Long: one match over the expression kinds, each writing its NFA fragment.
    pub(super) fn fragment_uncached(
        &mut self,
        g: &Grammar,
        nfa: &mut Nfa,
        e: ExprId,
        depth: usize,
        next: u32,
    ) -> Result<u32, CompileError> {
        let call = |me: &mut Self, nfa: &mut Nfa, key: UnitKey| {
            let u = me.unit(key);
            let a = nfa.state();
            nfa.edge(a, Label::Call(u), next);
            a
        };
        let is_rule = matches!(g.expr(e), Expr::Rule(_));
        let wide_loop = matches!(g.expr(e), Expr::Repeat { body, max: None, .. }
            if self.width[body.index()].len() >= WIDE_LOOP_BYTES);
        if depth > 0
            && !is_rule
            && (wide_loop || self.cost[e.index()] > SPLIT_EXPR_MAX || depth > MAX_INLINE_DEPTH)
        {
            return Ok(call(self, nfa, UnitKey::Expr(e)));
        }
        Ok(match g.expr(e) {
            Expr::Empty => next,
            Expr::Nothing => nfa.state(),
            Expr::Bytes(bytes) => {
                let mut cur = next;
                for &b in bytes.iter().rev() {
                    if nfa.byte_label[b as usize] == u32::MAX {
                        nfa.byte_label[b as usize] = nfa.class_sets.len() as u32;
                        nfa.class_sets
                            .push(ByteSet::byte(self.alphabet.class_of[b as usize]));
                    }
                    let s = nfa.state();
                    nfa.edge(s, Label::Classes(nfa.byte_label[b as usize]), cur);
                    cur = s;
                }
                cur
            }
            Expr::Class(set) => {
                let s = nfa.state();
                nfa.class_sets.push(self.alphabet.classes(set));
                nfa.edge(s, Label::Classes((nfa.class_sets.len() - 1) as u32), next);
                s
            }
            Expr::Special(name) => {
                let sid = self.special(name)?;
                let s = nfa.state();
                nfa.edge(s, Label::Special(sid), next);
                s
            }
            Expr::Seq(xs) => self.sequence(g, nfa, xs, depth, next)?,
            Expr::Alt(xs) => {
                let s = nfa.state();
                for &x in xs.iter() {
                    let a = self.fragment(g, nfa, x, depth + 1, next)?;
                    nfa.eps(s, a);
                }
                s
            }
            &Expr::Repeat { body, min, max } => {
                if max.is_some_and(|m| m < min) {
                    return Ok(nfa.state());
                }
                if max == Some(0) {
                    return Ok(next);
                }
                if !self.unrolls(body, min, max) {
                    return Ok(call(self, nfa, UnitKey::Counted(e)));
                }
                // The optional iterations, then the required ones in front of them.
                let mut cur = match max {
                    None => {
                        // hub -> body -> hub, exit at hub.
                        let hub = nfa.state();
                        nfa.eps(hub, next);
                        let a = self.fragment(g, nfa, body, depth + 1, hub)?;
                        nfa.eps(hub, a);
                        hub
                    }
                    Some(max) => {
                        let mut cur = next;
                        // At most `UNROLL_MAX_COPIES` rounds: the repeat unrolls.
                        for _ in min..max {
                            let a = self.fragment(g, nfa, body, depth + 1, cur)?;
                            let s = nfa.state();
                            nfa.eps(s, a);
                            nfa.eps(s, next);
                            cur = s;
                        }
                        cur
                    }
                };
                for _ in 0..min {
                    cur = self.fragment(g, nfa, body, depth + 1, cur)?;
                }
                cur
            }
            &Expr::Rule(r) if self.inline_rule[r.index()] && depth <= MAX_INLINE_DEPTH => {
                self.fragment(g, nfa, g.rule(r).body, depth + 1, next)?
            }
            // A large rule that is not recursive is built in place with one continuation
            // per unit and called from the others: each other was a copy of its body (a
            // pattern string, the last step of a `$ref` inlined into 23 members of an object:
            // 69 copies of 140 states, o21305's 2.9 ms compile). Small ones are copied, as
            // inlined rules are.
            &Expr::Rule(r)
                if self.jumps[r.index()]
                    && (self.recursive[r.index()]
                        || self.cost[g.rule(r).body.index()] <= INLINE_RULE_MAX
                        || *nfa.placed.entry(r).or_insert(next) == next) =>
            {
                // A right-linear rule is a loop in this automaton, not a call: a call per
                // step of free text grows the Earley stack by one item per byte, so no two
                // rows are alike and no mask is ever reused. Its body is built later
                // (`Nfa::pending`, iteratively: rule chains can be long); references back
                // to it with this continuation find this entry.
                let entry = nfa.state();
                nfa.built.insert((e, next), entry);
                nfa.pending.push((r, next, entry));
                entry
            }
            &Expr::Rule(r) => call(self, nfa, UnitKey::Rule(r)),
        })
    }
}
