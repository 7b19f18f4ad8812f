//! `uniqueItems` over free strings, kept by the matcher (`matcher::json_state`): at every step
//! the mask equals, bit for bit over the whole vocabulary, the reference recognizer's mask of
//! the schema's grammar less the tokens that close an item equal to an earlier one of its
//! array (found here independently: items decoded by `serde_json`). Rollback restores the
//! items written, and `jsonschema` agrees on what ends accepted.

use std::collections::HashSet;

use formwork::front::json_schema::{compile_schema, JsonSchemaOptions};
use formwork::ir::recognizer::{Recognizer, Terminal};
use formwork::mask::TokenMask;
use formwork::{CompileErrorKind, Engine, Matcher, Whitespace};
use formwork_testkit::oracle::{assert_same_mask, mask_of, step_matches};
use formwork_testkit::rng::Rng;
use formwork_testkit::tokenizers;
use formwork_testkit::walk::random_walk;
use serde_json::{json, Value};

fn engine() -> Engine {
    Engine::new(tokenizers::qwen3().clone())
}

/// Does `text` close a string item equal to an earlier one in an array that is the value of
/// a property named one of `keys` (the test schemas' distinct arrays, and no other array has
/// those names)? White space may surround the structure.
fn repeats(text: &[u8], keys: &[&str]) -> bool {
    keys.iter().any(|key| {
        let name = format!("\"{key}\"");
        let mut from = 0;
        while let Some(at) = find(&text[from..], name.as_bytes()) {
            from += at + name.len();
            let rest = skip_space(&text[from..]);
            let Some(rest) = rest.strip_prefix(b":") else {
                continue;
            };
            let Some(rest) = skip_space(rest).strip_prefix(b"[") else {
                continue;
            };
            if repeats_in_array(rest) {
                return true;
            }
        }
        false
    })
}

fn skip_space(text: &[u8]) -> &[u8] {
    let n = text
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
        .count();
    &text[n..]
}

/// Does the array whose items start `rest` repeat a string among its closed items?
fn repeats_in_array(rest: &[u8]) -> bool {
    let mut seen = HashSet::new();
    let mut rest = skip_space(rest);
    while rest.first() == Some(&b'"') {
        let Some(end) = string_end(rest, 0) else {
            return false;
        };
        let item: String = serde_json::from_slice(&rest[..=end]).unwrap();
        if !seen.insert(item) {
            return true;
        }
        let Some(next) = skip_space(&rest[end + 1..]).strip_prefix(b",") else {
            return false;
        };
        rest = skip_space(next);
    }
    false
}

/// The closing quote of the string opening at `rest[start]`, if it is there yet.
fn string_end(rest: &[u8], start: usize) -> Option<usize> {
    let mut escaped = false;
    for (i, &b) in rest.iter().enumerate().skip(start + 1) {
        match (escaped, b) {
            (true, _) => escaped = false,
            (false, b'\\') => escaped = true,
            (false, b'"') => return Some(i),
            _ => {}
        }
    }
    None
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// The exact mask after `prefix`: the grammar's, less the tokens that close a repeat.
fn oracle_mask(
    rec: &Recognizer,
    chart: &formwork::ir::recognizer::Chart,
    engine: &Engine,
    prefix: &[u8],
    keys: &[&str],
) -> TokenMask {
    let vocab = engine.vocab();
    let mut mask = chart.mask(rec, vocab);
    // A JSON string closes only at a `"`: a token without one cannot close a repeat.
    let closing: Vec<_> = mask
        .iter()
        .filter(|&t| !vocab.is_special(t) && vocab.token_bytes(t).contains(&b'"'))
        .collect();
    for t in closing {
        if repeats(&[prefix, vocab.token_bytes(t)].concat(), keys) {
            mask.remove(t);
        }
    }
    mask
}

/// Walks `text` token by token; masks equal the oracle's at every step and at the end, where
/// the matcher accepts iff `valid`. After the walk, every rollback depth gives back the masks
/// the walk saw.
#[track_caller]
fn masks_match(engine: &Engine, schema: &Value, keys: &[&str], text: &str, valid: bool) {
    let tokens = engine.vocab().encode(text).unwrap();
    let options = JsonSchemaOptions::new();
    masks_match_tokens(engine, schema, &options, keys, text, &tokens, valid);
}

/// [`masks_match`] over a text written one character at a time: every escape, surrogate and
/// name split at each of its bytes.
#[track_caller]
fn masks_match_by_chars(
    engine: &Engine,
    schema: &Value,
    options: &JsonSchemaOptions,
    keys: &[&str],
    text: &str,
    valid: bool,
) {
    let vocab = engine.vocab();
    let tokens: Vec<_> = text
        .chars()
        .flat_map(|c| vocab.encode(&c.to_string()).unwrap())
        .collect();
    masks_match_tokens(engine, schema, options, keys, text, &tokens, valid);
}

/// [`masks_match`] over `tokens` (which spell `text`), compiled with `options`.
#[track_caller]
fn masks_match_tokens(
    engine: &Engine,
    schema: &Value,
    options: &JsonSchemaOptions,
    keys: &[&str],
    text: &str,
    tokens: &[formwork::TokenId],
    valid: bool,
) {
    let vocab = engine.vocab();
    let grammar = compile_schema_without_distinct(schema, options);
    let rec = Recognizer::new(&grammar);
    let mut chart = rec.start();
    let mut m = engine
        .compile_json_schema(schema, options)
        .unwrap()
        .matcher();
    let mut prefix = Vec::new();
    let mut seen = Vec::new();
    let mut consumed = 0;
    for (step, &t) in tokens.iter().enumerate() {
        let what = format!("{schema} on {text}: step {step}");
        let expected = oracle_mask(&rec, &chart, engine, &prefix, keys);
        if !step_matches(&mut m, vocab, &expected, t, valid, &mut seen, &what) {
            break;
        }
        m.consume(t).unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(chart.push_token(&rec, vocab, t));
        prefix.extend_from_slice(vocab.token_bytes(t));
        consumed += 1;
    }
    if consumed == tokens.len() {
        let what = format!("{schema} on {text}: the end");
        let expected = oracle_mask(&rec, &chart, engine, &prefix, keys);
        assert_same_mask(&mask_of(&mut m, vocab), &expected, vocab, &what);
        assert_eq!(m.is_accepting(), valid, "{what}");
    }
    for back in (1..=consumed).rev() {
        let mut fork = m.clone();
        fork.rollback(back).unwrap();
        let what = format!("{schema} on {text}: rolled back {back} of {consumed}");
        assert_same_mask(
            &mask_of(&mut fork, vocab),
            &seen[consumed - back],
            vocab,
            &what,
        );
    }
}

/// The schema's grammar alone: the arrays without `uniqueItems`, as the engine's grammar has
/// them. (`compile_schema` refuses what only a matcher can keep, so the test drops the
/// keyword from a copy.)
fn compile_schema_without_distinct(
    schema: &Value,
    options: &JsonSchemaOptions,
) -> formwork::ir::Grammar {
    let mut copy = schema.clone();
    drop_unique_items(&mut copy);
    compile_schema(&copy, options).unwrap().grammar
}

fn drop_unique_items(v: &mut Value) {
    let mut todo = vec![v];
    while let Some(v) = todo.pop() {
        match v {
            Value::Object(map) => {
                map.remove("uniqueItems");
                todo.extend(map.values_mut());
            }
            Value::Array(xs) => todo.extend(xs.iter_mut()),
            _ => {}
        }
    }
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::options().build(schema).unwrap()
}

/// The properties of [`tags_schema`] whose values are distinct arrays.
const TAGS_KEYS: &[&str] = &["tags", "labels", "ids"];

fn tags_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": true},
            "notes": {"type": "array", "items": {"type": "string"}},
            "ids": {"type": "array", "items": {"type": "string", "pattern": "^[a-z][a-z0-9_]*$"}, "uniqueItems": true},
            "nested": {"$ref": "#/$defs/labels"}
        },
        "$defs": {
            "labels": {
                "type": "object",
                "properties": {
                    "labels": {
                        "type": "array",
                        "items": {"anyOf": [{"type": "string", "minLength": 2}, {"$ref": "#/$defs/word"}]},
                        "uniqueItems": true,
                        "minItems": 1
                    }
                },
                "required": ["labels"],
                "additionalProperties": false
            },
            "word": {"type": "string", "not": {"const": "stop"}}
        }
    })
}

#[test]
fn distinct_strings_masks_match_the_oracle() {
    let e = engine();
    let schema = tags_schema();
    let v = validator(&schema);
    let valid = [
        r#"{"tags":["a","ab","b","ba"],"notes":["a","a"]}"#,
        r#"{"tags":["x y","x","x\"","x\\"],"nested":{"labels":["tags","a"]}}"#,
        r#"{"tags":[],"nested":{"labels":["\u00e9","é\u0000"]}}"#,
        r#"{"tags":["a1"],"ids":["a1","a","a_1","b"]}"#,
    ];
    let invalid = [
        r#"{"tags":["a","b","a"]}"#,
        r#"{"tags":["é","\u00e9"]}"#,
        r#"{"tags":["ab","a","b","ab"],"notes":[]}"#,
        r#"{"notes":["x"],"nested":{"labels":["aa","b","aa"]}}"#,
        r#"{"tags":["\"","\u0022"]}"#,
        r#"{"tags":["😀","\ud83d\ude00"]}"#,
        r#"{"ids":["ab","a","ab"]}"#,
    ];
    for (texts, expected) in [(&valid[..], true), (&invalid[..], false)] {
        for text in texts {
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(v.is_valid(&value), expected, "{text}");
            masks_match(&e, &schema, TAGS_KEYS, text, expected);
        }
    }
}

/// Tokens that close an item and go on (`","`, `"]}`, `","\`) are masked off exactly when the
/// item closed repeats, and a matcher refuses them with the byte of the closing quote.
#[test]
fn a_token_closing_a_repeat_is_refused_at_its_quote() {
    let e = engine();
    let vocab = e.vocab();
    let schema = tags_schema();
    let c = e
        .compile_json_schema(&schema, &JsonSchemaOptions::new())
        .unwrap();
    let mut m = c.matcher();
    m.consume_bytes(br#"{"tags":["ab","a"#).unwrap();
    let close_and_next = vocab.encode(r#"",""#).unwrap();
    assert_eq!(close_and_next.len(), 1, "one token in Qwen3");
    let t = close_and_next[0];
    assert!(mask_of(&mut m, vocab).contains(t), "\"a\" is new");
    m.consume_bytes(b"b").unwrap();
    assert!(!mask_of(&mut m, vocab).contains(t), "\"ab\" repeats");
    let err = m.consume(t).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            formwork::MatchErrorKind::Rejected { at_byte: 0, .. }
        ),
        "{err}"
    );
    let err = m.consume_bytes(br#"","#).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            formwork::MatchErrorKind::TextRejected { at_byte: 0, .. }
        ),
        "{err}"
    );
    // Unchanged by the refusals: the item goes on.
    m.consume_bytes(br#"c","ab"#).unwrap();
    m.consume_bytes(br#"d"]}"#).unwrap();
    assert!(m.is_accepting());
    // Text the grammar refuses earlier than its repeat: the grammar's error, at its byte.
    m.reset();
    m.consume_bytes(br#"{"tags":["ab","#).unwrap();
    let err = m.consume_bytes(br#"1,"ab""#).unwrap_err();
    assert!(
        matches!(
            err.kind(),
            formwork::MatchErrorKind::TextRejected { at_byte: 0, .. }
        ),
        "{err}"
    );
    m.reset();
    m.consume_bytes(br#"{"tags":["ab","ab"]}"#).unwrap_err();
    m.consume_bytes(br#"{"tags":["ab","abc"]}"#).unwrap();
}

/// Random walks through the matcher end on texts `jsonschema` accepts: no walk writes a
/// repeat, whichever tokens it draws.
#[test]
fn distinct_strings_walks_validate() {
    let e = engine();
    for schema in [
        json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true, "minItems": 3}),
        tags_schema(),
    ] {
        let c = e
            .compile_json_schema(&schema, &JsonSchemaOptions::new())
            .unwrap();
        let v = validator(&schema);
        let mut rng = Rng::new(0xd15c);
        let mut finished = 0;
        for _ in 0..40 {
            let mut m = c.matcher();
            let Some(out) = random_walk(e.vocab(), &mut m, &mut rng, 80) else {
                continue;
            };
            finished += 1;
            let value: Value = serde_json::from_slice(&out).unwrap();
            assert!(v.is_valid(&value), "{schema}: walked {value}");
        }
        assert!(finished > 0, "{schema}: no walk finished");
    }
}

/// Where the matcher cannot keep items apart, the schema is refused as before: a grammar
/// alone (`compile_schema`), items whose completions can run out, or a place where another
/// branch allows repeats.
#[test]
fn distinct_strings_refused_where_a_matcher_cannot_keep_them() {
    let e = engine();
    let unique = json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true});
    let err = compile_schema(&unique, &JsonSchemaOptions::new()).unwrap_err();
    assert_eq!(err.kind(), CompileErrorKind::Unsupported, "{err}");
    // Items whose completions can run out: past `x`, only the closing quote.
    let finite = json!({"type": "array", "items": {"type": "string", "pattern": "^[0-9]+x$"}, "uniqueItems": true});
    let err = e
        .compile_json_schema(&finite, &JsonSchemaOptions::new())
        .unwrap_err();
    assert_eq!(err.kind(), CompileErrorKind::Unsupported, "{err}");
    let fixed = json!({"anyOf": [{"enum": [{"a": ["x", "x"]}]}, {"type": "object", "properties": {"a": unique.clone()}}]});
    let err = e
        .compile_json_schema(&fixed, &JsonSchemaOptions::new())
        .unwrap_err();
    assert_eq!(err.kind(), CompileErrorKind::Unsupported, "{err}");
    let mixed = json!({"anyOf": [unique, {"type": "array", "items": {"type": "integer"}}]});
    let err = e
        .compile_json_schema(&mixed, &JsonSchemaOptions::new())
        .unwrap_err();
    assert_eq!(err.kind(), CompileErrorKind::Unsupported, "{err}");
    assert!(err.to_string().contains("repeated items"), "{err}");
    // Lenient: the place loses `uniqueItems`, with a warning.
    let c = e
        .compile_json_schema(&mixed, &JsonSchemaOptions::new().lenient(true))
        .unwrap();
    assert_eq!(c.warnings().len(), 1);
    let mut m = c.matcher();
    m.consume_bytes(br#"["a","a"]"#).unwrap();
    assert!(m.is_accepting());
}

/// A constant (`const`, `enum`) is a value like any other branch's: one whose array repeats a
/// string where another branch wants distinct strings makes the place refused (a matcher
/// keeping the strings apart would refuse the constant), and one without repeats is kept
/// beside the distinct strings.
#[test]
fn constants_beside_distinct_strings() {
    let e = engine();
    let strict = JsonSchemaOptions::new();
    let unique = json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true});
    let tagged = json!({"type": "object", "properties": {"tags": unique}});
    for schema in [
        json!({"anyOf": [unique, {"const": ["a", "a"]}]}),
        json!({"anyOf": [tagged, {"enum": [{"tags": ["a", "a"]}, 1]}]}),
        json!({"anyOf": [{"type": "array", "items": tagged}, {"const": [{"tags": ["b", 1, "b"]}]}]}),
    ] {
        let err = e.compile_json_schema(&schema, &strict).unwrap_err();
        assert_eq!(err.kind(), CompileErrorKind::Unsupported, "{schema}: {err}");
        assert!(err.to_string().contains("repeated items"), "{err}");
        let c = e
            .compile_json_schema(&schema, &strict.clone().lenient(true))
            .unwrap();
        let constant = &schema["anyOf"][1];
        let value = constant.get("const").unwrap_or(&constant["enum"][0]);
        let text = value.to_string();
        assert!(validator(&schema).is_valid(value), "{text}");
        let mut m = c.matcher();
        m.consume_bytes(text.as_bytes()).unwrap();
        assert!(m.is_accepting(), "{schema}: {text}");
    }
    let schema =
        json!({"anyOf": [unique, {"const": ["a", "b", 1, 1]}, {"enum": [[], {"x": ["c", "c"]}]}]});
    let c = e.compile_json_schema(&schema, &strict).unwrap();
    let v = validator(&schema);
    for (text, valid) in [
        (r#"["a","b",1,1]"#, true),
        (r#"["a","b"]"#, true),
        (r#"{"x":["c","c"]}"#, true),
        (r#"["b","b"]"#, false),
        (r#"["a","b","a"]"#, false),
    ] {
        assert_eq!(
            v.is_valid(&serde_json::from_str(text).unwrap()),
            valid,
            "{text}"
        );
        let mut m = c.matcher();
        let accepted = m.consume_bytes(text.as_bytes()).is_ok() && m.is_accepting();
        assert_eq!(accepted, valid, "{schema}: {text}");
    }
}

/// Escapes and surrogate pairs written a character at a time: the masks stay exact at every
/// byte of an escape (`\u00` then `e9"`), and white space around the structure (flexible
/// layout) neither hides a repeat nor makes one.
#[test]
fn distinct_strings_masks_match_at_every_character() {
    let e = engine();
    let schema = tags_schema();
    let v = validator(&schema);
    let compact = JsonSchemaOptions::new();
    let flexible = JsonSchemaOptions::new().whitespace(Whitespace::Flexible { max_run: None });
    for (options, text) in [
        (&compact, r#"{"tags":["\u00e9","é\"","\\","\\\"","é"]}"#),
        (&compact, r#"{"tags":["\ud83d\ude00","x\\","😀"]}"#),
        (&compact, r#"{"tags":["a\"b","\\u0041","\u0041","A"]}"#),
        (
            &compact,
            r#"{"tags":["\/","\b\t","\\/"],"notes":["\"a","\"a"]}"#,
        ),
        (&flexible, "{ \"tags\" : [ \"a\" , \"b\" ,\n\"a\" ] }"),
        (&flexible, "{\"tags\":\t[\"a\"\n,\"b\"]}"),
    ] {
        let valid = v.is_valid(&serde_json::from_str(text).unwrap());
        masks_match_by_chars(&e, &schema, options, TAGS_KEYS, text, valid);
    }
}

/// Distinct arrays below recursion: each node's `tags` is its own array, kept apart from its
/// parent's and siblings'.
#[test]
fn distinct_strings_in_a_recursive_tree() {
    let e = engine();
    let unique = json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true});
    let tree = json!({
        "$defs": {"n": {"type": "object", "properties": {
            "tags": unique,
            "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}
        }}},
        "$ref": "#/$defs/n"
    });
    let v = validator(&tree);
    for text in [
        r#"{"tags":["a"],"kids":[{"tags":["a","b"]},{"tags":["b","c"],"kids":[]}]}"#,
        r#"{"tags":["a"],"kids":[{"tags":["a","b"]},{"tags":["b","b"]}]}"#,
    ] {
        let valid = v.is_valid(&serde_json::from_str(text).unwrap());
        masks_match(&e, &tree, &["tags"], text, valid);
    }
}

/// Past 64 values the rest of which may close the open item, the mask finds the tokens closing
/// a repeat by reading the tokens that may close it instead of looking each value up in the
/// token trie: masks equal the oracle's on both sides of that bound.
#[test]
fn many_values_masks_match_the_oracle() {
    let e = engine();
    let vocab = e.vocab();
    let schema = tags_schema();
    let options = JsonSchemaOptions::new();
    let grammar = compile_schema_without_distinct(&schema, &options);
    let rec = Recognizer::new(&grammar);
    let mut chart = rec.start();
    let mut m = e.compile_json_schema(&schema, &options).unwrap().matcher();
    let items: Vec<String> = std::iter::once("\"t\"".to_string())
        .chain((0..80).map(|i| format!("\"t{i}\"")))
        .collect();
    let mut prefix = format!(r#"{{"tags":[{},"t"#, items.join(",")).into_bytes();
    m.consume_bytes(&prefix).unwrap();
    for &b in &prefix {
        assert!(chart.push(&rec, Terminal::Byte(b)));
    }
    // After `"t`, all 81 values are candidates (the scan); after `"t7`, 11 (trie lookups);
    // after `"t70`, one, itself. Each is a value written, so its closing quote is a repeat.
    // (Qwen3's tokens hold no letter or digit before a quote: only the value itself closes.)
    for next in ["", "7", "0"] {
        m.consume_bytes(next.as_bytes()).unwrap();
        for &b in next.as_bytes() {
            assert!(chart.push(&rec, Terminal::Byte(b)));
        }
        prefix.extend_from_slice(next.as_bytes());
        let expected = oracle_mask(&rec, &chart, &e, &prefix, &["tags"]);
        let what = format!(
            "after {}",
            String::from_utf8_lossy(&prefix[prefix.len() - 8..])
        );
        assert_same_mask(&mask_of(&mut m, vocab), &expected, vocab, &what);
        let quote = vocab.encode("\"").unwrap()[0];
        assert!(!expected.contains(quote), "{what}: closes a repeat");
    }
}
