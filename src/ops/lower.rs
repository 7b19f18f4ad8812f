//! Lowering the grammar IR to operators (the regex compiler built on it is in
//! [`regex`](super::regex)).
//!
//! The IR maps onto operators structurally — byte strings and special tokens to `Write`,
//! sequences to `Seq`, alternations to `IfElse`, repeats to `DoWhile`, a repeat of text followed
//! by special tokens to `Wait` — and every sub-expression whose language fits in a small DFA is
//! *fused* into one DFA leaf. Fusion is what keeps masks cheap: a token like `hello` inside
//! `[a-z]+` stays inside one leaf state (one cached mask) instead of crossing five operator
//! boundaries. Large bounded repeats (`{1,100000}`) do not fuse and stay `DoWhile` counters.

use std::sync::Arc;

use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, Hir, Repetition};
use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

use super::leaf::{dfa_from_hir, wait_leaf, Leaf, Terminator, Unit};
use super::program::{OpId, Program, ProgramBuilder};
use crate::base::byteset::ByteSet;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::ir::{Expr, ExprArena, ExprId, Grammar, RuleId};
use crate::limits::{Deadline, LimitKind, Limits};
use crate::vocab::Vocab;

/// States a one-character class may take (the largest Unicode classes need a few hundred).
const CHAR_CLASS_STATES: usize = 4_096;

/// Largest DFA a sub-expression is fused into by default.
pub const DEFAULT_DFA_STATE_LIMIT: usize = 2_000;

/// Fusion is tried only where the sub-expression's expanded size (about its NFA's states)
/// times the state limit stays under this: the subset construction's time grows with both,
/// each DFA state being a closure over the NFA. Past it the attempt would mostly fail after
/// building thousands of large states: a Unicode `\w{0,40}` (12k nodes) took 40 ms to fail
/// against 2,000 states, an alternation of `\w{0,k}` pieces up to a second per attempt and a
/// minute per 500-byte regex. One-character classes are always tried (their size is bounded
/// by UTF-8 and they are every leaf's unit of content).
const FUSION_WORK: u64 = 1 << 22;

/// Deepest regex fused into one DFA. regex-automata compiles a HIR recursively, so the depth
/// bounds its stack (regex-syntax's own parser stops at 250); deeper sub-expressions become
/// operators, whose cursor and lowering need no stack.
const MAX_FUSED_DEPTH: usize = 64;

/// Options for lowering IR to operators (tuning only; ceilings are in [`Limits`]).
#[derive(Clone, Copy, Debug)]
pub struct LowerConfig {
    dfa_state_limit: usize,
}

impl Default for LowerConfig {
    fn default() -> Self {
        LowerConfig {
            dfa_state_limit: DEFAULT_DFA_STATE_LIMIT,
        }
    }
}

impl LowerConfig {
    /// Default options.
    pub fn new() -> LowerConfig {
        LowerConfig::default()
    }

    /// Largest DFA (in states) a sub-expression is fused into. `1` fuses nothing: every regex
    /// construct becomes its own operator (slower masks, same language).
    pub fn dfa_state_limit(mut self, states: usize) -> LowerConfig {
        self.dfa_state_limit = states.max(1);
        self
    }
}

/// Lowers `root` of `grammar` into an operator program under the default [`Limits`] (a
/// compile-time budget of its own). Special-token names are resolved against `vocab`;
/// recursion is an error of kind `NotRegular` (the Earley backend takes those).
///
/// # Example
///
/// ```
/// use formwork::ir::GrammarBuilder;
/// use formwork::ops::{lower, LowerConfig};
/// use formwork::vocab::Vocab;
///
/// let vocab = Vocab::from_token_bytes(vec![b"a".to_vec(), b"<|end|>".to_vec()], &[1], &[]).unwrap();
/// let mut g = GrammarBuilder::new();
/// let text = g.class(formwork::ByteSet::range(b'a', b'z'));
/// let body = g.repeat(text, 0, None);
/// let end = g.special("<|end|>");
/// let root = g.seq([body, end]);
/// let start = g.rule("start");
/// g.define(start, root).unwrap();
/// let grammar = g.finish(start).unwrap();
/// let program = lower(&grammar, root, &vocab, &LowerConfig::new()).unwrap();
/// assert_eq!(program.describe(), "Wait");
/// ```
pub fn lower(
    grammar: &Grammar,
    root: ExprId,
    vocab: &Vocab,
    config: &LowerConfig,
) -> Result<Program, CompileError> {
    let limits = Limits::new();
    lower_within(grammar, root, vocab, config, &limits, &limits.deadline())
}

/// [`lower`] under `limits`, within `deadline`: a `Limit` error past the compile time, a
/// `Wait` automaton of too many states, or a program whose threads would nest deeper than
/// [`Limits::nesting`] frames.
pub(crate) fn lower_within(
    grammar: &Grammar,
    root: ExprId,
    vocab: &Vocab,
    config: &LowerConfig,
    limits: &Limits,
    deadline: &Deadline,
) -> Result<Program, CompileError> {
    let mut lowering = OpsLowering::new(grammar, vocab, config.dfa_state_limit, limits, deadline);
    let root = lowering.op(root)?;
    let program = lowering.builder.finish(root)?;
    limits
        .check(LimitKind::Nesting, program.frame_depth() as u64)
        .map_err(|e| CompileError::over_limit(e, Location::None, "operator program"))?;
    Ok(program)
}

/// Widest alternation of large branches the operator backend takes: each live branch is a
/// cursor thread stepped and walked for every mask, so a wide one (an object of many optional
/// properties, whose branches share their tails and are too big to fuse into one DFA) is
/// faster on Earley, whose items share those tails.
const MAX_UNFUSED_ALTERNATIVES: usize = 8;

/// Largest regular grammar (in [`OpsLowering::size`] nodes: rules inlined, bounded repeats
/// unrolled, one-character classes one node each) the router sends to the operator backend.
/// Operator compilation fuses sub-expressions into DFAs through regex-automata's determinizer,
/// about 5 µs per node on the regular MaskBench schemas of `benches/data` (0.04 ms at 7 nodes,
/// 4.8 ms at 956), where the Earley backend compiled the same grammars 6-20x faster and its
/// first-walk masks were as fast (total, p99) or faster (p50). Up to this size operator
/// compilation stays under ~0.15 ms.
const MAX_ROUTED_SIZE: u64 = 64;

/// Would [`lower`] give a program the operator backend compiles fast and runs well? False for
/// recursive grammars (lowering fails with `NotRegular`), for large ones (operator compilation
/// grows with the expanded size, see `MAX_ROUTED_SIZE`), and for grammars with an
/// alternation of more than a few branches too large to fuse into one DFA (many cursor threads
/// per step). A structural check, linear in the grammar (iterative, memoized), that builds
/// nothing.
///
/// ```
/// use formwork::front::gbnf::gbnf_to_ir;
/// use formwork::ops::{fits_operators, LowerConfig};
///
/// let regular = gbnf_to_ir(r#"root ::= "a" [0-9]+ | "b""#, "g").unwrap();
/// assert!(fits_operators(&regular, &LowerConfig::new()));
/// let nested = gbnf_to_ir(r#"root ::= "(" root ")" | "x""#, "g").unwrap();
/// assert!(!fits_operators(&nested, &LowerConfig::new()));
/// ```
pub fn fits_operators(grammar: &Grammar, config: &LowerConfig) -> bool {
    let vocab = Vocab::from_token_bytes(Vec::new(), &[], &[]).expect("an empty vocabulary");
    let limits = Limits::new();
    let deadline = Deadline::never();
    let mut lowering =
        OpsLowering::new(grammar, &vocab, config.dfa_state_limit, &limits, &deadline);
    let root = grammar.rule(grammar.start()).body;
    match lowering.sizes(root, true) {
        (_, true) => return false,
        (n, false) if n > MAX_ROUTED_SIZE => return false,
        _ => {}
    }
    (0..grammar.exprs().len()).all(|i| {
        let e = ExprId::from_index(i);
        match grammar.expr(e) {
            Expr::Alt(xs) if xs.len() > MAX_UNFUSED_ALTERNATIVES => lowering.worth_fusing(e),
            _ => true,
        }
    })
}

/// A size that stands for "being computed": met again, the expression is recursive.
const IN_PROGRESS: u64 = u64::MAX;

pub(super) struct OpsLowering<'a> {
    grammar: &'a Grammar,
    vocab: &'a Vocab,
    limit: usize,
    limits: &'a Limits,
    deadline: &'a Deadline,
    builder: ProgramBuilder,
    ops: FxHashMap<ExprId, OpId>,
    /// Memos of [`OpsLowering::sizes`] (without and with `chars_as_leaves`).
    sizes: FxHashMap<ExprId, u64>,
    leaf_sizes: FxHashMap<ExprId, u64>,
}

/// A step of the iterative lowering.
enum Step {
    /// Lower the expression (unless done): fuse it, or plan it and lower its parts.
    Enter(ExprId),
    /// Every part of the plan is lowered: build the expression's operator.
    Build(ExprId, Plan),
}

/// How an expression is built from its parts.
enum Plan {
    Seq(Vec<Part>),
    Alt,
    Repeat,
    Rule,
}

/// A part of a sequence: an operator built while planning (a `Wait`, a run of literals) or a
/// sub-expression lowered as its own step.
enum Part {
    Ready(OpId),
    Child(ExprId),
}

impl<'a> OpsLowering<'a> {
    pub(super) fn new(
        grammar: &'a Grammar,
        vocab: &'a Vocab,
        limit: usize,
        limits: &'a Limits,
        deadline: &'a Deadline,
    ) -> OpsLowering<'a> {
        OpsLowering {
            grammar,
            vocab,
            limit,
            limits,
            deadline,
            builder: ProgramBuilder::new(),
            ops: FxHashMap::default(),
            sizes: FxHashMap::default(),
            leaf_sizes: FxHashMap::default(),
        }
    }

    fn tick(&self) -> Result<(), CompileError> {
        self.deadline
            .tick()
            .map_err(|e| CompileError::over_limit(e, Location::None, "operator lowering"))
    }

    /// The operator of `root`, lowering what it needs first. A limit reached on the way is
    /// placed at the innermost rule being lowered.
    fn op(&mut self, root: ExprId) -> Result<OpId, CompileError> {
        let mut rules: Vec<RuleId> = Vec::new();
        self.op_within(root, &mut rules)
            .map_err(|e| match rules.last() {
                Some(&r) if e.kind() == CompileErrorKind::Limit => {
                    e.or_at(Location::Rule(self.grammar.rule(r).name.clone()))
                }
                _ => e,
            })
    }

    /// [`OpsLowering::op`] on an explicit stack (IR nesting and rule chains can be deep), with
    /// the rules entered and not built yet in `rules`. Parts already lowered are shared.
    fn op_within(&mut self, root: ExprId, rules: &mut Vec<RuleId>) -> Result<OpId, CompileError> {
        let mut stack = vec![Step::Enter(root)];
        // Expressions entered and not built yet: meeting one again is recursion.
        let mut open: FxHashSet<ExprId> = FxHashSet::default();
        while let Some(step) = stack.pop() {
            self.tick()?;
            match step {
                Step::Enter(e) => {
                    if self.ops.contains_key(&e) {
                        continue;
                    }
                    if open.contains(&e) {
                        let name = rules.last().map_or("?", |&r| &self.grammar.rule(r).name);
                        return Err(CompileError::unplaced(
                            CompileErrorKind::NotRegular,
                            format!(
                                "rule `{name}` is recursive; operator programs are finite-state"
                            ),
                        ));
                    }
                    if let Some(op) = self.fused(e)? {
                        self.ops.insert(e, op);
                        continue;
                    }
                    let (plan, children) = self.plan(e)?;
                    let Some(plan) = plan else { continue };
                    open.insert(e);
                    if let Plan::Rule = plan {
                        if let Expr::Rule(r) = self.grammar.expr(e) {
                            rules.push(*r);
                        }
                    }
                    stack.push(Step::Build(e, plan));
                    stack.extend(children.into_iter().rev().map(Step::Enter));
                }
                Step::Build(e, plan) => {
                    open.remove(&e);
                    if let Plan::Rule = plan {
                        rules.pop();
                    }
                    let op = self.build(e, plan)?;
                    self.ops.insert(e, op);
                }
            }
        }
        Ok(self.ops[&root])
    }

    /// `e` as one leaf, if it is a literal or fuses into a DFA.
    fn fused(&mut self, e: ExprId) -> Result<Option<OpId>, CompileError> {
        if let Some(units) = self.literal_units(&[e])? {
            return Ok(Some(self.builder.write(&units)));
        }
        if let Some(hir) = self.fusable_hir(e)? {
            // One character of a (Unicode) class is always a leaf, whatever the limit: it is
            // the operator's unit of content, as in WGrammar's character-class Waits.
            let limit = if self.is_one_char(e) {
                self.limit.max(CHAR_CLASS_STATES)
            } else {
                self.limit
            };
            if let Some(dfa) = dfa_from_hir(&hir, limit, self.deadline)? {
                return Ok(Some(self.builder.leaf(Arc::new(Leaf::Dfa(dfa)))));
            }
        }
        Ok(None)
    }

    /// How `e` is built and the sub-expressions to lower first; no plan when `e` is built
    /// already (an empty string, a class).
    fn plan(&mut self, e: ExprId) -> Result<(Option<Plan>, Vec<ExprId>), CompileError> {
        let done = |me: &mut Self, op| {
            me.ops.insert(e, op);
            Ok((None, Vec::new()))
        };
        match self.grammar.expr(e) {
            Expr::Empty => {
                let op = self.builder.empty();
                done(self, op)
            }
            Expr::Nothing => Err(CompileError::unplaced(
                CompileErrorKind::EmptyLanguage,
                "the grammar matches no string",
            )),
            Expr::Bytes(_) | Expr::Special(_) => {
                unreachable!("literals are lowered by `fused`")
            }
            &Expr::Class(c) => {
                let op = self.builder.leaf(Arc::new(class_leaf(c)));
                done(self, op)
            }
            Expr::Seq(xs) => {
                let xs = xs.clone();
                let mut parts = Vec::with_capacity(xs.len());
                let mut children = Vec::new();
                let mut i = 0;
                while i < xs.len() {
                    if let Some(wait) = self.wait_at(&xs[i..])? {
                        parts.push(Part::Ready(wait));
                        i += 2;
                        continue;
                    }
                    // A run of literals and special tokens is one Write.
                    let run = xs[i..]
                        .iter()
                        .take_while(|&&x| {
                            matches!(self.grammar.expr(x), Expr::Bytes(_) | Expr::Special(_))
                        })
                        .count();
                    if run > 1 {
                        if let Some(units) = self.literal_units(&xs[i..i + run])? {
                            parts.push(Part::Ready(self.builder.write(&units)));
                            i += run;
                            continue;
                        }
                    }
                    parts.push(Part::Child(xs[i]));
                    children.push(xs[i]);
                    i += 1;
                }
                Ok((Some(Plan::Seq(parts)), children))
            }
            Expr::Alt(xs) => Ok((Some(Plan::Alt), xs.to_vec())),
            &Expr::Repeat { body, .. } => Ok((Some(Plan::Repeat), vec![body])),
            &Expr::Rule(r) => Ok((Some(Plan::Rule), vec![self.grammar.rule(r).body])),
        }
    }

    /// The operator of `e` from its lowered parts.
    fn build(&mut self, e: ExprId, plan: Plan) -> Result<OpId, CompileError> {
        // Every part was lowered before its Build step runs (or the lowering failed).
        let op_of = |me: &Self, x: &ExprId| me.ops[x];
        Ok(match (plan, self.grammar.expr(e)) {
            (Plan::Seq(parts), _) => {
                let ops: Vec<OpId> = parts
                    .iter()
                    .map(|p| match p {
                        Part::Ready(op) => *op,
                        Part::Child(x) => op_of(self, x),
                    })
                    .collect();
                self.builder.seq(&ops)
            }
            (Plan::Alt, Expr::Alt(xs)) => {
                let ops: Vec<OpId> = xs.iter().map(|x| op_of(self, x)).collect();
                self.builder.if_else(&ops)
            }
            (Plan::Repeat, &Expr::Repeat { body, min, max }) => {
                let body = op_of(self, &body);
                self.builder.do_while(body, min, max)
            }
            (Plan::Rule, &Expr::Rule(r)) => op_of(self, &self.grammar.rule(r).body),
            _ => unreachable!("a plan is made for its own expression"),
        })
    }

    /// A class or an alternation of UTF-8 byte sequences: one character.
    fn is_one_char(&self, e: ExprId) -> bool {
        let bytes_of_one_char = |x: ExprId| match self.grammar.expr(x) {
            Expr::Class(_) => true,
            Expr::Seq(parts) => {
                parts.len() <= 4
                    && parts
                        .iter()
                        .all(|p| matches!(self.grammar.expr(*p), Expr::Class(_) | Expr::Bytes(_)))
            }
            Expr::Bytes(b) => b.len() <= 4,
            _ => false,
        };
        match self.grammar.expr(e) {
            Expr::Alt(xs) => xs.iter().all(|&x| bytes_of_one_char(x)),
            _ => bytes_of_one_char(e),
        }
    }

    /// The units of expressions that are all byte strings or special tokens.
    fn literal_units(&self, parts: &[ExprId]) -> Result<Option<Vec<Unit>>, CompileError> {
        let mut units = Vec::new();
        for &p in parts {
            match self.grammar.expr(p) {
                Expr::Bytes(b) => units.extend(b.iter().map(|&x| Unit::Byte(x))),
                Expr::Special(name) => units.push(Unit::Special(self.special(name)?)),
                _ => return Ok(None),
            }
        }
        Ok(Some(units))
    }

    fn special(&self, name: &str) -> Result<u32, CompileError> {
        self.vocab.special_id(name).ok_or_else(|| {
            CompileError::unplaced(
                CompileErrorKind::UnknownSpecialToken,
                format!(
                    "special token {name:?} is not in the vocabulary {}",
                    self.vocab.source()
                ),
            )
        })
    }

    /// `text* <special>` (or `text* (<s1>|<s2>)`) at the head of `parts` becomes one `Wait`.
    fn wait_at(&mut self, parts: &[ExprId]) -> Result<Option<OpId>, CompileError> {
        let [first, second, ..] = parts else {
            return Ok(None);
        };
        let Expr::Repeat {
            body,
            min: 0,
            max: None,
        } = *self.grammar.expr(*first)
        else {
            return Ok(None);
        };
        let specials: Vec<&str> = match self.grammar.expr(*second) {
            Expr::Special(s) => vec![s],
            Expr::Alt(xs) => {
                let names: Option<Vec<&str>> = xs
                    .iter()
                    .map(|x| match self.grammar.expr(*x) {
                        Expr::Special(s) => Some(&**s),
                        _ => None,
                    })
                    .collect();
                match names {
                    Some(n) => n,
                    None => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        let Some(body_hir) = self.fusable_hir(body)? else {
            return Ok(None);
        };
        let content_hir = Hir::repetition(Repetition {
            min: 0,
            max: None,
            greedy: true,
            sub: Box::new(body_hir),
        });
        let Some(content) = dfa_from_hir(&content_hir, self.limit, self.deadline)? else {
            return Ok(None);
        };
        let terminators = specials
            .iter()
            .map(|s| self.special(s).map(Terminator::Special))
            .collect::<Result<Vec<_>, _>>()?;
        let max_states =
            usize::try_from(self.limits.get(LimitKind::AutomatonStates)).unwrap_or(usize::MAX);
        let leaf = wait_leaf(&Leaf::Dfa(content), &terminators, max_states, self.deadline)?;
        let bodies = vec![None; terminators.len()];
        Ok(Some(self.builder.wait(Arc::new(leaf), &bodies)?))
    }

    /// [`hir`](Self::hir) if the sub-expression is worth trying to fuse.
    fn fusable_hir(&mut self, e: ExprId) -> Result<Option<Hir>, CompileError> {
        match self.worth_fusing(e) {
            true => self.hir(e),
            false => Ok(None),
        }
    }

    /// Is fusing `e` worth a try ([`FUSION_WORK`])?
    fn worth_fusing(&mut self, e: ExprId) -> bool {
        self.is_one_char(e)
            || self.sizes(e, false).0.saturating_mul(self.limit as u64) <= FUSION_WORK
    }

    /// Nodes of the sub-expression's regex with rules inlined and bounded repeats unrolled
    /// (what the NFA compiler would build), saturating, or with each one-character class
    /// counted as one node (`chars_as_leaves`: such a class is always one leaf, however many
    /// UTF-8 ranges it has); and whether it is recursive (then the size is unbounded).
    /// Memoized and iterative: linear in the IR, on any stack.
    fn sizes(&mut self, root: ExprId, chars_as_leaves: bool) -> (u64, bool) {
        let mut memo = std::mem::take(match chars_as_leaves {
            true => &mut self.leaf_sizes,
            false => &mut self.sizes,
        });
        let mut recursive = false;
        // (expression, its parts are sized)
        let mut stack = vec![(root, false)];
        while let Some((e, ready)) = stack.pop() {
            let expr = self.grammar.expr(e);
            if !ready {
                match memo.get(&e) {
                    Some(&IN_PROGRESS) => recursive = true,
                    Some(_) => {}
                    None => {
                        let parts = self.parts(e, chars_as_leaves);
                        memo.insert(e, IN_PROGRESS);
                        stack.push((e, true));
                        for p in parts {
                            match memo.get(&p) {
                                Some(&IN_PROGRESS) => recursive = true,
                                Some(_) => {}
                                None => stack.push((p, false)),
                            }
                        }
                    }
                }
                continue;
            }
            // A part still being sized is a recursive reference: unbounded, never fused.
            let size_of = |p: &ExprId| memo.get(p).copied().unwrap_or(IN_PROGRESS);
            let n = match expr {
                _ if chars_as_leaves && self.is_one_char(e) => 1,
                Expr::Empty | Expr::Nothing | Expr::Class(_) | Expr::Special(_) => 1,
                Expr::Bytes(b) => b.len() as u64,
                Expr::Seq(xs) | Expr::Alt(xs) => xs
                    .iter()
                    .fold(1u64, |acc, x| acc.saturating_add(size_of(x))),
                Expr::Repeat { body, min, max } => {
                    let copies = max.unwrap_or(*min).saturating_add(1) as u64;
                    size_of(body).saturating_mul(copies)
                }
                Expr::Rule(r) => size_of(&self.grammar.rule(*r).body),
            };
            memo.insert(e, n);
        }
        let n = memo.get(&root).copied().unwrap_or(IN_PROGRESS);
        *match chars_as_leaves {
            true => &mut self.leaf_sizes,
            false => &mut self.sizes,
        } = memo;
        (n, recursive)
    }

    /// The sub-expressions [`OpsLowering::sizes`] adds up for `e`.
    fn parts(&self, e: ExprId, chars_as_leaves: bool) -> SmallVec<[ExprId; 4]> {
        if chars_as_leaves && self.is_one_char(e) {
            return SmallVec::new();
        }
        expr_parts(self.grammar, e).expect("a finished grammar defines every rule")
    }

    /// The sub-expression as a byte regex HIR (see [`byte_hir`]); the caller bounds its size
    /// ([`FUSION_WORK`]).
    pub(super) fn hir(&mut self, root: ExprId) -> Result<Option<Hir>, CompileError> {
        byte_hir(self.grammar, root, u64::MAX, &|| self.tick())
    }
}

/// The sub-expressions of expression `e` of `arena` (a rule's body for a rule); `None` for a
/// rule not defined yet.
fn expr_parts(arena: &impl ExprArena, e: ExprId) -> Option<SmallVec<[ExprId; 4]>> {
    Some(match arena.expr_at(e) {
        Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().copied().collect(),
        Expr::Repeat { body, .. } => smallvec::smallvec![*body],
        Expr::Rule(r) => smallvec::smallvec![arena.body(*r)?],
        _ => SmallVec::new(),
    })
}

/// The language of expression `root` of `arena` as one DFA leaf, if it can be one (see
/// [`byte_hir`]) of at most `max_states` states.
pub(crate) fn expr_leaf(
    arena: &impl ExprArena,
    root: ExprId,
    max_size: u64,
    max_states: usize,
    deadline: &Deadline,
) -> Result<Option<Leaf>, CompileError> {
    let tick = || {
        deadline
            .tick()
            .map_err(|e| CompileError::over_limit(e, Location::None, "an expression's DFA"))
    };
    let Some(hir) = byte_hir(arena, root, max_size, &tick)? else {
        return Ok(None);
    };
    match dfa_from_hir(&hir, max_states, deadline) {
        Ok(dfa) => Ok(dfa.map(Leaf::Dfa)),
        Err(e) if e.kind() == CompileErrorKind::EmptyLanguage => Ok(None),
        Err(e) => Err(e),
    }
}

/// Expression `root` of `arena` as a byte regex HIR, if it has no special tokens, no
/// recursion, nests at most [`MAX_FUSED_DEPTH`] deep and expands (rules inlined, shared
/// parts copied, bounded repeats unrolled) to at most `max_size` nodes. Iterative; a shared
/// sub-expression is built once and copied.
pub(crate) fn byte_hir(
    arena: &impl ExprArena,
    root: ExprId,
    max_size: u64,
    tick: &dyn Fn() -> Result<(), CompileError>,
) -> Result<Option<Hir>, CompileError> {
    // Per expression: its HIR, nesting depth and expanded size.
    let mut built: FxHashMap<ExprId, (Hir, usize, u64)> = FxHashMap::default();
    let mut open: FxHashSet<ExprId> = FxHashSet::default();
    let mut stack = vec![(root, false)];
    while let Some((e, ready)) = stack.pop() {
        tick()?;
        if !ready {
            if built.contains_key(&e) {
                continue;
            }
            if open.contains(&e) {
                // Recursion: the expression cannot be one regex.
                return Ok(None);
            }
            let Some(parts) = expr_parts(arena, e) else {
                return Ok(None);
            };
            open.insert(e);
            stack.push((e, true));
            stack.extend(parts.into_iter().map(|p| (p, false)));
            continue;
        }
        open.remove(&e);
        let part = |p: &ExprId| &built[p];
        let parts_of = |xs: &[ExprId]| -> (Vec<Hir>, usize, u64) {
            let mut hirs = Vec::with_capacity(xs.len());
            let (mut depth, mut size) = (0, 1u64);
            for x in xs {
                let (h, d, n) = part(x);
                hirs.push(h.clone());
                depth = depth.max(*d);
                size = size.saturating_add(*n);
            }
            (hirs, depth + 1, size)
        };
        let (h, depth, size) = match arena.expr_at(e) {
            Expr::Empty => (Hir::empty(), 1, 1),
            Expr::Nothing => (Hir::fail(), 1, 1),
            Expr::Bytes(b) => (Hir::literal(b.clone()), 1, b.len() as u64),
            Expr::Class(c) => (class_hir(*c), 1, 1),
            Expr::Special(_) => return Ok(None),
            Expr::Seq(xs) => {
                let (hs, d, n) = parts_of(xs);
                (Hir::concat(hs), d, n)
            }
            Expr::Alt(xs) => {
                let (hs, d, n) = parts_of(xs);
                (Hir::alternation(hs), d, n)
            }
            &Expr::Repeat { body, min, max } => {
                let (sub, d, n) = part(&body);
                let copies = u64::from(max.unwrap_or(min).max(1));
                let rep = Hir::repetition(Repetition {
                    min,
                    max,
                    greedy: true,
                    sub: Box::new(sub.clone()),
                });
                (rep, d + 1, n.saturating_mul(copies).saturating_add(1))
            }
            Expr::Rule(r) => {
                let body = arena.body(*r).expect("a rule's body, entered before");
                part(&body).clone()
            }
        };
        if depth > MAX_FUSED_DEPTH || size > max_size {
            return Ok(None);
        }
        built.insert(e, (h, depth, size));
    }
    Ok(built.remove(&root).map(|(h, _, _)| h))
}

fn class_hir(c: ByteSet) -> Hir {
    Hir::class(Class::Bytes(ClassBytes::new(
        c.ranges()
            .into_iter()
            .map(|(lo, hi)| ClassBytesRange::new(lo, hi)),
    )))
}

/// One byte of a class: two states, built directly (no determinizer needed).
fn class_leaf(c: ByteSet) -> Leaf {
    let mut raw = super::leaf::RawDfa::default();
    raw.start = raw.add_state(None);
    let end = raw.add_state(Some(0));
    for b in c.iter() {
        raw.rows[0][b as usize] = end;
    }
    // The IR never holds an empty class (`GrammarBuilder::class` makes it `Nothing`), so the
    // start state reaches the exit.
    Leaf::Dfa(raw.finish().expect("a non-empty class"))
}
