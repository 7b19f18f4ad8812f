//! The CFG fallback: a byte-level Earley engine over the grammar IR, with an adaptive
//! token-mask cache.
//!
//! Anything the operator backend cannot express (recursive JSON schemas, arbitrary grammars)
//! runs here. A [`CfgCompiler`] holds a vocabulary and the cross-grammar mask cache; it
//! compiles IR grammars into [`CfgGrammar`]s (shared, `Send + Sync`), and each sequence gets a
//! [`CfgMatcher`] implementing [`Matcher`].
//!
//! How a mask is computed (see `cache/`): each item of the last Earley row that reads bytes
//! itself is classified once per structure: tokens its own rule accepts whatever the context
//! (*accepted*), tokens it can never take (*rejected*), and tokens that finish the rule
//! mid-token (*uncertain*). That first level is keyed by a structural hash of the rule, so equal
//! sub-structures of different grammars (a JSON string, a number) share it. A second level
//! refines the uncertain tokens with the item's callers in the chart (context expansion), and
//! only what is still uncertain is checked against the full parser at run time. Everything is
//! computed on first use and kept in one byte-budgeted cache.
//!
//! # Example
//!
//! ```
//! use formwork::cfg::{CfgCompiler, CfgConfig};
//! use formwork::front::gbnf::gbnf_to_ir;
//! use formwork::vocab::Vocab;
//! use formwork::Matcher;
//!
//! let vocab = Vocab::embedded_qwen3().unwrap();
//! let compiler = CfgCompiler::new(&vocab, CfgConfig::new());
//! let ir = gbnf_to_ir(r#"root ::= "(" root ")" | "x""#, "<example>").unwrap();
//! let grammar = compiler.compile(&ir).unwrap();
//! let mut m = grammar.matcher();
//! let mut mask = vec![0u32; vocab.mask_words()];
//! for t in vocab.encode("((x").unwrap() {
//!     m.fill_mask(&mut mask).unwrap();
//!     assert!(formwork::bitmask::get_bit(&mask, t));
//!     m.consume(t).unwrap();
//! }
//! assert_eq!(m.forced_bytes(), b"))");
//! assert!(m.consume(vocab.encode("x").unwrap()[0]).is_err()); // state unchanged
//! assert_eq!(m.num_consumed(), vocab.encode("((x").unwrap().len());
//! ```

mod cache;
mod chart;
mod hash;
mod lower;
mod program;
#[cfg(test)]
mod testing;
mod walk;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};

use crate::base::bitmask::get_bit;
use crate::base::byteset::ByteSet;
use crate::base::token::TokenId;
use crate::error::{CompileError, Location};
use crate::ir::Grammar;
use crate::limits::{Budget, Deadline, LimitExceeded, LimitKind, Limits};
use crate::mask::{CacheStats, MaskCache};
use crate::matcher::{rollback_to, MatchError, Matcher, Progress};
use crate::vocab::{TokenKind, Vocab};

use cache::CacheEntry;
use chart::{Chart, Halt};
use lower::{CompileOptions, Lowering};
use program::{Alphabet, Program, SPECIALS};

/// Tuning options of the CFG engine: cache budget, how far masks look at the context, how
/// much is determinized and minimized. The ceilings that turn pathological grammars into
/// typed errors (states, compile time, items per row, work per mask) are [`Limits`].
///
/// # Example
///
/// ```
/// use formwork::cfg::CfgConfig;
///
/// let config = CfgConfig::new().cache_bytes(64 << 20).context_depth(2);
/// assert_eq!(config.get_cache_bytes(), 64 << 20);
/// ```
#[derive(Clone, Debug)]
pub struct CfgConfig {
    cache_bytes: usize,
    max_dfa_states: usize,
    context_depth: usize,
    mask_cache: bool,
    minimize: bool,
    max_forced_bytes: usize,
    eager_states: usize,
    large_unit_states: usize,
    batch_states: usize,
}

impl Default for CfgConfig {
    fn default() -> Self {
        CfgConfig {
            cache_bytes: 256 << 20,
            max_dfa_states: 50_000,
            context_depth: 3,
            mask_cache: true,
            minimize: false,
            max_forced_bytes: 4096,
            eager_states: DEFAULT_EAGER_STATES,
            large_unit_states: DEFAULT_LARGE_UNIT_STATES,
            batch_states: DEFAULT_BATCH_STATES,
        }
    }
}

/// Default of [`CfgConfig::eager_states`]: nothing ahead of the first mask but the large
/// rules. On MaskBench (the peers bench, thread CPU), building 4,096 states ahead made the
/// time to first mask 1.56× llguidance's at p90; nothing but the large rules, 1.16×, and
/// still no mask over 5 ms: what is left to the parse is small rules, built a batch at a time.
pub const DEFAULT_EAGER_STATES: usize = 0;

/// Default of [`CfgConfig::large_unit_states`]: on MaskBench every unit below it builds in
/// under 2 ms, and most above it take 2–18 ms.
pub const DEFAULT_LARGE_UNIT_STATES: usize = 2_048;

/// Default of [`CfgConfig::batch_states`]: the first mask builds what it enters and a batch
/// beyond it, so the batch is paid in the time to first mask. On MaskBench (the peers bench,
/// thread CPU), 1,024 made that time 1.16× llguidance's at p90 and 64 1.01×, with no more
/// masks over 1 ms (full `formwork maskbench` runs from 0 to 1,024 agree within their noise).
pub const DEFAULT_BATCH_STATES: usize = 64;

impl CfgConfig {
    /// Defaults: 256 MiB of mask cache, units determinized up to 50k states, context depth 3,
    /// forced stretches of up to 4,096 bytes; compiling builds the start rule and the rules of
    /// at least 2,048 NFA states (`DEFAULT_EAGER_STATES`, `DEFAULT_LARGE_UNIT_STATES`), and a
    /// parse the rest as it enters them, 64 states at a time (`DEFAULT_BATCH_STATES`).
    pub fn new() -> CfgConfig {
        CfgConfig::default()
    }

    /// Byte budget of the compiler's mask cache (shared by every grammar it compiles).
    pub fn cache_bytes(mut self, bytes: usize) -> CfgConfig {
        self.cache_bytes = bytes;
        self
    }

    /// The cache budget.
    pub fn get_cache_bytes(&self) -> usize {
        self.cache_bytes
    }

    /// Most states a rule's automaton is determinized to (never more than
    /// [`Limits::automaton_states`]); past it the rule stays nondeterministic (correct, with
    /// larger Earley rows).
    pub fn max_dfa_states(mut self, n: usize) -> CfgConfig {
        self.max_dfa_states = n;
        self
    }

    /// How many levels of callers the second cache level looks at (0: none; every token that
    /// finishes a rule mid-token is then checked against the full parser). A caller that only
    /// returns into the end of its own rule (a tail call) is gathered without using a level.
    pub fn context_depth(mut self, depth: usize) -> CfgConfig {
        self.context_depth = depth;
        self
    }

    /// Use the adaptive mask cache (default). Without it every mask walks the whole token
    /// trie with the full parser: same masks, slower; useful to cross-check the cache.
    pub fn mask_cache(mut self, on: bool) -> CfgConfig {
        self.mask_cache = on;
        self
    }

    /// Minimize every rule's automaton (Hopcroft), not only the nondeterministic ones. Off by
    /// default, as in regex-automata's DFAs: on MaskBench it removes 6% of the states, costs a
    /// sixth of compile time and leaves mask time unchanged. Masks are the same either way.
    pub fn minimize(mut self, on: bool) -> CfgConfig {
        self.minimize = on;
        self
    }

    /// Longest forced stretch `forced_bytes` reports.
    pub fn max_forced_bytes(mut self, n: usize) -> CfgConfig {
        self.max_forced_bytes = n;
        self
    }

    /// How much of a grammar compiling builds: its start rule's automaton and, breadth first,
    /// those of the rules it calls while the grammar has fewer than `n` states (besides the
    /// large rules, [`CfgConfig::large_unit_states`]); every other rule is built when a parse
    /// first enters it (by the `fill_mask` or `consume` call that gets there), so a schema
    /// compiles in proportion to what its first mask needs rather than to its size.
    /// `usize::MAX` builds everything up front; 0 (the default) only the start rule, the
    /// first mask building what it enters and its callees up to
    /// [`CfgConfig::batch_states`]. Masks are the same either way; a limit a later build
    /// reaches ([`LimitKind::GrammarSize`], [`LimitKind::CompileTime`] per build) is then the
    /// error of the call that needed it.
    ///
    /// ```
    /// use formwork::cfg::{CfgCompiler, CfgConfig};
    /// use formwork::front::gbnf::gbnf_to_ir;
    /// use formwork::vocab::Vocab;
    /// use formwork::Matcher;
    ///
    /// let vocab = Vocab::embedded_qwen3().unwrap();
    /// let text = r#"root ::= "a" big | "b"
    /// big ::= "(" big ")" | "x""#;
    /// let ir = gbnf_to_ir(text, "<example>").unwrap();
    /// let lazy = CfgCompiler::new(&vocab, CfgConfig::new().eager_states(0)).compile(&ir).unwrap();
    /// assert_eq!(lazy.num_built_units(), 1);
    /// let mut m = lazy.matcher();
    /// m.consume_all(&vocab.encode("a((x").unwrap()).unwrap();
    /// assert_eq!(m.forced_bytes(), b"))");
    /// assert_eq!(lazy.num_built_units(), 2);
    /// ```
    pub fn eager_states(mut self, n: usize) -> CfgConfig {
        self.eager_states = n;
        self
    }

    /// Rules whose automaton before determinization has at least `n` states are built when
    /// the grammar compiles, wherever they are: building one takes milliseconds (a string
    /// pattern within a length, a long enum), which the mask of the step that first enters it
    /// would otherwise pay. Compiling drafts the rules' automata breadth first to find them,
    /// up to 65,536 states. `usize::MAX` leaves every rule to [`CfgConfig::eager_states`]
    /// and the parse.
    ///
    /// ```
    /// use formwork::cfg::{CfgCompiler, CfgConfig};
    /// use formwork::front::gbnf::gbnf_to_ir;
    /// use formwork::vocab::Vocab;
    ///
    /// let vocab = Vocab::embedded_qwen3().unwrap();
    /// // `id`, one of 100 words: an automaton of hundreds of states, called from the middle.
    /// let ids: Vec<String> = (0..100).map(|i| format!("\"word-{i:03}\"")).collect();
    /// let text = format!(
    ///     "root ::= \"a\" small | \"b\" small id \";\"\nsmall ::= \"(\" small \")\" | \"x\"\nid ::= {}",
    ///     ids.join(" | ")
    /// );
    /// let ir = gbnf_to_ir(&text, "<example>").unwrap();
    /// let lazy = CfgConfig::new().eager_states(0);
    /// let g = CfgCompiler::new(&vocab, lazy.clone().large_unit_states(usize::MAX))
    ///     .compile(&ir)
    ///     .unwrap();
    /// assert_eq!(g.num_built_units(), 1, "the start rule only");
    /// let g = CfgCompiler::new(&vocab, lazy.large_unit_states(500)).compile(&ir).unwrap();
    /// assert_eq!(g.num_built_units(), 2, "the start rule and `id`, not `small`");
    /// ```
    pub fn large_unit_states(mut self, n: usize) -> CfgConfig {
        self.large_unit_states = n;
        self
    }

    /// How much a later build adds beyond the rules a parse entered: the rules they call,
    /// breadth first, while the build has added fewer than `n` states. A parse that enters a
    /// rule mostly goes on into its callees; each one left unbuilt costs the step that gets
    /// there a halt, a build and a retry.
    ///
    /// ```
    /// use formwork::cfg::{CfgCompiler, CfgConfig};
    /// use formwork::front::gbnf::gbnf_to_ir;
    /// use formwork::vocab::Vocab;
    /// use formwork::Matcher;
    ///
    /// let vocab = Vocab::embedded_qwen3().unwrap();
    /// let text = r#"root ::= "a" one | "b"
    /// one ::= "1" two | "(" one ")"
    /// two ::= "2" three | "(" two ")"
    /// three ::= "3" | "(" three ")""#;
    /// let ir = gbnf_to_ir(text, "<example>").unwrap();
    /// let config = CfgConfig::new().eager_states(0).batch_states(usize::MAX);
    /// let g = CfgCompiler::new(&vocab, config).compile(&ir).unwrap();
    /// assert_eq!(g.num_built_units(), 1);
    /// let mut m = g.matcher();
    /// m.consume_all(&vocab.encode("a").unwrap()).unwrap();
    /// assert_eq!(g.num_built_units(), g.num_units(), "`one` came with `two` and `three`");
    /// ```
    pub fn batch_states(mut self, n: usize) -> CfgConfig {
        self.batch_states = n;
        self
    }
}

/// Compiles grammars for one vocabulary; holds the mask cache its grammars share, so a JSON
/// string or number rule computed for one schema serves every other schema.
///
/// Cheap to clone (the cache is shared).
///
/// # Example
///
/// ```
/// use formwork::cfg::{CfgCompiler, CfgConfig};
/// use formwork::front::gbnf::gbnf_to_ir;
/// use formwork::vocab::Vocab;
/// use formwork::{CompileErrorKind, Matcher};
///
/// let vocab = Vocab::embedded_qwen3().unwrap();
/// let compiler = CfgCompiler::new(&vocab, CfgConfig::new().cache_bytes(64 << 20));
/// let mut mask = vec![0u32; vocab.mask_words()];
/// // Two grammars around the same string rule: inside the string, the second grammar's masks
/// // come from the cache the first one filled (a loop over a wide class is its own unit, with
/// // the same structural hash in both).
/// let string = r#"str ::= "\"" [^"\\]* "\"""#;
/// for (outer, text) in [(r#"root ::= "[" str "]""#, r#"["hi"#), (r#"root ::= "(" str ")""#, r#"("hi"#)] {
///     let ir = gbnf_to_ir(&format!("{outer}\n{string}"), "g").unwrap();
///     let mut m = compiler.compile(&ir).unwrap().matcher();
///     m.consume_all(&vocab.encode(text).unwrap()).unwrap();
///     m.fill_mask(&mut mask).unwrap();
/// }
/// assert!(compiler.cache_stats().hits > 0);
///
/// let empty = gbnf_to_ir("root ::= a\na ::= \"x\" a", "g").unwrap();
/// assert_eq!(compiler.compile(&empty).unwrap_err().kind(), CompileErrorKind::EmptyLanguage);
/// ```
#[derive(Clone)]
pub struct CfgCompiler {
    vocab: Vocab,
    config: CfgConfig,
    limits: Limits,
    cache: Arc<MaskCache<u128, CacheEntry>>,
    index: Arc<cache::VocabIndex>,
}

impl CfgCompiler {
    /// A compiler for `vocab`, under the default [`Limits`].
    pub fn new(vocab: &Vocab, config: CfgConfig) -> CfgCompiler {
        let cache = Arc::new(MaskCache::new(config.cache_bytes));
        let index = Arc::new(cache::VocabIndex::new(vocab));
        // Built now, at start-up, rather than inside the first mask.
        vocab.slices();
        CfgCompiler {
            vocab: vocab.clone(),
            config,
            limits: Limits::new(),
            cache,
            index,
        }
    }

    /// The compiler with its grammars and their matchers under `limits`.
    pub fn with_limits(mut self, limits: Limits) -> CfgCompiler {
        self.limits = limits;
        self
    }

    /// The vocabulary.
    #[cfg(feature = "internals")]
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// Compiles an IR grammar. Errors: `UnknownSpecialToken` (a special the vocabulary lacks),
    /// `EmptyLanguage` (the start rule derives nothing), `Limit` (grammar size, compile time,
    /// the first row's readings).
    #[cfg(feature = "internals")]
    pub fn compile(&self, grammar: &Grammar) -> Result<Arc<CfgGrammar>, CompileError> {
        self.compile_within(grammar, &self.limits.deadline())
    }

    /// [`CfgCompiler::compile`] within `deadline` (one per engine compilation, front end
    /// included).
    pub(crate) fn compile_within(
        &self,
        grammar: &Grammar,
        deadline: &Deadline,
    ) -> Result<Arc<CfgGrammar>, CompileError> {
        let bound = |kind| usize::try_from(self.limits.get(kind)).unwrap_or(usize::MAX);
        let options = CompileOptions {
            max_states: bound(LimitKind::GrammarSize),
            max_dfa_states: self
                .config
                .max_dfa_states
                .min(bound(LimitKind::AutomatonStates)),
            minimize: self.config.minimize,
            eager_states: self.config.eager_states,
            large_unit_states: self.config.large_unit_states,
        };
        let mut lowering = lower::compile(grammar, &self.vocab, options, deadline)?;
        let budget = self.limits.budget();
        let first_row = |e| CompileError::over_limit(e, Location::None, "the first Earley row");
        let initial = loop {
            match Chart::new(lowering.program(), &budget) {
                Ok(chart) => break chart,
                Err(Halt::Limit(e)) => return Err(first_row(e)),
                Err(Halt::Unbuilt(units)) => {
                    lowering.build(&units, self.config.batch_states, deadline.clone())?
                }
            }
        };
        let growth = match lowering.is_complete() {
            true => Growth::Complete(lowering.program().clone()),
            false => Growth::Growing(Box::new(lowering)),
        };
        Ok(Arc::new(CfgGrammar {
            growth: Mutex::new(growth),
            vocab: self.vocab.clone(),
            config: self.config.clone(),
            limits: self.limits.clone(),
            cache: self.cache.clone(),
            index: self.index.clone(),
            walks: Mutex::new(None),
            initial,
            later_builds: AtomicUsize::new(0),
        }))
    }

    /// Hits, misses and size of the shared mask cache.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }
}

/// A compiled grammar, shared by all matchers of a constraint (and across threads).
///
/// Its program grows as parses enter units not built yet ([`CfgConfig::eager_states`]):
/// states are only appended, so each matcher keeps the program it works on and takes the
/// current one when it needs a unit its own lacks.
pub struct CfgGrammar {
    growth: Mutex<Growth>,
    vocab: Vocab,
    config: CfgConfig,
    limits: Limits,
    cache: Arc<MaskCache<u128, CacheEntry>>,
    index: Arc<cache::VocabIndex>,
    walks: Mutex<Option<cache::SharedWalks>>,
    initial: Chart,
    /// Builds since the grammar compiled: each one a step that halted on units the program
    /// lacked and was taken again (a whole mask, for a mask).
    later_builds: AtomicUsize,
}

/// How far a grammar's program is built.
enum Growth {
    /// Units are left to build; the lowering holds the program built so far.
    Growing(Box<Lowering>),
    Complete(Arc<Program>),
}

/// What a matcher holds while it has given its program up to a build (see
/// [`CfgGrammar::build`]).
static EMPTY_PROGRAM: LazyLock<Arc<Program>> = LazyLock::new(|| {
    let alphabet = Alphabet {
        class_of: [0; 256],
        sets: vec![ByteSet::FULL],
    };
    Arc::new(Program::new(alphabet))
});

impl std::fmt::Debug for CfgGrammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let prog = self.program();
        f.debug_struct("CfgGrammar")
            .field("units", &prog.units.len())
            .field("built_units", &prog.num_built_units())
            .field("states", &prog.states.len())
            .field("later_builds", &self.later_builds.load(Ordering::Relaxed))
            .field("byte_classes", &prog.n_classes())
            .finish()
    }
}

impl CfgGrammar {
    /// A matcher in the initial state.
    pub fn matcher(self: &Arc<Self>) -> CfgMatcher {
        CfgMatcher {
            grammar: self.clone(),
            prog: self.program(),
            chart: RefCell::new(self.initial.clone()),
            history: VecDeque::new(),
            progress: Progress::default(),
            old_rows: 0,
            scratch: cache::Scratch::default(),
        }
    }

    /// Number of automaton states built so far.
    #[cfg(feature = "internals")]
    pub fn num_states(&self) -> usize {
        self.program().states.len()
    }

    /// Number of units (rules' automata) found so far, built or not.
    #[cfg(feature = "internals")]
    pub fn num_units(&self) -> usize {
        self.program().units.len()
    }

    /// Number of units built so far (see [`CfgConfig::eager_states`]).
    #[cfg(feature = "internals")]
    pub fn num_built_units(&self) -> usize {
        self.program().num_built_units()
    }

    /// Number of builds since the grammar compiled, each for a step (a mask, a token) that
    /// met units not built yet and was taken again once they were.
    #[cfg(feature = "internals")]
    pub fn num_later_builds(&self) -> usize {
        self.later_builds.load(Ordering::Relaxed)
    }

    /// The program with every unit built so far (the unit tests' grammars are built whole).
    #[cfg(test)]
    fn prog(&self) -> Arc<Program> {
        self.program()
    }

    /// The program with every unit built so far.
    fn program(&self) -> Arc<Program> {
        match &*self.growth.lock().unwrap_or_else(PoisonError::into_inner) {
            Growth::Growing(lower) => lower.program().clone(),
            Growth::Complete(prog) => prog.clone(),
        }
    }

    /// Builds those of `units` not built yet, and the units they call breadth first while
    /// the build is under [`CfgConfig::batch_states`] states, within a time budget of
    /// [`Limits::compile_time`]; `held` is then the program that has them. A limit the build
    /// reaches is the error (`held` is then the program as it was before, or later).
    ///
    /// `held` is given up while the build runs: the program grows in place when no other
    /// matcher holds it, where a copy per build was most of a lazy build's cost.
    fn build(&self, held: &mut Arc<Program>, units: &[u32]) -> Result<(), LimitExceeded> {
        let mut growth = self.growth.lock().unwrap_or_else(PoisonError::into_inner);
        let lower = match &mut *growth {
            Growth::Growing(lower) => lower,
            Growth::Complete(prog) => {
                *held = prog.clone();
                return Ok(());
            }
        };
        self.later_builds.fetch_add(1, Ordering::Relaxed);
        *held = Arc::clone(&EMPTY_PROGRAM);
        let built = lower.build(units, self.config.batch_states, self.limits.deadline());
        *held = lower.program().clone();
        if let Err(e) = built {
            // A later build only meets limits: the special tokens were resolved, and the
            // start rule's productivity checked, when the grammar compiled.
            return Err(*e.limit().expect("a later build fails on a limit only"));
        }
        if lower.is_complete() {
            *growth = Growth::Complete(held.clone());
        }
        Ok(())
    }

    /// What the mask cache reads of the grammar, for one fill on `prog`.
    fn view<'a>(&'a self, prog: &'a Program) -> cache::GrammarView<'a> {
        cache::GrammarView {
            prog,
            vocab: &self.vocab,
            context_depth: self.config.context_depth,
            mask_cache: self.config.mask_cache,
            cache: &self.cache,
            index: &self.index,
            walks: &self.walks,
        }
    }
}

/// The state of one sequence under a [`CfgGrammar`]: Earley rows, one per consumed byte or
/// special token, and the rows before each of the last consumed tokens (for `rollback`, at
/// most [`Limits::history`] of them).
pub struct CfgMatcher {
    grammar: Arc<CfgGrammar>,
    /// The grammar's program as it was when this matcher last needed a unit.
    prog: Arc<Program>,
    // `forced_bytes(&self)` looks ahead by pushing rows and truncating them again.
    chart: RefCell<Chart>,
    history: VecDeque<u32>,
    progress: Progress,
    /// Rows below the history's oldest token that the last [`Chart::forget_below`] kept.
    old_rows: usize,
    scratch: cache::Scratch,
}

/// Rows a chart may hold below its history before they are looked at for dropping, at least
/// (and at least as many as it holds above: dropping costs a pass over the chart).
const MIN_FORGOTTEN_ROWS: usize = 4096;

/// Forks the sequence: the copy has the same rows and history (scratch buffers start empty).
impl Clone for CfgMatcher {
    fn clone(&self) -> CfgMatcher {
        CfgMatcher {
            grammar: self.grammar.clone(),
            prog: self.prog.clone(),
            chart: RefCell::new(self.chart.borrow().clone()),
            history: self.history.clone(),
            progress: self.progress,
            old_rows: self.old_rows,
            scratch: cache::Scratch::default(),
        }
    }
}

impl std::fmt::Debug for CfgMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CfgMatcher")
            .field("consumed", &self.progress.consumed())
            .field("rows", &self.chart.borrow().num_rows())
            .field("terminated", &self.progress.is_terminated())
            .finish()
    }
}

/// One forced input unit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Forced {
    Byte(u8),
    Special(u32),
}

impl CfgMatcher {
    /// Where the matcher is in the grammar: the rule of the first item of the last row that
    /// reads bytes itself (else of its first item). A mask's work is spent walking tokens
    /// from the whole row at once (its rows are shared by the items, and memoized across
    /// them), so no single item is the one that spent it; the scanning items are the
    /// innermost rules being written.
    fn position(&self) -> Location {
        let chart = self.chart.borrow();
        let prog = &self.prog;
        let row = chart.row(chart.num_rows() - 1);
        let scans = |it: &&chart::Item| prog.state(it.state).flags & program::SCANS != 0;
        match row.iter().find(scans).or(row.first()) {
            Some(it) => prog.unit_place(prog.state(it.state).unit),
            None => Location::None,
        }
    }

    /// Earley rows the matcher holds: one per byte or special token of the tokens it can still
    /// roll back, and the older ones an open structure still needs.
    #[cfg(feature = "internals")]
    pub fn num_rows(&self) -> usize {
        self.chart.borrow().num_rows()
    }

    /// Takes `step` on the matcher's program until it no longer halts on units the program
    /// lacks, building those in between (a step that halts leaves the matcher as it found it).
    /// A limit is the error: the step's own, or that of a build.
    fn building<R>(
        &mut self,
        mut step: impl FnMut(&mut CfgMatcher) -> Result<R, Halt>,
    ) -> Result<R, LimitExceeded> {
        loop {
            match step(self) {
                Ok(r) => return Ok(r),
                Err(Halt::Limit(e)) => return Err(e),
                Err(Halt::Unbuilt(units)) => self.grammar.build(&mut self.prog, &units)?,
            }
        }
    }

    /// The units every continuation starts with, and whether they reach the end of the
    /// language (accepting with nothing else possible). A unit not built yet is built here
    /// (on a program of this call's own: `forced_bytes` takes `&self`); a limit ends the
    /// stretch.
    fn forced_units(&self) -> (Vec<Forced>, bool) {
        let g = &*self.grammar;
        let mut prog = self.prog.clone();
        let mut out = Vec::new();
        if !self.progress.is_live() {
            return (out, false);
        }
        let budget = g.limits.budget();
        let mut chart = self.chart.borrow_mut();
        let base = chart.num_rows();
        let mut at_end = false;
        while out.len() < g.config.max_forced_bytes {
            let accepting = chart.is_accepting(&prog);
            let mut bytes = ByteSet::EMPTY;
            let mut specials: Vec<u32> = Vec::new();
            for it in chart.last_row() {
                bytes = bytes.union(&prog.first_bytes(it.state));
                if prog.state(it.state).flags & SPECIALS != 0 {
                    specials.extend(prog.specials_of(it.state).iter().map(|e| e.0));
                }
            }
            specials.sort_unstable();
            specials.dedup();
            if accepting {
                at_end = bytes.is_empty() && specials.is_empty();
                break;
            }
            let next = match (bytes.single(), bytes.is_empty(), specials.as_slice()) {
                (Some(b), _, []) => Forced::Byte(b),
                (None, true, [s]) => Forced::Special(*s),
                _ => break,
            };
            let pushed = loop {
                let pushed = match next {
                    Forced::Byte(b) => chart.push_byte(&prog, b, &budget),
                    Forced::Special(s) => chart.push_special(&prog, s, &budget),
                };
                match pushed {
                    Err(Halt::Unbuilt(units)) => match g.build(&mut prog, &units) {
                        Ok(()) => {}
                        Err(_) => break false,
                    },
                    pushed => break pushed == Ok(true),
                }
            };
            if !pushed {
                break;
            }
            out.push(next);
        }
        chart.truncate(base);
        (out, at_end)
    }

    /// Would the mask of the current state allow `token`? Within the work budget, unless a
    /// mask was computed on this very state already (then it is known to fit).
    fn mask_allows(&mut self, token: TokenId) -> Result<bool, LimitExceeded> {
        let budget = self.progress.mask_check_budget(&self.grammar.limits);
        let mut mask = vec![0u32; self.grammar.vocab.mask_words()];
        self.fill(&mut mask, &budget)?;
        Ok(get_bit(&mask, token))
    }

    /// The mask of the current state into `out`, within `budget`.
    fn fill(&mut self, out: &mut [u32], budget: &Budget) -> Result<(), LimitExceeded> {
        let g = self.grammar.clone();
        self.building(|m| {
            let view = g.view(&m.prog);
            cache::fill(&view, m.chart.get_mut(), &mut m.scratch, out, budget)
        })
    }

    /// Pushes `token` (of `kind`, text or a special other than a final EOS) onto the chart:
    /// `Ok(None)` if every byte was taken, `Ok(Some(at_byte))` where it was refused (chart
    /// unchanged).
    fn push_token(
        &mut self,
        token: TokenId,
        kind: TokenKind,
        budget: &Budget,
    ) -> Result<Option<usize>, LimitExceeded> {
        let g = self.grammar.clone();
        self.building(|m| {
            let prog = &*m.prog;
            let chart = m.chart.get_mut();
            let rows = chart.num_rows();
            match kind {
                TokenKind::Text => {
                    for (i, &b) in g.vocab.token_bytes(token).iter().enumerate() {
                        match chart.push_byte(prog, b, budget) {
                            Ok(true) => {}
                            Ok(false) => {
                                chart.truncate(rows);
                                return Ok(Some(i));
                            }
                            Err(halt) => {
                                chart.truncate(rows);
                                return Err(halt);
                            }
                        }
                    }
                    Ok(None)
                }
                TokenKind::Special => {
                    let Some(sid) = prog.special_index(token) else {
                        return Ok(Some(0));
                    };
                    Ok(match chart.push_special(prog, sid, budget)? {
                        true => None,
                        false => Some(0),
                    })
                }
                TokenKind::Unused => Ok(Some(0)),
            }
        })
    }

    /// Records a consumed token; the chart had `rows` rows before it. Once the history is
    /// full, the rows below it that nothing reaches any more are dropped from time to time,
    /// so a long sequence keeps its last tokens and what is still open, not every row.
    fn advanced(&mut self, rows: usize) {
        let cap = self.grammar.limits.history_cap();
        if cap > 0 {
            if self.history.len() == cap {
                self.history.pop_front();
            }
            self.history.push_back(rows as u32);
        }
        self.progress.stepped();
        if self.history.len() < cap {
            return;
        }
        let chart = self.chart.get_mut();
        let boundary = self
            .history
            .front()
            .map_or(chart.num_rows() - 1, |&r| r as usize);
        let above = chart.num_rows() - boundary;
        if boundary - self.old_rows.min(boundary) < above.max(MIN_FORGOTTEN_ROWS) {
            return;
        }
        let dropped = chart.forget_below(&self.prog, boundary);
        self.history.iter_mut().for_each(|r| *r -= dropped as u32);
        self.old_rows = boundary - dropped;
        self.scratch.forget_rows();
    }

    /// A limit reached while consuming `token` (the chart back at `rows` rows): the token is
    /// consumed if the constraint allows it here (and the matcher is then over its limit),
    /// else the limit is the error.
    fn limit_reached(
        &mut self,
        token: TokenId,
        limit: LimitExceeded,
        rows: usize,
    ) -> Result<(), MatchError> {
        match self.mask_allows(token) {
            Ok(true) => {
                self.advanced(rows);
                self.progress.over(limit);
                Ok(())
            }
            Ok(false) => Err(limit.into()),
            Err(e) => Err(e.into()),
        }
    }
}

impl Matcher for CfgMatcher {
    fn fill_mask(&mut self, out: &mut [u32]) -> Result<(), MatchError> {
        let g = self.grammar.clone();
        if self.progress.fill_mask_prologue(out, &g.vocab)? {
            return Ok(());
        }
        self.fill(out, &g.limits.budget())
            .map_err(|e| MatchError::from(e).at(self.position()))?;
        self.progress.masked();
        Ok(())
    }

    fn consume(&mut self, token: TokenId) -> Result<(), MatchError> {
        let g = self.grammar.clone();
        let kind = self.progress.consume_prologue(&g.vocab, token)?;
        let rows = self.chart.get_mut().num_rows();
        // EOS ends a complete output; otherwise a special is a symbol of the grammar.
        let ends = |m: &Self| g.vocab.is_eos(token) && m.chart.borrow().is_accepting(&m.prog);
        let kind = match kind {
            Some(TokenKind::Special) if ends(self) => None,
            kind => kind,
        };
        let Some(kind) = kind else {
            self.advanced(rows);
            self.progress.ended();
            return Ok(());
        };
        match self.push_token(token, kind, &g.limits.budget()) {
            Ok(None) => {}
            Ok(Some(at_byte)) => return Err(self.progress.rejected(token, at_byte)),
            Err(limit) => return self.limit_reached(token, limit, rows),
        }
        self.advanced(rows);
        Ok(())
    }

    fn rollback(&mut self, n: usize) -> Result<(), MatchError> {
        let Some(keep) = rollback_to(n, self.history.len())? else {
            return Ok(());
        };
        self.chart.get_mut().truncate(self.history[keep] as usize);
        self.scratch.forget_rows();
        self.history.truncate(keep);
        self.progress.rolled_back(n);
        Ok(())
    }

    fn is_accepting(&self) -> bool {
        self.progress
            .is_accepting(|| self.chart.borrow().is_accepting(&self.prog))
    }

    fn is_terminated(&self) -> bool {
        self.progress.is_terminated()
    }

    fn forced_bytes(&self) -> Vec<u8> {
        self.forced_units()
            .0
            .iter()
            .map_while(|u| match u {
                Forced::Byte(b) => Some(*b),
                Forced::Special(_) => None,
            })
            .collect()
    }

    fn forced_tokens(&self) -> Vec<TokenId> {
        let (units, at_end) = self.forced_units();
        let g = &*self.grammar;
        let mut out = Vec::new();
        let mut i = 0;
        while i < units.len() {
            if let Forced::Special(s) = units[i] {
                out.push(self.prog.specials[s as usize].1);
                i += 1;
                continue;
            }
            let run: Vec<u8> = units[i..]
                .iter()
                .map_while(|u| match u {
                    Forced::Byte(b) => Some(*b),
                    Forced::Special(_) => None,
                })
                .collect();
            i += run.len();
            let (tokens, whole) = canonical_tokens(&g.vocab, &run);
            let ends_stretch = i == units.len();
            out.extend_from_slice(&tokens);
            // The model may merge the last token of a stretch with the free text after it.
            if !whole || (ends_stretch && !at_end) {
                out.pop();
            }
            if !whole {
                break;
            }
        }
        out
    }

    fn num_consumed(&self) -> usize {
        self.progress.consumed()
    }

    fn reset(&mut self) {
        // The first row may have been thinned by `forget_below`.
        *self.chart.get_mut() = self.grammar.initial.clone();
        self.old_rows = 0;
        self.scratch.forget_rows();
        self.history.clear();
        self.progress = Progress::default();
    }

    fn consume_bytes(&mut self, bytes: &[u8]) -> Result<(), MatchError> {
        self.progress.text_prologue()?;
        // Text no mask offered: a limit reached on it refuses it, changing nothing.
        let budget = self.grammar.limits.budget();
        let rows = self.chart.get_mut().num_rows();
        let refused = self.building(|m| {
            let chart = m.chart.get_mut();
            for (at_byte, &b) in bytes.iter().enumerate() {
                match chart.push_byte(&m.prog, b, &budget) {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(halt) => {
                        chart.truncate(rows);
                        return Err(halt);
                    }
                }
                chart.truncate(rows);
                return Ok(Some(at_byte));
            }
            Ok(None)
        })?;
        if let Some(at_byte) = refused {
            return Err(self.progress.text_rejected(at_byte));
        }
        self.advanced(rows);
        Ok(())
    }
}

/// Canonical tokens of `bytes` (the tokenizer's own encoding when it reproduces the bytes
/// exactly, else longest-match over the trie), and whether they cover all of `bytes` (a
/// stretch ending inside a UTF-8 character is cut at the last whole character).
fn canonical_tokens(vocab: &Vocab, bytes: &[u8]) -> (Vec<TokenId>, bool) {
    let valid = match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) => e.valid_up_to(),
    };
    // `valid_up_to` ends a valid prefix.
    let text = std::str::from_utf8(&bytes[..valid]).expect("valid prefix");
    let exact = |ids: &[TokenId]| {
        ids.iter().all(|&t| vocab.kind(t) == Some(TokenKind::Text))
            && ids
                .iter()
                .flat_map(|&t| vocab.token_bytes(t).iter().copied())
                .eq(text.bytes())
    };
    match vocab.encode(text) {
        Ok(ids) if exact(&ids) => (ids, valid == bytes.len()),
        _ => match vocab.encode_greedy(text.as_bytes()) {
            Ok(ids) => (ids, valid == bytes.len()),
            Err(_) => (Vec::new(), false),
        },
    }
}
