//! Tag dispatch and the BFCL mapping: languages checked with the reference recognizer, BFCL
//! tools checked with the independent `jsonschema` validator, and seeded random walks on the
//! Qwen3 vocabulary (sampling only tokens of `Chart::mask`) whose calls must parse and validate.

use formwork::front::bfcl;
use formwork::front::json_schema::{compile_schema, JsonSchemaOptions};
use formwork::front::tags::{Piece, TagDispatch, ToolFormat};
use formwork::ir::recognizer::{Recognizer, Terminal};
use formwork::ir::reference::token_units;
use formwork::{CompileErrorKind, LimitKind, Limits, Tool};
use formwork_testkit::oracle::Lang;
use formwork_testkit::rng::Rng;
use formwork_testkit::stack::on_small_stack;
use formwork_testkit::tokenizers;
use serde_json::{json, Value};

fn data(name: &str) -> String {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bfcl-sample");
    std::fs::read_to_string(dir.join(name)).unwrap()
}

/// Every function list of the committed BFCL sample, by category.
fn bfcl_lines() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for cat in [
        "simple_python",
        "multiple",
        "parallel",
        "simple_java",
        "simple_javascript",
    ] {
        for line in data(&format!("BFCL_v4_{cat}.json")).lines() {
            out.push((cat.to_string(), serde_json::from_str(line).unwrap()));
        }
    }
    out
}

/// A valid instance built from a (BFCL-shaped) schema: required properties, first enum value,
/// a value inside numeric bounds. Independent of the compiler.
fn example(schema: &Value, depth: usize) -> Value {
    if let Some(e) = schema.get("enum").and_then(Value::as_array) {
        return e[0].clone();
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => {
            let props = schema.get("properties").and_then(Value::as_object);
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut out = serde_json::Map::new();
            for (k, s) in props.into_iter().flatten() {
                // Optional properties too, every other one, to exercise both paths.
                if required.contains(&k.as_str()) || (depth + k.len()) % 2 == 0 {
                    out.insert(k.clone(), example(s, depth + 1));
                }
            }
            Value::Object(out)
        }
        Some("array") => {
            let item = schema
                .get("items")
                .cloned()
                .unwrap_or(json!({"type": "string"}));
            Value::Array(vec![example(&item, depth + 1), example(&item, depth + 2)])
        }
        Some("integer") => json!(schema.get("minimum").and_then(Value::as_i64).unwrap_or(42)),
        Some("number") => json!(schema
            .get("minimum")
            .and_then(Value::as_f64)
            .map_or(2.5, |m| m + 0.5)),
        Some("boolean") => json!(depth % 2 == 0),
        Some("string") if schema.get("maxLength") == Some(&json!(1)) => json!("q"),
        Some("string") => json!("Caf\u{e9} \"quoted\"\n"),
        _ => json!({"any": [1, null]}),
    }
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::validator_for(schema)
        .unwrap_or_else(|e| panic!("not a valid JSON Schema ({e}): {schema}"))
}

#[test]
fn bfcl_types_map_to_valid_json_schema() {
    let mut tools = 0;
    for (cat, line) in bfcl_lines() {
        for tool in bfcl::tools(&line["function"]).unwrap() {
            tools += 1;
            let text = tool.parameters.to_string();
            for dialect in [
                "\"dict\"",
                "\"float\"",
                "\"tuple\"",
                "\"any\"",
                "\"String\"",
                "\"long\"",
                "\"ArrayList\"",
            ] {
                assert!(
                    !text.contains(&format!("\"type\":{dialect}")),
                    "{cat} {}: {text}",
                    tool.name
                );
            }
            // The mapped schema is valid JSON Schema, compiles, and an instance the
            // independent validator accepts is in the compiled language.
            let v = validator(&tool.parameters);
            let instance = example(&tool.parameters, 0);
            assert!(
                v.is_valid(&instance),
                "{cat} {}: example {instance} invalid for {text}",
                tool.name
            );
            let compiled = compile_schema(&tool.parameters, &JsonSchemaOptions::new()).unwrap();
            assert!(
                Lang::new(&compiled.grammar).accepts(&instance.to_string()),
                "{cat} {}: {instance}",
                tool.name
            );
        }
    }
    assert_eq!(tools, 30);
    let bad = bfcl::tools(
        &json!([{"name": "f", "parameters": {"type": "dict", "properties": {"x": {"type": "frog"}}}}]),
    );
    let e = bad.err().unwrap();
    assert_eq!(e.kind(), CompileErrorKind::Invalid);
    assert_eq!(
        e.location(),
        &formwork::Location::JsonPointer("/0/parameters/properties/x/type".into())
    );
}

fn multiple_tools() -> Vec<Tool> {
    let (_, line) = bfcl_lines()
        .into_iter()
        .find(|(c, l)| c == "multiple" && l["function"].as_array().unwrap().len() >= 2)
        .unwrap();
    bfcl::tools(&line["function"]).unwrap()
}

fn args(tool: &Tool) -> String {
    example(&tool.parameters, 0).to_string()
}

#[test]
fn llama_format_accepts_calls_and_rejects_the_rest() {
    let tools = multiple_tools();
    let lang = Lang::new(
        &TagDispatch::for_tools(ToolFormat::Llama31, &tools)
            .compile()
            .unwrap(),
    );
    let (a, b) = (&tools[0], &tools[1]);
    let call = |t: &Tool, args: &str| format!("<function={}>{args}</function>", t.name);
    for ok in [
        String::new(),
        "Just text, with <b>tags</b> and é.".to_string(),
        call(a, &args(a)),
        format!(
            "Sure. {} then {} done",
            call(a, &args(a)),
            call(b, &args(b))
        ),
    ] {
        assert!(lang.accepts(&ok), "should accept {ok}");
    }
    for bad in [
        format!("<function=no_such_tool>{}</function>", args(a)),
        call(a, "{\"bogus\":1}"),
        call(a, &args(a)).replace("</function>", ""),
        format!("<function={}>{}", a.name, args(a)),
        "half a <function=".to_string(),
    ] {
        assert!(!lang.accepts(&bad), "should reject {bad}");
    }
    // Invalid UTF-8 is not text.
    let units: Vec<Terminal> = b"ok \xff".iter().map(|&b| Terminal::Byte(b)).collect();
    assert!(!lang.accepts_units(&units));
}

#[test]
fn qwen_format_forbidden_tags_and_required_calls() {
    let tools = multiple_tools();
    let dispatch = TagDispatch::for_tools(ToolFormat::Qwen, &tools)
        .forbid(vec![Piece::text("<think>")])
        .require_call(true);
    let lang = Lang::new(&dispatch.compile().unwrap());
    let t = &tools[1];
    let body = format!("{{\"name\": \"{}\", \"arguments\": {}}}", t.name, args(t));
    let call = format!("<tool_call>\n{body}\n</tool_call>");
    assert!(lang.accepts(&call));
    assert!(lang.accepts(&format!("I will call it.\n{call}")));
    assert!(lang.accepts(&format!("{call}\n{call}")));
    for bad in [
        "No call at all.".to_string(),
        format!("<think>hmm</think>{call}"),
        call.replace(&t.name, "unknown_tool"),
        call.replace("\n</tool_call>", ""),
        call.replace("\"arguments\"", "\"args\""),
    ] {
        assert!(!lang.accepts(&bad), "should reject {bad}");
    }
}

#[test]
fn harmony_with_special_or_text_markers() {
    let tools = multiple_tools();
    let t = &tools[0];
    let a = args(t);
    // Special markers: units are special tokens.
    let special = Lang::new(
        &TagDispatch::for_tools(
            ToolFormat::Harmony {
                special_markers: true,
            },
            &tools,
        )
        .compile()
        .unwrap(),
    );
    let sp = Terminal::Special;
    let text = |s: &str| s.bytes().map(Terminal::Byte).collect::<Vec<_>>();
    let mut call = vec![sp("<|channel|>")];
    call.extend(text(&format!("commentary to=functions.{} ", t.name)));
    call.extend([sp("<|constrain|>")]);
    call.extend(text("json"));
    call.push(sp("<|message|>"));
    call.extend(text(&a));
    call.push(sp("<|call|>"));
    let mut analysis = vec![sp("<|channel|>")];
    analysis.extend(text("analysis"));
    analysis.push(sp("<|message|>"));
    analysis.extend(text("User wants weather."));
    analysis.extend([sp("<|end|>"), sp("<|start|>")]);
    analysis.extend(text("assistant"));
    assert!(special.accepts_units(&call));
    assert!(special.accepts_units(&[analysis.clone(), call.clone()].concat()));
    let as_text = text(&format!(
        "<|channel|>commentary to=functions.{} <|constrain|>json<|message|>{a}<|call|>",
        t.name
    ));
    let wrong_name: Vec<Terminal> = [
        vec![sp("<|channel|>")],
        text("commentary to=functions.nope "),
        vec![sp("<|constrain|>")],
    ]
    .concat();
    assert!(!special.accepts_units(
        &[
            wrong_name,
            text("json"),
            vec![sp("<|message|>")],
            text("{}"),
            vec![sp("<|call|>")]
        ]
        .concat()
    ));
    // Text markers: the same call as plain text.
    let textual = Lang::new(
        &TagDispatch::for_tools(
            ToolFormat::Harmony {
                special_markers: false,
            },
            &tools,
        )
        .compile()
        .unwrap(),
    );
    assert!(textual.accepts_units(&as_text));
    assert!(!textual.accepts_units(&call));
}

#[test]
fn configuration_errors() {
    let tool = Tool::new("f", json!({"type": "object"}));
    let nested = TagDispatch::new()
        .tag(formwork::front::tags::Tag {
            begin: vec![Piece::text("<a>")],
            bodies: vec![],
        })
        .forbid(vec![Piece::text("a")]);
    assert_eq!(
        nested.compile().err().unwrap().kind(),
        CompileErrorKind::Invalid
    );
    let bad_schema = TagDispatch::for_tools(
        ToolFormat::Llama31,
        &[
            tool,
            Tool::new(
                "g",
                json!({"properties": {"x": {"not": {"unevaluatedProperties": false}}}}),
            ),
        ],
    );
    let e = bad_schema.compile().err().unwrap();
    assert_eq!(e.kind(), CompileErrorKind::Unsupported);
    assert_eq!(
        e.location(),
        &formwork::Location::JsonPointer(
            "/tags/0/bodies/1/schema/properties/x/not/unevaluatedProperties".into()
        )
    );
}

/// Random walks through the Qwen tool-call language on the Qwen3 vocabulary: every token is
/// drawn from the exact mask, and every finished output's calls parse and validate.
#[test]
fn random_walks_on_qwen3_validate() {
    let vocab = tokenizers::qwen3();
    let tools = multiple_tools();
    let grammar = TagDispatch::for_tools(ToolFormat::Qwen, &tools)
        .require_call(true)
        .compile()
        .unwrap();
    let rec = Recognizer::new(&grammar);
    let tool_call = vocab.encode("<tool_call>").unwrap();
    assert_eq!(
        tool_call.len(),
        1,
        "<tool_call> is one (non-special) token in Qwen3"
    );
    let mut finished = 0;
    for seed in 1..=4u64 {
        let mut rng = Rng::new(seed);
        let mut chart = rec.start();
        let mut out: Vec<u8> = Vec::new();
        for _step in 0..120 {
            let mask = chart.mask(&rec, vocab);
            let allowed: Vec<u32> = mask.iter().collect();
            assert!(
                !allowed.is_empty(),
                "dead end after {:?}",
                String::from_utf8_lossy(&out)
            );
            // A policy that makes progress: often take EOS or the trigger when allowed, often a
            // token carrying JSON punctuation, otherwise any allowed token.
            let eos: Vec<u32> = allowed
                .iter()
                .copied()
                .filter(|t| vocab.is_eos(*t))
                .collect();
            let pick = if !eos.is_empty() && rng.below(2) == 0 {
                eos[0]
            } else if allowed.contains(&tool_call[0]) && rng.below(3) == 0 {
                tool_call[0]
            } else {
                let punct: Vec<u32> = allowed
                    .iter()
                    .copied()
                    .filter(|&t| {
                        !vocab.is_eos(t)
                            && vocab.token_bytes(t).iter().any(|b| b"\"}],:<".contains(b))
                    })
                    .collect();
                if !punct.is_empty() && rng.below(10) < 7 {
                    punct[rng.below(punct.len())]
                } else {
                    allowed[rng.below(allowed.len())]
                }
            };
            if vocab.is_eos(pick) {
                assert!(chart.is_accepting(&rec));
                finished += 1;
                let text = String::from_utf8(out.clone()).expect("walk output is UTF-8");
                println!("walk {seed}: {text:?}");
                check_calls(&text, &tools);
                break;
            }
            assert!(
                chart.push_token(&rec, vocab, pick),
                "a masked-in token was rejected"
            );
            out.extend(token_units(vocab, pick).iter().map(|u| match u {
                Terminal::Byte(b) => *b,
                Terminal::Special(_) => panic!("no special token belongs in this output"),
            }));
        }
    }
    assert!(finished >= 2, "only {finished} of 4 walks finished");
}

/// Every `<tool_call>` block is `{"name", "arguments"}` for a known tool with valid arguments.
fn check_calls(text: &str, tools: &[Tool]) {
    let mut calls = 0;
    for block in text.split("<tool_call>\n").skip(1) {
        let body = block.split("\n</tool_call>").next().unwrap();
        let call: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
        let tool = tools
            .iter()
            .find(|t| call["name"] == t.name.as_str())
            .expect("a known tool");
        assert!(
            validator(&tool.parameters).is_valid(&call["arguments"]),
            "invalid arguments {body}"
        );
        calls += 1;
    }
    assert!(calls >= 1, "no call in {text:?}");
}

// Untrusted tool lists: typed errors at their place, or a grammar that stays proportional to
// the input, on the smallest stack a server may give its workers.

/// The limit a `Limit` error reached and where.
fn limit_at(e: &formwork::CompileError) -> (LimitKind, formwork::Location) {
    let kind = e
        .limit()
        .unwrap_or_else(|| panic!("not a typed limit: {e}"))
        .kind;
    (kind, e.location().clone())
}

const FORMATS: [ToolFormat; 4] = [
    ToolFormat::Llama31,
    ToolFormat::Qwen,
    ToolFormat::Harmony {
        special_markers: true,
    },
    ToolFormat::Harmony {
        special_markers: false,
    },
];

/// `n` pseudo-random lower-case strings of `len` bytes.
fn random_strings(n: usize, len: usize, seed: u64) -> Vec<String> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            (0..len)
                .map(|_| (b'a' + rng.below(26) as u8) as char)
                .collect()
        })
        .collect()
}

/// Forbidden sequences cost an automaton state per byte, checked against the limit before the
/// automaton is built, and about a rule per state after it.
#[test]
fn forbidden_sequences_stay_proportional() {
    let tools = [Tool::new("f", json!({"type": "object"}))];
    let with = |strings: &[String]| {
        strings
            .iter()
            .fold(TagDispatch::for_tools(ToolFormat::Qwen, &tools), |d, s| {
                d.forbid(vec![Piece::text(s)])
            })
    };
    let huge = with(&random_strings(10_000, 200, 1));
    let e = on_small_stack(|| huge.compile()).unwrap_err();
    let forbid = formwork::Location::JsonPointer("/forbid".into());
    assert_eq!(limit_at(&e), (LimitKind::AutomatonStates, forbid));
    // Under the limit: one rule per automaton state reached (at most one per byte), not one
    // per state and UTF-8 decoding state. 60,000 bytes of forbidden text is past the default
    // grammar size (a limit of its own, with its own test), raised here; and it takes seconds,
    // so no compile deadline: on a loaded machine the verdict would otherwise be `CompileTime`.
    let d = with(&random_strings(300, 200, 2));
    let roomy = Limits::new().grammar_size(8_000_000).compile_time(None);
    let g = on_small_stack(|| d.compile_with(&roomy)).unwrap();
    assert!(
        g.rules().len() < 300 * 200 + 100,
        "{} rules",
        g.rules().len()
    );
    // The language, on a list the reference recognizer takes in quickly.
    let strings = random_strings(50, 12, 3);
    let lang = Lang::new(&on_small_stack(|| with(&strings).compile()).unwrap());
    let call = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
    assert!(lang.accepts(&format!("{} é {}", &strings[0][..11], &strings[1][1..])));
    assert!(lang.accepts(&format!("{}{call}", &strings[7][..10])));
    assert!(!lang.accepts(&format!("x {} y", strings[5])));
    assert!(!lang.accepts(&format!("{call} {}", strings[49])));
    // The compile-time budget is checked while the rules are made.
    let spent = Limits::new().compile_time(Some(std::time::Duration::ZERO));
    let e = on_small_stack(|| d.compile_with(&spent)).unwrap_err();
    assert_eq!(e.limit().map(|l| l.kind), Some(LimitKind::CompileTime));
    let e = on_small_stack(|| d.compile_with(&Limits::new().alternatives(299))).unwrap_err();
    assert_eq!(limit_at(&e).0, LimitKind::Alternatives);
}

/// Two tools of one name are an error in every format: a call could not say which one's
/// arguments it carries.
#[test]
fn duplicate_tool_names_are_invalid() {
    let tools = [
        Tool::new("get", json!({"type": "object"})),
        Tool::new("put", json!({"type": "object"})),
        Tool::new("get", json!({"type": "string"})),
    ];
    for format in FORMATS {
        let e = TagDispatch::for_tools(format, &tools)
            .compile()
            .unwrap_err();
        assert_eq!(e.kind(), CompileErrorKind::Invalid, "{format:?}");
        assert_eq!(
            e.location(),
            &formwork::Location::JsonPointer("/tools/2".into())
        );
        assert!(e.message().contains("\"get\""), "{e}");
    }
    let spec = json!({"format": "llama31", "tools": [
        {"type": "function", "function": {"name": "a", "parameters": {}}},
        {"name": "a", "parameters": {"type": "dict", "properties": {}}}]});
    let e = TagDispatch::from_spec(&spec)
        .unwrap()
        .compile()
        .unwrap_err();
    assert_eq!(
        e.location(),
        &formwork::Location::JsonPointer("/tools/1".into())
    );
}

/// A tool's parameters are the document their own references resolve in, in every format:
/// pydantic's `#/$defs/...` and a `#/properties/...` of the parameters. The Qwen call object
/// `{"name": ..., "arguments": ...}` was wrapped around them and became their root, so the
/// first did not resolve and the second named the call's `name` (whose value the tool's name
/// is) instead of the tool's own property.
#[test]
fn tool_parameters_keep_their_own_references() {
    let parameters = json!({
        "$defs": {"Item": {"type": "object", "properties": {"n": {"type": "integer"}},
            "required": ["n"], "additionalProperties": false}},
        "type": "object",
        "properties": {
            "item": {"$ref": "#/$defs/Item"},
            "name": {"type": "string", "maxLength": 3},
            "alias": {"$ref": "#/properties/name"},
            "children": {"type": "array", "items": {"$ref": "#"}}
        },
        "required": ["item", "alias"],
        "additionalProperties": false
    });
    // A reference to the name the call object is kept under stays a reference that does
    // not resolve.
    let unresolved = json!({"$ref": "#/$defs/formwork-tool-call"});
    for format in FORMATS {
        let e = TagDispatch::for_tools(format, &[Tool::new("f", unresolved.clone())])
            .compile()
            .expect_err("an undefined reference");
        assert_eq!(e.kind(), CompileErrorKind::Undefined, "{format:?}: {e}");
    }
    let tools = [Tool::new("f", parameters)];
    let valid = [
        r#"{"item":{"n":3},"alias":"abc"}"#,
        r#"{"item":{"n":3},"alias":"ab","children":[{"item":{"n":4},"alias":""}]}"#,
    ];
    let invalid = [
        r#"{"item":{"n":"x"},"alias":"ab"}"#,
        r#"{"item":{"n":3},"alias":"abcd"}"#,
        r#"{"item":{"n":3},"alias":"f","children":[{"name":"f","arguments":{}}]}"#,
    ];
    for format in FORMATS {
        let g = TagDispatch::for_tools(format, &tools)
            .compile()
            .unwrap_or_else(|e| panic!("{format:?}: {e}"));
        let lang = Lang::new(&g);
        let call = |args: &str| {
            match format {
                ToolFormat::Llama31 => format!("<function=f>{args}</function>"),
                ToolFormat::Qwen => {
                    format!("<tool_call>\n{{\"name\": \"f\", \"arguments\": {args}}}\n</tool_call>")
                }
                ToolFormat::Harmony {
                    special_markers: false,
                } => format!(
                "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{args}<|call|>"
            ),
                ToolFormat::Harmony { .. } => return None,
            }
            .into()
        };
        for args in valid {
            if let Some(text) = call(args) {
                assert!(lang.accepts(&text), "{format:?}: should accept {text}");
            }
        }
        for args in invalid {
            if let Some(text) = call(args) {
                assert!(!lang.accepts(&text), "{format:?}: should reject {text}");
            }
        }
    }
}

/// Tool parameters go through the JSON Schema front end with the dispatch's limits: patterns
/// of astral characters and deep schemas compile on a small stack in every format, and past
/// the nesting limit the error points into the tool's schema.
#[test]
fn tool_parameters_within_limits_on_a_small_stack() {
    let mut deep = json!({"type": "integer"});
    for _ in 0..100 {
        deep = json!({"type": "array", "items": deep});
    }
    let tools = [
        Tool::new(
            "emoji",
            json!({"type": "object", "properties": {
            "face": {"type": "string", "pattern": "^[😀😂]$"},
            "word": {"type": "string", "pattern": "^\\p{Letter}+$", "maxLength": 8},
            "other": {"type": "string", "pattern": "[^\\p{L}]"}},
            "required": ["face"]}),
        ),
        Tool::new("deep", json!({"type": "object", "properties": {"d": deep}})),
    ];
    for format in FORMATS {
        let g = on_small_stack(|| TagDispatch::for_tools(format, &tools).compile())
            .unwrap_or_else(|e| panic!("{format:?}: {e}"));
        if format == ToolFormat::Llama31 {
            let lang = Lang::new(&g);
            let call = |args: &str| format!("<function=emoji>{args}</function>");
            assert!(lang.accepts(&call(r#"{"face":"😂"}"#)));
            assert!(lang.accepts(&call(r#"{"face":"\ud83d\ude00","word":"Ωμέγα"}"#)));
            assert!(!lang.accepts(&call(r#"{"face":"\ud83d\ude01"}"#)));
            assert!(!lang.accepts(&call(r#"{"face":"😀","word":"a1"}"#)));
        }
        let e = on_small_stack(|| {
            TagDispatch::for_tools(format, &tools).compile_with(&Limits::new().nesting(50))
        })
        .unwrap_err();
        let (kind, at) = limit_at(&e);
        assert_eq!(kind, LimitKind::Nesting, "{format:?}");
        let formwork::Location::JsonPointer(p) = at else {
            panic!("{e}")
        };
        assert!(p.starts_with("/tags/0/bodies/1/schema/"), "{p}");
    }
}

/// Special tokens are read by the automaton as bytes no text sequence starts with, so a
/// forbidden sequence beginning with a control character is not mistaken for one written
/// just after a special token.
#[test]
fn special_tokens_never_start_forbidden_text() {
    let tools = multiple_tools();
    let harmony = ToolFormat::Harmony {
        special_markers: true,
    };
    let g = TagDispatch::for_tools(harmony, &tools)
        .forbid(vec![Piece::text("\u{1}z")])
        .compile()
        .unwrap();
    let lang = Lang::new(&g);
    let sp = Terminal::Special;
    let text = |s: &str| s.bytes().map(Terminal::Byte).collect::<Vec<_>>();
    let message = |body: &str| {
        [
            vec![sp("<|channel|>")],
            text("analysis"),
            vec![sp("<|message|>")],
            text(body),
        ]
        .concat()
    };
    assert!(lang.accepts_units(&message("zebra")));
    assert!(lang.accepts_units(&message("\u{1}y z")));
    assert!(!lang.accepts_units(&message("a\u{1}zebra")));
}
