//! Differential test against llguidance 1.9 on the same tokenizer (Qwen3): JSON grammars in
//! Lark syntax on llguidance, the same languages in GBNF here; masks compared at every step.
//!
//! Masks must be equal except where a documented semantic choice differs (DESIGN.md,
//! Semantics), and each difference is checked to be one of them:
//!
//! - **added tokens**: llguidance treats every added token written `<...>` as a special
//!   symbol; formwork treats only `special: true` tokens so, and a non-special added token
//!   (Qwen3's `<think>`, `<tool_call>`, ...) is its text. Differences there: formwork allows
//!   the token, llguidance does not.
//! - **forced stretches**: where the grammar forces the next bytes, llguidance allows only the
//!   canonical tokenization of them; formwork allows every token consistent with the bytes and
//!   offers the canonical ones through `forced_tokens()`. Differences there: formwork allows a
//!   token whose bytes agree with the forced bytes, llguidance does not.
//! - **EOS**: compared as "EOS allowed" (llguidance has one EOS id, formwork the vocabulary's
//!   EOS set).
//!
//! The grammars are written so the languages agree: llguidance's `%ignore` allows no
//! whitespace before the first lexeme or after the last, so neither does the GBNF.

mod cfg_support;
mod common;

use std::io::Read;

use cfg_support::*;
use formwork::cfg::CfgConfig;
use formwork::vocab::{TokenId, TokenKind};
use formwork::Matcher;
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::TokEnv;
use llguidance::ParserFactory;

const JSON_LARK: &str = r#"
start: value
value: object | array | STRING | NUMBER | "true" | "false" | "null"
object: "{" [member ("," member)*] "}"
member: STRING ":" value
array: "[" [value ("," value)*] "]"
STRING: /"([^"\\\x00-\x1F]|\\(["\\\/bfnrt]|u[0-9a-fA-F]{4}))*"/
NUMBER: /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/
%ignore /[ \t\n\r]+/
"#;

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

/// [`JSON`] as llguidance reads `JSON_LARK`: `%ignore` allows no whitespace before the first
/// lexeme nor after the last.
fn json_gbnf() -> String {
    JSON.replace("root    ::= ws value ws", "root    ::= value")
}

fn llg_env() -> TokEnv {
    let mut json = Vec::new();
    flate2::read::GzDecoder::new(std::fs::File::open(common::tokenizer_path("qwen3")).unwrap())
        .read_to_end(&mut json)
        .unwrap();
    let tok = toktrie_hf_tokenizers::ByteTokenizer::from_json_bytes(&json).unwrap();
    tok.into_tok_env(Some(common::qwen3().mask_width()))
        .unwrap()
}

fn differential(lark: &str, gbnf: &str, texts: &[&str]) {
    let vocab = common::qwen3();
    let env = llg_env();
    let factory = ParserFactory::new_simple(&env).unwrap();
    let ours = compile(vocab, CfgConfig::new(), &ir(gbnf));
    let llg_eos = env.tok_trie().eos_token();
    let (mut added, mut narrowed) = (0, 0);
    for text in texts {
        let tokens = vocab.encode(text).unwrap();
        let grammar = TopLevelGrammar::from_lark(lark.to_string());
        let mut theirs = llguidance::Matcher::new(factory.create_parser(grammar));
        let mut m = ours.matcher();
        for step in 0..=tokens.len() {
            let mask = mask_of(&mut m, vocab);
            let llg = theirs.compute_mask_or_eos().unwrap();
            let forced = m.forced_bytes();
            let ours_eos = vocab.eos_tokens().iter().any(|&t| mask.contains(t));
            assert_eq!(
                ours_eos,
                llg.is_allowed(llg_eos),
                "{text:?} step {step}: EOS"
            );
            for t in 0..vocab.len() as TokenId {
                if vocab.is_eos(t) || t == llg_eos {
                    continue;
                }
                let (a, b) = (mask.contains(t), llg.is_allowed(t));
                if a == b {
                    continue;
                }
                let bytes = vocab.token_bytes(t);
                // Qwen3's added tokens are ids 151643.. (shared/data README).
                let non_special_added = vocab.kind(t) == Some(TokenKind::Text)
                    && t as usize >= 151_643
                    && bytes.starts_with(b"<")
                    && bytes.ends_with(b">");
                let n = bytes.len().min(forced.len());
                let in_forced_stretch = !forced.is_empty() && bytes[..n] == forced[..n];
                assert!(
                    a && !b && (non_special_added || in_forced_stretch),
                    "{text:?} step {step}: token {} is {} by formwork and {} by llguidance",
                    vocab.display_token(t),
                    if a { "allowed" } else { "rejected" },
                    if b { "allowed" } else { "rejected" },
                );
                if non_special_added {
                    added += 1;
                } else {
                    narrowed += 1;
                }
            }
            let Some(&t) = tokens.get(step) else { break };
            m.consume(t).unwrap();
            if theirs.compute_mask_or_eos().unwrap().is_allowed(t) {
                theirs.consume_token(t).unwrap();
            } else {
                // A token llguidance takes for a symbol: give it the same bytes one at a time.
                for &b in vocab.token_bytes(t) {
                    theirs
                        .consume_token(vocab.encode_greedy(&[b]).unwrap()[0])
                        .unwrap();
                }
            }
        }
    }
    eprintln!("differences: {added} on non-special added tokens, {narrowed} in forced stretches");
}

#[test]
fn json_masks_match_llguidance() {
    differential(
        JSON_LARK,
        &json_gbnf(),
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
