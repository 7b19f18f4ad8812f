//! The Rust side of `benches/overhead.py`: the same calls the Python API makes, timed in a
//! Rust loop on the same matchers and buffers, so the Python-side cost of a step is the
//! difference. Private (`_`-prefixed); not part of the API.

use std::time::Instant;

use formwork::gpu::{apply_bitmask, ApplyConfig, BatchFiller, FillConfig};
use formwork::{ConstraintMatcher, Matcher};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

use crate::arrays::{host_array, DType};
use crate::errors::{fill_error, match_error};
use crate::matcher::GrammarMatcher;

/// Mean nanoseconds of `fill_mask` into bitmask row 0 and of the f32 apply of that row to
/// logits row 0, each over `iterations` calls in Rust (GIL held, as a single Python call).
#[pyfunction]
pub fn _time_native_step(
    py: Python<'_>,
    matcher: &Bound<'_, GrammarMatcher>,
    logits: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    iterations: u32,
) -> PyResult<(f64, f64)> {
    let logits = host_array(logits, "logits")?;
    let mask = host_array(bitmask, "bitmask")?;
    if logits.dtype != DType::F32 {
        return Err(PyValueError::new_err("float32 logits only"));
    }
    let (_, row_len) = logits.rows_and_width("logits")?;
    let (_, words) = mask.rows_and_width("bitmask")?;
    // SAFETY: both arrays are borrowed for this call, checked C-contiguous, writable and of
    // these element types; the GIL is held throughout.
    let (row, out) = unsafe {
        (
            &mut mask.words_mut("bitmask")?[..words],
            &mut logits.elements_mut::<f32>()[..row_len],
        )
    };
    let mut m = matcher.get().lock()?;
    let started = Instant::now();
    for _ in 0..iterations {
        m.fill_mask(row).map_err(|e| match_error(py, &e))?;
    }
    let fill = started.elapsed().as_nanos() as f64 / iterations as f64;
    let config = ApplyConfig::new(row_len, words);
    let started = Instant::now();
    for _ in 0..iterations {
        apply_bitmask(out, row, &config).map_err(|e| crate::errors::apply_error(&e))?;
    }
    let apply = started.elapsed().as_nanos() as f64 / iterations as f64;
    Ok((fill, apply))
}

/// Mean nanoseconds of a `BatchFiller::fill` of all `matchers` (row i from matcher i) with
/// `threads` threads in all, over `iterations` calls in Rust.
#[pyfunction]
pub fn _time_native_batch(
    py: Python<'_>,
    matchers: Vec<Bound<'_, GrammarMatcher>>,
    bitmask: &Bound<'_, PyAny>,
    threads: usize,
    iterations: u32,
) -> PyResult<f64> {
    let mask = host_array(bitmask, "bitmask")?;
    let (rows, words) = mask.rows_and_width("bitmask")?;
    if rows < matchers.len() {
        return Err(PyValueError::new_err("fewer bitmask rows than matchers"));
    }
    // SAFETY: as in `_time_native_step`.
    let out = unsafe { &mut mask.words_mut("bitmask")?[..matchers.len() * words] };
    let mut guards = matchers
        .iter()
        .map(|m| m.get().lock())
        .collect::<PyResult<Vec<_>>>()?;
    let mut batch: Vec<&mut ConstraintMatcher> = guards.iter_mut().map(|g| &mut **g).collect();
    let mut filler = BatchFiller::new(FillConfig::new().threads(threads.saturating_sub(1)));
    let started = Instant::now();
    for _ in 0..iterations {
        filler
            .fill(&mut batch, out)
            .map_err(|e| fill_error(py, &e))?;
    }
    Ok(started.elapsed().as_nanos() as f64 / iterations as f64)
}
