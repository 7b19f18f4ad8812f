//! `GrammarCompiler` and `CompiledGrammar`: every front end of the engine, and formwork's
//! templates and requests.

use std::path::PathBuf;
use std::sync::{Condvar, Mutex, PoisonError, RwLock};

use formwork::{
    CompileError, CompileErrorKind, Constraint, Engine, EngineConfig, JsonSchemaOptions, Location,
    Piece, PropertyOrder, Tag, TagBody, TagDispatch, Whitespace,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use serde_json::Value;

use crate::errors::compile_error;
use crate::tokenizer::TokenizerInfo;

/// Compiles constraints for one vocabulary: JSON Schema, regex, GBNF, structural tags and
/// tool-call formats, and formwork's own templates (registered once at start-up with
/// :meth:`register_templates`) and requests (:meth:`compile_request`, microseconds each).
///
/// Every ``compile_*`` method releases the GIL, so a server compiles on a thread pool; masks
/// computed by one grammar are cached for all (the cache is shared, bounded by
/// ``cache_bytes``). Errors raise :class:`formwork.CompileError` subclasses carrying the
/// place: a JSON pointer (``err.pointer``) for schemas and tool lists, ``line``/``col`` for
/// texts.
///
/// Differences from ``xgrammar.GrammarCompiler``: ``cache_bytes`` bounds the mask cache
/// (xgrammar: ``cache_limit_bytes`` bounds its compiled-grammar cache); one compilation runs
/// on its calling thread, and ``max_threads`` bounds how many run at once (xgrammar: threads
/// inside one compilation); ``compile_grammar`` reads llama.cpp GBNF.
#[pyclass(module = "formwork", frozen)]
pub struct GrammarCompiler {
    engine: RwLock<Engine>,
    tokenizer: Py<TokenizerInfo>,
    max_threads: usize,
    slots: Slots,
}

/// A counting semaphore: compilations of one compiler past `max_threads` wait for a slot, so
/// a server's request pool larger than its cores does not oversubscribe them.
struct Slots {
    free: Mutex<usize>,
    freed: Condvar,
}

/// A taken slot, given back when dropped (also when the compilation panics).
struct Slot<'a>(&'a Slots);

impl Slots {
    fn new(n: usize) -> Slots {
        Slots {
            free: Mutex::new(n),
            freed: Condvar::new(),
        }
    }

    fn take(&self) -> Slot<'_> {
        let free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        let mut free = self
            .freed
            .wait_while(free, |n| *n == 0)
            .unwrap_or_else(PoisonError::into_inner);
        *free -= 1;
        Slot(self)
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.0.freed.notify_one();
    }
}

/// A compiled constraint: create one :class:`GrammarMatcher` per sequence from it. Immutable
/// and shareable across threads.
#[pyclass(module = "formwork", frozen)]
pub struct CompiledGrammar {
    pub constraint: Constraint,
    pub tokenizer: Py<TokenizerInfo>,
}

/// A JSON document given as text (parsed here, errors at line:col of `source`) or as a Python
/// object (a dict, list, ..., or a pydantic model class: its `model_json_schema()`).
fn json_value(py: Python<'_>, doc: &Bound<'_, PyAny>, source: &str) -> PyResult<Value> {
    let text: String = if let Ok(s) = doc.cast::<PyString>() {
        s.to_cow()?.into_owned()
    } else {
        let doc = match doc.getattr_opt("model_json_schema")? {
            Some(method) => method.call0()?,
            None => doc.clone(),
        };
        py.import("json")?
            .call_method1("dumps", (doc,))?
            .extract()
            .map_err(|e: PyErr| PyTypeError::new_err(format!("{source}: not JSON: {e}")))?
    };
    serde_json::from_str(&text).map_err(|e| {
        let err = CompileError::new(
            CompileErrorKind::Syntax,
            Location::Text {
                source: source.to_string(),
                line: e.line(),
                col: e.column(),
            },
            format!("invalid JSON: {e}"),
        );
        compile_error(py, &err)
    })
}

impl GrammarCompiler {
    /// Runs `compile` on the engine in one of the `max_threads` slots, with the GIL released,
    /// and wraps the result.
    fn compile_with(
        &self,
        py: Python<'_>,
        compile: impl FnOnce(&Engine) -> Result<Constraint, CompileError> + Send,
    ) -> PyResult<CompiledGrammar> {
        let constraint = py
            .detach(|| {
                let _slot = self.slots.take();
                compile(&self.engine.read().unwrap_or_else(PoisonError::into_inner))
            })
            .map_err(|e| compile_error(py, &e))?;
        Ok(CompiledGrammar {
            constraint,
            tokenizer: self.tokenizer.clone_ref(py),
        })
    }
}

#[pymethods]
impl GrammarCompiler {
    /// A compiler for ``tokenizer_info``. ``max_threads``: how many compilations run at once
    /// (each on its calling thread; more wait, GIL released). ``cache_bytes``: byte budget of
    /// the shared mask cache (default 256 MiB).
    #[new]
    #[pyo3(signature = (tokenizer_info, *, max_threads=8, cache_bytes=None))]
    fn new(
        py: Python<'_>,
        tokenizer_info: Py<TokenizerInfo>,
        max_threads: usize,
        cache_bytes: Option<usize>,
    ) -> PyResult<GrammarCompiler> {
        if max_threads == 0 {
            return Err(PyValueError::new_err("max_threads must be at least 1"));
        }
        let mut config = EngineConfig::new();
        if let Some(bytes) = cache_bytes {
            config = config.cache_bytes(bytes);
        }
        let vocab = tokenizer_info.get().vocab.clone();
        let engine = py.detach(|| Engine::with_config(vocab, config));
        Ok(GrammarCompiler {
            engine: RwLock::new(engine),
            tokenizer: tokenizer_info,
            max_threads,
            slots: Slots::new(max_threads),
        })
    }

    /// The vocabulary grammars are compiled against.
    #[getter]
    fn tokenizer_info(&self, py: Python<'_>) -> Py<TokenizerInfo> {
        self.tokenizer.clone_ref(py)
    }

    /// How many compilations may run at once.
    #[getter]
    fn max_threads(&self) -> usize {
        self.max_threads
    }

    /// Bytes held by the mask caches (operator and Earley backends).
    fn get_cache_size_bytes(&self) -> usize {
        let stats = self
            .engine
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .cache_stats();
        stats.operators.bytes + stats.earley.bytes
    }

    /// Compiles a JSON Schema (``str``, ``dict`` or a pydantic model class).
    ///
    /// ``any_whitespace``: runs of whitespace between tokens (at most ``max_whitespace_cnt``
    /// each) instead of the compact form (no spaces; the only ``separators`` supported are
    /// ``(",", ":")``; ``indent`` is not supported). ``strict_mode``: objects without
    /// ``additionalProperties`` allow no undeclared property (xgrammar's meaning).
    /// ``lenient``: drop unsupported keywords with a warning (:attr:`CompiledGrammar.warnings`)
    /// instead of raising :class:`UnsupportedError`. ``any_order``: properties in any order
    /// (default: the schema's order); an object whose properties formwork cannot hold in any
    /// order keeps the schema's order (a warning says which), or with
    /// ``order_fallback=False`` raises (``order_fallback`` means nothing without
    /// ``any_order``).
    #[pyo3(signature = (schema, *, any_whitespace=true, indent=None, separators=None, strict_mode=true, max_whitespace_cnt=None, any_order=false, order_fallback=true, lenient=false))]
    #[allow(clippy::too_many_arguments)]
    fn compile_json_schema(
        &self,
        py: Python<'_>,
        schema: &Bound<'_, PyAny>,
        any_whitespace: bool,
        indent: Option<usize>,
        separators: Option<(String, String)>,
        strict_mode: bool,
        max_whitespace_cnt: Option<u32>,
        any_order: bool,
        order_fallback: bool,
        lenient: bool,
    ) -> PyResult<CompiledGrammar> {
        let unsupported = |what: &str| {
            compile_error(
                py,
                &CompileError::unplaced(CompileErrorKind::Unsupported, what),
            )
        };
        if indent.is_some() {
            return Err(unsupported(
                "indent: only compact or free whitespace is supported",
            ));
        }
        if separators.is_some_and(|(c, k)| (c.as_str(), k.as_str()) != (",", ":")) {
            return Err(unsupported(
                "separators: only (\",\", \":\") (or any_whitespace=True) is supported",
            ));
        }
        let schema = json_value(py, schema, "<json_schema>")?;
        let whitespace = match any_whitespace {
            true => Whitespace::Flexible {
                max_run: max_whitespace_cnt,
            },
            false => Whitespace::Compact,
        };
        let options = JsonSchemaOptions::new()
            .whitespace(whitespace)
            .additional_properties(!strict_mode)
            .lenient(lenient)
            .property_order(match (any_order, order_fallback) {
                (true, true) => PropertyOrder::AnyOrSchema,
                (true, false) => PropertyOrder::Any,
                (false, _) => PropertyOrder::Schema,
            });
        self.compile_with(py, |e| e.compile_json_schema(&schema, &options))
    }

    /// Any JSON object or array, with free whitespace (xgrammar's built-in JSON grammar).
    fn compile_builtin_json_grammar(&self, py: Python<'_>) -> PyResult<CompiledGrammar> {
        let schema = serde_json::json!({"type": ["object", "array"]});
        let options = JsonSchemaOptions::new().whitespace(Whitespace::Flexible { max_run: None });
        self.compile_with(py, |e| e.compile_json_schema(&schema, &options))
    }

    /// Compiles a regex over the whole output (look-around and backreferences are
    /// :class:`UnsupportedError`).
    fn compile_regex(&self, py: Python<'_>, regex: &str) -> PyResult<CompiledGrammar> {
        self.compile_with(py, |e| e.compile_regex(regex))
    }

    /// Compiles a llama.cpp GBNF grammar whose start rule is ``root``.
    #[pyo3(signature = (grammar, *, root_rule_name="root"))]
    fn compile_grammar(
        &self,
        py: Python<'_>,
        grammar: &str,
        root_rule_name: &str,
    ) -> PyResult<CompiledGrammar> {
        if root_rule_name != "root" {
            let err = CompileError::unplaced(
                CompileErrorKind::Unsupported,
                format!("root_rule_name {root_rule_name:?}: GBNF grammars start at `root`"),
            );
            return Err(compile_error(py, &err));
        }
        self.compile_with(py, |e| e.compile_gbnf(grammar, "<grammar>"))
    }

    /// Free text in which each trigger starts a structured tag (xgrammar's
    /// ``compile_structural_tag(tags, triggers)``): every item (``begin``, ``schema``, ``end``;
    /// :class:`StructuralTagItem` or xgrammar's own) begins with one of ``triggers``; after a
    /// trigger only the bodies of its items may follow.
    fn compile_structural_tag(
        &self,
        py: Python<'_>,
        tags: &Bound<'_, PyList>,
        triggers: Vec<String>,
    ) -> PyResult<CompiledGrammar> {
        let mut grouped: Vec<Tag> = triggers
            .iter()
            .map(|t| Tag {
                begin: vec![Piece::Text(t.clone())],
                bodies: Vec::new(),
            })
            .collect();
        for (i, item) in tags.iter().enumerate() {
            let begin: String = item.getattr("begin")?.extract()?;
            let end: String = item.getattr("end")?.extract()?;
            let schema = json_value(py, &item.getattr("schema")?, &format!("<tags[{i}].schema>"))?;
            let Some(t) = triggers.iter().position(|t| begin.starts_with(t.as_str())) else {
                let err = CompileError::new(
                    CompileErrorKind::Invalid,
                    Location::JsonPointer(format!("/tags/{i}/begin")),
                    format!("{begin:?} starts with none of the triggers {triggers:?}"),
                );
                return Err(compile_error(py, &err));
            };
            let rest = &begin[triggers[t].len()..];
            grouped[t].bodies.push(TagBody {
                prefix: match rest.is_empty() {
                    true => Vec::new(),
                    false => vec![Piece::Text(rest.to_string())],
                },
                schema,
                suffix: vec![Piece::Text(end)],
            });
        }
        let dispatch = grouped
            .into_iter()
            .filter(|t| !t.bodies.is_empty())
            .fold(TagDispatch::new(), TagDispatch::tag);
        self.compile_with(py, |e| e.compile_tags(&dispatch))
    }

    /// Free text with tool calls in a model's format: ``"llama31"``
    /// (``<function=NAME>{...}</function>``), ``"qwen"`` (``<tool_call>`` JSON
    /// ``</tool_call>``), ``"harmony"`` (gpt-oss, markers as special tokens) or
    /// ``"harmony-text"``. ``tools``: OpenAI-style (``{"type": "function", "function":
    /// {...}}``) or BFCL function descriptions. ``require_call``: the output must call a tool
    /// at least once. ``forbid``: texts free text may not contain (e.g. ``"<think>"``).
    #[pyo3(signature = (tools, *, format="qwen", require_call=false, forbid=None))]
    fn compile_tool_calls(
        &self,
        py: Python<'_>,
        tools: &Bound<'_, PyAny>,
        format: &str,
        require_call: bool,
        forbid: Option<Vec<String>>,
    ) -> PyResult<CompiledGrammar> {
        let tools = json_value(py, tools, "<tools>")?;
        let spec = serde_json::json!({
            "format": format, "tools": tools, "require_call": require_call,
            "forbid": forbid.unwrap_or_default(),
        });
        self.compile_with(py, |e| e.compile_tags(&TagDispatch::from_spec(&spec)?))
    }

    /// Registers templates at start-up: a template file or a directory of ``*.fw`` files
    /// (``str`` or path), a list of them, or a ``{name: source text}`` mapping (e.g.
    /// :func:`formwork.shipped_templates`). Parsed, checked and lowered together with the
    /// templates registered before; on error nothing changes. Call before sharing the
    /// compiler between threads (it waits for running compilations).
    fn register_templates(&self, py: Python<'_>, templates: &Bound<'_, PyAny>) -> PyResult<()> {
        enum Given {
            Paths(Vec<PathBuf>),
            Sources(Vec<(String, String)>),
        }
        let given = if let Ok(map) = templates.cast::<PyDict>() {
            Given::Sources(
                map.iter()
                    .map(|(k, v)| Ok((k.extract()?, v.extract()?)))
                    .collect::<PyResult<_>>()?,
            )
        } else if let Ok(path) = templates.extract::<PathBuf>() {
            Given::Paths(vec![path])
        } else {
            Given::Paths(templates.extract()?)
        };
        py.detach(|| {
            let mut engine = self.engine.write().unwrap_or_else(PoisonError::into_inner);
            match &given {
                Given::Paths(paths) => engine.register_templates(paths),
                Given::Sources(sources) => sources
                    .iter()
                    .try_for_each(|(name, text)| engine.register_template_source(name, text)),
            }
        })
        .map_err(|e| compile_error(py, &e))
    }

    /// Names of the structures the registered templates define.
    fn structures(&self) -> Vec<String> {
        let engine = self.engine.read().unwrap_or_else(PoisonError::into_inner);
        engine
            .factory()
            .structures()
            .iter()
            .map(|s| s.name().to_string())
            .collect()
    }

    /// Compiles a request: the text form (``outline(sections: [...])``) or the JSON form (a
    /// ``dict``, ``{"outline": {"sections": [...]}}``). A structure of the registered
    /// templates is instantiated in microseconds; the built-ins ``json_schema(schema:
    /// "...")``, ``gbnf(grammar: "...")`` and ``regex(pattern: /.../)`` need no template.
    fn compile_request(
        &self,
        py: Python<'_>,
        request: &Bound<'_, PyAny>,
    ) -> PyResult<CompiledGrammar> {
        if let Ok(text) = request.cast::<PyString>() {
            let text = text.to_cow()?;
            return self.compile_with(py, |e| e.compile(&text));
        }
        let json: String = py
            .import("json")?
            .call_method1("dumps", (request,))?
            .extract()?;
        self.compile_with(py, |e| e.compile_json_request(&json))
    }

    fn __repr__(&self) -> String {
        let engine = self.engine.read().unwrap_or_else(PoisonError::into_inner);
        format!("GrammarCompiler({engine:?})")
    }
}

#[pymethods]
impl CompiledGrammar {
    /// The vocabulary it was compiled against.
    #[getter]
    fn tokenizer_info(&self, py: Python<'_>) -> Py<TokenizerInfo> {
        self.tokenizer.clone_ref(py)
    }

    /// The backend it runs on: ``"operators"`` (templates, regexes, regular grammars) or
    /// ``"earley"`` (recursive grammars and schemas).
    #[getter]
    fn backend(&self) -> &'static str {
        match self.constraint.backend() {
            formwork::BackendKind::Operators => "operators",
            _ => "earley",
        }
    }

    /// What a lenient JSON Schema compilation dropped or approximated, each with its JSON
    /// pointer (empty otherwise).
    #[getter]
    fn warnings(&self) -> Vec<String> {
        self.constraint
            .warnings()
            .iter()
            .map(|w| w.to_string())
            .collect()
    }

    fn __repr__(&self) -> String {
        format!("CompiledGrammar(backend={:?})", self.backend())
    }
}
