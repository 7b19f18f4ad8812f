//! Collecting template sources and compiling them: parse, check, build.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::build::{build, BuildOptions};
use super::factory::StructureFactory;
use super::{check, syntax};
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::limits::Limits;
use crate::ops::{LowerConfig, RegexCompiler};
use crate::vocab::Vocab;

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

    /// Adds a template file, or every `*.fw` file of a directory (sorted by name), each read
    /// no further than the input limit set so far ([`limits`](Self::limits)). Read errors
    /// surface from [`build`](Self::build).
    pub fn path(mut self, path: impl AsRef<Path>) -> FactoryBuilder {
        for (name, text) in read_templates(path.as_ref(), &self.limits) {
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
        let options = BuildOptions {
            vocab: &self.vocab,
            lower: &self.lower,
            limits: &self.limits,
            regex: self.regex.clone(),
            literal_bytes: self.literal_bytes,
        };
        build(&files, rules, &options, &deadline)
    }
}

/// The template sources at `path`: the file itself, or a directory's `*.fw` files.
pub(crate) fn read_templates(
    path: &Path,
    limits: &Limits,
) -> Vec<(String, Result<String, CompileError>)> {
    let io_error = |p: &Path, e: std::io::Error| {
        CompileError::new(
            CompileErrorKind::Invalid,
            Location::None,
            format!("{}: {e}", p.display()),
        )
    };
    let read = |p: &Path| (p.display().to_string(), limits.read_file(p));
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
