//! What a run found: counts by status, routes, the tails of compile, first-mask and mask
//! times, the slowest compiles and masks, and the ratchet against an expected file.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::{CaseResult, SlowMask, Status, SLOWEST};
use formwork::BackendKind;

/// The results of a run.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// One per case, in order.
    pub results: Vec<CaseResult>,
}

/// The `q` quantile (0..=1) of `values` (sorted in place); 0 if empty.
pub(super) fn quantile(values: &mut [u64], q: f64) -> u64 {
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
