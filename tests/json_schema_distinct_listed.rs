//! `uniqueItems` over a list of strings (an `enum`), kept by the matcher
//! (`matcher::json_state::listed`): the grammar is the array without `uniqueItems`, and the
//! matcher refuses a repeat, a prefix whose values are all written, and a `,` when no value
//! is left. The oracle is the grammar the front end builds for the same schema without a
//! matcher: one rule per subset of the values written. Compiled alone, as a plain grammar,
//! its masks must equal the engine's at every step of random walks over a vocabulary of
//! tokens that finish an item and start the next, and over Qwen3's.

use formwork::front::json_schema::{JsonSchemaOptions, Whitespace};
use formwork::vocab::Vocab;
use formwork::{CompileErrorKind, Engine, Matcher, TokenId};
use formwork_testkit::json_schema::{distinct_list, grammar_and_engine, walks_match_the_grammar};
use formwork_testkit::oracle::{assert_same_mask, mask_of};
use formwork_testkit::tokenizers;
use formwork_testkit::vocab::bytes_and;
use serde_json::{json, Value};

/// Values that start each other, two of them beyond ASCII (a byte token ends inside a
/// character).
const WORDS: [&str; 8] = ["a", "ab", "abc", "b", "ba", "c", "é", "éa"];

/// Every byte, then tokens that finish an item and start the next, write whole items,
/// leave one array and open another, or split a character, then `<eos>`.
pub(super) fn vocab() -> Vocab {
    let extra: &[&[u8]] = &[
        b"[\"",
        b"\"a\"",
        b"\",\"",
        b"\",",
        b",\"",
        b"ab",
        b"abc",
        b"ab\"",
        b"abc\"]",
        b"a\",\"b",
        b"\"ab\",\"",
        b"b\"]",
        b"c\",\"",
        b"\"]",
        b"\", \"",
        b", ",
        "é".as_bytes(),
        "éa\"".as_bytes(),
        "\"é".as_bytes(),
        b"[\"\"",
        b"\"\"",
        b"\"],[\"",
        b"],[",
        b"\"]]",
        b"[[\"",
        b"\",\"a\",\"",
        b"\",\"ab\",\"",
        b"\",\"\"]",
        b"\":[\"",
        b"\"]}",
        b"\"],\"",
        b"a,\",\"",
        b"\",\",\"",
        b",\"]",
        b"\"]\"",
        &"é".as_bytes()[1..],
        "a\"é".as_bytes(),
    ];
    bytes_and(extra.iter().map(|t| t.to_vec()))
}

#[track_caller]
pub(super) fn agree_with(schema: &Value, options: &JsonSchemaOptions, walks: usize, seed: u64) {
    walks_match_the_grammar(vocab(), schema, options, walks, seed);
}

#[track_caller]
pub(super) fn agree(schema: &Value, walks: usize, seed: u64) {
    agree_with(schema, &JsonSchemaOptions::new(), walks, seed);
}

#[test]
fn listed_items_match_the_subsets_grammar() {
    agree(&distinct_list(&WORDS, json!({})), 300, 1);
    agree(
        &distinct_list(&WORDS, json!({"minItems": 3, "maxItems": 6})),
        200,
        2,
    );
    agree(&distinct_list(&WORDS[..3], json!({})), 200, 3);
}

#[test]
fn listed_items_inside_objects_and_unions() {
    let tags = distinct_list(&WORDS, json!({}));
    agree(
        &json!({"type": "object", "properties": {"tags": tags, "n": {"type": "integer"}},
            "required": ["tags", "n"]}),
        200,
        4,
    );
    // Items of two lists: one list of their values.
    agree(
        &json!({"type": "array", "uniqueItems": true,
            "items": {"anyOf": [{"enum": ["a", "ab"]}, {"enum": ["ab", "b", "é"]}]}}),
        200,
        5,
    );
    // Arrays of other lists, or with repeats, at one place: both branches keep their
    // grammars (the matcher cannot tell which list an array holds).
    agree(
        &json!({"anyOf": [distinct_list(&WORDS[..4], json!({})), distinct_list(&WORDS[3..], json!({}))]}),
        200,
        6,
    );
    agree(
        &json!({"anyOf": [distinct_list(&WORDS, json!({})),
            {"type": "array", "items": {"const": "a"}, "maxItems": 3}]}),
        200,
        7,
    );
}

#[test]
fn listed_items_with_white_space() {
    let options = JsonSchemaOptions::new().whitespace(Whitespace::Flexible { max_run: Some(2) });
    agree_with(&distinct_list(&WORDS, json!({})), &options, 200, 8);
}

/// Over Qwen3's vocabulary, at every step of texts that write the whole list.
#[test]
fn listed_items_match_over_a_real_vocabulary() {
    let engine = Engine::new(tokenizers::qwen3().clone());
    let vocab = engine.vocab();
    let schema = distinct_list(&["ab", "abc", "b", "c"], json!({}));
    let (exact, kept) = grammar_and_engine(&engine, &schema, &JsonSchemaOptions::new());
    for text in [
        r#"["abc","ab","c","b"]"#,
        r#"["ab","abc","b","c"]"#,
        r#"["c","b","abc"]"#,
    ] {
        let (mut exact, mut kept) = (exact.clone(), kept.clone());
        for (i, b) in text.bytes().enumerate() {
            let what = format!("after {:?}", &text[..i]);
            assert_same_mask(
                &mask_of(&mut kept, vocab),
                &mask_of(&mut exact, vocab),
                vocab,
                &what,
            );
            exact.consume_bytes(&[b]).unwrap();
            kept.consume_bytes(&[b]).unwrap();
        }
        assert!(kept.is_accepting() && exact.is_accepting(), "{text}");
    }
}

/// A list past the grammar's subsets (40 values: 2^40 of them) compiles, and runs out: once
/// every value is written, neither `,` nor a repeat is allowed, and a value's prefix is
/// refused once its values are written.
#[test]
fn long_lists_run_out() {
    let engine = Engine::new(vocab());
    let vocab = engine.vocab();
    let words: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let schema = distinct_list(&words, json!({}));
    let without_matcher =
        formwork::front::json_schema::compile_schema(&schema, &JsonSchemaOptions::new());
    assert_eq!(
        without_matcher.unwrap_err().kind(),
        CompileErrorKind::Unsupported
    );
    let mut m = engine
        .compile_json_schema(&schema, &JsonSchemaOptions::new())
        .unwrap()
        .matcher();
    // The vocabulary's first tokens are the bytes.
    let token = |b: u8| TokenId::from(b);
    // `w1` and the ten `w1x` written: `"w1` can no longer go on.
    let ones: Vec<String> = std::iter::once("\"w1\"".to_string())
        .chain((10..20).map(|i| format!("\"w{i}\"")))
        .collect();
    m.consume_bytes(format!("[{}", ones.join(",")).as_bytes())
        .unwrap();
    m.consume_bytes(b",\"w").unwrap();
    let mask = mask_of(&mut m, vocab);
    assert!(
        !mask.contains(token(b'1')),
        "every value starting w1 is written"
    );
    assert!(mask.contains(token(b'2')));
    // Back before `,"w`.
    m.rollback(1).unwrap();
    let rest: Vec<String> = (0..40)
        .filter(|i| *i != 1 && !(10..20).contains(i))
        .map(|i| format!("\"w{i}\""))
        .collect();
    m.consume_bytes(format!(",{}", rest.join(",")).as_bytes())
        .unwrap();
    let mask = mask_of(&mut m, vocab);
    assert!(!mask.contains(token(b',')), "no value is left");
    assert!(mask.contains(token(b']')));
}
