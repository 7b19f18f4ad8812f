//! The grammar IR every front end produces and every backend consumes.
//!
//! A [`Grammar`] is a set of named rules over one flat, hash-consed arena of expressions:
//! byte literals, byte classes, special-token symbols, sequences, alternations, bounded and
//! unbounded repeats and rule references. Unicode is compiled away by the front ends (a
//! character class becomes an alternation of UTF-8 byte sequences), so both backends work on
//! bytes. Equal sub-expressions get the same [`ExprId`] inside one grammar, and
//! [`Grammar::structural_hash`] identifies a sub-expression across grammars.

mod hash;
pub mod reference;

use std::collections::HashMap;
use std::fmt;

pub use hash::StructHasher;

use crate::error::{CompileError, CompileErrorKind};

/// Index of an expression in a [`Grammar`]'s arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ExprId(u32);

impl ExprId {
    /// The index as usize.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The id of the `i`-th expression of an arena.
    pub(crate) fn from_index(i: usize) -> ExprId {
        ExprId(i as u32)
    }
}

/// Index of a rule in a [`Grammar`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RuleId(u32);

impl RuleId {
    /// The index as usize.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// A set of bytes (a byte class).
///
/// # Example
///
/// ```
/// use formwork::ir::ByteSet;
///
/// let digits = ByteSet::range(b'0', b'9');
/// assert!(digits.contains(b'7'));
/// assert_eq!(digits.len(), 10);
/// assert_eq!(digits.single(), None);
/// assert_eq!(ByteSet::byte(b'x').single(), Some(b'x'));
/// ```
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ByteSet([u64; 4]);

impl ByteSet {
    /// No byte.
    pub const EMPTY: ByteSet = ByteSet([0; 4]);
    /// Every byte.
    pub const FULL: ByteSet = ByteSet([u64::MAX; 4]);

    /// One byte.
    pub fn byte(b: u8) -> ByteSet {
        let mut s = ByteSet::EMPTY;
        s.insert(b);
        s
    }

    /// The bytes `lo..=hi`.
    pub fn range(lo: u8, hi: u8) -> ByteSet {
        let mut s = ByteSet::EMPTY;
        s.insert_range(lo, hi);
        s
    }

    /// Adds a byte.
    pub fn insert(&mut self, b: u8) {
        self.0[b as usize / 64] |= 1 << (b % 64);
    }

    /// Adds `lo..=hi`.
    pub fn insert_range(&mut self, lo: u8, hi: u8) {
        for b in lo..=hi {
            self.insert(b);
        }
    }

    /// Does the set hold `b`?
    #[inline]
    pub fn contains(&self, b: u8) -> bool {
        self.0[b as usize / 64] & (1 << (b % 64)) != 0
    }

    /// Number of bytes in the set.
    pub fn len(&self) -> usize {
        self.0.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// True if no byte is in the set.
    pub fn is_empty(&self) -> bool {
        self.0 == [0; 4]
    }

    /// The only byte, if the set has exactly one.
    pub fn single(&self) -> Option<u8> {
        (self.len() == 1).then(|| self.iter().next().unwrap())
    }

    /// Union.
    pub fn union(&self, other: &ByteSet) -> ByteSet {
        ByteSet(std::array::from_fn(|i| self.0[i] | other.0[i]))
    }

    /// Intersection.
    pub fn intersection(&self, other: &ByteSet) -> ByteSet {
        ByteSet(std::array::from_fn(|i| self.0[i] & other.0[i]))
    }

    /// Complement.
    pub fn complement(&self) -> ByteSet {
        ByteSet(std::array::from_fn(|i| !self.0[i]))
    }

    /// The bytes in ascending order (a word at a time: grammars hold many sparse sets).
    pub fn iter(&self) -> impl Iterator<Item = u8> + '_ {
        self.0.iter().enumerate().flat_map(|(i, &word)| {
            let mut w = word;
            std::iter::from_fn(move || {
                (w != 0).then(|| {
                    let b = (i * 64) as u32 + w.trailing_zeros();
                    w &= w - 1;
                    b as u8
                })
            })
        })
    }

    /// The set as maximal ranges `(lo, hi)`.
    pub fn ranges(&self) -> Vec<(u8, u8)> {
        let mut out: Vec<(u8, u8)> = Vec::new();
        for b in self.iter() {
            match out.last_mut() {
                Some((_, hi)) if *hi as u16 + 1 == b as u16 => *hi = b,
                _ => out.push((b, b)),
            }
        }
        out
    }

    /// The four 64-bit words (bit `b % 64` of word `b / 64`).
    pub fn words(&self) -> [u64; 4] {
        self.0
    }
}

impl fmt::Debug for ByteSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        for (lo, hi) in self.ranges() {
            if lo == hi {
                write!(f, "{}", std::ascii::escape_default(lo))?;
            } else {
                write!(
                    f,
                    "{}-{}",
                    std::ascii::escape_default(lo),
                    std::ascii::escape_default(hi)
                )?;
            }
        }
        f.write_str("]")
    }
}

/// One expression node.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Expr {
    /// The empty string.
    Empty,
    /// The empty language (no string at all); front ends use it for impossible branches.
    Nothing,
    /// A byte string.
    Bytes(Box<[u8]>),
    /// One byte of a class.
    Class(ByteSet),
    /// A special token, by content (e.g. `<|im_start|>`); resolved against the vocabulary when
    /// a backend compiles the grammar.
    Special(Box<str>),
    /// A sequence.
    Seq(Box<[ExprId]>),
    /// An alternation.
    Alt(Box<[ExprId]>),
    /// `body{min,max}`; `max = None` is unbounded.
    Repeat {
        /// The repeated expression.
        body: ExprId,
        /// Least number of repetitions.
        min: u32,
        /// Most repetitions, or unbounded.
        max: Option<u32>,
    },
    /// A reference to a rule.
    Rule(RuleId),
}

/// A named rule.
#[derive(Clone, Debug)]
pub struct Rule {
    /// The rule's name (for errors and dumps).
    pub name: String,
    /// Its body.
    pub body: ExprId,
}

/// A grammar: rules over a flat expression arena, one start rule.
///
/// # Example
///
/// ```
/// use formwork::ir::{ByteSet, GrammarBuilder};
///
/// // list ::= "[" (item ("," item)*)? "]" ; item ::= [0-9]+
/// let mut g = GrammarBuilder::new();
/// let item = g.rule("item");
/// let digit = g.class(ByteSet::range(b'0', b'9'));
/// let digits = g.repeat(digit, 1, None);
/// g.define(item, digits).unwrap();
/// let item_ref = g.rule_ref(item);
/// let comma = g.bytes(b",");
/// let more = g.seq([comma, item_ref]);
/// let tail = g.repeat(more, 0, None);
/// let items = g.seq([item_ref, tail]);
/// let body = g.optional(items);
/// let (open, close) = (g.bytes(b"["), g.bytes(b"]"));
/// let list_body = g.seq([open, body, close]);
/// let list = g.rule("list");
/// g.define(list, list_body).unwrap();
/// let grammar = g.finish(list).unwrap();
/// assert_eq!(grammar.rules().len(), 2);
/// assert!(!grammar.is_recursive());
/// ```
#[derive(Clone, Debug)]
pub struct Grammar {
    exprs: Vec<Expr>,
    rules: Vec<Rule>,
    start: RuleId,
    /// [`Grammar::rule_graph`], computed on first use (the router and the CFG backend both
    /// need it).
    rule_graph: std::sync::OnceLock<Vec<Vec<RuleId>>>,
}

impl Grammar {
    /// The expression behind an id.
    pub fn expr(&self, id: ExprId) -> &Expr {
        &self.exprs[id.index()]
    }

    /// Every expression (index = `ExprId`).
    pub fn exprs(&self) -> &[Expr] {
        &self.exprs
    }

    /// The rules (index = `RuleId`).
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// A rule.
    pub fn rule(&self, id: RuleId) -> &Rule {
        &self.rules[id.index()]
    }

    /// The start rule.
    pub fn start(&self) -> RuleId {
        self.start
    }

    /// True if some rule reaches itself through references (a stack is needed, unless the
    /// recursion is only through repeats the IR already expresses).
    pub fn is_recursive(&self) -> bool {
        // Depth-first search for a back edge on the rule reference graph.
        let refs = self.rule_graph();
        let mut color = vec![0u8; self.rules.len()];
        fn visit(r: usize, refs: &[Vec<RuleId>], color: &mut [u8]) -> bool {
            color[r] = 1;
            for next in &refs[r] {
                let c = color[next.index()];
                if c == 1 || (c == 0 && visit(next.index(), refs, color)) {
                    return true;
                }
            }
            color[r] = 2;
            false
        }
        (0..self.rules.len()).any(|r| color[r] == 0 && visit(r, refs, &mut color))
    }

    /// The rules referenced directly inside `expr` (not following references).
    pub fn rule_refs(&self, expr: ExprId) -> Vec<RuleId> {
        self.collect_rule_refs(expr, &mut vec![u32::MAX; self.exprs.len()], 0)
    }

    /// [`rule_refs`](Self::rule_refs) of every rule's body, in rule order.
    pub fn rule_graph(&self) -> &[Vec<RuleId>] {
        self.rule_graph.get_or_init(|| {
            // One visit mark array for all rules (a fresh one per rule was quadratic).
            let mut seen = vec![u32::MAX; self.exprs.len()];
            (0..self.rules.len())
                .map(|i| self.collect_rule_refs(self.rules[i].body, &mut seen, i as u32))
                .collect()
        })
    }

    /// Rules referenced inside `expr`, marking visited expressions with `mark` in `seen`.
    fn collect_rule_refs(&self, expr: ExprId, seen: &mut [u32], mark: u32) -> Vec<RuleId> {
        let mut out = Vec::new();
        let mut stack = vec![expr];
        while let Some(e) = stack.pop() {
            if std::mem::replace(&mut seen[e.index()], mark) == mark {
                continue;
            }
            match self.expr(e) {
                Expr::Rule(r) => out.push(*r),
                Expr::Seq(xs) | Expr::Alt(xs) => stack.extend(xs.iter().copied()),
                Expr::Repeat { body, .. } => stack.push(*body),
                _ => {}
            }
        }
        out
    }
}

/// Builds a [`Grammar`], hash-consing equal expressions.
#[derive(Default)]
pub struct GrammarBuilder {
    exprs: Vec<Expr>,
    /// Hash-consing: the ids of the expressions with each hash (Fx hash: expressions are built
    /// by front ends, not chosen by an adversary who could aim at collisions, and interning is
    /// most of a schema's front-end time). Keyed by hash so each expression is stored once.
    dedup: rustc_hash::FxHashMap<u64, smallvec::SmallVec<[ExprId; 1]>>,
    rules: Vec<(String, Option<ExprId>)>,
    rule_names: HashMap<String, RuleId>,
}

impl GrammarBuilder {
    /// An empty builder.
    pub fn new() -> GrammarBuilder {
        GrammarBuilder::default()
    }

    fn intern(&mut self, e: Expr) -> ExprId {
        use std::hash::BuildHasher;
        let hash = rustc_hash::FxBuildHasher.hash_one(&e);
        let ids = self.dedup.entry(hash).or_default();
        if let Some(&id) = ids.iter().find(|id| self.exprs[id.index()] == e) {
            return id;
        }
        let id = ExprId(self.exprs.len() as u32);
        ids.push(id);
        self.exprs.push(e);
        id
    }

    /// The expression behind an id built so far.
    pub fn expr(&self, id: ExprId) -> &Expr {
        &self.exprs[id.index()]
    }

    /// Number of distinct expressions built so far (front ends bound grammar size with it).
    pub fn len(&self) -> usize {
        self.exprs.len()
    }

    /// True before any expression was built.
    pub fn is_empty(&self) -> bool {
        self.exprs.is_empty()
    }

    /// The empty string.
    pub fn empty(&mut self) -> ExprId {
        self.intern(Expr::Empty)
    }

    /// The empty language.
    pub fn nothing(&mut self) -> ExprId {
        self.intern(Expr::Nothing)
    }

    /// A byte string (empty bytes give [`Expr::Empty`]).
    pub fn bytes(&mut self, b: &[u8]) -> ExprId {
        if b.is_empty() {
            return self.empty();
        }
        self.intern(Expr::Bytes(b.into()))
    }

    /// UTF-8 text.
    pub fn text(&mut self, s: &str) -> ExprId {
        self.bytes(s.as_bytes())
    }

    /// One byte of a class (an empty class is the empty language).
    pub fn class(&mut self, c: ByteSet) -> ExprId {
        if c.is_empty() {
            return self.nothing();
        }
        self.intern(Expr::Class(c))
    }

    /// A special token by content.
    pub fn special(&mut self, content: &str) -> ExprId {
        self.intern(Expr::Special(content.into()))
    }

    /// A sequence; nested sequences are flattened, empty strings dropped, adjacent byte strings
    /// joined, and a sequence with an impossible part is impossible.
    pub fn seq(&mut self, parts: impl IntoIterator<Item = ExprId>) -> ExprId {
        let mut flat: Vec<ExprId> = Vec::new();
        for p in parts {
            match self.expr(p) {
                Expr::Empty => {}
                Expr::Nothing => return self.nothing(),
                Expr::Seq(xs) => flat.extend(xs.iter().copied()),
                _ => flat.push(p),
            }
        }
        let mut joined: Vec<ExprId> = Vec::with_capacity(flat.len());
        for p in flat {
            let last = joined.last().map(|&l| self.expr(l));
            if let (Some(Expr::Bytes(a)), Expr::Bytes(b)) = (last, self.expr(p)) {
                let both = [&a[..], &b[..]].concat();
                *joined.last_mut().unwrap() = self.bytes(&both);
                continue;
            }
            joined.push(p);
        }
        match joined.len() {
            0 => self.empty(),
            1 => joined[0],
            _ => self.intern(Expr::Seq(joined.into())),
        }
    }

    /// An alternation; nested alternations are flattened, duplicates and impossible branches
    /// dropped.
    pub fn alt(&mut self, branches: impl IntoIterator<Item = ExprId>) -> ExprId {
        let mut flat: Vec<ExprId> = Vec::new();
        for b in branches {
            match self.expr(b) {
                Expr::Nothing => {}
                Expr::Alt(xs) => flat.extend(xs.iter().copied()),
                _ => flat.push(b),
            }
        }
        let mut seen = rustc_hash::FxHashSet::default();
        flat.retain(|x| seen.insert(*x));
        match flat.len() {
            0 => self.nothing(),
            1 => flat[0],
            _ => self.intern(Expr::Alt(flat.into())),
        }
    }

    /// `body{min,max}` (`max = None`: unbounded). `{1,1}` is the body itself, `{0,0}` empty.
    pub fn repeat(&mut self, body: ExprId, min: u32, max: Option<u32>) -> ExprId {
        match (min, max) {
            (_, Some(0)) => return self.empty(),
            (1, Some(1)) => return body,
            _ => {}
        }
        match self.expr(body) {
            Expr::Empty => return self.empty(),
            Expr::Nothing if min == 0 => return self.empty(),
            Expr::Nothing => return self.nothing(),
            _ => {}
        }
        self.intern(Expr::Repeat { body, min, max })
    }

    /// `body?`.
    pub fn optional(&mut self, body: ExprId) -> ExprId {
        self.repeat(body, 0, Some(1))
    }

    /// The rule called `name`, declared if new.
    pub fn rule(&mut self, name: &str) -> RuleId {
        if let Some(&r) = self.rule_names.get(name) {
            return r;
        }
        let r = RuleId(self.rules.len() as u32);
        self.rules.push((name.to_string(), None));
        self.rule_names.insert(name.to_string(), r);
        r
    }

    /// Looks up a rule without declaring it.
    pub fn find_rule(&self, name: &str) -> Option<RuleId> {
        self.rule_names.get(name).copied()
    }

    /// Gives `rule` its body. Defining a rule twice is an error.
    pub fn define(&mut self, rule: RuleId, body: ExprId) -> Result<(), CompileError> {
        let slot = &mut self.rules[rule.index()];
        if slot.1.is_some() {
            return Err(CompileError::unplaced(
                CompileErrorKind::Invalid,
                format!("rule `{}` is defined twice", slot.0),
            ));
        }
        slot.1 = Some(body);
        Ok(())
    }

    /// A reference to `rule`.
    pub fn rule_ref(&mut self, rule: RuleId) -> ExprId {
        self.intern(Expr::Rule(rule))
    }

    /// The grammar starting at `start`; every referenced rule must be defined.
    pub fn finish(self, start: RuleId) -> Result<Grammar, CompileError> {
        let mut rules = Vec::with_capacity(self.rules.len());
        for (name, body) in self.rules {
            let body = body.ok_or_else(|| {
                CompileError::unplaced(
                    CompileErrorKind::Undefined,
                    format!("rule `{name}` is used but never defined"),
                )
            })?;
            rules.push(Rule { name, body });
        }
        Ok(Grammar {
            exprs: self.exprs,
            rules,
            start,
            rule_graph: std::sync::OnceLock::new(),
        })
    }
}
