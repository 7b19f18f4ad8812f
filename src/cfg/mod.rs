//! The CFG fallback: a byte-level Earley engine over the grammar IR, with an adaptive
//! token-mask cache.
//!
//! Anything the operator backend cannot express (recursive JSON schemas, arbitrary grammars)
//! runs here. A [`CfgCompiler`] holds a vocabulary and the cross-grammar mask cache; it
//! compiles IR grammars into [`CfgGrammar`]s (shared, `Send + Sync`), and each sequence gets a
//! [`CfgMatcher`] implementing [`Matcher`].
//!
//! How a mask is computed (see `mask.rs`): each item of the last Earley row that reads bytes
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

mod chart;
mod hash;
mod mask;
mod program;

use std::cell::RefCell;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::base::bitmask::set_bit;
use crate::base::byteset::ByteSet;
use crate::base::token::TokenId;
use crate::error::{CompileError, Location};
use crate::ir::Grammar;
use crate::mask::{CacheStats, MaskCache};
use crate::matcher::{rollback_to, MatchError, MatchErrorKind, Matcher};
use crate::vocab::{TokenKind, Vocab};

use chart::{Chart, Overflow, RowLimits};
use mask::CacheEntry;
use program::{CompileOptions, Program, SPECIALS};

/// Options of the CFG engine: cache budget and the limits that turn pathological grammars into
/// typed errors instead of hangs.
///
/// # Example
///
/// ```
/// use formwork::cfg::CfgConfig;
/// use std::time::Duration;
///
/// let config = CfgConfig::new()
///     .cache_bytes(64 << 20)
///     .compile_time(Some(Duration::from_secs(2)))
///     .max_row_items(50_000);
/// assert_eq!(config.get_cache_bytes(), 64 << 20);
/// ```
#[derive(Clone, Debug)]
pub struct CfgConfig {
    cache_bytes: usize,
    max_states: usize,
    max_dfa_states: usize,
    compile_time: Option<Duration>,
    max_row_items: usize,
    max_row_work: usize,
    context_depth: usize,
    mask_cache: bool,
    minimize: bool,
    max_forced_bytes: usize,
}

impl Default for CfgConfig {
    fn default() -> Self {
        CfgConfig {
            cache_bytes: 256 << 20,
            max_states: 2_000_000,
            max_dfa_states: 50_000,
            compile_time: Some(Duration::from_secs(10)),
            max_row_items: 100_000,
            max_row_work: 20_000_000,
            context_depth: 3,
            mask_cache: true,
            minimize: false,
            max_forced_bytes: 4096,
        }
    }
}

impl CfgConfig {
    /// Defaults: 256 MiB of mask cache, 2M automaton states (50k per determinized rule), 10 s
    /// compile budget, 100k items per Earley row, context depth 3.
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

    /// Most automaton states a grammar may compile to (a typed `Limit` error past it).
    pub fn max_states(mut self, n: usize) -> CfgConfig {
        self.max_states = n;
        self
    }

    /// Most states a rule's automaton is determinized to; past it the rule stays
    /// nondeterministic (correct, with larger Earley rows).
    pub fn max_dfa_states(mut self, n: usize) -> CfgConfig {
        self.max_dfa_states = n;
        self
    }

    /// Time budget of one compilation (`None`: unbounded); past it, a typed `Limit` error.
    pub fn compile_time(mut self, budget: Option<Duration>) -> CfgConfig {
        self.compile_time = budget;
        self
    }

    /// Most items in one Earley row; past it `consume`/`fill_mask` fail with
    /// [`MatchErrorKind::Limit`] and change nothing.
    pub fn max_row_items(mut self, n: usize) -> CfgConfig {
        self.max_row_items = n;
        self
    }

    /// Most completion steps spent on one Earley row (same error as `max_row_items`).
    pub fn max_row_work(mut self, n: usize) -> CfgConfig {
        self.max_row_work = n;
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

    fn row_limits(&self) -> RowLimits {
        RowLimits {
            max_items: self.max_row_items,
            max_work: self.max_row_work,
        }
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
    cache: Arc<MaskCache<u128, CacheEntry>>,
    index: Arc<mask::VocabIndex>,
}

impl CfgCompiler {
    /// A compiler for `vocab`.
    pub fn new(vocab: &Vocab, config: CfgConfig) -> CfgCompiler {
        let cache = Arc::new(MaskCache::new(config.cache_bytes));
        let index = Arc::new(mask::VocabIndex::new(vocab));
        // Built now, at start-up, rather than inside the first mask.
        vocab.slices();
        CfgCompiler {
            vocab: vocab.clone(),
            config,
            cache,
            index,
        }
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// Compiles an IR grammar. Errors: `UnknownSpecialToken` (a special the vocabulary lacks),
    /// `EmptyLanguage` (the start rule derives nothing), `Limit` (size or time budget).
    pub fn compile(&self, grammar: &Grammar) -> Result<Arc<CfgGrammar>, CompileError> {
        let options = CompileOptions {
            max_states: self.config.max_states,
            max_dfa_states: self.config.max_dfa_states,
            deadline: self.config.compile_time.map(|d| Instant::now() + d),
            minimize: self.config.minimize,
        };
        let prog = program::compile(grammar, &self.vocab, &options)?;
        let row_limits = self.config.row_limits();
        let initial = Chart::new(&prog, row_limits).map_err(|Overflow(e)| {
            CompileError::over_limit(e, Location::None, "the first Earley row")
        })?;
        // The cache keys: every first walk needs them, so they are part of the grammar.
        let hashes = hash::Hashes::new(&prog);
        Ok(Arc::new(CfgGrammar {
            hashes,
            prog,
            vocab: self.vocab.clone(),
            config: self.config.clone(),
            cache: self.cache.clone(),
            index: self.index.clone(),
            walks: Mutex::new(None),
            initial,
        }))
    }

    /// Hits, misses and size of the shared mask cache.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }
}

/// A compiled grammar, shared by all matchers of a constraint (and across threads).
pub struct CfgGrammar {
    prog: Program,
    vocab: Vocab,
    config: CfgConfig,
    cache: Arc<MaskCache<u128, CacheEntry>>,
    index: Arc<mask::VocabIndex>,
    hashes: hash::Hashes,
    walks: Mutex<Option<mask::SharedWalks>>,
    initial: Chart,
}

impl std::fmt::Debug for CfgGrammar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CfgGrammar")
            .field("units", &self.prog.units.len())
            .field("states", &self.prog.states.len())
            .field("byte_classes", &self.prog.n_classes())
            .finish()
    }
}

impl CfgGrammar {
    /// A matcher in the initial state.
    pub fn matcher(self: &Arc<Self>) -> CfgMatcher {
        CfgMatcher {
            grammar: self.clone(),
            chart: RefCell::new(self.initial.clone()),
            history: Vec::new(),
            eos: 0,
            scratch: mask::Scratch::default(),
        }
    }

    /// Number of automaton states the grammar compiled to.
    pub fn num_states(&self) -> usize {
        self.prog.states.len()
    }

    fn hashes(&self) -> &hash::Hashes {
        &self.hashes
    }
}

/// The state of one sequence under a [`CfgGrammar`]: Earley rows, one per consumed byte or
/// special token, and the rows before each consumed token (for `rollback`).
pub struct CfgMatcher {
    grammar: Arc<CfgGrammar>,
    // `forced_bytes(&self)` looks ahead by pushing rows and truncating them again.
    chart: RefCell<Chart>,
    history: Vec<u32>,
    /// EOS tokens consumed (at the end of `history`).
    eos: usize,
    scratch: mask::Scratch,
}

/// Forks the sequence: the copy has the same rows and history (scratch buffers start empty).
impl Clone for CfgMatcher {
    fn clone(&self) -> CfgMatcher {
        CfgMatcher {
            grammar: self.grammar.clone(),
            chart: RefCell::new(self.chart.borrow().clone()),
            history: self.history.clone(),
            eos: self.eos,
            scratch: mask::Scratch::default(),
        }
    }
}

impl std::fmt::Debug for CfgMatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CfgMatcher")
            .field("consumed", &self.history.len())
            .field("rows", &self.chart.borrow().num_rows())
            .field("terminated", &(self.eos > 0))
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
    fn limit(o: Overflow) -> MatchError {
        MatchError::new(MatchErrorKind::Limit(o.0))
    }

    /// The units every continuation starts with, and whether they reach the end of the
    /// language (accepting with nothing else possible).
    fn forced_units(&self) -> (Vec<Forced>, bool) {
        let g = &*self.grammar;
        let prog = &g.prog;
        let mut out = Vec::new();
        if self.eos > 0 {
            return (out, false);
        }
        let mut chart = self.chart.borrow_mut();
        let base = chart.num_rows();
        let mut at_end = false;
        while out.len() < g.config.max_forced_bytes {
            let accepting = chart.is_accepting(prog);
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
            let pushed = match next {
                Forced::Byte(b) => chart.push_byte(prog, b),
                Forced::Special(s) => chart.push_special(prog, s),
            };
            if pushed != Ok(true) {
                break;
            }
            out.push(next);
        }
        chart.truncate(base);
        (out, at_end)
    }
}

impl Matcher for CfgMatcher {
    fn fill_mask(&mut self, out: &mut [u32]) -> Result<(), MatchError> {
        let g = &*self.grammar;
        let words = g.vocab.mask_words();
        if out.len() != words {
            return Err(MatchError::new(MatchErrorKind::MaskSize {
                expected: words,
                got: out.len(),
            }));
        }
        if self.eos > 0 {
            out.fill(0);
            g.vocab.eos_tokens().iter().for_each(|&t| set_bit(out, t));
            return Ok(());
        }
        mask::fill(g, self.chart.get_mut(), &mut self.scratch, out).map_err(Self::limit)
    }

    fn consume(&mut self, token: TokenId) -> Result<(), MatchError> {
        let g = &*self.grammar;
        let (prog, vocab) = (&g.prog, &g.vocab);
        if token as usize >= vocab.mask_width() {
            return Err(MatchError::new(MatchErrorKind::UnknownToken {
                token,
                mask_width: vocab.mask_width(),
            }));
        }
        let step = self.history.len();
        let rejected = |at_byte| {
            MatchError::new(MatchErrorKind::Rejected {
                token,
                step,
                at_byte,
            })
        };
        let chart = self.chart.get_mut();
        let rows = chart.num_rows();
        if self.eos > 0 {
            if !vocab.is_eos(token) {
                return Err(MatchError::new(MatchErrorKind::Terminated));
            }
            self.eos += 1;
            self.history.push(rows as u32);
            return Ok(());
        }
        match vocab.kind(token) {
            Some(TokenKind::Text) => {
                for (i, &b) in vocab.token_bytes(token).iter().enumerate() {
                    match chart.push_byte(prog, b) {
                        Ok(true) => {}
                        Ok(false) => {
                            chart.truncate(rows);
                            return Err(rejected(i));
                        }
                        Err(o) => {
                            chart.truncate(rows);
                            return Err(Self::limit(o));
                        }
                    }
                }
            }
            Some(TokenKind::Special) => {
                // EOS ends a complete output; otherwise a special is a symbol of the grammar.
                if vocab.is_eos(token) && chart.is_accepting(prog) {
                    self.eos = 1;
                } else {
                    let sid = prog.special_index(token).ok_or_else(|| rejected(0))?;
                    if !chart.push_special(prog, sid).map_err(Self::limit)? {
                        return Err(rejected(0));
                    }
                }
            }
            _ => return Err(rejected(0)),
        }
        self.history.push(rows as u32);
        Ok(())
    }

    fn rollback(&mut self, n: usize) -> Result<(), MatchError> {
        let Some(keep) = rollback_to(n, self.history.len())? else {
            return Ok(());
        };
        self.chart.get_mut().truncate(self.history[keep] as usize);
        self.scratch.forget_rows();
        self.history.truncate(keep);
        self.eos -= n.min(self.eos);
        Ok(())
    }

    fn is_accepting(&self) -> bool {
        self.eos > 0 || self.chart.borrow().is_accepting(&self.grammar.prog)
    }

    fn is_terminated(&self) -> bool {
        self.eos > 0
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
                out.push(g.prog.specials[s as usize].1);
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
        self.history.len()
    }

    fn reset(&mut self) {
        self.chart.get_mut().truncate(1);
        self.scratch.forget_rows();
        self.history.clear();
        self.eos = 0;
    }

    fn consume_bytes(&mut self, bytes: &[u8]) -> Result<(), MatchError> {
        if self.eos > 0 {
            return Err(MatchError::new(MatchErrorKind::Terminated));
        }
        let prog = &self.grammar.prog;
        let chart = self.chart.get_mut();
        let rows = chart.num_rows();
        for (at_byte, &b) in bytes.iter().enumerate() {
            let failure = match chart.push_byte(prog, b) {
                Ok(true) => continue,
                Ok(false) => MatchError::new(MatchErrorKind::TextRejected {
                    step: self.history.len(),
                    at_byte,
                }),
                Err(o) => Self::limit(o),
            };
            chart.truncate(rows);
            return Err(failure);
        }
        self.history.push(rows as u32);
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
