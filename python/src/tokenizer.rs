//! `TokenizerInfo`: the vocabulary a grammar is compiled against.

use formwork::vocab::MAX_MASK_WIDTH;
use formwork::{TokenId, Vocab, VocabConfig};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

use crate::errors::vocab_error;

/// The vocabulary masks are computed over: the exact bytes of every token, which tokens are
/// special symbols, the stop (EOS) tokens, and the mask width (the model's vocabulary size,
/// which may exceed the tokenizer's).
///
/// Build it from a ``tokenizer.json`` (:meth:`from_tokenizer_json`), from a ``transformers``
/// tokenizer (:meth:`from_huggingface`), from raw token bytes (the constructor), or take the
/// embedded Qwen3 tokenizer (:meth:`qwen3`).
///
/// Differences from ``xgrammar.TokenizerInfo``: the constructor takes each token's raw bytes
/// (xgrammar's ``VocabType.RAW``; loaders decode byte-level and byte-fallback pieces
/// themselves), and stop tokens must be special tokens of the tokenizer.
#[pyclass(module = "formwork", frozen)]
pub struct TokenizerInfo {
    pub vocab: Vocab,
}

fn config(vocab_size: Option<usize>, stop_tokens: Option<Vec<String>>) -> VocabConfig {
    VocabConfig::new().mask_width(vocab_size).eos(stop_tokens)
}

#[pymethods]
impl TokenizerInfo {
    /// A vocabulary from raw token bytes: ``encoded_vocab[i]`` is token ``i`` (``str`` is
    /// taken as UTF-8; an empty entry is an unused id). ``special_token_ids`` are symbols that
    /// never match text; ``stop_token_ids`` end the output (each must be special);
    /// ``vocab_size`` (at least ``len(encoded_vocab)``) is the mask width.
    #[new]
    #[pyo3(signature = (encoded_vocab, *, vocab_size=None, stop_token_ids=None, special_token_ids=None))]
    fn new(
        py: Python<'_>,
        encoded_vocab: &Bound<'_, PyList>,
        vocab_size: Option<usize>,
        stop_token_ids: Option<Vec<TokenId>>,
        special_token_ids: Option<Vec<TokenId>>,
    ) -> PyResult<TokenizerInfo> {
        let mut tokens: Vec<Vec<u8>> = Vec::with_capacity(encoded_vocab.len());
        for item in encoded_vocab.iter() {
            if let Ok(s) = item.cast::<PyString>() {
                tokens.push(s.to_cow()?.as_bytes().to_vec());
            } else {
                tokens.push(item.cast::<PyBytes>()?.as_bytes().to_vec());
            }
        }
        if let Some(width) = vocab_size {
            if width < tokens.len() {
                return Err(PyValueError::new_err(format!(
                    "vocab_size {width} < {} tokens",
                    tokens.len()
                )));
            }
            // Checked before the ids are made: the library checks a width once it holds them,
            // and `vocab_size=2**40` took every byte of memory first.
            if width > MAX_MASK_WIDTH {
                return Err(PyValueError::new_err(format!(
                    "vocab_size {width} is past the widest supported mask ({MAX_MASK_WIDTH} ids)"
                )));
            }
            // Ids past the tokenizer are unused: never allowed.
            tokens.resize(width, Vec::new());
        }
        let stop = stop_token_ids.unwrap_or_default();
        let mut special = special_token_ids.unwrap_or_default();
        special.extend(&stop);
        special.sort_unstable();
        special.dedup();
        let vocab =
            Vocab::from_token_bytes(tokens, &special, &stop).map_err(|e| vocab_error(py, &e))?;
        Ok(TokenizerInfo { vocab })
    }

    /// The Qwen3 tokenizer embedded in formwork (151,669 tokens, mask width 151,936 as in
    /// the Qwen3 models, stop tokens ``<|im_end|>`` and ``<|endoftext|>``).
    #[staticmethod]
    fn qwen3(py: Python<'_>) -> PyResult<TokenizerInfo> {
        let vocab = py
            .detach(Vocab::embedded_qwen3)
            .map_err(|e| vocab_error(py, &e))?;
        Ok(TokenizerInfo { vocab })
    }

    /// Loads a HuggingFace ``tokenizer.json`` (or a gzip of it) from ``path``.
    /// ``vocab_size``: the model's vocabulary size when larger than the tokenizer's.
    /// ``stop_tokens``: stop tokens by content (default: ``eos_token`` of a
    /// ``tokenizer_config.json`` beside the file, else well-known end tokens).
    #[staticmethod]
    #[pyo3(signature = (path, *, vocab_size=None, stop_tokens=None))]
    fn from_tokenizer_json(
        py: Python<'_>,
        path: std::path::PathBuf,
        vocab_size: Option<usize>,
        stop_tokens: Option<Vec<String>>,
    ) -> PyResult<TokenizerInfo> {
        let vocab = py
            .detach(|| Vocab::from_file_with(&path, config(vocab_size, stop_tokens)))
            .map_err(|e| vocab_error(py, &e))?;
        Ok(TokenizerInfo { vocab })
    }

    /// A vocabulary from the text of a ``tokenizer.json`` (what a ``transformers`` fast
    /// tokenizer serializes to); ``source`` names it in errors. See
    /// :meth:`from_tokenizer_json` for the other arguments.
    #[staticmethod]
    #[pyo3(signature = (json, *, source="<tokenizer.json>", vocab_size=None, stop_tokens=None))]
    fn from_tokenizer_json_str(
        py: Python<'_>,
        json: &str,
        source: &str,
        vocab_size: Option<usize>,
        stop_tokens: Option<Vec<String>>,
    ) -> PyResult<TokenizerInfo> {
        let vocab = py
            .detach(|| {
                Vocab::from_json_bytes(json.as_bytes(), source, config(vocab_size, stop_tokens))
            })
            .map_err(|e| vocab_error(py, &e))?;
        Ok(TokenizerInfo { vocab })
    }

    /// From a ``transformers`` fast tokenizer object: its ``tokenizer.json`` and its EOS.
    /// ``vocab_size`` is the model's (``model.config.vocab_size``), which may exceed the
    /// tokenizer's; ``stop_token_ids`` overrides the tokenizer's ``eos_token_id``.
    #[staticmethod]
    #[pyo3(signature = (tokenizer, *, vocab_size=None, stop_token_ids=None))]
    fn from_huggingface(
        py: Python<'_>,
        tokenizer: &Bound<'_, PyAny>,
        vocab_size: Option<usize>,
        stop_token_ids: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<TokenizerInfo> {
        let (json, source, stop_tokens): (String, String, Option<Vec<String>>) = py
            .import("formwork._hf")?
            .call_method1("describe", (tokenizer, stop_token_ids))?
            .extract()?;
        TokenizerInfo::from_tokenizer_json_str(py, &json, &source, vocab_size, stop_tokens)
    }

    /// The mask width: the model's vocabulary size (bits per bitmask row).
    #[getter]
    fn vocab_size(&self) -> usize {
        self.vocab.mask_width()
    }

    /// Number of token ids the tokenizer itself defines (at most :attr:`vocab_size`).
    #[getter]
    fn num_tokens(&self) -> usize {
        self.vocab.len()
    }

    /// The stop (EOS) token ids: allowed exactly where the output is complete.
    #[getter]
    fn stop_token_ids(&self) -> Vec<TokenId> {
        self.vocab.eos_tokens().to_vec()
    }

    /// Ids of the special tokens (``special: true``), ascending: symbols that match only
    /// where a constraint names them, never as text.
    #[getter]
    fn special_token_ids(&self) -> Vec<TokenId> {
        let mut ids: Vec<TokenId> = self.vocab.specials().map(|(_, id)| id).collect();
        ids.sort_unstable();
        ids
    }

    /// Every token's bytes, by id (a special token's content; ``b""`` for unused ids).
    #[getter]
    fn decoded_vocab<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let ids = 0..self.vocab.len() as TokenId;
        PyList::new(py, ids.map(|t| PyBytes::new(py, self.vocab.token_bytes(t))))
    }

    /// The bytes of one token (a special token's content).
    fn token_bytes<'py>(
        &self,
        py: Python<'py>,
        token_id: TokenId,
    ) -> PyResult<Bound<'py, PyBytes>> {
        if token_id as usize >= self.vocab.mask_width() {
            return Err(PyValueError::new_err(format!(
                "token id {token_id} is outside the vocabulary ({})",
                self.vocab.mask_width()
            )));
        }
        Ok(PyBytes::new(py, self.vocab.token_bytes(token_id)))
    }

    /// Tokenizes ``text`` exactly as continuation text (no BOS, no added prefix space);
    /// special-token contents in it become those tokens.
    fn encode(&self, py: Python<'_>, text: &str) -> PyResult<Vec<TokenId>> {
        self.vocab.encode(text).map_err(|e| vocab_error(py, &e))
    }

    /// Where the vocabulary came from (a path, ``embedded:qwen3``, ``bytes``).
    #[getter]
    fn source(&self) -> String {
        self.vocab.source().to_string()
    }

    fn __repr__(&self) -> String {
        format!(
            "TokenizerInfo(source={:?}, num_tokens={}, vocab_size={}, stop_token_ids={:?})",
            self.vocab.source(),
            self.vocab.len(),
            self.vocab.mask_width(),
            self.vocab.eos_tokens()
        )
    }
}
