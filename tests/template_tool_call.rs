//! The shipped tool-call template on Qwen3: oracle-equal masks, random walks whose JSON names
//! one of the request's tools with arguments following that tool's parameters, and invalid
//! calls rejected where they leave the language.

use formwork::bitmask::get_bit;
use formwork::Matcher;
use formwork_testkit::oracle::assert_masks_match_oracle;
use formwork_testkit::rng::Rng;
use formwork_testkit::tokenizers;
use formwork_testkit::walk::{checked_walks, rejection_point};
use serde_json::Value;

/// A parameter's value kind, as the test (the independent checker) understands it.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Num,
    Int(i64, i64),
    Bool,
    Enum(&'static [&'static str]),
    Pattern(&'static str),
}

type Tool = (&'static str, Vec<(&'static str, Kind)>);

fn tools() -> Vec<Tool> {
    vec![
        (
            "get_weather",
            vec![
                ("city", Kind::Str),
                ("unit", Kind::Enum(&["celsius", "fahrenheit"])),
                ("days", Kind::Int(1, 7)),
            ],
        ),
        (
            "search",
            vec![
                ("query", Kind::Str),
                ("exact", Kind::Bool),
                ("score", Kind::Num),
                ("date", Kind::Pattern("[0-9]{4}-[0-9]{2}-[0-9]{2}")),
            ],
        ),
        ("now", vec![]),
    ]
}

fn request(tools: &[Tool]) -> String {
    let tools: Vec<String> = tools
        .iter()
        .map(|(name, params)| {
            let params: Vec<String> = params
                .iter()
                .map(|(p, kind)| {
                    let value = match kind {
                        Kind::Str => "string".to_string(),
                        Kind::Num => "number".to_string(),
                        Kind::Bool => "boolean".to_string(),
                        Kind::Int(lo, hi) => format!("integer(range: {lo}..{hi})"),
                        Kind::Enum(values) => {
                            let v: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
                            format!("enum(values: {{{}}})", v.join(", "))
                        }
                        Kind::Pattern(re) => format!("pattern(re: /{re}/)"),
                    };
                    format!("param(name: {p:?}, value: {value})")
                })
                .collect();
            format!("tool(name: {name:?}, params: [{}])", params.join(", "))
        })
        .collect();
    format!("tool_call(tools: [{}])", tools.join(", "))
}

/// The independent checker: the call's frame, then JSON naming one of the tools with exactly
/// its parameters, in order, each value of its kind.
fn check_output(out: &[u8], tools: &[Tool]) -> Result<(), String> {
    let body = out
        .strip_prefix(b"<tool_call>\n")
        .and_then(|b| b.strip_suffix(b"\n</tool_call>"))
        .ok_or("missing <tool_call> frame")?;
    let json: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
    let obj = json.as_object().ok_or("not an object")?;
    let keys: Vec<&str> = obj.keys().map(|k| k.as_str()).collect();
    if keys != ["name", "arguments"] {
        return Err(format!("keys {keys:?}"));
    }
    let name = obj["name"].as_str().ok_or("name")?;
    let (_, params) = tools
        .iter()
        .find(|t| t.0 == name)
        .ok_or(format!("unknown tool {name}"))?;
    let args = obj["arguments"].as_object().ok_or("arguments")?;
    let arg_names: Vec<&str> = args.keys().map(|k| k.as_str()).collect();
    let param_names: Vec<&str> = params.iter().map(|p| p.0).collect();
    if arg_names != param_names {
        return Err(format!(
            "arguments {arg_names:?}, parameters {param_names:?}"
        ));
    }
    for ((p, kind), v) in params.iter().zip(args.values()) {
        let ok = match kind {
            Kind::Str => v.is_string(),
            Kind::Num => v.is_number(),
            Kind::Bool => v.is_boolean(),
            Kind::Int(lo, hi) => v.as_i64().is_some_and(|n| (*lo..=*hi).contains(&n)),
            Kind::Enum(values) => v.as_str().is_some_and(|s| values.contains(&s)),
            Kind::Pattern(re) => v.as_str().is_some_and(|s| {
                regex::Regex::new(&format!("^(?:{re})$"))
                    .unwrap()
                    .is_match(s)
            }),
        };
        if !ok {
            return Err(format!("argument {p} = {v}"));
        }
    }
    Ok(())
}

#[test]
fn masks_equal_the_oracle_at_every_step() {
    let vocab = tokenizers::qwen3();
    let tools = tools();
    let req = request(&tools);
    let constraint = formwork_testkit::template_engine().compile(&req).unwrap();
    let grammar = formwork_testkit::template_engine()
        .request_grammar(&req)
        .unwrap();
    for text in [
        "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"P\", \"unit\": \"celsius\", \"days\": 7}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
        "<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"\\\"\", \"exact\": false, \"score\": -1.5e3, \"date\": \"2024-01-31\"}}\n</tool_call>",
    ] {
        check_output(text.as_bytes(), &tools).unwrap();
        let tokens = vocab.encode(text).unwrap();
        let mut m = constraint.matcher();
        assert_masks_match_oracle(&format!("tool call {text:?}"), vocab, &grammar, &mut m, &tokens);
    }
}

#[test]
fn tool_call_is_ordinary_text_in_qwen3() {
    let vocab = tokenizers::qwen3();
    let tool_call = vocab.encode("<tool_call>").unwrap();
    assert_eq!(tool_call.len(), 1, "Qwen3 has an added token for it");
    assert!(!vocab.is_special(tool_call[0]));
    let mut m = formwork_testkit::template_engine()
        .compile(&request(&tools()))
        .unwrap()
        .matcher();
    let mut mask = vec![0u32; vocab.mask_words()];
    m.fill_mask(&mut mask).unwrap();
    assert!(get_bit(&mask, tool_call[0]));
    assert!(
        get_bit(&mask, vocab.encode("<").unwrap()[0]),
        "or any other tokenization"
    );
}

#[test]
fn random_walks_call_one_of_the_tools_with_its_parameters() {
    let vocab = tokenizers::qwen3();
    let mut rng = Rng::new(0x7001);
    let all = tools();
    for tools in [
        all.clone(),
        vec![all[1].clone()],
        vec![all[2].clone(), all[0].clone()],
    ] {
        let req = request(&tools);
        let constraint = formwork_testkit::template_engine().compile(&req).unwrap();
        let matcher = || Box::new(constraint.matcher()) as Box<dyn Matcher>;
        let ended = checked_walks(vocab, matcher, &mut rng, 16, 600, |out| {
            check_output(out, &tools).map_err(|e| format!("{req}: {e}"))
        });
        assert!(ended >= 10, "{req}: only {ended} of 16 walks ended");
    }
}

#[test]
fn invalid_calls_are_rejected_where_they_leave_the_language() {
    let vocab = tokenizers::qwen3();
    let req = request(&tools());
    let constraint = formwork_testkit::template_engine().compile(&req).unwrap();
    let grammar = formwork_testkit::template_engine()
        .request_grammar(&req)
        .unwrap();
    let call = |json: &str| format!("<tool_call>\n{json}\n</tool_call>");
    let rejected_bytes = |text: &str| {
        let (_, t) = rejection_point(vocab, &grammar, &mut constraint.matcher(), text)
            .unwrap_or_else(|| panic!("{text} was not rejected"));
        String::from_utf8_lossy(vocab.token_bytes(t)).into_owned()
    };
    let weather = |args: &str| {
        call(&format!(
            r#"{{"name": "get_weather", "arguments": {{{args}}}}}"#
        ))
    };

    assert_eq!(
        rejection_point(
            vocab,
            &grammar,
            &mut constraint.matcher(),
            &weather(r#""city": "Rome", "unit": "fahrenheit", "days": 1"#)
        ),
        None
    );
    assert!(rejected_bytes(&call(r#"{"name": "get_time""#)).contains('t'));
    assert!(rejected_bytes(&weather(r#""unit": "celsius""#)).contains('u'));
    assert!(rejected_bytes(&weather(r#""city": "Rome", "unit": "kelvin""#)).contains('k'));
    assert!(
        rejected_bytes(&weather(r#""city": "Rome", "unit": "celsius", "days": 8"#)).contains('8')
    );
    assert!(rejected_bytes(&weather(r#""city": Rome"#)).contains('R'));
    let (_, t) = rejection_point(
        vocab,
        &grammar,
        &mut constraint.matcher(),
        &call(r#"{"name": "search", "arguments": {"query": "q", "exact": true, "score": 1, "date": "24-01-01"}}"#),
    )
    .unwrap();
    assert_eq!(vocab.token_bytes(t), b"-", "the year has four digits");
    assert!(
        rejected_bytes(&call(r#"{"name": "now", "arguments": {}}"#).replace("\n</", "</"))
            .starts_with("</")
    );
}
