//! Differential test against llguidance 1.9 on the same tokenizer (Qwen3): JSON grammars in
//! Lark syntax on llguidance, the same languages in GBNF here; masks compared at every step
//! (`testkit/src/llg.rs` lists the documented differences each mismatch must be one of). The
//! MaskBench sample's schemas are compared the same way beside the MaskBench harness
//! (`src/bin/formwork/maskbench.rs`).
//!
//! The grammars are written so the languages agree: llguidance's `%ignore` allows no
//! whitespace before the first lexeme or after the last, so neither does the GBNF.

use formwork::cfg::CfgConfig;
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
