//! Attempts to break `uniqueItems` over a list of strings kept by the matcher
//! (`matcher::json_state::listed`): the engine's masks against the grammar of subsets the
//! front end builds without a matcher, compiled as a plain grammar, over walks through
//! tokens that write several items at once, arrays of such arrays, objects in any order,
//! constant arrays beside them, and random lists.

use formwork::front::json_schema::{JsonSchemaOptions, PropertyOrder, Whitespace};
use formwork::{Engine, Matcher};
use formwork_testkit::agree::{walks_agree, Walks};
use formwork_testkit::json_schema::{distinct_list, grammar_and_engine};
use formwork_testkit::rng::Rng;
use formwork_testkit::vocab::bytes_and;
use serde_json::{json, Value};

use super::json_schema_distinct_listed::{agree, agree_with, vocab};

const WORDS: [&str; 7] = ["", "a", "ab", "abc", "b", "é", "éa"];

#[test]
fn empty_and_single_values() {
    agree(&distinct_list(&[""], json!({})), 60, 11);
    agree(&distinct_list(&["a"], json!({})), 60, 12);
    agree(&distinct_list(&["", "a"], json!({"minItems": 2})), 60, 13);
    agree(&distinct_list(&WORDS, json!({})), 150, 14);
}

#[test]
fn item_counts_near_the_list_size() {
    let n = WORDS.len();
    agree(&distinct_list(&WORDS, json!({"minItems": n})), 80, 21);
    agree(&distinct_list(&WORDS, json!({"maxItems": n})), 80, 22);
    agree(
        &distinct_list(&WORDS, json!({"minItems": n - 1, "maxItems": n - 1})),
        80,
        23,
    );
    agree(
        &distinct_list(&["a", "ab"], json!({"minItems": 2, "maxItems": 2})),
        60,
        24,
    );
}

#[test]
fn arrays_of_listed_arrays() {
    let inner = distinct_list(&WORDS[..5], json!({}));
    agree(&json!({"type": "array", "items": inner}), 150, 31);
    agree(
        &json!({"type": "array", "items": {"anyOf": [inner, {"enum": ["a", "b"]}]},
            "minItems": 1, "maxItems": 3}),
        100,
        32,
    );
}

#[test]
fn listed_arrays_in_objects_in_any_order() {
    let options = JsonSchemaOptions::new().property_order(PropertyOrder::Any);
    let schema = json!({"type": "object", "properties": {
        "a": distinct_list(&WORDS[..4], json!({})),
        "b": distinct_list(&WORDS[3..], json!({})),
        "ab": {"type": "string"}}, "required": ["a"]});
    agree_with(&schema, &options, 150, 41);
}

#[test]
fn listed_items_with_flexible_white_space() {
    let options = JsonSchemaOptions::new().whitespace(Whitespace::Flexible { max_run: Some(2) });
    agree_with(
        &distinct_list(&WORDS, json!({"minItems": 2})),
        &options,
        150,
        51,
    );
}

/// Constant arrays at the place of a listed array: their strings need not be values of the
/// list, nor as few as it.
#[test]
fn constant_array_of_other_strings_beside_a_list() {
    agree(
        &json!({"anyOf": [distinct_list(&["a", "b"], json!({})), {"const": ["zzz"]}]}),
        60,
        61,
    );
}

#[test]
fn constant_array_of_more_strings_beside_a_list() {
    agree(
        &json!({"anyOf": [distinct_list(&["a", "b"], json!({})), {"const": ["a", "b", "c"]}]}),
        60,
        62,
    );
}

#[test]
fn constant_arrays_past_the_list_beside_it() {
    agree(
        &json!({"anyOf": [distinct_list(&["a", "ab"], json!({})), {"enum": [["ab", "a"], ["abc"]]}]}),
        60,
        63,
    );
}

#[test]
fn items_filtered_by_other_keywords() {
    agree(
        &json!({"type": "array", "uniqueItems": true,
            "items": {"enum": ["a", "bb", "ccc", 1], "type": "string", "minLength": 2}}),
        60,
        71,
    );
    agree(
        &json!({"type": "array", "uniqueItems": true,
            "items": {"enum": ["a", "ab", "b"], "not": {"const": "ab"}}}),
        60,
        72,
    );
    agree(
        &json!({"type": "array", "uniqueItems": true,
            "items": {"allOf": [{"enum": ["a", "ab", "b"]}, {"enum": ["ab", "b", "c"]}]}}),
        60,
        73,
    );
    agree(
        &json!({"type": "array", "uniqueItems": true,
            "items": {"enum": ["a", "ab", "b"], "pattern": "^a"}}),
        60,
        74,
    );
    agree(
        &json!({"type": "array", "uniqueItems": true,
            "items": {"enum": ["a", "ab", "b", "abc"], "maxLength": 2}}),
        60,
        75,
    );
}

#[test]
fn listed_items_through_references() {
    let schema = json!({"$defs": {
        "w": {"enum": ["a", "ab", "b"]},
        "node": {"type": "object", "properties": {
            "tags": {"type": "array", "uniqueItems": true, "items": {"$ref": "#/$defs/w"}},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}},
            "required": ["tags"]}},
        "$ref": "#/$defs/node"});
    agree(&schema, 150, 81);
}

/// Random lists over a few bytes (values prefixes of each other, the empty string, a
/// character of two bytes), random bounds.
#[test]
fn random_lists() {
    let mut rng = Rng::new(91);
    let pieces = ["a", "b", "é"];
    for case in 0..40 {
        let n = 1 + rng.below(6);
        let mut words: Vec<String> = (0..n)
            .map(|_| {
                (0..rng.below(4))
                    .map(|_| pieces[rng.below(pieces.len())])
                    .collect()
            })
            .collect();
        words.sort();
        words.dedup();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let mut extra = serde_json::Map::new();
        let min = rng.below(words.len() + 1);
        if rng.below(2) == 0 {
            extra.insert("minItems".into(), json!(min));
        }
        if rng.below(2) == 0 {
            extra.insert("maxItems".into(), json!(min + rng.below(3)));
        }
        let schema = distinct_list(&words, Value::Object(extra));
        let schema = match rng.below(3) {
            0 => schema,
            1 => json!({"type": "array", "items": schema, "maxItems": 3}),
            _ => json!({"type": "object", "properties": {"x": schema, "y": {"enum": words}}}),
        };
        eprintln!("case {case}: {schema}");
        agree(&schema, 20, 100 + case);
    }
}

/// Constant arrays of distinct values of the list are arrays of it: the matcher keeps the
/// list.
#[test]
fn constant_arrays_of_the_list_beside_it() {
    agree(
        &json!({"anyOf": [distinct_list(&["a", "ab", "b"], json!({})),
            {"enum": [["ab", "a"], ["b"], []]}]}),
        80,
        64,
    );
}

/// Past the grammar's subsets, a constant array of other items beside a list is refused
/// rather than kept wrong; one of distinct values of the list is one of its arrays.
#[test]
fn long_lists_beside_constant_arrays() {
    let engine = Engine::new(vocab());
    let words: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let list = distinct_list(&words, json!({}));
    for other in [json!(["zzz"]), json!(["w1", 1]), json!(["w1", "w1"])] {
        let schema = json!({"anyOf": [list, {"const": other}]});
        let err = engine
            .compile_json_schema(&schema, &JsonSchemaOptions::new())
            .err()
            .unwrap_or_else(|| panic!("{other} compiles"));
        assert_eq!(
            err.kind(),
            formwork::CompileErrorKind::Unsupported,
            "{other}"
        );
    }
    let schema = json!({"anyOf": [list, {"const": ["w2", "w1"]}]});
    let mut m = engine
        .compile_json_schema(&schema, &JsonSchemaOptions::new())
        .unwrap()
        .matcher();
    m.consume_bytes(br#"["w2","w1"]"#).unwrap();
    assert!(m.is_accepting());
}

/// Values holding JSON's punctuation, characters past the BMP, DEL, a slash, and values a
/// byte apart inside one character.
#[test]
fn values_holding_punctuation_and_wide_characters() {
    agree(
        &distinct_list(&["a,b", "a", "[", "]", ",", "a,", ":", "a b"], json!({})),
        120,
        101,
    );
}

#[test]
fn values_past_ascii() {
    agree(
        &distinct_list(
            &["😀", "😁", "é", "ê", "\u{7f}", "a/b", "\u{2028}"],
            json!({}),
        ),
        120,
        102,
    );
}

#[test]
fn empty_and_repeated_lists() {
    agree(&distinct_list(&[], json!({})), 20, 111);
    agree(&distinct_list(&["a", "a", "b"], json!({})), 60, 112);
    agree(
        &json!({"type": "array", "uniqueItems": true, "items": {"const": "ab"}}),
        40,
        113,
    );
}

/// Arrays of one list at one place with other bounds: the matcher keeps the list.
#[test]
fn one_list_under_other_bounds() {
    agree(
        &json!({"anyOf": [distinct_list(&WORDS, json!({"maxItems": 2})),
            distinct_list(&WORDS, json!({"minItems": 4}))]}),
        120,
        121,
    );
    agree(
        &json!({"type": "object", "additionalProperties": distinct_list(&WORDS[1..], json!({})),
            "patternProperties": {"^a": distinct_list(&WORDS[1..], json!({"maxItems": 1}))}}),
        120,
        122,
    );
}

/// Walks over Qwen3's tokens made of the words' letters and `"[],` (such as `","`, `"],`
/// and whole words), a list of words that start each other.
#[test]
fn listed_items_walk_real_tokens() {
    let words = ["the", "then", "there", "a", "an", "and", "in", "é"];
    let qwen = formwork_testkit::tokenizers::qwen3();
    let alphabet: Vec<u8> = words.concat().bytes().chain(*b"\"[],").collect();
    let tokens = (0..qwen.len() as u32)
        .filter(|&t| !qwen.is_special(t))
        .map(|t| qwen.token_bytes(t))
        .filter(|b| b.len() > 1 && b.iter().all(|c| alphabet.contains(c)))
        .map(<[u8]>::to_vec);
    let engine = Engine::new(bytes_and(tokens));
    let schema = json!({"type": "array", "items": distinct_list(&words, json!({"minItems": 1})),
        "maxItems": 2});
    let (exact, kept) = grammar_and_engine(&engine, &schema, &JsonSchemaOptions::new());
    let walks = Walks {
        walks: 40,
        steps: 30,
        seed: 131,
    };
    walks_agree(engine.vocab(), &exact, &kept, walks, |rng, allowed| {
        allowed[rng.below(allowed.len())]
    });
}

/// Items whose list other keywords narrow: once the values they leave are written, no `,`.
#[test]
fn narrowed_lists_run_out() {
    let engine = Engine::new(vocab());
    for items in [
        json!({"enum": ["a", "ab", "b"], "pattern": "^a"}),
        json!({"enum": ["a", "ab", "abc"], "maxLength": 2}),
        json!({"enum": ["a", "ab", "b"], "not": {"const": "b"}}),
    ] {
        let schema = json!({"type": "array", "uniqueItems": true, "items": items});
        let mut m = engine
            .compile_json_schema(&schema, &JsonSchemaOptions::new())
            .unwrap()
            .matcher();
        m.consume_bytes(br#"["ab","a""#).unwrap();
        assert!(m.consume_bytes(b",").is_err(), "{items}");
    }
}

/// Random unions at one place: lists, constant arrays of their values or others, arrays of
/// strings, integers, objects holding lists; in objects in any order too.
#[test]
fn random_unions_at_one_place() {
    let mut rng = Rng::new(141);
    let pool = ["", "a", "ab", "b", "é", "zz"];
    let pick = |rng: &mut Rng, n: usize| -> Vec<&str> {
        let mut ws: Vec<&str> = (0..n).map(|_| pool[rng.below(pool.len())]).collect();
        ws.sort();
        ws.dedup();
        ws
    };
    for case in 0..30 {
        let branch = |rng: &mut Rng| -> Value {
            match rng.below(6) {
                0 | 1 => {
                    let n = 1 + rng.below(4);
                    distinct_list(&pick(rng, n), json!({"maxItems": 1 + rng.below(4)}))
                }
                2 => {
                    let n = rng.below(3);
                    json!({"const": pick(rng, n)})
                }
                3 => json!({"type": "array", "items": {"enum": ["a", "b"]}, "maxItems": 2}),
                4 => json!({"type": "integer"}),
                _ => {
                    let n = 1 + rng.below(3);
                    json!({"type": "object", "properties": {"t": distinct_list(&pick(rng, n), json!({}))}})
                }
            }
        };
        let schema = json!({"anyOf": [branch(&mut rng), branch(&mut rng), branch(&mut rng)]});
        let options = match rng.below(2) {
            0 => JsonSchemaOptions::new(),
            _ => JsonSchemaOptions::new().property_order(PropertyOrder::Any),
        };
        eprintln!("case {case}: {schema}");
        agree_with(&schema, &options, 20, 200 + case);
    }
}
