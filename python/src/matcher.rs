//! `GrammarMatcher` (one sequence's state), batch filling on worker threads, and the CPU apply.

use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError, TryLockError};

use formwork::gpu::{apply_bitmask, ApplyConfig, BatchFiller, FillConfig};
use formwork::{ConstraintMatcher, MatchError, MatchErrorKind, Matcher, TokenId, Vocab};
use half::{bf16, f16};
use pyo3::exceptions::{PyIndexError, PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::arrays::{host_array, host_array_or_none, DType, HostArray};
use crate::compiler::CompiledGrammar;
use crate::errors::{fill_error, match_error};

/// The state of one sequence under a :class:`CompiledGrammar`: fill the next token's bitmask,
/// accept the sampled token, roll back, jump forward, validate drafts, fork.
///
/// Masks are exact: a token is allowed iff the output so far followed by its bytes can still
/// be completed to a string of the constraint, whatever tokenization the model picks; a stop
/// token iff the output so far is complete. A rejected token or string changes nothing.
///
/// One matcher serves one thread at a time: a call while another thread is inside a call on
/// the same matcher raises ``RuntimeError``.
///
/// Differences from ``xgrammar.GrammarMatcher``: ``max_rollback_tokens`` is accepted and
/// unused (the history is bounded by the compiler's ``history`` limit);
/// ``override_stop_tokens`` and ``terminate_without_stop_token`` do not exist (stop tokens are
/// the tokenizer's); :meth:`is_accepting`, :meth:`forced_token_ids`,
/// :meth:`validate_tokens` are formwork's additions.
#[pyclass(module = "formwork", frozen)]
pub struct GrammarMatcher {
    inner: Mutex<ConstraintMatcher>,
    vocab: Vocab,
    compiled: Py<CompiledGrammar>,
}

impl GrammarMatcher {
    /// The matcher, or an error if another thread is inside a call on it. A poisoned lock
    /// (a panic inside a call, already raised) still holds a matcher whose every call leaves
    /// it consistent.
    pub(crate) fn lock(&self) -> PyResult<MutexGuard<'_, ConstraintMatcher>> {
        match self.inner.try_lock() {
            Ok(guard) => Ok(guard),
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => Err(PyRuntimeError::new_err(
                "this GrammarMatcher is in use by another thread (or named twice in a batch)",
            )),
        }
    }

    /// `Ok(true)` if consumed, `Ok(false)` if the constraint rejected it (state unchanged);
    /// other failures (an id outside the vocabulary, a limit) raise.
    fn accepted(
        py: Python<'_>,
        result: Result<(), MatchError>,
        debug_print: bool,
    ) -> PyResult<bool> {
        match result {
            Ok(()) => Ok(true),
            Err(e) => match e.kind() {
                MatchErrorKind::Rejected { .. }
                | MatchErrorKind::TextRejected { .. }
                | MatchErrorKind::Terminated => {
                    if debug_print {
                        eprintln!("formwork: {e}");
                    }
                    Ok(false)
                }
                _ => Err(match_error(py, &e)),
            },
        }
    }
}

fn python_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// Whether bitmask row `row` leaves some token of the first `vocab` ids disallowed.
fn needs_apply(row: &[u32], vocab: usize) -> bool {
    let full = vocab / 32;
    row[..full].iter().any(|&w| w != u32::MAX)
        || (vocab % 32 != 0 && row[full] | (u32::MAX << (vocab % 32)) != u32::MAX)
}

#[pymethods]
impl GrammarMatcher {
    /// A matcher at the start of ``compiled_grammar``.
    #[new]
    #[pyo3(signature = (compiled_grammar, *, max_rollback_tokens=-1))]
    fn new(compiled_grammar: Py<CompiledGrammar>, max_rollback_tokens: i64) -> GrammarMatcher {
        let _ = max_rollback_tokens;
        let compiled = compiled_grammar.get();
        GrammarMatcher {
            inner: Mutex::new(compiled.constraint.matcher()),
            vocab: compiled.tokenizer.get().vocab.clone(),
            compiled: compiled_grammar,
        }
    }

    /// Accepts a sampled token. Returns ``False`` (state unchanged) if the constraint rejects
    /// it or the matcher has terminated; raises :class:`MatchError` for an id outside the
    /// vocabulary. A stop token where the output is complete terminates the matcher.
    #[pyo3(signature = (token_id, *, debug_print=false))]
    fn accept_token(&self, py: Python<'_>, token_id: TokenId, debug_print: bool) -> PyResult<bool> {
        let result = self.lock()?.consume(token_id);
        Self::accepted(py, result, debug_print)
    }

    /// Accepts text that does not come from sampling (``str`` as UTF-8, or ``bytes``), as
    /// consuming any tokenization of it would; one step for :meth:`rollback`. Returns
    /// ``False`` (state unchanged) if the constraint rejects it. Special-token contents in
    /// the text are text, never the special token.
    #[pyo3(signature = (input_str, *, debug_print=false))]
    fn accept_string(
        &self,
        py: Python<'_>,
        input_str: &Bound<'_, PyAny>,
        debug_print: bool,
    ) -> PyResult<bool> {
        let result = match input_str.cast::<PyString>() {
            Ok(s) => self.lock()?.consume_bytes(s.to_cow()?.as_bytes()),
            Err(_) => self
                .lock()?
                .consume_bytes(input_str.cast::<PyBytes>()?.as_bytes()),
        };
        Self::accepted(py, result, debug_print)
    }

    /// Writes the next token's bitmask into row ``index`` of ``bitmask`` (an int32 numpy
    /// array or CPU torch tensor from :func:`allocate_token_bitmask`, shape ``(batch,
    /// ceil(vocab_size / 32))`` or ``(ceil(vocab_size / 32),)``). Returns whether the mask
    /// disallows anything (``False``: applying it would change nothing). After termination
    /// only the stop tokens are allowed.
    #[pyo3(signature = (bitmask, index=0, *, debug_print=false))]
    fn fill_next_token_bitmask(
        &self,
        py: Python<'_>,
        bitmask: &Bound<'_, PyAny>,
        index: usize,
        debug_print: bool,
    ) -> PyResult<bool> {
        let array = host_array(bitmask, "bitmask")?;
        let words = self.vocab.mask_words();
        let (rows, width) = array.rows_and_width("bitmask")?;
        if width != words {
            return Err(PyValueError::new_err(format!(
                "bitmask rows have {width} words, the vocabulary needs {words} (ceil({} / 32))",
                self.vocab.mask_width()
            )));
        }
        if index >= rows {
            return Err(PyIndexError::new_err(format!(
                "index {index} is past the bitmask's {rows} rows"
            )));
        }
        // SAFETY: `bitmask` is borrowed for this call and checked to be a C-contiguous
        // writable host array of `rows × words` 32-bit words; the GIL is held throughout.
        let all = unsafe { array.words_mut("bitmask")? };
        let row = &mut all[index * words..][..words];
        self.lock()?
            .fill_mask(row)
            .map_err(|e| match_error(py, &e))?;
        if debug_print {
            eprintln!(
                "formwork: {} tokens allowed",
                row.iter().map(|w| w.count_ones()).sum::<u32>()
            );
        }
        Ok(needs_apply(row, self.vocab.mask_width()))
    }

    /// The text every continuation starts with (``""`` when the next character is not
    /// forced): accept it with :meth:`accept_string` to jump forward without a model call.
    /// Cut at the last whole UTF-8 character.
    fn find_jump_forward_string(&self) -> PyResult<String> {
        let bytes = self.lock()?.forced_bytes();
        let valid = match std::str::from_utf8(&bytes) {
            Ok(s) => s.len(),
            Err(e) => e.valid_up_to(),
        };
        Ok(String::from_utf8_lossy(&bytes[..valid]).into_owned())
    }

    /// The canonical tokens of the forced stretch (special tokens included), for
    /// jump-forward by tokens: accepting them is always allowed. A stretch that does not end
    /// the output keeps its last token back (the model may merge it with what follows).
    fn forced_token_ids(&self) -> PyResult<Vec<TokenId>> {
        Ok(self.lock()?.forced_tokens())
    }

    /// How many of ``token_ids`` (a speculative draft) would be accepted in order before the
    /// first rejected one, without accepting any; an id outside the vocabulary raises.
    fn validate_tokens(&self, py: Python<'_>, token_ids: Vec<TokenId>) -> PyResult<usize> {
        self.lock()?
            .validate_tokens(&token_ids)
            .map_err(|e| match_error(py, &e))
    }

    /// Undoes the last ``num_tokens`` steps (a token, or a whole :meth:`accept_string`).
    #[pyo3(signature = (num_tokens=1))]
    fn rollback(&self, py: Python<'_>, num_tokens: usize) -> PyResult<()> {
        self.lock()?
            .rollback(num_tokens)
            .map_err(|e| match_error(py, &e))
    }

    /// Back to the start of the constraint.
    fn reset(&self) -> PyResult<()> {
        self.lock()?.reset();
        Ok(())
    }

    /// True once a stop token was accepted.
    fn is_terminated(&self) -> PyResult<bool> {
        Ok(self.lock()?.is_terminated())
    }

    /// True if the output so far is complete (a stop token is allowed).
    fn is_accepting(&self) -> PyResult<bool> {
        Ok(self.lock()?.is_accepting())
    }

    /// Steps accepted so far (what :meth:`rollback` can undo).
    #[getter]
    fn num_accepted(&self) -> PyResult<usize> {
        Ok(self.lock()?.num_consumed())
    }

    /// An independent copy in the same state (beam search, speculative branches).
    fn fork(&self, py: Python<'_>) -> PyResult<GrammarMatcher> {
        Ok(GrammarMatcher {
            inner: Mutex::new(self.lock()?.clone()),
            vocab: self.vocab.clone(),
            compiled: self.compiled.clone_ref(py),
        })
    }

    /// The stop (EOS) token ids.
    #[getter]
    fn stop_token_ids(&self) -> Vec<TokenId> {
        self.vocab.eos_tokens().to_vec()
    }

    /// The grammar this matcher follows.
    #[getter]
    fn compiled_grammar(&self, py: Python<'_>) -> Py<CompiledGrammar> {
        self.compiled.clone_ref(py)
    }

    fn __repr__(&self) -> String {
        match self.inner.try_lock() {
            Ok(m) => format!(
                "GrammarMatcher(accepted={}, accepting={}, terminated={})",
                m.num_consumed(),
                python_bool(m.is_accepting()),
                python_bool(m.is_terminated())
            ),
            Err(_) => "GrammarMatcher(<in use>)".to_string(),
        }
    }
}

/// Fills bitmask rows for many matchers at once on a pool of worker threads, with the GIL
/// released (xgrammar's ``BatchGrammarMatcher``). ``max_threads``: worker threads
/// (``"auto"``: one per core but one; the calling thread helps too).
#[pyclass(module = "formwork", frozen)]
pub struct BatchGrammarMatcher {
    filler: Mutex<BatchFiller>,
}

fn fill_config(max_threads: &Bound<'_, PyAny>) -> PyResult<FillConfig> {
    if let Ok(s) = max_threads.extract::<String>() {
        if s == "auto" {
            return Ok(FillConfig::new());
        }
        return Err(PyValueError::new_err(format!(
            "max_threads must be a number or \"auto\", got {s:?}"
        )));
    }
    // The calling thread fills rows too, so n threads in all is n - 1 workers.
    let n: usize = max_threads.extract()?;
    Ok(FillConfig::new().threads(n.saturating_sub(1)))
}

/// Fills `bitmask[indices[i]]` from `matchers[i]` on `filler`'s threads, GIL released.
fn batch_fill(
    py: Python<'_>,
    filler: &Mutex<BatchFiller>,
    matchers: &[Bound<'_, GrammarMatcher>],
    bitmask: &Bound<'_, PyAny>,
    indices: Option<Vec<usize>>,
) -> PyResult<()> {
    let Some(first) = matchers.first() else {
        return Ok(());
    };
    let words = first.get().vocab.mask_words();
    if let Some(i) = matchers
        .iter()
        .position(|m| m.get().vocab.mask_words() != words)
    {
        return Err(PyValueError::new_err(format!(
            "matcher {i} has another vocabulary width than matcher 0"
        )));
    }
    let array: HostArray = host_array(bitmask, "bitmask")?;
    let (rows, width) = array.rows_and_width("bitmask")?;
    if width != words {
        return Err(PyValueError::new_err(format!(
            "bitmask rows have {width} words, the vocabulary needs {words}"
        )));
    }
    let indices = indices.unwrap_or_else(|| (0..matchers.len()).collect());
    if indices.len() != matchers.len() {
        return Err(PyValueError::new_err(format!(
            "{} indices for {} matchers",
            indices.len(),
            matchers.len()
        )));
    }
    if let Some(&bad) = indices.iter().find(|&&i| i >= rows) {
        return Err(PyIndexError::new_err(format!(
            "index {bad} is past the bitmask's {rows} rows"
        )));
    }
    let mut sorted = indices.clone();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(PyValueError::new_err("indices name a row twice"));
    }
    let mut guards = matchers
        .iter()
        .map(|m| m.get().lock())
        .collect::<PyResult<Vec<_>>>()?;
    let mut batch: Vec<&mut ConstraintMatcher> = guards.iter_mut().map(|g| &mut **g).collect();
    // SAFETY: `bitmask` is borrowed for this call and checked to be a C-contiguous writable
    // host array of `rows × words` words; while the GIL is released only this call writes it
    // (the matchers' locks keep their own threads out; the array is not resized by a caller
    // that waits for this call).
    let out = unsafe { array.words_mut("bitmask")? };
    let start = indices[0];
    let contiguous = indices.iter().enumerate().all(|(k, &i)| i == start + k);
    let filled = py.detach(|| {
        let mut filler = filler.lock().unwrap_or_else(PoisonError::into_inner);
        if contiguous {
            return filler.fill(
                &mut batch,
                &mut out[start * words..][..indices.len() * words],
            );
        }
        let mut scratch = vec![0u32; indices.len() * words];
        let filled = filler.fill(&mut batch, &mut scratch);
        for (k, &i) in indices.iter().enumerate() {
            out[i * words..][..words].copy_from_slice(&scratch[k * words..][..words]);
        }
        filled
    });
    filled.map_err(|e| fill_error(py, &e))
}

fn default_filler() -> &'static Mutex<BatchFiller> {
    static FILLER: OnceLock<Mutex<BatchFiller>> = OnceLock::new();
    FILLER.get_or_init(|| Mutex::new(BatchFiller::new(FillConfig::new())))
}

#[pymethods]
impl BatchGrammarMatcher {
    /// A pool of ``max_threads`` threads in all (the calling one included).
    #[new]
    #[pyo3(signature = (max_threads=None))]
    fn new(
        py: Python<'_>,
        max_threads: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<BatchGrammarMatcher> {
        let config = match max_threads {
            Some(n) => fill_config(n)?,
            None => FillConfig::new(),
        };
        let filler = py.detach(|| BatchFiller::try_new(config)).map_err(|e| {
            PyOSError::new_err(format!("max_threads: starting the worker threads: {e}"))
        })?;
        Ok(BatchGrammarMatcher {
            filler: Mutex::new(filler),
        })
    }

    /// Fills ``bitmask[indices[i]]`` (default: row ``i``) from ``matchers[i]`` on the
    /// pool's threads, with the GIL released. A failing matcher's row is left all zero and
    /// its error raised (with ``err.row``).
    #[pyo3(signature = (matchers, bitmask, indices=None, debug_print=false))]
    fn batch_fill_next_token_bitmask(
        &self,
        py: Python<'_>,
        matchers: Vec<Bound<'_, GrammarMatcher>>,
        bitmask: &Bound<'_, PyAny>,
        indices: Option<Vec<usize>>,
        debug_print: bool,
    ) -> PyResult<()> {
        let _ = debug_print;
        batch_fill(py, &self.filler, &matchers, bitmask, indices)
    }

    /// Accepts ``tokens[i]`` on ``matchers[i]``; whether each was accepted.
    #[staticmethod]
    #[pyo3(signature = (matchers, tokens, debug_print=false))]
    fn batch_accept_token(
        py: Python<'_>,
        matchers: Vec<Bound<'_, GrammarMatcher>>,
        tokens: Vec<TokenId>,
        debug_print: bool,
    ) -> PyResult<Vec<bool>> {
        if matchers.len() != tokens.len() {
            return Err(PyValueError::new_err("one token per matcher"));
        }
        matchers
            .iter()
            .zip(tokens)
            .map(|(m, t)| m.get().accept_token(py, t, debug_print))
            .collect()
    }

    /// Accepts ``strings[i]`` on ``matchers[i]``; whether each was accepted.
    #[staticmethod]
    #[pyo3(signature = (matchers, strings, debug_print=false))]
    fn batch_accept_string(
        py: Python<'_>,
        matchers: Vec<Bound<'_, GrammarMatcher>>,
        strings: Vec<Bound<'_, PyAny>>,
        debug_print: bool,
    ) -> PyResult<Vec<bool>> {
        if matchers.len() != strings.len() {
            return Err(PyValueError::new_err("one string per matcher"));
        }
        matchers
            .iter()
            .zip(strings)
            .map(|(m, s)| m.get().accept_string(py, &s, debug_print))
            .collect()
    }

    /// Rolls each matcher back ``num_tokens`` steps (one count, or one per matcher).
    #[staticmethod]
    #[pyo3(signature = (matchers, num_tokens=None))]
    fn batch_rollback(
        py: Python<'_>,
        matchers: Vec<Bound<'_, GrammarMatcher>>,
        num_tokens: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let counts: Vec<usize> = match num_tokens {
            None => vec![1; matchers.len()],
            Some(n) => match n.extract::<usize>() {
                Ok(n) => vec![n; matchers.len()],
                Err(_) => n.extract()?,
            },
        };
        if counts.len() != matchers.len() {
            return Err(PyValueError::new_err("one count per matcher"));
        }
        matchers
            .iter()
            .zip(counts)
            .try_for_each(|(m, n)| m.get().rollback(py, n))
    }
}

/// Fills ``bitmask[indices[i]]`` (default: row ``i``) from ``matchers[i]`` on a shared pool
/// of worker threads, with the GIL released. See :class:`BatchGrammarMatcher`.
#[pyfunction]
#[pyo3(signature = (matchers, bitmask, indices=None))]
pub fn fill_next_token_bitmasks(
    py: Python<'_>,
    matchers: Vec<Bound<'_, GrammarMatcher>>,
    bitmask: &Bound<'_, PyAny>,
    indices: Option<Vec<usize>>,
) -> PyResult<()> {
    batch_fill(py, default_filler(), &matchers, bitmask, indices)
}

/// The CPU apply behind ``apply_token_bitmask_inplace``: masks C-contiguous float32,
/// float16 and bfloat16 host logits with the GIL released. Returns ``False``, touching
/// nothing, for anything else (another dtype, a strided view, a CUDA tensor): the caller
/// falls back to array operations.
#[pyfunction]
#[pyo3(signature = (logits, bitmask, vocab_size=None, indices=None))]
pub fn _apply_token_bitmask_cpu(
    py: Python<'_>,
    logits: &Bound<'_, PyAny>,
    bitmask: &Bound<'_, PyAny>,
    vocab_size: Option<usize>,
    indices: Option<Vec<u32>>,
) -> PyResult<bool> {
    let Some(logits) = host_array_or_none(logits, "logits")? else {
        return Ok(false);
    };
    if !matches!(logits.dtype, DType::F32 | DType::F16 | DType::BF16) {
        return Ok(false);
    }
    let Some(mask) = host_array_or_none(bitmask, "bitmask")? else {
        return Ok(false);
    };
    let (_, row_len) = logits.rows_and_width("logits")?;
    let (_, row_words) = mask.rows_and_width("bitmask")?;
    // SAFETY: both arrays are borrowed for this call, checked C-contiguous and writable, of
    // the element types read here; they are distinct buffers (different dtypes or sizes).
    let words: &[u32] = unsafe { mask.words_mut("bitmask")? };
    let mut config = ApplyConfig::new(row_len, row_words);
    if let Some(v) = vocab_size {
        config = config.vocab_size(v);
    }
    if let Some(idx) = &indices {
        config = config.indices(idx);
    }
    let applied = py.detach(|| match logits.dtype {
        DType::F32 => apply_bitmask(unsafe { logits.elements_mut::<f32>() }, words, &config),
        DType::F16 => apply_bitmask(unsafe { logits.elements_mut::<f16>() }, words, &config),
        _ => apply_bitmask(unsafe { logits.elements_mut::<bf16>() }, words, &config),
    });
    applied.map_err(|e| crate::errors::apply_error(&e))?;
    Ok(true)
}
