//! The MaskBench harness: JSON schemas with valid and invalid instances, checked token by
//! token through an [`Engine`] (and its router), the way llguidance's MaskBench counts.
//!
//! Per schema: compile (a failure is a *compile error*); walk every valid instance, serialized
//! compact, with a mask before each token — every token must be allowed and EOS allowed at the
//! end (else a *validation error*); every invalid instance must be rejected by some token or by
//! EOS (else an *invalidation error*); a schema over its time budget is a *timeout*. A schema
//! passes if none of these happened. The `formwork maskbench` command and the sample tests below
//! both run [`run`]; [`Report::compare`] is the ratchet against a committed expected file.
//!
//! Timings are what a server feels: *time to first mask* (TTFM: compile, then the first mask
//! of a fresh matcher, as a server does before the first decoding step), then one mask per
//! token of every valid instance. The report gives their tail (p99.9, max, masks over 1 and
//! 5 ms) and the slowest compiles and masks with the file, the step and the text before it.
//!

use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use formwork::bitmask::get_bit;
use formwork::{BackendKind, Engine, JsonSchemaOptions, MatchErrorKind, Matcher, TokenId, Vocab};

/// One instance of a schema.
#[derive(Clone, Debug)]
pub struct Instance {
    /// Should the schema accept it?
    pub valid: bool,
    /// The JSON value (checked in its compact serialization).
    pub data: Value,
}

/// One MaskBench file: a schema and its instances.
#[derive(Clone, Debug)]
pub struct Case {
    /// File name (without directories).
    pub name: String,
    /// The JSON Schema.
    pub schema: Value,
    /// Its instances.
    pub tests: Vec<Instance>,
}

impl Case {
    /// Parses a MaskBench file (`{"schema": ..., "tests": [{"valid": bool, "data": ...}]}`).
    pub fn parse(name: &str, text: &str) -> Result<Case, String> {
        let file: Value = serde_json::from_str(text).map_err(|e| format!("{name}: {e}"))?;
        let schema = file
            .get("schema")
            .cloned()
            .ok_or_else(|| format!("{name}: no `schema`"))?;
        let tests = match file.get("tests") {
            None => Vec::new(),
            Some(Value::Array(tests)) => tests
                .iter()
                .enumerate()
                .map(|(i, t)| match (t.get("valid"), t.get("data")) {
                    (Some(Value::Bool(valid)), Some(data)) => Ok(Instance {
                        valid: *valid,
                        data: data.clone(),
                    }),
                    _ => Err(format!("{name}: /tests/{i} needs `valid` and `data`")),
                })
                .collect::<Result<_, _>>()?,
            Some(_) => return Err(format!("{name}: `tests` is not an array")),
        };
        Ok(Case {
            name: name.to_string(),
            schema,
            tests,
        })
    }
}

/// Reads the MaskBench files of `path`: a directory of `*.json` files or a `.tar.gz` of them
/// (other files, and `expected*.json`, are skipped). Sorted by name.
pub fn load(path: &Path) -> Result<Vec<Case>, String> {
    let shown = path.display();
    let mut files: Vec<(String, String)> = Vec::new();
    let wanted = |name: &str| name.ends_with(".json") && !name.starts_with("expected");
    if path.is_dir() {
        let entries = std::fs::read_dir(path).map_err(|e| format!("{shown}: {e}"))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("{shown}: {e}"))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if wanted(&name) {
                let text = std::fs::read_to_string(entry.path())
                    .map_err(|e| format!("{}: {e}", entry.path().display()))?;
                files.push((name, text));
            }
        }
    } else {
        let file = std::fs::File::open(path).map_err(|e| format!("{shown}: {e}"))?;
        let mut archive = tar::Archive::new(flate2::read::GzDecoder::new(file));
        let entries = archive.entries().map_err(|e| format!("{shown}: {e}"))?;
        for entry in entries {
            let mut entry = entry.map_err(|e| format!("{shown}: {e}"))?;
            let entry_path = entry.path().map_err(|e| format!("{shown}: {e}"))?;
            let Some(name) = entry_path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
            else {
                continue;
            };
            if !entry.header().entry_type().is_file() || !wanted(&name) {
                continue;
            }
            let mut text = String::new();
            entry
                .read_to_string(&mut text)
                .map_err(|e| format!("{shown}: {name}: {e}"))?;
            files.push((name, text));
        }
    }
    files.sort();
    files
        .iter()
        .map(|(name, text)| Case::parse(name, text))
        .collect()
}

/// Options of a harness run.
#[derive(Clone, Debug, Default)]
pub struct HarnessConfig {
    options: JsonSchemaOptions,
    timeout: Option<Duration>,
}

impl HarnessConfig {
    /// Strict compilation with default options, no time budget.
    pub fn new() -> HarnessConfig {
        HarnessConfig::default()
    }

    /// JSON Schema options (MaskBench instances are compact JSON: keep compact whitespace).
    pub fn schema_options(mut self, options: JsonSchemaOptions) -> HarnessConfig {
        self.options = options;
        self
    }

    /// Time budget per schema (compile and all instances); over it the schema is a timeout.
    pub fn timeout(mut self, budget: Option<Duration>) -> HarnessConfig {
        self.timeout = budget;
        self
    }
}

/// The outcome of one schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// Compiled; every instance classified right.
    Passing,
    /// The schema did not compile.
    CompileError,
    /// A valid instance was rejected.
    ValidationError,
    /// An invalid instance was accepted.
    InvalidationError,
    /// Over the time budget.
    Timeout,
}

impl Status {
    /// Every status, in report order.
    pub const ALL: [Status; 5] = [
        Status::Passing,
        Status::CompileError,
        Status::ValidationError,
        Status::InvalidationError,
        Status::Timeout,
    ];

    /// The name used in reports and expected files.
    pub fn name(self) -> &'static str {
        match self {
            Status::Passing => "passing",
            Status::CompileError => "compile_error",
            Status::ValidationError => "validation_error",
            Status::InvalidationError => "invalidation_error",
            Status::Timeout => "timeout",
        }
    }

    fn from_name(name: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.name() == name)
    }
}

/// What one schema did.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// The file name.
    pub name: String,
    /// Its outcome.
    pub status: Status,
    /// Why it did not pass (the error, or the instance and step).
    pub detail: String,
    /// The backend the router chose, if it compiled.
    pub backend: Option<BackendKind>,
    /// Compile time, if it compiled.
    pub compile: Option<Duration>,
    /// The first mask of a fresh matcher, right after compiling (with `compile`, the time to
    /// first mask).
    pub first_mask: Option<Duration>,
    /// Nanoseconds of every mask computed while walking the valid instances (one per token
    /// and one for EOS), after the first mask.
    pub mask_ns: Vec<u64>,
    /// The slowest of those masks, slowest first (at most [`SLOWEST`]).
    pub slowest: Vec<SlowMask>,
}

/// How many slow masks each [`CaseResult`] keeps, and how many the report lists.
pub const SLOWEST: usize = 10;

/// One slow mask: where it was and what came before it.
#[derive(Clone, Debug)]
pub struct SlowMask {
    /// Nanoseconds.
    pub ns: u64,
    /// Index of the valid instance.
    pub instance: usize,
    /// Tokens consumed before the mask.
    pub step: usize,
    /// The last characters of the text consumed before the mask.
    pub before: String,
}

impl CaseResult {
    /// Compile plus first mask, if it compiled.
    pub fn time_to_first_mask(&self) -> Option<Duration> {
        Some(self.compile? + self.first_mask?)
    }

    /// Keeps `mask` if it is among the [`SLOWEST`] of this case.
    fn record_slow(
        &mut self,
        ns: u64,
        instance: usize,
        step: usize,
        before: impl FnOnce() -> String,
    ) {
        if self.slowest.len() == SLOWEST && self.slowest.last().is_some_and(|m| m.ns >= ns) {
            return;
        }
        let at = self.slowest.partition_point(|m| m.ns >= ns);
        let before = before();
        self.slowest.insert(
            at,
            SlowMask {
                ns,
                instance,
                step,
                before,
            },
        );
        self.slowest.truncate(SLOWEST);
    }

    /// Per-file figures (for `--json`).
    pub fn figures(&self) -> Value {
        let ms = |d: Option<Duration>| d.map(|d| d.as_secs_f64() * 1e3);
        let mut masks = self.mask_ns.clone();
        json!({
            "file": self.name,
            "status": self.status.name(),
            "compile_ms": ms(self.compile),
            "first_mask_ms": ms(self.first_mask),
            "ttfm_ms": ms(self.time_to_first_mask()),
            "masks": masks.len(),
            "mask_us": {
                "p50": quantile(&mut masks, 0.5) as f64 / 1e3,
                "p99": quantile(&mut masks, 0.99) as f64 / 1e3,
                "max": masks.last().map_or(0.0, |&m| m as f64 / 1e3),
            },
        })
    }
}

/// The last `chars` characters of the text of `tokens`, for locating a step.
fn text_before(vocab: &Vocab, tokens: &[TokenId], chars: usize) -> String {
    let start = tokens.len().saturating_sub(chars);
    let bytes: Vec<u8> = tokens[start..]
        .iter()
        .flat_map(|&t| vocab.token_bytes(t).to_vec())
        .collect();
    let text = String::from_utf8_lossy(&bytes);
    let skip = text.chars().count().saturating_sub(chars);
    text.chars().skip(skip).collect()
}

/// Runs one schema through `engine`.
pub fn run_case(engine: &Engine, case: &Case, config: &HarnessConfig) -> CaseResult {
    let mut result = CaseResult {
        name: case.name.clone(),
        status: Status::Passing,
        detail: String::new(),
        backend: None,
        compile: None,
        first_mask: None,
        mask_ns: Vec::new(),
        slowest: Vec::new(),
    };
    if let Err((status, detail)) = walk_case(engine, case, config, &mut result) {
        result.status = status;
        result.detail = detail;
    }
    result
}

/// Why a case stopped before passing: its status and what happened.
type Stop = (Status, String);

/// Compiles the case, then walks its valid instances (they carry the mask timings and the
/// likelier failures) and its invalid ones, recording timings into `result`.
fn walk_case(
    engine: &Engine,
    case: &Case,
    config: &HarnessConfig,
    result: &mut CaseResult,
) -> Result<(), Stop> {
    let started = Instant::now();
    let constraint = engine
        .compile_json_schema(&case.schema, &config.options)
        .map_err(|e| (Status::CompileError, e.to_string()))?;
    result.compile = Some(started.elapsed());
    result.backend = Some(constraint.backend());
    let vocab = engine.vocab();
    let mut mask = vec![0u32; vocab.mask_words()];
    let at = Instant::now();
    constraint
        .matcher()
        .fill_mask(&mut mask)
        .map_err(|e| (Status::ValidationError, format!("first mask: {e}")))?;
    result.first_mask = Some(at.elapsed());
    let in_time = || match config.timeout {
        Some(t) if started.elapsed() > t => Err((Status::Timeout, format!("over {t:?}"))),
        _ => Ok(()),
    };
    let mut order: Vec<&Instance> = case.tests.iter().filter(|t| t.valid).collect();
    order.extend(case.tests.iter().filter(|t| !t.valid));
    for (i, test) in order.into_iter().enumerate() {
        let text = serde_json::to_string(&test.data).expect("a JSON value serializes");
        let shown = || {
            let cut = text
                .char_indices()
                .nth(120)
                .map_or(text.len(), |(at, _)| at);
            format!("instance {i} {}", &text[..cut])
        };
        let tokens = vocab.encode(&text).map_err(|e| {
            let detail = format!("{}: cannot tokenize: {e}", shown());
            (Status::ValidationError, detail)
        })?;
        let walk = Walk {
            vocab,
            instance: i,
            tokens: &tokens,
            shown: &shown,
            in_time: &in_time,
        };
        let mut m = constraint.matcher();
        match test.valid {
            true => walk.valid(&mut m, &mut mask, result)?,
            false => walk.invalid(&mut m)?,
        }
        in_time()?;
    }
    Ok(())
}

/// One instance's tokens being walked through a fresh matcher.
struct Walk<'a> {
    vocab: &'a Vocab,
    instance: usize,
    tokens: &'a [TokenId],
    /// The instance as the report names it.
    shown: &'a dyn Fn() -> String,
    /// `Err` once the case is over its time budget.
    in_time: &'a dyn Fn() -> Result<(), Stop>,
}

impl Walk<'_> {
    /// A mask before every token: each token must be allowed and consumed, EOS allowed at the
    /// end. Each mask's time is recorded.
    fn valid(
        &self,
        m: &mut impl Matcher,
        mask: &mut [u32],
        result: &mut CaseResult,
    ) -> Result<(), Stop> {
        let (vocab, tokens) = (self.vocab, self.tokens);
        for (step, &t) in tokens.iter().enumerate() {
            let at = Instant::now();
            let filled = m.fill_mask(mask);
            let ns = at.elapsed().as_nanos() as u64;
            result.mask_ns.push(ns);
            result.record_slow(ns, self.instance, step, || {
                text_before(vocab, &tokens[..step], 40)
            });
            let problem = match filled {
                Err(e) => Some(format!("mask error {e}")),
                Ok(()) if !get_bit(mask, t) => {
                    Some(format!("token {t} {} not allowed", vocab.display_token(t)))
                }
                Ok(()) => m.consume(t).err().map(|e| format!("consume failed: {e}")),
            };
            if let Some(p) = problem {
                let detail = format!("{}: step {step}: {p}", (self.shown)());
                return Err((Status::ValidationError, detail));
            }
            (self.in_time)()?;
        }
        let at = Instant::now();
        let filled = m.fill_mask(mask);
        let ns = at.elapsed().as_nanos() as u64;
        result.mask_ns.push(ns);
        result.record_slow(ns, self.instance, tokens.len(), || {
            text_before(vocab, tokens, 40)
        });
        let eos = filled.is_ok() && vocab.eos_tokens().iter().any(|&e| get_bit(mask, e));
        match eos {
            true => Ok(()),
            false => Err((
                Status::ValidationError,
                format!("{}: EOS not allowed at the end", (self.shown)()),
            )),
        }
    }

    /// Some token must be rejected, or the whole text must not be accepted. Masks are exact,
    /// so a token is outside the mask iff `consume` rejects it.
    fn invalid(&self, m: &mut impl Matcher) -> Result<(), Stop> {
        for &t in self.tokens {
            match m.consume(t) {
                Ok(()) => {}
                Err(e) if matches!(e.kind(), MatchErrorKind::Rejected { .. }) => return Ok(()),
                Err(e) => {
                    let detail = format!("{}: {e}", (self.shown)());
                    return Err((Status::InvalidationError, detail));
                }
            }
            (self.in_time)()?;
        }
        match m.is_accepting() {
            true => Err((
                Status::InvalidationError,
                format!("{}: accepted", (self.shown)()),
            )),
            false => Ok(()),
        }
    }
}

/// Runs every case, calling `progress` after each.
pub fn run(
    engine: &Engine,
    cases: &[Case],
    config: &HarnessConfig,
    mut progress: impl FnMut(&CaseResult),
) -> Report {
    let results = cases
        .iter()
        .map(|case| {
            let r = run_case(engine, case, config);
            progress(&r);
            r
        })
        .collect();
    Report { results }
}

mod report;
#[cfg(test)]
mod tests;

use report::quantile;
pub use report::Report;
