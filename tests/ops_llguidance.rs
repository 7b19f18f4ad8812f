//! The operator backend against llguidance 1.9 on the same regexes and tokenizer (Qwen3):
//! masks equal at every step up to the documented differences (`common/llg.rs`).

use formwork::ops::{OpsMatcher, RegexCompiler, Runtime};
use formwork_testkit::tokenizers;
use llguidance::api::TopLevelGrammar;

fn differential(pattern: &str, texts: &[&str]) {
    let runtime = Runtime::new(tokenizers::qwen3().clone(), 256 << 20);
    let program = RegexCompiler::new().compile(pattern).unwrap();
    formwork_testkit::llg::differential(
        || TopLevelGrammar::from_regex(pattern),
        || Box::new(OpsMatcher::new(runtime.clone(), program.clone())),
        texts,
    );
}

#[test]
fn regexes_match_llguidance() {
    differential(r"[0-9]+(\.[0-9]+)*", &["12.345.6", "2024.11.21"]);
    differential(r"(foo|foobar|fob)+baz", &["foobarfoobaz"]);
    differential(
        r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,4}",
        &["john.doe@example.com"],
    );
    differential(r#""([^"\\]|\\.)*""#, &[r#""he said \"hi\" 你好""#]);
    differential(
        r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}Z)?",
        &["2026-11-21T21:45:09Z"],
    );
    differential(r"( [a-z]+)*\.", &[" hello world."]);
    differential(
        r#"\{"id": [0-9]{1,6}, "tag": "(red|green|blue)"\}"#,
        &[r#"{"id": 42, "tag": "green"}"#],
    );
}
