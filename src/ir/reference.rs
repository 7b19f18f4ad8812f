//! A deliberately plain Earley recognizer over the IR: the oracle every backend is tested
//! against, bit for bit, and what `formwork check --oracle` runs.
//!
//! It shares nothing with the backends' fast paths: the grammar is expanded into textbook BNF
//! (repeats unrolled into chains of optional copies), items are `(production, dot, origin)`
//! triples in hash sets, and nullable symbols are handled the Aycock–Horspool way. It is slow
//! and obviously right; that is its job.

use std::collections::{HashMap, HashSet};

use super::{ByteSet, Expr, ExprId, Grammar};
use crate::mask::TokenMask;
use crate::vocab::{Subtree, TokenId, TokenKind, TrieStep, TrieVisitor, Vocab};

/// An input unit: a byte of text or a special token (by content).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit<'a> {
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

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Item {
    prod: u32,
    dot: u32,
    origin: u32,
}

/// Items already in the set being built: a linear scan while small (most sets hold a handful
/// of items, and the oracle builds one set per trie node), a hash set past that.
#[derive(Default)]
struct Seen {
    small: Vec<Item>,
    large: HashSet<Item>,
}

impl Seen {
    fn insert(&mut self, it: Item) -> bool {
        if self.large.is_empty() {
            if self.small.contains(&it) {
                return false;
            }
            self.small.push(it);
            if self.small.len() > 32 {
                self.large.extend(self.small.drain(..));
            }
            true
        } else {
            self.large.insert(it)
        }
    }
}

/// The reference recognizer for one grammar.
///
/// # Example
///
/// ```
/// use formwork::ir::{GrammarBuilder, reference::{Recognizer, Unit}};
/// use formwork::front::regex::regex_to_ir;
///
/// let mut g = GrammarBuilder::new();
/// let e = regex_to_ir(r"a(b|c)*d", &mut g).unwrap();
/// let start = g.rule("start");
/// g.define(start, e).unwrap();
/// let rec = Recognizer::new(&g.finish(start).unwrap());
/// let mut chart = rec.start();
/// for b in b"abcb" { assert!(chart.push(&rec, Unit::Byte(*b))); }
/// assert!(!chart.is_accepting(&rec));
/// assert!(!chart.push(&rec, Unit::Byte(b'x'))); // dead: not pushed
/// assert!(chart.push(&rec, Unit::Byte(b'd')));
/// assert!(chart.is_accepting(&rec));
/// ```
pub struct Recognizer {
    prods: Vec<(usize, Vec<Symbol>)>,
    by_lhs: Vec<Vec<u32>>,
    nullable: Vec<bool>,
    specials: HashMap<String, usize>,
    start: usize,
}

/// An Earley chart: one item set per consumed unit.
#[derive(Clone, Debug)]
pub struct Chart {
    sets: Vec<Vec<Item>>,
}

impl Recognizer {
    /// Expands `grammar` into BNF.
    pub fn new(grammar: &Grammar) -> Recognizer {
        let mut b = Expand {
            grammar,
            prods: Vec::new(),
            nts: 0,
            memo: HashMap::new(),
            specials: HashMap::new(),
        };
        let start_nt = b.nt_of(grammar.rule(grammar.start()).body);
        let mut by_lhs = vec![Vec::new(); b.nts];
        for (i, (lhs, _)) in b.prods.iter().enumerate() {
            by_lhs[*lhs].push(i as u32);
        }
        let mut nullable = vec![false; b.nts];
        loop {
            let mut changed = false;
            for (lhs, rhs) in &b.prods {
                if !nullable[*lhs]
                    && rhs
                        .iter()
                        .all(|s| matches!(s, Symbol::Nt(n) if nullable[*n]))
                {
                    nullable[*lhs] = true;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        Recognizer {
            prods: b.prods,
            by_lhs,
            nullable,
            specials: b.specials,
            start: start_nt,
        }
    }

    /// The chart before any input.
    pub fn start(&self) -> Chart {
        let mut set = Vec::new();
        let mut seen = Seen::default();
        for &p in &self.by_lhs[self.start] {
            let it = Item {
                prod: p,
                dot: 0,
                origin: 0,
            };
            if seen.insert(it) {
                set.push(it);
            }
        }
        let mut chart = Chart { sets: vec![] };
        self.close(&mut chart, set, seen);
        chart
    }

    fn close(&self, chart: &mut Chart, mut set: Vec<Item>, mut seen: Seen) {
        let here = chart.sets.len() as u32;
        let mut i = 0;
        while i < set.len() {
            let it = set[i];
            i += 1;
            let (lhs, rhs) = &self.prods[it.prod as usize];
            match rhs.get(it.dot as usize) {
                Some(Symbol::Nt(n)) => {
                    for &p in &self.by_lhs[*n] {
                        let new = Item {
                            prod: p,
                            dot: 0,
                            origin: here,
                        };
                        if seen.insert(new) {
                            set.push(new);
                        }
                    }
                    if self.nullable[*n] {
                        let new = Item {
                            dot: it.dot + 1,
                            ..it
                        };
                        if seen.insert(new) {
                            set.push(new);
                        }
                    }
                }
                Some(_) => {}
                // A completion in its own set derived the empty string: the prediction of a
                // nullable symbol already advanced its waiters (Aycock–Horspool).
                None if it.origin == here => {}
                None => {
                    for w in &chart.sets[it.origin as usize] {
                        let waits = matches!(
                            self.prods[w.prod as usize].1.get(w.dot as usize),
                            Some(Symbol::Nt(n)) if n == lhs
                        );
                        if waits {
                            let new = Item {
                                dot: w.dot + 1,
                                ..*w
                            };
                            if seen.insert(new) {
                                set.push(new);
                            }
                        }
                    }
                }
            }
        }
        chart.sets.push(set);
    }

    fn matches(&self, sym: &Symbol, unit: Unit) -> bool {
        match (sym, unit) {
            (Symbol::Class(c), Unit::Byte(b)) => c.contains(b),
            (Symbol::Special(i), Unit::Special(s)) => self.specials.get(s) == Some(i),
            _ => false,
        }
    }
}

impl Chart {
    /// Consumes `unit`; returns false (and leaves the chart unchanged) if no parse continues.
    pub fn push(&mut self, rec: &Recognizer, unit: Unit) -> bool {
        let last = self.sets.last().expect("chart has a set");
        let mut set = Vec::new();
        let mut seen = Seen::default();
        for it in last {
            if let Some(sym) = rec.prods[it.prod as usize].1.get(it.dot as usize) {
                if rec.matches(sym, unit) {
                    let new = Item {
                        dot: it.dot + 1,
                        ..*it
                    };
                    if seen.insert(new) {
                        set.push(new);
                    }
                }
            }
        }
        if set.is_empty() {
            return false;
        }
        rec.close(self, set, seen);
        true
    }

    /// Undoes the last `push`.
    pub fn pop(&mut self) {
        if self.sets.len() > 1 {
            self.sets.pop();
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
        self.sets.last().unwrap().iter().any(|it| {
            it.origin == 0
                && rec.prods[it.prod as usize].0 == rec.start
                && it.dot as usize == rec.prods[it.prod as usize].1.len()
        })
    }

    /// Pushes every unit of a token; false (chart unchanged) if some byte is rejected.
    pub fn push_token(&mut self, rec: &Recognizer, vocab: &Vocab, token: TokenId) -> bool {
        let units = token_units(vocab, token);
        for (i, u) in units.iter().enumerate() {
            if !self.push(rec, *u) {
                (0..i).for_each(|_| self.pop());
                return false;
            }
        }
        !units.is_empty()
    }

    /// The exact mask after the units consumed so far, token by token through the trie (text)
    /// and one by one (specials); EOS iff accepting.
    pub fn mask(&self, rec: &Recognizer, vocab: &Vocab) -> TokenMask {
        let mut mask = TokenMask::new(vocab.mask_width());
        struct Walk<'a> {
            rec: &'a Recognizer,
            chart: Chart,
            depth: usize,
            mask: &'a mut TokenMask,
        }
        impl TrieVisitor for Walk<'_> {
            type State = ();
            fn step(&mut self, _: &(), byte: u8, depth: usize, _: Subtree) -> TrieStep<()> {
                while self.depth >= depth {
                    self.chart.pop();
                    self.depth -= 1;
                }
                if self.chart.push(self.rec, Unit::Byte(byte)) {
                    self.depth += 1;
                    TrieStep::Enter(())
                } else {
                    TrieStep::Skip
                }
            }
            fn tokens(&mut self, _: &(), tokens: &[TokenId]) {
                tokens.iter().for_each(|&t| self.mask.insert(t));
            }
        }
        let mut walk = Walk {
            rec,
            chart: self.clone(),
            depth: 0,
            mask: &mut mask,
        };
        vocab.trie().walk((), &mut walk);
        for (content, id) in vocab.specials() {
            let mut c = self.clone();
            if c.push(rec, Unit::Special(content)) {
                mask.insert(id);
            }
        }
        if self.is_accepting(rec) {
            vocab.eos_tokens().iter().for_each(|&t| mask.insert(t));
        }
        mask
    }
}

/// The units of a token: its bytes, or the special symbol.
pub fn token_units(vocab: &Vocab, token: TokenId) -> Vec<Unit<'_>> {
    match vocab.kind(token) {
        Some(TokenKind::Text) => vocab
            .token_bytes(token)
            .iter()
            .map(|&b| Unit::Byte(b))
            .collect(),
        Some(TokenKind::Special) => {
            vec![Unit::Special(
                std::str::from_utf8(vocab.token_bytes(token)).unwrap_or(""),
            )]
        }
        _ => vec![],
    }
}

struct Expand<'a> {
    grammar: &'a Grammar,
    prods: Vec<(usize, Vec<Symbol>)>,
    nts: usize,
    memo: HashMap<ExprId, usize>,
    specials: HashMap<String, usize>,
}

impl Expand<'_> {
    fn fresh(&mut self) -> usize {
        self.nts += 1;
        self.nts - 1
    }

    fn nt_of(&mut self, e: ExprId) -> usize {
        if let Some(&n) = self.memo.get(&e) {
            return n;
        }
        let n = self.fresh();
        self.memo.insert(e, n);
        match self.grammar.expr(e).clone() {
            Expr::Empty => self.prods.push((n, vec![])),
            Expr::Nothing => {}
            Expr::Bytes(b) => self.prods.push((
                n,
                b.iter().map(|&x| Symbol::Class(ByteSet::byte(x))).collect(),
            )),
            Expr::Class(c) => self.prods.push((n, vec![Symbol::Class(c)])),
            Expr::Special(s) => {
                let next = self.specials.len();
                let idx = *self.specials.entry(s.to_string()).or_insert(next);
                self.prods.push((n, vec![Symbol::Special(idx)]));
            }
            Expr::Seq(xs) => {
                let rhs = xs.iter().map(|&x| Symbol::Nt(self.nt_of(x))).collect();
                self.prods.push((n, rhs));
            }
            Expr::Alt(xs) => {
                for &x in xs.iter() {
                    let s = Symbol::Nt(self.nt_of(x));
                    self.prods.push((n, vec![s]));
                }
            }
            Expr::Repeat { body, min, max } => {
                let b = Symbol::Nt(self.nt_of(body));
                // tail: `body*` as T -> ε | body T, or `body{0,k}` as a chain of k optionals.
                let tail = match max {
                    None => {
                        let t = self.fresh();
                        self.prods.push((t, vec![]));
                        self.prods.push((t, vec![b.clone(), Symbol::Nt(t)]));
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
            Expr::Rule(r) => {
                let body = self.nt_of(self.grammar.rule(r).body);
                self.prods.push((n, vec![Symbol::Nt(body)]));
            }
        }
        n
    }
}
