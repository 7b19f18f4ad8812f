//! The compiled form of a grammar: a flat *program* of small automata.
//!
//! Every IR rule that needs its own stack frame (recursive rules, big rules, big shared
//! sub-expressions, rules referred to from several places) becomes a *unit*: an automaton whose
//! edges read a byte class, read a special token, or *call* another unit. Everything else is
//! inlined into its caller's automaton, so a JSON string or number is a handful of states
//! inside its caller instead of a chain of Earley items; rules that recurse only in tail
//! position (free text around tool calls) are loops inside it, not calls. Fragments are built
//! once per continuation, so branches that end alike share their ending. Unit automata are
//! determinized where that stays small (and minimized on request), so an Earley row inside a
//! terminal-heavy region holds a single item and a byte costs one table lookup.
//!
//! Counted repeats (`x{0,100000}`, `x{500,}`) are not unrolled: they become a *counted unit*, a
//! single state whose Earley items carry a repetition counter (XGrammar 2's repetition
//! compression, done exactly: the counter is part of the item, and the mask cache abstracts it
//! to its distance from the bounds, see `mask.rs`).
//!
//! All states of all units live in one array; transitions are one dense table over the
//! grammar's byte classes (bytes no rule distinguishes share a class).

use std::collections::{HashMap, VecDeque};

use smallvec::SmallVec;

use crate::base::byteset::ByteSet;
use crate::base::collections::{FastMap, FastSet};
use crate::base::token::TokenId;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::ir::{Expr, ExprId, Grammar, RuleId};
use crate::limits::{Deadline, LimitExceeded, LimitKind};
use crate::vocab::Vocab;

/// Interns `u32` slices: ids in insertion order, all slices in one arena (no allocation per
/// slice). Determinization interns state sets with it, minimization signatures, the trie
/// walk its row structures.
#[derive(Default, Debug)]
pub(crate) struct SliceInterner {
    data: Vec<u32>,
    spans: Vec<(u32, u32)>,
    index: FastMap<u64, SmallVec<[u32; 1]>>,
}

impl SliceInterner {
    /// The id of `slice`, and whether it is new.
    pub fn intern(&mut self, slice: &[u32]) -> (u32, bool) {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        slice.hash(&mut h);
        let candidates = self.index.entry(h.finish()).or_default();
        for &id in candidates.iter() {
            let (a, b) = self.spans[id as usize];
            if &self.data[a as usize..b as usize] == slice {
                return (id, false);
            }
        }
        let id = self.spans.len() as u32;
        candidates.push(id);
        let start = self.data.len() as u32;
        self.data.extend_from_slice(slice);
        self.spans.push((start, self.data.len() as u32));
        (id, true)
    }

    /// The slice with id `id`.
    #[inline]
    pub fn get(&self, id: u32) -> &[u32] {
        let (a, b) = self.spans[id as usize];
        &self.data[a as usize..b as usize]
    }

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Bytes held, roughly (the index counted at one entry per slice).
    pub fn heap_bytes(&self) -> usize {
        self.data.len() * 4 + self.spans.len() * 8 + self.index.len() * 16
    }

    pub fn clear(&mut self) {
        self.data.clear();
        self.spans.clear();
        self.index.clear();
    }
}

/// No transition.
pub(crate) const DEAD: u32 = u32::MAX;
/// High bit of a transition entry: the rest indexes `Program::multi` (several targets).
pub(crate) const MULTI: u32 = 1 << 31;
/// `max` of a counted unit without upper bound.
pub(crate) const UNBOUNDED: u32 = u32::MAX;

/// The state ends its unit (the unit's rule is complete here).
pub(crate) const FINAL: u8 = 1;
/// The state has call edges (or is a counted state, which calls its body).
pub(crate) const CALLS: u8 = 2;
/// The state is the single state of a counted unit.
pub(crate) const COUNTED: u8 = 4;
/// The state has special-token edges.
pub(crate) const SPECIALS: u8 = 8;
/// The state has byte transitions: it can read the next byte of a text token itself.
pub(crate) const SCANS: u8 = 16;

/// One state of a unit automaton.
#[derive(Clone, Copy, Debug)]
pub(crate) struct State {
    pub unit: u32,
    pub flags: u8,
    /// Range of `Program::calls`.
    pub calls: (u32, u32),
    /// Range of `Program::special_edges`.
    pub specials: (u32, u32),
}

/// A call edge: predict `unit`; when it completes, continue at `ret`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Call {
    pub unit: u32,
    pub ret: u32,
}

/// Bounds of a counted unit: `body{min,max}`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counted {
    pub body: u32,
    pub min: u32,
    /// [`UNBOUNDED`] for no upper bound.
    pub max: u32,
}

/// Counter of a counted item whose bounds are ignored: it may always iterate and complete. The
/// mask cache classifies tokens against such a relaxed item (its rows repeat, so the trie walk
/// memoizes them) and checks the few tokens a real bound could affect exactly.
pub(crate) const RELAXED: u32 = u32::MAX;

impl Counted {
    /// The counter after one more iteration. Without an upper bound, counts past `min` are all
    /// alike, so they are capped there (otherwise every row would hold a new item).
    #[inline]
    pub fn inc(&self, count: u32) -> u32 {
        if count == RELAXED {
            RELAXED
        } else if self.max == UNBOUNDED {
            (count + 1).min(self.min)
        } else {
            count + 1
        }
    }

    /// May another iteration start at this count?
    #[inline]
    pub fn can_iterate(&self, count: u32) -> bool {
        count == RELAXED || self.max == UNBOUNDED || count < self.max
    }

    /// May the repetition end at this count?
    #[inline]
    pub fn complete(&self, count: u32) -> bool {
        count == RELAXED || count >= self.min
    }

    /// Iterations left before the upper bound (`None`: unbounded or relaxed).
    #[inline]
    pub fn left(&self, count: u32) -> Option<u32> {
        (count != RELAXED && self.max != UNBOUNDED).then(|| self.max - count)
    }
}

/// A unit: its states are `start..end` in the global state array; `start` is its start state.
#[derive(Clone, Debug)]
pub(crate) struct Unit {
    pub start: u32,
    pub end: u32,
    pub nullable: bool,
    pub counted: Option<Counted>,
}

/// The grammar's byte classes: bytes that every byte set of the grammar treats alike.
#[derive(Clone, Debug)]
pub(crate) struct Alphabet {
    pub class_of: [u8; 256],
    pub sets: Vec<ByteSet>,
}

impl Alphabet {
    fn new(grammar: &Grammar) -> Alphabet {
        let mut distinct: FastSet<ByteSet> = FastSet::default();
        let mut literal = ByteSet::EMPTY;
        for e in grammar.exprs() {
            match e {
                Expr::Class(c) => {
                    distinct.insert(*c);
                }
                Expr::Bytes(b) => b.iter().for_each(|&x| literal.insert(x)),
                _ => {}
            }
        }
        distinct.extend(literal.iter().map(ByteSet::byte));
        let sets = refine(ByteSet::FULL, distinct.iter());
        let mut class_of = [0u8; 256];
        for (id, class) in sets.iter().enumerate() {
            class.iter().for_each(|b| class_of[b as usize] = id as u8);
        }
        Alphabet { class_of, sets }
    }

    pub fn len(&self) -> usize {
        self.sets.len()
    }

    /// The classes a byte set covers (as a set of class ids).
    fn classes(&self, set: &ByteSet) -> ByteSet {
        let mut out = ByteSet::EMPTY;
        for b in set.iter() {
            out.insert(self.class_of[b as usize]);
        }
        out
    }
}

/// The coarsest partition of `universe` that every set splits into whole parts, in order of
/// each part's least byte.
///
/// Partition refinement a set at a time, touching only the bytes of the smaller side of each
/// cut (the set or its complement in `universe`): a JSON schema has hundreds of distinct sets,
/// most of them a few letters or everything but a few, and splitting every part by every set
/// cost a sixth of a schema's Earley compile.
fn refine<'s>(universe: ByteSet, sets: impl Iterator<Item = &'s ByteSet>) -> Vec<ByteSet> {
    let total = universe.len();
    let mut part_of = [0u8; 256];
    let mut size = vec![total as u16];
    // Bytes of the current cut in each part, and the part its cut bytes move to.
    let mut hit = [0u16; 256];
    let mut moved_to = [0u8; 256];
    let mut touched: Vec<u8> = Vec::new();
    for set in sets {
        if size.len() == total {
            break;
        }
        let inside = set.intersection(&universe);
        let outside = universe.intersection(&set.complement());
        let cut = if inside.len() <= outside.len() {
            inside
        } else {
            outside
        };
        touched.clear();
        for b in cut.iter() {
            let p = part_of[b as usize];
            if hit[p as usize] == 0 {
                touched.push(p);
            }
            hit[p as usize] += 1;
        }
        for &p in &touched {
            let n = hit[p as usize];
            moved_to[p as usize] = match n < size[p as usize] {
                true => {
                    size[p as usize] -= n;
                    size.push(n);
                    (size.len() - 1) as u8
                }
                false => p,
            };
            hit[p as usize] = 0;
        }
        for b in cut.iter() {
            part_of[b as usize] = moved_to[part_of[b as usize] as usize];
        }
    }
    let mut parts = vec![ByteSet::EMPTY; size.len()];
    for b in universe.iter() {
        parts[part_of[b as usize] as usize].insert(b);
    }
    parts.sort_unstable_by_key(|p| p.iter().next());
    parts
}

/// A compiled grammar.
#[derive(Debug)]
pub(crate) struct Program {
    pub states: Vec<State>,
    pub units: Vec<Unit>,
    pub start_unit: u32,
    pub alphabet: Alphabet,
    /// `states.len() * alphabet.len()` entries: target state, [`DEAD`], or [`MULTI`] | index.
    pub trans: Vec<u32>,
    /// `[n, t1, .., tn]` lists for nondeterministic entries.
    pub multi: Vec<u32>,
    pub calls: Vec<Call>,
    /// `(special index, target)`.
    pub special_edges: Vec<(u32, u32)>,
    /// Special tokens the grammar names: content and vocabulary id.
    pub specials: Vec<(Box<str>, TokenId)>,
    /// Per unit, the bytes that may come right after it completes, in any caller (a
    /// superset). A token the unit alone rejects on a byte outside them, after completing,
    /// is rejected in every context: the mask cache need not ask the context about it.
    pub follow: Vec<ByteSet>,
    /// Bit `k`: the vocabulary's slice `k` is worth a proof in this grammar
    /// ([`Program::slices_worth_trying`]).
    pub slices: u32,
}

impl Program {
    /// The slices a mask walk of this program should try: the text slices always, a narrower
    /// one only if some state takes (itself or through the units it calls) every byte its
    /// strings start with but not every byte the slice before it starts with (a URI's
    /// characters, names limited by a pattern). Other grammars would only fail its proof at
    /// every walk where no slice fits (JSON keys, numbers).
    pub fn slices_worth_trying(&self, vocab: &Vocab, unit_first: &[ByteSet]) -> u32 {
        let first: Vec<ByteSet> = vocab.slices().iter().map(|s| s.first_bytes()).collect();
        // Per slice, the classes holding one of its first bytes: a state takes them all, by
        // its own edges or through a callee, or it cannot take the slice (most states fail
        // on the first class looked at).
        let needed: Vec<Vec<usize>> = first
            .iter()
            .map(|f| {
                (0..self.n_classes())
                    .filter(|&c| !self.alphabet.sets[c].intersection(f).is_empty())
                    .collect()
            })
            .collect();
        let takes = |s: u32, k: usize| {
            let mut callees = None;
            needed[k].iter().all(|&c| {
                self.entry(s, c) != DEAD || {
                    let from_callees =
                        callees.get_or_insert_with(|| self.callees_first(s, unit_first));
                    let bytes = self.alphabet.sets[c].intersection(&first[k]);
                    from_callees.intersection(&bytes) == bytes
                }
            })
        };
        let scanning = (0..self.states.len() as u32).filter(|&s| self.state(s).flags & SCANS != 0);
        let mut worth = 0b11;
        for k in 2..first.len() {
            if scanning.clone().any(|s| takes(s, k) && !takes(s, k - 1)) {
                worth |= 1 << k;
            }
        }
        worth
    }

    #[inline]
    pub fn n_classes(&self) -> usize {
        self.alphabet.sets.len()
    }

    #[inline]
    pub fn state(&self, s: u32) -> &State {
        &self.states[s as usize]
    }

    #[inline]
    pub fn calls_of(&self, s: u32) -> &[Call] {
        let (a, b) = self.states[s as usize].calls;
        &self.calls[a as usize..b as usize]
    }

    #[inline]
    pub fn specials_of(&self, s: u32) -> &[(u32, u32)] {
        let (a, b) = self.states[s as usize].specials;
        &self.special_edges[a as usize..b as usize]
    }

    /// The raw transition entry of `s` on byte class `class`.
    #[inline]
    pub fn entry(&self, s: u32, class: usize) -> u32 {
        self.trans[s as usize * self.n_classes() + class]
    }

    /// State `s`'s transition entries, one per class.
    #[inline]
    pub fn entries(&self, s: u32) -> &[u32] {
        let n = self.n_classes();
        &self.trans[s as usize * n..(s as usize + 1) * n]
    }

    /// The targets of a transition entry.
    #[inline]
    pub fn targets(&self, entry: u32) -> &[u32] {
        let i = (entry & !MULTI) as usize;
        let n = self.multi[i] as usize;
        &self.multi[i + 1..i + 1 + n]
    }

    /// The bytes on which `s` has a transition.
    pub fn first_bytes(&self, s: u32) -> ByteSet {
        let mut out = ByteSet::EMPTY;
        for c in 0..self.n_classes() {
            if self.entry(s, c) != DEAD {
                out = out.union(&self.alphabet.sets[c]);
            }
        }
        out
    }

    /// Per unit, the bytes its strings may start with, by a fixpoint: its start state's, and
    /// its start's callees' (every byte when one can be empty). Units are numbered in the
    /// order they were called, callers first, so passes run from the last: a chain of calls
    /// settles in one.
    fn unit_first_sets(&self, deadline: &Deadline) -> Result<Vec<ByteSet>, CompileError> {
        let own: Vec<ByteSet> = self
            .units
            .iter()
            .map(|u| self.first_bytes(u.start))
            .collect();
        let mut first = own.clone();
        let mut changed = true;
        while changed {
            changed = false;
            for u in (0..self.units.len()).rev() {
                deadline.tick().map_err(compile_time)?;
                let f = own[u].union(&self.callees_first(self.units[u].start, &first));
                changed |= f != first[u];
                first[u] = f;
            }
        }
        Ok(first)
    }

    /// The bytes the units `s` calls may start with, by `first` (any byte if one is
    /// nullable).
    fn callees_first(&self, s: u32, first: &[ByteSet]) -> ByteSet {
        self.calls_of(s).iter().fold(ByteSet::EMPTY, |acc, c| {
            match self.units[c.unit as usize].nullable {
                true => ByteSet::FULL,
                false => acc.union(&first[c.unit as usize]),
            }
        })
    }

    /// [`Program::follow`], by a fixpoint over the units' `first` bytes
    /// ([`Program::unit_first_sets`]). What may follow a call's return state: its own bytes,
    /// its callees' first bytes, and, when it may end its unit, whatever follows that unit; a
    /// unit is followed by what follows each of its calls. A counted unit's state calls the
    /// body and returns to itself, so a body is followed by its own first bytes and by what
    /// follows the loop.
    /// Callers come first in unit order, and what follows a callee comes from its callers, so
    /// passes run in that order.
    fn follow_sets(
        &self,
        first: &[ByteSet],
        deadline: &Deadline,
    ) -> Result<Vec<ByteSet>, CompileError> {
        let n = self.units.len();
        let mut rets: Vec<(u32, u32)> = self.calls.iter().map(|c| (c.unit, c.ret)).collect();
        // By the caller's unit (a return state is a state of the caller).
        rets.sort_unstable_by_key(|&(unit, ret)| (self.state(ret).unit, unit, ret));
        rets.dedup();
        let next_own: Vec<ByteSet> = rets
            .iter()
            .map(|&(_, r)| self.first_bytes(r).union(&self.callees_first(r, first)))
            .collect();
        let mut follow = vec![ByteSet::EMPTY; n];
        let mut changed = true;
        while changed {
            changed = false;
            for (&(unit, ret), next) in rets.iter().zip(&next_own) {
                deadline.tick().map_err(compile_time)?;
                let st = self.state(ret);
                let mut f = follow[unit as usize].union(next);
                if st.flags & (FINAL | COUNTED) != 0 {
                    f = f.union(&follow[st.unit as usize]);
                }
                changed |= f != follow[unit as usize];
                follow[unit as usize] = f;
            }
        }
        Ok(follow)
    }

    /// The special index of a vocabulary token, if the grammar names it.
    pub fn special_index(&self, token: TokenId) -> Option<u32> {
        self.specials
            .iter()
            .position(|(_, t)| *t == token)
            .map(|i| i as u32)
    }
}

/// How to compile (from `CfgConfig`), and the limits on it (from `Limits`).
#[derive(Clone, Debug)]
pub(crate) struct CompileOptions<'a> {
    /// Most states of the whole program ([`LimitKind::GrammarSize`]); one unit's automaton
    /// under construction may have as many.
    pub max_states: usize,
    /// A unit is determinized while it stays under this many states (tuning, below
    /// [`LimitKind::AutomatonStates`]); past it, it stays nondeterministic.
    pub max_dfa_states: usize,
    pub deadline: &'a Deadline,
    /// Minimize deterministic units too (see `CfgConfig::minimize`).
    pub minimize: bool,
}

/// The compile time ran out.
fn compile_time(e: LimitExceeded) -> CompileError {
    CompileError::over_limit(e, Location::None, "grammar compilation")
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

/// Compiles `grammar` against `vocab` (special tokens are resolved to ids here).
pub(crate) fn compile(
    grammar: &Grammar,
    vocab: &Vocab,
    options: &CompileOptions,
) -> Result<Program, CompileError> {
    let mut lower = Lowering::new(grammar, vocab, options)?;
    let start = lower.unit(UnitKey::Rule(grammar.start()));
    while let Some(u) = lower.queue.pop_front() {
        lower.build_unit(u)?;
    }
    let mut prog = lower.finish(start)?;
    let unit_first = prog.unit_first_sets(options.deadline)?;
    prog.follow = prog.follow_sets(&unit_first, options.deadline)?;
    prog.slices = prog.slices_worth_trying(vocab, &unit_first);
    Ok(prog)
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum UnitKey {
    Rule(RuleId),
    Expr(ExprId),
    Counted { body: ExprId, min: u32, max: u32 },
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
    /// Not built yet.
    Pending,
    Fsm(Fsm),
    Counted(Counted),
}

struct Lowering<'a> {
    g: &'a Grammar,
    vocab: &'a Vocab,
    options: &'a CompileOptions<'a>,
    recursive: Vec<bool>,
    /// Rules built into their caller's automaton even when too big to inline
    /// ([`jump_rules`]).
    jumps: Vec<bool>,
    cost: Vec<u32>,
    /// Every byte some class or literal inside the expression reads.
    width: Vec<ByteSet>,
    inline_rule: Vec<bool>,
    /// How many expressions refer to each rule.
    rule_refs: Vec<u32>,
    alphabet: Alphabet,
    units: Vec<(UnitKey, UnitBody)>,
    unit_ids: FastMap<UnitKey, u32>,
    queue: VecDeque<u32>,
    specials: Vec<(Box<str>, TokenId)>,
    special_ids: HashMap<Box<str>, u32>,
    total_states: usize,
    /// What is left of [`TOTAL_DETERMINIZE_WORK`] and [`TOTAL_BISIMULATION_WORK`].
    determinize_left: usize,
    bisimulate_left: usize,
}

impl<'a> Lowering<'a> {
    fn new(
        g: &'a Grammar,
        vocab: &'a Vocab,
        options: &'a CompileOptions<'a>,
    ) -> Result<Self, CompileError> {
        let (recursive, tail_recursive) = recursive_rules(g, options.deadline)?;
        let jumps = jump_rules(g, &recursive, tail_recursive, options.deadline)?;
        let mut me = Lowering {
            g,
            vocab,
            options,
            recursive,
            jumps,
            cost: vec![0; g.exprs().len()],
            width: vec![ByteSet::EMPTY; g.exprs().len()],
            inline_rule: vec![false; g.rules().len()],
            rule_refs: rule_refs(g),
            alphabet: Alphabet::new(g),
            units: Vec::new(),
            unit_ids: FastMap::default(),
            queue: VecDeque::new(),
            specials: Vec::new(),
            special_ids: HashMap::new(),
            total_states: 0,
            determinize_left: TOTAL_DETERMINIZE_WORK,
            bisimulate_left: TOTAL_BISIMULATION_WORK,
        };
        me.compute_costs()?;
        Ok(me)
    }

    fn tick(&self) -> Result<(), CompileError> {
        self.options.deadline.tick().map_err(compile_time)
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

    /// The unit for `key`, queued for building if new.
    fn unit(&mut self, key: UnitKey) -> u32 {
        if let Some(&u) = self.unit_ids.get(&key) {
            return u;
        }
        let u = self.units.len() as u32;
        self.units.push((key, UnitBody::Pending));
        self.unit_ids.insert(key, u);
        self.queue.push_back(u);
        u
    }

    fn build_unit(&mut self, u: u32) -> Result<(), CompileError> {
        self.options.deadline.check().map_err(compile_time)?;
        let key = self.units[u as usize].0;
        let body = match key {
            UnitKey::Counted { body, min, max } => {
                let body = self.unit(UnitKey::Expr(body));
                UnitBody::Counted(Counted { body, min, max })
            }
            UnitKey::Rule(r) => UnitBody::Fsm(self.build_fsm(self.g.rule(r).body)?),
            UnitKey::Expr(e) => UnitBody::Fsm(self.build_fsm(e)?),
        };
        self.units[u as usize].1 = body;
        Ok(())
    }

    fn build_fsm(&mut self, root: ExprId) -> Result<Fsm, CompileError> {
        let mut nfa = Nfa::default();
        let accept = nfa.state();
        let start = self.fragment(&mut nfa, root, 0, accept)?;
        while let Some((rule, next, entry)) = nfa.pending.pop() {
            self.tick()?;
            let body = self.fragment(&mut nfa, self.g.rule(rule).body, 1, next)?;
            nfa.eps(entry, body);
        }
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
        let options = self.options;
        let subsets = determinize(
            &nfa,
            &labels,
            nc,
            start,
            accept,
            options,
            Construction::Subsets(&mut allowance),
        )?;
        self.determinize_left -= given - allowance;
        let (mut fsm, deterministic) = match subsets {
            Some(d) => (d, true),
            None => {
                let epsilon_free = Construction::EpsilonFree {
                    used: self.total_states,
                };
                let fsm = determinize(&nfa, &labels, nc, start, accept, options, epsilon_free)?
                    .expect("epsilon removal fails only on the grammar size");
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
            false => minimize(fsm, self.options.deadline, &mut self.bisimulate_left)?,
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
        let i = self.specials.len() as u32;
        self.specials.push((name.into(), id));
        self.special_ids.insert(name.into(), i);
        Ok(i)
    }

    /// Thompson construction of `e` inside the current unit, built backwards: reading `e` from
    /// the returned entry state leads to `next`. An expression is built once per continuation
    /// (`Nfa::built`), so a sub-expression that several branches continue with the same way
    /// is one fragment: an object's optional properties continue every "first property
    /// written" branch with the same suffix, which inlined copies made quadratic.
    fn fragment(
        &mut self,
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
        let entry = self.fragment_uncached(nfa, e, depth, next)?;
        nfa.built.insert((e, next), entry);
        Ok(entry)
    }

    // Recursive over the IR's nesting, but at most `MAX_INLINE_DEPTH` deep: a deeper
    // sub-expression becomes a unit of its own, built from depth 0.
    fn fragment_uncached(
        &mut self,
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
        let is_rule = matches!(self.g.expr(e), Expr::Rule(_));
        let wide_loop = matches!(self.g.expr(e), Expr::Repeat { body, max: None, .. }
            if self.width[body.index()].len() >= WIDE_LOOP_BYTES);
        if depth > 0
            && !is_rule
            && (wide_loop || self.cost[e.index()] > SPLIT_EXPR_MAX || depth > MAX_INLINE_DEPTH)
        {
            return Ok(call(self, nfa, UnitKey::Expr(e)));
        }
        let g = self.g;
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
            Expr::Seq(xs) => {
                let mut cur = next;
                for &x in xs.iter().rev() {
                    cur = self.fragment(nfa, x, depth + 1, cur)?;
                }
                cur
            }
            Expr::Alt(xs) => {
                let s = nfa.state();
                for &x in xs.iter() {
                    let a = self.fragment(nfa, x, depth + 1, next)?;
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
                    let key = UnitKey::Counted {
                        body,
                        min,
                        max: max.unwrap_or(UNBOUNDED),
                    };
                    return Ok(call(self, nfa, key));
                }
                // The optional iterations, then the required ones in front of them.
                let mut cur = match max {
                    None => {
                        // hub -> body -> hub, exit at hub.
                        let hub = nfa.state();
                        nfa.eps(hub, next);
                        let a = self.fragment(nfa, body, depth + 1, hub)?;
                        nfa.eps(hub, a);
                        hub
                    }
                    Some(max) => {
                        let mut cur = next;
                        // At most `UNROLL_MAX_COPIES` rounds: the repeat unrolls.
                        for _ in min..max {
                            let a = self.fragment(nfa, body, depth + 1, cur)?;
                            let s = nfa.state();
                            nfa.eps(s, a);
                            nfa.eps(s, next);
                            cur = s;
                        }
                        cur
                    }
                };
                for _ in 0..min {
                    cur = self.fragment(nfa, body, depth + 1, cur)?;
                }
                cur
            }
            &Expr::Rule(r) if self.inline_rule[r.index()] && depth <= MAX_INLINE_DEPTH => {
                self.fragment(nfa, self.g.rule(r).body, depth + 1, next)?
            }
            &Expr::Rule(r) if self.jumps[r.index()] => {
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

    /// Productivity, nullability, trimming and layout.
    fn finish(self, start: u32) -> Result<Program, CompileError> {
        let deadline = self.options.deadline;
        let n = self.units.len();
        let mut fsms: Vec<Option<Fsm>> = Vec::with_capacity(n);
        let mut counted: Vec<Option<Counted>> = Vec::with_capacity(n);
        for (_, body) in self.units {
            match body {
                UnitBody::Fsm(f) => {
                    fsms.push(Some(f));
                    counted.push(None);
                }
                UnitBody::Counted(c) => {
                    fsms.push(None);
                    counted.push(Some(c));
                }
                // `compile` builds every queued unit before it finishes.
                UnitBody::Pending => unreachable!("every queued unit is built"),
            }
        }
        let mut callers: Vec<Vec<u32>> = vec![Vec::new(); n];
        for u in 0..n {
            for v in unit_callees(&fsms[u], &counted[u]) {
                callers[v as usize].push(u as u32);
            }
        }
        // Productive: derives some string. Nullable: derives the empty string.
        let productive = fixpoint(n, &callers, deadline, |u, known| {
            match (&fsms[u], &counted[u]) {
                (Some(f), _) => reaches_final(f, |c| known[c as usize], true),
                (None, Some(c)) => c.min == 0 || known[c.body as usize],
                _ => false,
            }
        })?;
        if !productive[start as usize] {
            return Err(CompileError::unplaced(
                CompileErrorKind::EmptyLanguage,
                "the grammar's start rule derives no string at all",
            ));
        }
        let nullable = fixpoint(n, &callers, deadline, |u, known| {
            match (&fsms[u], &counted[u]) {
                (Some(f), _) => {
                    reaches_final(f, |c| known[c as usize] && productive[c as usize], false)
                }
                (None, Some(c)) => c.min == 0 || known[c.body as usize],
                _ => false,
            }
        })?;
        // Trim every automaton to the states on some path from start to final.
        for f in fsms.iter_mut().flatten() {
            deadline.check().map_err(compile_time)?;
            trim(f, |c| productive[c as usize]);
        }
        // Keep only units reachable from the start unit, in discovery order.
        let mut order: Vec<u32> = vec![start];
        let mut new_id = vec![u32::MAX; n];
        new_id[start as usize] = 0;
        let mut i = 0;
        while i < order.len() {
            let u = order[i] as usize;
            i += 1;
            for v in unit_callees(&fsms[u], &counted[u]) {
                if productive[v as usize] && new_id[v as usize] == u32::MAX {
                    new_id[v as usize] = order.len() as u32;
                    order.push(v);
                }
            }
        }
        let nc = self.alphabet.len();
        let mut prog = Program {
            states: Vec::new(),
            units: Vec::with_capacity(order.len()),
            start_unit: 0,
            alphabet: self.alphabet,
            trans: Vec::new(),
            multi: Vec::new(),
            calls: Vec::new(),
            special_edges: Vec::new(),
            specials: self.specials,
            follow: Vec::new(),
            slices: 0,
        };
        // First pass: state offsets.
        let mut offset = Vec::with_capacity(order.len());
        let mut total = 0u32;
        for &u in &order {
            offset.push(total);
            total += fsms[u as usize]
                .as_ref()
                .map_or(1, |f| f.states.len() as u32);
        }
        if total as usize > self.options.max_states {
            return Err(too_many_states(
                total as usize,
                self.options.max_states,
                "the grammar's automata",
            ));
        }
        // A state costs a table row of one entry per byte class: a grammar of many classes
        // may have fewer states (the row bounds the table at 64 entries per allowed state).
        let table_len = total as usize * nc;
        if table_len > self.options.max_states.saturating_mul(64) {
            return Err(too_many_states(
                table_len.div_ceil(64),
                self.options.max_states,
                "the grammar's transition table (in rows of 64 entries)",
            ));
        }
        prog.trans = vec![DEAD; table_len];
        for (k, &u) in order.iter().enumerate() {
            deadline.tick().map_err(compile_time)?;
            let base = offset[k];
            let uid = k as u32;
            match (&fsms[u as usize], &counted[u as usize]) {
                (Some(f), _) => {
                    for (si, s) in f.states.iter().enumerate() {
                        let gid = base + si as u32;
                        let calls_start = prog.calls.len() as u32;
                        for &(cu, t) in &s.calls {
                            prog.calls.push(Call {
                                unit: new_id[cu as usize],
                                ret: base + t,
                            });
                        }
                        let sp_start = prog.special_edges.len() as u32;
                        prog.special_edges
                            .extend(s.specials.iter().map(|&(sid, t)| (sid, base + t)));
                        let mut flags = 0;
                        if s.final_ {
                            flags |= FINAL;
                        }
                        if !s.calls.is_empty() {
                            flags |= CALLS;
                        }
                        if !s.specials.is_empty() {
                            flags |= SPECIALS;
                        }
                        if !s.bytes.is_empty() {
                            flags |= SCANS;
                        }
                        prog.states.push(State {
                            unit: uid,
                            flags,
                            calls: (calls_start, prog.calls.len() as u32),
                            specials: (sp_start, prog.special_edges.len() as u32),
                        });
                        // Group targets by unit class, then enter them under each grammar
                        // class the unit class stands for.
                        for group in s.bytes.chunk_by(|a, b| a.0 == b.0) {
                            let entry = match group {
                                [(_, t)] => base + t,
                                _ => {
                                    let at = MULTI | prog.multi.len() as u32;
                                    prog.multi.push(group.len() as u32);
                                    prog.multi.extend(group.iter().map(|&(_, t)| base + t));
                                    at
                                }
                            };
                            let row = gid as usize * nc;
                            for class in f.classes[group[0].0 as usize].iter() {
                                prog.trans[row + class as usize] = entry;
                            }
                        }
                    }
                    prog.units.push(Unit {
                        start: base,
                        end: base + f.states.len() as u32,
                        nullable: nullable[u as usize],
                        counted: None,
                    });
                }
                (None, Some(c)) if !productive[c.body as usize] => {
                    // The body derives nothing: zero iterations is all there is (min is 0, or
                    // the unit would be unproductive and unreachable).
                    prog.states.push(State {
                        unit: uid,
                        flags: FINAL,
                        calls: (prog.calls.len() as u32, prog.calls.len() as u32),
                        specials: (
                            prog.special_edges.len() as u32,
                            prog.special_edges.len() as u32,
                        ),
                    });
                    prog.units.push(Unit {
                        start: base,
                        end: base + 1,
                        nullable: true,
                        counted: None,
                    });
                }
                (None, Some(c)) => {
                    let body = new_id[c.body as usize];
                    let body_nullable = nullable[c.body as usize];
                    // Empty iterations change nothing but the count, so a nullable body needs
                    // no minimum: any shortfall is made up by empty iterations.
                    let min = if body_nullable { 0 } else { c.min };
                    let calls_start = prog.calls.len() as u32;
                    prog.calls.push(Call {
                        unit: body,
                        ret: base,
                    });
                    prog.states.push(State {
                        unit: uid,
                        flags: CALLS | COUNTED,
                        calls: (calls_start, calls_start + 1),
                        specials: (
                            prog.special_edges.len() as u32,
                            prog.special_edges.len() as u32,
                        ),
                    });
                    prog.units.push(Unit {
                        start: base,
                        end: base + 1,
                        nullable: nullable[u as usize],
                        counted: Some(Counted {
                            body,
                            min,
                            max: c.max,
                        }),
                    });
                }
                // Every built unit is an automaton or a counted loop.
                _ => unreachable!("a unit is an automaton or a counted loop"),
            }
        }
        Ok(prog)
    }
}

/// How many places refer to each rule (the builder interns `Expr::Rule(r)` once, so these
/// are the references to that expression).
fn rule_refs(g: &Grammar) -> Vec<u32> {
    let mut refs = vec![0u32; g.rules().len()];
    let mut count = |e: &ExprId| {
        if let Expr::Rule(r) = g.expr(*e) {
            refs[r.index()] += 1;
        }
    };
    for x in g.exprs() {
        match x {
            Expr::Seq(xs) | Expr::Alt(xs) => xs.iter().for_each(&mut count),
            Expr::Repeat { body, .. } => count(body),
            _ => {}
        }
    }
    g.rules().iter().for_each(|rule| count(&rule.body));
    refs
}

/// The units a unit calls.
fn unit_callees(fsm: &Option<Fsm>, counted: &Option<Counted>) -> Vec<u32> {
    match (fsm, counted) {
        (Some(f), _) => f
            .states
            .iter()
            .flat_map(|s| s.calls.iter().map(|c| c.0))
            .collect(),
        (None, Some(c)) => vec![c.body],
        _ => vec![],
    }
}

/// Which rules reach themselves through references, and which of those only ever reach
/// their strongly connected component in tail position (right-linear: a loop, no stack).
fn recursive_rules(
    g: &Grammar,
    deadline: &Deadline,
) -> Result<(Vec<bool>, Vec<bool>), CompileError> {
    let n = g.rules().len();
    let refs: Vec<Vec<usize>> = g
        .rule_graph()
        .iter()
        .map(|refs| refs.iter().map(|x| x.index()).collect())
        .collect();
    let sccs = tarjan(n, |u| refs[u].clone());
    let mut recursive = vec![false; n];
    let mut tail_only = vec![false; n];
    let mut scc_of = vec![0usize; n];
    for (i, scc) in sccs.iter().enumerate() {
        scc.iter().for_each(|&u| scc_of[u] = i);
    }
    for (i, scc) in sccs.iter().enumerate() {
        deadline.tick().map_err(compile_time)?;
        let cyclic = scc.len() > 1 || refs[scc[0]].contains(&scc[0]);
        if cyclic {
            let mut tail = true;
            for &u in scc {
                let body = g.rules()[u].body;
                tail &= references_only_in_tail(g, body, |r| scc_of[r.index()] == i, deadline)?;
            }
            for &u in scc {
                recursive[u] = true;
                tail_only[u] = tail;
            }
        }
    }
    Ok((recursive, tail_only))
}

/// The rules built into their caller's automaton, never called: the tail-recursive ones
/// (loops), and rules that are not recursive and referred to only as the last step of rule
/// bodies. Such a rule continues where its referrer would have ended, so building it in place
/// adds no stack, while a call per reference grew the Earley stack by an item at each one: an
/// automaton written as right-linear rules (a pattern within a length, one rule per state)
/// stacked an item per character.
fn jump_rules(
    g: &Grammar,
    recursive: &[bool],
    mut jumps: Vec<bool>,
    deadline: &Deadline,
) -> Result<Vec<bool>, CompileError> {
    let n = g.rules().len();
    let mut referred = vec![false; n];
    let mut inside = vec![false; n];
    let roots = g.rules().iter().map(|r| r.body);
    rule_references(g, roots, deadline, |r, tail| {
        referred[r.index()] = true;
        inside[r.index()] |= !tail;
        true
    })?;
    for r in 0..n {
        jumps[r] |= !recursive[r] && referred[r] && !inside[r];
    }
    Ok(jumps)
}

/// Does `body` refer to the rules `member` selects only as its last step?
fn references_only_in_tail(
    g: &Grammar,
    body: ExprId,
    member: impl Fn(RuleId) -> bool,
    deadline: &Deadline,
) -> Result<bool, CompileError> {
    rule_references(g, [body], deadline, |r, tail| tail || !member(r))
}

/// Visits the rule references under `roots` with whether each is the last step of its root
/// (through sequences' last parts and alternatives; never inside a repeat or before something
/// else), until `visit` returns false; returns false if it did.
fn rule_references(
    g: &Grammar,
    roots: impl IntoIterator<Item = ExprId>,
    deadline: &Deadline,
    mut visit: impl FnMut(RuleId, bool) -> bool,
) -> Result<bool, CompileError> {
    let mut seen = FastSet::default();
    let mut stack: Vec<(ExprId, bool)> = roots.into_iter().map(|e| (e, true)).collect();
    while let Some((e, tail)) = stack.pop() {
        deadline.tick().map_err(compile_time)?;
        if !seen.insert((e, tail)) {
            continue;
        }
        match g.expr(e) {
            Expr::Rule(r) if !visit(*r, tail) => return Ok(false),
            Expr::Seq(xs) => {
                let last = xs.len().saturating_sub(1);
                stack.extend(xs.iter().enumerate().map(|(i, &x)| (x, tail && i == last)));
            }
            Expr::Alt(xs) => stack.extend(xs.iter().map(|&x| (x, tail))),
            Expr::Repeat { body, .. } => stack.push((*body, false)),
            _ => {}
        }
    }
    Ok(true)
}

/// Strongly connected components, in reverse topological order (callees first), iteratively.
pub(crate) fn tarjan(n: usize, succ: impl Fn(usize) -> Vec<usize>) -> Vec<Vec<usize>> {
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut out = Vec::new();
    let mut next = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, successors, position)
        let mut work: Vec<(usize, Vec<usize>, usize)> = vec![(root, succ(root), 0)];
        index[root] = next;
        low[root] = next;
        next += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some((v, succs, pos)) = work.last_mut() {
            if *pos < succs.len() {
                let w = succs[*pos];
                *pos += 1;
                if index[w] == usize::MAX {
                    index[w] = next;
                    low[w] = next;
                    next += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    let s = succ(w);
                    work.push((w, s, 0));
                } else if on_stack[w] {
                    let v = *v;
                    low[v] = low[v].min(index[w]);
                }
            } else {
                let v = *v;
                work.pop();
                if let Some((p, _, _)) = work.last() {
                    low[*p] = low[*p].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut scc = Vec::new();
                    loop {
                        // `v` itself is on the stack, below every node pushed after it.
                        let w = stack.pop().expect("v is on the stack");
                        on_stack[w] = false;
                        scc.push(w);
                        if w == v {
                            break;
                        }
                    }
                    out.push(scc);
                }
            }
        }
    }
    out
}

/// Least fixpoint of a monotone per-unit property, re-checking callers when a unit flips.
fn fixpoint(
    n: usize,
    callers: &[Vec<u32>],
    deadline: &Deadline,
    check: impl Fn(usize, &[bool]) -> bool,
) -> Result<Vec<bool>, CompileError> {
    let mut known = vec![false; n];
    let mut queued = vec![true; n];
    let mut work: VecDeque<usize> = (0..n).collect();
    while let Some(u) = work.pop_front() {
        deadline.tick().map_err(compile_time)?;
        queued[u] = false;
        if known[u] || !check(u, &known) {
            continue;
        }
        known[u] = true;
        for &c in &callers[u] {
            if !known[c as usize] && !queued[c as usize] {
                queued[c as usize] = true;
                work.push_back(c as usize);
            }
        }
    }
    Ok(known)
}

/// Is a final state reachable from the start, through calls `ok` allows (and, if `consume`,
/// through byte and special edges)?
fn reaches_final(f: &Fsm, ok: impl Fn(u32) -> bool, consume: bool) -> bool {
    let mut seen = vec![false; f.states.len()];
    let mut stack = vec![0u32];
    seen[0] = true;
    while let Some(s) = stack.pop() {
        let st = &f.states[s as usize];
        if st.final_ {
            return true;
        }
        let mut push = |t: u32| {
            if !seen[t as usize] {
                seen[t as usize] = true;
                stack.push(t);
            }
        };
        st.calls.iter().filter(|c| ok(c.0)).for_each(|c| push(c.1));
        if consume {
            st.bytes.iter().for_each(|b| push(b.1));
            st.specials.iter().for_each(|b| push(b.1));
        }
    }
    false
}

/// Drops calls to unproductive units and every state not on a start-to-final path; the start
/// stays state 0.
fn trim(f: &mut Fsm, productive: impl Fn(u32) -> bool) {
    let n = f.states.len();
    fn targets<'a>(
        s: &'a FState,
        productive: &'a impl Fn(u32) -> bool,
    ) -> impl Iterator<Item = u32> + 'a {
        let calls = s.calls.iter().filter(|c| productive(c.0));
        s.bytes
            .iter()
            .map(|b| b.1)
            .chain(s.specials.iter().map(|b| b.1))
            .chain(calls.map(|c| c.1))
    }
    // Forward from the start. Edges reversed into one array grouped by target (a counting
    // sort: `into[t]..into[t + 1]` are the sources of `t`'s incoming edges).
    let mut fwd = vec![false; n];
    let mut stack = vec![0u32];
    fwd[0] = true;
    let mut into = vec![0u32; n + 1];
    while let Some(s) = stack.pop() {
        for t in targets(&f.states[s as usize], &productive) {
            into[t as usize + 1] += 1;
            if !fwd[t as usize] {
                fwd[t as usize] = true;
                stack.push(t);
            }
        }
    }
    for i in 0..n {
        into[i + 1] += into[i];
    }
    let mut sources = vec![0u32; into[n] as usize];
    let mut fill = into.clone();
    for s in (0..n as u32).filter(|&s| fwd[s as usize]) {
        for t in targets(&f.states[s as usize], &productive) {
            sources[fill[t as usize] as usize] = s;
            fill[t as usize] += 1;
        }
    }
    let mut bwd = vec![false; n];
    let mut stack: Vec<u32> = (0..n as u32)
        .filter(|&s| fwd[s as usize] && f.states[s as usize].final_)
        .collect();
    stack.iter().for_each(|&s| bwd[s as usize] = true);
    while let Some(s) = stack.pop() {
        for &p in &sources[into[s as usize] as usize..into[s as usize + 1] as usize] {
            if !bwd[p as usize] {
                bwd[p as usize] = true;
                stack.push(p);
            }
        }
    }
    let keep = |s: u32| fwd[s as usize] && bwd[s as usize];
    if !keep(0) {
        f.states = vec![FState::default()];
        return;
    }
    // The usual case: nothing to drop, and no copy.
    let unproductive_call = |s: &FState| s.calls.iter().any(|c| !productive(c.0));
    if (0..n as u32).all(keep) && !f.states.iter().any(unproductive_call) {
        return;
    }
    let mut map = vec![u32::MAX; n];
    let mut order = Vec::new();
    for s in 0..n as u32 {
        if keep(s) {
            map[s as usize] = order.len() as u32;
            order.push(s);
        }
    }
    let states = order
        .iter()
        .map(|&s| {
            let st = &f.states[s as usize];
            FState {
                final_: st.final_,
                bytes: retarget(&st.bytes, |_, t| keep(t), &map),
                specials: retarget(&st.specials, |_, t| keep(t), &map),
                calls: retarget(&st.calls, |c, t| productive(c) && keep(t), &map),
            }
        })
        .collect();
    f.states = states;
}

/// The `(label, target)` edges that `keep` keeps, targets renumbered by `map`.
fn retarget<C: Copy>(
    edges: &[(C, u32)],
    keep: impl Fn(C, u32) -> bool,
    map: &[u32],
) -> Vec<(C, u32)> {
    edges
        .iter()
        .filter(|&&(c, t)| keep(c, t))
        .map(|&(c, t)| (c, map[t as usize]))
        .collect()
}

/// Merges equivalent states: equivalent states of a unit become one, so they share one cached
/// mask classification and one structural hash.
///
/// A deterministic automaton (with `CfgConfig::minimize`; the epsilon-removal fallback may
/// happen to be one) is refined with Hopcroft's algorithm, `O(m log n)`: the subset construction of a keyword trie with
/// JSON escapes yields chains hundreds of states deep, on which signature refinement needs
/// one full pass per level. The nondeterministic fallback is refined to bisimilarity by
/// signatures (sound there too: bisimilar states accept the same language).
///
/// Bisimulation needs a pass per level of the automaton's longest distinguishing chain, so it
/// gets a budget of passes over its edges (`work`, what is left of the grammar's; each unit
/// at most [`BISIMULATION_WORK`]); past it the automaton is kept as it is (correct, with larger
/// Earley rows). A 10 MB grammar's fallback unit took 50 s and 2 GB without one.
fn minimize(f: Fsm, deadline: &Deadline, work: &mut usize) -> Result<Fsm, CompileError> {
    let partition = match edge_labels(&f) {
        Some(labels) => Some(hopcroft(&f, &labels, deadline)?),
        None => {
            let mut allowance = BISIMULATION_WORK.min(*work);
            let blocks = bisimulation(&f, &mut allowance, deadline)?;
            *work -= BISIMULATION_WORK.min(*work) - allowance;
            blocks
        }
    };
    match partition {
        Some((block, blocks)) if blocks < f.states.len() => quotient(&f, &block, blocks, deadline),
        _ => Ok(f),
    }
}

/// Edges [`bisimulation`] may visit in all its passes (each pass visits every edge), per unit
/// and per grammar.
const BISIMULATION_WORK: usize = 1 << 24;
const TOTAL_BISIMULATION_WORK: usize = 1 << 25;

/// Every edge of `f` as `(label, source, target)`, labels dense (byte classes, then specials,
/// then calls); `None` if some state has two edges with one label.
fn edge_labels(f: &Fsm) -> Option<Vec<(u32, u32, u32)>> {
    let specials = f
        .states
        .iter()
        .flat_map(|s| &s.specials)
        .map(|e| e.0 + 1)
        .max();
    let special_base = 256;
    let call_base = special_base + specials.unwrap_or(0);
    let mut edges = Vec::new();
    for (i, s) in f.states.iter().enumerate() {
        let first = edges.len();
        let i = i as u32;
        edges.extend(s.bytes.iter().map(|&(c, t)| (c as u32, i, t)));
        edges.extend(s.specials.iter().map(|&(x, t)| (special_base + x, i, t)));
        edges.extend(s.calls.iter().map(|&(u, t)| (call_base + u, i, t)));
        let mine = &mut edges[first..];
        mine.sort_unstable();
        if mine.windows(2).any(|w| w[0].0 == w[1].0) {
            return None;
        }
    }
    Some(edges)
}

/// Hopcroft's partition refinement of a deterministic (possibly partial) automaton: the block
/// of each state and the number of blocks. Partial transition functions need every initial
/// block as a splitter; after that, splitting by the smaller half suffices as usual, because
/// `pre(B2) = pre(B) \ pre(B1)` holds whenever each state has at most one edge per label.
fn hopcroft(
    f: &Fsm,
    edges: &[(u32, u32, u32)],
    deadline: &Deadline,
) -> Result<(Vec<u32>, usize), CompileError> {
    let n = f.states.len();
    // Incoming edges of each state, `(label, source)`, as one flat array.
    let mut in_start = vec![0u32; n + 1];
    edges.iter().for_each(|e| in_start[e.2 as usize + 1] += 1);
    for i in 0..n {
        in_start[i + 1] += in_start[i];
    }
    let mut fill = in_start.clone();
    let mut incoming = vec![(0u32, 0u32); edges.len()];
    for &(label, from, to) in edges {
        incoming[fill[to as usize] as usize] = (label, from);
        fill[to as usize] += 1;
    }
    let mut p = Partition::new(f.states.iter().map(|s| s.final_));
    let mut pending: Vec<u32> = (0..p.blocks.len() as u32).collect();
    let mut in_pending = vec![true; p.blocks.len()];
    // `label << 32 | source`: one integer sort groups the pre-image by label.
    let mut preimage: Vec<u64> = Vec::new();
    let mut splits: Vec<(u32, u32)> = Vec::new();
    while let Some(b) = pending.pop() {
        deadline.tick().map_err(compile_time)?;
        in_pending[b as usize] = false;
        preimage.clear();
        let (lo, hi) = p.blocks[b as usize];
        for &s in &p.elems[lo as usize..hi as usize] {
            let (a, z) = (in_start[s as usize], in_start[s as usize + 1]);
            preimage.extend(
                incoming[a as usize..z as usize]
                    .iter()
                    .map(|&(label, from)| (label as u64) << 32 | from as u64),
            );
        }
        preimage.sort_unstable();
        for group in preimage.chunk_by(|x, y| x >> 32 == y >> 32) {
            p.split(group.iter().map(|&e| e as u32), &mut splits);
            for &(old, new) in &splits {
                in_pending.push(false);
                let smaller = match in_pending[old as usize] {
                    true => new,
                    false if p.size(new) <= p.size(old) => new,
                    false => old,
                };
                in_pending[smaller as usize] = true;
                pending.push(smaller);
            }
        }
    }
    let blocks = p.blocks.len();
    Ok((p.block_of, blocks))
}

/// A partition of `0..n` into blocks, each a contiguous run of `elems`, that can be refined
/// by a set of members in time proportional to the set.
struct Partition {
    elems: Vec<u32>,
    pos: Vec<u32>,
    block_of: Vec<u32>,
    blocks: Vec<(u32, u32)>,
    /// Members of each block moved to its front by the current split.
    marked: Vec<u32>,
    touched: Vec<u32>,
}

impl Partition {
    /// Two blocks (or one): members where `key` is false, then where it is true.
    fn new(key: impl Iterator<Item = bool>) -> Partition {
        let key: Vec<bool> = key.collect();
        let mut elems: Vec<u32> = (0..key.len() as u32).collect();
        elems.sort_by_key(|&s| key[s as usize]);
        let cut = key.iter().filter(|&&k| !k).count() as u32;
        let mut blocks = vec![(0, cut), (cut, key.len() as u32)];
        blocks.retain(|b| b.0 < b.1);
        let mut pos = vec![0u32; key.len()];
        let mut block_of = vec![0u32; key.len()];
        for (i, &s) in elems.iter().enumerate() {
            pos[s as usize] = i as u32;
            block_of[s as usize] = (blocks.len() == 2 && i as u32 >= cut) as u32;
        }
        Partition {
            marked: vec![0; blocks.len()],
            elems,
            pos,
            block_of,
            blocks,
            touched: Vec::new(),
        }
    }

    fn size(&self, b: u32) -> u32 {
        let (lo, hi) = self.blocks[b as usize];
        hi - lo
    }

    /// Separates `members` from the rest of each block they touch; `splits` receives the
    /// `(old, new)` block pairs that split, `new` holding the members.
    fn split(&mut self, members: impl Iterator<Item = u32>, splits: &mut Vec<(u32, u32)>) {
        splits.clear();
        for s in members {
            let b = self.block_of[s as usize] as usize;
            let front = self.blocks[b].0 + self.marked[b];
            let at = self.pos[s as usize];
            if at < front {
                continue; // marked already (an automaton edge repeated in the pre-image)
            }
            let other = self.elems[front as usize];
            self.elems.swap(at as usize, front as usize);
            self.pos[other as usize] = at;
            self.pos[s as usize] = front;
            if self.marked[b] == 0 {
                self.touched.push(b as u32);
            }
            self.marked[b] += 1;
        }
        for i in 0..self.touched.len() {
            let b = self.touched[i];
            let (lo, hi) = self.blocks[b as usize];
            let cut = lo + std::mem::replace(&mut self.marked[b as usize], 0);
            if cut == hi {
                continue;
            }
            let new = self.blocks.len() as u32;
            self.blocks.push((lo, cut));
            self.marked.push(0);
            self.blocks[b as usize].0 = cut;
            for &s in &self.elems[lo as usize..cut as usize] {
                self.block_of[s as usize] = new;
            }
            splits.push((b, new));
        }
        self.touched.clear();
    }
}

/// Coarsest bisimulation of a nondeterministic automaton by signature refinement: the block of
/// each state and the number of blocks; `None` if the passes would visit more than `work`
/// edges (a partition coarser than the bisimulation would merge states that differ, so
/// there is no stopping half way).
fn bisimulation(
    f: &Fsm,
    work: &mut usize,
    deadline: &Deadline,
) -> Result<Option<(Vec<u32>, usize)>, CompileError> {
    let n = f.states.len();
    let edges = f.size();
    let mut block: Vec<u32> = f.states.iter().map(|s| s.final_ as u32).collect();
    let mut blocks = 0;
    let mut ids = SliceInterner::default();
    let mut sig: Vec<u32> = Vec::new();
    let mut triples: Vec<(u32, u32, u32)> = Vec::new();
    loop {
        *work = match work.checked_sub(edges) {
            Some(left) => left,
            None => {
                // Giving up wasted what was given.
                *work = 0;
                return Ok(None);
            }
        };
        ids.clear();
        let mut next = vec![0u32; n];
        for (i, s) in f.states.iter().enumerate() {
            deadline.tick().map_err(compile_time)?;
            // (kind, label, target block): bytes 0, specials 1, calls 2.
            triples.clear();
            triples.extend(
                s.bytes
                    .iter()
                    .map(|&(c, t)| (0, c as u32, block[t as usize])),
            );
            triples.extend(s.specials.iter().map(|&(x, t)| (1, x, block[t as usize])));
            triples.extend(s.calls.iter().map(|&(u, t)| (2, u, block[t as usize])));
            triples.sort_unstable();
            triples.dedup();
            sig.clear();
            sig.push(block[i]);
            sig.extend(triples.iter().flat_map(|&(a, b, c)| [a, b, c]));
            next[i] = ids.intern(&sig).0;
        }
        block = next;
        if ids.len() == blocks {
            return Ok(Some((block, blocks)));
        }
        blocks = ids.len();
    }
}

/// The automaton of the blocks; the start's block is state 0, the others in order of first
/// appearance.
fn quotient(
    f: &Fsm,
    block: &[u32],
    blocks: usize,
    deadline: &Deadline,
) -> Result<Fsm, CompileError> {
    let mut order = vec![u32::MAX; blocks];
    let mut count = 0;
    order[block[0] as usize] = 0;
    count += 1;
    for &b in block {
        if order[b as usize] == u32::MAX {
            order[b as usize] = count;
            count += 1;
        }
    }
    let mut states = vec![FState::default(); blocks];
    let mut done = vec![false; blocks];
    for (i, s) in f.states.iter().enumerate() {
        deadline.tick().map_err(compile_time)?;
        let b = order[block[i] as usize] as usize;
        if std::mem::replace(&mut done[b], true) {
            continue;
        }
        let map = |t: u32| order[block[t as usize] as usize];
        let mut bytes: Vec<(u8, u32)> = s.bytes.iter().map(|&(c, t)| (c, map(t))).collect();
        bytes.sort_unstable();
        bytes.dedup();
        let mut specials: Vec<(u32, u32)> = s.specials.iter().map(|&(x, t)| (x, map(t))).collect();
        specials.sort_unstable();
        specials.dedup();
        let mut calls: Vec<(u32, u32)> = s.calls.iter().map(|&(x, t)| (x, map(t))).collect();
        calls.sort_unstable();
        calls.dedup();
        states[b] = FState {
            final_: s.final_,
            bytes,
            specials,
            calls,
        };
    }
    Ok(Fsm {
        states,
        classes: f.classes.clone(),
    })
}

/// NFA states the subset construction of one unit may visit (summed over the subsets it
/// expands and the ones it closes) before it gives up like past its state budget, and the
/// units of one grammar together. A unit whose subsets are large (nested optional repeats:
/// every subset holds a state per level) could otherwise spend seconds before reaching that
/// budget, and such a grammar has hundreds of them. On MaskBench one unit visits at most
/// 785k, and the largest schema (eslintrc, 1.2M states) 67M in all.
const DETERMINIZE_WORK: usize = 1 << 22;
const TOTAL_DETERMINIZE_WORK: usize = 1 << 26;

/// How [`determinize`] builds a unit's automaton.
enum Construction<'w> {
    /// The subset construction, within the NFA states its subsets may visit (summed over
    /// them, what is left is written back) and the DFA state budget; `None` past either.
    Subsets(&'w mut usize),
    /// Plain epsilon removal: one state per NFA state, several targets per class allowed.
    /// A state takes the edges of its whole closure, so nested optional parts give it
    /// quadratically many; its states and edges count toward the grammar size, of which the
    /// program has `used` already (a `GrammarSize` error past it).
    EpsilonFree { used: usize },
}

/// The automaton of a unit's NFA, built as `construction` says.
fn determinize(
    nfa: &Nfa,
    labels: &[ByteSet],
    nc: usize,
    start: u32,
    accept: u32,
    options: &CompileOptions,
    construction: Construction,
) -> Result<Option<Fsm>, CompileError> {
    let deadline = options.deadline;
    let (mut work, mut size) = match construction {
        Construction::Subsets(work) => (Some(work), 0),
        Construction::EpsilonFree { used } => (None, used),
    };
    let dfa = work.is_some();
    let n = nfa.len();
    let mut mark = vec![u32::MAX; n];
    let mut gen = 0u32;
    let closure = |set: &mut Vec<u32>, gen: u32, mark: &mut Vec<u32>| {
        let mut i = 0;
        set.iter().for_each(|&s| mark[s as usize] = gen);
        while i < set.len() {
            let s = set[i];
            i += 1;
            for &t in &nfa.eps[s as usize] {
                if mark[t as usize] != gen {
                    mark[t as usize] = gen;
                    set.push(t);
                }
            }
        }
        set.sort_unstable();
    };
    // DFA states are sets of NFA states (closed under epsilon); with `dfa = false`, single
    // NFA states, closed when they are expanded.
    let mut sets = SliceInterner::default();
    let mut members: Vec<u32> = vec![start];
    if dfa {
        closure(&mut members, gen, &mut mark);
        gen += 1;
    }
    sets.intern(&members);
    let mut fsm = Fsm::default();
    let mut by_class: Vec<Vec<u32>> = vec![Vec::new(); nc];
    // `(special or unit, target)` of the members' special and call edges.
    let mut specials: Vec<(u32, u32)> = Vec::new();
    let mut calls: Vec<(u32, u32)> = Vec::new();
    let mut scratch: Vec<u32> = Vec::new();
    let mut ids_out: SmallVec<[u32; 4]> = SmallVec::new();
    // The state's edges, built here and copied out at their exact size (growing three vectors
    // per state was a third of the subset construction's time, in the allocator).
    let mut bytes_out: Vec<(u8, u32)> = Vec::new();
    let mut labelled_out: Vec<(u32, u32)> = Vec::new();
    let mut i = 0;
    while i < sets.len() {
        deadline.tick().map_err(compile_time)?;
        if dfa && sets.len() > options.max_dfa_states {
            return Ok(None);
        }
        members.clear();
        members.extend_from_slice(sets.get(i as u32));
        if let Some(left) = work.as_deref_mut() {
            match left.checked_sub(members.len()) {
                Some(l) => *left = l,
                None => return Ok(None),
            }
        }
        if !dfa {
            closure(&mut members, gen, &mut mark);
            gen += 1;
        }
        i += 1;
        by_class.iter_mut().for_each(|v| v.clear());
        specials.clear();
        calls.clear();
        for &s in &members {
            for &(label, t) in &nfa.edges[s as usize] {
                match label {
                    Label::Classes(k) => labels[k as usize]
                        .iter()
                        .for_each(|c| by_class[c as usize].push(t)),
                    Label::Special(sid) => specials.push((sid, t)),
                    Label::Call(u) => calls.push((u, t)),
                }
            }
        }
        // The states reached from `targets`: one closed subset (dfa), or the targets
        // themselves (epsilon removal). `false` once the subsets' work is spent: closing the
        // targets of every class is where large subsets cost.
        let mut intern = |targets: &mut dyn Iterator<Item = u32>, out: &mut SmallVec<[u32; 4]>| {
            out.clear();
            scratch.clear();
            scratch.extend(targets);
            if let Some(left) = work.as_deref_mut() {
                closure(&mut scratch, gen, &mut mark);
                gen += 1;
                match left.checked_sub(scratch.len()) {
                    Some(l) => *left = l,
                    None => return false,
                }
                scratch.dedup();
                out.push(sets.intern(&scratch).0);
            } else {
                scratch.sort_unstable();
                scratch.dedup();
                out.extend(scratch.iter().map(|&t| sets.intern(&[t]).0));
            }
            true
        };
        // Consecutive classes often share their targets.
        bytes_out.clear();
        let mut prev: Option<usize> = None;
        for c in 0..nc {
            if by_class[c].is_empty() {
                continue;
            }
            if prev.is_none_or(|p| by_class[p] != by_class[c]) {
                if !intern(&mut by_class[c].iter().copied(), &mut ids_out) {
                    return Ok(None);
                }
                prev = Some(c);
            }
            bytes_out.extend(ids_out.iter().map(|&id| (c as u8, id)));
        }
        let mut grouped = |edges: &mut Vec<(u32, u32)>, out: &mut Vec<(u32, u32)>| {
            edges.sort_unstable();
            out.clear();
            for group in edges.chunk_by(|a, b| a.0 == b.0) {
                if !intern(&mut group.iter().map(|e| e.1), &mut ids_out) {
                    return None;
                }
                out.extend(ids_out.iter().map(|&id| (group[0].0, id)));
            }
            Some(out.as_slice().into())
        };
        let (Some(specials), Some(calls)) = (
            grouped(&mut specials, &mut labelled_out),
            grouped(&mut calls, &mut labelled_out),
        ) else {
            return Ok(None);
        };
        let st = FState {
            final_: members.binary_search(&accept).is_ok(),
            bytes: bytes_out.as_slice().into(),
            specials,
            calls,
        };
        if !dfa {
            size += st.size();
            if size > options.max_states {
                return Err(too_many_states(
                    size,
                    options.max_states,
                    "a nondeterministic unit of the grammar",
                ));
            }
        }
        fsm.states.push(st);
    }
    Ok(Some(fsm))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn next(seed: &mut u64, n: u32) -> u32 {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        (*seed % n as u64) as u32
    }

    /// Edges on some of `labels` labels, to random states of `n`.
    fn edges(seed: &mut u64, labels: u32, n: u32) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        for label in 0..labels {
            if next(seed, 3) > 0 {
                out.push((label, next(seed, n)));
            }
        }
        out
    }

    #[test]
    fn refine_groups_bytes_by_the_sets_they_are_in() {
        let mut seed = 0x2545_f491_4f6c_dd1d;
        for round in 0..200 {
            // Ranges, single bytes and near-complements, as schemas have.
            let sets: Vec<ByteSet> = (0..1 + next(&mut seed, 40))
                .map(|_| {
                    let lo = next(&mut seed, 256) as u8;
                    let hi = lo.saturating_add(next(&mut seed, 64) as u8);
                    match next(&mut seed, 3) {
                        0 => ByteSet::range(lo, hi),
                        1 => ByteSet::byte(lo),
                        _ => ByteSet::range(lo, hi).complement(),
                    }
                })
                .collect();
            let universe = match round % 2 {
                0 => ByteSet::FULL,
                _ => sets.iter().fold(ByteSet::EMPTY, |a, s| a.union(s)),
            };
            let parts = refine(universe, sets.iter());
            let membership = |b: u8| sets.iter().map(|s| s.contains(b)).collect::<Vec<_>>();
            assert_eq!(
                parts.iter().fold(ByteSet::EMPTY, |a, p| a.union(p)),
                universe
            );
            for (i, p) in parts.iter().enumerate() {
                let first = p.iter().next().expect("parts are not empty");
                assert!(p.iter().all(|b| membership(b) == membership(first)));
                for q in &parts[i + 1..] {
                    let other = q.iter().next().unwrap();
                    assert!(first < other, "parts in order of their least byte");
                    assert_ne!(membership(first), membership(other));
                }
            }
        }
    }

    /// A random partial deterministic automaton over 4 byte classes, 2 specials and 2 calls.
    fn random_dfa(seed: &mut u64) -> Fsm {
        let n = 1 + next(seed, 40);
        let mut states = Vec::new();
        for _ in 0..n {
            let bytes = edges(seed, 4, n);
            states.push(FState {
                final_: next(seed, 4) == 0,
                bytes: bytes.into_iter().map(|(c, t)| (c as u8, t)).collect(),
                specials: edges(seed, 2, n),
                calls: edges(seed, 2, n),
            });
        }
        Fsm {
            states,
            classes: (0..4).map(ByteSet::byte).collect(),
        }
    }

    #[test]
    fn hopcroft_finds_the_partition_of_signature_refinement() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..500 {
            let f = random_dfa(&mut seed);
            let labels = edge_labels(&f).expect("deterministic by construction");
            let never = Deadline::never();
            let (fast, fast_blocks) = hopcroft(&f, &labels, &never).unwrap();
            let (slow, slow_blocks) = bisimulation(&f, &mut { usize::MAX }, &never)
                .unwrap()
                .unwrap();
            assert_eq!(fast_blocks, slow_blocks);
            for i in 0..f.states.len() {
                for j in 0..f.states.len() {
                    assert_eq!(fast[i] == fast[j], slow[i] == slow[j], "states {i}, {j}");
                }
            }
        }
    }

    #[test]
    fn recursion_only_in_tail_position_is_a_loop() {
        let g = crate::front::gbnf::gbnf_to_ir(
            r#"
root  ::= text
text  ::= [^<] text | "<call>" item "</call>" after | ""
after ::= "\n" text | ""
item  ::= [a-z]+ | "[" item ("," item)* "]"
"#,
            "g",
        )
        .unwrap();
        let (recursive, tail) = recursive_rules(&g, &Deadline::never()).unwrap();
        let flags = |name: &str| {
            let r = g.rules().iter().position(|r| r.name == name).unwrap();
            (recursive[r], tail[r])
        };
        assert_eq!(flags("root"), (false, false));
        assert_eq!(flags("text"), (true, true));
        assert_eq!(flags("after"), (true, true));
        assert_eq!(flags("item"), (true, false));
    }

    /// A chain of rules each referred to as the last step of the one before (an automaton
    /// written as rules), too long to inline: built in place, with no call, where calls
    /// stacked an Earley item per rule.
    #[test]
    fn rules_referred_to_only_last_are_built_in_place() {
        let mut text = String::from("root ::= \"<\" s0 \">\" | \"!\" s0 \"?\"\n");
        for i in 0..300 {
            text.push_str(&format!("s{i} ::= [a-z] s{} | \"\"\n", i + 1));
        }
        text.push_str("s300 ::= \"\"\n");
        let g = crate::front::gbnf::gbnf_to_ir(&text, "g").unwrap();
        let (recursive, tail) = recursive_rules(&g, &Deadline::never()).unwrap();
        let jumps = jump_rules(&g, &recursive, tail, &Deadline::never()).unwrap();
        let rule = |name: &str| g.rules().iter().position(|r| r.name == name).unwrap();
        assert!(!jumps[rule("root")] && !jumps[rule("s0")]);
        assert!((1..=300).all(|i| jumps[rule(&format!("s{i}"))]));
        let prog = compile_for_test(&g);
        // `s0` is referred to twice in the middle of `root`: one unit, called; the chain
        // below it is that unit's automaton.
        assert_eq!(prog.units.len(), 2);
        let s0 = &prog.units[1];
        assert!((s0.start..s0.end).all(|s| prog.state(s).flags & CALLS == 0));
    }

    fn compile_for_test(g: &Grammar) -> Program {
        let vocab = Vocab::from_token_bytes(Vec::new(), &[], &[]).unwrap();
        let never = Deadline::never();
        let options = CompileOptions {
            max_states: 1 << 20,
            max_dfa_states: 1 << 16,
            deadline: &never,
            minimize: false,
        };
        compile(g, &vocab, &options).unwrap()
    }

    /// The ASCII slices are tried where some state takes every byte they start with and not
    /// every byte of the broader slice (itself or through what it calls): a URI's characters,
    /// names limited to alphanumerics and `_`; not JSON keys, numbers or plain strings.
    #[test]
    fn ascii_slices_are_tried_where_a_state_could_take_them() {
        let slices = |gbnf: &str| {
            compile_for_test(&crate::front::gbnf::gbnf_to_ir(gbnf, "g").unwrap()).slices
        };
        // Bits follow `vocab::slice::PATTERNS`: 2 is JSON text without line terminators.
        let (unreserved, alphanumeric) = (1 << 3, 1 << 4);
        assert_eq!(slices(r#"root ::= "\"" [^"\\]* "\"""#), 0b11);
        assert_eq!(
            slices(r#"root ::= "\"" [A-Za-z0-9._~-]+ "\"""#) & unreserved,
            unreserved
        );
        assert_eq!(slices(r#"root ::= [A-Za-z0-9_]+"#), 0b11 | alphanumeric);
        let schema = serde_json::json!({"type": "object", "properties": {
            "count": {"type": "integer"}, "name": {"type": "string"}}});
        let json = crate::front::json_schema::compile_schema(
            &schema,
            &crate::front::json_schema::JsonSchemaOptions::new(),
        )
        .unwrap()
        .grammar;
        assert_eq!(compile_for_test(&json).slices, 0b11);
    }

    /// A nondeterministic chain a thousand states long needs a pass per state: past its
    /// budget of edge visits bisimulation gives up (a coarser partition would merge states
    /// that differ), and minimization keeps the automaton as it is.
    #[test]
    fn bisimulation_gives_up_past_its_budget() {
        let n = 1_000;
        let mut f = Fsm {
            states: vec![FState::default(); n + 1],
            classes: vec![ByteSet::byte(0)],
        };
        for i in 0..n {
            f.states[i].bytes = vec![(0, i as u32 + 1)];
        }
        f.states[0].bytes.push((0, 0));
        f.states[n].final_ = true;
        let never = Deadline::never();
        assert!(edge_labels(&f).is_none());
        assert!(bisimulation(&f, &mut (100 * n), &never).unwrap().is_none());
        let (_, blocks) = bisimulation(&f, &mut { usize::MAX }, &never)
            .unwrap()
            .unwrap();
        assert_eq!(blocks, n + 1);
        let mut work = 100 * n;
        assert_eq!(
            minimize(f.clone(), &never, &mut work).unwrap().states.len(),
            n + 1
        );
        assert_eq!(work, 0, "the work given is spent");
    }

    #[test]
    fn two_edges_with_one_label_are_refined_by_signatures() {
        let mut f = Fsm {
            states: vec![FState::default(); 3],
            classes: vec![ByteSet::byte(0)],
        };
        f.states[0].bytes = vec![(0, 1), (0, 2)];
        f.states[1].final_ = true;
        f.states[2].final_ = true;
        assert!(edge_labels(&f).is_none());
        // The two targets are bisimilar: one state of three goes.
        let never = Deadline::never();
        assert_eq!(
            minimize(f, &never, &mut { usize::MAX })
                .unwrap()
                .states
                .len(),
            2
        );
    }
}
