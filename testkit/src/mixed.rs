//! A mixed batch of real constraints on the Qwen3 vocabulary, over every backend: the three
//! shipped templates and a regex (operator backend), a recursive JSON schema and a GBNF
//! grammar (Earley backend). Each comes with a valid sample text and a validator that shares
//! no code with formwork (the `regex` crate, `serde_json` + `jsonschema`, a hand-written parser).
//!
//! Used by the decode example, `tests/decode.rs`, `tests/gpu_fill.rs` and `benches/batch.rs`.

use std::error::Error;

use formwork::engine::{BackendKind, Constraint, Engine};
use formwork::front::json_schema::JsonSchemaOptions;
use formwork::vocab::Vocab;
use formwork::{Matcher, TokenId};
use regex::bytes::Regex as BytesRegex;
use regex::Regex;
use serde_json::{json, Value};

/// A matcher some tokens into its spec's sample, with the sample tokens (then EOS) it has left.
pub type Positioned = (Box<dyn Matcher>, Vec<TokenId>);

/// Checks a rendered output (see [`render`]); the error says what is wrong.
type Check = Box<dyn Fn(&[u8]) -> Result<(), String> + Send + Sync>;

/// One constraint of the batch.
pub struct Spec {
    /// Short name, for reports.
    pub name: &'static str,
    /// Which front end it came through.
    pub front: &'static str,
    /// A text the constraint accepts.
    pub sample: &'static str,
    compiled: Constraint,
    check: Check,
}

impl Spec {
    /// A fresh matcher at the start of the constraint.
    pub fn matcher(&self) -> Box<dyn Matcher> {
        Box::new(self.compiled.matcher())
    }

    /// The backend the engine's router picked.
    pub fn backend(&self) -> &'static str {
        match self.compiled.backend() {
            BackendKind::Operators => "operators",
            BackendKind::Earley => "Earley",
            _ => "another backend",
        }
    }

    /// Validates an output (the tokens before EOS, EOS itself allowed last).
    pub fn validate(&self, vocab: &Vocab, tokens: &[TokenId]) -> Result<(), String> {
        (self.check)(&render(vocab, tokens))
    }
}

/// The output as the validators read it: text tokens as their bytes, a special token as the
/// byte 0xFF (never part of UTF-8 text) followed by its content; a final EOS is dropped.
pub fn render(vocab: &Vocab, tokens: &[TokenId]) -> Vec<u8> {
    let tokens = match tokens.split_last() {
        Some((&last, rest)) if vocab.is_eos(last) => rest,
        _ => tokens,
    };
    let mut out = Vec::new();
    for &t in tokens {
        if vocab.is_special(t) {
            out.push(0xFF);
        }
        out.extend_from_slice(vocab.token_bytes(t));
    }
    out
}

/// The output for people: text lossily decoded, special tokens by content, EOS left out.
pub fn display(vocab: &Vocab, tokens: &[TokenId]) -> String {
    let bytes: Vec<u8> = tokens
        .iter()
        .filter(|&&t| !vocab.is_eos(t))
        .flat_map(|&t| vocab.token_bytes(t).iter().copied())
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// The engine (Qwen3 with the shipped templates), the CFG compiler, and the constraints.
pub struct Mixed {
    /// The engine (its vocabulary is the batch's).
    pub engine: Engine,
    /// The constraints, each compiled once.
    pub specs: Vec<Spec>,
}

const OUTLINE: &str = r#"outline(sections: [
    section(id: "1", children: [section(id: "1.1"), section(id: "1.2")]),
    section(id: "2")])"#;
const OUTLINE_IDS: [&str; 4] = ["1", "1.1", "1.2", "2"];
const OUTLINE_SAMPLE: &str = concat!(
    "<|vision_start|>1 Background<|vision_pad|>Why the study was needed.<|vision_end|>\n",
    "<|vision_start|>1.1 Prior work<|vision_pad|>Two earlier surveys.<|vision_end|>\n",
    "<|vision_start|>1.2 Gaps<|vision_pad|>What they missed.<|vision_end|>\n",
    "<|vision_start|>2 Results<|vision_pad|>The main findings.<|vision_end|>\n",
);

const LOOKUP: &str =
    r#"reference_lookup(topics: 1..3, ids: {"1", "1.1", "2", "2.1.1", "2.3", "4.2.3"})"#;
const LOOKUP_SAMPLE: &str =
    r#"[{"topic": [1], "reference": ["2.1.1", "2.3"]}, {"topic": [3, 2], "reference": ["1"]}]"#;

const TOOL_CALL: &str = r#"tool_call(tools: [
    tool(name: "get_weather", params: [
        param(name: "city", value: string),
        param(name: "unit", value: enum(values: {"celsius", "fahrenheit"})),
        param(name: "days", value: integer(range: 1..7))]),
    tool(name: "search", params: [
        param(name: "query", value: string),
        param(name: "since", value: pattern(re: /[0-9]{4}-[0-9]{2}-[0-9]{2}/))])])"#;
const TOOL_CALL_SAMPLE: &str = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Lyon \\\"centre\\\"\", \"unit\": \"celsius\", \"days\": 3}}\n</tool_call>";

const EMAIL: &str = r"[a-z]{3,10}(\.[a-z]{2,8}){0,2}@[a-z]{2,10}\.(com|org|net)";
const EMAIL_SAMPLE: &str = "ada.lovelace@example.org";

const ARITH: &str = r#"
root   ::= expr
expr   ::= term (("+" | "-") term)*
term   ::= factor (("*" | "/") factor)*
factor ::= [0-9]+ | "(" expr ")"
"#;
const ARITH_SAMPLE: &str = "(1+23)*4-(5/(6+7))";

fn task_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "integer", "minimum": 1, "maximum": 9999},
            "title": {"type": "string", "minLength": 1, "maxLength": 24},
            "tags": {"type": "array", "items": {"enum": ["bug", "docs", "perf"]}, "maxItems": 3},
            "status": {"enum": ["open", "closed"]},
            "subtasks": {"type": "array", "items": {"$ref": "#"}, "maxItems": 3}
        },
        "required": ["id", "title", "status"],
        "additionalProperties": false
    })
}
const TASK_SAMPLE: &str = r#"{"id":42,"title":"Fix the \"cache\"","tags":["bug","perf"],"status":"open","subtasks":[{"id":7,"title":"Bo","status":"closed","subtasks":[]}]}"#;

impl Mixed {
    /// Loads Qwen3, registers the shipped templates and compiles the six constraints.
    pub fn new() -> Result<Mixed, Box<dyn Error>> {
        let vocab = Vocab::embedded_qwen3()?;
        let mut engine = Engine::new(vocab.clone());
        engine.register_templates([crate::repo_path("templates")])?;
        let schema = task_schema();
        let specs = vec![
            Spec {
                name: "outline",
                front: "template",
                sample: OUTLINE_SAMPLE,
                compiled: engine.compile(OUTLINE)?,
                check: outline_check(&OUTLINE_IDS)?,
            },
            Spec {
                name: "reference_lookup",
                front: "template",
                sample: LOOKUP_SAMPLE,
                compiled: engine.compile(LOOKUP)?,
                check: lookup_check()?,
            },
            Spec {
                name: "tool_call",
                front: "template",
                sample: TOOL_CALL_SAMPLE,
                compiled: engine.compile(TOOL_CALL)?,
                check: tool_call_check()?,
            },
            Spec {
                name: "email regex",
                front: "regex",
                sample: EMAIL_SAMPLE,
                compiled: engine.compile_regex(EMAIL)?,
                check: regex_check(EMAIL)?,
            },
            Spec {
                name: "task schema",
                front: "JSON schema",
                sample: TASK_SAMPLE,
                compiled: engine.compile_json_schema(&schema, &JsonSchemaOptions::new())?,
                check: schema_check(&schema)?,
            },
            Spec {
                name: "arithmetic",
                front: "GBNF",
                sample: ARITH_SAMPLE,
                compiled: engine.compile_gbnf(ARITH, "arith.gbnf")?,
                check: Box::new(arith_check),
            },
        ];
        Ok(Mixed { engine, specs })
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Vocab {
        self.engine.vocab()
    }

    /// The spec of batch row `row` (rows cycle through the constraints).
    pub fn spec(&self, row: usize) -> &Spec {
        &self.specs[row % self.specs.len()]
    }

    /// `rows` fresh matchers, row `i` on [`Mixed::spec`]`(i)`.
    pub fn matchers(&self, rows: usize) -> Vec<Box<dyn Matcher>> {
        (0..rows).map(|i| self.spec(i).matcher()).collect()
    }

    /// `rows` matchers, row `i` a different number of tokens into its spec's sample (up to all
    /// of it, EOS included), so the batch holds many states. Returns them with each row's
    /// remaining sample tokens.
    pub fn matchers_along_samples(&self, rows: usize) -> Result<Vec<Positioned>, Box<dyn Error>> {
        let eos = self.vocab().eos_tokens()[0];
        (0..rows)
            .map(|i| {
                let spec = self.spec(i);
                let mut text = self.vocab().encode(spec.sample)?;
                text.push(eos);
                let mut m = spec.matcher();
                let at = (i * 7 + i / self.specs.len()) % text.len();
                m.consume_all(&text[..at])?;
                Ok((m, text.split_off(at)))
            })
            .collect()
    }
}

fn utf8(out: &[u8]) -> Result<&str, String> {
    std::str::from_utf8(out).map_err(|e| format!("not UTF-8 text ({e})"))
}

fn whole_match(re: &Regex, out: &[u8], what: &str) -> Result<(), String> {
    match re.is_match(utf8(out)?) {
        true => Ok(()),
        false => Err(format!("does not match {what}")),
    }
}

/// One record per section in document order, specials where the template puts them.
fn outline_check(ids: &[&str]) -> Result<Check, regex::Error> {
    let special = |name: &str| format!(r"(?-u:\xFF){}", regex::escape(name));
    let records: String = ids
        .iter()
        .map(|id| {
            format!(
                r"{}{} [^\n]*{}(?s:.)*{}\n",
                special("<|vision_start|>"),
                regex::escape(id),
                special("<|vision_pad|>"),
                special("<|vision_end|>"),
            )
        })
        .collect();
    let re = BytesRegex::new(&format!("^{records}$"))?;
    Ok(Box::new(move |out| match re.is_match(out) {
        true => Ok(()),
        false => Err("not one outline record per section, in order".into()),
    }))
}

/// A JSON string as RFC 8259 spells it.
const JSON_STRING: &str = r#""(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*""#;

fn lookup_check() -> Result<Check, regex::Error> {
    let id = r#""(?:1|1\.1|2|2\.1\.1|2\.3|4\.2\.3)""#;
    let entry =
        format!(r#"\{{"topic": \[[1-3](?:, [1-3])*\], "reference": \[{id}(?:, {id})*\]\}}"#);
    let re = Regex::new(&format!(r"^\[{entry}(?:, {entry})*\]$"))?;
    Ok(Box::new(move |out| {
        whole_match(&re, out, "the reference lookup format")?;
        serde_json::from_slice::<Value>(out)
            .map(drop)
            .map_err(|e| format!("not JSON: {e}"))
    }))
}

fn tool_call_check() -> Result<Check, regex::Error> {
    let s = JSON_STRING;
    let weather = format!(
        r#"\{{"name": "get_weather", "arguments": \{{"city": {s}, "unit": "(?:celsius|fahrenheit)", "days": [1-7]\}}\}}"#
    );
    let search = format!(
        r#"\{{"name": "search", "arguments": \{{"query": {s}, "since": "[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}"\}}\}}"#
    );
    let re = Regex::new(&format!(
        "^<tool_call>\n(?:{weather}|{search})\n</tool_call>$"
    ))?;
    Ok(Box::new(move |out| {
        whole_match(&re, out, "a call of one of the tools")?;
        let text = utf8(out)?;
        let body = &text["<tool_call>\n".len()..text.len() - "\n</tool_call>".len()];
        serde_json::from_str::<Value>(body)
            .map(drop)
            .map_err(|e| format!("the call is not JSON: {e}"))
    }))
}

fn regex_check(pattern: &str) -> Result<Check, regex::Error> {
    let re = Regex::new(&format!("^(?:{pattern})$"))?;
    let what = format!("/{pattern}/");
    Ok(Box::new(move |out| whole_match(&re, out, &what)))
}

fn schema_check(schema: &Value) -> Result<Check, Box<dyn Error>> {
    let validator = jsonschema::validator_for(schema).map_err(|e| e.to_string())?;
    Ok(Box::new(move |out| {
        let value: Value = serde_json::from_slice(out).map_err(|e| format!("not JSON: {e}"))?;
        let first = validator
            .iter_errors(&value)
            .next()
            .map(|e| format!("schema violation at {}: {e}", e.instance_path()));
        first.map_or(Ok(()), Err)
    }))
}

/// `expr` of the arithmetic grammar, by recursive descent.
fn arith_check(out: &[u8]) -> Result<(), String> {
    fn expr(s: &[u8], i: &mut usize, depth: usize) -> Result<(), String> {
        term(s, i, depth)?;
        while matches!(s.get(*i), Some(b'+' | b'-')) {
            *i += 1;
            term(s, i, depth)?;
        }
        Ok(())
    }
    fn term(s: &[u8], i: &mut usize, depth: usize) -> Result<(), String> {
        factor(s, i, depth)?;
        while matches!(s.get(*i), Some(b'*' | b'/')) {
            *i += 1;
            factor(s, i, depth)?;
        }
        Ok(())
    }
    fn factor(s: &[u8], i: &mut usize, depth: usize) -> Result<(), String> {
        match s.get(*i) {
            Some(b'(') if depth < 1000 => {
                *i += 1;
                expr(s, i, depth + 1)?;
                match s.get(*i) {
                    Some(b')') => {
                        *i += 1;
                        Ok(())
                    }
                    _ => Err(format!("expected `)` at byte {i}")),
                }
            }
            Some(b'0'..=b'9') => {
                while matches!(s.get(*i), Some(b'0'..=b'9')) {
                    *i += 1;
                }
                Ok(())
            }
            _ => Err(format!("expected a number or `(` at byte {i}")),
        }
    }
    let mut i = 0;
    expr(out, &mut i, 0)?;
    match i == out.len() {
        true => Ok(()),
        false => Err(format!("unexpected byte at {i}")),
    }
}
