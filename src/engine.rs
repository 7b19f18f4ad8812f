//! The engine: one vocabulary, its global mask cache, the structure factory of the registered
//! templates, and the router that picks the backend for each request.
//!
//! Start-up: [`Engine::new`], then [`Engine::register_templates`]. Per request:
//! [`Engine::compile`] (or [`Engine::compile_json_request`], [`Engine::compile_regex`]) gives
//! a [`Constraint`], and [`Constraint::matcher`] a fresh [`Matcher`] for one sequence. The
//! engine is `Send + Sync`: a server shares one behind an `Arc` and compiles from any thread;
//! matchers are `Send`.
//!
//! # Example
//!
//! ```
//! use formwork::engine::Engine;
//! use formwork::vocab::Vocab;
//! use formwork::Matcher;
//!
//! let tokens = ["[", "1", ".", "2", "]", "</s>"];
//! let vocab = Vocab::from_token_bytes(
//!     tokens.iter().map(|t| t.as_bytes().to_vec()).collect(), &[5], &[5],
//! ).unwrap();
//! let mut engine = Engine::new(vocab);
//! engine
//!     .register_template_source("ids.fw", r#"pick(ids: choice) ::= "[" ids "]""#)
//!     .unwrap();
//! let constraint = engine.compile(r#"pick(ids: {"1.2", "2"})"#).unwrap();
//! let mut m = constraint.matcher();
//! let mut mask = vec![0u32; 1];
//! m.fill_mask(&mut mask).unwrap();
//! assert_eq!(mask[0], 0b000001); // "["
//! m.consume(0).unwrap();
//! m.fill_mask(&mut mask).unwrap();
//! assert_eq!(mask[0], 0b001010); // "1" or "2"
//! m.consume_all(&[1, 2, 3, 4, 5]).unwrap(); // 1.2] EOS
//! assert!(m.is_terminated());
//! let err = engine.compile("outline(sections: [])").unwrap_err();
//! assert_eq!(err.kind(), formwork::CompileErrorKind::Unsupported);
//! ```

use std::path::Path;
use std::sync::Arc;

use crate::error::CompileError;
use crate::ir::Grammar;
use crate::matcher::{MatchError, Matcher};
use crate::ops::{LowerConfig, OpsMatcher, Program, RegexCompiler, Runtime};
use crate::request::Request;
use crate::template::{read_templates, StructureFactory};
use crate::vocab::{TokenId, Vocab};

/// Default byte budget of the global mask cache.
pub const DEFAULT_CACHE_BYTES: usize = 256 << 20;

/// Options for an [`Engine`].
#[derive(Clone, Copy, Debug)]
pub struct EngineConfig {
    cache_bytes: usize,
    lower: LowerConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            cache_bytes: DEFAULT_CACHE_BYTES,
            lower: LowerConfig::new(),
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

    /// Lowering options (DFA fusion limit) for templates and regexes.
    pub fn lower(mut self, config: LowerConfig) -> EngineConfig {
        self.lower = config;
        self
    }
}

/// Vocabulary, mask cache, structure factory, router. See the [module docs](self).
#[derive(Debug)]
pub struct Engine {
    runtime: Arc<Runtime>,
    regex: Arc<RegexCompiler>,
    factory: Arc<StructureFactory>,
    /// Every registered template source (name, text), so a later registration can rebuild the
    /// factory over all of them (one namespace).
    sources: Vec<(String, String)>,
    lower: LowerConfig,
}

impl Engine {
    /// An engine for `vocab` with default options and no templates.
    pub fn new(vocab: Vocab) -> Engine {
        Engine::with_config(vocab, EngineConfig::new())
    }

    /// An engine for `vocab` with `config`.
    pub fn with_config(vocab: Vocab, config: EngineConfig) -> Engine {
        let regex = Arc::new(RegexCompiler::with_config(config.lower));
        let factory = StructureFactory::builder(&vocab)
            .regex_compiler(regex.clone())
            .build()
            .expect("an empty factory always builds");
        Engine {
            runtime: Runtime::new(vocab, config.cache_bytes),
            regex,
            factory: Arc::new(factory),
            sources: Vec::new(),
            lower: config.lower,
        }
    }

    /// Registers template files, or directories of `*.fw` files, at start-up: parses, checks
    /// and lowers them (with everything registered before) into the structure factory. On error
    /// the engine keeps its previous factory.
    pub fn register_templates<P: AsRef<Path>>(
        &mut self,
        paths: impl IntoIterator<Item = P>,
    ) -> Result<(), CompileError> {
        let mut added = Vec::new();
        for path in paths {
            for (name, text) in read_templates(path.as_ref()) {
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
            .lower_config(self.lower);
        for (name, text) in self.sources.iter().chain(&added) {
            builder = builder.source(name, text);
        }
        self.factory = Arc::new(builder.build()?);
        self.sources.extend(added);
        Ok(())
    }

    /// Compiles a request in the text form (see [`crate::request`]).
    pub fn compile(&self, request: &str) -> Result<Constraint, CompileError> {
        self.compile_request(&Request::parse(request)?)
    }

    /// Compiles a request in the JSON form (see [`crate::request`]).
    pub fn compile_json_request(&self, json: &str) -> Result<Constraint, CompileError> {
        self.compile_request(&Request::parse_json(json)?)
    }

    fn compile_request(&self, request: &Request) -> Result<Constraint, CompileError> {
        match self.route(request)? {
            Route::Template => Ok(self.ops(Arc::new(request.instantiate(&self.factory)?))),
        }
    }

    /// Compiles a regex over the whole output (cached by pattern).
    pub fn compile_regex(&self, pattern: &str) -> Result<Constraint, CompileError> {
        Ok(self.ops(self.regex.compile(pattern)?))
    }

    /// The grammar IR of a text request: the same language its constraint accepts, for the
    /// reference recognizer and the CFG backend.
    pub fn request_grammar(&self, request: &str) -> Result<Grammar, CompileError> {
        let request = Request::parse(request)?;
        match self.route(&request)? {
            Route::Template => request.instantiate_ir(&self.factory),
        }
    }

    /// The router: the single place that decides which path a request takes. Structures of the
    /// factory are instantiated from their templates (operator backend); anything else is
    /// unsupported until the CFG fallback exists.
    fn route(&self, request: &Request) -> Result<Route, CompileError> {
        match self.factory.find(request.structure()) {
            Some(_) => Ok(Route::Template),
            None => Err(request.unsupported()),
        }
    }

    fn ops(&self, program: Arc<Program>) -> Constraint {
        Constraint {
            backend: Backend::Ops {
                runtime: self.runtime.clone(),
                program,
            },
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

    /// The vocabulary.
    pub fn vocab(&self) -> &Vocab {
        &self.runtime.vocab
    }
}

/// Where the router sends a request.
enum Route {
    /// A structure of the factory: instantiate its template.
    Template,
}

/// Which backend a [`Constraint`] runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum BackendKind {
    /// The operator FSM backend (templates, regexes).
    Operators,
}

/// A compiled request: cheap to clone, one [`matcher`](Self::matcher) per sequence.
#[derive(Clone, Debug)]
pub struct Constraint {
    backend: Backend,
}

#[derive(Clone, Debug)]
enum Backend {
    Ops {
        runtime: Arc<Runtime>,
        program: Arc<Program>,
    },
}

impl Constraint {
    /// A matcher at the start of the constraint.
    pub fn matcher(&self) -> ConstraintMatcher {
        match &self.backend {
            Backend::Ops { runtime, program } => ConstraintMatcher {
                inner: Inner::Ops(OpsMatcher::new(runtime.clone(), program.clone())),
            },
        }
    }

    /// The backend it runs on.
    pub fn backend(&self) -> BackendKind {
        match self.backend {
            Backend::Ops { .. } => BackendKind::Operators,
        }
    }

    /// The operator program, for the operator backend.
    pub fn program(&self) -> Option<&Arc<Program>> {
        match &self.backend {
            Backend::Ops { program, .. } => Some(program),
        }
    }
}

/// The matcher of a [`Constraint`], whichever backend it runs on. Cloning forks it.
#[derive(Clone, Debug)]
pub struct ConstraintMatcher {
    inner: Inner,
}

#[derive(Clone, Debug)]
enum Inner {
    Ops(OpsMatcher),
}

impl Matcher for ConstraintMatcher {
    fn fill_mask(&mut self, out: &mut [u32]) -> Result<(), MatchError> {
        match &mut self.inner {
            Inner::Ops(m) => m.fill_mask(out),
        }
    }

    fn consume(&mut self, token: TokenId) -> Result<(), MatchError> {
        match &mut self.inner {
            Inner::Ops(m) => m.consume(token),
        }
    }

    fn rollback(&mut self, n: usize) -> Result<(), MatchError> {
        match &mut self.inner {
            Inner::Ops(m) => m.rollback(n),
        }
    }

    fn is_accepting(&self) -> bool {
        match &self.inner {
            Inner::Ops(m) => m.is_accepting(),
        }
    }

    fn is_terminated(&self) -> bool {
        match &self.inner {
            Inner::Ops(m) => m.is_terminated(),
        }
    }

    fn forced_bytes(&self) -> Vec<u8> {
        match &self.inner {
            Inner::Ops(m) => m.forced_bytes(),
        }
    }

    fn forced_tokens(&self) -> Vec<TokenId> {
        match &self.inner {
            Inner::Ops(m) => m.forced_tokens(),
        }
    }

    fn num_consumed(&self) -> usize {
        match &self.inner {
            Inner::Ops(m) => m.num_consumed(),
        }
    }

    fn reset(&mut self) {
        match &mut self.inner {
            Inner::Ops(m) => m.reset(),
        }
    }
}
