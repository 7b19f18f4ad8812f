//! Templates: domain structures written once, compiled at start-up into a
//! [`StructureFactory`] that requests only bind arguments to (WGrammar's collaborative parsing).
//!
//! A template file (`templates/*.fw`, syntax in `templates/README.md`) holds EBNF rules with
//! parameters:
//!
//! ```text
//! outline(sections: list<section>) ::= sections
//! section(id: str, children: list<section> = []) ::=
//!     <|vision_start|> id " " [^\n]* <|vision_pad|> /(?s:.)*/ <|vision_end|> "\n" children
//! ```
//!
//! The files are parsed with an Earley parser (`earlgrey`), checked (names, kinds, unused or
//! unbound parameters, rule recursion), and every parameter-free stretch of every rule is
//! lowered to an operator program once, with DFA fusion. Template text is bounded by the
//! builder's [`Limits`]: each file's size (`input_bytes`), how deeply groups, repetitions and,
//! once inlined, rules nest (`nesting`), the size of the recipes (`grammar_size`, which also
//! caps a rule at 1,024 tokens) and the build time (`compile_time`). What remains per structure is a
//! *recipe*: those prebuilt fragments and literals around holes for the parameters. A request
//! (see [`crate::request`]) fills the holes; nothing is parsed or lowered again.
//!
//! # Example
//!
//! ```
//! use formwork::template::StructureFactory;
//! use formwork::vocab::Vocab;
//!
//! let vocab = Vocab::from_token_bytes(
//!     vec![b"a".to_vec(), b"<|end|>".to_vec(), b"</s>".to_vec()], &[1, 2], &[2],
//! ).unwrap();
//! let factory = StructureFactory::builder(&vocab)
//!     .source("greeting.fw", r#"greeting(name: str) ::= "Hello, " name "!" <|end|>"#)
//!     .build()
//!     .unwrap();
//! assert_eq!(factory.signature("greeting").unwrap(), "greeting(name: str)");
//! assert_eq!(factory.special_tokens().get("<|end|>"), Some(&1));
//! ```

mod check;
mod factory;
mod lexer;
mod syntax;
mod tables;
mod warm;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub(crate) use factory::{Fragment, Piece};
use tables::{NameMap, WriteTable};
pub(crate) use warm::fixed_stretches;

use crate::error::{CompileError, CompileErrorKind, Location};
use crate::ir::Grammar;
use crate::limits::Limits;
use crate::ops::{LeafOp, LowerConfig, RegexCompiler, Unit};
use crate::vocab::{TokenId, Vocab};

/// Index of a structure in a [`StructureFactory`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StructId(pub(crate) u32);

impl StructId {
    /// The index as usize.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// What a parameter takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// `str`: a string written verbatim.
    Str,
    /// `choice`: the output is one of the request's strings.
    Choice,
    /// `regex`: the output matches the request's regex.
    Regex,
    /// `int`: a decimal integer in the request's range.
    Int,
    /// `name` or `a | b`: an instance of one of these structures.
    Structure(Vec<StructId>),
    /// `list<name, "sep">`: the request's instances, in order, separated by `sep`.
    List {
        /// Structures the elements may be instances of.
        elems: Vec<StructId>,
        /// Written between two elements.
        sep: Vec<u8>,
    },
    /// `oneof<name>`: exactly one of the request's instances, chosen by the output.
    OneOf(Vec<StructId>),
}

impl ParamKind {
    /// The kind as written in a template, naming structures with `name`.
    pub fn describe(&self, name: &dyn Fn(StructId) -> String) -> String {
        let names = |ids: &[StructId]| ids.iter().map(|&s| name(s)).collect::<Vec<_>>().join(" | ");
        match self {
            ParamKind::Str => "str".into(),
            ParamKind::Choice => "choice".into(),
            ParamKind::Regex => "regex".into(),
            ParamKind::Int => "int".into(),
            ParamKind::Structure(ids) => names(ids),
            ParamKind::List { elems, sep } if sep.is_empty() => format!("list<{}>", names(elems)),
            ParamKind::List { elems, sep } => {
                format!("list<{}, {:?}>", names(elems), String::from_utf8_lossy(sep))
            }
            ParamKind::OneOf(ids) => format!("oneof<{}>", names(ids)),
        }
    }
}

/// A parameter's default, used when a request leaves it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamDefault {
    /// `= []` (lists).
    EmptyList,
    /// `= "text"` (str).
    Str(String),
}

/// A parameter of a structure.
#[derive(Clone, Debug)]
pub struct Param {
    name: String,
    kind: ParamKind,
    default: Option<ParamDefault>,
}

impl Param {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it takes.
    pub fn kind(&self) -> &ParamKind {
        &self.kind
    }

    /// Its default, if a request may leave it out.
    pub fn default(&self) -> Option<&ParamDefault> {
        self.default.as_ref()
    }
}

/// A named structure of the factory: a template rule, its parameters and its recipe.
#[derive(Debug)]
pub struct Structure {
    name: String,
    params: Vec<Param>,
    location: Location,
    pub(crate) recipe: Piece,
}

impl Structure {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its parameters, in declaration order.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// Where the template defines it.
    pub fn location(&self) -> &Location {
        &self.location
    }
}

/// Every structure of the registered templates, compiled for one vocabulary.
///
/// Built once at start-up by [`FactoryBuilder`]; requests are bound against it with
/// [`Request::instantiate`](crate::request::Request::instantiate) (operator program, the fast
/// path) or [`Request::instantiate_ir`](crate::request::Request::instantiate_ir) (grammar IR,
/// for the reference recognizer and the CFG backend).
pub struct StructureFactory {
    structures: Vec<Structure>,
    by_name: NameMap<StructId>,
    specials: BTreeMap<String, TokenId>,
    /// The IR of every literal and fragment of every recipe.
    pub(crate) grammar: Grammar,
    /// Prebuilt operator fragments (index = `Piece::Frag`).
    pub(crate) fragments: Vec<Fragment>,
    /// `Write` leaves of request literals, interned.
    writes: WriteTable,
    pub(crate) regex: Arc<RegexCompiler>,
    vocab: Vocab,
}

impl std::fmt::Debug for StructureFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.structures.iter().map(|s| s.name()).collect();
        f.debug_struct("StructureFactory")
            .field("structures", &names)
            .field("specials", &self.specials)
            .field("fragments", &self.fragments.len())
            .field("interned_writes", &self.writes.len())
            .field("interned_write_bytes", &self.writes.bytes())
            .finish()
    }
}

impl StructureFactory {
    /// A builder for a factory over `vocab` (special tokens are resolved against it).
    pub fn builder(vocab: &Vocab) -> FactoryBuilder {
        FactoryBuilder {
            vocab: vocab.clone(),
            files: Vec::new(),
            regex: None,
            lower: LowerConfig::new(),
            limits: Limits::new(),
            literal_bytes: DEFAULT_LITERAL_TABLE_BYTES,
        }
    }

    /// The structure called `name`.
    pub fn find(&self, name: &str) -> Option<StructId> {
        self.by_name.get(name).copied()
    }

    /// A structure.
    pub fn structure(&self, id: StructId) -> &Structure {
        &self.structures[id.index()]
    }

    /// Every structure, in definition order.
    pub fn structures(&self) -> &[Structure] {
        &self.structures
    }

    /// The special tokens the templates name, with their ids in the vocabulary.
    pub fn special_tokens(&self) -> &BTreeMap<String, TokenId> {
        &self.specials
    }

    /// The vocabulary the factory was compiled for.
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// The regex compiler (and its cache) request arguments go through.
    pub fn regex_compiler(&self) -> &Arc<RegexCompiler> {
        &self.regex
    }

    /// `name(param: kind, ...)` as a template would declare it.
    pub fn signature(&self, name: &str) -> Option<String> {
        let s = self.structure(self.find(name)?);
        if s.params.is_empty() {
            return Some(s.name.clone());
        }
        let params: Vec<String> = s
            .params
            .iter()
            .map(|p| {
                let mut out = format!("{}: {}", p.name, self.describe_kind(&p.kind));
                match &p.default {
                    Some(ParamDefault::EmptyList) => out.push_str(" = []"),
                    Some(ParamDefault::Str(d)) => out.push_str(&format!(" = {d:?}")),
                    None => {}
                }
                out
            })
            .collect();
        Some(format!("{}({})", s.name, params.join(", ")))
    }

    /// A parameter kind as a template writes it.
    pub fn describe_kind(&self, kind: &ParamKind) -> String {
        kind.describe(&|s| self.structure(s).name.clone())
    }

    /// The shared `Write` leaf of `units` (see `tables::WriteTable`).
    pub(crate) fn write_leaf(&self, units: &[Unit]) -> LeafOp {
        self.writes.get(units)
    }

    /// Bytes the table of request literals holds now (at most the budget given to
    /// [`FactoryBuilder::literal_table_bytes`]).
    pub fn literal_table_bytes(&self) -> usize {
        self.writes.bytes()
    }

    /// Number of prebuilt operator fragments.
    pub fn num_fragments(&self) -> usize {
        self.fragments.len()
    }
}

/// Default byte budget of a factory's table of request literals
/// ([`FactoryBuilder::literal_table_bytes`]).
pub const DEFAULT_LITERAL_TABLE_BYTES: usize = 16 << 20;

/// Collects template sources and compiles them into a [`StructureFactory`].
///
/// All files share one namespace: a rule in one file may use rules of another.
pub struct FactoryBuilder {
    vocab: Vocab,
    files: Vec<(String, Result<String, CompileError>)>,
    regex: Option<Arc<RegexCompiler>>,
    lower: LowerConfig,
    limits: Limits,
    literal_bytes: usize,
}

impl FactoryBuilder {
    /// Adds template text named `name` (the name appears in error locations).
    pub fn source(mut self, name: &str, text: &str) -> FactoryBuilder {
        self.files.push((name.to_string(), Ok(text.to_string())));
        self
    }

    /// Adds a template file, or every `*.fw` file of a directory (sorted by name). Read errors
    /// surface from [`build`](Self::build).
    pub fn path(mut self, path: impl AsRef<Path>) -> FactoryBuilder {
        for (name, text) in read_templates(path.as_ref()) {
            self.files.push((name, text));
        }
        self
    }

    /// Shares a regex compiler (and its pattern cache) with the caller.
    pub fn regex_compiler(mut self, compiler: Arc<RegexCompiler>) -> FactoryBuilder {
        self.regex = Some(compiler);
        self
    }

    /// Lowering options for the fragments (DFA fusion limit).
    pub fn lower_config(mut self, config: LowerConfig) -> FactoryBuilder {
        self.lower = config;
        self
    }

    /// The ceilings the templates are built under (default: [`Limits::new`]); the build as a
    /// whole has `compile_time`.
    pub fn limits(mut self, limits: Limits) -> FactoryBuilder {
        self.limits = limits;
        self
    }

    /// Byte budget of the table that shares the `Write` leaves of request literals (template
    /// text around arguments, which recurs across requests) between requests; default
    /// [`DEFAULT_LITERAL_TABLE_BYTES`]. Past it the least recently used leaves are dropped.
    /// Literals of more than 4,096 units are never kept: a long argument rarely recurs.
    pub fn literal_table_bytes(mut self, bytes: usize) -> FactoryBuilder {
        self.literal_bytes = bytes;
        self
    }

    /// Parses, checks and lowers every source.
    pub fn build(mut self) -> Result<StructureFactory, CompileError> {
        let deadline = self.limits.deadline();
        let mut files = check::Files::default();
        let mut parsed = Vec::new();
        for (i, (name, text)) in std::mem::take(&mut self.files).into_iter().enumerate() {
            let text = text?;
            parsed.push((i, syntax::parse(&name, &text, &self.limits, &deadline)?));
            files.names.push(name);
            files.texts.push(text);
        }
        let rules = check::check(&files, parsed, &self.limits, &deadline)?;
        factory::build(&files, rules, &self, &deadline)
    }
}

/// The template sources at `path`: the file itself, or a directory's `*.fw` files.
pub(crate) fn read_templates(path: &Path) -> Vec<(String, Result<String, CompileError>)> {
    let io_error = |p: &Path, e: std::io::Error| {
        CompileError::new(
            CompileErrorKind::Invalid,
            Location::None,
            format!("{}: {e}", p.display()),
        )
    };
    let read = |p: &Path| {
        (
            p.display().to_string(),
            std::fs::read_to_string(p).map_err(|e| io_error(p, e)),
        )
    };
    if !path.is_dir() {
        return vec![read(path)];
    }
    let entries = match std::fs::read_dir(path) {
        Ok(entries) => entries,
        Err(e) => return vec![(path.display().to_string(), Err(io_error(path, e)))],
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "fw"))
        .collect();
    paths.sort();
    paths.iter().map(|p| read(p)).collect()
}
