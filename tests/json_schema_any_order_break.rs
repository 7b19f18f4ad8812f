//! Adversarial cases for objects in any order held by the matcher (`matcher::json_state::keys`),
//! against the `2^n` grammar of the same schema compiled alone (the oracle): unions whose
//! discriminators overlap or are written escaped, groups inside groups, recursion, property
//! counts beside undeclared names, patterns, names that are escapes or prefixes of others,
//! flexible whitespace, and schemas no grammar can hold (typed errors, never a panic).
//!
//! The walks favour the vocabulary's long tokens: byte-by-byte walks rarely finish a name and
//! write the next, where the key state changes.

use formwork::front::json_schema::{
    compile_schema_with, JsonSchemaOptions, PropertyOrder, Whitespace,
};
use formwork::vocab::Vocab;
use formwork::{CompileErrorKind, ConstraintMatcher, Engine, Limits, Matcher, TokenId};
use formwork_testkit::agree::{walks_agree, Walks};
use formwork_testkit::json_schema::{grammar_and_engine, object, walks_agree_but_repeated_names};
use formwork_testkit::oracle::{assert_same_mask, mask_of};
use formwork_testkit::vocab::bytes_and;
use serde_json::{json, Value};

/// Every byte, then tokens that close a name or value and write the next one, escapes of
/// names and discriminators, and `<eos>`.
fn vocab() -> Vocab {
    let extra: &[&[u8]] = &[
        b"{\"",
        b"\"}",
        b"\":",
        b"\",\"",
        b",\"",
        b"\"a\"",
        b"\"a\":",
        b"\"ab\":",
        b"\"b\":",
        b"\"k\":",
        b"\"k\":\"a\"",
        b"\"k\":\"b\",\"",
        b"\"k\":1,\"",
        b"\"k\":true,\"",
        b"\"k\":null}",
        b"\"\\u0061\"",
        b"\\u0061",
        b"\\u00",
        b"\\u006",
        b"\\u006b\":",
        b"\"\\u006b\":",
        b"\"\":",
        b"\"\":1,\"",
        b"\"ab",
        b"ab\"",
        b"\"a\":1,\"b\"",
        b"\"a\":1}",
        b"1}",
        b"1,",
        b"1,\"",
        b"1,\"a",
        b"},",
        b"}}",
        b"},{\"",
        b"[{\"",
        b"{\"a\":1,\"a\"",
        b"{\"a\":1}",
        b"\":\"a\",\"",
        b"\":\"b\"}",
        b"\":{\"",
        b"\\\\",
        b"\\\"",
        b"\\n",
        b"\\/",
        "é".as_bytes(),
        b"\\u00e9",
        b"true,\"",
        b"null,\"",
        b"\"x\":",
        b"\"x1\":",
        b"\"zz\":",
        b"\",\"ab\":",
        b": ",
        b", \"",
        b"\n ",
        b"0,\"a\":",
        b"-0}",
        b" ,\"",
        b"},\"q\":{\"",
        b"[{\"a\":1},{\"",
    ];
    bytes_and(extra.iter().map(|t| t.to_vec()))
}

fn any_order() -> JsonSchemaOptions {
    JsonSchemaOptions::new()
        .property_order(PropertyOrder::Any)
        .max_any_order_properties(12)
}

/// The oracle's matcher (the `2^n` grammar alone) and the engine's.
fn both(
    engine: &Engine,
    schema: &Value,
    options: &JsonSchemaOptions,
) -> (ConstraintMatcher, ConstraintMatcher) {
    grammar_and_engine(engine, schema, options)
}

#[track_caller]
fn agree_with(schema: &Value, options: &JsonSchemaOptions, walks: usize, steps: usize, seed: u64) {
    let engine = Engine::new(vocab());
    let (exact, kept) = both(&engine, schema, options);
    let walks = Walks { walks, steps, seed };
    walks_agree(engine.vocab(), &exact, &kept, walks, pick_long);
}

/// Half the time a long token, when one is allowed (the bytes alone rarely write a name and
/// the next member in one token).
fn pick_long(rng: &mut formwork_testkit::rng::Rng, allowed: &[TokenId]) -> TokenId {
    let long: Vec<TokenId> = allowed.iter().copied().filter(|&t| t >= 256).collect();
    match long.is_empty() || rng.below(2) == 0 {
        true => allowed[rng.below(allowed.len())],
        false => long[rng.below(long.len())],
    }
}

/// Twelve random walks of thirty steps from `seed`: the first difference between `kept` and
/// `exact` other than a name written twice (an object any value may be, `{}`, is a variant
/// of its place's group where a nested discriminator tells it apart, and a group refuses
/// every name written twice; see `walks_agree_but_repeated_names`), if any.
fn walks_differ(
    engine: &Engine,
    exact: &ConstraintMatcher,
    kept: &ConstraintMatcher,
    seed: u64,
) -> Option<String> {
    let walks = Walks {
        walks: 12,
        steps: 30,
        seed,
    };
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        walks_agree_but_repeated_names(engine.vocab(), exact, kept, walks, pick_long)
    }))
    .err()
    .map(|e| e.downcast_ref::<String>().cloned().unwrap_or_default())
}

#[track_caller]
fn agree(schema: &Value, walks: usize, steps: usize, seed: u64) {
    agree_with(schema, &any_order(), walks, steps, seed)
}

/// The closed object of integers `a` and `b` that requires `required`: two of them at one
/// place are objects of two key sets that agree on every value.
fn kind(required: &str) -> Value {
    object(
        json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        json!([required]),
        json!(false),
    )
}

/// The masks of the oracle and the engine's matcher agree after `prefix` (`what` it is).
#[track_caller]
fn masks_agree_after(schema: &Value, prefix: &[u8], what: &str) {
    let engine = Engine::new(vocab());
    let (mut exact, mut kept) = both(&engine, schema, &any_order());
    exact.consume_bytes(prefix).unwrap();
    kept.consume_bytes(prefix).unwrap();
    let vocab = engine.vocab();
    assert_same_mask(
        &mask_of(&mut kept, vocab),
        &mask_of(&mut exact, vocab),
        vocab,
        what,
    );
}

/// The oracle and the engine's matcher accept each of `texts` whole alike.
#[track_caller]
fn verdicts_agree(schema: &Value, texts: &[&str]) {
    for text in texts {
        let (exact, kept) = accepts_both(schema, text);
        assert_eq!(kept, exact, "{text}");
    }
}

/// Does the engine's matcher of `schema` accept `text` whole, and does the oracle's?
fn accepts_both(schema: &Value, text: &str) -> (bool, bool) {
    let engine = Engine::new(vocab());
    let (exact, kept) = both(&engine, schema, &any_order());
    let run = |m: &ConstraintMatcher| {
        let mut m = m.clone();
        m.consume_bytes(text.as_bytes()).is_ok() && m.is_accepting()
    };
    (run(&exact), run(&kept))
}

#[test]
fn discriminator_lists_that_overlap_keep_every_variant_listing_the_value() {
    let first = object(
        json!({"k": {"enum": ["a", "b"]}, "a": {"type": "integer"}, "ab": {"type": "integer"}}),
        json!(["k", "a"]),
        json!(false),
    );
    let second = object(
        json!({"k": {"enum": ["b", "c"]}, "b": {"type": "integer"}, "ab": {"type": "integer"}}),
        json!(["k", "b"]),
        json!(false),
    );
    agree(
        &json!({"anyOf": [first.clone(), second.clone()]}),
        120,
        40,
        101,
    );
    agree(&json!({"oneOf": [first, second]}), 60, 40, 102);
}

#[test]
fn discriminators_of_integers_booleans_and_null_overlapping() {
    let v = |list: Value, extra: &str| {
        object(
            json!({"k": {"enum": list}, "ab": {"type": "integer"}, extra: {"type": "integer"}}),
            json!(["k"]),
            json!(false),
        )
    };
    let union = json!({"anyOf": [
        v(json!([1, true, null]), "a"),
        v(json!([1, false, 10]), "b"),
        v(json!([null, 0, -1]), "x")
    ]});
    agree(&union, 150, 40, 103);
}

/// A string const may be written with escapes (`"\u0061"` for `"a"`): the tracker decodes the
/// discriminator's value, the grammar spells the const as it likes.
#[test]
fn discriminators_written_with_escapes() {
    let v = |kind: &str, extra: &str| {
        object(
            json!({"k": {"const": kind}, extra: {"type": "integer"}}),
            json!(["k", extra]),
            json!(false),
        )
    };
    let union = json!({"anyOf": [v("a", "a"), v("é", "b"), v("\"/\\", "x")]});
    agree(&union, 150, 40, 104);
    let texts = [
        "{\"k\":\"\\u0061\",\"a\":1}",
        "{\"k\":\"\\u00e9\",\"b\":1}",
        "{\"b\":1,\"k\":\"\\u00E9\"}",
        "{\"k\":\"\\u0061\",\"b\":1}",
        "{\"x\":1,\"k\":\"\\\"\\/\\\\\"}",
        "{\"x\":1,\"k\":\"\\\"/\\\\\"}",
    ];
    verdicts_agree(&union, &texts);
}

/// A declared name written with an escape (`"\u0061"` for `a`).
#[test]
fn declared_names_written_with_escapes() {
    let schema = object(
        json!({"a": {"type": "integer"}, "k": {"type": "integer"}, "é": {"type": "integer"}}),
        json!(["a"]),
        json!(false),
    );
    verdicts_agree(
        &schema,
        &[
            "{\"\\u0061\":1}",
            "{\"a\":1,\"\\u0061\":2}",
            "{\"a\":1,\"\\u006b\":2}",
            "{\"a\":1,\"\\u00e9\":2}",
        ],
    );
    agree(&schema, 80, 40, 105);
    // Beside undeclared names of any value, where an escaped declared name might be taken
    // for an undeclared one by one side and a declared one by the other.
    let inner = object(
        json!({"b": {"type": "integer"}}),
        json!(["b"]),
        json!(false),
    );
    let open = json!({
        "type": "object",
        "properties": {"a": inner, "k": {"type": "integer"}},
        "additionalProperties": {"type": "object"}
    });
    verdicts_agree(
        &open,
        &[
            "{\"\\u0061\":{}}",
            "{\"\\u0061\":{\"b\":1}}",
            "{\"\\u0061\":{\"c\":1}}",
            "{\"a\":{\"b\":1},\"\\u0061\":{\"c\":1}}",
        ],
    );
}

/// An object in a union whose member is itself a union of objects; arrays of such objects.
#[test]
fn groups_inside_groups_and_arrays_of_them() {
    let leaf = |req: &str| {
        object(
            json!({"a": {"type": "integer"}, "b": {"type": "integer"}, "ab": {"type": "integer"}}),
            json!([req]),
            json!(false),
        )
    };
    let inner = json!({"anyOf": [leaf("a"), leaf("b")]});
    let outer = |req: &str, k: &str| {
        object(
            json!({"k": {"const": k}, "a": inner.clone(), "x": {"type": "array", "items": inner.clone(), "maxItems": 2}}),
            json!([req]),
            json!(false),
        )
    };
    let schema = json!({"anyOf": [outer("a", "a"), outer("x", "b")]});
    agree(&schema, 120, 60, 106);
    let array = json!({"type": "array", "items": schema, "maxItems": 3});
    agree(&array, 80, 60, 107);
}

#[test]
fn recursion_through_refs() {
    let schema = json!({
        "$defs": {"node": {
            "type": "object",
            "properties": {
                "a": {"type": "integer"},
                "ab": {"$ref": "#/$defs/node"},
                "b": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}
            },
            "required": ["a"],
            "additionalProperties": false
        }},
        "$ref": "#/$defs/node"
    });
    agree(&schema, 120, 60, 108);
    let union = json!({
        "$defs": {"node": {"anyOf": [
            object(json!({"k": {"const": "a"}, "a": {"$ref": "#/$defs/node"}}), json!(["k"]), json!(false)),
            object(json!({"k": {"const": "b"}, "b": {"type": "integer"}}), json!(["k", "b"]), json!(false))
        ]}},
        "$ref": "#/$defs/node"
    });
    agree(&union, 120, 60, 109);
}

/// Property counts over a group, and beside undeclared names routed by patterns (names a
/// walk cannot repeat: each pattern admits a single name).
#[test]
fn property_counts_with_groups_and_undeclared_names() {
    let v = |req: &str| {
        object(
            json!({"a": {"type": "integer"}, "ab": {"type": "integer"}, "b": {"type": "integer"}}),
            json!([req]),
            json!(false),
        )
    };
    for (i, (min, max)) in [(0, 1), (2, 2), (3, 3), (1, 2)].into_iter().enumerate() {
        let schema = json!({"anyOf": [v("a"), v("b")], "minProperties": min, "maxProperties": max});
        agree(&schema, 50, 30, 110 + i as u64);
    }
    let patterned = |min: u64, max: u64| {
        json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "patternProperties": {"^x$": {"type": "integer"}, "^zz$": {"type": "string"}, "^$": {"type": "integer"}},
            "required": ["a"],
            "additionalProperties": false,
            "minProperties": min,
            "maxProperties": max
        })
    };
    for (i, (min, max)) in [(0, 2), (3, 3), (2, 4), (4, 5)].into_iter().enumerate() {
        agree(&patterned(min, max), 60, 40, 120 + i as u64);
    }
}

#[test]
fn dependencies_one_of_required_and_not_required() {
    let props = json!({"a": {"type": "integer"}, "ab": {"type": "integer"}, "b": {"type": "integer"}, "k": {"type": "integer"}});
    let dependent = json!({
        "type": "object",
        "properties": props,
        "dependentRequired": {"a": ["ab"], "ab": ["b"], "k": ["a"]},
        "additionalProperties": false
    });
    agree(&dependent, 100, 40, 130);
    let schemas = json!({
        "type": "object",
        "properties": props,
        "dependencies": {"a": {"required": ["k"]}, "b": ["a"]},
        "maxProperties": 3,
        "additionalProperties": false
    });
    agree(&schemas, 100, 40, 131);
    let not_required = json!({
        "type": "object",
        "properties": props,
        "not": {"required": ["a", "b"]},
        "minProperties": 1,
        "additionalProperties": false
    });
    let engine = Engine::new(vocab());
    if engine
        .compile_json_schema(&not_required, &any_order())
        .is_ok()
    {
        agree(&not_required, 100, 40, 132);
    }
    let one_of = json!({
        "type": "object",
        "properties": props,
        "oneOf": [{"required": ["a"]}, {"required": ["b"]}, {"required": ["a", "b", "k"]}],
        "additionalProperties": false
    });
    agree(&one_of, 100, 40, 133);
}

#[test]
fn overlapping_patterns_and_property_names() {
    let item = object(
        json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        json!(["a"]),
        json!(false),
    );
    let schema = json!({
        "type": "object",
        "properties": {"ab": {"type": "integer"}},
        "patternProperties": {
            "^a$": item,
            "^x": {"type": "object", "properties": {"b": {"type": "integer"}}, "additionalProperties": false},
            "1$": {"type": "object", "maxProperties": 1}
        },
        "additionalProperties": false
    });
    agree(&schema, 120, 50, 140);
    let names = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "ab": {"type": "integer"}},
        "propertyNames": {"enum": ["a", "ab", "b", "zz"]},
        "required": ["ab"],
        "maxProperties": 3
    });
    let engine = Engine::new(vocab());
    if engine.compile_json_schema(&names, &any_order()).is_ok() {
        agree(&names, 100, 40, 141);
    }
}

/// The empty name, names that start others, names with quotes, backslashes, control
/// characters and non-ASCII letters.
#[test]
fn names_with_escapes_prefixes_and_the_empty_name() {
    let schema = object(
        json!({
            "": {"type": "integer"},
            "a": {"type": "integer"},
            "ab": {"type": "integer"},
            "a\"": {"type": "integer"},
            "\\": {"type": "integer"},
            "\n": {"type": "integer"},
            "\u{1}": {"type": "integer"},
            "é": {"type": "integer"},
            "/": {"type": "integer"}
        }),
        json!(["", "ab"]),
        json!(false),
    );
    agree(&schema, 150, 50, 150);
    verdicts_agree(
        &schema,
        &[
            "{\"\":1,\"ab\":2,\"\\n\":3}",
            "{\"\":1,\"ab\":2,\"\\u000a\":3}",
            "{\"\":1,\"ab\":2,\"\\/\":3}",
        ],
    );
}

#[test]
fn flexible_whitespace() {
    let options = any_order().whitespace(Whitespace::Flexible { max_run: Some(2) });
    let v = |k: &str, req: &str| {
        object(
            json!({"k": {"const": k}, "a": {"type": "integer"}, "ab": {"type": "integer"}, "b": {"type": "integer"}}),
            json!(["k", req]),
            json!(false),
        )
    };
    let schema = json!({"anyOf": [v("a", "a"), v("b", "b")]});
    agree_with(&schema, &options, 150, 50, 160);
}

/// Objects no grammar can hold: a typed error, never a panic.
#[test]
fn objects_that_cannot_be_held_are_typed_errors() {
    let wide = |value: Value, required: &str| -> Value {
        let mut props: serde_json::Map<String, Value> = (0..14)
            .map(|i| (format!("p{i}"), json!({"type": "integer"})))
            .collect();
        props.insert("p0".into(), value);
        object(Value::Object(props), json!([required]), json!(false))
    };
    let engine = Engine::new(vocab());
    let options = JsonSchemaOptions::new().property_order(PropertyOrder::Any);
    // An array of any values: no automaton reads it (JSON nests without bound).
    let array = json!({"type": "array"});
    let cases = [
        json!({"anyOf": [wide(json!({"type": "integer"}), "p1"), wide(array.clone(), "p2")]}),
        json!({"oneOf": [wide(json!({"enum": ["a", 1]}), "p1"), wide(json!({"type": "object"}), "p2")]}),
        json!({"type": "array", "items": {"anyOf": [wide(json!({"type": "integer"}), "p1"), wide(array, "p2")]}}),
    ];
    for schema in cases {
        let err = engine.compile_json_schema(&schema, &options).err().unwrap();
        assert_eq!(err.kind(), CompileErrorKind::Limit, "{err}");
    }
}

/// Zero is written `0` or `-0` by the grammar: a discriminator listing `0` keeps its variants
/// for either (once read raw, `-0` matched no list and the object could not close).
#[test]
fn a_discriminator_of_zero_written_negative() {
    let v = |k: i64, extra: &str| {
        object(
            json!({"k": {"const": k}, extra: {"type": "integer"}}),
            json!(["k"]),
            json!(false),
        )
    };
    let union = json!({"anyOf": [v(0, "a"), v(1, "b")]});
    verdicts_agree(
        &union,
        &[
            "{\"k\":-0}",
            "{\"k\":-0,\"a\":1}",
            "{\"a\":1,\"k\":-0}",
            "{\"k\":-0,\"b\":1}",
            "{\"k\":-1}",
        ],
    );
    agree(&union, 100, 30, 170);
}

/// As many variants as a group holds, and one more (the objects then share a `2^n` grammar).
#[test]
fn sixty_four_variants_and_sixty_five() {
    for n in [64, 65] {
        let branches: Vec<Value> = (0..n)
            .map(|i| {
                object(
                    json!({format!("a{i}"): {"type": "integer"}, "a": {"type": "integer"}}),
                    json!([format!("a{i}")]),
                    json!(false),
                )
            })
            .collect();
        agree(&json!({"anyOf": branches}), 40, 30, 180 + n);
    }
}

/// Undeclared names routed by patterns, written with escapes: the tracker routes the decoded
/// name, the grammar matches patterns against what it admits.
#[test]
fn patterned_names_written_with_escapes() {
    let item = object(
        json!({"b": {"type": "integer"}}),
        json!(["b"]),
        json!(false),
    );
    let schema = json!({
        "type": "object",
        "properties": {"k": {"type": "integer"}},
        "patternProperties": {"^a": item, "^x": {"type": "integer"}},
        "additionalProperties": {"type": "object"}
    });
    verdicts_agree(
        &schema,
        &[
            "{\"\\u0061\":{\"b\":1}}",
            "{\"\\u0061\":{\"c\":1}}",
            "{\"\\u0061b\":{}}",
            "{\"a\\u0062\":{}}",
            "{\"\\u0078\":{}}",
            "{\"\\u0078\":1}",
            "{\"\\u006b\":{}}",
            "{\"\\u006b\":1}",
        ],
    );
}

/// Schema dependencies that give a name another value, and unions of one key set that differ
/// only in the undeclared names' values: no discriminator, so the `2^n` grammar.
#[test]
fn dependencies_changing_a_value_and_unions_differing_on_undeclared_values() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "dependencies": {"a": {"properties": {"b": {"const": 1}}}},
        "additionalProperties": false
    });
    agree(&schema, 80, 30, 190);
    let v = |additional: Value| {
        json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "patternProperties": {"^x$": additional},
            "additionalProperties": false
        })
    };
    let union = json!({"anyOf": [v(json!({"type": "integer"})), v(json!({"type": "boolean"}))]});
    agree(&union, 80, 30, 191);
    let d = |k: &str, additional: Value| {
        json!({
            "type": "object",
            "properties": {"k": {"const": k}, "a": {"type": "integer"}},
            "patternProperties": {"^x$": additional},
            "required": ["k"],
            "additionalProperties": false
        })
    };
    let told =
        json!({"anyOf": [d("a", json!({"type": "integer"})), d("b", json!({"type": "boolean"}))]});
    agree(&told, 100, 30, 192);
}

/// `allOf` of objects, an object that must be empty, and `minProperties` no declared name can
/// reach without undeclared ones.
#[test]
fn all_of_and_empty_objects() {
    let schema = json!({
        "allOf": [
            {"type": "object", "properties": {"a": {"type": "integer"}, "ab": {"type": "integer"}}, "required": ["a"]},
            {"type": "object", "properties": {"ab": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["b"]}
        ],
        "additionalProperties": false
    });
    let engine = Engine::new(vocab());
    if engine.compile_json_schema(&schema, &any_order()).is_ok() {
        agree(&schema, 80, 30, 200);
    }
    let empty =
        json!({"type": "object", "properties": {"a": {"type": "integer"}}, "maxProperties": 0});
    agree(&empty, 30, 10, 201);
    let unreachable = object(json!({"a": {"type": "integer"}}), json!([]), json!(false));
    let mut unreachable = unreachable;
    unreachable["minProperties"] = json!(2);
    let (a, b) = (
        compile_schema_with(&unreachable, &any_order(), &Limits::new())
            .map(|_| ())
            .map_err(|e| e.kind()),
        engine
            .compile_json_schema(&unreachable, &any_order())
            .map(|_| ())
            .map_err(|e| e.kind()),
    );
    assert_eq!(a, b);
}

/// Places reached in more than one way: items of arrays in a union (each array's items are
/// all of one branch), tuples whose items differ by index, and a name whose object differs
/// by branch.
#[test]
fn places_reached_by_several_branches() {
    let arrays = json!({"anyOf": [
        {"type": "array", "items": kind("a"), "maxItems": 3},
        {"type": "array", "items": kind("b"), "maxItems": 3}
    ]});
    verdicts_agree(
        &arrays,
        &["[{\"a\":1},{\"b\":1}]", "[{\"a\":1},{\"a\":1,\"b\":2}]"],
    );
    agree(&arrays, 100, 40, 210);
}

#[test]
fn tuples_of_objects_by_index() {
    let tuple = json!({"type": "array", "prefixItems": [kind("a"), kind("b")], "items": false});
    let engine = Engine::new(vocab());
    if engine.compile_json_schema(&tuple, &any_order()).is_ok() {
        verdicts_agree(&tuple, &["[{\"b\":1},{\"a\":1}]", "[{\"a\":1},{\"b\":1}]"]);
        agree(&tuple, 100, 40, 211);
    }
}

#[test]
fn a_union_of_objects_whose_members_are_objects_of_the_branch() {
    let outer = |req: &str| {
        object(
            json!({"p": kind(req), "q": kind(req)}),
            json!(["p", "q"]),
            json!(false),
        )
    };
    let pairs = json!({"anyOf": [outer("a"), outer("b")]});
    verdicts_agree(
        &pairs,
        &[
            "{\"p\":{\"a\":1},\"q\":{\"b\":1}}",
            "{\"q\":{\"b\":1},\"p\":{\"b\":1}}",
        ],
    );
    agree(&pairs, 100, 40, 212);
}

/// Numbers as discriminators around white space, and tokens ending a scalar and writing the
/// next name.
#[test]
fn number_discriminators_with_flexible_whitespace() {
    let options = any_order().whitespace(Whitespace::Flexible { max_run: Some(2) });
    let v = |k: Value, extra: &str| {
        object(
            json!({"k": {"enum": k}, extra: {"type": "integer"}, "ab": {"type": "integer"}}),
            json!(["k", extra]),
            json!(false),
        )
    };
    let union = json!({"anyOf": [v(json!([0, -1, 10]), "a"), v(json!([1, -10, 18446744073709551615u64]), "b")]});
    agree_with(&union, &options, 150, 40, 220);
    agree(&union, 150, 40, 221);
}

/// Patterns on names with quotes, backslashes and non-ASCII letters, the names written with
/// and without escapes.
#[test]
fn patterns_on_names_that_need_escapes() {
    let item = object(
        json!({"b": {"type": "integer"}}),
        json!(["b"]),
        json!(false),
    );
    let schema = json!({
        "type": "object",
        "patternProperties": {"\"": item, "é": {"type": "integer"}, "\\\\$": {"type": "boolean"}},
        "additionalProperties": false
    });
    verdicts_agree(
        &schema,
        &[
            "{\"a\\\"\":{\"b\":1}}",
            "{\"a\\u0022\":{\"b\":1}}",
            "{\"a\\u0022\":{}}",
            "{\"\\u00e9\":1}",
            "{\"é\":1}",
            "{\"x\\\\\":true}",
            "{\"x\\u005c\":true}",
            "{\"x\\u005C\":{}}",
        ],
    );
    agree(&schema, 100, 40, 230);
}

/// Required names that are prefixes of the only undeclared names left under `maxProperties`.
#[test]
fn max_properties_leaving_room_for_required_prefixes() {
    let schema = json!({
        "type": "object",
        "properties": {"ab": {"type": "integer"}, "abc": {"type": "integer"}},
        "patternProperties": {"^a": {"type": "integer"}},
        "required": ["ab"],
        "maxProperties": 2,
        "additionalProperties": false
    });
    agree(&schema, 120, 40, 240);
    let one = json!({
        "type": "object",
        "properties": {"ab": {"type": "integer"}, "a": {"type": "integer"}},
        "required": ["abc"],
        "maxProperties": 1,
        "additionalProperties": {"type": "integer"}
    });
    agree(&one, 120, 40, 241);
}

/// One branch's items may be either object, the other's only one: the items of the second
/// must not take the first's other object.
#[test]
fn arrays_whose_items_are_a_union_beside_arrays_of_one_object() {
    let union = json!({"anyOf": [kind("a"), kind("b")]});
    let arrays = json!({"anyOf": [
        {"type": "array", "items": union.clone(), "minItems": 1, "maxItems": 2},
        {"type": "array", "items": kind("a"), "maxItems": 3}
    ]});
    agree(&arrays, 100, 40, 250);
    let tuple =
        json!({"type": "array", "prefixItems": [union.clone()], "items": kind("b"), "maxItems": 3});
    agree(&tuple, 100, 40, 251);
    // A tuple of the union at every index: the variants are each item's own choice.
    let same =
        json!({"type": "array", "prefixItems": [union.clone()], "items": union, "maxItems": 3});
    agree(&same, 100, 40, 252);
}

/// More patterns than the names are told apart by (no classes): the values of every pattern
/// share the place of undeclared names.
#[test]
fn many_patterns_with_objects_of_other_key_sets() {
    let mut patterns = serde_json::Map::new();
    patterns.insert("^a".into(), kind("a"));
    patterns.insert("^b".into(), kind("b"));
    for i in 0..8 {
        patterns.insert(format!("^z{i}$"), json!({"type": "integer"}));
    }
    let schema = json!({
        "type": "object",
        "patternProperties": patterns,
        "additionalProperties": false,
        "maxProperties": 1
    });
    verdicts_agree(
        &schema,
        &[
            "{\"a\":{\"b\":1}}",
            "{\"b\":{\"a\":1}}",
            "{\"a\":{\"a\":1}}",
        ],
    );
}

/// Variants whose undeclared names take other values by pattern: which variant a value keeps
/// is the grammar's to know, so the names may not tell the variants apart alone.
#[test]
fn variants_whose_patterns_give_other_values() {
    let v = |pattern: Value, additional: Value, req: &str| {
        json!({
            "type": "object",
            "properties": {"r1": {"type": "integer"}, "r2": {"type": "integer"}},
            "patternProperties": {"^x": pattern},
            "required": [req],
            "additionalProperties": additional
        })
    };
    let union = json!({"anyOf": [
        v(json!({"type": "integer"}), json!(false), "r1"),
        v(json!({"type": "string"}), json!(false), "r2")
    ]});
    verdicts_agree(
        &union,
        &[
            "{\"x1\":1,\"r2\":1}",
            "{\"r2\":1,\"x\":1}",
            "{\"x\":\"s\",\"r2\":1}",
        ],
    );
    let swapped = json!({"anyOf": [
        v(json!({"type": "integer"}), json!({"type": "string"}), "r1"),
        v(json!({"type": "string"}), json!({"type": "integer"}), "r2")
    ]});
    verdicts_agree(
        &swapped,
        &[
            "{\"x1\":1,\"r2\":1}",
            "{\"r2\":1,\"y\":\"s\"}",
            "{\"r2\":1,\"x\":1}",
        ],
    );
}

/// Variants that differ in their bounds on the count of members, one of them open (at most one
/// undeclared name, so none written twice).
#[test]
fn variants_with_other_property_counts() {
    let props =
        json!({"a": {"type": "integer"}, "ab": {"type": "integer"}, "b": {"type": "integer"}});
    let union = json!({"anyOf": [
        {"type": "object", "properties": props, "required": ["ab"], "maxProperties": 2, "additionalProperties": false},
        {"type": "object", "properties": props, "maxProperties": 1, "additionalProperties": {"type": "integer"}},
        {"type": "object", "properties": props, "minProperties": 3, "additionalProperties": false}
    ]});
    agree(&union, 150, 40, 260);
}

/// A discriminated union whose other name holds objects of other key sets by variant; a
/// constant object beside an object in any order; a discriminator that starts another name,
/// and one a variant declares `false`.
#[test]
fn discriminators_beside_objects_constants_and_absent_names() {
    let v = |k: &str, req: &str| {
        object(
            json!({"k": {"const": k}, "p": kind(req)}),
            json!(["k"]),
            json!(false),
        )
    };
    let nested = json!({"anyOf": [v("a", "a"), v("b", "b")]});
    verdicts_agree(
        &nested,
        &[
            "{\"k\":\"a\",\"p\":{\"b\":1}}",
            "{\"p\":{\"b\":1},\"k\":\"b\"}",
        ],
    );
    agree(&nested, 100, 40, 270);
    let constant = json!({"anyOf": [{"const": {"a": 1, "b": 2}}, kind("a")]});
    agree(&constant, 100, 30, 271);
    let prefixes = json!({"anyOf": [
        object(json!({"k": {"const": "a"}, "kk": {"type": "integer"}}), json!(["k"]), json!(false)),
        object(json!({"k": {"const": "b"}, "k\"": {"type": "integer"}}), json!(["k\""]), json!(false)),
        object(json!({"k": false, "kk": {"type": "integer"}, "a": {"type": "integer"}}), json!(["a"]), json!(false))
    ]});
    agree(&prefixes, 150, 40, 272);
}

/// Arrays of two objects past the `2^n` limit in a union: each array's objects are its own,
/// so no group holds them and the grammar cannot: a typed error.
#[test]
fn arrays_of_wide_objects_in_a_union_are_typed_errors() {
    let wide = |required: &str| -> Value {
        let props: serde_json::Map<String, Value> = (0..14)
            .map(|i| (format!("p{i}"), json!({"type": "integer"})))
            .collect();
        object(Value::Object(props), json!([required]), json!(false))
    };
    let schema = json!({"anyOf": [
        {"type": "array", "items": wide("p1")},
        {"type": "array", "items": wide("p2")}
    ]});
    let engine = Engine::new(vocab());
    let options = JsonSchemaOptions::new().property_order(PropertyOrder::Any);
    let err = engine.compile_json_schema(&schema, &options).err().unwrap();
    assert_eq!(err.kind(), CompileErrorKind::Limit, "{err}");
}

/// Places two branches share, with white space between tokens.
#[test]
fn places_reached_by_several_branches_with_flexible_whitespace() {
    let options = any_order().whitespace(Whitespace::Flexible { max_run: Some(1) });
    let kind = |req: &str| {
        object(
            json!({"a": {"type": "integer"}, "ab": {"type": "integer"}, "b": {"type": "integer"}}),
            json!([req]),
            json!(false),
        )
    };
    let schema = json!({"anyOf": [
        {"type": "array", "items": {"anyOf": [kind("a"), kind("b")]}, "maxItems": 2},
        {"type": "array", "items": kind("ab"), "maxItems": 2},
        object(json!({"p": kind("a"), "q": kind("b")}), json!([]), json!(false))
    ]});
    agree_with(&schema, &options, 120, 50, 280);
}

/// A discriminator one variant declares and another admits as an undeclared name (its
/// additional values a list), and a name one variant declares `false` that another admits
/// undeclared (at most one undeclared name, so none written twice).
#[test]
fn discriminators_and_absent_names_admitted_as_undeclared() {
    let union = json!({"anyOf": [
        object(json!({"k": {"const": "a"}, "x": {"type": "integer"}}), json!(["k"]), json!(false)),
        object(json!({"x": {"type": "integer"}}), json!([]), json!({"enum": ["b", 1]}))
    ]});
    verdicts_agree(
        &union,
        &[
            "{\"k\":\"b\"}",
            "{\"k\":\"a\"}",
            "{\"k\":1,\"x\":1}",
            "{\"x\":1,\"z\":\"b\"}",
            "{\"z\":\"a\"}",
            "{\"k\":\"a\",\"z\":1}",
            "{\"z\":1,\"k\":\"a\"}",
        ],
    );
    let absent = json!({"anyOf": [
        {"type": "object", "properties": {"k": false, "a": {"type": "integer"}}, "required": ["a"], "additionalProperties": false},
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"], "maxProperties": 2, "additionalProperties": {"type": "integer"}}
    ]});
    agree(&absent, 120, 30, 290);
}

/// A closed object over names that start one another (`a`, `ab`, `b`, `k`), each absent,
/// optional or required at random, its values from `value`.
fn random_closed(
    rng: &mut formwork_testkit::rng::Rng,
    depth: u32,
    value: fn(&mut formwork_testkit::rng::Rng, u32) -> Value,
) -> Value {
    let mut props = serde_json::Map::new();
    let mut required = Vec::new();
    for name in ["a", "ab", "b", "k"] {
        match rng.below(4) {
            0 => {}
            1 => {
                props.insert(name.into(), value(rng, depth));
                required.push(name);
            }
            _ => {
                props.insert(name.into(), value(rng, depth));
            }
        }
    }
    object(Value::Object(props), json!(required), json!(false))
}

/// Random schemas of objects over names that start one another (`a`, `ab`, `b`, `k`), in
/// unions, arrays and tuples, with discriminators (lists, and strings and integers read by
/// automata), bounds on counts and nested objects: what
/// the hand-written cases above do not think of. Closed, or open with room for one member,
/// so no undeclared name repeats (which the engine refuses and the `2^n` grammar takes).
#[test]
fn random_schemas_agree_with_the_2n_grammar() {
    use formwork_testkit::rng::Rng;

    fn value(rng: &mut Rng, depth: u32) -> Value {
        let first = [
            json!("a"),
            json!("b"),
            json!(0),
            json!(1),
            json!(true),
            json!(null),
        ];
        let second = [json!("b"), json!(1), json!(-1), json!(false)];
        let (x, y) = (first[rng.below(6)].clone(), second[rng.below(4)].clone());
        let c = first[rng.below(4)].clone();
        match rng.below(if depth == 0 { 6 } else { 10 }) {
            0 => json!({"type": "integer"}),
            1 => json!({"type": "boolean"}),
            2 => json!({"enum": [x, y]}),
            3 => json!({"const": c}),
            // Values told apart by their automata (see `keys`).
            4 => json!({"type": "string", "maxLength": 1}),
            5 => json!({"type": ["string", "integer"], "pattern": "^a+$", "minimum": 1}),
            6 | 7 => shape(rng, depth - 1),
            8 => json!({"type": "array", "items": shape(rng, depth - 1), "maxItems": 2}),
            _ => {
                json!({"type": "array", "prefixItems": [shape(rng, depth - 1)], "items": shape(rng, depth - 1), "maxItems": 2})
            }
        }
    }

    fn closed(rng: &mut Rng, depth: u32) -> Value {
        let mut o = random_closed(rng, depth, value);
        if rng.below(4) == 0 {
            o["maxProperties"] = json!(1 + rng.below(3));
        }
        if rng.below(4) == 0 {
            o["minProperties"] = json!(rng.below(3));
        }
        if rng.below(5) == 0 {
            // Open, but room for one member only: no undeclared name written twice.
            o["additionalProperties"] = json!({"type": "integer"});
            o["maxProperties"] = json!(1);
        }
        o
    }

    fn shape(rng: &mut Rng, depth: u32) -> Value {
        match rng.below(3) {
            0 => closed(rng, depth),
            _ => {
                let n = 2 + rng.below(2);
                let branches: Vec<Value> = (0..n).map(|_| closed(rng, depth)).collect();
                let union = ["anyOf", "oneOf"][rng.below(2)];
                json!({union: branches})
            }
        }
    }

    let engine = Engine::new(vocab());
    let mut rng = Rng::new(300);
    let mut tried = 0;
    for case in 0..250 {
        let schema = shape(&mut rng, 2);
        let Ok(grammar) = compile_schema_with(&schema, &any_order(), &Limits::new()) else {
            continue;
        };
        let Ok(exact) = engine.compile_grammar(&grammar.grammar) else {
            continue;
        };
        let kept = match engine.compile_json_schema(&schema, &any_order()) {
            Ok(kept) => kept,
            Err(err) => panic!("case {case}: {err} for {schema}"),
        };
        tried += 1;
        if let Some(msg) = walks_differ(&engine, &exact.matcher(), &kept.matcher(), 300 + case) {
            panic!("case {case}: {schema}\n{msg}");
        }
    }
    assert!(tried > 150, "{tried} schemas compiled");
}

/// A variant `maxProperties` drops (its count reached, or room left only for its required
/// names) whose discriminator's value the grammar, counting nothing, still takes: the first
/// bytes of that value were in the mask, and a token writing it whole too, though refused
/// once consumed.
#[test]
fn discriminators_of_variants_dropped_by_max_properties() {
    let x = object(
        json!({"a": {"type": "integer"}, "b": {"const": 0}, "k": {"type": "integer"}}),
        json!(["b", "k"]),
        json!(false),
    );
    let mut y = object(
        json!({"a": {"type": "integer"}, "b": {"enum": ["a", "b"]}, "k": {"type": "integer"}}),
        json!(["b"]),
        json!(false),
    );
    y["maxProperties"] = json!(1);
    let union = json!({"anyOf": [x.clone(), y]});
    masks_agree_after(
        &union,
        b"{\"a\":91,\"k\":1,\"b\":",
        "after a count that drops a variant",
    );
    agree(&union, 100, 30, 295);
    // Room left only for a required name that another variant's value discriminates.
    let v = |k: &str, req: &str| {
        let mut o = object(
            json!({"a": {"type": "integer"}, "r1": {"enum": [k]}, "r2": {"type": "integer"}}),
            json!([req]),
            json!(false),
        );
        o["maxProperties"] = json!(2);
        o
    };
    let required = json!({"anyOf": [v("p", "r1"), v("q", "r2")]});
    masks_agree_after(
        &required,
        b"{\"a\":1,\"r1\":",
        "after room left only for the required names",
    );
    agree(&required, 100, 30, 296);
}

/// A declared name whose value no object satisfies (more required names than
/// `maxProperties`) can only be absent: held as an optional name, its first byte was in the
/// mask (as the start of a longer name the grammar still had), where the `2^n` grammar had
/// none.
#[test]
fn names_whose_values_are_empty_can_only_be_absent() {
    let mut empty = object(
        json!({"b": {"type": "integer"}, "k": {"type": "integer"}}),
        json!(["b", "k"]),
        json!(false),
    );
    empty["maxProperties"] = json!(1);
    let schema = object(
        json!({"a": empty, "ab": {"type": "integer"}, "b": {"type": "integer"}}),
        json!([]),
        json!(false),
    );
    masks_agree_after(
        &schema,
        b"{\"ab\":1,\"",
        "after the name that starts the valueless one",
    );
    agree(&schema, 80, 30, 297);
}

/// A discriminator one variant declares and another admits as an undeclared name routed by
/// patterns (every name admitted, its value by the patterns it matches): the second's test
/// must read the value alone, not the member (name and value) the undeclared names are
/// lowered as.
#[test]
fn discriminators_undeclared_in_a_variant_with_patterns() {
    let declared = object(
        json!({"k": {"const": "a"}, "a": {"type": "integer"}}),
        json!(["k"]),
        json!(false),
    );
    let patterned = json!({
        "type": "object",
        "properties": {"x": {"type": "integer"}},
        "patternProperties": {"^z": {"type": "integer"}},
        "required": ["x"],
        "additionalProperties": {"type": "string"}
    });
    let union = json!({"anyOf": [declared, patterned]});
    masks_agree_after(
        &union,
        b"{\"k\":\"a\",\"",
        "after a value both variants admit",
    );
    verdicts_agree(
        &union,
        &[
            "{\"k\":\"a\",\"x\":1}",
            "{\"k\":\"b\",\"x\":1}",
            "{\"x\":1,\"k\":\"a\"}",
            "{\"k\":\"a\",\"a\":1}",
            "{\"k\":\"a\"}",
        ],
    );
}

/// A closed object whose `k` is `k`, beside integers `a`, `b`, `x` and `ab`, requiring
/// `required`: variants told apart by `k` alone.
fn keyed_by(k: Value, required: Value) -> Value {
    let int = json!({"type": "integer"});
    object(
        json!({"k": k, "a": int, "b": int, "x": int, "ab": int}),
        required,
        json!(false),
    )
}

/// Strings a pattern's automaton reads as written: escapes of the letters the pattern names,
/// of quotes, backslashes and slashes, and non-ASCII letters.
#[test]
fn automata_read_strings_with_escapes() {
    let v = |k: Value, req: &str| keyed_by(k, json!(["k", req]));
    let union = json!({"anyOf": [
        v(json!({"type": "string", "pattern": "^a$"}), "a"),
        v(json!({"type": "string", "pattern": "^[\"\\\\/é]+$"}), "b"),
        v(json!({"type": "string", "maxLength": 0}), "x")
    ]});
    verdicts_agree(
        &union,
        &[
            "{\"k\":\"\\u0061\",\"a\":1}",
            "{\"k\":\"\\u0061\",\"b\":1}",
            "{\"k\":\"\\\"\\\\\\/\",\"b\":1}",
            "{\"k\":\"\\u00e9\",\"b\":1}",
            "{\"k\":\"é/\",\"b\":1}",
            "{\"k\":\"\",\"x\":1}",
            "{\"k\":\"\",\"a\":1}",
            "{\"a\":1,\"k\":\"\\u0061\"}",
        ],
    );
    masks_agree_after(&union, b"{\"k\":\"\\u0061\",\"", "after an escaped letter");
    masks_agree_after(&union, b"{\"k\":\"\\\"\",\"", "after an escaped quote");
    agree(&union, 100, 30, 400);
}

/// Numbers a variant bounds beside numbers another bounds otherwise: zero written `-0`,
/// fractions and exponents of integers.
#[test]
fn automata_of_bounded_numbers() {
    let v = |k: Value, req: &str| keyed_by(k, json!(["k", req]));
    let union = json!({"anyOf": [
        v(json!({"type": "integer", "minimum": 0, "maximum": 9}), "a"),
        v(json!({"type": "number", "exclusiveMaximum": 0}), "b"),
        v(json!({"type": "integer", "multipleOf": 5, "minimum": -20, "maximum": 20}), "x")
    ]});
    verdicts_agree(
        &union,
        &[
            "{\"k\":-0,\"a\":1}",
            "{\"k\":-0,\"b\":1}",
            "{\"k\":-0,\"x\":1}",
            "{\"k\":0,\"x\":1}",
            "{\"k\":1.0,\"a\":1}",
            "{\"k\":1e0,\"a\":1}",
            "{\"k\":-0.5,\"b\":1}",
            "{\"k\":-1e-3,\"b\":1}",
            "{\"k\":-0.0,\"b\":1}",
            "{\"k\":5,\"x\":1}",
            "{\"k\":5,\"a\":1}",
            "{\"k\":-5,\"b\":1}",
            "{\"k\":-5,\"x\":1}",
            "{\"k\":10,\"x\":1}",
        ],
    );
    masks_agree_after(&union, b"{\"k\":-0,\"", "after -0");
    masks_agree_after(&union, b"{\"k\":-5,\"", "after -5");
    agree(&union, 100, 30, 401);
}

/// Types mixed: a string or null, a boolean, a list of a string and numbers (one not an
/// integer, so no list the matcher reads), a value of every kind.
#[test]
fn automata_beside_lists_and_every_value() {
    let v = |k: Value, req: &str| keyed_by(k, json!([req]));
    let union = json!({"anyOf": [
        v(json!({"type": ["string", "null"], "maxLength": 1}), "a"),
        v(json!({"type": "boolean"}), "b"),
        v(json!({"enum": ["a", 1, 1.5, null]}), "x"),
        v(json!({}), "ab")
    ]});
    verdicts_agree(
        &union,
        &[
            "{\"k\":null,\"a\":1}",
            "{\"k\":null,\"x\":1}",
            "{\"k\":null,\"b\":1}",
            "{\"k\":1.5,\"x\":1}",
            "{\"k\":1.50,\"x\":1}",
            "{\"k\":15e-1,\"x\":1}",
            "{\"k\":\"a\",\"x\":1}",
            "{\"k\":\"\\u0061\",\"x\":1}",
            "{\"k\":\"a\",\"a\":1}",
            "{\"k\":true,\"b\":1}",
            "{\"k\":[1],\"ab\":1}",
            "{\"k\":{\"a\":1},\"ab\":1}",
            "{\"k\":{\"a\":1},\"a\":1}",
        ],
    );
    masks_agree_after(&union, b"{\"k\":1.5,\"", "after a listed fraction");
    masks_agree_after(&union, b"{\"k\":[1],\"", "after an array");
    agree(&union, 120, 30, 402);
    let flexible = any_order().whitespace(Whitespace::Flexible { max_run: Some(2) });
    agree_with(&union, &flexible, 120, 30, 403);
}

/// Formats as differing values.
#[test]
fn formats_as_discriminators() {
    let v = |k: Value, req: &str| keyed_by(k, json!(["k", req]));
    let union = json!({"anyOf": [
        v(json!({"type": "string", "format": "date"}), "a"),
        v(json!({"type": "string", "format": "uuid"}), "b"),
        v(json!({"type": "string", "format": "email"}), "x")
    ]});
    let engine = Engine::new(vocab());
    if engine.compile_json_schema(&union, &any_order()).is_ok() {
        verdicts_agree(
            &union,
            &[
                "{\"k\":\"2020-01-01\",\"a\":1}",
                "{\"k\":\"2020-01-01\",\"b\":1}",
                "{\"k\":\"a@b.c\",\"x\":1}",
                "{\"k\":\"\\u0061@b.c\",\"x\":1}",
            ],
        );
        agree(&union, 60, 40, 404);
    }
}

/// Strings whose length the matcher may count beside strings an automaton reads.
#[test]
fn counted_strings_beside_automata() {
    let v = |k: Value, req: &str| {
        object(
            json!({"k": k, "a": {"type": "integer"}, "b": {"type": "integer"}}),
            json!(["k", req]),
            json!(false),
        )
    };
    for (i, long) in [
        json!({"type": "string", "pattern": "^[a-c]*$", "maxLength": 300}),
        json!({"type": "string", "minLength": 3, "maxLength": 700}),
        json!({"type": "string", "pattern": "^(ab|b)*$", "minLength": 2}),
    ]
    .into_iter()
    .enumerate()
    {
        let union = json!({"anyOf": [
            v(long, "a"),
            v(json!({"type": "string", "pattern": "^b+$", "maxLength": 2}), "b")
        ]});
        let engine = Engine::new(vocab());
        let Ok(_) = engine.compile_json_schema(&union, &any_order()) else {
            continue;
        };
        verdicts_agree(
            &union,
            &[
                "{\"k\":\"b\",\"a\":1}",
                "{\"k\":\"bb\",\"a\":1}",
                "{\"k\":\"bbb\",\"a\":1}",
                "{\"k\":\"bb\",\"b\":1}",
                "{\"k\":\"ab\",\"b\":1}",
            ],
        );
        masks_agree_after(&union, b"{\"k\":\"b\",\"", "after one b");
        agree(&union, 60, 30, 405 + i as u64);
    }
}

/// A discriminator one variant declares and another admits undeclared (no patterns), its
/// value read by the automaton of the additional values; and two discriminators at once.
#[test]
fn discriminators_undeclared_without_patterns_and_two_at_once() {
    let declared = object(
        json!({"k": {"const": "x"}, "b": {"type": "integer"}}),
        json!(["k"]),
        json!(false),
    );
    let open = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}},
        "required": ["a"],
        "additionalProperties": {"type": "integer", "minimum": 0}
    });
    let union = json!({"anyOf": [declared, open]});
    verdicts_agree(
        &union,
        &[
            "{\"k\":1,\"a\":1}",
            "{\"k\":-1,\"a\":1}",
            "{\"k\":\"x\",\"a\":1}",
            "{\"k\":\"x\",\"b\":1}",
            "{\"a\":1,\"k\":\"\\u0078\"}",
            "{\"a\":1,\"k\":0}",
        ],
    );
    masks_agree_after(&union, b"{\"k\":1,\"", "after an undeclared value");
    masks_agree_after(&union, b"{\"k\":\"x\",\"", "after the listed value");
    let v = |k: Value, j: Value, req: &str| {
        object(
            json!({"k": k, "j": j, "a": {"type": "integer"}, "b": {"type": "integer"}}),
            json!([req]),
            json!(false),
        )
    };
    let two = json!({"anyOf": [
        v(json!({"const": "a"}), json!({"type": "string", "maxLength": 1}), "a"),
        v(json!({"type": "string", "pattern": "^a"}), json!({"type": "integer"}), "b")
    ]});
    verdicts_agree(
        &two,
        &[
            "{\"k\":\"a\",\"j\":1,\"a\":1}",
            "{\"k\":\"a\",\"j\":1,\"b\":1}",
            "{\"j\":\"\",\"k\":\"ab\",\"b\":1}",
            "{\"j\":\"\",\"k\":\"a\",\"a\":1}",
        ],
    );
    agree(&two, 100, 30, 410);
}

/// Listed strings written with escapes the lists do not spell: a surrogate pair, a newline,
/// upper-case hexadecimal digits.
#[test]
fn listed_strings_written_with_surrogates_and_control_escapes() {
    let v = |k: &str, req: &str| {
        object(
            json!({"k": {"const": k}, "a": {"type": "integer"}, "b": {"type": "integer"}}),
            json!(["k", req]),
            json!(false),
        )
    };
    let union = json!({"anyOf": [v("😀", "a"), v("\n", "b")]});
    verdicts_agree(
        &union,
        &[
            "{\"k\":\"😀\",\"a\":1}",
            "{\"k\":\"\\ud83d\\ude00\",\"a\":1}",
            "{\"k\":\"\\uD83D\\uDE00\",\"a\":1}",
            "{\"k\":\"\\n\",\"b\":1}",
            "{\"k\":\"\\u000a\",\"b\":1}",
            "{\"k\":\"\\u000A\",\"b\":1}",
            "{\"k\":\"\\u000A\",\"a\":1}",
        ],
    );
    let pattern = json!({"anyOf": [
        object(json!({"k": {"type": "string", "pattern": "^\\p{L}$"}, "a": {"type": "integer"}}), json!(["k", "a"]), json!(false)),
        object(json!({"k": {"type": "string", "pattern": "^\\d$"}, "b": {"type": "integer"}}), json!(["k", "b"]), json!(false))
    ]});
    let engine = Engine::new(vocab());
    if engine.compile_json_schema(&pattern, &any_order()).is_ok() {
        verdicts_agree(
            &pattern,
            &[
                "{\"k\":\"é\",\"a\":1}",
                "{\"k\":\"\\u00e9\",\"a\":1}",
                "{\"k\":\"1\",\"b\":1}",
                "{\"k\":\"\\u0031\",\"b\":1}",
                "{\"k\":\"\\u0031\",\"a\":1}",
            ],
        );
        agree(&pattern, 60, 30, 411);
    }
}

/// A listed string written with an escape where another variant's value (a pattern, every
/// string, every value) takes that spelling: the grammar spells the list's string one way
/// only (`"a"`, never `"\u0061"`), so the escaped spelling keeps only the other variant; the
/// matcher, comparing the decoded string with the list, kept both, and let the object close
/// with the listed variant's required names.
#[test]
fn listed_strings_escaped_beside_values_that_take_escapes() {
    let props = |k: Value| json!({"k": k, "a": {"type": "integer"}, "b": {"type": "integer"}});
    for other in [
        json!({"type": "string", "pattern": "^a"}),
        json!({"type": "string"}),
        json!({}),
    ] {
        let union = json!({"anyOf": [
            object(props(json!({"const": "a"})), json!(["a"]), json!(false)),
            object(props(other), json!(["b"]), json!(false))
        ]});
        masks_agree_after(
            &union,
            b"{\"k\":\"\\u0061\",\"a\":",
            "after an escaped listed string",
        );
        verdicts_agree(
            &union,
            &[
                "{\"k\":\"\\u0061\",\"a\":1}",
                "{\"k\":\"\\u0061\",\"b\":1}",
                "{\"k\":\"a\",\"a\":1}",
            ],
        );
    }
    // Other spellings the grammar does not give a list's string: `\/`, a non-ASCII letter
    // escaped, an escaped quote written `\u0022`.
    for (listed, escaped) in [("/", "\\/"), ("é", "\\u00e9"), ("\"", "\\u0022")] {
        let union = json!({"anyOf": [
            object(props(json!({"const": listed})), json!(["a"]), json!(false)),
            object(props(json!({"type": "string"})), json!(["b"]), json!(false))
        ]});
        let text = format!("{{\"k\":\"{escaped}\",\"a\":1}}");
        verdicts_agree(&union, &[&text]);
    }
}

/// Random unions of objects, mostly closed, whose members' values differ in every way the
/// matcher tests them (lists, every value, automata of strings, numbers, formats, mixed
/// types, arrays, objects of their own key sets, strings whose characters it counts), beside `dependentSchemas` giving a name
/// another value and `oneOf` of required names, in compact and flexible white space.
/// Failures are collected so one run shows them all.
#[test]
fn random_differing_values_agree_with_the_2n_grammar() {
    use formwork_testkit::rng::Rng;

    fn value(rng: &mut Rng, depth: u32) -> Value {
        let pool = [
            json!({"type": "integer"}),
            json!({"type": "boolean"}),
            json!({"const": "a"}),
            json!({"const": 1}),
            json!({"enum": ["b", 0, null]}),
            json!({}),
            json!({"type": "string"}),
            json!({"type": "string", "maxLength": 1}),
            json!({"type": "number", "maximum": 0}),
            json!({"type": ["string", "null"], "pattern": "^a"}),
            json!({"type": "integer", "minimum": 1, "maximum": 12}),
            json!({"type": ["integer", "boolean"]}),
            json!({"enum": [1.5, "a"]}),
            json!({"type": "number", "multipleOf": 0.5, "exclusiveMinimum": -1, "maximum": 2}),
            json!({"type": "string", "format": "date"}),
            json!({"type": ["string", "boolean"], "minLength": 1, "maxLength": 2}),
            // Past an automaton of the value: its characters counted.
            json!({"type": "string", "minLength": 1, "maxLength": 300}),
        ];
        match rng.below(if depth == 0 { 17 } else { 20 }) {
            i if i < 17 => pool[i].clone(),
            17 | 18 => shape(rng, depth - 1),
            _ => json!({"type": "array", "items": shape(rng, depth - 1), "maxItems": 2}),
        }
    }

    fn closed(rng: &mut Rng, depth: u32) -> Value {
        let mut o = random_closed(rng, depth, value);
        if rng.below(5) == 0 {
            o["minProperties"] = json!(rng.below(3));
        }
        if rng.below(4) == 0 {
            let names = ["a", "ab", "b", "k"];
            let (x, y) = (names[rng.below(4)], names[rng.below(4)]);
            let v = value(rng, 0);
            o["dependentSchemas"] = json!({x: {"properties": {y: v}}});
        }
        if rng.below(5) == 0 {
            o["oneOf"] = json!([{"required": ["a"]}, {"required": ["b"]}, {"required": ["k"]}]);
        }
        // Open now and then: an undeclared name is then any value, and an object written
        // there every object, beside the closed objects' own (patterns are
        // `discriminators_undeclared_in_a_variant_with_patterns`).
        if rng.below(5) == 0 {
            o.as_object_mut()
                .expect("an object schema")
                .remove("additionalProperties");
        }
        o
    }

    fn shape(rng: &mut Rng, depth: u32) -> Value {
        match rng.below(3) {
            0 => closed(rng, depth),
            _ => {
                let n = 2 + rng.below(2);
                let branches: Vec<Value> = (0..n).map(|_| closed(rng, depth)).collect();
                json!({"anyOf": branches})
            }
        }
    }

    let engine = Engine::new(vocab());
    let mut rng = Rng::new(902);
    let mut tried = 0;
    let mut fails = Vec::new();
    for case in 0..500 {
        let schema = shape(&mut rng, 1);
        let opts = match case % 2 {
            0 => any_order(),
            _ => any_order().whitespace(Whitespace::Flexible { max_run: Some(1) }),
        };
        let Ok(grammar) = compile_schema_with(&schema, &opts, &Limits::new()) else {
            continue;
        };
        let Ok(exact) = engine.compile_grammar(&grammar.grammar) else {
            continue;
        };
        let kept = match engine.compile_json_schema(&schema, &opts) {
            Ok(kept) => kept,
            Err(err)
                if matches!(
                    err.kind(),
                    CompileErrorKind::Limit | CompileErrorKind::Unsupported
                ) =>
            {
                continue
            }
            Err(err) => panic!("case {case}: {err} for {schema}"),
        };
        tried += 1;
        if let Some(msg) = walks_differ(&engine, &exact.matcher(), &kept.matcher(), 900 + case) {
            let first = msg.lines().next().unwrap_or("");
            fails.push(format!("case {case}: {schema}\n   {first}"));
        }
    }
    assert!(tried > 300, "{tried} schemas compiled");
    assert!(
        fails.is_empty(),
        "{} cases differ:\n{}",
        fails.len(),
        fails.join("\n")
    );
}

/// Differing values reached through `if`/`then`/`else`, references, patterns near and past
/// the automaton's size, lengths the matcher may count, tuples, formats, `not` and
/// `propertyNames`, in compact and flexible white space.
#[test]
fn differing_values_from_other_keywords() {
    let p = |k: Value| json!({"k": k, "a": {"type": "integer"}, "b": {"type": "integer"}, "ab": {"type": "integer"}});
    let schemas = vec![
        json!({"type": "object", "properties": p(json!({"type": "string"})),
            "if": {"properties": {"k": {"const": "a"}}}, "then": {"required": ["a"]},
            "else": {"properties": {"k": {"type": "string", "maxLength": 3}}, "required": ["b"]},
            "additionalProperties": false}),
        json!({"$defs": {"s1": {"type": "string", "pattern": "^a"}, "s2": {"type": "string", "pattern": "^b"}},
        "anyOf": [
            object(p(json!({"$ref": "#/$defs/s1"})), json!(["a"]), json!(false)),
            object(p(json!({"$ref": "#/$defs/s2"})), json!(["b"]), json!(false)),
            object(p(json!({"anyOf": [{"$ref": "#/$defs/s2"}, {"type": "integer"}]})), json!(["ab"]), json!(false))
        ]}),
        json!({"anyOf": [
            object(p(json!({"type": "string", "pattern": "^[a-z]{0,40}$"})), json!(["a"]), json!(false)),
            object(p(json!({"type": "string", "pattern": "^(a|b)*c{0,300}$"})), json!(["b"]), json!(false))
        ]}),
        json!({"anyOf": [
            object(p(json!({"type": "string", "maxLength": 2000})), json!(["a"]), json!(false)),
            object(p(json!({"type": "string", "maxLength": 2})), json!(["b"]), json!(false))
        ]}),
        json!({"anyOf": [
            object(p(json!({"type": "string", "minLength": 2000})), json!(["a"]), json!(false)),
            object(p(json!({"type": "string", "maxLength": 2})), json!(["b"]), json!(false))
        ]}),
        json!({"type": "array", "prefixItems": [
                {"anyOf": [object(p(json!({"type": "boolean"})), json!(["a"]), json!(false)), object(p(json!({"type": "null"})), json!(["b"]), json!(false))]}
            ], "items": {"anyOf": [object(p(json!({"type": "number"})), json!(["a"]), json!(false)), object(p(json!({"type": "string"})), json!(["b"]), json!(false))]}, "maxItems": 3}),
        json!({"anyOf": [
            object(p(json!({"type": "string", "format": "date-time"})), json!(["a"]), json!(false)),
            object(p(json!({"type": "string", "format": "uuid"})), json!(["b"]), json!(false)),
            object(p(json!({"type": "string", "format": "email"})), json!(["ab"]), json!(false))
        ]}),
        json!({"anyOf": [
            object(p(json!({"not": {"type": "string"}})), json!(["a"]), json!(false)),
            object(p(json!({"type": "string"})), json!(["b"]), json!(false))
        ]}),
        json!({"anyOf": [
                object(p(json!({"type": "integer", "minimum": 10})), json!(["a"]), json!(false)),
                object(p(json!({"type": "integer", "maximum": 5})), json!(["b"]), json!(false))
            ], "propertyNames": {"maxLength": 2}}),
        json!({"anyOf": [
            object(p(json!({"type": "string", "pattern": "é"})), json!(["a"]), json!(false)),
            object(p(json!({"type": "string", "pattern": "^[^é]*$"})), json!(["b"]), json!(false))
        ]}),
    ];
    let engine = Engine::new(vocab());
    for (i, schema) in schemas.iter().enumerate() {
        for opts in [
            any_order(),
            any_order().whitespace(Whitespace::Flexible { max_run: Some(1) }),
        ] {
            let g = compile_schema_with(schema, &opts, &Limits::new());
            let e = engine.compile_json_schema(schema, &opts);
            if let Err(err) = &e {
                assert!(
                    matches!(
                        err.kind(),
                        CompileErrorKind::Limit | CompileErrorKind::Unsupported
                    ),
                    "{i}: {err}"
                );
            }
            if g.is_ok() && e.is_ok() {
                agree_with(schema, &opts, 60, 30, 500 + i as u64);
            }
        }
    }
}

/// Two objects of one key set (the same names, the same required ones) that give two names
/// other values, beside a third object of another key set: the value of `x` passes the
/// second object's test and that of `y` the first's, so the key set stays, though no object
/// of it takes both values; the grammar keeps only the third object, whose required `z` is
/// missing, and the matcher let the object close by the key set's required names (none).
#[test]
fn objects_of_one_key_set_passing_different_names() {
    let third = object(
        json!({"x": {}, "y": {}, "z": {"type": "integer"}}),
        json!(["z"]),
        json!(false),
    );
    let automata = json!({"anyOf": [
        object(json!({"x": {"type": "string"}, "y": {"type": "integer"}}), json!([]), json!(false)),
        object(json!({"x": {"type": "integer"}, "y": {"type": "string"}}), json!([]), json!(false)),
        third.clone()
    ]});
    masks_agree_after(
        &automata,
        b"{\"x\":1,\"y\":1",
        "after values of two objects",
    );
    verdicts_agree(&automata, &["{\"x\":1,\"y\":1}", "{\"x\":1,\"y\":\"s\"}"]);
    // The same with lists only.
    let listed = json!({"anyOf": [
        object(json!({"x": {"const": "s"}, "y": {"const": 1}}), json!([]), json!(false)),
        object(json!({"x": {"const": 1}, "y": {"const": "s"}}), json!([]), json!(false)),
        third
    ]});
    verdicts_agree(&listed, &["{\"x\":1,\"y\":1}", "{\"x\":1,\"y\":\"s\"}"]);
}
