//! Differential test against llguidance 1.9 on the same tokenizer (Qwen3): JSON grammars in
//! Lark syntax on llguidance, the same languages in GBNF here, and MaskBench schemas on both;
//! masks compared at every step (`common/llg.rs` lists the documented differences each
//! mismatch must be one of).
//!
//! The grammars are written so the languages agree: llguidance's `%ignore` allows no
//! whitespace before the first lexeme or after the last, so neither does the GBNF.

use formwork::cfg::CfgConfig;
use formwork::engine::Engine;
use formwork::front::json_schema::JsonSchemaOptions;
use formwork::maskbench;
use formwork::Matcher;
use formwork_testkit::grammars::*;
use formwork_testkit::tokenizers;
use llguidance::api::TopLevelGrammar;

/// A schema-shaped grammar: fixed keys, bounded strings and arrays.
const PERSON_LARK: &str = r#"
start: "{" "\"name\"" ":" NAME "," "\"age\"" ":" AGE "," "\"tags\"" ":" "[" [TAG ("," TAG)*] "]" "}"
NAME: /"[A-Za-z ]{1,40}"/
AGE: /[0-9]{1,3}/
TAG: /"[a-z]{0,10}"/
%ignore /[ \t\n\r]+/
"#;

const PERSON_GBNF: &str = r#"
root ::= "{" ws "\"name\"" ws ":" ws name ws "," ws "\"age\"" ws ":" ws age ws "," ws "\"tags\"" ws ":" ws "[" ws ( tag ( ws "," ws tag )* ws )? "]" ws "}"
name ::= "\"" [A-Za-z ]{1,40} "\""
age  ::= [0-9]{1,3}
tag  ::= "\"" [a-z]{0,10} "\""
ws   ::= [ \t\n\r]*
"#;

fn differential(lark: &str, gbnf: &str, texts: &[&str]) {
    let ours = compile(tokenizers::qwen3(), CfgConfig::new(), &ir(gbnf));
    formwork_testkit::llg::differential(
        || TopLevelGrammar::from_lark(lark.to_string()),
        || Box::new(ours.matcher()),
        texts,
    );
}

#[test]
fn json_masks_match_llguidance() {
    differential(
        JSON_LARK,
        &json_gbnf_as_lark_reads_it(),
        &[
            r#"{"a": [1, -2.5e3, true, null], "b": {"c": "x\u00e9"}}"#,
            "[\n  {\"k\": \"<think>\"},\n  []\n]",
            r#"{"nested": {"deeper": {"list": [[], [0], {"s": "日本"}]}}}"#,
        ],
    );
}

#[test]
fn schema_shaped_masks_match_llguidance() {
    differential(
        PERSON_LARK,
        PERSON_GBNF,
        &[
            r#"{"name": "Ada Lovelace", "age": 36, "tags": ["math", "poetry"]}"#,
            r#"{ "name":"X","age":7,"tags":[] }"#,
        ],
    );
}

/// MaskBench schemas from the committed sample (every fifth file, where formwork compiles it
/// and accepts its first valid instance), that instance in compact form: formwork's default
/// JSON (compact, schema order) against llguidance told the same (`x-guidance` separators, no
/// flexible whitespace), through the engine's router.
#[test]
fn maskbench_sample_masks_match_llguidance() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/maskbench-sample");
    let engine = Engine::new(tokenizers::qwen3().clone());
    let options = JsonSchemaOptions::new();
    let mut compared = 0;
    for case in maskbench::load(&dir).unwrap().iter().step_by(5) {
        let Ok(constraint) = engine.compile_json_schema(&case.schema, &options) else {
            continue;
        };
        let Some(valid) = case.tests.iter().find(|t| t.valid) else {
            continue;
        };
        let text = serde_json::to_string(&valid.data).unwrap();
        if !accepts(&constraint, &text) {
            continue; // a documented formwork rejection (property order), counted by the ratchet
        }
        let mut schema = case.schema.clone();
        let Some(obj) = schema.as_object_mut() else {
            continue;
        };
        obj.insert(
            "x-guidance".into(),
            serde_json::json!({
                "whitespace_flexible": false,
                "item_separator": ",",
                "key_separator": ":",
            }),
        );
        eprintln!("{}", case.name);
        formwork_testkit::llg::differential(
            || TopLevelGrammar::from_json_schema(schema.clone()),
            || Box::new(constraint.matcher()),
            &[&text],
        );
        compared += 1;
    }
    assert!(compared >= 15, "only {compared} schemas compared");
}

fn accepts(constraint: &formwork::Constraint, text: &str) -> bool {
    let vocab = tokenizers::qwen3();
    let mut m = constraint.matcher();
    vocab
        .encode(text)
        .is_ok_and(|tokens| m.consume_all(&tokens).is_ok() && m.is_accepting())
}
