//! A deliberately plain Earley recognizer over the IR: membership of a sequence of bytes and
//! special tokens in a grammar's language. The JSON Schema front end asks it whether a
//! property name matches a pattern; stepped token by token (`ir::reference`, for formwork's
//! own tests) it is the oracle every backend is tested against, bit for bit.
//!
//! It shares nothing with the backends' fast paths: the grammar is expanded into textbook BNF
//! (repeats unrolled into chains of optional copies), items are `(dotted rule, origin)` pairs,
//! nullable symbols are handled the Aycock–Horspool way, and productions that derive no string
//! are dropped first (so a prefix is accepted exactly when some text completes it). It is
//! slow and obviously right; that is its job.

use std::collections::HashMap;

use super::{Expr, ExprId, Grammar};
use crate::base::byteset::ByteSet;
use crate::base::collections::FastSet;
use crate::error::{CompileError, Location};
use crate::limits::{LimitExceeded, LimitKind, Limits};

/// A terminal of a grammar, the unit the recognizer reads: a byte of text or a special token
/// (by content).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Terminal<'a> {
    /// A text byte.
    Byte(u8),
    /// A special token.
    Special(&'a str),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Symbol {
    Class(ByteSet),
    Special(usize),
    Nt(usize),
}

/// What follows the dot of a dotted rule: a terminal to scan (a class by index, a special),
/// a nonterminal to predict, or the end of a production of a nonterminal, to complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    Class(u32),
    Special(u32),
    Nt(u32),
    End(u32),
}

/// An Earley item: a dotted rule (an index into [`Recognizer::next`]; moving the dot right is
/// the next index) and the set where its production was predicted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Item {
    rule: u32,
    origin: u32,
}

/// Items already in the set being built, by dotted rule: the origin of the first item of each
/// rule met in this set (valid where the rule's stamp is the set's generation, so starting a
/// set costs nothing), and the further origins of a rule (nested or ambiguous parses) in a
/// hash set. The oracle builds a set at every node of its trie walk: a linear scan of the
/// items and a SipHash set were most of its time.
#[derive(Debug, Default)]
struct Seen {
    first: Vec<(u32, u32)>,
    more: FastSet<Item>,
    generation: u32,
}

impl Seen {
    /// Starts a new set of items over `rules` dotted rules.
    fn clear(&mut self, rules: usize) {
        if self.first.len() != rules || self.generation == u32::MAX {
            self.first = vec![(0, 0); rules];
            self.generation = 0;
        }
        self.generation += 1;
        self.more.clear();
    }

    fn insert(&mut self, it: Item) -> bool {
        let first = &mut self.first[it.rule as usize];
        if first.0 != self.generation {
            *first = (self.generation, it.origin);
            true
        } else {
            first.1 != it.origin && self.more.insert(it)
        }
    }
}

/// The recognizer for one grammar.
///
/// # Example
///
/// ```
/// use formwork::ir::{GrammarBuilder, recognizer::{Recognizer, Terminal}};
///
/// // a(b|c)*d
/// let mut g = GrammarBuilder::new();
/// let (a, b, c, d) = (g.bytes(b"a"), g.bytes(b"b"), g.bytes(b"c"), g.bytes(b"d"));
/// let b_or_c = g.alt([b, c]);
/// let middle = g.repeat(b_or_c, 0, None);
/// let e = g.seq([a, middle, d]);
/// let start = g.rule("start");
/// g.define(start, e).unwrap();
/// let rec = Recognizer::new(&g.finish(start).unwrap());
/// let mut chart = rec.start();
/// for b in b"abcb" { assert!(chart.push(&rec, Terminal::Byte(*b))); }
/// assert!(!chart.is_accepting(&rec));
/// assert!(!chart.push(&rec, Terminal::Byte(b'x'))); // dead: not pushed
/// assert!(chart.push(&rec, Terminal::Byte(b'd')));
/// assert!(chart.is_accepting(&rec));
/// ```
pub struct Recognizer {
    /// Per dotted rule, what follows the dot: a production of `n` symbols owns `n + 1`
    /// consecutive rules, the last one its end.
    next: Vec<Next>,
    classes: Vec<ByteSet>,
    /// The first dotted rule of each production, per nonterminal.
    by_lhs: Vec<Vec<u32>>,
    nullable: Vec<bool>,
    specials: HashMap<String, u32>,
    start: u32,
}

/// An item set of a chart, and how many completions looked in it for the items waiting for
/// their nonterminal. Scanning all its items for each is what most sets get: the oracle builds
/// one per node of its trie walk and looks in it a few times. A set looked in more often (the
/// sets of the text before the walk, consulted all through it) is sorted by
/// [`Recognizer::awaits`] once, and searched.
#[derive(Clone, Debug)]
struct Set {
    items: Vec<Item>,
    lookups: u32,
}

/// Lookups by completion after which a set is sorted: about what sorting a set costs, in scans
/// of it.
const SORT_AFTER: u32 = 8;

impl Set {
    /// The items waiting for nonterminal `n`.
    fn waiting<'a>(&'a mut self, rec: &'a Recognizer, n: u32) -> impl Iterator<Item = &'a Item> {
        self.lookups = self.lookups.saturating_add(1);
        if self.lookups == SORT_AFTER {
            self.items.sort_unstable_by_key(|it| rec.awaits(it));
        }
        let range = match self.lookups >= SORT_AFTER {
            true => {
                let from = self.items.partition_point(|it| rec.awaits(it) < n);
                let len = self.items[from..].partition_point(|it| rec.awaits(it) == n);
                from..from + len
            }
            false => 0..self.items.len(),
        };
        self.items[range]
            .iter()
            .filter(move |it| rec.awaits(it) == n)
    }
}

/// An Earley chart: one item set per consumed unit.
#[derive(Debug)]
pub struct Chart {
    /// The item sets, the start set first.
    sets: Vec<Set>,
    /// Sets `pop` removed and the dedup set of `push`, kept for their allocations: the oracle
    /// pushes and pops a set at every node of its trie walk.
    spare: Vec<Vec<Item>>,
    seen: Seen,
}

impl Clone for Chart {
    fn clone(&self) -> Chart {
        Chart {
            sets: self.sets.clone(),
            spare: Vec::new(),
            seen: Seen::default(),
        }
    }
}

impl Recognizer {
    /// Expands `grammar` into BNF, for tests: a grammar past the default
    /// [`Limits::grammar_size`] (unrolled repeats count every copy) is a bug of the test.
    /// On untrusted grammars use [`try_new`](Self::try_new).
    pub fn new(grammar: &Grammar) -> Recognizer {
        Recognizer::try_new(grammar, &Limits::default())
            .unwrap_or_else(|e| panic!("the oracle's grammar is too large: {e}"))
    }

    /// Expands `grammar` into BNF, unless the expansion (productions plus symbols, with
    /// bounded repeats unrolled) exceeds [`Limits::grammar_size`].
    ///
    /// ```
    /// use formwork::ir::{GrammarBuilder, recognizer::Recognizer};
    /// use formwork::{LimitKind, Limits};
    ///
    /// let mut g = GrammarBuilder::new();
    /// let a = g.bytes(b"a");
    /// let many = g.repeat(a, 0, Some(4_000_000_000));
    /// let start = g.rule("start");
    /// g.define(start, many).unwrap();
    /// let err = Recognizer::try_new(&g.finish(start).unwrap(), &Limits::new()).err().unwrap();
    /// assert_eq!(err.limit().unwrap().kind, LimitKind::GrammarSize);
    /// ```
    pub fn try_new(grammar: &Grammar, limits: &Limits) -> Result<Recognizer, CompileError> {
        let mut b = Expand {
            grammar,
            prods: Vec::new(),
            nts: 0,
            nt_of: vec![NO_NT; grammar.exprs().len()],
            specials: HashMap::new(),
            size: 0,
            max_size: limits.get(LimitKind::GrammarSize),
        };
        let start_nt = b
            .expand(grammar.rule(grammar.start()).body)
            .map_err(|e| CompileError::over_limit(e, Location::None, "reference recognizer"))?;
        // Productions that derive no string are dropped, so every item the chart holds can
        // complete: a prefix is in the chart exactly when some text extends it into the
        // language (the masks' semantics; front ends may write rules that can never end, as
        // an object's run of members whose count leaves no room for a witness).
        let productive = holds_for(b.nts, &b.prods, |t| match t {
            Symbol::Class(c) => !c.is_empty(),
            _ => true,
        });
        let settles = |sym: &Symbol| match sym {
            Symbol::Nt(n) => productive[*n],
            Symbol::Class(c) => !c.is_empty(),
            Symbol::Special(_) => true,
        };
        let prods: Vec<(usize, Vec<Symbol>)> = b
            .prods
            .into_iter()
            .filter(|(_, rhs)| rhs.iter().all(settles))
            .collect();
        let mut next = Vec::new();
        let mut classes = Vec::new();
        let mut by_lhs = vec![Vec::new(); b.nts];
        for (lhs, rhs) in &prods {
            by_lhs[*lhs].push(next.len() as u32);
            next.extend(rhs.iter().map(|sym| match sym {
                Symbol::Class(c) => {
                    classes.push(*c);
                    Next::Class(classes.len() as u32 - 1)
                }
                Symbol::Special(i) => Next::Special(*i as u32),
                Symbol::Nt(n) => Next::Nt(*n as u32),
            }));
            next.push(Next::End(*lhs as u32));
        }
        let nullable = holds_for(b.nts, &prods, |_| false);
        Ok(Recognizer {
            next,
            classes,
            by_lhs,
            nullable,
            specials: b.specials.into_iter().map(|(s, i)| (s, i as u32)).collect(),
            start: start_nt as u32,
        })
    }

    /// The chart before any input.
    pub fn start(&self) -> Chart {
        let mut chart = Chart {
            sets: vec![],
            spare: Vec::new(),
            seen: Seen::default(),
        };
        let mut seen = Seen::default();
        seen.clear(self.next.len());
        let mut set = Vec::new();
        for &rule in &self.by_lhs[self.start as usize] {
            let it = Item { rule, origin: 0 };
            if seen.insert(it) {
                set.push(it);
            }
        }
        self.close(&mut chart, set, &mut seen);
        chart
    }

    fn close(&self, chart: &mut Chart, mut set: Vec<Item>, seen: &mut Seen) {
        let here = chart.sets.len() as u32;
        let mut i = 0;
        while i < set.len() {
            let it = set[i];
            i += 1;
            match self.next[it.rule as usize] {
                Next::Nt(n) => {
                    for &rule in &self.by_lhs[n as usize] {
                        let new = Item { rule, origin: here };
                        if seen.insert(new) {
                            set.push(new);
                        }
                    }
                    if self.nullable[n as usize] {
                        let new = Item {
                            rule: it.rule + 1,
                            ..it
                        };
                        if seen.insert(new) {
                            set.push(new);
                        }
                    }
                }
                Next::Class(_) | Next::Special(_) => {}
                // A completion in its own set derived the empty string: the prediction of a
                // nullable symbol already advanced its waiters (Aycock–Horspool).
                Next::End(_) if it.origin == here => {}
                Next::End(lhs) => {
                    for w in chart.sets[it.origin as usize].waiting(self, lhs) {
                        let new = Item {
                            rule: w.rule + 1,
                            ..*w
                        };
                        if seen.insert(new) {
                            set.push(new);
                        }
                    }
                }
            }
        }
        chart.sets.push(Set {
            items: set,
            lookups: 0,
        });
    }

    /// The nonterminal after an item's dot, or `u32::MAX`: the order of a sorted [`Set`].
    fn awaits(&self, it: &Item) -> u32 {
        match self.next[it.rule as usize] {
            Next::Nt(n) => n,
            _ => u32::MAX,
        }
    }
}

impl Chart {
    /// Consumes `unit`; returns false (and leaves the chart unchanged) if no parse continues.
    pub fn push(&mut self, rec: &Recognizer, unit: Terminal) -> bool {
        let scans = |next: Next| match (next, unit) {
            (Next::Class(c), Terminal::Byte(b)) => rec.classes[c as usize].contains(b),
            (Next::Special(i), Terminal::Special(s)) => rec.specials.get(s) == Some(&i),
            _ => false,
        };
        let mut set = self.spare.pop().unwrap_or_default();
        set.clear();
        let mut seen = std::mem::take(&mut self.seen);
        seen.clear(rec.next.len());
        // A chart always holds its start set: `start` builds it and `pop` never removes it.
        for it in &self.sets.last().expect("chart has a set").items {
            if scans(rec.next[it.rule as usize]) {
                let new = Item {
                    rule: it.rule + 1,
                    ..*it
                };
                if seen.insert(new) {
                    set.push(new);
                }
            }
        }
        let pushed = !set.is_empty();
        match pushed {
            true => rec.close(self, set, &mut seen),
            false => self.spare.push(set),
        }
        self.seen = seen;
        pushed
    }

    /// Undoes the last `push`.
    pub fn pop(&mut self) {
        if self.sets.len() > 1 {
            self.spare.extend(self.sets.pop().map(|set| set.items));
        }
    }

    /// Number of units consumed.
    pub fn len(&self) -> usize {
        self.sets.len() - 1
    }

    /// True before any unit was consumed.
    pub fn is_empty(&self) -> bool {
        self.sets.len() == 1
    }

    /// True if the units consumed form a complete string of the language.
    pub fn is_accepting(&self, rec: &Recognizer) -> bool {
        // Never empty: see `push`.
        self.sets
            .last()
            .unwrap()
            .items
            .iter()
            .any(|it| it.origin == 0 && rec.next[it.rule as usize] == Next::End(rec.start))
    }
}

/// Which nonterminals derive a string of terminals each satisfying `terminal_holds`: with
/// none, those deriving the empty string (nullable); with every nonempty terminal, those
/// deriving any string (productive). A worklist over productions, each waiting for its count
/// of symbols not yet known to hold to reach zero (linear, where a fixpoint over all
/// productions took a pass per link of a rule chain).
fn holds_for(
    nts: usize,
    prods: &[(usize, Vec<Symbol>)],
    terminal_holds: impl Fn(&Symbol) -> bool,
) -> Vec<bool> {
    let mut holds = vec![false; nts];
    let mut waiting = vec![0usize; prods.len()];
    let mut uses: Vec<Vec<u32>> = vec![Vec::new(); nts];
    let mut ready: Vec<usize> = Vec::new();
    for (p, (lhs, rhs)) in prods.iter().enumerate() {
        for sym in rhs {
            match sym {
                Symbol::Nt(n) => {
                    uses[*n].push(p as u32);
                    waiting[p] += 1;
                }
                // A terminal that does not hold keeps its production waiting for good.
                t if !terminal_holds(t) => waiting[p] += 1,
                _ => {}
            }
        }
        if waiting[p] == 0 {
            ready.push(*lhs);
        }
    }
    while let Some(n) = ready.pop() {
        if std::mem::replace(&mut holds[n], true) {
            continue;
        }
        for &p in &uses[n] {
            let p = p as usize;
            waiting[p] -= 1;
            if waiting[p] == 0 {
                ready.push(prods[p].0);
            }
        }
    }
    holds
}

/// No nonterminal yet.
const NO_NT: u32 = u32::MAX;

struct Expand<'a> {
    grammar: &'a Grammar,
    prods: Vec<(usize, Vec<Symbol>)>,
    nts: usize,
    /// The nonterminal of each expression (index = `ExprId`), `NO_NT` until reached.
    nt_of: Vec<u32>,
    specials: HashMap<String, usize>,
    /// Productions plus symbols so far, against `max_size`.
    size: u64,
    max_size: u64,
}

impl Expand<'_> {
    fn fresh(&mut self) -> usize {
        self.nts += 1;
        self.nts - 1
    }

    /// The nonterminal of `e`, and whether it was new.
    fn nt(&mut self, e: ExprId) -> (usize, bool) {
        match self.nt_of[e.index()] {
            NO_NT => {
                let n = self.fresh();
                self.nt_of[e.index()] = n as u32;
                (n, true)
            }
            n => (n as usize, false),
        }
    }

    /// Counts `n` more productions and symbols against the budget, before they are built.
    fn grow(&mut self, n: u64) -> Result<(), LimitExceeded> {
        self.size = self.size.saturating_add(n);
        match self.size > self.max_size {
            true => Err(LimitExceeded {
                kind: LimitKind::GrammarSize,
                value: self.size,
                max: self.max_size,
            }),
            false => Ok(()),
        }
    }

    /// Gives every expression reachable from `root` (through rule references) its
    /// nonterminal and productions; returns `root`'s. Iterative: an expression's productions
    /// need only its children's nonterminals, which are numbered when first met, so no
    /// expression waits for its children to be expanded (rule chains are as long as the
    /// grammar).
    // Long: one match over the expression kinds, each writing its BNF productions; the explicit
    // work list is shared by all of them.
    fn expand(&mut self, root: ExprId) -> Result<usize, LimitExceeded> {
        let (root_nt, _) = self.nt(root);
        let mut todo = vec![root];
        let grammar = self.grammar;
        while let Some(e) = todo.pop() {
            let n = self.nt_of[e.index()] as usize;
            let mut child = |b: &mut Self, x: ExprId| {
                let (nt, new) = b.nt(x);
                if new {
                    todo.push(x);
                }
                Symbol::Nt(nt)
            };
            match grammar.expr(e) {
                Expr::Empty => {
                    self.grow(1)?;
                    self.prods.push((n, vec![]));
                }
                Expr::Nothing => {}
                Expr::Bytes(bytes) => {
                    self.grow(1 + bytes.len() as u64)?;
                    let rhs = bytes
                        .iter()
                        .map(|&x| Symbol::Class(ByteSet::byte(x)))
                        .collect();
                    self.prods.push((n, rhs));
                }
                Expr::Class(c) => {
                    self.grow(2)?;
                    self.prods.push((n, vec![Symbol::Class(*c)]));
                }
                Expr::Special(s) => {
                    self.grow(2)?;
                    let next = self.specials.len();
                    let idx = *self.specials.entry(s.to_string()).or_insert(next);
                    self.prods.push((n, vec![Symbol::Special(idx)]));
                }
                Expr::Seq(xs) => {
                    self.grow(1 + xs.len() as u64)?;
                    let rhs = xs.iter().map(|&x| child(self, x)).collect();
                    self.prods.push((n, rhs));
                }
                Expr::Alt(xs) => {
                    self.grow(2 * xs.len() as u64)?;
                    for &x in xs.iter() {
                        let s = child(self, x);
                        self.prods.push((n, vec![s]));
                    }
                }
                &Expr::Repeat { body, min, max } => {
                    // The copies below: `min` symbols, then per optional copy two productions
                    // of three symbols in all (or one loop of that size).
                    let optional = max.map_or(1, |max| max.saturating_sub(min) as u64);
                    self.grow(1 + min as u64 + 5 * optional)?;
                    let b = child(self, body);
                    // tail: `body*` as T -> ε | T body, or `body{0,k}` as a chain of k optionals.
                    // Left-recursive because Earley is quadratic on right recursion: with
                    // T -> body T, the n-th body of a run completes the n T items before it.
                    let tail = match max {
                        None => {
                            let t = self.fresh();
                            self.prods.push((t, vec![]));
                            self.prods.push((t, vec![Symbol::Nt(t), b.clone()]));
                            Some(t)
                        }
                        Some(max) => {
                            let mut next: Option<usize> = None;
                            for _ in min..max {
                                let t = self.fresh();
                                self.prods.push((t, vec![]));
                                let mut rhs = vec![b.clone()];
                                rhs.extend(next.map(Symbol::Nt));
                                self.prods.push((t, rhs));
                                next = Some(t);
                            }
                            next
                        }
                    };
                    let mut rhs: Vec<Symbol> = (0..min).map(|_| b.clone()).collect();
                    rhs.extend(tail.map(Symbol::Nt));
                    self.prods.push((n, rhs));
                }
                &Expr::Rule(r) => {
                    self.grow(2)?;
                    let body = child(self, grammar.rule(r).body);
                    self.prods.push((n, vec![body]));
                }
            }
        }
        Ok(root_nt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::GrammarBuilder;

    fn push_text(rec: &Recognizer, chart: &mut Chart, text: &str) -> bool {
        text.bytes().all(|b| chart.push(rec, Terminal::Byte(b)))
    }

    /// A prefix only a rule that never ends can continue is refused: `a` leads only into
    /// `dead`, which calls itself after every byte and has no way out.
    #[test]
    fn prefixes_no_text_completes_are_refused() {
        let mut g = GrammarBuilder::new();
        let dead = g.rule("dead");
        let x = g.text("x");
        let again = g.rule_ref(dead);
        let dead_body = g.seq([x, again]);
        g.define(dead, dead_body).unwrap();
        let a = g.text("a");
        let into_dead = g.rule_ref(dead);
        let doomed = g.seq([a, into_dead]);
        let b = g.text("b");
        let body = g.alt([doomed, b]);
        let start = g.rule("start");
        g.define(start, body).unwrap();
        let rec = Recognizer::new(&g.finish(start).unwrap());
        let mut chart = rec.start();
        assert!(!push_text(&rec, &mut chart, "a"));
        assert!(push_text(&rec, &mut chart, "b"));
        assert!(chart.is_accepting(&rec));
    }
}
