//! Each workload in the peers' own input formats, as faithfully as each allows.
//!
//! - llguidance: Lark (special tokens as `<|...|>` token literals, JSON bodies as `%json`),
//!   JSON Schema with compact separators, regexes.
//! - outlines-core: one regex over the output. It has no special tokens: the bench's
//!   outlines vocabulary gives each special token a private-use code point (U+E000 + its
//!   index) and the regexes name those, so special tokens stay symbols text cannot spell.

use formwork::front::tags::ToolFormat;
use formwork::Tool;
use serde_json::{json, Value};

use formwork_testkit::outlines_core;
use formwork_testkit::workloads::{flatten, Spec};

/// The special tokens the workloads name, in the order of their private-use code points.
pub const SPECIALS: [&str; 3] = ["<|vision_start|>", "<|vision_pad|>", "<|vision_end|>"];

/// The private-use character standing for `SPECIALS[i]` in outlines-core's vocabulary.
pub fn pua(i: usize) -> char {
    char::from_u32(0xE000 + i as u32).unwrap()
}

fn pua_class_excluded() -> String {
    format!("\\x{{E000}}-\\x{{{:X}}}", 0xE000 + SPECIALS.len() - 1)
}

/// llguidance's grammar for `spec`, or why it cannot express it.
pub fn llguidance(spec: &Spec) -> Result<llguidance::api::TopLevelGrammar, String> {
    use llguidance::api::TopLevelGrammar;
    Ok(match spec {
        Spec::Outline(_) => TopLevelGrammar::from_lark(outline_lark(spec)),
        Spec::ReferenceLookup { .. } => TopLevelGrammar::from_regex(&regex(spec)?),
        Spec::Schema(schema) => TopLevelGrammar::from_json_schema(compact(schema)),
        Spec::Tools { format, tools } => TopLevelGrammar::from_lark(tools_lark(*format, tools)?),
    })
}

/// The schema with llguidance told to use compact JSON, as formwork's default.
fn compact(schema: &Value) -> Value {
    let mut s = schema.clone();
    if let Some(obj) = s.as_object_mut() {
        obj.insert(
            "x-guidance".into(),
            json!({"whitespace_flexible": false, "item_separator": ",", "key_separator": ":"}),
        );
    }
    s
}

fn outline_lark(spec: &Spec) -> String {
    let Spec::Outline(tree) = spec else {
        unreachable!()
    };
    let mut start = String::from("start:");
    let mut lexemes = String::new();
    for (i, s) in flatten(tree).into_iter().enumerate() {
        start.push_str(&format!(
            " <|vision_start|> T{i} <|vision_pad|> SUMMARY? <|vision_end|> \"\\n\""
        ));
        lexemes.push_str(&format!(
            "T{i}: /{} [^\\n]*/\n",
            regex_syntax::escape(&s.id)
        ));
    }
    format!("{start}\n{lexemes}SUMMARY: /(?s:.)+/\n")
}

/// A regex over the whole output (outlines-core's only input, llguidance's for regex-shaped
/// workloads).
pub fn regex(spec: &Spec) -> Result<String, String> {
    Ok(match spec {
        Spec::Outline(tree) => {
            let not_special = pua_class_excluded();
            let mut out = String::new();
            for s in flatten(tree) {
                out.push_str(&format!(
                    "{}{} [^\\n{not_special}]*{}[^{not_special}]*{}\\n",
                    pua(0),
                    regex_syntax::escape(&s.id),
                    pua(1),
                    pua(2)
                ));
            }
            out
        }
        Spec::ReferenceLookup { topics, ids } => {
            let int = (1..=*topics)
                .map(|t| t.to_string())
                .collect::<Vec<_>>()
                .join("|");
            let id = ids
                .iter()
                .map(|i| regex_syntax::escape(i))
                .collect::<Vec<_>>()
                .join("|");
            let entry = format!(
                r#"\{{"topic": \[({int})(, ({int}))*\], "reference": \[("({id})")(, "({id})")*\]\}}"#
            );
            format!(r"\[{entry}(, {entry})*\]")
        }
        Spec::Schema(schema) => {
            outlines_core::json_schema::regex_from_value(schema, Some(""), None)
                .map_err(|e| format!("outlines-core: {e}"))?
        }
        Spec::Tools { .. } => {
            return Err(
                "free text around the calls (text without a trigger) has no compact regex".into(),
            )
        }
    })
}

/// Free text with calls, the way formwork's `TagDispatch` reads it: text not containing the
/// trigger, then a call, then more text. llguidance ends the text lazily at the trigger.
fn tools_lark(format: ToolFormat, tools: &[Tool]) -> Result<String, String> {
    let (trigger, calls) = match format {
        ToolFormat::Llama31 => {
            let calls: Vec<String> = tools
                .iter()
                .map(|t| {
                    format!(
                        "{:?} %json {} \"</function>\"",
                        format!("{}>", t.name),
                        serde_json::to_string(&compact(&t.parameters)).unwrap()
                    )
                })
                .collect();
            ("<function=", calls)
        }
        ToolFormat::Qwen => {
            // In llguidance `<tool_call>` and `</tool_call>` are special symbols (added tokens
            // written `<...>`), so the grammar names the tokens, not their text.
            let calls: Vec<String> = tools
                .iter()
                .map(|t| {
                    let call = json!({
                        "type": "object",
                        "properties": {"name": {"const": t.name}, "arguments": t.parameters},
                        "required": ["name", "arguments"],
                        "additionalProperties": false,
                        "x-guidance": {"whitespace_flexible": false, "item_separator": ", ", "key_separator": ": "}
                    });
                    format!(
                        "\"\\n\" %json {} \"\\n\" </tool_call>",
                        serde_json::to_string(&call).unwrap()
                    )
                })
                .collect();
            ("<tool_call>", calls)
        }
        ToolFormat::Harmony { .. } => return Err("not a bench workload".into()),
    };
    let mut out = String::from("start: (pre call)* TAIL\n");
    match format {
        ToolFormat::Qwen => {
            out.push_str("pre: TEXT? <tool_call>\nTEXT: /(?s:.)+/\nTAIL: /(?s:.)*/\n");
        }
        _ => {
            let t = regex_syntax::escape(trigger);
            out.push_str(&format!(
                "pre[lazy]: /(?s:.)*{t}/\nTAIL: /(?s:.)*/ & ~/(?s:.)*{t}(?s:.)*/\n"
            ));
        }
    }
    out.push_str(&format!("call: {}\n", calls.join("\n    | ")));
    Ok(out)
}
