//! The engine: one vocabulary, its global mask cache, the structure factory of the registered
//! templates, and the router that picks the backend for each request.
//!
//! Start-up: [`Engine::new`], then [`Engine::register_templates`]. Per request:
//! [`Engine::compile`] (or [`Engine::compile_json_request`], [`Engine::compile_regex`],
//! [`Engine::compile_json_schema`], [`Engine::compile_gbnf`], [`Engine::compile_tags`],
//! [`Engine::compile_grammar`]) gives a [`Constraint`], and [`Constraint::matcher`] a fresh
//! [`Matcher`] for one sequence. The engine is `Send + Sync`: a server shares one behind an
//! `Arc` and compiles from any thread; matchers are `Send`.
//!
//! Routing: a request naming a structure of the factory is instantiated from its template.
//! Otherwise the built-in structures `json_schema(schema: "...")`, `gbnf(grammar: "...")` and
//! `regex(pattern: /.../)` go to their front ends; any other name is `Unsupported`. Every
//! grammar then goes through one router ([`Engine::route`]): regular grammars are lowered to
//! the operator backend, recursive ones run on the Earley backend ([`crate::cfg`]), whose
//! cross-grammar mask cache the engine shares between all requests.
//!
//!
//! The usage pattern and an example are in the [crate docs](crate).

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use crate::base::token::TokenId;
use crate::cfg::{CfgCompiler, CfgConfig, CfgGrammar, CfgMatcher};
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::gbnf::gbnf_to_ir_limited;
use crate::front::json_schema::{
    compile_schema_keeping_state, compile_schema_within, JsonSchemaOptions,
};
use crate::front::tags::TagDispatch;
use crate::ir::Grammar;
use crate::limits::{Deadline, LimitKind, Limits};
use crate::mask::CacheStats;
use crate::matcher::json_state::{JsonState, TokenReads, TrackedPaths};
use crate::matcher::{MatchError, Matcher};
use crate::ops::{
    fits_operators, lower_within, regex_grammar, warm, LowerConfig, OpsMatcher, Program,
    RegexCompiler, Runtime, Warmth,
};
use crate::request::{Builtin, Request};
use crate::template::{fixed_stretches, read_templates, StructureFactory};
use crate::vocab::Vocab;

/// Default byte budget of the global mask cache.
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

/// Default byte budget of the template masks computed at registration
/// ([`EngineConfig::template_mask_bytes`]). The shipped templates take 1.3 MiB on Qwen3's
/// 151k tokens (267 masks, computed in ~40 ms); a full-width mask is 19 KiB there, so this
/// holds at least 1,700 of them.
pub const DEFAULT_TEMPLATE_MASK_BYTES: usize = 32 << 20;

/// Which backend grammars, schemas and regexes run on (templates always run on operators).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BackendChoice {
    /// The router decides: operators for regular grammars, Earley for recursive ones.
    #[default]
    Auto,
    /// Always the operator backend: a recursive grammar is a `NotRegular` error.
    Operators,
    /// Always the Earley backend (for differential tests and measurements).
    Earley,
}

/// Options for an [`Engine`].
#[derive(Clone, Debug)]
pub struct EngineConfig {
    cache_bytes: usize,
    lower: LowerConfig,
    cfg: CfgConfig,
    backend: BackendChoice,
    limits: Limits,
    template_mask_bytes: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            cache_bytes: DEFAULT_CACHE_BYTES,
            template_mask_bytes: DEFAULT_TEMPLATE_MASK_BYTES,
            lower: LowerConfig::new(),
            cfg: CfgConfig::new(),
            backend: BackendChoice::Auto,
            limits: Limits::new(),
        }
    }
}

impl EngineConfig {
    /// Default options.
    pub fn new() -> EngineConfig {
        EngineConfig::default()
    }

    /// Byte budget of the global mask cache shared by every matcher.
    pub fn cache_bytes(mut self, bytes: usize) -> EngineConfig {
        self.cache_bytes = bytes;
        self
    }

    /// Lowering options (DFA fusion size) for templates, regexes and regular grammars.
    pub fn lower(mut self, config: LowerConfig) -> EngineConfig {
        self.lower = config;
        self
    }

    /// Options of the Earley backend (its own cross-grammar cache budget, context depth...).
    pub fn cfg(mut self, config: CfgConfig) -> EngineConfig {
        self.cfg = config;
        self
    }

    /// Forces a backend for grammars, schemas and regexes (default: [`BackendChoice::Auto`]).
    pub fn backend(mut self, choice: BackendChoice) -> EngineConfig {
        self.backend = choice;
        self
    }

    /// The ceilings every compilation and matcher of the engine works under: each
    /// `Engine::compile_*` call has one compile-time budget for its front end and backend.
    pub fn limits(mut self, limits: Limits) -> EngineConfig {
        self.limits = limits;
        self
    }

    /// Byte budget of the template masks [`Engine::register_templates`] computes before any
    /// request (default 32 MiB; 0: none, every mask is computed on
    /// first use). They are pinned in the global cache, outside `cache_bytes`, until the next
    /// registration replaces them.
    pub fn template_mask_bytes(mut self, bytes: usize) -> EngineConfig {
        self.template_mask_bytes = bytes;
        self
    }
}

/// Vocabulary, mask caches, structure factory, router. See the [crate docs](crate).
pub struct Engine {
    runtime: Arc<Runtime>,
    regex: Arc<RegexCompiler>,
    factory: Arc<StructureFactory>,
    /// One Earley compiler for every request, so its cross-grammar mask cache is shared.
    cfg: CfgCompiler,
    /// Every registered template source (name, text), so a later registration can rebuild the
    /// factory over all of them (one namespace).
    sources: Vec<(String, String)>,
    lower: LowerConfig,
    backend: BackendChoice,
    limits: Limits,
    template_mask_bytes: usize,
    warmth: Warmth,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("vocab", &self.runtime.vocab.source())
            .field("structures", &self.factory.structures().len())
            .field("backend", &self.backend)
            .finish()
    }
}

impl Engine {
    /// An engine for `vocab` with default options and no templates.
    pub fn new(vocab: Vocab) -> Engine {
        Engine::with_config(vocab, EngineConfig::new())
    }

    /// An engine for `vocab` with `config`.
    pub fn with_config(vocab: Vocab, config: EngineConfig) -> Engine {
        let regex =
            Arc::new(RegexCompiler::with_config(config.lower).with_limits(config.limits.clone()));
        let factory = StructureFactory::builder(&vocab)
            .regex_compiler(regex.clone())
            .build()
            .expect("an empty factory always builds");
        Engine {
            cfg: CfgCompiler::new(&vocab, config.cfg).with_limits(config.limits.clone()),
            runtime: Runtime::with_limits(vocab, config.cache_bytes, config.limits.clone()),
            regex,
            factory: Arc::new(factory),
            sources: Vec::new(),
            lower: config.lower,
            backend: config.backend,
            limits: config.limits,
            template_mask_bytes: config.template_mask_bytes,
            warmth: Warmth::default(),
        }
    }

    /// Registers template files, or directories of `*.fw` files, at start-up: parses, checks
    /// and lowers them (with everything registered before) into the structure factory, then
    /// computes the mask of every template state no request argument decides, so that no
    /// request pays for it (see [`Engine::template_warmth`]). On error the engine keeps its
    /// previous factory.
    pub fn register_templates<P: AsRef<Path>>(
        &mut self,
        paths: impl IntoIterator<Item = P>,
    ) -> Result<(), CompileError> {
        let mut added = Vec::new();
        for path in paths {
            for (name, text) in read_templates(path.as_ref(), &self.limits) {
                added.push((name, text?));
            }
        }
        self.rebuild(added)
    }

    /// Registers template text (named `name` in error locations).
    pub fn register_template_source(&mut self, name: &str, text: &str) -> Result<(), CompileError> {
        self.rebuild(vec![(name.to_string(), text.to_string())])
    }

    fn rebuild(&mut self, added: Vec<(String, String)>) -> Result<(), CompileError> {
        let mut builder = StructureFactory::builder(&self.runtime.vocab)
            .regex_compiler(self.regex.clone())
            .lower_config(self.lower)
            .limits(self.limits.clone());
        for (name, text) in self.sources.iter().chain(&added) {
            builder = builder.source(name, text);
        }
        self.factory = Arc::new(builder.build()?);
        self.sources.extend(added);
        let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
        self.warmth = warm(
            &self.runtime,
            &fixed_stretches(&self.factory),
            self.template_mask_bytes,
            workers,
            &self.limits.deadline(),
        );
        Ok(())
    }

    /// What the last registration precomputed: the template states no argument decides, their
    /// masks pinned in the global cache within [`EngineConfig::template_mask_bytes`] and the
    /// compile-time limit (past either, the rest is computed on first use).
    pub fn template_warmth(&self) -> &Warmth {
        &self.warmth
    }

    /// Compiles a request in the text form (see [`crate::request`]).
    pub fn compile(&self, request: &str) -> Result<Constraint, CompileError> {
        let deadline = self.limits.deadline();
        self.compile_request(&Request::parse_with(request, &self.limits)?, &deadline)
    }

    /// Compiles a request in the JSON form (see [`crate::request`]).
    pub fn compile_json_request(&self, json: &str) -> Result<Constraint, CompileError> {
        let deadline = self.limits.deadline();
        self.compile_request(&Request::parse_json_with(json, &self.limits)?, &deadline)
    }

    fn compile_request(
        &self,
        request: &Request,
        deadline: &Deadline,
    ) -> Result<Constraint, CompileError> {
        match self.route_request(request)? {
            RequestRoute::Template => {
                let program = request.instantiate_within(&self.factory, deadline)?;
                Ok(self.ops(Arc::new(program)))
            }
            RequestRoute::Builtin(Builtin::Regex(pattern)) => {
                self.compile_regex_within(pattern, deadline)
            }
            RequestRoute::Builtin(b) => {
                self.compile_grammar_within(&self.builtin_grammar(b, deadline)?, deadline)
            }
        }
    }

    /// Compiles a regex over the whole output. On the operator backend (the router's choice:
    /// a regex is regular) programs are cached by pattern.
    pub fn compile_regex(&self, pattern: &str) -> Result<Constraint, CompileError> {
        self.compile_regex_within(pattern, &self.limits.deadline())
    }

    fn compile_regex_within(
        &self,
        pattern: &str,
        deadline: &Deadline,
    ) -> Result<Constraint, CompileError> {
        match self.backend {
            BackendChoice::Earley => {
                self.compile_grammar_within(&regex_grammar(pattern, &self.limits)?.0, deadline)
            }
            BackendChoice::Auto | BackendChoice::Operators => {
                Ok(self.ops(self.regex.compile_within(pattern, deadline)?))
            }
        }
    }

    /// Compiles a JSON Schema with `options` (see [`crate::front::json_schema`]). Warnings of
    /// a lenient compilation are on [`Constraint::warnings`].
    ///
    /// ```
    /// use formwork::{BackendKind, Engine, JsonSchemaOptions};
    /// use formwork::vocab::Vocab;
    /// use serde_json::json;
    ///
    /// let engine = Engine::new(Vocab::embedded_qwen3().unwrap());
    /// // Undeclared properties would allow any JSON value (recursive): none here.
    /// let flat = json!({"type": "object", "properties": {"n": {"type": "integer"}},
    ///                   "additionalProperties": false});
    /// let c = engine.compile_json_schema(&flat, &JsonSchemaOptions::new()).unwrap();
    /// assert_eq!(c.backend(), BackendKind::Operators);
    /// let tree = json!({"type": "object", "properties": {"kids": {"type": "array", "items": {"$ref": "#"}}}});
    /// let c = engine.compile_json_schema(&tree, &JsonSchemaOptions::new()).unwrap();
    /// assert_eq!(c.backend(), BackendKind::Earley);
    /// ```
    pub fn compile_json_schema(
        &self,
        schema: &Value,
        options: &JsonSchemaOptions,
    ) -> Result<Constraint, CompileError> {
        let deadline = self.limits.deadline();
        let (compiled, tracked) =
            compile_schema_keeping_state(schema, options, &self.limits, &deadline)?;
        let mut constraint = self.compile_grammar_within(&compiled.grammar, &deadline)?;
        constraint.warnings = compiled.warnings.into();
        constraint.tracked = tracked.map(|paths| Tracked {
            reads: Arc::new(TokenReads::new(&paths, self.vocab())),
            paths: Arc::new(paths),
            vocab: self.vocab().clone(),
            history: self.limits.history_cap(),
        });
        Ok(constraint)
    }

    /// Compiles a llama.cpp GBNF grammar (start rule `root`; `source` names it in errors).
    pub fn compile_gbnf(&self, text: &str, source: &str) -> Result<Constraint, CompileError> {
        let deadline = self.limits.deadline();
        let grammar = gbnf_to_ir_limited(text, source, &self.limits, &deadline)?;
        self.compile_grammar_within(&grammar, &deadline)
    }

    /// Compiles a tag dispatch (free text with tool calls, see [`crate::front::tags`]).
    pub fn compile_tags(&self, dispatch: &TagDispatch) -> Result<Constraint, CompileError> {
        let deadline = self.limits.deadline();
        let grammar = dispatch.compile_within(&self.limits, &deadline)?;
        self.compile_grammar_within(&grammar, &deadline)
    }

    /// Compiles an IR grammar through the router: the entry point every grammar-shaped input
    /// (schemas, GBNF, tag dispatch, built-in requests) goes through.
    pub fn compile_grammar(&self, grammar: &Grammar) -> Result<Constraint, CompileError> {
        self.compile_grammar_within(grammar, &self.limits.deadline())
    }

    /// [`Engine::compile_grammar`] within the deadline of the compilation it is part of.
    fn compile_grammar_within(
        &self,
        grammar: &Grammar,
        deadline: &Deadline,
    ) -> Result<Constraint, CompileError> {
        match self.route(grammar) {
            BackendKind::Operators => {
                let root = grammar.rule(grammar.start()).body;
                let vocab = &self.runtime.vocab;
                let program =
                    lower_within(grammar, root, vocab, &self.lower, &self.limits, deadline)?;
                Ok(self.ops(Arc::new(program)))
            }
            BackendKind::Earley => Ok(Constraint {
                backend: Backend::Earley(self.cfg.compile_within(grammar, deadline)?),
                warnings: Arc::from([]),
                tracked: None,
            }),
        }
    }

    /// The router: the backend [`compile_grammar`](Self::compile_grammar) picks for `grammar`.
    ///
    /// A structural check, linear in the grammar, that builds nothing
    /// (`ops::fits_operators`): a grammar with no rule reaching itself is regular, and
    /// `ops::lower` turns it into a program of the same size (rules inlined once per
    /// expression, bounded repeats kept as counters, never unrolled), so it takes the operator
    /// backend — unless it has an alternation of many branches too big to fuse into one DFA
    /// (each live branch is a cursor thread on every step; Earley shares their tails).
    /// Recursion needs a stack: Earley. Recursion is exactly the condition under which
    /// lowering fails with `NotRegular`, decided without attempting it.
    pub fn route(&self, grammar: &Grammar) -> BackendKind {
        match self.backend {
            BackendChoice::Operators => BackendKind::Operators,
            BackendChoice::Earley => BackendKind::Earley,
            BackendChoice::Auto if fits_operators(grammar, &self.lower) => BackendKind::Operators,
            BackendChoice::Auto => BackendKind::Earley,
        }
    }

    /// The grammar IR of a text request: the same language its constraint accepts, for the
    /// reference recognizer and the CFG backend.
    pub fn request_grammar(&self, request: &str) -> Result<Grammar, CompileError> {
        let deadline = self.limits.deadline();
        let request = Request::parse_with(request, &self.limits)?;
        match self.route_request(&request)? {
            RequestRoute::Template => {
                request.instantiate_ir_within(&self.factory, &self.limits, &deadline)
            }
            RequestRoute::Builtin(b) => self.builtin_grammar(b, &deadline),
        }
    }

    /// Which path a request takes: a structure of the factory is instantiated from its
    /// template (operator backend); otherwise a built-in structure (`json_schema`, `gbnf`,
    /// `regex`) goes to its front end and the grammar router; anything else is unsupported.
    fn route_request<'r>(&self, request: &'r Request) -> Result<RequestRoute<'r>, CompileError> {
        if self.factory.find(request.structure()).is_some() {
            return Ok(RequestRoute::Template);
        }
        match request.builtin() {
            Some(b) => Ok(RequestRoute::Builtin(b?)),
            None => Err(request.unsupported()),
        }
    }

    fn builtin_grammar(
        &self,
        builtin: Builtin,
        deadline: &Deadline,
    ) -> Result<Grammar, CompileError> {
        match builtin {
            Builtin::JsonSchema(text) => {
                let place = Location::Text {
                    source: "<json_schema>".into(),
                    line: 1,
                    col: 1,
                };
                self.limits
                    .check(LimitKind::InputBytes, text.len() as u64)
                    .map_err(|e| CompileError::over_limit(e, place, "schema text"))?;
                let schema: Value = serde_json::from_str(text).map_err(|e| {
                    CompileError::new(
                        CompileErrorKind::Syntax,
                        Location::Text {
                            source: "<json_schema>".into(),
                            line: e.line(),
                            col: e.column(),
                        },
                        format!("invalid JSON: {e}"),
                    )
                })?;
                let options = JsonSchemaOptions::new();
                Ok(compile_schema_within(&schema, &options, &self.limits, deadline)?.grammar)
            }
            Builtin::Gbnf(text) => gbnf_to_ir_limited(text, "<gbnf>", &self.limits, deadline),
            Builtin::Regex(pattern) => Ok(regex_grammar(pattern, &self.limits)?.0),
        }
    }

    fn ops(&self, program: Arc<Program>) -> Constraint {
        Constraint {
            backend: Backend::Ops {
                runtime: self.runtime.clone(),
                program,
            },
            warnings: Arc::from([]),
            tracked: None,
        }
    }

    /// The structure factory of the registered templates.
    pub fn factory(&self) -> &StructureFactory {
        &self.factory
    }

    /// The vocabulary and global mask cache shared by every matcher.
    pub fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }

    /// The ceilings this engine's compilations and matchers work under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Vocab {
        &self.runtime.vocab
    }

    /// Counters and sizes of both mask caches: the operator backend's global cache and the
    /// Earley backend's token-mask cache.
    pub fn cache_stats(&self) -> EngineCacheStats {
        EngineCacheStats {
            operators: self.runtime.cache_stats(),
            earley: self.cfg.cache_stats(),
        }
    }
}

/// What [`Engine::cache_stats`] reports.
#[derive(Clone, Copy, Debug)]
pub struct EngineCacheStats {
    /// The operator backend's global mask cache.
    pub operators: CacheStats,
    /// The Earley backend's token-mask cache (shared by every grammar the engine compiled).
    pub earley: CacheStats,
}

/// Where a request goes.
enum RequestRoute<'r> {
    /// A structure of the factory: instantiate its template.
    Template,
    /// A built-in structure the factory does not shadow.
    Builtin(Builtin<'r>),
}

/// Which backend a [`Constraint`] runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BackendKind {
    /// The operator FSM backend (templates, regexes, regular grammars and schemas).
    Operators,
    /// The byte-level Earley backend (recursive grammars and schemas).
    Earley,
}

/// A compiled request: cheap to clone, one [`matcher`](Self::matcher) per sequence.
#[derive(Clone, Debug)]
pub struct Constraint {
    backend: Backend,
    warnings: Arc<[CompileError]>,
    /// What its matchers keep beside the grammar (JSON Schema `uniqueItems` over free
    /// strings, counted `maxLength`).
    tracked: Option<Tracked>,
}

#[derive(Clone, Debug)]
enum Backend {
    Ops {
        runtime: Arc<Runtime>,
        program: Arc<Program>,
    },
    Earley(Arc<CfgGrammar>),
}

/// What a matcher needs to keep its state beside the grammar (`matcher::json_state`).
#[derive(Clone, Debug)]
struct Tracked {
    paths: Arc<TrackedPaths>,
    vocab: Vocab,
    history: usize,
    reads: Arc<TokenReads>,
}

impl Constraint {
    /// A matcher at the start of the constraint.
    pub fn matcher(&self) -> ConstraintMatcher {
        let inner = match &self.backend {
            Backend::Ops { runtime, program } => {
                Inner::Ops(OpsMatcher::new(runtime.clone(), program.clone()))
            }
            Backend::Earley(grammar) => Inner::Earley(grammar.matcher()),
        };
        let state = self.tracked.as_ref().map(|d| {
            Box::new(JsonState::new(
                d.paths.clone(),
                d.vocab.clone(),
                d.history,
                d.reads.clone(),
            ))
        });
        ConstraintMatcher { inner, state }
    }

    /// The backend it runs on.
    pub fn backend(&self) -> BackendKind {
        match self.backend {
            Backend::Ops { .. } => BackendKind::Operators,
            Backend::Earley(_) => BackendKind::Earley,
        }
    }

    /// The operator program, for the operator backend.
    pub fn program(&self) -> Option<&Arc<Program>> {
        match &self.backend {
            Backend::Ops { program, .. } => Some(program),
            Backend::Earley(_) => None,
        }
    }

    /// What a JSON Schema compilation dropped (lenient), approximated, or kept in the
    /// schema's order ([`PropertyOrder::AnyOrSchema`](crate::PropertyOrder::AnyOrSchema)),
    /// each with its JSON pointer (empty otherwise).
    pub fn warnings(&self) -> &[CompileError] {
        &self.warnings
    }
}

/// The matcher of a [`Constraint`], whichever backend it runs on. Cloning forks it.
#[derive(Clone, Debug)]
pub struct ConstraintMatcher {
    inner: Inner,
    state: Option<Box<JsonState>>,
}

#[derive(Clone, Debug)]
enum Inner {
    Ops(OpsMatcher),
    Earley(CfgMatcher),
}

impl ConstraintMatcher {
    fn backend(&self) -> &dyn Matcher {
        match &self.inner {
            Inner::Ops(m) => m,
            Inner::Earley(m) => m,
        }
    }

    /// The backend's matcher, and the state kept beside it if any.
    fn parts(&mut self) -> (&mut dyn Matcher, Option<&mut JsonState>) {
        let inner: &mut dyn Matcher = match &mut self.inner {
            Inner::Ops(m) => m,
            Inner::Earley(m) => m,
        };
        (inner, self.state.as_deref_mut())
    }
}

impl Matcher for ConstraintMatcher {
    fn fill_mask(&mut self, out: &mut [u32]) -> Result<(), MatchError> {
        match self.parts() {
            (inner, Some(d)) => d.fill_mask(inner, out),
            (inner, None) => inner.fill_mask(out),
        }
    }

    fn consume(&mut self, token: TokenId) -> Result<(), MatchError> {
        match self.parts() {
            (inner, Some(d)) => d.consume(inner, token),
            (inner, None) => inner.consume(token),
        }
    }

    fn rollback(&mut self, n: usize) -> Result<(), MatchError> {
        match self.parts() {
            (inner, Some(d)) => d.rollback(inner, n),
            (inner, None) => inner.rollback(n),
        }
    }

    fn is_accepting(&self) -> bool {
        self.backend().is_accepting()
    }

    fn is_terminated(&self) -> bool {
        self.backend().is_terminated()
    }

    // The backend's are right as they are. A free string never forces its closing quote, so a
    // forced stretch never closes an item of a distinct array; a counted string's viable
    // completions are the grammar's, so they start with its forced bytes (a quote only the
    // bound forces is not reported: jump-forward is shorter there, never wrong).
    fn forced_bytes(&self) -> Vec<u8> {
        self.backend().forced_bytes()
    }

    fn forced_tokens(&self) -> Vec<TokenId> {
        self.backend().forced_tokens()
    }

    fn num_consumed(&self) -> usize {
        self.backend().num_consumed()
    }

    fn reset(&mut self) {
        let (inner, state) = self.parts();
        inner.reset();
        if let Some(d) = state {
            d.reset();
        }
    }

    fn consume_bytes(&mut self, bytes: &[u8]) -> Result<(), MatchError> {
        match self.parts() {
            (inner, Some(d)) => d.consume_bytes(inner, bytes),
            (inner, None) => inner.consume_bytes(bytes),
        }
    }
}
