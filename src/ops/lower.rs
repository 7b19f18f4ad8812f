//! Lowering the grammar IR to operators, and the regex compiler built on it.
//!
//! The IR maps onto operators structurally — byte strings and special tokens to `Write`,
//! sequences to `Seq`, alternations to `IfElse`, repeats to `DoWhile`, a repeat of text followed
//! by special tokens to `Wait` — and every sub-expression whose language fits in a small DFA is
//! *fused* into one DFA leaf. Fusion is what keeps masks cheap: a token like `hello` inside
//! `[a-z]+` stays inside one leaf state (one cached mask) instead of crossing five operator
//! boundaries. Large bounded repeats (`{1,100000}`) do not fuse and stay `DoWhile` counters.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use regex_syntax::hir::{Class, ClassBytes, ClassBytesRange, Hir, Repetition};

use super::leaf::{dfa_from_hir, Leaf, Terminator, Unit};
use super::program::{OpId, Program, ProgramBuilder};
use crate::base::byteset::ByteSet;
use crate::error::{CompileError, CompileErrorKind};
// `op`, `size` and `hir` recurse along the grammar (nested expressions, rule chains as long as
// the grammar is large): each step on a fresh stack segment when this one runs low, so a
// 100,000-rule chain routes and lowers on a 256 KiB thread.
use crate::front::guard::guarded;
use crate::ir::{Expr, ExprId, Grammar, GrammarBuilder, RuleId};
use crate::vocab::Vocab;

/// States a one-character class may take (the largest Unicode classes need a few hundred).
const CHAR_CLASS_STATES: usize = 4_096;

/// Largest DFA a sub-expression is fused into by default.
pub const DEFAULT_DFA_STATE_LIMIT: usize = 2_000;

/// A sub-expression whose regex, with rules inlined and repeats unrolled, would have more
/// nodes than this many per DFA state of the limit is not tried for fusion: its NFA could not
/// determinize within the limit anyway, and building its regex would cost time and memory
/// exponential in the sharing of the IR (a schema's optional properties share their tails).
const FUSION_NODES_PER_STATE: u64 = 64;

/// Options for lowering IR to operators.
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

/// Lowers `root` of `grammar` into an operator program. Special-token names are resolved
/// against `vocab`; recursion is an error of kind `NotRegular` (the Earley backend takes those).
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
    let mut lowering = Lowering {
        grammar,
        vocab,
        limit: config.dfa_state_limit,
        builder: ProgramBuilder::new(),
        path: Vec::new(),
        ops: HashMap::new(),
        sizes: HashMap::new(),
        leaf_sizes: HashMap::new(),
    };
    let root = lowering.op(root)?;
    lowering.builder.finish(root)
}

/// Widest alternation of large branches the operator backend takes: each live branch is a
/// cursor thread stepped and walked for every mask, so a wide one (an object of many optional
/// properties, whose branches share their tails and are too big to fuse into one DFA) is
/// faster on Earley, whose items share those tails.
const MAX_UNFUSED_ALTERNATIVES: usize = 8;

/// Largest regular grammar (in [`Lowering::size`] nodes: rules inlined, bounded repeats
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
/// per step). A structural check, linear in the grammar, that builds nothing.
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
    if grammar.is_recursive() {
        return false;
    }
    let vocab = Vocab::from_token_bytes(Vec::new(), &[], &[]).expect("an empty vocabulary");
    let mut lowering = Lowering {
        grammar,
        vocab: &vocab,
        limit: config.dfa_state_limit,
        builder: ProgramBuilder::new(),
        path: Vec::new(),
        ops: HashMap::new(),
        sizes: HashMap::new(),
        leaf_sizes: HashMap::new(),
    };
    if lowering.size(grammar.rule(grammar.start()).body, true) > MAX_ROUTED_SIZE {
        return false;
    }
    let budget = lowering.fusion_budget();
    (0..grammar.exprs().len()).all(|i| {
        let e = ExprId::from_index(i);
        match grammar.expr(e) {
            Expr::Alt(xs) if xs.len() > MAX_UNFUSED_ALTERNATIVES => {
                lowering.expanded_size(e) <= budget
            }
            _ => true,
        }
    })
}

struct Lowering<'a> {
    grammar: &'a Grammar,
    vocab: &'a Vocab,
    limit: usize,
    builder: ProgramBuilder,
    path: Vec<RuleId>,
    ops: HashMap<ExprId, OpId>,
    /// Memos of [`Lowering::size`] (without and with `chars_as_leaves`).
    sizes: HashMap<ExprId, u64>,
    leaf_sizes: HashMap<ExprId, u64>,
}

impl Lowering<'_> {
    fn op(&mut self, e: ExprId) -> Result<OpId, CompileError> {
        guarded(|| {
            if let Some(&op) = self.ops.get(&e) {
                return Ok(op);
            }
            let op = self.lower_uncached(e)?;
            self.ops.insert(e, op);
            Ok(op)
        })
    }

    fn lower_uncached(&mut self, e: ExprId) -> Result<OpId, CompileError> {
        if let Some(units) = self.literal_units(&[e])? {
            return Ok(self.builder.write(&units));
        }
        if let Some(hir) = self.fusable_hir(e)? {
            // One character of a (Unicode) class is always a leaf, whatever the limit: it is
            // the operator's unit of content, as in WGrammar's character-class Waits.
            let limit = if self.is_one_char(e) {
                self.limit.max(CHAR_CLASS_STATES)
            } else {
                self.limit
            };
            if let Some(dfa) = dfa_from_hir(&hir, limit)? {
                return Ok(self.builder.leaf(Arc::new(Leaf::Dfa(dfa))));
            }
        }
        Ok(match self.grammar.expr(e).clone() {
            Expr::Empty => self.builder.empty(),
            Expr::Bytes(_) | Expr::Special(_) => unreachable!("literals are lowered above"),
            Expr::Nothing => {
                return Err(CompileError::unplaced(
                    CompileErrorKind::EmptyLanguage,
                    "the grammar matches no string",
                ))
            }
            Expr::Class(c) => {
                let leaf = class_leaf(c);
                self.builder.leaf(Arc::new(leaf))
            }
            Expr::Seq(xs) => {
                let mut ops = Vec::with_capacity(xs.len());
                let mut i = 0;
                while i < xs.len() {
                    if let Some(wait) = self.wait_at(&xs[i..])? {
                        ops.push(wait);
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
                        let units = self
                            .literal_units(&xs[i..i + run])?
                            .expect("a run of literals");
                        ops.push(self.builder.write(&units));
                        i += run;
                        continue;
                    }
                    ops.push(self.op(xs[i])?);
                    i += 1;
                }
                self.builder.seq(&ops)
            }
            Expr::Alt(xs) => {
                let ops = xs
                    .iter()
                    .map(|&x| self.op(x))
                    .collect::<Result<Vec<_>, _>>()?;
                self.builder.if_else(&ops)
            }
            Expr::Repeat { body, min, max } => {
                let body = self.op(body)?;
                self.builder.do_while(body, min, max)
            }
            Expr::Rule(r) => {
                if self.path.contains(&r) {
                    return Err(CompileError::unplaced(
                        CompileErrorKind::NotRegular,
                        format!(
                            "rule `{}` is recursive; operator programs are finite-state",
                            self.grammar.rule(r).name
                        ),
                    ));
                }
                self.path.push(r);
                let op = self.op(self.grammar.rule(r).body);
                self.path.pop();
                op?
            }
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
        let Some(content) = dfa_from_hir(&content_hir, self.limit)? else {
            return Ok(None);
        };
        let terminators = specials
            .iter()
            .map(|s| self.special(s).map(Terminator::Special))
            .collect::<Result<Vec<_>, _>>()?;
        let leaf = Leaf::wait(&Leaf::Dfa(content), &terminators)?;
        let bodies = vec![None; terminators.len()];
        Ok(Some(self.builder.wait(Arc::new(leaf), &bodies)?))
    }

    /// [`hir`](Self::hir) if the sub-expression is small enough to be worth fusing.
    fn fusable_hir(&mut self, e: ExprId) -> Result<Option<Hir>, CompileError> {
        if self.expanded_size(e) > self.fusion_budget() {
            return Ok(None);
        }
        self.hir(e)
    }

    /// Largest expanded size worth trying to fuse.
    fn fusion_budget(&self) -> u64 {
        (self.limit.max(CHAR_CLASS_STATES) as u64).saturating_mul(FUSION_NODES_PER_STATE)
    }

    /// Nodes of the sub-expression's regex with rules inlined and bounded repeats unrolled
    /// (what the NFA compiler would build), saturating; memoized, so linear in the IR.
    fn expanded_size(&mut self, e: ExprId) -> u64 {
        self.size(e, false)
    }

    /// [`Self::expanded_size`], or with each one-character class counted as one node
    /// (`chars_as_leaves`: such a class is always one leaf, however many UTF-8 ranges it has).
    fn size(&mut self, e: ExprId, chars_as_leaves: bool) -> u64 {
        guarded(|| {
            fn memo<'m>(
                me: &'m mut Lowering<'_>,
                chars_as_leaves: bool,
            ) -> &'m mut HashMap<ExprId, u64> {
                match chars_as_leaves {
                    true => &mut me.leaf_sizes,
                    false => &mut me.sizes,
                }
            }
            if let Some(&n) = memo(self, chars_as_leaves).get(&e) {
                return n;
            }
            // A recursive reference never fuses: count it as unbounded while it is being sized.
            memo(self, chars_as_leaves).insert(e, u64::MAX);
            let n = match self.grammar.expr(e).clone() {
                _ if chars_as_leaves && self.is_one_char(e) => 1,
                Expr::Empty | Expr::Nothing | Expr::Class(_) | Expr::Special(_) => 1,
                Expr::Bytes(b) => b.len() as u64,
                Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().fold(1u64, |acc, &x| {
                    acc.saturating_add(self.size(x, chars_as_leaves))
                }),
                Expr::Repeat { body, min, max } => {
                    let copies = max.unwrap_or(min).saturating_add(1) as u64;
                    self.size(body, chars_as_leaves).saturating_mul(copies)
                }
                Expr::Rule(r) => self.size(self.grammar.rule(r).body, chars_as_leaves),
            };
            memo(self, chars_as_leaves).insert(e, n);
            n
        })
    }

    /// The sub-expression as a byte regex HIR, if it has no special tokens and no recursion.
    fn hir(&mut self, e: ExprId) -> Result<Option<Hir>, CompileError> {
        guarded(|| {
            Ok(match self.grammar.expr(e).clone() {
                Expr::Empty => Some(Hir::empty()),
                Expr::Nothing => Some(Hir::fail()),
                Expr::Bytes(b) => Some(Hir::literal(b)),
                Expr::Class(c) => Some(class_hir(c)),
                Expr::Special(_) => None,
                Expr::Seq(xs) | Expr::Alt(xs) => {
                    let mut parts = Vec::with_capacity(xs.len());
                    for &x in xs.iter() {
                        match self.hir(x)? {
                            Some(h) => parts.push(h),
                            None => return Ok(None),
                        }
                    }
                    Some(if matches!(self.grammar.expr(e), Expr::Seq(_)) {
                        Hir::concat(parts)
                    } else {
                        Hir::alternation(parts)
                    })
                }
                Expr::Repeat { body, min, max } => self.hir(body)?.map(|sub| {
                    Hir::repetition(Repetition {
                        min,
                        max,
                        greedy: true,
                        sub: Box::new(sub),
                    })
                }),
                Expr::Rule(r) => {
                    if self.path.contains(&r) {
                        return Ok(None);
                    }
                    self.path.push(r);
                    let h = self.hir(self.grammar.rule(r).body);
                    self.path.pop();
                    h?
                }
            })
        })
    }
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
    Leaf::Dfa(raw.finish().expect("a non-empty class"))
}

/// Compiles regexes to operator programs, caching by pattern.
///
/// # Example
///
/// ```
/// use formwork::ops::RegexCompiler;
///
/// let compiler = RegexCompiler::new();
/// let a = compiler.compile(r"[a-z]+@[a-z]+\.com").unwrap();
/// let b = compiler.compile(r"[a-z]+@[a-z]+\.com").unwrap();
/// assert!(std::sync::Arc::ptr_eq(&a, &b)); // cached
/// assert_eq!(a.describe(), "Dfa");
/// ```
#[derive(Debug, Default)]
pub struct RegexCompiler {
    config: LowerConfig,
    cache: Mutex<HashMap<String, Arc<Program>>>,
}

impl RegexCompiler {
    /// A compiler with default options.
    pub fn new() -> RegexCompiler {
        RegexCompiler::default()
    }

    /// A compiler with these lowering options.
    pub fn with_config(config: LowerConfig) -> RegexCompiler {
        RegexCompiler {
            config,
            cache: Default::default(),
        }
    }

    /// The program of `pattern` (whole-text semantics; special tokens cannot appear in a regex,
    /// so no vocabulary is needed).
    pub fn compile(&self, pattern: &str) -> Result<Arc<Program>, CompileError> {
        if let Some(p) = self
            .cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(pattern)
        {
            return Ok(p.clone());
        }
        let mut g = GrammarBuilder::new();
        let root = crate::front::regex::regex_to_ir(pattern, &mut g)?;
        let start = g.rule("regex");
        g.define(start, root)?;
        let grammar = g.finish(start)?;
        let empty = Vocab::from_token_bytes(Vec::new(), &[], &[]).expect("an empty vocabulary");
        let program = Arc::new(lower(&grammar, root, &empty, &self.config).map_err(|e| {
            CompileError::new(
                e.kind(),
                e.location().clone(),
                format!("regex {pattern:?}: {}", e.message()),
            )
        })?);
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        // Patterns come from requests: keep the cache from growing without bound.
        if cache.len() >= 4096 {
            cache.clear();
        }
        cache.insert(pattern.to_string(), program.clone());
        Ok(program)
    }

    /// `pattern` as a single DFA leaf (no size limit beyond the determinizer's), for building
    /// operator programs by hand.
    pub fn leaf(&self, pattern: &str) -> Result<Leaf, CompileError> {
        let mut g = GrammarBuilder::new();
        let root = crate::front::regex::regex_to_ir(pattern, &mut g)?;
        let start = g.rule("regex");
        g.define(start, root)?;
        let grammar = g.finish(start)?;
        let mut lowering = Lowering {
            grammar: &grammar,
            vocab: &Vocab::from_token_bytes(Vec::new(), &[], &[]).expect("an empty vocabulary"),
            limit: usize::MAX / 4096,
            builder: ProgramBuilder::new(),
            path: Vec::new(),
            ops: HashMap::new(),
            sizes: HashMap::new(),
            leaf_sizes: HashMap::new(),
        };
        let hir = lowering.hir(root)?.expect("a regex has no special tokens");
        dfa_from_hir(&hir, 1 << 20)?.map(Leaf::Dfa).ok_or_else(|| {
            CompileError::unplaced(
                CompileErrorKind::Limit,
                format!("regex {pattern:?}: DFA too large"),
            )
        })
    }
}
