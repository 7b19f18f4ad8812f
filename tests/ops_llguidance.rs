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

/// Counted loops of one-character leaves, whose leaf masks follow the loop through its rounds
/// (issue 18: alternated `\w{0,k}` pieces are not fused), up to and past their bounds.
#[test]
fn counted_loops_of_characters_match_llguidance() {
    differential(
        r"\w{0,8}x|\w{0,9}y|\w{0,10}z",
        &["héllo_wörz", "abcdefghiz", "x"],
    );
    differential(r"[a-z]{0,12}[a-z]{0,12}", &["abcdefghijklmnopqrstuvwx"]);
    differential(
        r"([a-z]{0,10}b?){2,3}\.",
        &["abcdefghijklmnopqrstuvwxyzab."],
    );
    differential(r"( [a-z]{1,5})*\.", &[" ab cdefg hij."]);
    // More pieces run out of llguidance's lexer fuel.
    let pieces: Vec<String> = (1..13).map(|k| format!(r"\w{{0,{k}}}")).collect();
    differential(&format!("({})", pieces.join("|")), &["héllo_wörld"]);
}
