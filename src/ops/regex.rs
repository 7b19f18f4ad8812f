//! The regex compiler: a pattern to an operator program (through the grammar IR and
//! [`lower`](super::lower)), cached by pattern within a byte budget, or to a single DFA leaf.

use std::sync::Arc;

use super::leaf::{dfa_from_hir, Leaf};
use super::lower::{lower_within, LowerConfig, OpsLowering};
use super::program::Program;
use crate::error::{CompileError, CompileErrorKind};
use crate::ir::{ExprId, Grammar, GrammarBuilder};
use crate::limits::{Deadline, LimitKind, Limits};
use crate::mask::{MaskCache, Weigh};
use crate::vocab::Vocab;

/// Default byte budget of a [`RegexCompiler`]'s programs cached by pattern.
pub const DEFAULT_REGEX_CACHE_BYTES: usize = 32 << 20;

/// A compiled regex in the cache, weighed by its program's tables and its pattern.
struct CachedProgram {
    program: Arc<Program>,
    pattern_bytes: usize,
}

impl Weigh for CachedProgram {
    fn weight(&self) -> usize {
        self.program.heap_bytes() + self.pattern_bytes
    }
}

/// Compiles regexes to operator programs, caching them by pattern within a byte budget.
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
pub struct RegexCompiler {
    config: LowerConfig,
    limits: Limits,
    cache: MaskCache<String, CachedProgram>,
}

impl std::fmt::Debug for RegexCompiler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegexCompiler")
            .field("config", &self.config)
            .field("cache", &self.cache.stats())
            .finish()
    }
}

impl Default for RegexCompiler {
    fn default() -> Self {
        RegexCompiler::with_config(LowerConfig::new())
    }
}

impl RegexCompiler {
    /// A compiler with default options and [`Limits`].
    pub fn new() -> RegexCompiler {
        RegexCompiler::default()
    }

    /// A compiler with these lowering options.
    pub fn with_config(config: LowerConfig) -> RegexCompiler {
        RegexCompiler {
            config,
            limits: Limits::new(),
            cache: MaskCache::new(DEFAULT_REGEX_CACHE_BYTES),
        }
    }

    /// The compiler under `limits` (compile time, automaton sizes, nesting).
    pub fn with_limits(mut self, limits: Limits) -> RegexCompiler {
        self.limits = limits;
        self
    }

    /// The compiler with a cache of at most `bytes` of programs (default
    /// [`DEFAULT_REGEX_CACHE_BYTES`]).
    pub fn with_cache_bytes(mut self, bytes: usize) -> RegexCompiler {
        self.cache = MaskCache::new(bytes);
        self
    }

    /// Hits, misses and size of the cache of programs by pattern.
    pub fn cache_stats(&self) -> crate::mask::CacheStats {
        self.cache.stats()
    }

    /// The program of `pattern` (whole-text semantics; special tokens cannot appear in a regex,
    /// so no vocabulary is needed), within the compile time of the compiler's limits.
    pub fn compile(&self, pattern: &str) -> Result<Arc<Program>, CompileError> {
        self.compile_within(pattern, &self.limits.deadline())
    }

    /// [`RegexCompiler::compile`] within `deadline`.
    pub(crate) fn compile_within(
        &self,
        pattern: &str,
        deadline: &Deadline,
    ) -> Result<Arc<Program>, CompileError> {
        if let Some(p) = self.cache.get(&pattern.to_string()) {
            return Ok(p.program.clone());
        }
        let (grammar, root) = regex_grammar(pattern, &self.limits)?;
        let empty = Vocab::from_token_bytes(Vec::new(), &[], &[]).expect("an empty vocabulary");
        let program = lower_within(&grammar, root, &empty, &self.config, &self.limits, deadline)
            .map_err(|e| {
                let at = e.location().clone();
                e.within(at, &format!("regex {pattern:?}"))
            })?;
        let cached = CachedProgram {
            program: Arc::new(program),
            pattern_bytes: pattern.len(),
        };
        Ok(self
            .cache
            .insert(pattern.to_string(), cached)
            .program
            .clone())
    }

    /// `pattern` as a single DFA leaf (no size limit but the compiler's
    /// [`Limits::automaton_states`]), for building operator programs by hand.
    pub fn leaf(&self, pattern: &str) -> Result<Leaf, CompileError> {
        let (grammar, root) = regex_grammar(pattern, &self.limits)?;
        let deadline = self.limits.deadline();
        let empty = Vocab::from_token_bytes(Vec::new(), &[], &[]).expect("an empty vocabulary");
        let mut lowering = OpsLowering::new(&grammar, &empty, usize::MAX, &self.limits, &deadline);
        let too_large = |what: &str| {
            CompileError::unplaced(
                CompileErrorKind::Limit,
                format!("regex {pattern:?}: {what}"),
            )
        };
        let hir = lowering
            .hir(root)?
            .ok_or_else(|| too_large("nested too deeply for one DFA"))?;
        let max_states =
            usize::try_from(self.limits.get(LimitKind::AutomatonStates)).unwrap_or(usize::MAX);
        dfa_from_hir(&hir, max_states, &deadline)?
            .map(Leaf::Dfa)
            .ok_or_else(|| too_large("DFA too large"))
    }
}

/// `pattern` (whole-text semantics) as a grammar built under `limits` (groups nested at most
/// [`Limits::nesting`] deep, at most [`Limits::grammar_size`] expressions), and its root.
pub(crate) fn regex_grammar(
    pattern: &str,
    limits: &Limits,
) -> Result<(Grammar, ExprId), CompileError> {
    let mut g = GrammarBuilder::with_limits(limits);
    let root = crate::front::regex::regex_to_ir_with(pattern, &mut g, limits)?;
    let start = g.rule("regex");
    g.define(start, root)?;
    Ok((g.finish(start)?, root))
}
