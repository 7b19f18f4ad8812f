//! Ceilings on what one untrusted input may cost: the one place where every limit of every
//! front end and backend is configured.
//!
//! A server compiles schemas, grammars, regexes, tool lists and requests written by strangers.
//! Each of them must end in bounded time and memory, on a small thread stack, whatever its
//! shape: an input past a ceiling is a [`CompileErrorKind::Limit`](crate::CompileErrorKind)
//! error (or, while matching, a [`MatchErrorKind::Limit`](crate::MatchErrorKind)) that names
//! the limit, the value reached and the place, never a crash or an unbounded wait. Limits are
//! checked before or during the work, not after it.
//!
//! # Example
//!
//! ```
//! use formwork::{LimitKind, Limits};
//! use std::time::Duration;
//!
//! let limits = Limits::new()
//!     .nesting(64)
//!     .compile_time(Some(Duration::from_millis(500)));
//! assert_eq!(limits.get(LimitKind::Nesting), 64);
//! assert_eq!(limits.get(LimitKind::CompileTime), 500);
//! ```

use std::cell::Cell;
use std::fmt;
use std::time::{Duration, Instant};

use crate::error::{CompileError, CompileErrorKind, Location};

/// Which limit was reached. Each names one field of [`Limits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LimitKind {
    /// How deeply structures may nest (schemas, grammar expressions, regex groups, templates,
    /// requests).
    Nesting,
    /// Size in bytes of one input text or schema.
    InputBytes,
    /// Expressions of the grammar a front end produces, rules of one grammar, and states of
    /// the program a backend compiles it to (all of the Earley backend's unit automata).
    GrammarSize,
    /// States of any one automaton built while compiling (a regex or operator leaf, a `Wait`,
    /// one Earley unit).
    AutomatonStates,
    /// Branches of one alternation (enum values, tool names, forbidden strings).
    Alternatives,
    /// Wall-clock time of one compilation, in milliseconds.
    CompileTime,
    /// Work units one mask or one consumed token may spend: token-trie nodes visited, Earley
    /// items added or scanned for completion, operator threads stepped.
    MaskWork,
    /// Consumed tokens a matcher keeps for rollback.
    History,
    /// Simultaneous readings of the input while matching (operator threads, items of one
    /// Earley row): how ambiguous the input may be at one position.
    Readings,
}

impl LimitKind {
    /// Every kind, in declaration order.
    ///
    /// ```
    /// use formwork::LimitKind;
    ///
    /// assert_eq!(LimitKind::ALL.len(), 9);
    /// assert!(LimitKind::ALL.contains(&LimitKind::MaskWork));
    /// ```
    pub const ALL: [LimitKind; 9] = [
        LimitKind::Nesting,
        LimitKind::InputBytes,
        LimitKind::GrammarSize,
        LimitKind::AutomatonStates,
        LimitKind::Alternatives,
        LimitKind::CompileTime,
        LimitKind::MaskWork,
        LimitKind::History,
        LimitKind::Readings,
    ];

    /// The name used in error messages and in the README's limits table.
    pub fn name(self) -> &'static str {
        match self {
            LimitKind::Nesting => "nesting",
            LimitKind::InputBytes => "input bytes",
            LimitKind::GrammarSize => "grammar size",
            LimitKind::AutomatonStates => "automaton states",
            LimitKind::Alternatives => "alternatives",
            LimitKind::CompileTime => "compile time (ms)",
            LimitKind::MaskWork => "mask work",
            LimitKind::History => "history",
            LimitKind::Readings => "readings",
        }
    }
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A limit that was reached: which one, the value the input needed (at least) and the ceiling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitExceeded {
    /// The limit.
    pub kind: LimitKind,
    /// What the input reached when it was stopped (a lower bound of what it needed).
    pub value: u64,
    /// The configured ceiling.
    pub max: u64,
}

impl fmt::Display for LimitExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} limit: {} > {}", self.kind, self.value, self.max)
    }
}

impl std::error::Error for LimitExceeded {}

/// Every ceiling on compile and match work, with defaults meant for a server: generous for
/// real schemas and grammars, far below what exhausts a machine.
///
/// Defaults: nesting 128, input 8 MiB, grammar size 2,000,000 expressions, 100,000 states
/// per automaton, 100,000 alternatives, 10 s per compilation, 50,000,000 work units per mask,
/// a history of 1,000,000 tokens per matcher and 100,000 simultaneous readings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    nesting: usize,
    input_bytes: usize,
    grammar_size: usize,
    automaton_states: usize,
    alternatives: usize,
    compile_time: Option<Duration>,
    mask_work: u64,
    history: usize,
    readings: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            nesting: 128,
            input_bytes: 8 << 20,
            grammar_size: 2_000_000,
            automaton_states: 100_000,
            alternatives: 100_000,
            compile_time: Some(Duration::from_secs(10)),
            mask_work: 50_000_000,
            history: 1_000_000,
            readings: 100_000,
        }
    }
}

impl Limits {
    /// The defaults (see the type's docs).
    pub fn new() -> Limits {
        Limits::default()
    }

    /// Deepest nesting of any structure in an input.
    pub fn nesting(mut self, depth: usize) -> Limits {
        self.nesting = depth;
        self
    }

    /// Largest input text or schema, in bytes.
    pub fn input_bytes(mut self, bytes: usize) -> Limits {
        self.input_bytes = bytes;
        self
    }

    /// Most expressions (or rules) in one grammar.
    pub fn grammar_size(mut self, n: usize) -> Limits {
        self.grammar_size = n;
        self
    }

    /// Most states of one automaton built at compile time.
    pub fn automaton_states(mut self, n: usize) -> Limits {
        self.automaton_states = n;
        self
    }

    /// Most branches of one alternation.
    pub fn alternatives(mut self, n: usize) -> Limits {
        self.alternatives = n;
        self
    }

    /// Wall-clock budget of one compilation (`None`: unbounded).
    pub fn compile_time(mut self, budget: Option<Duration>) -> Limits {
        self.compile_time = budget;
        self
    }

    /// Work units one `fill_mask` or `consume` may spend.
    pub fn mask_work(mut self, units: u64) -> Limits {
        self.mask_work = units;
        self
    }

    /// Consumed tokens a matcher keeps for rollback; older ones can no longer be rolled back.
    pub fn history(mut self, tokens: usize) -> Limits {
        self.history = tokens;
        self
    }

    /// Most simultaneous readings of the input at one position while matching.
    pub fn readings(mut self, n: usize) -> Limits {
        self.readings = n;
        self
    }

    /// The ceiling of `kind` as a number (`CompileTime` in milliseconds, `u64::MAX` when
    /// unbounded).
    pub fn get(&self, kind: LimitKind) -> u64 {
        match kind {
            LimitKind::Nesting => self.nesting as u64,
            LimitKind::InputBytes => self.input_bytes as u64,
            LimitKind::GrammarSize => self.grammar_size as u64,
            LimitKind::AutomatonStates => self.automaton_states as u64,
            LimitKind::Alternatives => self.alternatives as u64,
            LimitKind::CompileTime => self
                .compile_time
                .map_or(u64::MAX, |d| d.as_millis().min(u64::MAX as u128) as u64),
            LimitKind::MaskWork => self.mask_work,
            LimitKind::History => self.history as u64,
            LimitKind::Readings => self.readings as u64,
        }
    }

    /// The text of the file at `path`, read no further than the input limit: a larger file
    /// (or a device that never ends) is a `Limit` error without reading the rest, a file
    /// that cannot be read or is no UTF-8 an `Invalid` one, both naming the path.
    ///
    /// ```
    /// use formwork::{CompileErrorKind, Limits};
    ///
    /// let path = std::env::temp_dir().join("formwork-read-file-doc.gbnf");
    /// std::fs::write(&path, "root ::= \"a\"").unwrap();
    /// assert_eq!(Limits::new().read_file(&path).unwrap(), "root ::= \"a\"");
    /// let err = Limits::new().input_bytes(4).read_file(&path).unwrap_err();
    /// assert_eq!(err.kind(), CompileErrorKind::Limit);
    /// # std::fs::remove_file(&path).unwrap();
    /// ```
    pub fn read_file(&self, path: &std::path::Path) -> Result<String, CompileError> {
        use std::io::Read;
        let invalid = |e: &dyn fmt::Display| {
            CompileError::new(
                CompileErrorKind::Invalid,
                Location::None,
                format!("{}: {e}", path.display()),
            )
        };
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| {
                f.take((self.input_bytes as u64).saturating_add(1))
                    .read_to_end(&mut bytes)
            })
            .map_err(|e| invalid(&e))?;
        self.check(LimitKind::InputBytes, bytes.len() as u64)
            .map_err(|e| {
                CompileError::over_limit(e, Location::None, &path.display().to_string())
            })?;
        String::from_utf8(bytes).map_err(|e| invalid(&e))
    }

    /// `Ok` if `value` is within the ceiling of `kind`, else what was exceeded.
    pub fn check(&self, kind: LimitKind, value: u64) -> Result<(), LimitExceeded> {
        let max = self.get(kind);
        match value > max {
            true => Err(LimitExceeded { kind, value, max }),
            false => Ok(()),
        }
    }

    /// A deadline for one compilation starting now.
    pub(crate) fn deadline(&self) -> Deadline {
        Deadline::after(self.compile_time)
    }

    /// The most tokens a matcher keeps for rollback.
    pub(crate) fn history_cap(&self) -> usize {
        self.history
    }

    /// The work budget of one `fill_mask` or `consume` call.
    pub(crate) fn budget(&self) -> Budget {
        Budget::new(self.mask_work, self.readings)
    }
}

/// What one matcher call (`fill_mask`, `consume`) may still spend: [`LimitKind::MaskWork`]
/// units in all, and [`LimitKind::Readings`] at any one position.
///
/// Shared by reference between the walks of one call, so the count lives in a `Cell`.
#[derive(Debug)]
pub(crate) struct Budget {
    spent: Cell<u64>,
    max_work: u64,
    max_readings: usize,
}

impl Budget {
    fn new(max_work: u64, max_readings: usize) -> Budget {
        Budget {
            spent: Cell::new(0),
            max_work,
            max_readings,
        }
    }

    /// A budget with the readings ceiling of `limits` and no ceiling on work: for redoing a
    /// computation that already succeeded within the work ceiling on the same state.
    pub(crate) fn unmetered(limits: &Limits) -> Budget {
        Budget::new(u64::MAX, limits.readings)
    }

    /// Spends `units` of work: `Err` once the total passes the ceiling (and from then on).
    #[inline]
    pub(crate) fn spend(&self, units: u64) -> Result<(), LimitExceeded> {
        let spent = self.spent.get().saturating_add(units);
        self.spent.set(spent);
        match spent > self.max_work {
            true => Err(LimitExceeded {
                kind: LimitKind::MaskWork,
                value: spent,
                max: self.max_work,
            }),
            false => Ok(()),
        }
    }

    /// Units spent so far: what a test counts a walk's work by.
    #[cfg(test)]
    pub(crate) fn spent(&self) -> u64 {
        self.spent.get()
    }

    /// `Err` if `n` simultaneous readings are over the ceiling.
    #[inline]
    pub(crate) fn readings(&self, n: usize) -> Result<(), LimitExceeded> {
        match n > self.max_readings {
            true => Err(LimitExceeded {
                kind: LimitKind::Readings,
                value: n as u64,
                max: self.max_readings as u64,
            }),
            false => Ok(()),
        }
    }
}

/// The end of one compilation's time budget, checked inside long loops.
///
/// Reading the clock costs ~20 ns, so [`tick`](Self::tick) reads it once per
/// [`TICKS_PER_READ`] calls: loops call it once per unit of work, however small.
#[derive(Clone, Debug)]
pub(crate) struct Deadline {
    started: Instant,
    at: Option<Instant>,
    ticks: Cell<u32>,
}

/// How many [`Deadline::tick`] calls share one reading of the clock.
pub(crate) const TICKS_PER_READ: u32 = 1024;

impl Deadline {
    /// A deadline `budget` from now (`None`: never).
    pub(crate) fn after(budget: Option<Duration>) -> Deadline {
        let started = Instant::now();
        Deadline {
            started,
            at: budget.and_then(|b| started.checked_add(b)),
            ticks: Cell::new(0),
        }
    }

    /// A deadline halfway from now to this one (never if this one never passes): a first
    /// attempt that leaves the rest of the budget to a second.
    pub(crate) fn halfway(&self) -> Deadline {
        Deadline::after(
            self.at
                .map(|at| at.saturating_duration_since(Instant::now()) / 2),
        )
    }

    /// A deadline that never passes.
    pub(crate) fn never() -> Deadline {
        Deadline::after(None)
    }

    /// `Err` once the deadline has passed (reads the clock every time).
    pub(crate) fn check(&self) -> Result<(), LimitExceeded> {
        match self.at {
            Some(at) if Instant::now() >= at => Err(self.exceeded()),
            _ => Ok(()),
        }
    }

    /// One unit of work: `Err` once the deadline has passed (reads the clock every
    /// [`TICKS_PER_READ`] calls).
    #[inline]
    pub(crate) fn tick(&self) -> Result<(), LimitExceeded> {
        let t = self.ticks.get().wrapping_add(1);
        self.ticks.set(t);
        match t % TICKS_PER_READ == 0 {
            true => self.check(),
            false => Ok(()),
        }
    }

    /// Units of work ticked so far (wrapping): tests count the work a compilation does.
    #[cfg(test)]
    pub(crate) fn ticks(&self) -> u32 {
        self.ticks.get()
    }

    fn exceeded(&self) -> LimitExceeded {
        let millis = |d: Duration| d.as_millis().min(u64::MAX as u128) as u64;
        LimitExceeded {
            kind: LimitKind::CompileTime,
            value: millis(self.started.elapsed()),
            max: self.at.map_or(u64::MAX, |at| millis(at - self.started)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_names_the_limit_and_values() {
        let limits = Limits::new().alternatives(10);
        assert!(limits.check(LimitKind::Alternatives, 10).is_ok());
        let e = limits.check(LimitKind::Alternatives, 11).unwrap_err();
        assert_eq!((e.kind, e.value, e.max), (LimitKind::Alternatives, 11, 10));
        assert_eq!(e.to_string(), "alternatives limit: 11 > 10");
    }

    #[test]
    fn a_passed_deadline_is_seen_within_one_read() {
        let d = Deadline::after(Some(Duration::ZERO));
        assert!(d.check().is_err());
        let first_err = (1..=TICKS_PER_READ).position(|_| d.tick().is_err());
        assert_eq!(first_err, Some(TICKS_PER_READ as usize - 1));
        assert!(Deadline::never().check().is_ok());
    }

    #[test]
    fn halfway_leaves_the_second_half_of_the_budget() {
        let budget = Duration::from_secs(100);
        let whole = Deadline::after(Some(budget));
        let half = whole.halfway();
        let (whole_at, half_at) = (whole.at.unwrap(), half.at.unwrap());
        assert!(half_at < whole_at);
        assert!(whole_at - half_at >= budget / 2 - Duration::from_secs(1));
        assert!(half.check().is_ok());
        assert!(Deadline::after(Some(Duration::ZERO)).halfway().check().is_err());
        assert!(Deadline::never().halfway().at.is_none());
    }

    #[test]
    fn a_budget_fails_past_its_work_and_readings() {
        let limits = Limits::new().mask_work(10).readings(3);
        let b = limits.budget();
        assert!(b.spend(10).is_ok());
        let e = b.spend(1).unwrap_err();
        assert_eq!((e.kind, e.value, e.max), (LimitKind::MaskWork, 11, 10));
        assert!(b.readings(3).is_ok());
        assert_eq!(b.readings(4).unwrap_err().kind, LimitKind::Readings);
        assert!(Budget::unmetered(&limits).spend(u64::MAX).is_ok());
    }

    #[test]
    fn unbounded_time_reads_as_max() {
        assert_eq!(
            Limits::new().compile_time(None).get(LimitKind::CompileTime),
            u64::MAX
        );
    }
}
