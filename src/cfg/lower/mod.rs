//! IR → program: each rule that needs a stack frame becomes a unit automaton, the rest is
//! inlined into its caller (see the [program docs](super::program)).
//!
//! Units are built when a parse first enters them (XGrammar 2's just-in-time compilation):
//! [`compile`] builds the start unit and, breadth first, its callees up to
//! [`CompileOptions::eager_states`], and the units whose NFA is large wherever they are
//! ([`Lowering::build_large_units`]); the [`Lowering`] stays with the compiled grammar and
//! builds any other unit when a parse predicts it ([`Lowering::build`]), from the NFA
//! drafted at compile time if there is one. A large schema's
//! first mask needs a few of its units (a Kubernetes schema: 3 of 1,442, 339 of 108,869
//! states), and most generations never enter most of the rest. What a parse needs to know of
//! a unit before it is built — whether it is nullable, what may follow it — comes from the IR
//! ([`crate::ir::facts`]), and a call to a unit that derives nothing is dropped from its
//! caller as it is built.
//!
//! - this file: the options, the sizes that decide inlining and unrolling, the unit
//!   automata under construction and the lowering state with its cost pass;
//! - `rules`: which rules recurse, only in tail position, or are built in place;
//! - `build`: expressions to NFA fragments;
//! - `determinize`: a unit's NFA to its automaton;
//! - `minimize`: equivalent states merged;
//! - `layout`: trimming and appending a built unit to the program;
//! - `sets`: the vocabulary slices worth trying.

mod build;
mod determinize;
mod layout;
mod minimize;
mod rules;
mod sets;

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use smallvec::SmallVec;

use super::hash;
use super::program::{Alphabet, Counted, Program, Unit, UNBOUNDED, UNBUILT};
use crate::base::byteset::ByteSet;
use crate::base::collections::{FastMap, FastSet};
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::ir::facts::{Boundaries, Derivations};
use crate::ir::{Expr, ExprId, Grammar, RuleId};
use crate::limits::{Deadline, LimitExceeded, LimitKind};
use crate::vocab::Vocab;
use determinize::TOTAL_DETERMINIZE_WORK;
use minimize::TOTAL_BISIMULATION_WORK;
use rules::{jump_rules, recursive_rules, rule_refs};

/// How to compile (from `CfgConfig`), and the limits on it (from `Limits`).
#[derive(Clone, Debug)]
pub(crate) struct CompileOptions {
    /// Most states of the whole program ([`LimitKind::GrammarSize`]); one unit's automaton
    /// under construction may have as many.
    pub max_states: usize,
    /// A unit is determinized while it stays under this many states (tuning, below
    /// [`LimitKind::AutomatonStates`]); past it, it stays nondeterministic.
    pub max_dfa_states: usize,
    /// Minimize deterministic units too (see `CfgConfig::minimize`).
    pub minimize: bool,
    /// States [`compile`] builds before the grammar is first used (see `CfgConfig::eager_states`).
    pub eager_states: usize,
    /// NFA states from which [`compile`] builds a unit wherever it is (see
    /// `CfgConfig::large_unit_states`).
    pub large_unit_states: usize,
}

/// The compile time ran out.
fn compile_time(e: LimitExceeded) -> CompileError {
    CompileError::over_limit(e, Location::None, "grammar compilation")
}

/// A rule of `g` as an error's location.
fn rule_place(g: &Grammar, r: RuleId) -> Location {
    Location::Rule(g.rule(r).name.clone())
}

/// The program would have `value` states, past `max` (the grammar size limit).
fn too_many_states(value: usize, max: usize, what: &str) -> CompileError {
    let exceeded = LimitExceeded {
        kind: LimitKind::GrammarSize,
        value: value as u64,
        max: max as u64,
    };
    CompileError::over_limit(exceeded, Location::None, what)
}

/// Sizes under which things are inlined or unrolled rather than called or counted.
const INLINE_RULE_MAX: u32 = 256;

const SPLIT_EXPR_MAX: u32 = 4096;

const UNROLL_MAX_COPIES: u32 = 32;

const UNROLL_MAX_STATES: u32 = 4096;

/// Copies of a repeat of a wide body (`minLength`/`maxLength` on a JSON string, `[0-9A-Za-z]{4}`)
/// are unrolled only up to this, an optional one: unrolled, every position is its own automaton
/// state with its own mask walk (a schema of 40 strings with `maxLength: 24` compiled to 194k
/// states, each walk ~6 ms; the four-character groups of a UUID pattern cost a walk of the
/// alphanumeric tokens, ~300 µs, at each character), while as a counted unit every position,
/// and every loop over the same body, shares the loop's relaxed classification.
const WIDE_UNROLL_MAX_COPIES: u32 = 1;

/// A bounded repeat whose body reads at least this many distinct bytes counts as wide for
/// [`WIDE_UNROLL_MAX_COPIES`].
const WIDE_REPEAT_BYTES: usize = 32;

const MAX_INLINE_DEPTH: usize = 200;

/// An unbounded loop whose body reads at least this many distinct bytes (a JSON string's
/// characters, a comment's) becomes its own unit: its states are dense (most tokens stay
/// inside) and, kept apart from what surrounds them, get the same structural hash in every
/// grammar, so their expensive mask classification is computed once and shared.
const WIDE_LOOP_BYTES: usize = 64;

/// A rule referred to from several places and at least this big is one unit they all call,
/// not a copy inlined in each: a property-name trie continues each of its nodes with the same
/// "any non-ASCII character or escape, then any text" rule (dozens of states), and inlined
/// copies made its automaton ten times the size of the minimal one until minimization merged
/// them back. Only rules: sharing arbitrary expressions this way puts more tokens across unit
/// boundaries, where masks need the parser (MaskBench sample: first-walk mask p50 8.8 µs →
/// 21–39 µs).
const SHARED_RULE_MIN: u32 = 48;

/// Cost of a call edge, as states.
const CALL_COST: u32 = 2;

/// NFA states [`compile`] drafts looking for large units (see
/// [`Lowering::build_large_units`]): at ~50 ns a state, about 3 ms for a grammar this big or
/// bigger, where building the first 4,096 states was about 2 ms.
const DRAFT_STATES: usize = 1 << 16;

/// Compiles `grammar` against `vocab` (special tokens are resolved to ids here) within
/// `deadline`: the start unit and, breadth first, the units it calls while the program has
/// fewer than `options.eager_states` states, then the large units the start reaches
/// ([`Lowering::build_large_units`]). Units built now whose callees are all built
/// get structural hashes (shared with every grammar that builds the same automaton); the
/// others, and units built later, hashes of their own (see [`hash`]).
///
/// Errors: `EmptyLanguage` (the start rule derives nothing), `UnknownSpecialToken`, `Limit`
/// (grammar size, compile time).
pub(crate) fn compile(
    grammar: &Grammar,
    vocab: &Vocab,
    options: CompileOptions,
    deadline: &Deadline,
) -> Result<Lowering, CompileError> {
    let mut lower = Lowering::new(Arc::new(grammar.clone()), vocab, options, deadline.clone())?;
    let start_body = lower.g.rule(lower.g.start()).body;
    if !lower.derivations.productive[start_body.index()] {
        return Err(CompileError::unplaced(
            CompileErrorKind::EmptyLanguage,
            "the grammar's start rule derives no string at all",
        ));
    }
    let start = lower.unit(UnitKey::Rule(lower.g.start()));
    let eager = lower.options.eager_states;
    lower.build(&[start], eager, deadline.clone())?;
    lower.build_large_units(start)?;
    Ok(lower)
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum UnitKey {
    Rule(RuleId),
    Expr(ExprId),
    /// A repeat that is not unrolled (its expression, an `Expr::Repeat`).
    Counted(ExprId),
    /// The parts of a long sequence from a chunk boundary on (`CfgLowering::suffixes`).
    Suffix(u32),
}

#[derive(Clone, Copy, Debug)]
enum Label {
    Classes(u32), // index into Nfa::class_sets
    Special(u32),
    Call(u32),
}

struct Nfa {
    eps: Vec<SmallVec<[u32; 2]>>,
    edges: Vec<SmallVec<[(Label, u32); 1]>>,
    class_sets: Vec<ByteSet>,
    /// The `class_sets` entry of each literal byte, once made.
    byte_label: [u32; 256],
    /// The entry state of each expression built so far, by continuation state.
    built: FastMap<(ExprId, u32), u32>,
    /// Right-linear rules entered but not built yet: `(rule, continuation, entry)`.
    pending: Vec<(RuleId, u32, u32)>,
    /// The continuation each large rule that is not recursive was built in place with (see
    /// `Lowering::fragment_uncached`).
    placed: FastMap<RuleId, u32>,
    /// Building those rules' bodies: a loop through one must stay in this automaton, so no
    /// sequence on it is cut into chunks (see `CfgLowering::sequence`).
    in_place: bool,
}

impl Default for Nfa {
    fn default() -> Nfa {
        Nfa {
            eps: Vec::new(),
            edges: Vec::new(),
            class_sets: Vec::new(),
            byte_label: [u32::MAX; 256],
            built: FastMap::default(),
            pending: Vec::new(),
            placed: FastMap::default(),
            in_place: false,
        }
    }
}

impl Nfa {
    fn state(&mut self) -> u32 {
        self.eps.push(SmallVec::new());
        self.edges.push(SmallVec::new());
        (self.eps.len() - 1) as u32
    }
    fn eps(&mut self, a: u32, b: u32) {
        self.eps[a as usize].push(b);
    }
    fn edge(&mut self, a: u32, l: Label, b: u32) {
        self.edges[a as usize].push((l, b));
    }
    fn len(&self) -> usize {
        self.eps.len()
    }
}

/// A unit automaton before layout: state 0 is the start.
#[derive(Clone, Debug, Default)]
struct Fsm {
    states: Vec<FState>,
    /// The unit's own byte classes (what `FState::bytes` labels), each a set of the
    /// grammar's classes: a unit that never tells two grammar classes apart reads them as
    /// one, so determinization and minimization work over a few classes instead of dozens.
    classes: Vec<ByteSet>,
}

#[derive(Clone, Debug, Default)]
struct FState {
    final_: bool,
    /// `(unit class, target)`, sorted; a class may repeat (nondeterminism).
    bytes: Vec<(u8, u32)>,
    specials: Vec<(u32, u32)>,
    calls: Vec<(u32, u32)>,
}

impl FState {
    /// What the state costs in a program of nondeterministic units: itself and an entry per
    /// edge.
    fn size(&self) -> usize {
        1 + self.bytes.len() + self.specials.len() + self.calls.len()
    }
}

impl Fsm {
    /// [`FState::size`] summed over the states.
    fn size(&self) -> usize {
        self.states.iter().map(FState::size).sum()
    }
}

enum UnitBody {
    Fsm(Fsm),
    Counted(Counted),
}

/// A unit's NFA, built in place rules included: what [`Lowering::finish_fsm`] determinizes.
struct NfaDraft {
    nfa: Nfa,
    start: u32,
    accept: u32,
}

/// A unit found and drafted but not built: its NFA, whose size tells what building it will
/// cost, and whose calls name the units it enters (see [`Lowering::build_large_units`]).
enum Draft {
    /// Boxed: an NFA holds its construction's byte table inline.
    Fsm(Box<NfaDraft>),
    Counted(Counted),
}

impl Draft {
    /// States of the NFA (a counted unit's is a few states, whatever its body).
    fn states(&self) -> usize {
        match self {
            Draft::Fsm(d) => d.nfa.len(),
            Draft::Counted(_) => 1,
        }
    }

    /// The units it calls from the states its start reaches (the fragments of one NFA are
    /// not all reached: a unit only they call would never be built).
    fn callees(&self) -> Vec<u32> {
        let d = match self {
            Draft::Fsm(d) => d,
            Draft::Counted(c) => return vec![c.body],
        };
        let nfa = &d.nfa;
        let mut seen = vec![false; nfa.len()];
        let mut stack = vec![d.start];
        let mut calls = Vec::new();
        while let Some(s) = stack.pop() {
            if std::mem::replace(&mut seen[s as usize], true) {
                continue;
            }
            stack.extend(nfa.eps[s as usize].iter().copied());
            for &(label, t) in &nfa.edges[s as usize] {
                if let Label::Call(u) = label {
                    calls.push(u);
                }
                stack.push(t);
            }
        }
        calls
    }
}

/// The lowering of one grammar, kept with the compiled grammar to build the units no parse
/// has entered yet: the IR, what the passes over it decided (what recurses, what is inlined,
/// what each expression costs and derives), the units found so far and the program built.
pub(crate) struct Lowering {
    /// Shared with the fragment being built, which reads it while the lowering changes.
    g: Arc<Grammar>,
    vocab: Vocab,
    options: CompileOptions,
    /// The budget of the build in progress: the compilation's, then one per later build.
    deadline: Deadline,
    derivations: Arc<Derivations>,
    boundaries: Boundaries,
    recursive: Vec<bool>,
    /// Rules built into their caller's automaton even when too big to inline
    /// ([`jump_rules`]).
    jumps: Vec<bool>,
    cost: Vec<u32>,
    /// Every byte some class or literal inside the expression reads.
    width: Vec<ByteSet>,
    /// The sequence suffixes that are units, and their numbers.
    suffixes: Vec<Box<[ExprId]>>,
    suffix_ids: FastMap<Box<[ExprId]>, u32>,
    inline_rule: Vec<bool>,
    /// How many expressions refer to each rule.
    rule_refs: Vec<u32>,
    alphabet: Alphabet,
    /// Per unit (by number, in the order units were found), what it is built from.
    units: Vec<UnitKey>,
    /// Per unit, whether it derives anything (a call to one that does not is dropped).
    productive: Vec<bool>,
    /// Per unit, the bytes its strings may start with (for the slices worth trying).
    first: Vec<ByteSet>,
    /// Per unit, the rule it is part of: its own, or the rule of the unit that first called
    /// it (limit errors name it).
    unit_rules: Vec<RuleId>,
    /// The unit being built.
    building: u32,
    unit_ids: FastMap<UnitKey, u32>,
    special_ids: HashMap<Box<str>, u32>,
    total_states: usize,
    /// Transition entries of the units laid out (bounded with the states).
    entries: usize,
    /// What is left of [`TOTAL_DETERMINIZE_WORK`] and [`TOTAL_BISIMULATION_WORK`].
    determinize_left: usize,
    bisimulate_left: usize,
    /// The program built so far (shared with the matchers that use it: building more copies
    /// it once, see [`Lowering::build`]).
    prog: Arc<Program>,
    /// Distinguishes this grammar's own hashes from every other grammar's.
    nonce: u64,
    /// Per unit, its structural hash once its automaton is complete (see `hash`).
    unit_hashes: Vec<Option<u128>>,
    /// Units drafted when the grammar compiled and left to be built when a parse enters them.
    drafts: FastMap<u32, Draft>,
    /// The table of [`Nfa::built`] between drafts, emptied but not freed: grown afresh for
    /// every unit, its rehashing was a fifth of drafting.
    built_scratch: FastMap<(ExprId, u32), u32>,
}

impl Lowering {
    fn new(
        g: Arc<Grammar>,
        vocab: &Vocab,
        options: CompileOptions,
        deadline: Deadline,
    ) -> Result<Self, CompileError> {
        let (recursive, tail_recursive) = recursive_rules(&g, &deadline)?;
        let derivations = g.derivations(&deadline).map_err(compile_time)?;
        let jumps = jump_rules(
            &g,
            &recursive,
            tail_recursive,
            &derivations.nullable,
            &deadline,
        )?;
        let boundaries = Boundaries::new(&g, &derivations, &deadline).map_err(compile_time)?;
        let alphabet = Alphabet::new(&g);
        let mut me = Lowering {
            vocab: vocab.clone(),
            options,
            recursive,
            jumps,
            cost: vec![0; g.exprs().len()],
            width: vec![ByteSet::EMPTY; g.exprs().len()],
            suffixes: Vec::new(),
            suffix_ids: FastMap::default(),
            inline_rule: vec![false; g.rules().len()],
            rule_refs: rule_refs(&g),
            prog: Arc::new(Program::new(alphabet.clone())),
            alphabet,
            derivations,
            boundaries,
            units: Vec::new(),
            productive: Vec::new(),
            first: Vec::new(),
            unit_rules: Vec::new(),
            building: 0,
            unit_ids: FastMap::default(),
            special_ids: HashMap::new(),
            total_states: 0,
            entries: 0,
            determinize_left: TOTAL_DETERMINIZE_WORK,
            bisimulate_left: TOTAL_BISIMULATION_WORK,
            nonce: hash::nonce(),
            unit_hashes: Vec::new(),
            drafts: FastMap::default(),
            built_scratch: FastMap::default(),
            deadline,
            g,
        };
        me.compute_costs()?;
        me.resolve_specials()?;
        Ok(me)
    }

    /// The program built so far.
    pub fn program(&self) -> &Arc<Program> {
        &self.prog
    }

    /// Has every unit a parse could enter been built (so this lowering is no longer needed)?
    pub fn is_complete(&self) -> bool {
        self.prog.units.iter().all(Unit::is_built)
    }

    /// Builds `units` (those not built yet), then the units they call, breadth first, while
    /// this build has added fewer than `batch` states, within `deadline`. A parse that enters
    /// a unit mostly goes on into its callees: building them now saves a halt and a retry of
    /// the step per level of calls. The program is copied once if matchers share it (they
    /// keep the program they have until they need a unit it lacks).
    pub fn build(
        &mut self,
        units: &[u32],
        batch: usize,
        deadline: Deadline,
    ) -> Result<(), CompileError> {
        self.deadline = deadline;
        let before = self.prog.states.len();
        // The units asked for and those predicted with them (the parse needs them in the same
        // row: asked for one at a time, a chain of rules each calling the next at its start,
        // such as an object's optional members cut into rules, cost a halt and a rebuilt
        // mask per rule), then their other callees within `batch` states.
        let mut required: VecDeque<u32> = units.iter().copied().collect();
        let mut optional: VecDeque<u32> = VecDeque::new();
        let mut built = false;
        loop {
            let u = match required.pop_front() {
                Some(u) => u,
                None => match optional.pop_front() {
                    Some(u) if self.prog.states.len() - before < batch => u,
                    _ => break,
                },
            };
            if self.prog.units[u as usize].is_built() {
                continue;
            }
            self.build_unit(u)?;
            built = true;
            required.extend(self.prog.predicted_with(u));
            optional.extend(self.prog.callees(u));
        }
        match built {
            true => self.hash_complete_units(),
            false => Ok(()),
        }
    }

    /// Gives the units whose automata are now complete their structural hashes (see
    /// [`hash::structural`]).
    fn hash_complete_units(&mut self) -> Result<(), CompileError> {
        let prog = Arc::make_mut(&mut self.prog);
        hash::structural(prog, &mut self.unit_hashes, &self.deadline)
    }

    /// Resolves every special token the grammar's reachable rules name (an unknown one is an
    /// error at the rule naming it), so building a unit later never meets one.
    fn resolve_specials(&mut self) -> Result<(), CompileError> {
        let mut seen_rule = vec![false; self.g.rules().len()];
        let mut rules = vec![self.g.start()];
        seen_rule[self.g.start().index()] = true;
        let mut seen = vec![false; self.g.exprs().len()];
        while let Some(r) = rules.pop() {
            let mut stack = vec![self.g.rule(r).body];
            while let Some(e) = stack.pop() {
                self.tick()?;
                if std::mem::replace(&mut seen[e.index()], true) {
                    continue;
                }
                match self.g.expr(e) {
                    Expr::Special(name) => {
                        let name = name.clone();
                        self.special(&name)
                            .map_err(|err| err.or_at(rule_place(&self.g, r)))?;
                    }
                    Expr::Seq(xs) | Expr::Alt(xs) => stack.extend(xs.iter().copied()),
                    Expr::Repeat { body, .. } => stack.push(*body),
                    Expr::Rule(callee) => {
                        let seen = std::mem::replace(&mut seen_rule[callee.index()], true);
                        if !seen {
                            rules.push(*callee);
                        }
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    fn tick(&self) -> Result<(), CompileError> {
        self.deadline.tick().map_err(compile_time)
    }

    /// Children of an expression for the cost order; references to recursive rules are leaves.
    fn children(&self, e: usize) -> SmallVec<[usize; 4]> {
        match &self.g.exprs()[e] {
            Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().map(|x| x.index()).collect(),
            Expr::Repeat { body, .. } => smallvec::smallvec![body.index()],
            Expr::Rule(r) if !self.recursive[r.index()] => {
                smallvec::smallvec![self.g.rule(*r).body.index()]
            }
            _ => SmallVec::new(),
        }
    }

    /// States an expression costs where it is used: inline size, or a call if it is big.
    fn use_cost(&self, e: ExprId) -> u32 {
        let c = self.cost[e.index()];
        if c > SPLIT_EXPR_MAX && !matches!(self.g.expr(e), Expr::Rule(_)) {
            CALL_COST
        } else {
            c
        }
    }

    fn unrolls(&self, body: ExprId, min: u32, max: Option<u32>) -> bool {
        let copies = max.unwrap_or(min.saturating_add(1));
        let max_copies = match self.width[body.index()].len() >= WIDE_REPEAT_BYTES {
            true => WIDE_UNROLL_MAX_COPIES,
            false => UNROLL_MAX_COPIES,
        };
        copies <= max_copies && copies.saturating_mul(self.use_cost(body)) <= UNROLL_MAX_STATES
    }

    /// Inline sizes of every expression, children first (iterative: IR nesting can be deep).
    fn compute_costs(&mut self) -> Result<(), CompileError> {
        let n = self.g.exprs().len();
        let mut done = vec![false; n];
        let mut stack: Vec<(usize, bool)> = (0..n).rev().map(|i| (i, false)).collect();
        while let Some((e, expanded)) = stack.pop() {
            self.tick()?;
            if done[e] {
                continue;
            }
            if !expanded {
                stack.push((e, true));
                for c in self.children(e) {
                    if !done[c] {
                        stack.push((c, false));
                    }
                }
                continue;
            }
            let cost = match &self.g.exprs()[e] {
                Expr::Empty | Expr::Nothing => 1,
                Expr::Bytes(b) => b.len() as u32 + 1,
                Expr::Class(_) | Expr::Special(_) => 2,
                Expr::Seq(xs) => xs
                    .iter()
                    .fold(0u32, |a, &x| a.saturating_add(self.use_cost(x))),
                Expr::Alt(xs) => xs
                    .iter()
                    .fold(2u32, |a, &x| a.saturating_add(self.use_cost(x))),
                Expr::Repeat { body, min, max } => {
                    if self.unrolls(*body, *min, *max) {
                        let copies = max.unwrap_or(min + 1);
                        copies
                            .saturating_mul(self.use_cost(*body))
                            .saturating_add(2)
                    } else {
                        CALL_COST
                    }
                }
                Expr::Rule(r) => {
                    if self.recursive[r.index()] {
                        CALL_COST
                    } else {
                        let body = self.g.rule(*r).body;
                        let c = self.cost[body.index()];
                        let shared = self.rule_refs[r.index()] > 1 && c >= SHARED_RULE_MIN;
                        let inline = c <= INLINE_RULE_MAX && !shared;
                        self.inline_rule[r.index()] = inline;
                        if inline {
                            c
                        } else {
                            CALL_COST
                        }
                    }
                }
            };
            self.cost[e] = cost;
            self.width[e] = match &self.g.exprs()[e] {
                Expr::Bytes(b) => b
                    .iter()
                    .fold(ByteSet::EMPTY, |acc, &x| acc.union(&ByteSet::byte(x))),
                Expr::Class(c) => *c,
                _ => self
                    .children(e)
                    .iter()
                    .fold(ByteSet::EMPTY, |acc, &c| acc.union(&self.width[c])),
            };
            done[e] = true;
        }
        Ok(())
    }

    /// The unit for `key`, numbered if new: a unit of the program not built yet, with what
    /// the IR says of it (nullable, productive, first and follow bytes).
    fn unit(&mut self, key: UnitKey) -> u32 {
        if let Some(&u) = self.unit_ids.get(&key) {
            return u;
        }
        let u = self.units.len() as u32;
        let rule = match key {
            UnitKey::Rule(r) => r,
            _ => self.unit_rules[self.building as usize],
        };
        let d = &self.derivations;
        let b = &self.boundaries;
        // The expressions the unit's strings are made of, in order, and the one whose end is
        // the unit's end (what follows it follows the unit).
        let (parts, last): (&[ExprId], ExprId) = match &key {
            UnitKey::Rule(r) => {
                let body = self.g.rule(*r).body;
                (std::slice::from_ref(&self.g.rule(*r).body), body)
            }
            UnitKey::Expr(e) | UnitKey::Counted(e) => (std::slice::from_ref(e), *e),
            UnitKey::Suffix(i) => {
                let parts = &self.suffixes[*i as usize];
                (parts, *parts.last().expect("a suffix has parts"))
            }
        };
        let productive = parts.iter().all(|x| d.productive[x.index()]);
        let nullable = parts.iter().all(|x| d.nullable[x.index()]);
        let mut first = ByteSet::EMPTY;
        for x in parts {
            first = first.union(&b.first[x.index()]);
            if !d.nullable[x.index()] {
                break;
            }
        }
        let follow = b.follow[last.index()];
        let prog = Arc::make_mut(&mut self.prog);
        prog.units.push(Unit {
            start: UNBUILT,
            end: UNBUILT,
            nullable,
            counted: None,
        });
        prog.follow.push(follow);
        prog.unit_rules.push(self.g.rule(rule).name.as_str().into());
        self.units.push(key);
        self.productive.push(productive);
        self.first.push(first);
        self.unit_rules.push(rule);
        self.unit_ids.insert(key, u);
        u
    }

    /// Builds unit `u` and appends it to the program; a limit it reaches (grammar size,
    /// compile time) is placed at the unit's rule.
    fn build_unit(&mut self, u: u32) -> Result<(), CompileError> {
        let draft = match self.drafts.remove(&u) {
            Some(draft) => draft,
            None => self.draft(u)?,
        };
        self.finish(u, draft)
    }

    /// Unit `u`'s NFA (which finds the units it calls); a limit it reaches (compile time) is
    /// placed at the unit's rule.
    fn draft(&mut self, u: u32) -> Result<Draft, CompileError> {
        self.building = u;
        self.draft_body(u).map_err(|e| e.or_at(self.place(u)))
    }

    fn draft_body(&mut self, u: u32) -> Result<Draft, CompileError> {
        self.deadline.check().map_err(compile_time)?;
        Ok(match self.units[u as usize] {
            UnitKey::Counted(e) => {
                let Expr::Repeat { body, min, max } = *self.g.expr(e) else {
                    unreachable!("a counted unit is built from a repeat")
                };
                let body = self.unit(UnitKey::Expr(body));
                let max = max.unwrap_or(UNBOUNDED);
                Draft::Counted(Counted { body, min, max })
            }
            UnitKey::Rule(r) => Draft::Fsm(self.draft_fsm(&[self.g.rule(r).body])?),
            UnitKey::Expr(e) => Draft::Fsm(self.draft_fsm(&[e])?),
            UnitKey::Suffix(i) => {
                let parts = self.suffixes[i as usize].clone();
                Draft::Fsm(self.draft_fsm(&parts)?)
            }
        })
    }

    /// Determinizes a drafted unit and appends it to the program; a limit it reaches (grammar
    /// size, compile time) is placed at the unit's rule.
    fn finish(&mut self, u: u32, draft: Draft) -> Result<(), CompileError> {
        self.building = u;
        let body = match draft {
            Draft::Fsm(nfa) => self.finish_fsm(nfa).map(UnitBody::Fsm),
            Draft::Counted(c) => Ok(UnitBody::Counted(c)),
        };
        let body = body.map_err(|e| e.or_at(self.place(u)))?;
        self.lay_out(u, body).map_err(|e| e.or_at(self.place(u)))
    }

    /// Drafts the units reachable from `start` not built yet, breadth first, until the drafts
    /// have [`DRAFT_STATES`] NFA states, and builds those whose NFA has at least
    /// [`CompileOptions::large_unit_states`] states; the others wait, drafted, for a parse
    /// to enter them. Building a unit costs in proportion to its NFA (MaskBench: ~50 ns per
    /// NFA state to draft, ~360 ns per automaton state to determinize and lay out; under 2 ms
    /// for every unit below 2,048 NFA states, 2–18 ms for most above), and the parse that
    /// enters a unit pays its build in a mask: a large unit's build is
    /// paid when the grammar compiles, however deep the unit, and a small one's only by the
    /// generations that reach it.
    fn build_large_units(&mut self, start: u32) -> Result<(), CompileError> {
        if self.options.large_unit_states == usize::MAX {
            return Ok(());
        }
        let mut seen: FastSet<u32> = FastSet::default();
        let mut queue = VecDeque::from([start]);
        let mut drafted = 0usize;
        let mut built = false;
        while let Some(u) = queue.pop_front() {
            if drafted >= DRAFT_STATES {
                break;
            }
            if !seen.insert(u) {
                continue;
            }
            if self.prog.units[u as usize].is_built() {
                queue.extend(self.prog.callees(u));
                continue;
            }
            let draft = self.draft(u)?;
            drafted += draft.states();
            let productive = &self.productive;
            queue.extend(
                draft
                    .callees()
                    .into_iter()
                    .filter(|&c| productive[c as usize]),
            );
            if draft.states() >= self.options.large_unit_states {
                self.finish(u, draft)?;
                built = true;
            } else {
                self.drafts.insert(u, draft);
            }
        }
        match built {
            true => self.hash_complete_units(),
            false => Ok(()),
        }
    }

    /// Where unit `u` is in the grammar: its rule.
    fn place(&self, u: u32) -> Location {
        rule_place(&self.g, self.unit_rules[u as usize])
    }

    fn special(&mut self, name: &str) -> Result<u32, CompileError> {
        if let Some(&i) = self.special_ids.get(name) {
            return Ok(i);
        }
        let id = self.vocab.special_id(name).ok_or_else(|| {
            CompileError::unplaced(
                CompileErrorKind::UnknownSpecialToken,
                format!(
                    "the grammar names special token {name:?}, which the vocabulary ({}) does not have",
                    self.vocab.source()
                ),
            )
        })?;
        let specials = &mut Arc::make_mut(&mut self.prog).specials;
        let i = specials.len() as u32;
        specials.push((name.into(), id));
        self.special_ids.insert(name.into(), i);
        Ok(i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whole program of `g`, every unit built.
    pub(super) fn compile_for_test(g: &Grammar) -> Program {
        let vocab = Vocab::from_token_bytes(Vec::new(), &[], &[]).unwrap();
        let options = CompileOptions {
            max_states: 1 << 20,
            max_dfa_states: 1 << 16,
            minimize: false,
            eager_states: usize::MAX,
            large_unit_states: usize::MAX,
        };
        let lower = compile(g, &vocab, options, &Deadline::never()).unwrap();
        assert!(lower.is_complete());
        Program::clone(lower.program())
    }

    /// A large rule referred to only as the last step of a rule inlined in several places is
    /// built in place once per unit and called from the other places, not copied into each.
    #[test]
    fn a_large_tail_rule_is_built_once_per_unit() {
        let states = |items: usize| {
            let body = vec!["[a-c]"; 140].join(" ");
            let list = vec!["item"; items].join(" \",\" ");
            let text = format!("root ::= \"[\" {list} \"]\"\nitem ::= \"k\" big\nbig ::= {body}\n");
            let g = crate::front::gbnf::gbnf_to_ir(&text, "g").unwrap();
            compile_for_test(&g).states.len()
        };
        let (one, six) = (states(1), states(6));
        assert!(
            six < one + 2 * 150,
            "{one} states for one item, {six} for six"
        );
    }
}
