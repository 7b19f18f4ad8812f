//! The grammar IR every front end produces and every backend consumes.
//!
//! A [`Grammar`] is a set of named rules over one flat, hash-consed arena of expressions:
//! byte literals, byte classes, special-token symbols, sequences, alternations, bounded and
//! unbounded repeats and rule references. Unicode is compiled away by the front ends (a
//! character class becomes an alternation of UTF-8 byte sequences), so both backends work on
//! bytes. Equal sub-expressions get the same [`ExprId`] inside one grammar; backends key their
//! caches by structural hashes of its expressions.
//!
//! # Guarantees for the passes that walk a grammar
//!
//! The grammars come from untrusted text, so the IR bounds what a pass over it may meet:
//!
//! - **Expression depth is at most [`max_expr_depth`]** of the builder's [`Limits::nesting`]
//!   ([`MAX_EXPR_DEPTH`] at the defaults). The depth of an expression is 1 for a
//!   leaf (bytes, class, special, empty, nothing, and a [`Expr::Rule`] reference: references are
//!   not followed) and 1 + the deepest child for a sequence, an alternation or a repeat.
//!   [`GrammarBuilder`] checks it as each node is built (O(children), like hash-consing), so a
//!   pass that recurses over the children of one expression recurses at most
//!   `MAX_EXPR_DEPTH` deep at the default limits; keep such a pass's frame under ~128 bytes
//!   for a 256 KiB stack, or use an explicit stack (a server that raises the nesting limit
//!   raises this bound with it).
//! - **Rule chains are not bounded** except by the grammar's size: a pass that follows
//!   [`Expr::Rule`] references (inlining, reachability, the recognizer's expansion) must not
//!   recurse along them (a chain of 100,000 rules is a valid grammar). Use an explicit stack or
//!   an order of the rule graph.
//! - **Children have smaller ids than their parents** ([`ExprId`] order is a topological order
//!   of the expression DAG, references aside): a pass can visit `exprs()` in index order and
//!   find every child already done.
//! - **Size is at most [`Limits::grammar_size`](crate::limits::Limits::grammar_size)**
//!   expressions, as many rules, and as many parts of sequences and alternations in all, for
//!   a builder made with [`GrammarBuilder::with_limits`] (the defaults for
//!   [`GrammarBuilder::new`]). Parts are counted because flattening copies them: a sequence of
//!   a sequence of itself doubles with each step while adding one expression. For the same
//!   reason the byte strings hold at most [`Limits::input_bytes`](crate::limits::Limits::input_bytes)
//!   bytes in all.
//!
//! A builder that reaches a limit stops growing and [`GrammarBuilder::finish`] (and
//! [`GrammarBuilder::define`]) return the `Limit` error, so a front end needs no check of its
//! own to stay within these bounds; it may call [`GrammarBuilder::check`] to stop early.

pub(crate) mod facts;
pub(crate) mod graph;
mod hash;
pub mod recognizer;
// The test oracle, for formwork's own tests only.
#[cfg(feature = "internals")]
pub mod reference;

use std::collections::HashMap;

// The backends' cache keys; public to formwork's own tests.
#[cfg(feature = "internals")]
pub use hash::StructHasher;
#[cfg(not(feature = "internals"))]
pub(crate) use hash::StructHasher;

use crate::base::byteset::ByteSet;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::limits::{LimitExceeded, LimitKind, Limits};

/// Deepest expression a [`Grammar`] holds at the default [`Limits`] (see the
/// [module docs](self) and [`max_expr_depth`]).
pub const MAX_EXPR_DEPTH: u32 = EXPR_LEVELS_PER_NESTING * 128;

/// IR levels one level of front-end nesting may take (a JSON Schema `items` level takes four).
const EXPR_LEVELS_PER_NESTING: u32 = 8;

/// Deepest expression a builder under `limits` accepts: 8 IR levels
/// (`EXPR_LEVELS_PER_NESTING`) per level of [`Limits::nesting`], so raising that limit lets
/// the front ends' deeper output through.
///
/// ```
/// use formwork::ir::{max_expr_depth, MAX_EXPR_DEPTH};
/// use formwork::Limits;
///
/// assert_eq!(max_expr_depth(&Limits::new()), MAX_EXPR_DEPTH);
/// assert_eq!(max_expr_depth(&Limits::new().nesting(1000)), 8000);
/// ```
pub fn max_expr_depth(limits: &Limits) -> u32 {
    let nesting = limits.get(LimitKind::Nesting);
    (nesting.saturating_mul(EXPR_LEVELS_PER_NESTING as u64)).min(u32::MAX as u64) as u32
}

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

/// The parts of a sequence or alternation being built: most have a handful.
type Parts = smallvec::SmallVec<[ExprId; 16]>;

/// Alternations of at most this many branches drop duplicates by comparing each with those
/// kept, without a hash set.
const FEW_BRANCHES: usize = 16;

/// An [`Expr`] with its contents borrowed: what the builder hashes and compares to find an
/// expression it holds, so that finding one allocates nothing.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum Key<'a> {
    Empty,
    Nothing,
    Bytes(&'a [u8]),
    Class(ByteSet),
    Special(&'a str),
    Seq(&'a [ExprId]),
    Alt(&'a [ExprId]),
    Repeat {
        body: ExprId,
        min: u32,
        max: Option<u32>,
    },
    Rule(RuleId),
}

impl<'a> Key<'a> {
    fn of(e: &'a Expr) -> Key<'a> {
        match e {
            Expr::Empty => Key::Empty,
            Expr::Nothing => Key::Nothing,
            Expr::Bytes(b) => Key::Bytes(b),
            Expr::Class(c) => Key::Class(*c),
            Expr::Special(s) => Key::Special(s),
            Expr::Seq(xs) => Key::Seq(xs),
            Expr::Alt(xs) => Key::Alt(xs),
            &Expr::Repeat { body, min, max } => Key::Repeat { body, min, max },
            &Expr::Rule(r) => Key::Rule(r),
        }
    }

    fn to_expr(self) -> Expr {
        match self {
            Key::Empty => Expr::Empty,
            Key::Nothing => Expr::Nothing,
            Key::Bytes(b) => Expr::Bytes(b.into()),
            Key::Class(c) => Expr::Class(c),
            Key::Special(s) => Expr::Special(s.into()),
            Key::Seq(xs) => Expr::Seq(xs.into()),
            Key::Alt(xs) => Expr::Alt(xs.into()),
            Key::Repeat { body, min, max } => Expr::Repeat { body, min, max },
            Key::Rule(r) => Expr::Rule(r),
        }
    }
}

/// A named rule.
#[derive(Clone, Debug)]
pub struct Rule {
    /// The rule's name (for errors and dumps).
    pub name: String,
    /// Its body.
    pub body: ExprId,
    /// Called wherever it is referred to as a last step, never built in place there (see
    /// [`GrammarBuilder::keep_called`]; a rule small enough to inline is still copied).
    pub called: bool,
}

/// Expressions and rule bodies, read alike from a finished [`Grammar`] and from a
/// [`GrammarBuilder`] still being filled: a front end reads back what it built (the JSON
/// Schema front end makes automata of member values the matcher tells objects apart by).
pub(crate) trait ExprArena {
    /// The expression behind an id.
    fn expr_at(&self, id: ExprId) -> &Expr;
    /// The body of `rule` (`None`: not defined yet).
    fn body(&self, rule: RuleId) -> Option<ExprId>;
}

impl ExprArena for Grammar {
    fn expr_at(&self, id: ExprId) -> &Expr {
        self.expr(id)
    }

    fn body(&self, rule: RuleId) -> Option<ExprId> {
        Some(self.rule(rule).body)
    }
}

impl ExprArena for GrammarBuilder {
    fn expr_at(&self, id: ExprId) -> &Expr {
        self.expr(id)
    }

    fn body(&self, rule: RuleId) -> Option<ExprId> {
        self.rules[rule.index()].1
    }
}

/// A grammar: rules over a flat expression arena, one start rule.
///
/// # Example
///
/// ```
/// use formwork::ir::GrammarBuilder;
/// use formwork::ByteSet;
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
    /// [`Grammar::derivations`], computed on first use (the JSON Schema front end checks that
    /// its start derives a string, and the CFG backend's lowering needs them all).
    derivations: std::sync::OnceLock<std::sync::Arc<facts::Derivations>>,
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

    /// Which expressions derive some string and which the empty string, computed once.
    pub(crate) fn derivations(
        &self,
        deadline: &crate::limits::Deadline,
    ) -> Result<std::sync::Arc<facts::Derivations>, LimitExceeded> {
        if let Some(d) = self.derivations.get() {
            return Ok(d.clone());
        }
        let d = std::sync::Arc::new(facts::Derivations::new(self, deadline)?);
        Ok(self.derivations.get_or_init(|| d).clone())
    }
}

/// Builds a [`Grammar`], hash-consing equal expressions, within the limits of the
/// [module docs](self).
pub struct GrammarBuilder {
    exprs: Vec<Expr>,
    /// [`max_depth`](Self::max_depth)-bounded depth of each expression (index = `ExprId`).
    depths: Vec<u32>,
    /// [`max_expr_depth`] of the builder's limits.
    max_depth: u32,
    /// Parts of all sequences and alternations built.
    parts: usize,
    /// Bytes of all byte strings built, against `max_bytes` (`Limits::input_bytes`).
    bytes: usize,
    max_bytes: usize,
    /// Hash-consing: the ids of the expressions with each hash. Keyed by hash so each
    /// expression is stored once. The hasher is seeded per builder: byte strings come from
    /// untrusted text, and with a fixed hash a grammar of colliding literals would make every
    /// lookup scan all of them.
    dedup: HashMap<u64, smallvec::SmallVec<[ExprId; 1]>, foldhash::fast::RandomState>,
    rules: Vec<(String, Option<ExprId>)>,
    /// The rules [`Self::keep_called`] marked.
    called: Vec<RuleId>,
    rule_names: HashMap<String, RuleId>,
    /// Most expressions, and most rules (from [`Limits::grammar_size`]).
    max_size: usize,
    /// The first limit reached; once set, the builder stops growing (see [`Self::check`]).
    exceeded: Option<LimitExceeded>,
    /// [`Expr::Nothing`], once built: what a new expression becomes past a limit.
    nothing: Option<ExprId>,
}

impl Default for GrammarBuilder {
    fn default() -> Self {
        GrammarBuilder::with_limits(&Limits::default())
    }
}

impl GrammarBuilder {
    /// An empty builder with the default [`Limits`].
    pub fn new() -> GrammarBuilder {
        GrammarBuilder::default()
    }

    /// An empty builder holding at most [`Limits::grammar_size`] expressions and rules.
    ///
    /// Past a limit the builder stops growing: a new expression is built as
    /// [`Expr::Nothing`], and [`define`](Self::define), [`check`](Self::check) and
    /// [`finish`](Self::finish) return the `Limit` error.
    ///
    /// ```
    /// use formwork::ir::GrammarBuilder;
    /// use formwork::ByteSet;
    /// use formwork::{CompileErrorKind, LimitKind, Limits};
    ///
    /// let mut g = GrammarBuilder::with_limits(&Limits::new().grammar_size(3));
    /// let a = g.bytes(b"a");
    /// let b = g.class(ByteSet::range(b'0', b'9'));
    /// let ab = g.seq([a, b]);
    /// assert!(g.check().is_ok());
    /// let _ = g.repeat(ab, 0, None); // a fourth expression
    /// let err = g.check().unwrap_err();
    /// assert_eq!(err.kind(), CompileErrorKind::Limit);
    /// assert_eq!(err.limit().unwrap().kind, LimitKind::GrammarSize);
    /// ```
    pub fn with_limits(limits: &Limits) -> GrammarBuilder {
        GrammarBuilder {
            exprs: Vec::new(),
            depths: Vec::new(),
            max_depth: max_expr_depth(limits),
            parts: 0,
            bytes: 0,
            max_bytes: limits.get(LimitKind::InputBytes).min(usize::MAX as u64) as usize,
            dedup: HashMap::default(),
            rules: Vec::new(),
            called: Vec::new(),
            rule_names: HashMap::new(),
            // Ids are 32-bit.
            max_size: limits.get(LimitKind::GrammarSize).min(u32::MAX as u64 - 1) as usize,
            exceeded: None,
            nothing: None,
        }
    }

    /// The id of the expression `key` describes, built if new. A lookup that finds it
    /// allocates nothing: most calls do (a schema's objects rebuild the same sequences over
    /// and over), and boxing the parts first, to drop them again, was a third of the cost.
    fn intern(&mut self, key: Key) -> ExprId {
        use std::hash::BuildHasher;
        let hash = self.dedup.hasher().hash_one(key);
        if let Some(&id) = self.dedup.get(&hash).and_then(|ids| {
            ids.iter()
                .find(|id| Key::of(&self.exprs[id.index()]) == key)
        }) {
            return id;
        }
        let depth = 1 + match key {
            Key::Seq(xs) | Key::Alt(xs) => {
                xs.iter().map(|x| self.depths[x.index()]).max().unwrap_or(0)
            }
            Key::Repeat { body, .. } => self.depths[body.index()],
            _ => 0,
        };
        let literal = match key {
            Key::Bytes(b) => b.len(),
            _ => 0,
        };
        let over = self
            .limit(LimitKind::GrammarSize, self.exprs.len() + 1, self.max_size)
            .or_else(|| self.limit(LimitKind::Nesting, depth as usize, self.max_depth as usize))
            .or_else(|| self.limit(LimitKind::InputBytes, self.bytes + literal, self.max_bytes));
        if let Some(exceeded) = over {
            self.exceeded.get_or_insert(exceeded);
        }
        if self.exceeded.is_some() && key != Key::Nothing {
            return self.nothing();
        }
        let id = ExprId(self.exprs.len() as u32);
        self.dedup.entry(hash).or_default().push(id);
        if let Key::Seq(xs) | Key::Alt(xs) = key {
            self.parts += xs.len();
        }
        self.bytes += literal;
        self.exprs.push(key.to_expr());
        self.depths.push(depth);
        id
    }

    /// `Some` if `value` is past `max` for `kind`.
    fn limit(&self, kind: LimitKind, value: usize, max: usize) -> Option<LimitExceeded> {
        (value > max).then_some(LimitExceeded {
            kind,
            value: value as u64,
            max: max as u64,
        })
    }

    /// `Err` (a `Limit` error without location) once a limit was reached; front ends call it
    /// to stop early, and place the error.
    pub fn check(&self) -> Result<(), CompileError> {
        match self.exceeded {
            Some(exceeded) => Err(CompileError::over_limit(
                exceeded,
                Location::None,
                "grammar",
            )),
            None => Ok(()),
        }
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
        self.intern(Key::Empty)
    }

    /// The empty language.
    pub fn nothing(&mut self) -> ExprId {
        match self.nothing {
            Some(id) => id,
            None => {
                let id = self.intern(Key::Nothing);
                self.nothing = Some(id);
                id
            }
        }
    }

    /// A byte string (empty bytes give [`Expr::Empty`]).
    pub fn bytes(&mut self, b: &[u8]) -> ExprId {
        if b.is_empty() {
            return self.empty();
        }
        self.intern(Key::Bytes(b))
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
        self.intern(Key::Class(c))
    }

    /// A special token by content.
    pub fn special(&mut self, content: &str) -> ExprId {
        self.intern(Key::Special(content))
    }

    /// A sequence; nested sequences are flattened, empty strings dropped, adjacent byte strings
    /// joined, and a sequence with an impossible part is impossible.
    pub fn seq(&mut self, parts: impl IntoIterator<Item = ExprId>) -> ExprId {
        let mut flat: Parts = Parts::new();
        for p in parts {
            let inner = match self.expr(p) {
                Expr::Empty => continue,
                Expr::Nothing => return self.nothing(),
                Expr::Seq(xs) => xs.len(),
                _ => 1,
            };
            // Flattening copies shared sequences: `s = seq([s, s])` doubles per step.
            if self.over_parts(flat.len() + inner) {
                return self.nothing();
            }
            match self.expr(p) {
                Expr::Seq(xs) => flat.extend(xs.iter().copied()),
                _ => flat.push(p),
            }
        }
        // Adjacent byte strings are joined in one buffer per run (joining pairwise built every
        // prefix of a long run of literals).
        let mut joined = Parts::with_capacity(flat.len());
        let mut i = 0;
        while i < flat.len() {
            let mut len = 0;
            let mut end = i;
            while let Some(Expr::Bytes(b)) = flat.get(end).map(|&p| self.expr(p)) {
                // Joining copies shared literals: `s = seq([s, s])` doubles per step.
                if len + b.len() > self.max_bytes.saturating_sub(self.bytes) {
                    let exceeded = LimitExceeded {
                        kind: LimitKind::InputBytes,
                        value: (self.bytes + len + b.len()) as u64,
                        max: self.max_bytes as u64,
                    };
                    self.exceeded.get_or_insert(exceeded);
                    return self.nothing();
                }
                len += b.len();
                end += 1;
            }
            match end - i {
                0 => {
                    joined.push(flat[i]);
                    end += 1;
                }
                1 => joined.push(flat[i]),
                _ => {
                    let mut run = Vec::with_capacity(len);
                    for &p in &flat[i..end] {
                        if let Expr::Bytes(b) = self.expr(p) {
                            run.extend_from_slice(b);
                        }
                    }
                    joined.push(self.bytes(&run));
                }
            }
            i = end;
        }
        match joined.len() {
            0 => self.empty(),
            1 => joined[0],
            _ => self.intern(Key::Seq(&joined)),
        }
    }

    /// An alternation; nested alternations are flattened, duplicates and impossible branches
    /// dropped.
    pub fn alt(&mut self, branches: impl IntoIterator<Item = ExprId>) -> ExprId {
        let mut flat: Parts = Parts::new();
        for b in branches {
            let inner = match self.expr(b) {
                Expr::Nothing => continue,
                Expr::Alt(xs) => xs.len(),
                _ => 1,
            };
            if self.over_parts(flat.len() + inner) {
                return self.nothing();
            }
            match self.expr(b) {
                Expr::Alt(xs) => flat.extend(xs.iter().copied()),
                _ => flat.push(b),
            }
        }
        // The first of equal branches stays; a few are compared directly, more through a set.
        if flat.len() <= FEW_BRANCHES {
            let mut kept = 0;
            for i in 0..flat.len() {
                if !flat[..kept].contains(&flat[i]) {
                    flat[kept] = flat[i];
                    kept += 1;
                }
            }
            flat.truncate(kept);
        } else {
            let mut seen = rustc_hash::FxHashSet::default();
            flat.retain(|x| seen.insert(*x));
        }
        match flat.len() {
            0 => self.nothing(),
            1 => flat[0],
            _ => self.intern(Key::Alt(&flat)),
        }
    }

    /// Records the size limit as reached if the parts of all sequences and alternations, with
    /// `more` new ones, would pass it.
    fn over_parts(&mut self, more: usize) -> bool {
        let parts = self.parts.saturating_add(more);
        if let Some(exceeded) = self.limit(LimitKind::GrammarSize, parts, self.max_size) {
            self.exceeded.get_or_insert(exceeded);
        }
        self.exceeded.is_some()
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
        self.intern(Key::Repeat { body, min, max })
    }

    /// `body?`.
    pub fn optional(&mut self, body: ExprId) -> ExprId {
        self.repeat(body, 0, Some(1))
    }

    /// The rule called `name`, declared if new. Past the size limit, a new name stands for the
    /// first rule (the grammar will not be finished).
    pub fn rule(&mut self, name: &str) -> RuleId {
        if let Some(&r) = self.rule_names.get(name) {
            return r;
        }
        if let Some(exceeded) =
            self.limit(LimitKind::GrammarSize, self.rules.len() + 1, self.max_size)
        {
            self.exceeded.get_or_insert(exceeded);
        }
        if self.exceeded.is_some() && !self.rules.is_empty() {
            return RuleId(0);
        }
        let r = RuleId(self.rules.len() as u32);
        self.rules.push((name.to_string(), None));
        self.rule_names.insert(name.to_string(), r);
        r
    }

    /// Marks `rule` to be called wherever it is referred to as a last step (a rule small
    /// enough to inline is still copied into its referrers). A backend builds a rule referred
    /// to only as the last step of others into their automata (a chain of rules is then one
    /// loop-free automaton, not a stack of calls); a family of rules that refer to each other
    /// last in many combinations would then be built whole into every automaton reaching it:
    /// an object's properties in any order, one rule per set of properties written, put all
    /// `2^n` sets into the object's automaton on its first use.
    ///
    /// # Example
    ///
    /// ```
    /// use formwork::ir::GrammarBuilder;
    ///
    /// let mut g = GrammarBuilder::new();
    /// let tail = g.rule("tail");
    /// let b = g.text("b");
    /// g.define(tail, b).unwrap();
    /// g.keep_called(tail);
    /// let root = g.rule("root");
    /// let (a, call) = (g.text("a"), g.rule_ref(tail));
    /// let body = g.seq([a, call]);
    /// g.define(root, body).unwrap();
    /// let grammar = g.finish(root).unwrap();
    /// assert!(grammar.rule(tail).called && !grammar.rule(root).called);
    /// ```
    pub fn keep_called(&mut self, rule: RuleId) {
        self.called.push(rule);
    }

    /// Looks up a rule without declaring it.
    pub fn find_rule(&self, name: &str) -> Option<RuleId> {
        self.rule_names.get(name).copied()
    }

    /// Gives `rule` its body. Defining a rule twice is an error, and so is any definition once
    /// a limit was reached (see [`check`](Self::check)).
    pub fn define(&mut self, rule: RuleId, body: ExprId) -> Result<(), CompileError> {
        self.check()?;
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
        self.intern(Key::Rule(rule))
    }

    /// The grammar starting at `start`; every referenced rule must be defined, and no limit
    /// reached.
    pub fn finish(self, start: RuleId) -> Result<Grammar, CompileError> {
        self.check()?;
        let mut rules = Vec::with_capacity(self.rules.len());
        for (name, body) in self.rules {
            let body = body.ok_or_else(|| {
                CompileError::unplaced(
                    CompileErrorKind::Undefined,
                    format!("rule `{name}` is used but never defined"),
                )
            })?;
            rules.push(Rule {
                name,
                body,
                called: false,
            });
        }
        for r in self.called {
            rules[r.index()].called = true;
        }
        Ok(Grammar {
            exprs: self.exprs,
            rules,
            start,
            rule_graph: std::sync::OnceLock::new(),
            derivations: std::sync::OnceLock::new(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::recognizer::{Recognizer, Terminal};
    use super::*;

    /// Runs `f` on a thread with the smallest stack a server may give a worker.
    fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        let thread = std::thread::Builder::new().stack_size(256 << 10);
        thread.spawn(f).unwrap().join().unwrap()
    }

    #[test]
    fn a_chain_of_100000_rules_is_walked_without_recursion() {
        let n = 100_000;
        let accepted = on_small_stack(move || {
            let mut g = GrammarBuilder::new();
            let rules: Vec<RuleId> = (0..=n).map(|i| g.rule(&format!("r{i}"))).collect();
            let x = g.bytes(b"x");
            for i in 0..n {
                let next = g.rule_ref(rules[i + 1]);
                let body = g.seq([x, next]);
                g.define(rules[i], body).unwrap();
            }
            let y = g.bytes(b"y");
            g.define(rules[n], y).unwrap();
            let g = g.finish(rules[0]).unwrap();
            assert!(!g.is_recursive());
            let rec = Recognizer::new(&g);
            let mut chart = rec.start();
            (0..n).all(|_| chart.push(&rec, Terminal::Byte(b'x')))
                && chart.push(&rec, Terminal::Byte(b'y'))
                && chart.is_accepting(&rec)
        });
        assert!(accepted);
        // A cycle at the end of a long chain is found.
        let mut g = GrammarBuilder::new();
        let rules: Vec<RuleId> = (0..1000).map(|i| g.rule(&format!("r{i}"))).collect();
        for i in 0..1000 {
            let next = g.rule_ref(rules[(i + 1).min(999)]);
            g.define(rules[i], next).unwrap();
        }
        assert!(g.finish(rules[0]).unwrap().is_recursive());
    }

    #[test]
    fn expressions_deeper_than_the_guarantee_are_a_limit() {
        let err = on_small_stack(|| {
            let mut g = GrammarBuilder::new();
            let (mut e, y) = (g.bytes(b"x"), g.bytes(b"y"));
            for _ in 0..100_000 {
                let s = g.seq([y, e]);
                e = g.alt([s, y]);
            }
            // Past the limit the builder stopped growing.
            assert!(g.len() < 2 * MAX_EXPR_DEPTH as usize + 10);
            let root = g.rule("root");
            g.define(root, e).unwrap_err()
        });
        let limit = err.limit().unwrap();
        let max = MAX_EXPR_DEPTH as u64;
        assert_eq!(
            (limit.kind, limit.value, limit.max),
            (LimitKind::Nesting, max + 1, max)
        );
        // At the guarantee, a grammar builds.
        let mut g = GrammarBuilder::new();
        let mut e = g.bytes(b"x");
        for _ in 1..MAX_EXPR_DEPTH {
            e = g.repeat(e, 0, Some(1));
        }
        let root = g.rule("root");
        g.define(root, e).unwrap();
        assert!(g.finish(root).is_ok());
    }

    #[test]
    fn sharing_cannot_multiply_what_the_builder_holds() {
        let limits = Limits::new().grammar_size(100_000).input_bytes(100_000);
        // A sequence of itself doubles its parts with each step...
        let mut g = GrammarBuilder::with_limits(&limits);
        let (letter, zero) = (
            g.class(ByteSet::range(b'a', b'z')),
            g.class(ByteSet::byte(b'0')),
        );
        let mut s = g.seq([letter, zero]);
        for _ in 0..60 {
            s = g.seq([s, s]);
        }
        let limit = *g.check().unwrap_err().limit().unwrap();
        assert_eq!((limit.kind, limit.max), (LimitKind::GrammarSize, 100_000));
        // ... and so does a literal joined with itself.
        let mut g = GrammarBuilder::with_limits(&limits);
        let mut s = g.bytes(b"ab");
        for _ in 0..60 {
            s = g.seq([s, s]);
        }
        let limit = *g.check().unwrap_err().limit().unwrap();
        assert_eq!((limit.kind, limit.max), (LimitKind::InputBytes, 100_000));
        // A long run of literals is joined once.
        let mut g = GrammarBuilder::with_limits(&limits);
        let parts: Vec<ExprId> = (0..20_000u32)
            .map(|i| g.bytes(&[b'a' + (i % 3) as u8]))
            .collect();
        let joined = g.seq(parts);
        assert!(matches!(g.expr(joined), Expr::Bytes(b) if b.len() == 20_000));
        assert_eq!(g.len(), 4);
    }

    #[test]
    fn the_recognizer_refuses_expansions_past_the_grammar_size() {
        let mut g = GrammarBuilder::new();
        let a = g.bytes(b"a");
        let many = g.repeat(a, 3_000_000, None);
        let start = g.rule("start");
        g.define(start, many).unwrap();
        let grammar = g.finish(start).unwrap();
        let err = recognizer::Recognizer::try_new(&grammar, &Limits::new())
            .err()
            .unwrap();
        assert_eq!(err.limit().unwrap().kind, LimitKind::GrammarSize);
        let small = Limits::new().grammar_size(10_000_000);
        assert!(recognizer::Recognizer::try_new(&grammar, &small).is_ok());
    }
}
