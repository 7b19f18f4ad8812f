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
//! # Example
//!
//! ```
//! use formwork::front::tags::{TagDispatch, Tool, ToolFormat};
//! use formwork::ir::reference::{Recognizer, Unit};
//!
//! let tools = [Tool::new("get_weather", serde_json::json!({
//!     "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
//!     "additionalProperties": false}))];
//! let grammar = TagDispatch::for_tools(ToolFormat::Llama31, &tools).compile().unwrap();
//! let rec = Recognizer::new(&grammar);
//! let accepts = |text: &str| {
//!     let mut chart = rec.start();
//!     text.bytes().all(|b| chart.push(&rec, Unit::Byte(b))) && chart.is_accepting(&rec)
//! };
//! assert!(accepts(r#"Let me check. <function=get_weather>{"city":"Oslo"}</function>"#));
//! assert!(!accepts(r#"<function=get_time>{}</function>"#));
//! assert!(!accepts(r#"<function=get_weather>{"town":"Oslo"}</function>"#));
//! ```

use std::collections::HashMap;

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::dfa::DFA;
use aho_corasick::{Anchored, MatchKind};
use rustc_hash::FxHashMap;
use serde_json::{json, Value};

use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::guard::tick;
use crate::front::json_schema::{schema_expr, JsonSchemaOptions, Whitespace};
use crate::ir::{ByteSet, ExprId, Grammar, GrammarBuilder, RuleId};
use crate::limits::{Deadline, LimitExceeded, LimitKind, Limits};

/// A tool the model may call: its name and the JSON Schema of its arguments.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    /// Function name.
    pub name: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

impl Tool {
    /// A tool.
    pub fn new(name: impl Into<String>, parameters: Value) -> Tool {
        Tool {
            name: name.into(),
            parameters,
        }
    }
}

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
        }
    }
}

impl TagDispatch {
    /// No tags: plain text.
    pub fn new() -> TagDispatch {
        TagDispatch::default()
    }

    /// The tool-call format `format` for `tools` (one trigger per format; the body picks the
    /// tool). Arguments are compact JSON with no undeclared properties unless
    /// [`schema_options`](Self::schema_options) says otherwise.
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
                let bodies = tools
                    .iter()
                    .map(|tool| TagBody {
                        prefix: vec![t("\n")],
                        schema: json!({
                            "type": "object",
                            "properties": {"name": {"const": tool.name}, "arguments": tool.parameters},
                            "required": ["name", "arguments"],
                            "additionalProperties": false
                        }),
                        suffix: vec![t("\n</tool_call>")],
                    })
                    .collect();
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
    /// "parameters"}`, BFCL's type names mapped by [`crate::front::bfcl`]). `harmony` takes its
    /// markers as special tokens, `harmony-text` as text. `require_call` and `forbid` (text
    /// sequences free text may not contain) are optional.
    ///
    /// ```
    /// use formwork::front::tags::TagDispatch;
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
                    let mapped = crate::front::bfcl::tools(&Value::Array(vec![entry.clone()]))
                        .map_err(|e| {
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
    /// use formwork::front::tags::{TagDispatch, Tool, ToolFormat};
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

/// Marks a special token inside the byte alphabet the automaton reads: 0xFF never occurs in
/// UTF-8 text. Two continuation bytes follow with the special's index ([`encode_special`]):
/// no sequence starts with a continuation byte, so after a special the automaton never takes
/// its index for the start of some text sequence.
const SPECIAL_MARK: u8 = 0xFF;

/// Most special tokens one dispatch can name: two continuation bytes of six bits each.
const MAX_SPECIALS: usize = 1 << 12;

/// The bytes the automaton reads for the special token of index `i` (below [`MAX_SPECIALS`]).
fn encode_special(i: usize) -> [u8; 3] {
    [
        SPECIAL_MARK,
        0x80 | (i >> 6 & 0x3F) as u8,
        0x80 | (i & 0x3F) as u8,
    ]
}

/// UTF-8 decoding states: 0 at a character boundary, 1..=3 continuation bytes still due, 4..=7
/// after the lead bytes E0, ED, F0 and F4, which narrow the next byte.
fn utf8_step(state: usize, b: u8) -> Option<usize> {
    Some(match (state, b) {
        (0, 0x00..=0x7F) => 0,
        (0, 0xC2..=0xDF) => 1,
        (0, 0xE0) => 4,
        (0, 0xE1..=0xEC | 0xEE..=0xEF) => 2,
        (0, 0xED) => 5,
        (0, 0xF0) => 6,
        (0, 0xF1..=0xF3) => 3,
        (0, 0xF4) => 7,
        (1, 0x80..=0xBF) => 0,
        (2, 0x80..=0xBF) | (4, 0xA0..=0xBF) | (5, 0x80..=0x9F) => 1,
        (3, 0x80..=0xBF) | (6, 0x90..=0xBF) | (7, 0x80..=0x8F) => 2,
        _ => return None,
    })
}

struct Builder<'d> {
    d: &'d TagDispatch,
    limits: &'d Limits,
    deadline: &'d Deadline,
    g: GrammarBuilder,
    dfa: DFA,
    /// Encoded triggers and stops (forbidden sequences never begin or end anything).
    triggers: Vec<Vec<u8>>,
    stops: Vec<Vec<u8>>,
    /// The special tokens free text may hold, each with its encoding.
    free: Vec<(String, Vec<u8>)>,
}

/// The `Limit` error of `exceeded` at `pointer` (of the `formwork check --tags` spec).
fn over(exceeded: LimitExceeded, pointer: &str, what: &str) -> CompileError {
    CompileError::over_limit(exceeded, Location::JsonPointer(pointer.to_string()), what)
}

impl<'d> Builder<'d> {
    fn new(
        d: &'d TagDispatch,
        limits: &'d Limits,
        deadline: &'d Deadline,
    ) -> Result<Builder<'d>, CompileError> {
        let count = |n: usize, at: &str, what: &str| {
            limits
                .check(LimitKind::Alternatives, n as u64)
                .map_err(|e| over(e, at, what))
        };
        count(d.tool_names.len(), "/tools", "tools")?;
        count(d.tags.len(), "/tags", "tags")?;
        count(d.stops.len(), "/stops", "stop sequences")?;
        count(d.forbidden.len(), "/forbid", "forbidden sequences")?;
        let mut names: HashMap<&str, usize> = HashMap::new();
        for (j, name) in d.tool_names.iter().enumerate() {
            if let Some(i) = names.insert(name, j) {
                return Err(CompileError::new(
                    CompileErrorKind::Invalid,
                    Location::JsonPointer(format!("/tools/{j}")),
                    format!("tool {j} is named {name:?} like tool {i}: a call could not say which tool it calls"),
                ));
            }
        }
        let mut specials: Vec<String> = Vec::new();
        let mut index: HashMap<String, usize> = HashMap::new();
        let all_pieces = d
            .tags
            .iter()
            .flat_map(|t| {
                t.begin.iter().chain(
                    t.bodies
                        .iter()
                        .flat_map(|b| b.prefix.iter().chain(&b.suffix)),
                )
            })
            .chain(d.stops.iter().flatten())
            .chain(d.forbidden.iter().flatten());
        let specials_in = d
            .free_specials
            .iter()
            .chain(all_pieces.filter_map(|p| match p {
                Piece::Special(s) => Some(s),
                Piece::Text(_) => None,
            }));
        for s in specials_in {
            if !index.contains_key(s) {
                index.insert(s.clone(), specials.len());
                specials.push(s.clone());
            }
        }
        if specials.len() > MAX_SPECIALS {
            let exceeded = LimitExceeded {
                kind: LimitKind::Alternatives,
                value: specials.len() as u64,
                max: MAX_SPECIALS as u64,
            };
            return Err(CompileError::over_limit(
                exceeded,
                Location::None,
                "special tokens of one tag dispatch",
            ));
        }
        // Every special was indexed above.
        let encode = |seq: &[Piece]| -> Vec<u8> {
            let mut out = Vec::new();
            for p in seq {
                match p {
                    Piece::Text(t) => out.extend_from_slice(t.as_bytes()),
                    Piece::Special(s) => out.extend(encode_special(index[s])),
                }
            }
            out
        };
        let triggers: Vec<Vec<u8>> = d.tags.iter().map(|t| encode(&t.begin)).collect();
        let stops: Vec<Vec<u8>> = d.stops.iter().map(|s| encode(s)).collect();
        let forbidden: Vec<Vec<u8>> = d.forbidden.iter().map(|s| encode(s)).collect();
        let free = d
            .free_specials
            .iter()
            .map(|s| (s.clone(), encode_special(index[s]).to_vec()))
            .collect();
        // The automaton has a state per byte of the sequences at most, and one to start.
        let mut states = 1u64;
        for (list, at) in [
            (&triggers, "/tags"),
            (&stops, "/stops"),
            (&forbidden, "/forbid"),
        ] {
            states += list.iter().map(|p| p.len() as u64).sum::<u64>();
            limits
                .check(LimitKind::AutomatonStates, states)
                .map_err(|e| over(e, at, "the automaton of the tag dispatch's sequences"))?;
        }
        let patterns: Vec<&Vec<u8>> = triggers.iter().chain(&stops).chain(&forbidden).collect();
        if patterns.iter().any(|p| p.is_empty()) {
            if let Some(i) = triggers.iter().position(Vec::is_empty) {
                return Err(invalid_trigger(i, "a trigger cannot be empty".into()));
            }
            return Err(CompileError::unplaced(
                CompileErrorKind::Invalid,
                "stop and forbidden sequences cannot be empty",
            ));
        }
        tick(deadline)?;
        let dfa = DFA::builder()
            .match_kind(MatchKind::Standard)
            .build(&patterns)
            .map_err(|e| {
                CompileError::unplaced(CompileErrorKind::Limit, format!("tag automaton: {e}"))
            })?;
        tick(deadline)?;
        // A trigger must not contain another sequence: read through the automaton, no
        // sequence may end before its last byte, and none but itself at it.
        for (i, t) in triggers.iter().enumerate() {
            let start = start_state(&dfa);
            let mut sid = start;
            for (k, &b) in t.iter().enumerate() {
                tick(deadline)?;
                sid = dfa.next_state(Anchored::No, sid, b);
                let others = match k + 1 == t.len() {
                    true => (0..dfa.match_len(sid))
                        .map(|m| dfa.match_pattern(sid, m).as_usize())
                        .find(|&j| j != i),
                    false if dfa.is_match(sid) => Some(dfa.match_pattern(sid, 0).as_usize()),
                    false => None,
                };
                if let Some(j) = others {
                    return Err(invalid_trigger(i, format!("trigger {i} contains another trigger, stop or forbidden sequence ({j}), so it could never be written")));
                }
            }
        }
        Ok(Builder {
            d,
            limits,
            deadline,
            g: GrammarBuilder::with_limits(limits),
            dfa,
            triggers,
            stops,
            free,
        })
    }

    /// Walks `seq` from `sid`; the end state if no sequence completes before its last byte.
    fn walk(&self, sid: StateID, seq: &[u8]) -> Option<StateID> {
        let mut s = sid;
        for (k, &b) in seq.iter().enumerate() {
            s = self.dfa.next_state(Anchored::No, s, b);
            if self.dfa.is_match(s) && k + 1 < seq.len() {
                return None;
            }
        }
        Some(s)
    }

    fn pieces(&mut self, seq: &[Piece]) -> ExprId {
        let parts: Vec<ExprId> = seq
            .iter()
            .map(|p| match p {
                Piece::Text(t) => self.g.text(t),
                Piece::Special(s) => self.g.special(s),
            })
            .collect();
        self.g.seq(parts)
    }

    /// `Ok` while the grammar is within its size limit and the deadline has not passed.
    fn check(&self) -> Result<(), CompileError> {
        tick(self.deadline)?;
        self.limits
            .check(LimitKind::GrammarSize, self.g.len() as u64)
            .map_err(|e| CompileError::over_limit(e, Location::None, "the tag dispatch's grammar"))
    }

    fn build(mut self) -> Result<Grammar, CompileError> {
        let d = self.d;
        // Bodies, compiled once per tag.
        let mut bodies = Vec::new();
        for (i, tag) in d.tags.iter().enumerate() {
            let mut alts = Vec::new();
            for (j, body) in tag.bodies.iter().enumerate() {
                let at = format!("/tags/{i}/bodies/{j}/schema");
                let (value, _warnings) = schema_expr(
                    &body.schema,
                    &d.options,
                    &mut self.g,
                    &format!("tag {i} body {j}: "),
                    self.limits,
                    self.deadline,
                )
                .map_err(|e| match e.location() {
                    Location::JsonPointer(p) => {
                        let place = Location::JsonPointer(format!("{at}{p}"));
                        e.within(place, &format!("tag {i} body {j}"))
                    }
                    _ => e,
                })?;
                let prefix = self.pieces(&body.prefix);
                let suffix = self.pieces(&body.suffix);
                alts.push(self.g.seq([prefix, value, suffix]));
            }
            bodies.push(self.g.alt(alts));
        }
        // Free text: a rule per (called yet?, automaton state, UTF-8 state) reached from the
        // start, made as it is first referred to and defined from a worklist.
        let copies = if d.require_call { 2 } else { 1 };
        let after_call = copies - 1;
        let start = start_state(&self.dfa);
        let mut text = TextRules::default();
        let first = text.rule(&mut self.g, (0, start, 0));
        let again = text.rule(&mut self.g, (after_call, start, 0));
        let mut targets: Vec<((StateID, usize), ByteSet)> = Vec::new();
        let mut target_of: FxHashMap<(StateID, usize), usize> = FxHashMap::default();
        while let Some(((c, sid, u), rule)) = text.pending.pop() {
            self.check()?;
            let mut branches = Vec::new();
            // Bytes of free text, grouped by the state they lead to.
            targets.clear();
            target_of.clear();
            for b in 0..=255u8 {
                let Some(next_u) = utf8_step(u, b) else {
                    continue;
                };
                let next = self.dfa.next_state(Anchored::No, sid, b);
                if self.dfa.is_match(next) {
                    continue;
                }
                match target_of.get(&(next, next_u)) {
                    Some(&k) => targets[k].1.insert(b),
                    None => {
                        target_of.insert((next, next_u), targets.len());
                        targets.push(((next, next_u), ByteSet::byte(b)));
                    }
                }
            }
            for &((next, next_u), set) in &targets {
                let class = self.g.class(set);
                let then = text.rule(&mut self.g, (c, next, next_u));
                let then = self.g.rule_ref(then);
                branches.push(self.g.seq([class, then]));
            }
            if u == 0 {
                // Special tokens allowed in free text.
                for (name, bytes) in &self.free {
                    if let Some(next) = self.walk(sid, bytes) {
                        if !self.dfa.is_match(next) {
                            let sp = self.g.special(name);
                            let then = text.rule(&mut self.g, (c, next, 0));
                            let then = self.g.rule_ref(then);
                            branches.push(self.g.seq([sp, then]));
                        }
                    }
                }
                // A trigger, its body, then free text again.
                for (i, tag) in d.tags.iter().enumerate() {
                    tick(self.deadline)?;
                    if self.walk(sid, &self.triggers[i]).is_some() {
                        let begin = self.pieces(&tag.begin);
                        let rest = self.g.rule_ref(again);
                        branches.push(self.g.seq([begin, bodies[i], rest]));
                    }
                }
                if c == after_call {
                    branches.push(self.g.empty());
                    for (k, stop) in d.stops.iter().enumerate() {
                        tick(self.deadline)?;
                        if self.walk(sid, &self.stops[k]).is_some() {
                            branches.push(self.pieces(stop));
                        }
                    }
                }
            }
            let body = self.g.alt(branches);
            self.g.define(rule, body)?;
        }
        let root = self.g.rule("tag dispatch");
        let first = self.g.rule_ref(first);
        self.g.define(root, first)?;
        self.g.finish(root)
    }
}

/// The start of the automaton. Cannot fail: the DFA's builder makes unanchored searches by
/// default.
fn start_state(dfa: &DFA) -> StateID {
    dfa.start_state(Anchored::No).expect("unanchored start")
}

/// The `Invalid` error of trigger `i`.
fn invalid_trigger(i: usize, what: String) -> CompileError {
    CompileError::new(
        CompileErrorKind::Invalid,
        Location::JsonPointer(format!("/tags/{i}/begin")),
        what,
    )
}

/// The free-text rules made so far, by (copy, automaton state, UTF-8 state), and those not
/// defined yet.
#[derive(Default)]
struct TextRules {
    rules: FxHashMap<(usize, StateID, usize), RuleId>,
    pending: Vec<((usize, StateID, usize), RuleId)>,
}

impl TextRules {
    /// The rule of `key`, declared (and queued for its definition) if new.
    fn rule(&mut self, g: &mut GrammarBuilder, key: (usize, StateID, usize)) -> RuleId {
        if let Some(&r) = self.rules.get(&key) {
            return r;
        }
        let (c, sid, u) = key;
        let r = g.rule(&format!("text {c} {} {u}", sid.as_usize()));
        self.rules.insert(key, r);
        self.pending.push((key, r));
        r
    }
}
