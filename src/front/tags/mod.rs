//! Tag dispatch (XGrammar 2's TagDispatch): free text until a trigger, then that trigger's
//! structured body (a tool name, its JSON arguments, the closing tag), then free text again.
//!
//! The language: free text is valid UTF-8 (no special tokens, except those allowed with
//! [`TagDispatch::free_special`]) that contains no trigger, no stop sequence and no forbidden
//! sequence. A trigger is only ever the start of its structured body, so a model cannot write a
//! trigger and then wander off, nor call a tool that does not exist. A stop sequence ends the
//! output. With [`TagDispatch::require_call`], the output must contain at least one call.
//!
//! Free text is built from an Aho–Corasick automaton over the triggers, stops and forbidden
//! sequences (`aho-corasick`'s DFA): one right-linear IR rule per automaton state and UTF-8
//! decoding state reached, so "text not containing any of these" is exact and grows with the
//! total length of the sequences, not with their number of combinations. The sequences are
//! valid UTF-8 and start on a character, so past the automaton's start the decoding state is
//! the sequence's own: about one rule per automaton state, not one per decoding state too.
//! The automaton has a state per byte of the sequences at most, checked against
//! [`Limits::automaton_states`](crate::Limits) before it is built; the lists' lengths against
//! [`Limits::alternatives`](crate::Limits), the grammar against its size limit and the work
//! against the compile-time budget as it goes.
//!
//! Sequences mix text and special tokens ([`Piece`]). Whether a marker such as Harmony's
//! `<|channel|>` is a special token or text depends on the tokenizer; [`ToolFormat::Harmony`]
//! takes it as a setting. Qwen3's `<tool_call>` is a non-special added token, i.e. text.
//!
//! This file holds the dispatch's description and its builder API; building the grammar (the
//! free-text automaton and the bodies) is in `build`.
//!
//! # Example
//!
//! ```
//! use formwork::tags::{TagDispatch, ToolFormat};
//! use formwork::Tool;
//! use formwork::ir::recognizer::{Recognizer, Terminal};
//!
//! let tools = [Tool::new("get_weather", serde_json::json!({
//!     "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
//!     "additionalProperties": false}))];
//! let grammar = TagDispatch::for_tools(ToolFormat::Llama31, &tools).compile().unwrap();
//! let rec = Recognizer::new(&grammar);
//! let accepts = |text: &str| {
//!     let mut chart = rec.start();
//!     text.bytes().all(|b| chart.push(&rec, Terminal::Byte(b))) && chart.is_accepting(&rec)
//! };
//! assert!(accepts(r#"Let me check. <function=get_weather>{"city":"Oslo"}</function>"#));
//! assert!(!accepts(r#"<function=get_time>{}</function>"#));
//! assert!(!accepts(r#"<function=get_weather>{"town":"Oslo"}</function>"#));
//! ```

mod build;

use serde_json::{json, Value};

use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::bfcl;
use crate::front::json_schema::{JsonSchemaOptions, Whitespace};
use crate::front::tool::Tool;
use crate::ir::Grammar;
use crate::limits::{Deadline, Limits};
use build::Builder;

/// Part of a sequence: text bytes, or a special token by its content.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Piece {
    /// Text (matched byte for byte, whatever the tokenization).
    Text(String),
    /// A special token (`<|call|>`), never matched by text.
    Special(String),
}

impl Piece {
    /// A text piece.
    pub fn text(s: &str) -> Piece {
        Piece::Text(s.to_string())
    }

    /// A special-token piece.
    pub fn special(s: &str) -> Piece {
        Piece::Special(s.to_string())
    }
}

/// One way a tag's body may go: `prefix`, a JSON value of `schema`, `suffix`.
#[derive(Clone, Debug)]
pub struct TagBody {
    /// What follows the trigger first (e.g. the tool name).
    pub prefix: Vec<Piece>,
    /// The JSON value's schema.
    pub schema: Value,
    /// What closes the body (e.g. `</function>`).
    pub suffix: Vec<Piece>,
}

/// A trigger and the bodies that may follow it.
#[derive(Clone, Debug)]
pub struct Tag {
    /// The trigger.
    pub begin: Vec<Piece>,
    /// The alternatives after it.
    pub bodies: Vec<TagBody>,
}

/// Ready-made tool-call formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolFormat {
    /// Llama 3.1's custom format: `<function=NAME>{...}</function>`.
    Llama31,
    /// Qwen 2.5/3 (Hermes style): `<tool_call>\n{"name": NAME, "arguments": {...}}\n</tool_call>`.
    Qwen,
    /// OpenAI Harmony (gpt-oss):
    /// `<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>`; the
    /// markers `<|channel|>`, `<|constrain|>`, `<|message|>`, `<|call|>` (and `<|start|>`,
    /// `<|end|>`, `<|return|>` in free text) are special tokens when `special_markers` (as in
    /// o200k_harmony), else text.
    Harmony {
        /// Are the markers special tokens?
        special_markers: bool,
    },
}

/// Free text with triggered structured bodies; builder style.
#[derive(Clone, Debug)]
pub struct TagDispatch {
    tags: Vec<Tag>,
    stops: Vec<Vec<Piece>>,
    forbidden: Vec<Vec<Piece>>,
    free_specials: Vec<String>,
    require_call: bool,
    options: JsonSchemaOptions,
    /// The names of the tools of [`for_tools`](Self::for_tools), in order: each must be
    /// distinct.
    tool_names: Vec<String>,
    /// Bodies (tag, body) whose value is not their schema's root but the subschema at this
    /// JSON pointer: a call object put inside the tool's parameters, so that the parameters
    /// stay the document their own `#/...` references resolve in.
    entries: Vec<((usize, usize), String)>,
}

impl Default for TagDispatch {
    fn default() -> Self {
        TagDispatch {
            tags: Vec::new(),
            stops: Vec::new(),
            forbidden: Vec::new(),
            free_specials: Vec::new(),
            require_call: false,
            options: JsonSchemaOptions::new().additional_properties(false),
            tool_names: Vec::new(),
            entries: Vec::new(),
        }
    }
}

/// The schema of a call object `{"name": NAME, "arguments": ARGS}` whose arguments follow
/// `parameters`, and the JSON pointer of the call object in it (`None`: the root).
///
/// Wrapped around the parameters, the call object would become their document's root: a
/// reference of theirs such as `#/$defs/Item` (what pydantic writes) would not resolve, and
/// one such as `#/properties/name` would silently name the call's `name` instead. So the
/// call object goes inside the parameters, under a `$defs` name of its own, and its
/// `arguments` refer back to the root (`#`). Parameters that cannot hold it (a boolean, a
/// `$defs` that is not an object) hold no references either, and are wrapped.
fn call_object(name: &str, parameters: &Value) -> (Value, Option<String>) {
    let call = |arguments: Value| {
        json!({
            "type": "object",
            "properties": {"name": {"const": name}, "arguments": arguments},
            "required": ["name", "arguments"],
            "additionalProperties": false
        })
    };
    let mut document = parameters.clone();
    let Some(map) = document.as_object_mut() else {
        return (call(parameters.clone()), None);
    };
    let defs = map
        .entry("$defs")
        .or_insert_with(|| Value::Object(Default::default()));
    let Some(defs) = defs.as_object_mut() else {
        return (call(parameters.clone()), None);
    };
    // A name the parameters never spell, so that none of their references (resolving or
    // not) can reach the call object.
    let spelled = parameters.to_string();
    let mut key = String::from("formwork-tool-call");
    while defs.contains_key(&key) || spelled.contains(&key) {
        key.push('_');
    }
    defs.insert(key.clone(), call(json!({"$ref": "#"})));
    (document, Some(format!("/$defs/{key}")))
}

impl TagDispatch {
    /// The JSON pointer at which the value of body `j` of tag `i` starts in its schema.
    pub(crate) fn entry(&self, i: usize, j: usize) -> &str {
        self.entries
            .iter()
            .find(|(at, _)| *at == (i, j))
            .map_or("", |(_, entry)| entry)
    }

    /// No tags: plain text.
    pub fn new() -> TagDispatch {
        TagDispatch::default()
    }

    /// The tool-call format `format` for `tools` (one trigger per format; the body picks the
    /// tool). Arguments are compact JSON with no undeclared properties unless
    /// [`schema_options`](Self::schema_options) says otherwise.
    // Long: one match over the tool-call formats, each spelling out its format's pieces.
    pub fn for_tools(format: ToolFormat, tools: &[Tool]) -> TagDispatch {
        let t = Piece::text;
        let s = |x: &str, special: bool| {
            if special {
                Piece::special(x)
            } else {
                Piece::text(x)
            }
        };
        let mut d = TagDispatch::new();
        d.tool_names = tools.iter().map(|tool| tool.name.clone()).collect();
        match format {
            ToolFormat::Llama31 => {
                let bodies = tools
                    .iter()
                    .map(|tool| TagBody {
                        prefix: vec![t(&format!("{}>", tool.name))],
                        schema: tool.parameters.clone(),
                        suffix: vec![t("</function>")],
                    })
                    .collect();
                d.tags.push(Tag {
                    begin: vec![t("<function=")],
                    bodies,
                });
            }
            ToolFormat::Qwen => {
                // The call object itself is JSON: {"name": NAME, "arguments": ARGS}.
                let mut bodies = Vec::with_capacity(tools.len());
                for (j, tool) in tools.iter().enumerate() {
                    let (schema, entry) = call_object(&tool.name, &tool.parameters);
                    if let Some(entry) = entry {
                        d.entries.push(((0, j), entry));
                    }
                    bodies.push(TagBody {
                        prefix: vec![t("\n")],
                        schema,
                        suffix: vec![t("\n</tool_call>")],
                    });
                }
                d.tags.push(Tag {
                    begin: vec![t("<tool_call>")],
                    bodies,
                });
                d.options = d
                    .options
                    .whitespace(Whitespace::Flexible { max_run: Some(1) });
            }
            ToolFormat::Harmony {
                special_markers: sp,
            } => {
                let bodies = tools
                    .iter()
                    .map(|tool| TagBody {
                        prefix: vec![
                            t(&format!("functions.{} ", tool.name)),
                            s("<|constrain|>", sp),
                            t("json"),
                            s("<|message|>", sp),
                        ],
                        schema: tool.parameters.clone(),
                        suffix: vec![s("<|call|>", sp)],
                    })
                    .collect();
                d.tags.push(Tag {
                    begin: vec![s("<|channel|>", sp), t("commentary to=")],
                    bodies,
                });
                if sp {
                    // Analysis, preamble and final messages between calls.
                    for m in [
                        "<|channel|>",
                        "<|message|>",
                        "<|end|>",
                        "<|start|>",
                        "<|constrain|>",
                    ] {
                        d.free_specials.push(m.to_string());
                    }
                    d.stops.push(vec![Piece::special("<|return|>")]);
                }
            }
        }
        d
    }

    /// Adds a trigger and its bodies.
    pub fn tag(mut self, tag: Tag) -> Self {
        self.tags.push(tag);
        self
    }

    /// A sequence that ends the output.
    pub fn stop(mut self, seq: Vec<Piece>) -> Self {
        self.stops.push(seq);
        self
    }

    /// A sequence free text may never contain (e.g. `<think>` to keep the model from thinking).
    pub fn forbid(mut self, seq: Vec<Piece>) -> Self {
        self.forbidden.push(seq);
        self
    }

    /// A special token free text may contain.
    pub fn free_special(mut self, content: &str) -> Self {
        self.free_specials.push(content.to_string());
        self
    }

    /// Must the output make at least one call?
    pub fn require_call(mut self, required: bool) -> Self {
        self.require_call = required;
        self
    }

    /// How bodies' JSON values are compiled.
    pub fn schema_options(mut self, options: JsonSchemaOptions) -> Self {
        self.options = options;
        self
    }

    /// A tool-call dispatch from its JSON description (the `formwork check --tags` file):
    ///
    /// ```json
    /// {"format": "llama31" | "qwen" | "harmony" | "harmony-text",
    ///  "tools": [ ... ],
    ///  "require_call": false,
    ///  "forbid": ["<think>"]}
    /// ```
    ///
    /// `tools` is an OpenAI-style list (`{"type": "function", "function": {"name",
    /// "parameters"}}`, parameters in standard JSON Schema) or a BFCL function list (`{"name",
    /// "parameters"}`, BFCL's type names mapped to JSON Schema's). `harmony` takes its
    /// markers as special tokens, `harmony-text` as text. `require_call` and `forbid` (text
    /// sequences free text may not contain) are optional.
    ///
    /// ```
    /// use formwork::tags::TagDispatch;
    ///
    /// let spec = serde_json::json!({"format": "qwen", "tools": [{"type": "function",
    ///     "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}]});
    /// let grammar = TagDispatch::from_spec(&spec).unwrap().compile().unwrap();
    /// assert!(grammar.rules().len() > 1);
    /// let bad = TagDispatch::from_spec(&serde_json::json!({"format": "xml", "tools": []}));
    /// assert_eq!(bad.unwrap_err().location(), &formwork::Location::JsonPointer("/format".into()));
    /// ```
    pub fn from_spec(spec: &Value) -> Result<TagDispatch, CompileError> {
        let invalid = |at: &str, what: String| {
            CompileError::new(
                CompileErrorKind::Invalid,
                Location::JsonPointer(at.to_string()),
                what,
            )
        };
        let format = match spec.get("format").and_then(Value::as_str) {
            Some("llama31") => ToolFormat::Llama31,
            Some("qwen") => ToolFormat::Qwen,
            Some("harmony") => ToolFormat::Harmony {
                special_markers: true,
            },
            Some("harmony-text") => ToolFormat::Harmony {
                special_markers: false,
            },
            other => {
                return Err(invalid(
                    "/format",
                    format!(
                        "expected \"llama31\", \"qwen\", \"harmony\" or \"harmony-text\", found {}",
                        other.map_or("nothing".to_string(), |f| format!("{f:?}"))
                    ),
                ))
            }
        };
        let Some(Value::Array(list)) = spec.get("tools") else {
            return Err(invalid("/tools", "expected a list of tools".into()));
        };
        let mut tools = Vec::with_capacity(list.len());
        for (i, entry) in list.iter().enumerate() {
            match entry.get("function") {
                Some(f) if entry.get("type").and_then(Value::as_str) == Some("function") => {
                    let name = f.get("name").and_then(Value::as_str).ok_or_else(|| {
                        invalid(
                            &format!("/tools/{i}/function/name"),
                            "a function needs a name".into(),
                        )
                    })?;
                    let params = f.get("parameters").cloned().unwrap_or_else(
                        || json!({"type": "object", "properties": {}, "additionalProperties": false}),
                    );
                    tools.push(Tool::new(name, params));
                }
                _ => {
                    let mapped = bfcl::tools(&Value::Array(vec![entry.clone()])).map_err(|e| {
                        let at = match e.location() {
                            Location::JsonPointer(p) => {
                                format!("/tools/{i}{}", p.strip_prefix("/0").unwrap_or(p))
                            }
                            _ => format!("/tools/{i}"),
                        };
                        CompileError::new(e.kind(), Location::JsonPointer(at), e.message())
                    })?;
                    tools.extend(mapped);
                }
            }
        }
        let mut d = TagDispatch::for_tools(format, &tools);
        if let Some(required) = spec.get("require_call") {
            let required = required
                .as_bool()
                .ok_or_else(|| invalid("/require_call", "expected true or false".into()))?;
            d = d.require_call(required);
        }
        if let Some(forbid) = spec.get("forbid") {
            let Value::Array(seqs) = forbid else {
                return Err(invalid("/forbid", "expected a list of strings".into()));
            };
            for (i, seq) in seqs.iter().enumerate() {
                let text = seq
                    .as_str()
                    .ok_or_else(|| invalid(&format!("/forbid/{i}"), "expected a string".into()))?;
                d = d.forbid(vec![Piece::text(text)]);
            }
        }
        Ok(d)
    }

    /// The grammar, within the default [`Limits`]. Errors: a schema's (its pointer prefixed
    /// by `/tags/i/bodies/j/schema`), two tools of one name (`Invalid` at `/tools/j`), a
    /// trigger that is empty or contains another trigger, stop or forbidden sequence
    /// (`Invalid`), a limit reached (`Limit`, see the module notes).
    ///
    /// Two tools may not share a name: a call names the function to run, so the arguments of
    /// either would be accepted for it and the caller could not tell which definition they
    /// follow. The tool-calling APIs these formats come from reject such lists too.
    ///
    /// ```
    /// use formwork::tags::{TagDispatch, ToolFormat};
    /// use formwork::Tool;
    /// use formwork::{CompileErrorKind, Location};
    ///
    /// let tools = [Tool::new("f", serde_json::json!({})), Tool::new("f", serde_json::json!({}))];
    /// let err = TagDispatch::for_tools(ToolFormat::Qwen, &tools).compile().unwrap_err();
    /// assert_eq!(err.kind(), CompileErrorKind::Invalid);
    /// assert_eq!(err.location(), &Location::JsonPointer("/tools/1".into()));
    /// ```
    pub fn compile(&self) -> Result<Grammar, CompileError> {
        self.compile_with(&Limits::new())
    }

    /// [`compile`](Self::compile) within `limits` (its compile-time budget starting now).
    pub fn compile_with(&self, limits: &Limits) -> Result<Grammar, CompileError> {
        self.compile_within(limits, &limits.deadline())
    }

    /// [`compile_with`](Self::compile_with) against a deadline that spans more than the front
    /// end (the engine's, for the whole compilation).
    pub(crate) fn compile_within(
        &self,
        limits: &Limits,
        deadline: &Deadline,
    ) -> Result<Grammar, CompileError> {
        Builder::new(self, limits, deadline)?.build()
    }
}
