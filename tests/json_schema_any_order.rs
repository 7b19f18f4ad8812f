//! Objects in any order held by the matcher (`matcher::json_state::keys`): the grammar is any
//! run of members and the matcher keeps each open object's names. The oracle is the `2^n`
//! grammar of the same objects (one rule per set of names written), which the front end
//! builds when no matcher keeps state: compiled alone, as a plain grammar, its masks must
//! equal the engine's at every step of random walks, over a small vocabulary of tokens that
//! close a name and write the next one, and over Qwen3's.

use formwork::front::json_schema::{compile_schema_with, JsonSchemaOptions, PropertyOrder};
use formwork::vocab::Vocab;
use formwork::{CompileErrorKind, ConstraintMatcher, Engine, Limits, Location, Matcher};
use formwork_testkit::agree::{walks_agree, Walks};
use formwork_testkit::json_schema::{grammar_and_engine, object, walks_agree_but_repeated_names};
use formwork_testkit::oracle::{assert_same_mask, mask_of};
use formwork_testkit::tokenizers;
use formwork_testkit::vocab::bytes_and;
use serde_json::{json, Value};

/// Every byte, then tokens that finish a name or value and write the next, then `<eos>`.
fn vocab() -> Vocab {
    let extra: &[&[u8]] = &[
        b"{\"",
        b"\"}",
        b"\":",
        b"\",\"",
        b",\"",
        b"\"a\"",
        b"\"ab",
        b"ab\"",
        b"abc",
        b"\"a\":1,\"b\"",
        b"\"a\":1}",
        b"1}",
        b"1,",
        b"1,\"",
        b"1,\"a",
        b"},",
        b"}}",
        b"{\"a\":1,\"a\"",
        b"{\"a\":1}",
        b"\":\"x\",\"",
        b"\":\"x\"}",
        b"q\\\"t",
        b"\\\"",
        "é".as_bytes(),
        b"true,\"c",
        b"\"x\":",
        b"\"zz\":",
        b"\",\"ab\":",
        // Content, then the closing quote and more: a discriminator's last character, an
        // escape's.
        b"a\",",
        b"b\"}",
        b"n\",",
        b"n\"}",
        // ...and closing an array: what the string holds decides the array's objects.
        b"b\"]}",
        b"b\"],\"",
    ];
    bytes_and(extra.iter().map(|t| t.to_vec()))
}

fn any_order() -> JsonSchemaOptions {
    JsonSchemaOptions::new()
        .property_order(PropertyOrder::Any)
        .max_any_order_properties(12)
}

/// The matcher of the `2^n` grammar the front end builds for `schema` alone (the oracle),
/// and the engine's matcher of it in any order.
fn both(engine: &Engine, schema: &Value) -> (ConstraintMatcher, ConstraintMatcher) {
    grammar_and_engine(engine, schema, &any_order())
}

#[track_caller]
fn agree(schema: &Value, walks: usize, steps: usize, seed: u64) {
    agree_with(schema, &any_order(), walks, steps, seed);
}

/// [`agree`] with these options.
#[track_caller]
fn agree_with(schema: &Value, options: &JsonSchemaOptions, walks: usize, steps: usize, seed: u64) {
    let engine = Engine::new(vocab());
    let (exact, kept) = grammar_and_engine(&engine, schema, options);
    let walks = Walks { walks, steps, seed };
    walks_agree(engine.vocab(), &exact, &kept, walks, |rng, allowed| {
        allowed[rng.below(allowed.len())]
    });
}

/// Whether each text is a complete output of `schema` in any order, over Qwen3.
fn accepter(schema: &Value, options: &JsonSchemaOptions) -> impl Fn(&str) -> bool {
    let engine = Engine::new(tokenizers::qwen3().clone());
    let compiled = engine.compile_json_schema(schema, options).unwrap();
    move |text| {
        let mut m = compiled.matcher();
        m.consume_bytes(text.as_bytes()).is_ok() && m.is_accepting()
    }
}

/// The engine refuses `schema` with a `Limit` error: objects left to the `2^n` grammar past
/// `max_any_order_properties`, saying why the matcher could not keep their names instead if
/// it could have (`why`).
#[track_caller]
fn refused_as_too_wide(schema: &Value, options: &JsonSchemaOptions, why: Option<&str>) {
    let engine = Engine::new(vocab());
    let err = engine.compile_json_schema(schema, options).err().unwrap();
    assert_eq!(err.kind(), CompileErrorKind::Limit, "{err}");
    let instead = why.map(|why| format!("the matcher cannot keep its names instead: {why}"));
    match instead {
        Some(instead) => assert!(err.to_string().ends_with(&instead), "{err}"),
        None => assert!(!err.to_string().contains("instead"), "{err}"),
    }
}

/// A closed object of `n` integer properties `p0`, `p1`…, with `extra` ones (replacing any of
/// the same name), requiring `required`: past the `2^n` grammar's limit for `n` over 8.
fn wide(n: usize, extra: Value, required: Value) -> Value {
    let mut props: serde_json::Map<String, Value> = (0..n)
        .map(|i| (format!("p{i}"), json!({"type": "integer"})))
        .collect();
    if let Value::Object(extra) = extra {
        props.extend(extra);
    }
    object(Value::Object(props), required, json!(false))
}

/// The closed object of `a` valued `value` and an integer `other`, requiring `other`: two
/// of them with other names `other` are objects of two key sets that `a` may tell apart.
fn a_beside(value: Value, other: &str) -> Value {
    object(
        json!({"a": value, other: {"type": "integer"}}),
        json!([other]),
        json!(false),
    )
}

#[test]
fn closed_objects_with_names_that_start_others_agree_with_the_2n_grammar() {
    let schema = object(
        json!({
            "a": {"type": "integer"},
            "ab": {"type": "integer"},
            "abc": {"type": "boolean"},
            "b": {"type": "integer"},
            "c": {"enum": [true, "x"]},
            "q\"t": {"type": "integer"},
            "é": {"type": "integer"}
        }),
        json!(["ab", "b"]),
        json!(false),
    );
    agree(&schema, 80, 60, 1);
}

#[test]
fn open_objects_agree_with_the_2n_grammar() {
    let schema = object(
        json!({"a": {"type": "integer"}, "ab": {"type": "string"}, "b": {"type": "integer"}}),
        json!(["a"]),
        json!({"type": "integer"}),
    );
    agree(&schema, 80, 60, 2);
}

/// `maxProperties` leaving room only for the required names, `minProperties` past the
/// declared ones (undeclared names must make up the count) and below them.
#[test]
fn property_counts_agree_with_the_2n_grammar() {
    let props =
        json!({"a": {"type": "integer"}, "ab": {"type": "integer"}, "b": {"type": "integer"}});
    for (i, (min, max, additional)) in [
        (0, Some(2), json!(true)),
        (2, Some(2), json!(false)),
        (4, None, json!({"type": "integer"})),
        (1, Some(3), json!({"type": "integer"})),
    ]
    .into_iter()
    .enumerate()
    {
        let mut schema = object(props.clone(), json!(["b"]), additional);
        schema["minProperties"] = json!(min);
        if let Some(max) = max {
            schema["maxProperties"] = json!(max);
        }
        agree(&schema, 40, 40, 10 + i as u64);
    }
}

/// Objects inside objects and arrays, and a union of objects with the same names told apart
/// by a value: one key set holds both.
#[test]
fn nested_objects_and_unions_of_one_key_set_agree_with_the_2n_grammar() {
    let inner = object(
        json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        json!(["a"]),
        json!(false),
    );
    let schema = object(
        json!({
            "a": inner.clone(),
            "b": {"type": "array", "items": inner, "maxItems": 3},
            "c": {"anyOf": [
                object(json!({"a": {"const": 1}, "b": {"type": "integer"}}), json!(["a", "b"]), json!(false)),
                object(json!({"a": {"const": 2}, "b": {"type": "boolean"}}), json!(["a", "b"]), json!(false))
            ]}
        }),
        json!(["c"]),
        json!(false),
    );
    agree(&schema, 80, 80, 3);
}

/// Objects of other key sets at one place, agreeing on the values of the names they share,
/// are variants of one group: the object is any of them whose rules the names written so far
/// kept. `dependencies` make such unions (the object without a name, and the one requiring
/// more with it), and so do `oneOf`s of required names.
#[test]
fn unions_of_key_sets_agree_with_the_2n_grammar() {
    let first = object(
        json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        json!(["a"]),
        json!(false),
    );
    let second = object(
        json!({"a": {"type": "integer"}, "c": {"type": "integer"}, "ab": {"type": "boolean"}}),
        json!(["c"]),
        json!(false),
    );
    agree(&json!({"anyOf": [first, second]}), 80, 40, 4);
    let dependencies = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
        "dependencies": {"a": ["b", "c"], "c": ["b"]},
        "additionalProperties": false
    });
    agree(&dependencies, 80, 40, 5);
    let required_one_of = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "ab": {"type": "integer"}, "b": {"type": "integer"}},
        "oneOf": [{"required": ["a"]}, {"required": ["ab", "b"]}],
        "maxProperties": 2,
        "additionalProperties": false
    });
    agree(&required_one_of, 80, 40, 6);
    // Twenty properties in two variants: past the `2^n` limit, so held by the group alone.
    let union = json!({
        "anyOf": [wide(20, json!({}), json!(["p1"])), wide(20, json!({}), json!(["p2"]))],
        "maxProperties": 2
    });
    let accepts = accepter(&union, &any_order());
    assert!(accepts("{\"p5\":1,\"p1\":2}"));
    assert!(accepts("{\"p2\":1,\"p9\":2}"));
    assert!(!accepts("{\"p5\":1,\"p6\":2}"), "neither required name");
    assert!(!accepts("{\"p2\":1,\"p2\":2}"), "a name twice");
}

/// A union told apart by a string (`"kind": "circle"`): the string written keeps the variants
/// that list it, whatever order the names come in.
#[test]
fn discriminated_unions_agree_with_the_2n_grammar() {
    let circle = object(
        json!({"kind": {"const": "a"}, "ab": {"type": "integer"}, "b": {"type": "integer"}}),
        json!(["kind", "ab"]),
        json!(false),
    );
    let square = object(
        json!({"kind": {"enum": ["b", "q\"t"]}, "ab": {"type": "integer"}, "c": {"type": "integer"}}),
        json!(["kind"]),
        json!(false),
    );
    agree(&json!({"oneOf": [circle, square]}), 100, 40, 8);
    // Told apart by integers, `true` and `null`, beside a name both give the same value.
    let version = |v: Value, extra: &str| {
        object(
            json!({"v": {"enum": v}, "ab": {"type": "integer"}, extra: {"type": "integer"}}),
            json!(["v"]),
            json!(false),
        )
    };
    let versions =
        json!({"anyOf": [version(json!([1, true]), "b"), version(json!([12, null]), "c")]});
    agree(&versions, 100, 40, 9);
    // Twenty properties each: held by the group alone.
    let kind = |kind: &str, required: &str| {
        wide(
            20,
            json!({"kind": {"const": kind}}),
            json!(["kind", required]),
        )
    };
    let union = json!({"anyOf": [kind("x", "p1"), kind("y", "p2")]});
    let accepts = accepter(&union, &any_order());
    assert!(accepts("{\"p1\":1,\"kind\":\"x\"}"));
    assert!(accepts("{\"kind\":\"y\",\"p2\":1}"));
    assert!(!accepts("{\"p2\":1,\"kind\":\"x\"}"), "x requires p1");
    assert!(!accepts("{\"kind\":\"y\",\"p1\":1}"), "y requires p2");
}

/// The masks of both matchers agree at every step of `text` (tokenized greedily).
#[track_caller]
fn agree_on(schema: &Value, text: &str) {
    let engine = Engine::new(vocab());
    let (mut exact, mut kept) = both(&engine, schema);
    let vocab = engine.vocab();
    for &t in &vocab.encode_greedy(text.as_bytes()).unwrap() {
        let what = format!("{text}: before {:?}", vocab.display_token(t));
        assert_same_mask(
            &mask_of(&mut kept, vocab),
            &mask_of(&mut exact, vocab),
            vocab,
            &what,
        );
        exact.consume(t).unwrap();
        kept.consume(t).unwrap();
    }
}

/// A token that ends an escape, closes the string and writes `,`: inside an escape the
/// token's own first quote is not the one that closes, so it is read from where the string
/// is, not from that quote. Here no member may follow the last one.
#[test]
fn a_token_closing_a_string_after_an_escape_is_read_whole() {
    let schema = object(
        json!({"a": {"type": "string"}, "b": {"type": "string"}}),
        json!([]),
        json!(false),
    );
    agree_on(&schema, "{\"b\":\"x\",\"a\":\"\\n\"}");
}

/// Objects that give one name different values, strings and scalars the matcher reads
/// whole (an integer beside a string, `maxLength: 0` beside `minLength: 1`), are told apart
/// by the value written: each is its own run of members in the grammar, and the value keeps
/// the variants whose automaton accepts it, so a `}` or a name is judged by the objects the
/// grammar still holds. Past the `2^n` limit, held by the group alone.
#[test]
fn objects_disagreeing_on_a_scalar_value_are_told_apart_by_it() {
    let first = object(
        json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        json!(["a"]),
        json!(false),
    );
    let second = object(
        json!({"a": {"type": "string"}, "c": {"type": "integer"}}),
        json!(["c"]),
        json!(false),
    );
    agree(&json!({"anyOf": [first, second]}), 80, 40, 7);
    let empty = a_beside(json!({"type": "string", "maxLength": 0}), "b");
    let word = object(
        json!({"a": {"type": "string", "minLength": 1, "pattern": "^x+$"}, "ab": {"type": "integer"}}),
        json!(["a"]),
        json!(false),
    );
    agree(&json!({"oneOf": [empty, word]}), 80, 40, 17);
    let p0 =
        |value: &str, required: &str| wide(20, json!({"p0": {"type": value}}), json!([required]));
    let shared = json!({"anyOf": [p0("integer", "p1"), p0("string", "p2")]});
    let accepts = accepter(&shared, &any_order());
    assert!(accepts("{\"p0\":1,\"p1\":2}"));
    assert!(accepts("{\"p2\":1,\"p0\":\"x\"}"));
    assert!(!accepts("{\"p0\":1,\"p2\":2}"), "an integer p0 requires p1");
    assert!(
        !accepts("{\"p1\":1,\"p0\":\"x\"}"),
        "a string p0 requires p2"
    );
}

/// Random walks where the engine's mask is the oracle's less tokens that write a name twice
/// in one object (see [`walks_agree_but_repeated_names`]).
#[track_caller]
fn agree_but_repeated_names(schema: &Value, walks: usize, steps: usize, seed: u64) {
    let engine = Engine::new(vocab());
    let (exact, kept) = both(&engine, schema);
    let walks = Walks { walks, steps, seed };
    walks_agree_but_repeated_names(engine.vocab(), &exact, &kept, walks, |rng, allowed| {
        allowed[rng.below(allowed.len())]
    });
}

/// An open object admits every value for a name another object declares: whatever the
/// value, it keeps the open one.
#[test]
fn an_open_object_admits_every_value_beside_a_closed_one() {
    let closed = object(
        json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        json!(["b"]),
        json!(false),
    );
    let open =
        json!({"type": "object", "properties": {"c": {"type": "integer"}}, "required": ["c"]});
    let union = json!({"anyOf": [closed.clone(), open.clone()]});
    agree_but_repeated_names(&union, 80, 40, 18);
    // An array or object written as the value keeps only the objects admitting every value.
    let accepts = accepter(&union, &any_order());
    assert!(accepts("{\"a\":[1],\"c\":1}"));
    assert!(
        !accepts("{\"a\":[1],\"b\":1}"),
        "an array `a` is the open object's"
    );
    assert!(
        !accepts("{\"b\":1,\"a\":{}}"),
        "an object `a` is the open object's"
    );
    // Declared with every value: no name repeats in the oracle either.
    let declared = a_beside(json!({}), "c");
    agree(&json!({"anyOf": [closed, declared]}), 80, 40, 21);
    let open_wide =
        json!({"type": "object", "properties": {"p0": {"type": "string"}}, "required": ["q"]});
    let union = json!({"anyOf": [wide(20, json!({}), json!(["p1"])), open_wide]});
    let accepts = accepter(&union, &any_order());
    assert!(accepts("{\"p0\":1,\"p1\":2}"));
    assert!(accepts("{\"p0\":\"s\",\"q\":[]}"));
    assert!(accepts("{\"p1\":1,\"q\":{}}"));
    assert!(
        !accepts("{\"p0\":\"s\",\"p1\":2}"),
        "a string p0 is the open object's"
    );
    assert!(!accepts("{\"p0\":1}"), "neither p1 nor q");
}

/// A value that is an array in one variant, or arrays of other lengths, is read whole by
/// its automaton (from `[` to `]`, white space and strings inside included): the array
/// keeps the variants whose automaton accepts it, as a scalar does. A value no automaton
/// holds (an array of any values: JSON nests without bound) is not read: objects disagreeing
/// on it are `2^n` grammars there, exact as ever, and past the `2^n` limit a typed error.
#[test]
fn objects_disagreeing_on_an_array_value_are_told_apart_by_its_automaton() {
    let first = object(
        json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        json!(["a"]),
        json!(false),
    );
    let second = object(
        json!({"a": {"type": "array", "items": {"type": "integer"}}, "c": {"type": "integer"}}),
        json!(["c"]),
        json!(false),
    );
    agree(&json!({"anyOf": [first, second]}), 60, 40, 20);
    let array =
        |bound: &str, n: u64| json!({"type": "array", "items": {"type": "integer"}, bound: n});
    let one = a_beside(array("maxItems", 1), "b");
    let more = object(
        json!({"a": array("minItems", 2), "ab": {"type": "integer"}}),
        json!(["a"]),
        json!(false),
    );
    agree(&json!({"anyOf": [one, more]}), 60, 40, 22);
    // `b"]}` after `["a` writes "ab", which only the second holds, and it requires `c`.
    let strings =
        |bound: &str, n: u64| json!({"type": "array", "items": {"type": "string", bound: n}});
    let short = object(
        json!({"a": strings("maxLength", 1)}),
        json!([]),
        json!(false),
    );
    let long = object(
        json!({"a": strings("minLength", 2), "c": {"type": "integer"}}),
        json!(["c"]),
        json!(false),
    );
    agree_on(&json!({"anyOf": [short, long]}), "{\"a\":[\"ac\"],\"c\":1}");
    let p0 = |value: Value, required: &str| wide(20, json!({"p0": value}), json!([required]));
    let integers = json!({"type": "array", "items": {"type": "integer"}});
    let shared = json!({"anyOf": [p0(json!({"type": "integer"}), "p1"), p0(integers, "p2")]});
    let accepts = accepter(&shared, &any_order());
    assert!(accepts("{\"p0\":[1,2],\"p2\":1}"));
    assert!(accepts("{\"p1\":1,\"p0\":3}"));
    assert!(!accepts("{\"p0\":[1],\"p1\":1}"), "an array p0 requires p2");
    assert!(!accepts("{\"p1\":1,\"p0\":[]}"), "an array p0 requires p2");
    let lengths =
        json!({"anyOf": [p0(array("maxItems", 1), "p1"), p0(array("minItems", 2), "p2")]});
    let accepts = accepter(&lengths, &any_order());
    assert!(accepts("{\"p0\":[1],\"p1\":1}"));
    assert!(accepts("{\"p2\":1,\"p0\":[1,2,3]}"));
    assert!(!accepts("{\"p0\":[1,2],\"p1\":1}"), "two items require p2");
    assert!(!accepts("{\"p2\":1,\"p0\":[]}"), "no item requires p1");
    let anything = json!({"type": "array"});
    let untestable = json!({"anyOf": [p0(json!({"type": "integer"}), "p1"), p0(anything, "p2")]});
    refused_as_too_wide(
        &untestable,
        &any_order(),
        Some("an object in any order at a place other objects share"),
    );
}

/// A closed object of `x` valued `value` and an integer `name`, which it requires.
fn x_of(value: &Value, name: &str) -> Value {
    object(
        json!({"x": value, name: {"type": "integer"}}),
        json!([name]),
        json!(false),
    )
}

/// [`wide`] with `x` valued `value`, requiring `required`: past the `2^n` limit.
fn x_of_wide(value: &Value, required: &str) -> Value {
    wide(20, json!({"x": value}), json!([required]))
}

/// Objects giving a name objects of other key sets as values are told apart by the object
/// written there: at its `{`, its own group keeps the variants the objects still possible
/// bring, and at its `}` the objects keep those that bring what it closed as. So the names
/// and `}` that follow are judged by the objects the grammar still holds.
#[test]
fn objects_are_told_apart_by_the_object_under_a_name() {
    let inner = |names: Value, required: &str| object(names, json!([required]), json!(false));
    let x = inner(
        json!({"a": {"type": "integer"}, "ab": {"type": "integer"}}),
        "a",
    );
    let y = inner(
        json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        "b",
    );
    let small = json!({"anyOf": [x_of(&x, "b"), x_of(&y, "c")]});
    agree(&small, 80, 40, 23);
    // Over Qwen3, tokens closing the inner object and writing on (`}}`, `},"`).
    qwen3_agree(
        &small,
        &[
            "{\"x\":{\"a\":1},\"b\":2}",
            "{\"c\":1,\"x\":{\"b\":1,\"a\":2}}",
            "{\"x\":{\"a\":1,\"b\":2},\"c\":3}",
            "{\"x\":{\"a\":1},\"c\":2}",
            "{\"b\":1,\"x\":{\"b\":1}}",
        ],
    );
    let union = json!({"anyOf": [x_of_wide(&x, "p1"), x_of_wide(&y, "p2")]});
    let accepts = accepter(&union, &any_order());
    assert!(accepts("{\"x\":{\"a\":1},\"p1\":1}"));
    assert!(accepts("{\"p2\":1,\"x\":{\"b\":1,\"a\":2}}"));
    assert!(
        !accepts("{\"x\":{\"a\":1},\"p2\":1}"),
        "x without b is the first's"
    );
    assert!(
        !accepts("{\"p1\":1,\"x\":{\"b\":1}}"),
        "p1 brings objects requiring a"
    );
    assert!(
        !accepts("{\"x\":{\"ab\":1,\"b\":1}}"),
        "no object has ab and b"
    );
}

/// The objects under a name may be several of one key set (told apart by a value of their
/// own, as a `dependencies` split makes them) and still tell the outer objects apart: the
/// inner group tells key sets, not objects, so what matters is that one outer key set brings
/// them all.
#[test]
fn objects_of_one_key_set_under_a_name_tell_apart_the_object_bringing_them() {
    let split = |a: i64| {
        object(
            json!({"a": {"const": a}, "ab": {"type": "integer"}}),
            json!(["a"]),
            json!(false),
        )
    };
    let x = json!({"anyOf": [split(1), split(2)]});
    let y = object(
        json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        json!(["b"]),
        json!(false),
    );
    let small = json!({"anyOf": [x_of(&x, "b"), x_of(&y, "c")]});
    agree(&small, 80, 40, 29);
    qwen3_agree(
        &small,
        &[
            "{\"x\":{\"a\":2},\"b\":2}",
            "{\"x\":{\"ab\":3,\"a\":1},\"b\":2}",
            "{\"c\":1,\"x\":{\"b\":1,\"a\":3}}",
            "{\"x\":{\"a\":1},\"c\":2}",
            "{\"x\":{\"a\":3,\"b\":1},\"b\":2}",
        ],
    );
    let union = json!({"anyOf": [x_of_wide(&x, "p1"), x_of_wide(&y, "p2")]});
    let accepts = accepter(&union, &any_order());
    assert!(accepts("{\"x\":{\"a\":2},\"p1\":1}"));
    assert!(accepts("{\"p2\":1,\"x\":{\"b\":1,\"a\":3}}"));
    assert!(
        !accepts("{\"x\":{\"a\":1},\"p2\":1}"),
        "x without b is the first's"
    );
    assert!(
        !accepts("{\"p1\":1,\"x\":{\"a\":3}}"),
        "p1 brings objects whose a is 1 or 2"
    );
    // Objects of one key set brought by two outer ones cannot tell those apart: closing as
    // that key set, `{"a":1}` would keep the second, whose `p2` then closes the first.
    let shared = json!({"anyOf": [x_of_wide(&split(1), "p1"), x_of_wide(&split(2), "p2")]});
    refused_as_too_wide(
        &shared,
        &any_order(),
        Some("an object in any order at a place other objects share"),
    );
}

/// One object brought by two variants (a shared definition) keeps both when a value closes
/// as it: its language is the same whichever brought it, so only the objects beside it tell
/// the variants apart.
#[test]
fn one_object_brought_by_two_variants_keeps_both() {
    let closed = |name: &str| {
        object(
            json!({name: {"type": "integer"}}),
            json!([name]),
            json!(false),
        )
    };
    let shared = object(
        json!({"a": {"type": "integer"}, "ab": {"type": "integer"}}),
        json!(["a"]),
        json!(false),
    );
    let x = |other: &str| json!({"anyOf": [{"$ref": "#/$defs/shared"}, closed(other)]});
    let small = json!({
        "$defs": {"shared": shared},
        "anyOf": [x_of(&x("b"), "b2"), x_of(&x("c"), "c2")],
    });
    agree(&small, 80, 40, 31);
    qwen3_agree(
        &small,
        &[
            "{\"x\":{\"a\":1},\"b2\":1}",
            "{\"c2\":1,\"x\":{\"ab\":2,\"a\":1}}",
            "{\"x\":{\"b\":1},\"c2\":1}",
            "{\"x\":{\"c\":1},\"c2\":1}",
        ],
    );
    let union = json!({
        "$defs": {"shared": shared},
        "anyOf": [x_of_wide(&x("b"), "p1"), x_of_wide(&x("c"), "p2")],
    });
    let accepts = accepter(&union, &any_order());
    assert!(accepts("{\"x\":{\"a\":1},\"p1\":1}"));
    assert!(accepts("{\"p2\":1,\"x\":{\"a\":1}}"));
    assert!(accepts("{\"x\":{\"c\":1},\"p2\":1}"));
    assert!(
        !accepts("{\"x\":{\"b\":1},\"p2\":1}"),
        "b is brought by the first"
    );
}

/// An object at a place where another variant admits any value (an open object's undeclared
/// name) is told apart from it as above, any value being the variant "every object" of the
/// place's group, brought only by the open object: once a name written chooses the closed
/// one, an object written there must be its own (a variant admitting every name regardless
/// once let `{"x":{"p0":1}}` through, though `x` requires `p1` and the open object `c`).
/// A name the group declares is refused twice in every object of it, `{}`'s included.
#[test]
fn an_object_beside_any_value_is_told_apart_by_what_brings_it() {
    let open =
        json!({"type": "object", "properties": {"c": {"type": "integer"}}, "required": ["c"]});
    let inner = object(
        json!({"a": {"type": "integer"}, "ab": {"type": "integer"}}),
        json!(["a"]),
        json!(false),
    );
    let nested = object(
        json!({"x": inner, "b": {"type": "integer"}}),
        json!(["b"]),
        json!(false),
    );
    let small = json!({"anyOf": [nested, open.clone()]});
    agree_but_repeated_names(&small, 60, 40, 19);
    qwen3_agree(
        &small,
        &[
            "{\"x\":{\"a\":1},\"b\":2}",
            "{\"c\":1,\"x\":{\"q\":[1]}}",
            "{\"x\":{\"ab\":1},\"b\":1}",
            "{\"b\":1,\"x\":{\"a\":1,\"q\":1}}",
            "{\"x\":{},\"c\":1}",
        ],
    );
    let nested_wide = object(
        json!({"x": wide(20, json!({}), json!(["p1"])), "b": {"type": "integer"}}),
        json!([]),
        json!(false),
    );
    let accepts = accepter(&json!({"anyOf": [nested_wide, open]}), &any_order());
    assert!(accepts("{\"x\":{\"p1\":1}}"));
    assert!(accepts("{\"c\":1,\"x\":{\"q\":[]}}"));
    assert!(accepts("{\"x\":{\"p0\":1},\"c\":1}"));
    assert!(
        !accepts("{\"x\":{\"p0\":1}}"),
        "x requires p1, the open object c"
    );
    assert!(
        !accepts("{\"b\":1,\"x\":{\"q\":1}}"),
        "b chose the closed object"
    );
    assert!(
        !accepts("{\"c\":1,\"x\":{\"p3\":[],\"p3\":2}}"),
        "a name of the group twice"
    );
}

/// Undeclared names go where the patterns they match say: an object of items under names
/// matching a pattern is held to its key set though other names may be any value.
#[test]
fn names_matching_patterns_reach_their_objects() {
    let item = object(
        json!({"a": {"type": "integer"}, "ab": {"type": "integer"}, "b": {"type": "integer"}}),
        json!(["b"]),
        json!(false),
    );
    let schema = json!({
        "type": "object",
        "patternProperties": {"^a": {"type": "array", "items": item, "maxItems": 2}, "b$": {"type": "integer"}}
    });
    agree(&schema, 80, 60, 11);
    // Twenty properties under a pattern, any value elsewhere: held by the key set alone.
    let under_x = json!({
        "type": "object",
        "patternProperties": {"^x": wide(20, json!({}), json!(["p1"]))}
    });
    let accepts = accepter(&under_x, &any_order());
    assert!(accepts(
        "{\"y\":{\"p1\":1,\"p1\":2},\"x1\":{\"p2\":1,\"p1\":2}}"
    ));
    assert!(!accepts("{\"x1\":{\"p2\":1}}"), "p1 is required under x");
    assert!(
        !accepts("{\"x1\":{\"p1\":1,\"p1\":2}}"),
        "a name twice under x"
    );
}

/// An object with patterns is held to a key set when every undeclared name has a value,
/// whatever patterns it matches; a pattern whose value is `false` refuses some names, which a
/// key set cannot tell, so that object keeps the `2^n` grammar.
#[test]
fn objects_with_patterns_admitting_every_name_are_key_sets() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "ab": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["b"],
        "patternProperties": {"^x": {"type": "integer"}, "z$": {"type": "boolean"}},
        "additionalProperties": {"type": "integer"},
        "maxProperties": 4
    });
    agree(&schema, 80, 40, 12);
    let mut patterned = wide(20, json!({}), json!(["p1"]));
    patterned["patternProperties"] = json!({"^x": {"type": "boolean"}});
    patterned["additionalProperties"] = json!({"type": "integer"});
    let accepts = accepter(&patterned, &any_order());
    assert!(accepts("{\"x1\":true,\"p1\":1,\"y\":2}"));
    assert!(!accepts("{\"x1\":1,\"p1\":1}"), "x1 matches the pattern");
    assert!(!accepts("{\"p1\":1,\"p1\":1}"), "a name twice");
    assert!(!accepts("{\"p2\":1}"), "p1 is required");
}

/// Where the patterns refuse some undeclared names (`additionalProperties: false`, or a
/// pattern whose value is `false`), the undeclared names admitted are read by their automaton
/// as decoded, beside declared names that start like them (`xa` under `^x`, `q"t` beside
/// escapes), each declared name once; a name matching two patterns whose values no JSON
/// satisfies together (`xé`) is none.
#[test]
fn names_of_patterns_beside_refused_names_agree_with_the_2n_grammar() {
    let integer = json!({"type": "integer"});
    let patterned = |props: Value, required: Value, patterns: Value| {
        let mut o = object(props, required, json!(false));
        o["patternProperties"] = patterns;
        o
    };
    let mut schema = patterned(
        json!({"a": integer, "ab": integer, "xa": {"type": "boolean"}, "q\"t": integer}),
        json!(["ab"]),
        json!({"^x": integer, "é$": {"type": "string"}}),
    );
    agree(&schema, 80, 60, 21);
    schema["maxProperties"] = json!(3);
    agree(&schema, 60, 40, 22);
    // Two objects of one automaton (the same names declared), told apart by the names
    // written.
    let variant = |required: Value| {
        let mut v = schema.clone();
        v.as_object_mut().unwrap().remove("maxProperties");
        v["required"] = required;
        v
    };
    let union = json!({"anyOf": [variant(json!(["a"])), variant(json!(["ab", "xa"]))]});
    agree(&union, 60, 40, 23);
    // Few undeclared names: after `ab` and `abc`, `"a` may not go on with `b`; after `x1`,
    // `"x1` may not close but may go on with a digit.
    let few = patterned(
        json!({"a": integer, "ab": integer, "abc": integer, "x1": integer}),
        json!(["a"]),
        json!({"^x[0-9]+$": integer, "^b$": {"type": "string"}}),
    );
    agree(&few, 60, 40, 25);
    agree_on(&few, "{\"ab\":1,\"abc\":2,\"a\":3}");
    agree_on(&few, "{\"x1\":1,\"x12\":2,\"a\":1,\"b\":\"s\"}");
    qwen3_agree(
        &schema,
        &[
            "{\"x1\":1,\"ab\":2,\"xa\":true}",
            "{\"ab\":1,\"xyz\":2,\"xyz\":3,\"ab\":4}",
            "{\"ab\":1,\"café\":\"s\"}",
            "{\"ab\":1,\"xé\":\"s\"}",
            "{\"q\\\"t\":1,\"ab\":1,\"q\\\"t\":2}",
            "{\"b\":1}",
        ],
    );
}

/// A union of ten closed objects of seven names each (and `z` in the first), told apart by the
/// names written: past
/// 64 names a mask inside a name walks the token trie (`KeyGroup::reads_many_names`) instead
/// of reading each allowed token.
#[test]
fn a_union_of_many_names_agrees_with_the_2n_grammar() {
    let objects: Vec<Value> = (0..10)
        .map(|i| {
            let mut props: serde_json::Map<String, Value> = (0..7)
                .map(|j| (format!("k{i}{j}"), json!({"type": "integer"})))
                .collect();
            if i == 0 {
                props.insert("z".into(), json!({"type": "integer"}));
            }
            object(
                Value::Object(props),
                json!([format!("k{i}0")]),
                json!(false),
            )
        })
        .collect();
    let union = json!({"anyOf": objects});
    agree(&union, 60, 40, 24);
    // After `z`, a name may not start with `z` (read by the walk, from all 71 names); after
    // `k00`, `"k0` may not go on with `0`.
    agree_on(&union, "{\"z\":1,\"k00\":1,\"k01\":2,\"k06\":3}");
}

/// Twenty declared names beside patterned ones and no other: the `2^n` grammar refuses the
/// object, the key set holds it in any order.
#[test]
fn many_properties_beside_patterns_and_no_other_name_are_a_key_set() {
    let mut schema = wide(20, json!({}), json!(["p1"]));
    schema["patternProperties"] = json!({"^x-": {"type": "string"}, "^p": {"type": "integer"}});
    let mut two_n = JsonSchemaOptions::new().property_order(PropertyOrder::Any);
    let err = compile_schema_with(&schema, &two_n, &Limits::new())
        .err()
        .unwrap();
    assert_eq!(err.kind(), CompileErrorKind::Limit, "{err}");
    two_n = any_order();
    let accepts = accepter(&schema, &two_n);
    assert!(accepts("{\"x-a\":\"s\",\"p19\":1,\"p1\":2,\"p100\":3}"));
    assert!(!accepts("{\"p1\":1,\"y\":2}"), "y matches no pattern");
    assert!(!accepts("{\"x-a\":1,\"p1\":2}"), "x-a takes a string");
    assert!(!accepts("{\"p1\":1,\"p1\":2}"), "a name twice");
    assert!(!accepts("{\"p2\":1,\"x-\":\"\"}"), "p1 is required");
    let mut with_false = wide(20, json!({}), json!(["p1"]));
    with_false["patternProperties"] = json!({"^x": false});
    with_false["additionalProperties"] = json!({"type": "integer"});
    let accepts = accepter(&with_false, &two_n);
    assert!(accepts("{\"y\":1,\"p1\":2}"));
    assert!(!accepts("{\"x1\":1,\"p1\":2}"), "x1 is refused");
}

/// An array of closed objects of 14 properties requiring `required`: their `2^n` grammar is
/// past both limits (2^14 rules, more than the budget).
fn wide_items(required: &str) -> Value {
    json!({"type": "array", "items": wide(14, json!({}), json!([required]))})
}

/// Objects the matcher cannot tell apart at a place (the items of two arrays, each brought
/// by its own branch) are left to the `2^n` grammar, and its refusal says why.
#[test]
fn refusals_past_the_2n_limit_say_why_no_key_set_held_the_object() {
    let schema = json!({"anyOf": [wide_items("p0"), wide_items("p1")]});
    refused_as_too_wide(
        &schema,
        &any_order(),
        Some("an object in any order at a place objects of other branches share"),
    );
    // One branch alone: a key set holds it, in any order.
    let accepts = accepter(&wide_items("p0"), &any_order());
    assert!(accepts("[{\"p12\":1,\"p0\":2},{\"p0\":3}]"));
    assert!(!accepts("[{\"p12\":1}]"), "p0 is required");
}

/// What `Any` refuses past the `2^n` limits, `AnyOrSchema` keeps in the schema's order with a
/// warning, and holds every other object in any order: its masks equal those of its grammar
/// alone (where every object is a `2^n` grammar or, past the limits, in order) at every step.
#[test]
fn objects_past_the_2n_limit_keep_the_schema_order_with_a_warning() {
    let small = object(
        json!({"x": {"type": "integer"}, "y": {"type": "boolean"}}),
        json!(["x"]),
        json!(false),
    );
    let schema = object(
        json!({"a": {"anyOf": [wide_items("p0"), wide_items("p1")]}, "b": small}),
        json!(["a"]),
        json!(false),
    );
    refused_as_too_wide(
        &schema,
        &any_order(),
        Some("an object in any order at a place objects of other branches share"),
    );
    let fallback = any_order().property_order(PropertyOrder::AnyOrSchema);
    let engine = Engine::new(vocab());
    let compiled = engine.compile_json_schema(&schema, &fallback).unwrap();
    let kept: Vec<&Location> = compiled.warnings().iter().map(|w| w.location()).collect();
    assert_eq!(
        kept,
        ["/properties/a/anyOf/0/items", "/properties/a/anyOf/1/items"]
            .map(|p| Location::JsonPointer(p.into()))
            .iter()
            .collect::<Vec<_>>()
    );
    for w in compiled.warnings() {
        assert_eq!(w.kind(), CompileErrorKind::Limit, "{w}");
        assert!(w.to_string().ends_with("kept in the schema's order"), "{w}");
    }
    // Pieces of one object (an overlapping `oneOf`, through complements: each forbids the
    // other's name, leaving 14 properties) warn once, at its pointer: a grammar alone, where
    // no key set holds the pieces.
    let mut split = wide(15, json!({}), json!([]));
    split["oneOf"] = json!([{"required": ["p1"]}, {"required": ["p2"]}]);
    let pieces = compile_schema_with(&split, &fallback, &Limits::new()).unwrap();
    let kept: Vec<String> = pieces.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let accepts = accepter(&schema, &fallback);
    assert!(accepts(
        "{\"b\":{\"y\":true,\"x\":1},\"a\":[{\"p0\":1,\"p12\":2}]}"
    ));
    assert!(
        !accepts("{\"a\":[{\"p12\":2,\"p0\":1}]}"),
        "items keep their order"
    );
    assert!(!accepts("{\"a\":[],\"b\":{\"y\":true}}"), "x is required");
    agree_with(&schema, &fallback, 60, 80, 7);
    // Over Qwen3, bit for bit at every step: items in schema order, then out of it (refused).
    qwen3_agree_with(
        &schema,
        &fallback,
        &[
            "{\"b\":{\"y\":true,\"x\":1},\"a\":[{\"p0\":1,\"p5\":2,\"p12\":3},{\"p1\":4}]}",
            "{\"a\":[{\"p0\":1,\"p12\":2,\"p3\":4}]}",
        ],
    );
}

/// What fails past the lowering of each object (here the matcher's automaton of places, one
/// state per object in any order, past `automaton_states`) keeps the whole schema in its
/// order under `AnyOrSchema`, with a warning saying why; `Any` refuses it.
#[test]
fn what_fails_past_the_objects_keeps_the_whole_schema_in_order() {
    let level = |inner: Value| {
        object(
            json!({"a": {"type": "integer"}, "b": {"type": "integer"}, "c": inner}),
            json!(["a"]),
            json!(false),
        )
    };
    let schema = level(level(level(json!({"type": "integer"}))));
    // Three objects, one state too many.
    let limits = Limits::new().automaton_states(2);
    let engine = |order| {
        let config = formwork::EngineConfig::new().limits(limits.clone());
        let engine = Engine::with_config(vocab(), config);
        engine.compile_json_schema(&schema, &any_order().property_order(order))
    };
    let err = engine(PropertyOrder::Any).err().unwrap();
    assert_eq!(err.kind(), CompileErrorKind::Limit, "{err}");
    assert!(err.to_string().contains("automaton of the places"), "{err}");
    let compiled = engine(PropertyOrder::AnyOrSchema).unwrap();
    let [warning] = compiled.warnings() else {
        panic!("{:?}", compiled.warnings())
    };
    assert_eq!(warning.kind(), CompileErrorKind::Limit);
    assert!(
        warning
            .to_string()
            .ends_with("the whole schema kept in its order"),
        "{warning}"
    );
    let accepts = |text: &str| {
        let mut m = compiled.matcher();
        m.consume_bytes(text.as_bytes()).is_ok() && m.is_accepting()
    };
    assert!(accepts("{\"a\":1,\"c\":{\"a\":2,\"b\":3}}"));
    assert!(
        !accepts("{\"c\":{\"a\":2},\"a\":1}"),
        "in the schema's order"
    );
    assert!(!accepts("{\"a\":1,\"c\":{\"b\":3}}"), "a is required");
}

/// Objects wider than `max_any_order_properties` take their `2^n` grammars' rules from one
/// budget per schema: within it they compile in any order, past it they are refused, or kept
/// in the schema's order with a warning.
#[test]
fn wider_objects_share_one_budget_of_rules() {
    // Nine properties each (2^9 rules), told apart by their required name so that no two
    // share one grammar.
    let nine = |required: &str| wide(9, json!({}), json!([required]));
    let schema = object(
        json!({"a": nine("p0"), "b": nine("p1"), "c": nine("p2")}),
        json!([]),
        json!(false),
    );
    let grammar_alone =
        |options: &JsonSchemaOptions| compile_schema_with(&schema, options, &Limits::new());
    let any = JsonSchemaOptions::new().property_order(PropertyOrder::Any);
    assert!(grammar_alone(&any).unwrap().warnings.is_empty());
    let two = any.clone().wide_any_order_rules(1024);
    let err = grammar_alone(&two).unwrap_err();
    assert_eq!(err.kind(), CompileErrorKind::Limit, "{err}");
    assert!(
        err.to_string()
            .contains("9 properties in any order need 512 grammar rules (limit: 8 properties, and 1024 rules for wider objects, 1024 taken)"),
        "{err}"
    );
    let kept = grammar_alone(&two.property_order(PropertyOrder::AnyOrSchema)).unwrap();
    assert_eq!(kept.warnings.len(), 1, "{:?}", kept.warnings);
}

/// Forty properties: the `2^n` grammar refuses them, the key set takes them in any order.
#[test]
fn many_properties_in_any_order_compile_and_hold_their_names() {
    let schema = wide(40, json!({}), json!(["p0", "p39"]));
    let options = JsonSchemaOptions::new().property_order(PropertyOrder::Any);
    let err = compile_schema_with(&schema, &options, &Limits::new())
        .err()
        .unwrap();
    assert_eq!(err.kind(), CompileErrorKind::Limit, "{err}");
    let accepts = accepter(&schema, &options);
    // Past the names one object's bits hold: the `2^n` grammar's typed error, not a state
    // copied at every step.
    refused_as_too_wide(&wide(2000, json!({}), json!([])), &options, None);
    let reversed: Vec<String> = (0..40).rev().map(|i| format!("\"p{i}\":{i}")).collect();
    assert!(accepts(&format!("{{{}}}", reversed.join(","))));
    assert!(accepts("{\"p39\":1,\"p0\":2}"));
    assert!(!accepts("{\"p39\":1,\"p0\":2,\"p39\":3}"), "a name twice");
    assert!(!accepts("{\"p39\":1,\"p1\":2}"), "p0 is required");
    assert!(
        !accepts("{\"p39\":1,\"p40\":2,\"p0\":1}"),
        "p40 is not declared"
    );
}

/// Over Qwen3's vocabulary, bit for bit at every step of texts that write names out of
/// order, repeat one (refused), and close early (refused).
#[test]
fn masks_over_qwen3_equal_the_2n_grammar_at_every_step() {
    let schema = object(
        json!({
            "id": {"type": "integer"},
            "identity": {"type": "string"},
            "name": {"type": "string"},
            "names": {"type": "array", "items": {"type": "string"}},
            "tags": object(json!({"x": {"type": "integer"}, "y": {"type": "integer"}}), json!(["x", "y"]), json!(false))
        }),
        json!(["id", "name"]),
        json!(false),
    );
    qwen3_agree(
        &schema,
        &[
            "{\"tags\":{\"y\":1,\"x\":2},\"name\":\"n\",\"identity\":\"a\",\"id\":1}",
            "{\"names\":[\"a\",\"b\"],\"id\":1,\"name\":\"x\"}",
            "{\"name\":\"n\",\"id\":1,\"id\":2}",
            "{\"name\":\"n\",\"identity\":\"i\"}",
        ],
    );
}

/// Objects told apart by a scalar value (an integer or a short string), over Qwen3: tokens
/// that finish the value and write `,`, `}` or the next name are judged by the object the
/// value keeps.
#[test]
fn scalar_values_tell_objects_apart_over_qwen3() {
    let number = object(
        json!({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        json!(["a"]),
        json!(false),
    );
    let short = object(
        json!({"a": {"type": "string", "maxLength": 3}, "c": {"type": "integer"}}),
        json!(["c"]),
        json!(false),
    );
    qwen3_agree(
        &json!({"anyOf": [number, short]}),
        &[
            "{\"a\":\"xy\",\"c\":1}",
            "{\"b\":2,\"a\":12}",
            "{\"a\":\"x\",\"b\":1}",
            "{\"a\":1}",
            "{\"a\":\"x\"}",
            "{\"c\":3,\"a\":\"abcd\"}",
        ],
    );
}

/// Objects that give one name strings of other lengths, too long for an automaton of the
/// value (1,000 characters, each a JSON character's states), are told apart by counting the
/// string's characters: a string kept within `minLength..=maxLength` keeps the bounded
/// object, any other only the free one. Over Qwen3 against the `2^n` grammar, at the bounds
/// and with escapes (one character each); past the `2^n` limit, held by the count alone.
#[test]
fn long_strings_tell_objects_apart_by_their_length() {
    let bounded = a_beside(
        json!({"type": "string", "minLength": 1, "maxLength": 1000}),
        "b",
    );
    let free = a_beside(json!({"type": "string"}), "c");
    let most = "ab".repeat(500);
    let escaped = format!("{}\\n\\u00e9", "ab".repeat(499));
    let texts = [
        format!("{{\"a\":\"{most}\",\"b\":1}}"),
        format!("{{\"a\":\"{most}x\",\"b\":1}}"),
        format!("{{\"a\":\"{most}x\",\"c\":1}}"),
        format!("{{\"a\":\"{escaped}\",\"b\":1}}"),
        format!("{{\"a\":\"{escaped}x\",\"b\":1}}"),
        "{\"a\":\"\",\"b\":1}".to_string(),
        "{\"c\":1,\"a\":\"xy\"}".to_string(),
    ];
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    qwen3_agree(&json!({"anyOf": [bounded, free]}), &texts);
    let p0 = |value: Value, required: &str| wide(20, json!({"p0": value}), json!([required]));
    let wide_union = json!({"anyOf": [
        p0(json!({"type": "string", "maxLength": 1000}), "p1"),
        p0(json!({"type": "string"}), "p2"),
    ]});
    let accepts = accepter(&wide_union, &any_order());
    assert!(accepts(&format!("{{\"p0\":\"{most}\",\"p1\":1}}")));
    assert!(accepts(&format!("{{\"p0\":\"{escaped}\",\"p1\":1}}")));
    assert!(accepts("{\"p1\":1,\"p0\":\"\"}"));
    assert!(accepts(&format!("{{\"p2\":1,\"p0\":\"{most}x\"}}")));
    assert!(
        !accepts(&format!("{{\"p0\":\"{most}x\",\"p1\":1}}")),
        "1,001 characters require p2"
    );
    assert!(
        !accepts(&format!("{{\"p1\":1,\"p0\":\"{escaped}x\"}}")),
        "nor with escapes"
    );
}

/// [`long_strings_tell_objects_apart_by_their_length`] on random walks against the `2^n`
/// grammar, rollback included: a bound of 150 characters (already past an automaton of the
/// value), strings led past it by writing `abc` where the mask allows it.
#[test]
fn counted_lengths_agree_with_the_2n_grammar_on_walks() {
    let bounded = a_beside(json!({"type": "string", "maxLength": 150}), "b");
    let free = a_beside(json!({"type": "string"}), "c");
    let engine = Engine::new(vocab());
    let (exact, kept) = both(&engine, &json!({"anyOf": [bounded, free]}));
    let abc = engine.vocab().encode_greedy(b"abc").unwrap()[0];
    let walks = Walks {
        walks: 16,
        steps: 90,
        seed: 29,
    };
    walks_agree(
        engine.vocab(),
        &exact,
        &kept,
        walks,
        |rng, allowed| match rng.below(8) > 0 && allowed.contains(&abc) {
            true => abc,
            false => allowed[rng.below(allowed.len())],
        },
    );
}

/// An inner object's `}` drops the outer variants whose objects there it cannot close as
/// (here `{"a":1}` lacks the second's required `ab`), which the grammar, checking no
/// required name, still holds: a second discriminator's value (`ab`, a number or a string)
/// would then begin with bytes only the dropped variant admits, checked once whole. Such a
/// group is not held beside another discriminator: the `2^n` grammar is exact, and past its
/// limit the schema is refused.
#[test]
fn a_discriminator_of_objects_takes_no_other_beside_it() {
    let inner = |props: Value, required: &str| json!({"type": "object", "properties": props, "required": [required], "additionalProperties": false});
    let first = object(
        json!({"b": inner(json!({"a": {"type": "integer"}}), "a"), "ab": {"type": "number"}}),
        json!(["b"]),
        json!(false),
    );
    let second = object(
        json!({
            "b": inner(json!({"a": {"type": "integer"}, "ab": {"type": "integer"}}), "ab"),
            "ab": {"type": "string"},
            "c": {"type": "integer"}
        }),
        json!(["b"]),
        json!(false),
    );
    let union = json!({"anyOf": [first, second]});
    qwen3_agree(
        &union,
        &[
            "{\"b\":{\"a\":1},\"ab\":\"x\"}",
            "{\"b\":{\"a\":1,\"ab\":2},\"ab\":\"x\"}",
            "{\"ab\":1,\"b\":{\"ab\":2}}",
            "{\"c\":1,\"b\":{\"a\":1}}",
        ],
    );
    agree(&union, 40, 30, 41);
    let wide_union = json!({"anyOf": [
        wide(14, json!({"b": inner(json!({"a": {"type": "integer"}}), "a")}), json!(["b"])),
        wide(15, json!({"b": inner(json!({"ab": {"type": "integer"}}), "ab"), "p0": {"type": "string"}}), json!(["b"])),
    ]});
    refused_as_too_wide(
        &wide_union,
        &any_order(),
        Some("an object in any order at a place other objects share"),
    );
}

/// Objects told apart by an array of strings, over Qwen3: tokens that close an item, the
/// array and write `,`, `}` or the next name are judged by the objects the array keeps,
/// whatever its strings hold (a token is not read from its first closing quote alone).
#[test]
fn array_values_tell_objects_apart_over_qwen3() {
    let strings = |bound: &str| json!({"type": "array", "items": {"type": "string", bound: 2}});
    let short = a_beside(strings("maxLength"), "b");
    let long = a_beside(strings("minLength"), "c");
    qwen3_agree(
        &json!({"anyOf": [short, long]}),
        &[
            "{\"a\":[\"x\",\"yz\"],\"b\":1}",
            "{\"a\":[\"abc\"],\"c\":1}",
            "{\"a\":[\"ab\",\"cde\"],\"b\":1}",
            "{\"c\":1,\"a\":[\"x\"]}",
            "{\"a\":[\"x\"]}",
            "{\"a\":[],\"c\":2}",
        ],
    );
}

/// The masks of the engine and the oracle over Qwen3, bit for bit at every step of each of
/// `texts` (tokenized greedily) up to the first token the oracle refuses, which the engine
/// must refuse too.
#[track_caller]
fn qwen3_agree(schema: &Value, texts: &[&str]) {
    qwen3_agree_with(schema, &any_order(), texts);
}

/// [`qwen3_agree`] with these options.
#[track_caller]
fn qwen3_agree_with(schema: &Value, options: &JsonSchemaOptions, texts: &[&str]) {
    let engine = Engine::new(tokenizers::qwen3().clone());
    let (exact0, kept0) = grammar_and_engine(&engine, schema, options);
    let vocab = engine.vocab();
    for text in texts {
        let (mut exact, mut kept) = (exact0.clone(), kept0.clone());
        let tokens = vocab.encode_greedy(text.as_bytes()).unwrap();
        for (step, &t) in tokens.iter().enumerate() {
            let what = format!("{text} step {step}");
            let expected = mask_of(&mut exact, vocab);
            assert_same_mask(&mask_of(&mut kept, vocab), &expected, vocab, &what);
            if !expected.contains(t) {
                assert!(kept.consume(t).is_err(), "{what}");
                break;
            }
            exact.consume(t).unwrap();
            kept.consume(t).unwrap();
        }
    }
}

/// The `2^n` grammar's rules, one per set of properties written, are built as the sets are
/// written: built into the automata that reach them, every set was one automaton built on the
/// object's first use (JsonSchemaStore's execution-environment: 0.5 s of one mask). Walking
/// one object through grammars of 4 and of 8 object-valued properties, the second builds a
/// few times the states of the first (twice the names at each set), not the 16 times of their
/// sets.
#[test]
fn the_2n_grammar_builds_the_sets_written() {
    let vocab = tokenizers::qwen3();
    let states = |n: usize| {
        let objects: serde_json::Map<String, Value> = (0..n)
            .map(|i| (format!("p{i}"), json!({"type": "object"})))
            .collect();
        let schema = object(Value::Object(objects), json!([]), json!(false));
        let grammar = compile_schema_with(&schema, &any_order(), &Limits::new())
            .unwrap()
            .grammar;
        let config = formwork::cfg::CfgConfig::new().eager_states(0);
        let compiler = formwork::cfg::CfgCompiler::new(vocab, config);
        let g = compiler.compile(&grammar).unwrap();
        let mut m = g.matcher();
        for t in vocab.encode(r#"{"p3":{},"p0":{"a":1},"p2":{}}"#).unwrap() {
            mask_of(&mut m, vocab);
            m.consume(t).unwrap();
        }
        assert!(m.is_accepting());
        g.num_states()
    };
    let (states_4, states_8) = (states(4), states(8));
    // 231 -> 2,587 states when the sets were built into the automata reaching them.
    assert!(states_8 < 6 * states_4, "states {states_4} -> {states_8}");
}
