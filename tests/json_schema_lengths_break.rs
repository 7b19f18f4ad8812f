//! Counted `maxLength` (`matcher::json_state::lengths`) against the grammar's own count: a
//! schema whose pattern times its bound is small enough for the front end to intersect under
//! the default limits, and too big under a small `automaton_states`, is compiled both ways;
//! the exact product automaton's masks are the oracle for the counted ones, step by step on
//! random walks over a small vocabulary of bytes and tokens spanning characters, escapes,
//! surrogate pairs and the closing quote.

use formwork::front::json_schema::{compile_schema_with, JsonSchemaOptions};
use formwork::vocab::Vocab;
use formwork::{
    CompileErrorKind, ConstraintMatcher, Engine, EngineConfig, Limits, Matcher, TokenId,
};
use formwork_testkit::agree::{walks_agree, Walks};
use formwork_testkit::oracle::{assert_same_mask, mask_of};
use formwork_testkit::vocab::bytes_and;
use serde_json::{json, Value};

/// Every byte, then tokens that span characters, escapes and quotes, then `<eos>`.
fn vocab() -> Vocab {
    let extra: &[&[u8]] = &[
        b"{\"",
        b"\"}",
        b"a\"",
        b"ab",
        b"abab",
        b"ababab",
        b"aaaaaaaa",
        b"\\u",
        b"\\u00",
        b"\\ud83d",
        b"\\ude00",
        b"\\u0800",
        b"\\u0061",
        "😀".as_bytes(),
        "😀b".as_bytes(),
        "ࠀ".as_bytes(),
        "ࠀb".as_bytes(),
        b"\xF0\x9F",
        b"\x98\x80",
        b"\xE0\xA0",
        b"abc-de",
        b"-ab",
        b"\",\"",
        b"[\"",
        b"\"]",
        b"\\n",
        b"\\u0020",
        b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
        b"\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        b"\"t\":\"",
        b"\":\"ab",
    ];
    let mut tokens: Vec<Vec<u8>> = extra.iter().map(|t| t.to_vec()).collect();
    // Long tokens opening, closing, and closing then opening a string near its bound.
    let abs = b"ab".repeat(30);
    tokens.extend([
        abs.clone(),
        [b"\"".as_slice(), &abs].concat(),
        [abs.as_slice(), b"\""].concat(),
        [b"ab\",\"".as_slice(), &abs].concat(),
        [b"\":\"".as_slice(), &abs].concat(),
    ]);
    bytes_and(tokens)
}

/// The state budget under which `schema`'s bound is counted.
const COUNTED_STATES: usize = 60;

/// The matchers of `schema` with the length in the grammar (default limits) and counted
/// (a small state budget, under which the front end alone refuses it).
fn both(schema: &Value) -> (Engine, ConstraintMatcher, ConstraintMatcher) {
    let options = JsonSchemaOptions::new();
    let limits = Limits::new().automaton_states(COUNTED_STATES);
    assert!(
        compile_schema_with(schema, &options, &limits).is_err(),
        "the grammar alone cannot hold the bound under the small budget"
    );
    let exact = Engine::new(vocab())
        .compile_json_schema(schema, &options)
        .unwrap()
        .matcher();
    let engine = Engine::with_config(vocab(), EngineConfig::new().limits(limits));
    let counted = engine
        .compile_json_schema(schema, &options)
        .unwrap()
        .matcher();
    (engine, exact, counted)
}

/// Random walks (see [`walks_agree`]): the counted masks equal the exact ones at every step.
/// Walks prefer long tokens without a quote or an escape, to reach the bound before a string
/// closes.
#[track_caller]
fn walks_agree_counted(schema: &Value, walks: usize, steps: usize, seed: u64) {
    let (engine, exact, counted) = both(schema);
    let vocab = engine.vocab();
    let walks = Walks { walks, steps, seed };
    walks_agree(vocab, &exact, &counted, walks, |rng, allowed| {
        let open: Vec<TokenId> = allowed
            .iter()
            .copied()
            .filter(|&t| !vocab.token_bytes(t).contains(&b'"'))
            .collect();
        let pool = match open.is_empty() || rng.below(6) == 0 {
            true => allowed,
            false => &open,
        };
        match rng.below(3) {
            0 => pool[rng.below(pool.len())],
            _ => *pool
                .iter()
                .max_by_key(|&&t| {
                    let bytes = vocab.token_bytes(t);
                    // An escape spells one character in six bytes.
                    let len = match bytes.contains(&b'\\') {
                        true => 1,
                        false => bytes.len(),
                    };
                    (len, rng.below(4))
                })
                .unwrap(),
        }
    });
}

/// Two patterns, so that no single one narrows to the lengths.
fn counted(pattern: &str, min: u64, max: u64) -> Value {
    json!({
        "type": "string",
        "allOf": [{"pattern": pattern}, {"pattern": "^[^x]*$"}],
        "minLength": min,
        "maxLength": max
    })
}

#[test]
fn counted_lengths_with_gaps_agree_with_the_grammar() {
    walks_agree_counted(&counted("^(?:ab)+$", 3, 101), 40, 60, 1);
}

#[test]
fn counted_words_that_run_out_agree_with_the_grammar() {
    walks_agree_counted(&counted("^[a-z]{1,5}(?:-[a-z]{1,5})*$", 7, 23), 40, 60, 2);
}

/// Characters of two, three and four bytes that need one more character after them: near
/// the bound, a lead byte alone may already leave it.
#[test]
fn counted_multibyte_characters_agree_with_the_grammar() {
    walks_agree_counted(&counted("^(?:a|😀b|ࠀb)*$", 0, 31), 60, 60, 3);
}

/// A lead byte of four (three) bytes can only become a character of U+10000 (U+0800) on:
/// after 30 of 31 characters, such a character needs a second one after it.
#[test]
fn a_lead_byte_is_refused_when_every_character_it_begins_leaves_the_bound() {
    let (engine, mut exact, mut counted) = both(&counted("^(?:a|😀b|ࠀb)*$", 0, 31));
    let vocab = engine.vocab();
    let opening = vocab.encode_greedy(b"\"").unwrap();
    let text = vocab.encode_greedy(&[b'a'; 30]).unwrap();
    for &t in opening.iter().chain(&text) {
        exact.consume(t).unwrap();
        counted.consume(t).unwrap();
    }
    let expected = mask_of(&mut exact, vocab);
    assert!(!expected.contains(0xF0) && !expected.contains(0xE0));
    assert_same_mask(&mask_of(&mut counted, vocab), &expected, vocab, "after 30");
    assert!(counted.consume(0xF0).is_err());
    assert!(counted.consume(0xE0).is_err());
}

#[test]
fn counted_items_and_values_agree_with_the_grammar() {
    let item = counted("^[a-z]{1,5}(?:-[a-z]{1,5})*$", 1, 23);
    let schema = json!({
        "type": "object",
        "properties": {
            "t": item,
            "l": {"type": "array", "items": item},
            "n": {"anyOf": [item, {"type": "integer"}, {"type": "object", "additionalProperties": item}]}
        },
        "additionalProperties": false
    });
    walks_agree_counted(&schema, 60, 120, 4);
}

/// Counted strings are not free strings (their values run out at the bound), so distinct
/// arrays of them are refused with a typed error (the items' automaton past the budget, or
/// unsupported) rather than left unchecked.
#[test]
fn distinct_counted_items_are_refused() {
    let schema = json!({
        "type": "array",
        "items": counted("^(?:\\S+\\s+)*\\S+$", 0, 300),
        "uniqueItems": true
    });
    let limits = Limits::new().automaton_states(COUNTED_STATES);
    let engine = Engine::with_config(vocab(), EngineConfig::new().limits(limits));
    let err = engine
        .compile_json_schema(&schema, &JsonSchemaOptions::new())
        .err()
        .unwrap();
    assert!(
        matches!(
            err.kind(),
            CompileErrorKind::Unsupported | CompileErrorKind::Limit
        ),
        "{err}"
    );
}

/// Names spelled with escapes (the tracker reads them decoded), names matched by a pattern
/// only, and a recursive reference: each place of a counted value is followed.
#[test]
fn counted_values_under_escaped_names_patterns_and_references_agree_with_the_grammar() {
    let item = counted("^(?:ab)+$", 1, 101);
    let schema = json!({
        "$defs": {
            "node": {
                "type": "object",
                "properties": {
                    "t\"": item,
                    "k": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}
                },
                "patternProperties": {"^p": item},
                "additionalProperties": false
            }
        },
        "$ref": "#/$defs/node"
    });
    walks_agree_counted(&schema, 80, 300, 6);
}

/// Without a history the masks are the same; a refused token leaves the matcher as it was.
#[test]
fn counted_lengths_without_history_agree_with_the_grammar() {
    let schema = counted("^(?:a|😀b|ࠀb)*$", 2, 31);
    let options = JsonSchemaOptions::new();
    let limits = Limits::new().automaton_states(COUNTED_STATES).history(0);
    let engine = Engine::with_config(vocab(), EngineConfig::new().limits(limits));
    let mut counted = engine
        .compile_json_schema(&schema, &options)
        .unwrap()
        .matcher();
    let mut exact = Engine::new(vocab())
        .compile_json_schema(&schema, &options)
        .unwrap()
        .matcher();
    let vocab = engine.vocab();
    let text = [b"\"".as_slice(), &[b'a'; 29], "😀".as_bytes(), b"b\""].concat();
    for &t in &vocab.encode_greedy(&text).unwrap() {
        let what = format!("before {:?}", String::from_utf8_lossy(vocab.token_bytes(t)));
        let expected = mask_of(&mut exact, vocab);
        assert_same_mask(&mask_of(&mut counted, vocab), &expected, vocab, &what);
        for refused in [0xF0, b'a' as TokenId, b'"' as TokenId] {
            if !expected.contains(refused) {
                assert!(counted.consume(refused).is_err(), "{what}");
            }
        }
        exact.consume(t).unwrap();
        counted.consume(t).unwrap();
    }
    assert!(counted.is_accepting() && exact.is_accepting());
}

/// Two bounds at one place (another branch's string), and a bound only object keys would
/// carry: refused with a typed error, or counted where the place is a value.
#[test]
fn counted_strings_beside_other_strings_are_refused() {
    let limits = Limits::new().automaton_states(COUNTED_STATES);
    let engine = Engine::with_config(vocab(), EngineConfig::new().limits(limits));
    let options = JsonSchemaOptions::new();
    let two_bounds = json!({"anyOf": [counted("^(?:ab)+$", 0, 101), counted("^(?:ab)+$", 0, 103)]});
    let err = engine
        .compile_json_schema(&two_bounds, &options)
        .err()
        .unwrap();
    assert_eq!(err.kind(), CompileErrorKind::Unsupported, "{err}");
    let tuple =
        json!({"type": "array", "prefixItems": [counted("^(?:ab)+$", 0, 101), {"type": "string"}]});
    let err = engine.compile_json_schema(&tuple, &options).err().unwrap();
    assert_eq!(err.kind(), CompileErrorKind::Unsupported, "{err}");
    let names = json!({"type": "object", "propertyNames": counted("^(?:ab)+$", 0, 101)});
    let err = engine.compile_json_schema(&names, &options).err().unwrap();
    assert!(
        matches!(
            err.kind(),
            CompileErrorKind::Unsupported | CompileErrorKind::Limit
        ),
        "{err}"
    );
    // Lenient: the other branch's place loses the bound with a warning, never a panic.
    let lenient = JsonSchemaOptions::new().lenient(true);
    let compiled = engine.compile_json_schema(&two_bounds, &lenient).unwrap();
    assert!(!compiled.warnings().is_empty());
}

/// Bounds up to the largest counted one (2^20) compile within the table's budget; past it,
/// and past any integer a count holds, a typed error. Masks stay exact near the start.
#[test]
fn huge_bounds_compile_or_fail_typed() {
    let limits = Limits::new().automaton_states(COUNTED_STATES);
    let engine = Engine::with_config(vocab(), EngineConfig::new().limits(limits));
    let options = JsonSchemaOptions::new();
    for max in [
        json!(1 << 20),
        json!((1 << 20) + 1),
        json!(1u64 << 32),
        json!(4294967297u64),
        json!(1e300),
    ] {
        let mut schema = counted("^(?:ab)+$", 0, 0);
        schema["maxLength"] = max.clone();
        match engine.compile_json_schema(&schema, &options) {
            Ok(c) => {
                let mut m = c.matcher();
                let vocab = engine.vocab();
                for t in vocab.encode_greedy(b"\"ababab\"").unwrap() {
                    assert!(mask_of(&mut m, vocab).contains(t), "{max}");
                    m.consume(t).unwrap();
                }
                assert!(m.is_accepting(), "{max}");
            }
            Err(e) => assert!(
                matches!(
                    e.kind(),
                    CompileErrorKind::Unsupported
                        | CompileErrorKind::Limit
                        | CompileErrorKind::Invalid
                ),
                "{max}: {e}"
            ),
        }
    }
}

/// A pattern whose strings are all longer than `maxLength`, too big to intersect: no string
/// is allowed, so the other branch alone is (no quote opening a dead end), and alone it is
/// an empty language, as when the front end intersects them.
#[test]
fn a_counted_string_with_no_string_within_the_bound_is_never_opened() {
    let empty = counted("^(?:ab|ba)*c{50}$", 0, 49);
    walks_agree_counted(&json!({"anyOf": [{"type": "integer"}, empty]}), 20, 20, 7);
    let options = JsonSchemaOptions::new();
    let exact = Engine::new(vocab())
        .compile_json_schema(&empty, &options)
        .err()
        .unwrap();
    let limits = Limits::new().automaton_states(COUNTED_STATES);
    let engine = Engine::with_config(vocab(), EngineConfig::new().limits(limits));
    let err = engine.compile_json_schema(&empty, &options).err().unwrap();
    assert_eq!(err.kind(), exact.kind(), "{err}");
}

/// Characters JSON spells with an escape (`"`, `\`, `/`), each needing one more after it: a
/// pending `\` near the bound may still become an allowed `\u0061`.
#[test]
fn counted_escaped_characters_agree_with_the_grammar() {
    walks_agree_counted(&counted("^(?:a|\"b|\\\\c|/d)*$", 0, 31), 60, 60, 8);
}

/// A string or an array of the same counted strings at one place.
#[test]
fn counted_string_or_array_of_them_agree_with_the_grammar() {
    let item = counted("^(?:ab)+$", 0, 101);
    let schema = json!({"anyOf": [item, {"type": "array", "items": item, "maxItems": 3}]});
    walks_agree_counted(&schema, 60, 200, 9);
}

/// Counted strings beside an array of distinct free strings: one tracker keeps both.
#[test]
fn counted_strings_beside_distinct_items_agree_with_the_grammar() {
    let schema = json!({
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
            "t": counted("^(?:ab)+$", 0, 101),
            "u": {"type": "array", "items": counted("^(?:ab)+$", 0, 101)}
        },
        "additionalProperties": false
    });
    walks_agree_counted(&schema, 80, 200, 10);
}
