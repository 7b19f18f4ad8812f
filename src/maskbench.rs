//! The MaskBench harness: JSON schemas with valid and invalid instances, checked token by
//! token through an [`Engine`] (and its router), the way llguidance's MaskBench counts.
//!
//! Per schema: compile (a failure is a *compile error*); walk every valid instance, serialized
//! compact, with a mask before each token — every token must be allowed and EOS allowed at the
//! end (else a *validation error*); every invalid instance must be rejected by some token or by
//! EOS (else an *invalidation error*); a schema over its time budget is a *timeout*. A schema
//! passes if none of these happened. The `formwork maskbench` command and the CI sample test
//! both run [`run`]; [`Report::compare`] is the ratchet against a committed expected file.
//!
//! Timings are what a server feels: *time to first mask* (TTFM: compile, then the first mask
//! of a fresh matcher, as a server does before the first decoding step), then one mask per
//! token of every valid instance. The report gives their tail (p99.9, max, masks over 1 and
//! 5 ms) and the slowest compiles and masks with the file, the step and the text before it.
//!
//! # Example
//!
//! ```
//! use formwork::engine::Engine;
//! use formwork::maskbench::{Case, HarnessConfig, Instance, Status};
//! use formwork::vocab::Vocab;
//! use serde_json::json;
//!
//! let engine = Engine::new(Vocab::embedded_qwen3().unwrap());
//! let case = Case {
//!     name: "small".into(),
//!     schema: json!({"type": "array", "items": {"type": "integer"}, "maxItems": 2}),
//!     tests: vec![
//!         Instance { valid: true, data: json!([1, 22]) },
//!         Instance { valid: false, data: json!([1, 2, 3]) },
//!     ],
//! };
//! let result = formwork::maskbench::run_case(&engine, &case, &HarnessConfig::new());
//! assert_eq!(result.status, Status::Passing, "{}", result.detail);
//! assert!(result.time_to_first_mask().is_some());
//! // Each valid token and EOS had a mask; the slowest are kept with where they were.
//! assert_eq!(result.mask_ns.len(), result.slowest.len());
//! assert!(result.slowest.windows(2).all(|w| w[0].ns >= w[1].ns));
//! assert_eq!(result.slowest.iter().map(|m| m.step).max(), Some(result.mask_ns.len() - 1));
//! ```

use std::collections::BTreeMap;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

use crate::engine::{BackendKind, Engine};
use crate::front::json_schema::JsonSchemaOptions;
use crate::mask::get_bit;
use crate::matcher::{MatchErrorKind, Matcher};

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
fn text_before(
    vocab: &crate::vocab::Vocab,
    tokens: &[crate::vocab::TokenId],
    chars: usize,
) -> String {
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
    let started = Instant::now();
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
    let constraint = match engine.compile_json_schema(&case.schema, &config.options) {
        Ok(c) => c,
        Err(e) => {
            result.status = Status::CompileError;
            result.detail = e.to_string();
            return result;
        }
    };
    result.compile = Some(started.elapsed());
    result.backend = Some(constraint.backend());
    let vocab = engine.vocab();
    let mut mask = vec![0u32; vocab.mask_words()];
    let at = Instant::now();
    if let Err(e) = constraint.matcher().fill_mask(&mut mask) {
        result.status = Status::ValidationError;
        result.detail = format!("first mask: {e}");
        return result;
    }
    result.first_mask = Some(at.elapsed());
    let over_time = |result: &mut CaseResult| {
        let over = config.timeout.is_some_and(|t| started.elapsed() > t);
        if over {
            result.status = Status::Timeout;
            result.detail = format!("over {:?}", config.timeout.unwrap());
        }
        over
    };
    // Valid instances first: they carry the mask timings and the likelier failures.
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
        let tokens = match vocab.encode(&text) {
            Ok(t) => t,
            Err(e) => {
                result.status = Status::ValidationError;
                result.detail = format!("{}: cannot tokenize: {e}", shown());
                return result;
            }
        };
        let mut m = constraint.matcher();
        if test.valid {
            for (step, &t) in tokens.iter().enumerate() {
                let at = Instant::now();
                let filled = m.fill_mask(&mut mask);
                let ns = at.elapsed().as_nanos() as u64;
                result.mask_ns.push(ns);
                result.record_slow(ns, i, step, || text_before(vocab, &tokens[..step], 40));
                let problem = match filled {
                    Err(e) => Some(format!("mask error {e}")),
                    Ok(()) if !get_bit(&mask, t) => {
                        Some(format!("token {t} {} not allowed", vocab.display_token(t)))
                    }
                    Ok(()) => m.consume(t).err().map(|e| format!("consume failed: {e}")),
                };
                if let Some(p) = problem {
                    result.status = Status::ValidationError;
                    result.detail = format!("{}: step {step}: {p}", shown());
                    return result;
                }
                if over_time(&mut result) {
                    return result;
                }
            }
            let at = Instant::now();
            let filled = m.fill_mask(&mut mask);
            let ns = at.elapsed().as_nanos() as u64;
            result.mask_ns.push(ns);
            result.record_slow(ns, i, tokens.len(), || text_before(vocab, &tokens, 40));
            let eos = filled.is_ok() && vocab.eos_tokens().iter().any(|&e| get_bit(&mask, e));
            if !eos {
                result.status = Status::ValidationError;
                result.detail = format!("{}: EOS not allowed at the end", shown());
                return result;
            }
        } else {
            // Masks are exact, so a token is outside the mask iff `consume` rejects it.
            let mut rejected = false;
            for &t in &tokens {
                match m.consume(t) {
                    Ok(()) => {}
                    Err(e) if matches!(e.kind(), MatchErrorKind::Rejected { .. }) => {
                        rejected = true;
                        break;
                    }
                    Err(e) => {
                        result.status = Status::InvalidationError;
                        result.detail = format!("{}: {e}", shown());
                        return result;
                    }
                }
                if over_time(&mut result) {
                    return result;
                }
            }
            if !rejected && m.is_accepting() {
                result.status = Status::InvalidationError;
                result.detail = format!("{}: accepted", shown());
                return result;
            }
        }
        if over_time(&mut result) {
            return result;
        }
    }
    result
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

/// The results of a run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// One per case, in order.
    pub results: Vec<CaseResult>,
}

/// The `q` quantile (0..=1) of `values` (sorted in place); 0 if empty.
fn quantile(values: &mut [u64], q: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    values.sort_unstable();
    values[((values.len() - 1) as f64 * q).round() as usize]
}

impl Report {
    /// Schemas per status.
    pub fn count(&self, status: Status) -> usize {
        self.results.iter().filter(|r| r.status == status).count()
    }

    /// Schemas the router sent to `backend`.
    pub fn routed(&self, backend: BackendKind) -> usize {
        self.results
            .iter()
            .filter(|r| r.backend == Some(backend))
            .count()
    }

    /// Mask time quantile over every mask computed, in nanoseconds.
    pub fn mask_quantile(&self, q: f64) -> u64 {
        let mut all: Vec<u64> = self
            .results
            .iter()
            .flat_map(|r| r.mask_ns.iter().copied())
            .collect();
        quantile(&mut all, q)
    }

    /// Compile time quantile over the schemas that compiled, in nanoseconds.
    pub fn compile_quantile(&self, q: f64) -> u64 {
        let mut all: Vec<u64> = self
            .results
            .iter()
            .filter_map(|r| r.compile.map(|d| d.as_nanos() as u64))
            .collect();
        quantile(&mut all, q)
    }

    /// Time-to-first-mask quantile over the schemas that compiled, in nanoseconds.
    pub fn ttfm_quantile(&self, q: f64) -> u64 {
        let mut all: Vec<u64> = self
            .results
            .iter()
            .filter_map(|r| r.time_to_first_mask().map(|d| d.as_nanos() as u64))
            .collect();
        quantile(&mut all, q)
    }

    /// Masks that took longer than `ns` nanoseconds.
    pub fn masks_over(&self, ns: u64) -> usize {
        let over = |r: &CaseResult| r.mask_ns.iter().filter(|&&m| m > ns).count();
        self.results.iter().map(over).sum()
    }

    /// The [`SLOWEST`] compiles: (file, nanoseconds), slowest first.
    pub fn slowest_compiles(&self) -> Vec<(&str, u64)> {
        let mut all: Vec<(&str, u64)> = self
            .results
            .iter()
            .filter_map(|r| Some((r.name.as_str(), r.compile?.as_nanos() as u64)))
            .collect();
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1));
        all.truncate(SLOWEST);
        all
    }

    /// The [`SLOWEST`] masks of the run: (file, mask), slowest first.
    pub fn slowest_masks(&self) -> Vec<(&str, &SlowMask)> {
        let mut all: Vec<(&str, &SlowMask)> = self
            .results
            .iter()
            .flat_map(|r| r.slowest.iter().map(move |m| (r.name.as_str(), m)))
            .collect();
        all.sort_unstable_by(|a, b| b.1.ns.cmp(&a.1.ns));
        all.truncate(SLOWEST);
        all
    }

    /// The summary as JSON: counts, routes and timing quantiles.
    pub fn summary(&self) -> Value {
        let mut counts = Map::new();
        counts.insert("schemas".into(), json!(self.results.len()));
        for s in Status::ALL {
            counts.insert(s.name().into(), json!(self.count(s)));
        }
        let us = |ns: u64| ns as f64 / 1e3;
        let ms = |ns: u64| ns as f64 / 1e6;
        let quantiles = |f: &dyn Fn(f64) -> u64, unit: &dyn Fn(u64) -> f64| {
            json!({"p50": unit(f(0.5)), "p90": unit(f(0.9)), "p99": unit(f(0.99)),
                   "p99.9": unit(f(0.999)), "max": unit(f(1.0))})
        };
        json!({
            "counts": counts,
            "routes": {"operators": self.routed(BackendKind::Operators), "earley": self.routed(BackendKind::Earley)},
            "masks": self.results.iter().map(|r| r.mask_ns.len()).sum::<usize>(),
            "mask_us": quantiles(&|q| self.mask_quantile(q), &us),
            "masks_over_1ms": self.masks_over(1_000_000),
            "masks_over_5ms": self.masks_over(5_000_000),
            "compile_ms": quantiles(&|q| self.compile_quantile(q), &ms),
            "ttfm_ms": quantiles(&|q| self.ttfm_quantile(q), &ms),
            "slowest_compiles": self.slowest_compiles().iter()
                .map(|(file, ns)| json!({"file": file, "ms": ms(*ns)})).collect::<Vec<_>>(),
            "slowest_masks": self.slowest_masks().iter()
                .map(|(file, m)| json!({"file": file, "instance": m.instance, "step": m.step,
                                        "before": m.before, "us": us(m.ns)}))
                .collect::<Vec<_>>(),
        })
    }

    /// The summary as text: counts, routes, then the timing quantiles and the slowest compiles
    /// and masks.
    pub fn text(&self) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        for s in Status::ALL {
            let _ = writeln!(out, "{:<20} {}", format!("{}:", s.name()), self.count(s));
        }
        let _ = writeln!(
            out,
            "routes:              {} operators, {} earley",
            self.routed(BackendKind::Operators),
            self.routed(BackendKind::Earley)
        );
        let ms = |ns: u64| ns as f64 / 1e6;
        let us = |ns: u64| ns as f64 / 1e3;
        let _ = writeln!(
            out,
            "ttfm:                p50 {:.2} ms, p90 {:.2} ms, p99 {:.2} ms, p99.9 {:.2} ms, max {:.2} ms",
            ms(self.ttfm_quantile(0.5)),
            ms(self.ttfm_quantile(0.9)),
            ms(self.ttfm_quantile(0.99)),
            ms(self.ttfm_quantile(0.999)),
            ms(self.ttfm_quantile(1.0)),
        );
        let _ = writeln!(
            out,
            "compile:             p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            ms(self.compile_quantile(0.5)),
            ms(self.compile_quantile(0.99)),
            ms(self.compile_quantile(1.0)),
        );
        let _ = writeln!(
            out,
            "mask:                p50 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs, max {:.1} µs ({} masks, {} over 1 ms, {} over 5 ms)",
            us(self.mask_quantile(0.5)),
            us(self.mask_quantile(0.99)),
            us(self.mask_quantile(0.999)),
            us(self.mask_quantile(1.0)),
            self.results.iter().map(|r| r.mask_ns.len()).sum::<usize>(),
            self.masks_over(1_000_000),
            self.masks_over(5_000_000),
        );
        let _ = writeln!(out, "slowest compiles:");
        for (file, ns) in self.slowest_compiles() {
            let _ = writeln!(out, "  {:>9.2} ms  {file}", ms(ns));
        }
        let _ = writeln!(out, "slowest masks:");
        for (file, m) in self.slowest_masks() {
            let _ = writeln!(
                out,
                "  {:>9.1} µs  {file} instance {} step {} after {:?}",
                us(m.ns),
                m.instance,
                m.step,
                m.before
            );
        }
        out
    }

    /// The expected-results file of this run: counts and each file's status (no timings, so
    /// it only changes when results do).
    pub fn expected(&self) -> Value {
        let files: Map<String, Value> = self
            .results
            .iter()
            .map(|r| (r.name.clone(), json!(r.status.name())))
            .collect();
        let mut counts = Map::new();
        for s in Status::ALL {
            counts.insert(s.name().into(), json!(self.count(s)));
        }
        json!({"counts": counts, "files": files})
    }

    /// Compares with an expected file (see [`expected`](Self::expected)): the regressions,
    /// empty if none. Passing may only grow and invalidation errors (unsound masks) only
    /// shrink; a file expected to pass must pass; a file that did not pass may fail
    /// differently. Files absent from either side are ignored (a `--limit` run).
    pub fn compare(&self, expected: &Value) -> Result<Vec<String>, String> {
        let files = expected
            .get("files")
            .and_then(Value::as_object)
            .ok_or("expected file: no `files` object")?;
        let mut regressions = Vec::new();
        let mut was: BTreeMap<Status, usize> = BTreeMap::new();
        let mut now: BTreeMap<Status, usize> = BTreeMap::new();
        for r in &self.results {
            let Some(status) = files.get(&r.name) else {
                continue;
            };
            let status = status
                .as_str()
                .and_then(Status::from_name)
                .ok_or_else(|| format!("expected file: bad status for {}", r.name))?;
            *was.entry(status).or_default() += 1;
            *now.entry(r.status).or_default() += 1;
            if status == Status::Passing && r.status != Status::Passing {
                regressions.push(format!(
                    "{}: was passing, now {}: {}",
                    r.name,
                    r.status.name(),
                    r.detail
                ));
            }
        }
        let get = |m: &BTreeMap<Status, usize>, s| m.get(&s).copied().unwrap_or(0);
        if get(&now, Status::Passing) < get(&was, Status::Passing) {
            regressions.push(format!(
                "passing: {} < expected {}",
                get(&now, Status::Passing),
                get(&was, Status::Passing)
            ));
        }
        if get(&now, Status::InvalidationError) > get(&was, Status::InvalidationError) {
            regressions.push(format!(
                "invalidation errors: {} > expected {}",
                get(&now, Status::InvalidationError),
                get(&was, Status::InvalidationError)
            ));
        }
        Ok(regressions)
    }
}
