//! The JSON Schema keywords compiled by exact regular constructions: `multipleOf` (remainder
//! automata), `not` (complements of shapes), `if`/`then`/`else`, overlapping `oneOf`
//! branches, `enum`/`const` of objects and arrays, `dependencies` (and `dependentRequired`,
//! `dependentSchemas`), `propertyNames`, `contains`. Each is checked three ways: its language
//! against the `jsonschema` crate over a universe of JSON texts (a text is accepted exactly
//! when its value is valid, for the spellings the grammar writes), its masks against the
//! reference recognizer over the whole Qwen3 vocabulary at every step of valid and invalid
//! texts, and random walks whose outputs `jsonschema` must accept; llguidance where it
//! supports the keyword. Hostile sizes end in typed `Limit` errors.

use formwork::front::json_schema::{
    compile_schema, compile_schema_with, JsonSchemaOptions, PropertyOrder, Whitespace,
};
use formwork::ir::recognizer::Recognizer;
use formwork::ir::Grammar;
use formwork::{CompileErrorKind, Engine, LimitKind, Limits, Location, Matcher};
use formwork_testkit::oracle::{assert_same_mask, mask_of, Lang};
use formwork_testkit::parse_json;
use formwork_testkit::rng::Rng;
use formwork_testkit::stack::on_small_stack;
use formwork_testkit::tokenizers;
use formwork_testkit::walk::random_walk;
use serde_json::{json, Value};

fn compiled(schema: &Value, opts: &JsonSchemaOptions) -> Grammar {
    compile_schema(schema, opts)
        .unwrap_or_else(|e| panic!("{schema}: {e}"))
        .grammar
}

/// `jsonschema`'s validator, with `format` an assertion as formwork reads it.
fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::options()
        .should_validate_formats(true)
        .build(schema)
        .unwrap_or_else(|e| panic!("{schema}: {e}"))
}

/// For every text of `universe` that `spelled` says is in the grammar's spelling (compact,
/// canonical strings, plain numbers; integers as digits for an integer type), the grammar
/// accepts it exactly when `jsonschema` finds its value valid; any other text it accepts only
/// if valid. Returns how many spelled texts were valid, so a caller can check that the
/// universe tells something apart.
#[track_caller]
fn agrees_on(
    schema: &Value,
    opts: &JsonSchemaOptions,
    universe: &[String],
    spelled: impl Fn(&str) -> bool,
) -> usize {
    let lang = Lang::new(&compiled(schema, opts));
    let v = validator(schema);
    let mut valid = 0;
    for text in universe {
        let value: Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let expected = v.is_valid(&value);
        let accepted = lang.accepts(text);
        if !spelled(text) {
            assert!(
                !accepted || expected,
                "{schema}: accepts {text}, which is invalid"
            );
            continue;
        }
        valid += usize::from(expected);
        assert_eq!(
            accepted,
            expected,
            "{schema}: {text} is {} by jsonschema",
            if expected { "valid" } else { "invalid" }
        );
    }
    valid
}

/// [`agrees_on`] with every text spelled as the grammar writes it.
#[track_caller]
fn agrees(schema: &Value, opts: &JsonSchemaOptions, universe: &[String]) -> usize {
    agrees_on(schema, opts, universe, |_| true)
}

/// Plain number literals: integers in `range`, each with the fractions `.0`, `.5`, `.25`,
/// `.05`, `.50`, `.125`, and `-0`, `0.0`, `-0.00`.
fn numbers(range: std::ops::RangeInclusive<i64>) -> Vec<String> {
    let mut out: Vec<String> = ["-0", "0.0", "-0.00"].map(String::from).to_vec();
    for i in range {
        out.push(i.to_string());
        for frac in ["0", "5", "25", "05", "50", "125"] {
            let sign = if i < 0 { "-" } else { "" };
            if i == 0 {
                out.push(format!("0.{frac}"));
                out.push(format!("-0.{frac}"));
            } else {
                out.push(format!("{sign}{}.{frac}", i.abs()));
            }
        }
    }
    out
}

/// Walks the tokens of `text` through a matcher of `schema` and the reference recognizer of
/// its grammar, masks equal bit for bit at every step. A valid text ends accepted (EOS
/// allowed); an invalid one is refused by both at the same token, or is incomplete at the
/// end for both.
#[track_caller]
fn masks_match(engine: &Engine, schema: &Value, opts: &JsonSchemaOptions, text: &str, valid: bool) {
    let vocab = engine.vocab();
    let grammar = compiled(schema, opts);
    let constraint = engine
        .compile_json_schema(schema, opts)
        .unwrap_or_else(|e| panic!("{schema}: {e}"));
    let mut m = constraint.matcher();
    let rec = Recognizer::new(&grammar);
    let mut chart = rec.start();
    let tokens = vocab.encode(text).unwrap();
    for (step, &t) in tokens.iter().enumerate() {
        let expected = chart.mask(&rec, vocab);
        let what = format!("{schema} on {text}: step {step}");
        assert_same_mask(&mask_of(&mut m, vocab), &expected, vocab, &what);
        if !expected.contains(t) {
            assert!(!valid, "{what}: a valid text's token {t} is refused");
            return;
        }
        assert!(chart.push_token(&rec, vocab, t));
        m.consume(t).unwrap_or_else(|e| panic!("{what}: {e}"));
    }
    let what = format!("{schema} on {text}: the end");
    assert_same_mask(
        &mask_of(&mut m, vocab),
        &chart.mask(&rec, vocab),
        vocab,
        &what,
    );
    assert_eq!(m.is_accepting(), valid, "{what}");
    assert_eq!(chart.is_accepting(&rec), valid, "{what}");
}

/// Seeded random walks through the schema's matcher: each output that ends on EOS must be
/// a JSON text `jsonschema` accepts.
#[track_caller]
fn walks_validate(engine: &Engine, schema: &Value, opts: &JsonSchemaOptions, walks: usize) {
    let constraint = engine
        .compile_json_schema(schema, opts)
        .unwrap_or_else(|e| panic!("{schema}: {e}"));
    let v = validator(schema);
    let mut rng = Rng::new(0x5eed);
    let mut finished = 0;
    for _ in 0..walks {
        let mut m = constraint.matcher();
        let Some(out) = random_walk(engine.vocab(), &mut m, &mut rng, 60) else {
            continue;
        };
        finished += 1;
        let text = String::from_utf8(out).unwrap();
        let value: Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{schema}: {text}: {e}"));
        assert!(
            v.is_valid(&value),
            "{schema}: walked {text}, which is invalid"
        );
    }
    assert!(finished > 0, "{schema}: no walk finished");
}

fn engine() -> Engine {
    Engine::new(tokenizers::qwen3().clone())
}

fn limit_of(schema: &Value, limits: &Limits) -> (LimitKind, String) {
    let e = compile_schema_with(schema, &JsonSchemaOptions::new(), limits)
        .err()
        .unwrap_or_else(|| panic!("{schema} should fail"));
    let Location::JsonPointer(p) = e.location() else {
        panic!("no pointer: {e}")
    };
    (
        e.limit().unwrap_or_else(|| panic!("not a limit: {e}")).kind,
        p.clone(),
    )
}

#[test]
fn multiple_of_integers_with_bounds() {
    let opts = JsonSchemaOptions::new();
    let universe = numbers(-40..=40);
    for schema in [
        parse_json(r#"{"type": "integer", "multipleOf": 3}"#),
        parse_json(r#"{"type": "integer", "multipleOf": 12, "minimum": 0}"#),
        parse_json(
            r#"{"type": "integer", "multipleOf": 7, "minimum": -20, "exclusiveMaximum": 35}"#,
        ),
        parse_json(r#"{"type": "integer", "multipleOf": 2.5}"#),
        parse_json(r#"{"type": "integer", "multipleOf": 0.5, "maximum": 3}"#),
        parse_json(r#"{"type": "integer", "multipleOf": 10, "exclusiveMinimum": -30}"#),
        parse_json(r#"{"type": "integer", "multipleOf": 16, "minimum": -32, "maximum": 31}"#),
        parse_json(r#"{"type": "integer", "allOf": [{"multipleOf": 4}, {"multipleOf": 6}]}"#),
    ] {
        // Integers are written as digits.
        let digits = |t: &str| !t.contains('.');
        assert!(agrees_on(&schema, &opts, &universe, digits) > 0, "{schema}");
    }
}

#[test]
fn multiple_of_decimals_with_bounds() {
    let opts = JsonSchemaOptions::new();
    let universe = numbers(-12..=12);
    for schema in [
        parse_json(r#"{"type": "number", "multipleOf": 0.01}"#),
        parse_json(r#"{"type": "number", "multipleOf": 0.25, "minimum": 0.25}"#),
        parse_json(r#"{"type": "number", "multipleOf": 0.5, "minimum": -3, "maximum": 4.5}"#),
        parse_json(r#"{"type": "number", "multipleOf": 2.5, "exclusiveMaximum": 10}"#),
        parse_json(r#"{"type": "number", "multipleOf": 1}"#),
        parse_json(r#"{"type": "number", "multipleOf": 10, "exclusiveMaximum": 100}"#),
        parse_json(r#"{"type": "number", "multipleOf": 0.125, "minimum": -1.125}"#),
        parse_json(r#"{"type": "number", "multipleOf": 0.1, "maximum": 99.99}"#),
        parse_json(r#"{"type": "number", "multipleOf": 1.5, "exclusiveMinimum": -4.5}"#),
        parse_json(r#"{"multipleOf": 0.75}"#),
    ] {
        assert!(agrees(&schema, &opts, &universe) > 0, "{schema}");
    }
    // Exponent forms are not written (divisibility by their value is not regular).
    let l = Lang::new(&compiled(
        &parse_json(r#"{"type": "number", "multipleOf": 0.5}"#),
        &opts,
    ));
    l.yes(&["1.5", "100", "-2.50", "0"]);
    l.no(&["1e2", "15e-1", "1.5E0"]);
}

#[test]
fn multiple_of_masks_match_the_oracle() {
    let e = engine();
    let opts = JsonSchemaOptions::new();
    let cases = [
        (
            parse_json(r#"{"type": "integer", "multipleOf": 7, "minimum": 10}"#),
            "[14,700,7000]",
            "[14,15]",
        ),
        (
            parse_json(r#"{"type": "number", "multipleOf": 0.01, "minimum": 0}"#),
            "[12.34,0.5,100]",
            "[1.234]",
        ),
        (
            parse_json(r#"{"type": "number", "multipleOf": 2.5, "maximum": 1000}"#),
            "[997.5,-7.5,10.0]",
            "[1002.5]",
        ),
    ];
    for (item, valid, invalid) in cases {
        let schema = json!({"type": "array", "items": item});
        masks_match(&e, &schema, &opts, valid, true);
        masks_match(&e, &schema, &opts, invalid, false);
        walks_validate(&e, &schema, &opts, 20);
    }
}

#[test]
fn multiple_of_hostile_steps_end_in_limit_errors() {
    let limits = Limits::new();
    // A modulus far past the automaton budget, a step of more significant digits than a u64
    // holds, a tiny step with a large modulus, and steps whose least common multiple grows.
    for (schema, pointer) in [
        (
            parse_json(r#"{"type": "integer", "multipleOf": 1000003}"#),
            "/multipleOf",
        ),
        (
            parse_json(r#"{"type": "number", "multipleOf": 1.2345678901234567e-300}"#),
            "/multipleOf",
        ),
        (
            parse_json(r#"{"type": "number", "multipleOf": 123456789012345678901.0}"#),
            "/multipleOf",
        ),
        (
            parse_json(
                r#"{"type": "integer", "allOf": [{"multipleOf": 4099}, {"multipleOf": 4111}]}"#,
            ),
            "/allOf/0/multipleOf",
        ),
        (
            parse_json(r#"{"allOf": [{"multipleOf": 3e-300}, {"multipleOf": 7e300}]}"#),
            "/allOf/1/multipleOf",
        ),
    ] {
        let (kind, at) = limit_of(&schema, &limits);
        assert_eq!(
            (kind, at.as_str()),
            (LimitKind::AutomatonStates, pointer),
            "{schema}"
        );
    }
    // Within a smaller budget, a modest modulus is refused too.
    let (kind, at) = limit_of(
        &parse_json(r#"{"properties": {"n": {"type": "integer", "multipleOf": 97}}}"#),
        &Limits::new().automaton_states(50),
    );
    assert_eq!(
        (kind, at.as_str()),
        (LimitKind::AutomatonStates, "/properties/n/multipleOf")
    );
    // A step of zero or below is a malformed schema.
    let e = compile_schema(
        &parse_json(r#"{"multipleOf": 0}"#),
        &JsonSchemaOptions::new(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), CompileErrorKind::Invalid);
}

/// A universe of small JSON values as compact texts: scalars of each kind, short arrays,
/// and objects over the keys `a`, `b`, `c` (each absent or with one of a few values), each
/// object also with its keys reversed.
fn values() -> Vec<String> {
    let scalars = [
        "null", "true", "false", "0", "-1", "1", "2", "3", "10", "2.5", "-7.5", "0.25", r#""""#,
        r#""a""#, r#""ab""#, r#""b""#, r#""abc""#, r#""A1""#, r#""x""#,
    ];
    let mut out: Vec<String> = scalars.map(String::from).to_vec();
    for a in [
        "[]",
        "[1]",
        "[1,2]",
        r#"["a"]"#,
        "[null]",
        r#"[1,"a"]"#,
        "[[]]",
        "[{}]",
        "[1,2,3]",
        "[2,1]",
        r#"[{"a":1}]"#,
    ] {
        out.push(a.to_string());
    }
    let member_values = ["1", r#""x""#, "null", "true", "[]", "{}", "2.5"];
    let keys = ["a", "b", "c"];
    // Each key absent (index 0) or with one of the values.
    let choices = member_values.len() + 1;
    for code in 0..choices.pow(keys.len() as u32) {
        let mut members = Vec::new();
        let mut rest = code;
        for k in keys {
            let pick = rest % choices;
            rest /= choices;
            if pick > 0 {
                members.push(format!("\"{k}\":{}", member_values[pick - 1]));
            }
        }
        out.push(format!("{{{}}}", members.join(",")));
        if members.len() > 1 {
            members.reverse();
            out.push(format!("{{{}}}", members.join(",")));
        }
    }
    out.push(r#"{"d":1}"#.to_string());
    out.push(r#"{"a":1,"d":"x"}"#.to_string());
    out
}

/// Objects in any order, so that every key order of the universe is a spelling.
fn any_order() -> JsonSchemaOptions {
    JsonSchemaOptions::new().property_order(PropertyOrder::Any)
}

/// Checks each schema against `jsonschema` over [`values`]; each must accept something and
/// refuse something.
#[track_caller]
fn all_agree(schemas: &[Value]) {
    let universe = values();
    for schema in schemas {
        let valid = agrees(schema, &any_order(), &universe);
        assert!(
            valid > 0 && valid < universe.len(),
            "{schema}: {valid} valid"
        );
    }
}

#[test]
fn not_of_types_values_and_numbers() {
    all_agree(&[
        parse_json(r#"{"not": {"type": "integer"}}"#),
        parse_json(r#"{"not": {"type": ["string", "null"]}}"#),
        parse_json(r#"{"not": {"enum": [1, "a", null, [1, 2], {"a": 1}]}}"#),
        parse_json(r#"{"not": {"const": {"a": 1, "b": "x"}}}"#),
        parse_json(r#"{"not": {"const": [1, "a"]}}"#),
        parse_json(r#"{"not": {"enum": [true, 2.5, "ab", []]}}"#),
        parse_json(r#"{"not": {"minimum": 2}}"#),
        parse_json(r#"{"not": {"exclusiveMaximum": 2.5}}"#),
        parse_json(r#"{"not": {"type": "number", "minimum": 0, "maximum": 3}}"#),
        parse_json(r#"{"not": {"multipleOf": 2}}"#),
        parse_json(r#"{"type": "number", "not": {"multipleOf": 0.5}}"#),
        parse_json(r#"{"not": {"type": "integer", "multipleOf": 3}}"#),
    ]);
    // Integral values written with a fraction are integers: not admitted under `not` integer.
    let l = Lang::new(&compiled(
        &parse_json(r#"{"not": {"type": "integer"}}"#),
        &JsonSchemaOptions::new(),
    ));
    l.yes(&["2.5", "-0.001", r#""2""#]);
    l.no(&["2", "2.0", "-0", "0.000"]);
}

#[test]
fn not_of_strings_arrays_and_objects() {
    all_agree(&[
        parse_json(r#"{"not": {"pattern": "^a"}}"#),
        parse_json(r#"{"type": "string", "not": {"pattern": "b", "minLength": 2}}"#),
        parse_json(r#"{"not": {"type": "string", "maxLength": 1}}"#),
        parse_json(r#"{"not": {"format": "ipv4"}}"#),
        parse_json(r#"{"not": {"minItems": 2}}"#),
        parse_json(r#"{"not": {"prefixItems": [{"type": "integer"}], "items": false}}"#),
        parse_json(r#"{"not": {"type": "array", "prefixItems": [{}, {"type": "integer"}]}}"#),
        parse_json(r#"{"not": {"required": ["a", "b"]}}"#),
        parse_json(r#"{"not": {"properties": {"a": {"type": "integer"}}}}"#),
        parse_json(r#"{"not": {"additionalProperties": false, "properties": {"a": {}}}}"#),
        parse_json(
            r#"{"not": {"additionalProperties": {"type": "string"}, "properties": {"b": true}}}"#,
        ),
        parse_json(r#"{"not": {"maxProperties": 1}}"#),
        parse_json(r#"{"not": {"type": "object", "minProperties": 2, "required": ["c"]}}"#),
        parse_json(r#"{"type": "object", "properties": {"a": {"not": {"type": "null"}}}}"#),
        parse_json(
            r#"{"not": {"properties": {"a": {"not": {"type": "null"}}}, "required": ["a"]}}"#,
        ),
        parse_json(r#"{"not": {"items": {"type": "integer"}}}"#),
        parse_json(
            r#"{"not": {"prefixItems": [{"type": "integer"}], "items": {"type": "string"}}}"#,
        ),
        parse_json(r#"{"not": {"patternProperties": {"^[ab]$": {"type": "integer"}}}}"#),
        parse_json(
            r#"{"not": {"patternProperties": {"^[ab]$": {"type": "integer"}, "^[bc]$": false}}}"#,
        ),
        parse_json(
            r#"{"not": {"patternProperties": {"^a": true}, "additionalProperties": false}}"#,
        ),
        parse_json(
            r#"{"not": {"properties": {"a": true}, "patternProperties": {"b": {"type": "null"}}, "additionalProperties": {"type": "string"}}}"#,
        ),
    ]);
}

/// Complements meeting complements: several witnesses in one array or object ("an item
/// that is not a string and one that is not an integer").
#[test]
fn not_with_several_witnesses() {
    all_agree(&[
        parse_json(
            r#"{"type": "array", "not": {"anyOf": [{"items": {"type": "string"}}, {"items": {"type": "integer"}}]}}"#,
        ),
        parse_json(
            r#"{"allOf": [{"not": {"items": {"type": "integer"}}}, {"not": {"items": {"type": ["integer", "string"]}}}]}"#,
        ),
        parse_json(
            r#"{"type": "object", "allOf": [{"not": {"additionalProperties": {"type": "integer"}}}, {"not": {"additionalProperties": {"type": "null"}}}]}"#,
        ),
        parse_json(
            r#"{"type": "object", "allOf": [{"not": {"patternProperties": {"^[ab]$": {"type": "integer"}}}}, {"not": {"additionalProperties": {"type": "null"}, "properties": {"a": true}}}]}"#,
        ),
        parse_json(
            r#"{"oneOf": [{"items": {"type": "integer"}}, {"items": {"type": "string"}}, {"items": {"type": "null"}}]}"#,
        ),
        // A required name a witness's pattern matches is itself the witness.
        parse_json(
            r#"{"allOf": [{"not": {"patternProperties": {"^a": false}}}, {"required": ["a"]}]}"#,
        ),
        parse_json(
            r#"{"type": "object", "allOf": [{"not": {"patternProperties": {"^[ab]$": {"type": "integer"}}}}, {"required": ["b"]}, {"maxProperties": 1}]}"#,
        ),
    ]);
}

#[test]
fn not_of_unions_intersections_and_references() {
    all_agree(&[
        parse_json(r#"{"not": {"anyOf": [{"required": ["a"]}, {"type": "string"}]}}"#),
        parse_json(r#"{"not": {"allOf": [{"required": ["a"]}, {"required": ["b"]}]}}"#),
        parse_json(r#"{"not": {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}}"#),
        parse_json(r#"{"not": {"not": {"type": "string", "minLength": 2}}}"#),
        parse_json(r#"{"not": {"not": {"not": {"required": ["c"]}}}}"#),
        // Its undeclared properties refused and `a` valued the same: the two read as one
        // constraint, and the branch with `a` was dropped as implied by the one without.
        parse_json(
            r#"{"not": {"not": {"properties": {"a": {"type": "boolean"}}, "additionalProperties": false}}}"#,
        ),
        parse_json(
            r##"{"not": {"$ref": "#/$defs/x"}, "$defs": {"x": {"type": "object", "required": ["a"]}}}"##,
        ),
        parse_json(
            r##"{"$defs": {"x": {"not": {"$ref": "#/$defs/y"}}, "y": {"type": ["object", "array"]}}, "$ref": "#/$defs/x"}"##,
        ),
        parse_json(r##"{"type": "object", "properties": {"a": {"not": {"$ref": "#"}}}}"##),
        parse_json(
            r#"{"allOf": [{"not": {"required": ["a"]}}, {"not": {"required": ["b"]}}, {"type": "object"}]}"#,
        ),
    ]);
}

#[test]
fn if_then_else() {
    all_agree(&[
        parse_json(
            r#"{"if": {"properties": {"a": {"const": 1}}}, "then": {"required": ["b"]}, "else": {"required": ["c"]}}"#,
        ),
        parse_json(r#"{"if": {"type": "string"}, "then": {"minLength": 2}}"#),
        parse_json(r#"{"if": {"minimum": 2}, "else": {"const": 0}}"#),
        parse_json(
            r#"{"if": {"required": ["a"]}, "then": {"properties": {"b": false}}, "else": {"required": ["b"]}}"#,
        ),
        parse_json(
            r#"{"type": "object", "if": {"properties": {"a": {"type": "string"}}, "required": ["a"]}, "then": {"additionalProperties": false, "properties": {"a": {}, "b": {}}}}"#,
        ),
        parse_json(
            r#"{"if": {"properties": {"a": {"enum": [1, "x"]}}}, "then": {"if": {"required": ["b"]}, "then": {"required": ["c"]}}, "else": {"type": "object", "maxProperties": 1}}"#,
        ),
        // Chains of `then`s: tags that exclude each other (`required`), one that does not
        // (absent `a` passes its `if`), variants that are unions.
        parse_json(
            r#"{"allOf": [
            {"if": {"properties": {"a": {"const": 1}}, "required": ["a"]}, "then": {"properties": {"b": {"type": "null"}}}},
            {"if": {"properties": {"a": {"const": "x"}}, "required": ["a"]}, "then": {"required": ["b"]}},
            {"if": {"properties": {"a": {"const": null}}}, "then": {"properties": {"c": false}}},
            {"if": {"properties": {"a": {"const": true}}, "required": ["a"]}, "then": {"anyOf": [{"required": ["c"]}, {"properties": {"b": {"type": "array"}}}]}}
        ]}"#,
        ),
        parse_json(
            r#"{"type": "object", "allOf": [
            {"if": {"properties": {"b": {"const": 1}}}, "then": {"anyOf": [{"required": ["a"]}, {"required": ["c"]}]}},
            {"if": {"properties": {"b": {"const": "x"}}}, "then": {"anyOf": [{"required": ["a"]}, {"properties": {"c": {"type": "string"}}}]}}
        ]}"#,
        ),
    ]);
    // Without `then` and `else`, `if` constrains nothing.
    let l = Lang::new(&compiled(
        &parse_json(r#"{"if": {"type": "string"}}"#),
        &JsonSchemaOptions::new(),
    ));
    l.yes(&["1", r#""a""#]);
}

#[test]
fn dependencies_and_dependent_keywords() {
    all_agree(&[
        parse_json(r#"{"dependencies": {"a": ["b"]}}"#),
        parse_json(r#"{"dependencies": {"a": ["b", "c"], "b": ["c"]}}"#),
        parse_json(r#"{"dependencies": {"a": ["c"], "b": ["c"], "c": ["a"]}}"#),
        parse_json(
            r#"{"dependencies": {"a": {"properties": {"b": {"type": "integer"}}, "required": ["b"]}}}"#,
        ),
        parse_json(
            r#"{"type": "object", "dependencies": {"a": ["b"], "c": {"maxProperties": 2}}}"#,
        ),
        parse_json(
            r#"{"type": "object", "properties": {"a": {}, "b": {"type": "string"}}, "additionalProperties": false, "dependencies": {"a": ["b"], "c": ["a"]}}"#,
        ),
        parse_json(r#"{"required": ["a"], "dependencies": {"a": ["c"], "b": ["a"]}}"#),
        parse_json(r#"{"properties": {"c": false}, "dependencies": {"a": ["c"]}}"#),
        parse_json(r#"{"dependentRequired": {"a": ["b"], "b": ["a"]}}"#),
        parse_json(
            r#"{"dependentSchemas": {"c": {"properties": {"a": {"const": 1}}}}, "dependentRequired": {"c": ["b"]}}"#,
        ),
        parse_json(r#"{"dependencies": {"a": false, "b": true, "c": []}}"#),
        parse_json(r#"{"not": {"dependencies": {"a": ["b"]}}}"#),
        parse_json(
            r#"{"if": {"dependencies": {"a": ["b"]}}, "then": {"required": ["c"]}, "else": {"type": "object", "maxProperties": 2}}"#,
        ),
        parse_json(
            r##"{"anyOf": [{"type": "string"}, {"$ref": "#/$defs/o"}], "$defs": {"o": {"type": "object", "properties": {"c": {"type": "null"}}}}, "dependencies": {"b": ["c"]}}"##,
        ),
        parse_json(r#"{"enum": [{"a": 1}, {"a": 1, "b": "x"}, 1], "dependencies": {"a": ["b"]}}"#),
        // Draft 7 has no `dependentRequired`: an annotation there.
        parse_json(
            r#"{"$schema": "http://json-schema.org/draft-07/schema#", "dependentRequired": {"a": ["b"]}, "dependencies": {"b": ["c"]}}"#,
        ),
    ]);
}

#[test]
fn property_names() {
    all_agree(&[
        parse_json(r#"{"propertyNames": {"pattern": "^[ab]$"}}"#),
        parse_json(
            r#"{"propertyNames": {"enum": ["a", "c"]}, "properties": {"b": {"type": "integer"}}}"#,
        ),
        parse_json(r#"{"propertyNames": {"maxLength": 0}}"#),
        parse_json(r#"{"propertyNames": false}"#),
        parse_json(r#"{"propertyNames": {"not": {"const": "b"}}, "required": ["b"]}"#),
        parse_json(
            r#"{"type": "object", "propertyNames": {"pattern": "^[a-c]$"}, "patternProperties": {"^b": {"type": "integer"}}, "additionalProperties": {"type": "null"}}"#,
        ),
        parse_json(
            r##"{"type": "object", "propertyNames": {"$ref": "#/$defs/n"}, "$defs": {"n": {"enum": ["a", "b"]}}}"##,
        ),
        parse_json(r#"{"propertyNames": {"anyOf": [{"const": "a"}, {"pattern": "^c"}]}}"#),
        parse_json(
            r#"{"allOf": [{"propertyNames": {"pattern": "^[ab]"}}, {"propertyNames": {"pattern": "[bd]$"}}]}"#,
        ),
        parse_json(
            r#"{"type": "object", "propertyNames": {"enum": ["a", "b", "d"]}, "additionalProperties": false, "properties": {"a": {}, "c": {}, "d": {"type": "integer"}}}"#,
        ),
        parse_json(r#"{"dependencies": {"a": {"propertyNames": {"enum": ["a", "b"]}}}}"#),
        parse_json(
            r#"{"propertyNames": {"minLength": 1, "maxLength": 1, "not": {"enum": ["c"]}}, "minProperties": 2}"#,
        ),
        // Complements: some name the names' schema refuses (an undeclared one, a witness among
        // the refused names; a declared one, present).
        parse_json(r#"{"not": {"propertyNames": {"pattern": "^[ab]$"}}}"#),
        parse_json(
            r#"{"type": "object", "not": {"propertyNames": {"enum": ["a", "b"]}, "properties": {"c": {"type": "integer"}}}}"#,
        ),
        parse_json(
            r#"{"allOf": [{"not": {"propertyNames": {"not": {"const": "a"}}}}, {"not": {"propertyNames": {"not": {"const": "b"}}}}]}"#,
        ),
        parse_json(
            r#"{"type": "object", "not": {"anyOf": [{"propertyNames": {"not": {"enum": ["a", "c"]}}}, {"propertyNames": {"not": {"enum": ["b", "c"]}}}]}}"#,
        ),
        parse_json(
            r#"{"if": {"propertyNames": {"enum": ["a"]}}, "then": {"minProperties": 1}, "else": {"required": ["b"]}}"#,
        ),
        parse_json(
            r#"{"type": "object", "oneOf": [{"propertyNames": {"enum": ["a", "b"]}}, {"propertyNames": {"enum": ["b", "c"]}}]}"#,
        ),
        parse_json(
            r#"{"type": "object", "not": {"propertyNames": {"not": {"const": "b"}}}, "patternProperties": {"^[bc]$": {"type": "null"}}}"#,
        ),
    ]);
    // Names are strings: a schema every string passes constrains nothing.
    let universe = values();
    for schema in [
        parse_json(r#"{"propertyNames": {"type": "string"}}"#),
        parse_json(
            r#"{"$schema": "http://json-schema.org/draft-04/schema#", "propertyNames": {"const": "a"}}"#,
        ),
    ] {
        assert_eq!(
            agrees(&schema, &any_order(), &universe),
            universe.len(),
            "{schema}"
        );
    }
}

#[test]
fn contains() {
    all_agree(&[
        parse_json(r#"{"contains": {"type": "string"}}"#),
        parse_json(r#"{"contains": {"minimum": 2}, "items": {"type": "integer"}}"#),
        parse_json(r#"{"prefixItems": [{"type": "integer"}], "contains": {"type": "string"}}"#),
        parse_json(
            r#"{"prefixItems": [{"type": "integer"}, {}], "items": false, "contains": {"const": 2}}"#,
        ),
        parse_json(r#"{"contains": {"const": 1}, "maxItems": 1}"#),
        parse_json(r#"{"not": {"contains": {"type": "integer"}}}"#),
        parse_json(r#"{"allOf": [{"contains": {"const": 1}}, {"contains": {"const": 2}}]}"#),
        parse_json(
            r#"{"type": "array", "contains": {"type": "integer"}, "minContains": 0, "items": {"type": "null"}}"#,
        ),
        parse_json(r#"{"type": "array", "contains": {"type": "integer"}, "minContains": 1}"#),
        parse_json(r#"{"contains": {"contains": {"type": "object"}}}"#),
    ]);
    let universe = values();
    let draft4 = parse_json(
        r#"{"$schema": "http://json-schema.org/draft-04/schema#", "contains": {"const": 1}}"#,
    );
    assert_eq!(agrees(&draft4, &any_order(), &universe), universe.len());
    for key in ["minContains", "maxContains"] {
        let counted = json!({"contains": {"type": "integer"}, key: 2});
        let e = compile_schema(&counted, &JsonSchemaOptions::new()).unwrap_err();
        assert_eq!(e.kind(), CompileErrorKind::Unsupported, "{e}");
    }
}

/// Draft 4 and 6 have no `if`, draft 4 no `propertyNames`: annotations there, as validators
/// read them.
#[test]
fn keywords_of_later_drafts_are_annotations_in_earlier_ones() {
    let universe = values();
    for draft in [
        "http://json-schema.org/draft-04/schema#",
        "https://json-schema.org/draft-06/schema",
    ] {
        let schema = json!({"$schema": draft, "type": "string", "if": {"minLength": 2}, "then": {"pattern": "^a"}});
        assert_eq!(agrees(&schema, &any_order(), &universe), 7, "{schema}");
    }
    let schema = parse_json(
        r#"{"$schema": "http://json-schema.org/draft-07/schema#", "type": "string", "if": {"minLength": 2}, "then": {"pattern": "^a"}}"#,
    );
    assert_eq!(agrees(&schema, &any_order(), &universe), 6, "{schema}");
}

/// Before 2019-09 the keywords beside a `$ref` are not read (MaskBench drupal-libraries:
/// `additionalProperties: false` beside a reference to the object declaring the names); from
/// 2019-09 on, and without `$schema`, they constrain the value too.
#[test]
fn keywords_beside_a_reference_are_read_from_draft_2019_09() {
    let beside = |draft: Option<&str>| {
        let mut schema = json!({
            "$defs": {"o": {"type": "object", "properties": {"a": {"type": "integer"}}}},
            "additionalProperties": {"$ref": "#/$defs/o", "required": ["a"],
                "properties": {"b": {"type": "null"}}}
        });
        if let Some(d) = draft {
            schema["$schema"] = json!(d);
        }
        schema
    };
    let universe: Vec<String> = values().iter().map(|t| format!(r#"{{"x":{t}}}"#)).collect();
    let valid: Vec<usize> = [
        Some("http://json-schema.org/draft-04/schema#"),
        Some("http://json-schema.org/draft-06/schema#"),
        Some("http://json-schema.org/draft-07/schema#"),
        Some("https://json-schema.org/draft/2019-09/schema"),
        None,
    ]
    .map(|d| agrees(&beside(d), &any_order(), &universe))
    .to_vec();
    // Read beside the reference, `required` and `b` refuse objects the reference admits.
    assert!(
        valid[0] == valid[1] && valid[1] == valid[2] && valid[3] == valid[4],
        "{valid:?}"
    );
    assert!(valid[3] > 0 && valid[3] < valid[2], "{valid:?}");
}

#[test]
fn one_of_with_overlapping_branches() {
    all_agree(&[
        parse_json(r#"{"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}"#),
        parse_json(
            r#"{"oneOf": [{"required": ["a"]}, {"properties": {"b": {"type": "string"}}}]}"#,
        ),
        parse_json(
            r#"{"oneOf": [{"additionalProperties": false, "properties": {"a": {}}}, {"required": ["b"]}]}"#,
        ),
        parse_json(r#"{"oneOf": [{"type": "string"}, {"enum": ["a", "b", 1]}]}"#),
        parse_json(r#"{"oneOf": [{"multipleOf": 2}, {"multipleOf": 3}]}"#),
        parse_json(
            r##"{"oneOf": [{"$ref": "#/$defs/p"}, {"$ref": "#/$defs/q"}], "$defs": {
            "p": {"type": "object", "properties": {"a": {"type": "integer"}}},
            "q": {"type": "object", "properties": {"b": {"type": "null"}}, "required": ["b"]}
        }}"##,
        ),
        parse_json(
            r#"{"oneOf": [
            {"properties": {"a": {"enum": [1]}}, "required": ["b"]},
            {"properties": {"a": {"enum": ["x"]}}, "required": ["c"]},
            {"properties": {"a": {"enum": [null]}}, "required": ["b", "c"]}
        ]}"#,
        ),
        parse_json(
            r#"{"type": "object", "oneOf": [
            {"properties": {"a": {"type": "array", "items": {"minimum": 1}}}, "required": ["a"]},
            {"additionalProperties": false, "properties": {"b": {"type": "string", "minLength": 1}}}
        ]}"#,
        ),
        parse_json(
            r#"{"oneOf": [{"minProperties": 1}, {"required": ["c"]}, {"maxProperties": 2}]}"#,
        ),
        parse_json(
            r#"{"oneOf": [{"not": {"required": ["a"]}}, {"additionalProperties": {"type": "integer"}}]}"#,
        ),
    ]);
}

/// Branches that overlap alone but not beside their siblings (`required`, `type`, a `$ref`,
/// `allOf`): the `oneOf` is their union there, and what the siblings let through both
/// branches (`"b"` both accept when `a` is `1`) is still refused.
#[test]
fn one_of_told_apart_by_siblings() {
    all_agree(&[
        parse_json(
            r#"{"type": "object", "required": ["a"], "oneOf": [
            {"properties": {"a": {"const": 1}, "b": {"type": "string"}}},
            {"properties": {"a": {"const": "x"}, "b": {"type": "null"}}}
        ]}"#,
        ),
        parse_json(
            r##"{"$ref": "#/$defs/tagged", "$defs": {"tagged": {"required": ["a", "b"]}},
            "oneOf": [
                {"properties": {"a": {"enum": [1, true]}}},
                {"properties": {"a": {"enum": [null]}}},
                {"properties": {"b": {"type": "string"}}}
            ]}"##,
        ),
        parse_json(
            r#"{"allOf": [{"type": "array"}, {"minItems": 1}], "oneOf": [
            {"items": {"type": "integer"}},
            {"items": {"type": "string"}}
        ]}"#,
        ),
        parse_json(
            r#"{"type": ["object", "string"], "required": ["a"], "oneOf": [
            {"properties": {"a": {"const": 1}}},
            {"properties": {"a": {"const": 2}}},
            {"maxLength": 1}
        ]}"#,
        ),
    ]);
}

/// Branches told apart only by what is known of the value from outside their schema: the
/// object a dependency applies to (with its trigger), an earlier part of an `allOf`, the
/// schema an `anyOf` branch sits in. Alone they overlap (objects without `a`), and their
/// complements are out of reach (`uniqueItems`): each compiles only if the branches are seen
/// apart there, and is then exact.
#[test]
fn one_of_told_apart_from_outside() {
    let branches = json!([
        {"properties": {"a": {"const": 1}, "b": {"uniqueItems": true, "items": {"enum": [1, 2]}}}},
        {"properties": {"a": {"const": "x"}, "b": {"uniqueItems": true, "items": {"const": 1}}}}
    ]);
    all_agree(&[
        json!({"type": "object", "required": ["a"], "dependencies": {"a": {"oneOf": branches}}}),
        json!({"type": "object", "dependencies": {"a": {"oneOf": branches}}}),
        json!({"allOf": [{"type": "object", "required": ["a"]}, {"oneOf": branches}]}),
        json!({"type": "object", "required": ["a"],
            "anyOf": [{"oneOf": branches}, {"required": ["c"]}]}),
        json!({"type": "object", "required": ["a"], "allOf": [{"allOf": [{"oneOf": branches}]}]}),
    ]);
}

/// Random `oneOf`s beside random siblings, over the keys `a`, `b`, `c` of the universe: the
/// branches give a key a `const`, a type or an `enum`, require keys or close the object, and
/// the siblings (a type, `required`, a `$ref`, an `allOf`) may or may not tell them apart;
/// or the `oneOf` is a part of an `allOf`, a branch of an `anyOf` or a dependency's schema,
/// and what is known from outside it may or may not.
/// Each compiled schema agrees with `jsonschema` over [`values`]; compile errors (complements
/// out of reach) are allowed, a wrong language is not.
#[test]
fn one_of_beside_random_siblings() {
    let mut rng = Rng::new(37);
    let universe = values();
    let keys = ["a", "b", "c"];
    let value_schema = |rng: &mut Rng| -> Value {
        match rng.below(5) {
            0 => {
                let values = [json!(1), json!("x"), Value::Null, json!(true)];
                json!({"const": values[rng.below(4)]})
            }
            1 => {
                let kind = ["integer", "string", "null", "array", "object"][rng.below(5)];
                json!({ "type": kind })
            }
            2 => {
                let values = [json!([1, "x"]), json!([null, 2.5]), json!([true, "x", 1])];
                json!({"enum": values[rng.below(3)]})
            }
            3 => json!({"not": {"type": "null"}}),
            _ => json!({}),
        }
    };
    let object_part = |rng: &mut Rng| -> Value {
        let mut o = serde_json::Map::new();
        let mut properties = serde_json::Map::new();
        for k in keys {
            if rng.below(2) == 0 {
                properties.insert(k.into(), value_schema(rng));
            }
        }
        o.insert("properties".into(), Value::Object(properties));
        if rng.below(3) == 0 {
            o.insert("required".into(), json!([keys[rng.below(3)]]));
        }
        if rng.below(4) == 0 {
            o.insert("additionalProperties".into(), json!(false));
        }
        if rng.below(4) == 0 {
            o.insert(
                "type".into(),
                Value::from(["object", "string"][rng.below(2)]),
            );
        }
        Value::Object(o)
    };
    let mut compiled = 0;
    for _ in 0..200 {
        let branches: Vec<Value> = (0..2 + rng.below(3))
            .map(|_| object_part(&mut rng))
            .collect();
        let one_of = json!({ "oneOf": branches });
        // Beside its siblings, or inside a part of an `allOf`, an `anyOf` branch, a dependency.
        let schema = match rng.below(7) {
            0 => json!({"type": "object", "required": [keys[rng.below(3)]], "oneOf": branches}),
            1 => json!({"allOf": [object_part(&mut rng)], "oneOf": branches}),
            2 => json!({"$ref": "#/$defs/s", "$defs": {"s": object_part(&mut rng)},
                "oneOf": branches}),
            3 => json!({"allOf": [object_part(&mut rng), one_of]}),
            4 => json!({"required": [keys[rng.below(3)]],
                "anyOf": [one_of, object_part(&mut rng)]}),
            5 => {
                let mut schema = object_part(&mut rng);
                schema["dependencies"] = json!({ keys[rng.below(3)]: one_of });
                schema
            }
            _ => {
                let mut schema = object_part(&mut rng);
                schema["oneOf"] = one_of["oneOf"].clone();
                schema
            }
        };
        if compile_schema(&schema, &any_order()).is_err() {
            continue;
        }
        agrees(&schema, &any_order(), &universe);
        compiled += 1;
    }
    assert!(compiled > 100, "{compiled} of 200 compiled");
}

/// Recursive `oneOf` branches told apart by a discriminator: the references are still being
/// read when the `oneOf` is, and their schemas are read once more to see them disjoint, so no
/// complement is needed.
#[test]
fn one_of_recursive_discriminated_branches() {
    let schema = parse_json(
        r##"{
        "$defs": {
            "csv": {"type": "object", "additionalProperties": false, "required": ["@type"],
                "properties": {"@type": {"enum": ["csv"]}, "next": {"$ref": "#/$defs/either"}}},
            "direct": {"type": "object", "additionalProperties": false, "required": ["@type"],
                "properties": {"@type": {"enum": ["direct"]}, "next": {"$ref": "#/$defs/either"}}},
            "either": {"oneOf": [{"$ref": "#/$defs/csv"}, {"$ref": "#/$defs/direct"}]}
        },
        "$ref": "#/$defs/either"
    }"##,
    );
    let universe: Vec<String> = [
        r#"{"@type":"csv"}"#,
        r#"{"@type":"direct","next":{"@type":"csv"}}"#,
        r#"{"@type":"csv","next":{"@type":"direct","next":{"@type":"csv"}}}"#,
        r#"{"@type":"other"}"#,
        r#"{"@type":"csv","next":{}}"#,
        r#"{"next":{"@type":"csv"}}"#,
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(agrees(&schema, &JsonSchemaOptions::new(), &universe), 3);
}

/// A shape met with a reference still being read, at one place reached twice (the root's
/// `additionalProperties` and the definition's own, MaskBench resjson): each meeting is an
/// entry of its own, named alike, and each gets its own rule (it was a "defined twice" error).
#[test]
fn recursion_met_twice_at_one_place() {
    let schema = parse_json(
        r##"{
        "type": "object",
        "additionalProperties": {"minProperties": 1,
            "anyOf": [{"type": "string"}, {"$ref": "#/definitions/resource"}]},
        "definitions": {"resource": {"type": "object",
            "additionalProperties": {"minProperties": 1,
                "anyOf": [{"type": "string"}, {"$ref": "#/definitions/resource"}]}}}
    }"##,
    );
    let universe: Vec<String> = [
        r#"{}"#,
        r#"{"a":"b"}"#,
        r#"{"a":{"b":"c"}}"#,
        r#"{"a":{"b":{"c":"d"},"e":"f"}}"#,
        r#"{"a":{}}"#,
        r#"{"a":{"b":{}}}"#,
        r#"{"a":1}"#,
        r#"{"a":{"b":[]}}"#,
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(agrees(&schema, &JsonSchemaOptions::new(), &universe), 4);
}

/// A recursion through a `oneOf` whose other branches are of other kinds (MaskBench
/// o83258, pulumi), or of any kind: asking whether the branches meet meets the reference
/// being built, its second reading meets it again, and the complements the second reading
/// makes wait on it. Each was refused as "a `$ref` cycle with no object or array in
/// between": an intersection waiting on an entry being built was not taken as being built
/// itself; a value checked against such an entry failed rather than left the question open
/// (the branches may then meet) or the meeting waiting for the entry; and a complement
/// waiting on one (or an intersection) could not say which values it holds. The schema's own
/// `type` answers that for a value of another kind.
#[test]
fn recursion_through_one_of_beside_other_kinds() {
    let element = parse_json(
        r##"{"$ref": "#/$defs/e", "$defs": {"e": {"type": "object", "required": ["t"],
            "additionalProperties": false, "properties": {"t": {"type": "string"},
            "c": {"oneOf": [{"type": "string"}, {"$ref": "#/$defs/e"},
                {"type": "array", "items": {"$ref": "#/$defs/e"}}]}}}}}"##,
    );
    let elements: Vec<String> = [
        r#"{"t":"a"}"#,
        r#"{"t":"a","c":"x"}"#,
        r#"{"t":"a","c":{"t":"b"}}"#,
        r#"{"t":"a","c":[{"t":"b","c":"x"},{"t":"c","c":[]}]}"#,
        r#"{"t":"a","c":{"t":"b","c":{"t":"c","c":"y"}}}"#,
        r#"{"t":"a","c":1}"#,
        r#"{"t":"a","c":{}}"#,
        r#"{"t":"a","c":["x"]}"#,
        r#"{"c":"x"}"#,
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(agrees(&element, &JsonSchemaOptions::new(), &elements), 5);
    let config = |simple: &str, typed: &str| {
        parse_json(&format!(
            r##"{{"$ref": "#/$defs/c", "$defs": {{"s": {{"enum": ["string", "array"]}},
                "c": {{{typed} "required": ["type"], "additionalProperties": false,
                    "properties": {{"type": {{"oneOf": [{simple}, {{"$ref": "#/$defs/c"}}]}}}}}}}}}}"##
        ))
    };
    let configs: Vec<String> = [
        r#"{"type":"string"}"#,
        r#"{"type":{"type":"array"}}"#,
        r#"{"type":{"type":{"type":"string"}}}"#,
        r#"{"type":"number"}"#,
        r#"{"type":{}}"#,
        r#"{"type":{"type":1}}"#,
        r#"{}"#,
    ]
    .map(String::from)
    .to_vec();
    // Without a type, the values of the `enum` are configurations too: both branches.
    for (typed, valid) in [(r#""type": "object","#, 3), ("", 2)] {
        for simple in [
            r##"{"$ref": "#/$defs/s"}"##,
            r#"{"enum": ["string", "array"]}"#,
        ] {
            let schema = config(simple, typed);
            assert_eq!(
                agrees(&schema, &JsonSchemaOptions::new(), &configs),
                valid,
                "{schema}"
            );
        }
    }
    // The recursion in an intersection of references (an `allOf`), read from its parts.
    let both = parse_json(
        r##"{"$ref": "#/$defs/c", "$defs": {"d": {"required": ["x"]}, "c": {"type": "object",
            "properties": {"x": {"oneOf": [{"enum": ["a"]},
                {"allOf": [{"$ref": "#/$defs/c"}, {"$ref": "#/$defs/d"}]}]}}}}}"##,
    );
    let nested: Vec<String> = [
        r#"{}"#,
        r#"{"x":"a"}"#,
        r#"{"x":{"x":"a"}}"#,
        r#"{"x":{"x":{"x":"a"}}}"#,
        r#"{"x":{}}"#,
        r#"{"x":"b"}"#,
        r#"{"x":{"x":{}}}"#,
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(agrees(&both, &JsonSchemaOptions::new(), &nested), 4);
    let e = engine();
    for (schema, text, valid) in [
        (&element, r#"{"t":"a","c":[{"t":"b","c":"x"}]}"#, true),
        (&element, r#"{"t":"a","c":{"c":"x"}}"#, false),
        (
            &config(r#"{"enum": ["string", "array"]}"#, ""),
            r#"{"type":{"type":{"type":"number"}}}"#,
            true,
        ),
        (
            &config(r#"{"enum": ["string", "array"]}"#, ""),
            r#"{"type":{"type":"array"}}"#,
            false,
        ),
    ] {
        masks_match(&e, schema, &JsonSchemaOptions::new(), text, valid);
    }
}

/// Objects in any order lowered one after another that add no expression to the grammar
/// (the same empty object reached through three references, MaskBench o69991): each group
/// of rules gets a number of its own (the grammar's size was the number, and the third
/// object defined the second's rules again).
#[test]
fn any_order_objects_adding_nothing_new() {
    let schema = parse_json(
        r##"{
        "definitions": {"a": {}, "b": {}, "c": {}},
        "anyOf": [{"$ref": "#/definitions/a"}, {"$ref": "#/definitions/b"},
            {"$ref": "#/definitions/c"}],
        "additionalProperties": false
    }"##,
    );
    let universe = values();
    let valid = agrees(&schema, &any_order(), &universe);
    assert!(valid > 0 && valid < universe.len(), "{valid} valid");
}

/// `enum`/`const` of objects and arrays: literal alternatives, nested, whitespace as the
/// options say, members in the literal's order or, with any order, in every order.
#[test]
fn enum_and_const_of_objects_and_arrays() {
    let schema = parse_json(
        r#"{"enum": [{"a": 1, "b": [true, {"c": "x"}]}, [1, {"b": null, "a": []}], {}]}"#,
    );
    let literal_order = Lang::new(&compiled(&schema, &JsonSchemaOptions::new()));
    literal_order.yes(&[
        r#"{"a":1,"b":[true,{"c":"x"}]}"#,
        r#"[1,{"b":null,"a":[]}]"#,
        "{}",
    ]);
    // Integral values are written as integers.
    literal_order.no(&[
        r#"{"b":[true,{"c":"x"}],"a":1}"#,
        r#"[1,{"a":[],"b":null}]"#,
        r#"{"a":1}"#,
        r#"{"a":1.0,"b":[true,{"c":"x"}]}"#,
    ]);
    // Any order: each object in every order, the universe against jsonschema too.
    all_agree(&[
        parse_json(r#"{"const": {"a": 1, "b": "x", "c": null}}"#),
        parse_json(r#"{"enum": [{"a": 1}, {"b": "x", "a": 1}, [1, 2], []]}"#),
    ]);
    let spaced = any_order().whitespace(Whitespace::Flexible { max_run: Some(2) });
    let l = Lang::new(&compiled(&schema, &spaced));
    l.yes(&[
        r#"{ "b" : [ true , { "c" : "x" } ] , "a" : 1 }"#,
        "[1,{\n\"a\": [ ],\"b\":null}]",
        "{ }",
    ]);
    l.no(&[r#"{"a":1,"b":[{"c":"x"},true]}"#]);
    // Past the any-order limit, the same Limit error as an object with that many properties.
    let wide: serde_json::Map<String, Value> =
        (0..14).map(|i| (format!("k{i}"), json!(i))).collect();
    let e = compile_schema(&json!({"const": wide}), &any_order()).unwrap_err();
    assert_eq!(e.kind(), CompileErrorKind::Limit);
}

/// For each schema, masks over the whole Qwen3 vocabulary equal the reference recognizer's
/// at every step of its valid and invalid texts (each checked against `jsonschema` first),
/// and random walks produce only texts `jsonschema` accepts.
fn complements_masks(cases: &[(Value, &[&str], &[&str])], opts: &JsonSchemaOptions) {
    let e = engine();
    for (schema, valid, invalid) in cases {
        let v = validator(schema);
        for (texts, expected) in [(valid, true), (invalid, false)] {
            for text in texts.iter() {
                let value: Value = serde_json::from_str(text).unwrap();
                assert_eq!(v.is_valid(&value), expected, "{schema}: {text}");
                masks_match(&e, schema, opts, text, expected);
            }
        }
        walks_validate(&e, schema, opts, 12);
    }
}

#[test]
fn complements_masks_match_the_oracle_scalars_and_arrays() {
    complements_masks(
        &[
            (
                parse_json(r#"{"type": "array", "items": {"not": {"type": ["integer", "null"]}}}"#),
                &["[2.5,\"x\",{}]", "[-0.125,[]]"],
                &["[2.5,3]", "[null]", "[1.0]"],
            ),
            (
                parse_json(r#"{"type": "array", "not": {"items": {"type": "integer"}}}"#),
                &["[1,2,\"three\"]", "[null]"],
                &["[1,2,3]", "[]"],
            ),
            (
                // Bounded, so that walked numbers stay within what `jsonschema` reads exactly
                // (an f64: `39061489481769331288981161487.7` would read as an integer).
                parse_json(
                    r#"{"oneOf": [{"type": "integer", "minimum": -100}, {"type": "number", "minimum": 0, "maximum": 100}]}"#,
                ),
                &["-12", "12.5"],
                &["12", "-12.5"],
            ),
            (
                parse_json(r#"{"enum": [{"a": 1, "b": [true]}, [{"c": null}]]}"#),
                &[r#"[{"c":null}]"#],
                &[r#"[{"c":null},1]"#],
            ),
        ],
        &JsonSchemaOptions::new(),
    );
}

#[test]
fn complements_masks_match_the_oracle_strings_and_objects() {
    complements_masks(
        &[
            (
                parse_json(
                    r#"{"type": "object", "properties": {"s": {"type": "string", "not": {"pattern": "^ab", "minLength": 3}}}}"#,
                ),
                &[r#"{"s":"ab"}"#],
                &[r#"{"s":"abc"}"#],
            ),
            (
                parse_json(
                    r#"{"not": {"additionalProperties": false, "properties": {"id": {"type": "integer"}}}}"#,
                ),
                &[r#"{"id":"one"}"#],
                &["[1]"],
            ),
        ],
        &JsonSchemaOptions::new(),
    );
}

#[test]
fn conditionals_masks_match_the_oracle() {
    complements_masks(
        &[
            (
                parse_json(
                    r#"{"type": "object", "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]}, "then": {"required": ["x"]}, "else": {"properties": {"x": false}}}"#,
                ),
                &[r#"{"kind":"a","x":1}"#],
                &[r#"{"kind":"b","x":1}"#],
            ),
            (
                parse_json(
                    r#"{"type": "object", "oneOf": [
                    {"required": ["a"], "properties": {"a": {"type": "integer"}}},
                    {"additionalProperties": false, "properties": {"b": {"type": "string"}}}
                ]}"#,
                ),
                &[r#"{"a":1}"#],
                &[r#"{"b":1}"#],
            ),
        ],
        &JsonSchemaOptions::new(),
    );
}

#[test]
fn dependencies_masks_match_the_oracle() {
    complements_masks(
        &[
            (
                parse_json(
                    r#"{"type": "object", "properties": {"name": {"type": "string"}, "card": {"type": "integer"}, "billing": {"type": "string"}}, "dependencies": {"card": ["billing"]}}"#,
                ),
                &[
                    r#"{"name":"x","card":1,"billing":"y"}"#,
                    r#"{"name":"x"}"#,
                    r#"{"billing":"y"}"#,
                ],
                &[r#"{"name":"x","card":1}"#, r#"{"card":12}"#],
            ),
            (
                parse_json(
                    r#"{"type": "object", "properties": {"kind": {"type": "string"}, "size": {"type": "integer"}}, "dependentSchemas": {"size": {"properties": {"kind": {"const": "box"}}, "required": ["kind"]}}, "dependentRequired": {"kind": ["size"]}}"#,
                ),
                &[r#"{"kind":"box","size":3}"#, "{}"],
                &[r#"{"kind":"bag","size":3}"#, r#"{"kind":"box"}"#],
            ),
            (
                // Chained: the address needs a region, which needs a country.
                parse_json(
                    r#"{"type": "object", "properties": {"street": {"type": "string"}, "region": {"type": "string"}, "country": {"type": "string"}}, "additionalProperties": false,
                    "dependencies": {"street": ["region"], "region": ["country"]}}"#,
                ),
                &[
                    r#"{"street":"s","region":"r","country":"c"}"#,
                    r#"{"country":"c"}"#,
                ],
                &[
                    r#"{"street":"s","region":"r"}"#,
                    r#"{"street":"s","country":"c"}"#,
                ],
            ),
        ],
        &JsonSchemaOptions::new(),
    );
}

#[test]
fn property_names_masks_match_the_oracle() {
    complements_masks(
        &[
            (
                parse_json(
                    r#"{"type": "object", "propertyNames": {"pattern": "^[a-z_]+$", "maxLength": 8}, "additionalProperties": {"type": "integer"}}"#,
                ),
                &[r#"{"ab_c":1,"d":2}"#, "{}"],
                &[r#"{"Ab":1}"#, r#"{"abcdefghi":1}"#],
            ),
            (
                parse_json(
                    r#"{"type": "object", "properties": {"id": {"type": "integer"}, "Name": {"type": "string"}}, "propertyNames": {"enum": ["id", "note", "nota"]}}"#,
                ),
                &[r#"{"id":1,"note":null}"#, r#"{"nota":[]}"#],
                &[r#"{"id":1,"Name":"x"}"#, r#"{"not":1}"#],
            ),
            (
                parse_json(
                    r#"{"type": "object", "allOf": [{"not": {"propertyNames": {"pattern": "^[a-z]+$"}}}, {"not": {"propertyNames": {"not": {"pattern": "^id"}}}}], "properties": {"id": {"type": "integer"}}, "maxProperties": 2}"#,
                ),
                &[r#"{"id":1,"X":2}"#, r#"{"id7":null}"#, r#"{"idA":true}"#],
                &[
                    r#"{"id":1}"#,
                    r#"{"ab":1,"id":2}"#,
                    r#"{"X":1,"Y":2}"#,
                    r#"{"id":1,"X":2,"Y":3}"#,
                ],
            ),
        ],
        &JsonSchemaOptions::new(),
    );
}

#[test]
fn contains_masks_match_the_oracle() {
    complements_masks(
        &[
            (
                parse_json(
                    r#"{"type": "array", "items": {"type": "integer", "maximum": 100}, "contains": {"minimum": 10}}"#,
                ),
                &["[1,12,3]", "[10]"],
                &["[1,2]", "[]"],
            ),
            (
                parse_json(
                    r#"{"type": "array", "prefixItems": [{"type": "string"}], "contains": {"type": "string"}}"#,
                ),
                &[r#"["a"]"#, r#"["a",2]"#],
                &["[1,2]", r#"[1,"b"]"#, "[]"],
            ),
        ],
        &JsonSchemaOptions::new(),
    );
}

/// Any order: an enum's object in another order, and an object's witness anywhere.
#[test]
fn any_order_complements_masks_match_the_oracle() {
    complements_masks(
        &[
            (
                parse_json(r#"{"enum": [{"a": 1, "b": [true]}]}"#),
                &[r#"{"b":[true],"a":1}"#],
                &[],
            ),
            (
                parse_json(
                    r#"{"type": "object", "properties": {"a": {"type": "integer"}}, "propertyNames": {"pattern": "^[a-c]$"}}"#,
                ),
                &[r#"{"b":null,"a":1}"#],
                &[r#"{"b":null,"d":1}"#],
            ),
            (
                parse_json(
                    r#"{"type": "object", "properties": {"a": {"type": "integer"}, "b": true}, "dependencies": {"b": ["a"]}}"#,
                ),
                &[r#"{"b":null,"a":1}"#, r#"{"a":1}"#],
                &[r#"{"b":null}"#],
            ),
            (
                parse_json(
                    r#"{"type": "object", "properties": {"a": true}, "not": {"additionalProperties": {"type": "integer"}}}"#,
                ),
                &[r#"{"z":1,"a":"x"}"#],
                &[r#"{"z":1,"a":2}"#],
            ),
        ],
        &any_order(),
    );
}

/// `multipleOf` against llguidance, which supports it: masks equal but for the documented
/// differences (negative zero).
#[test]
fn multiple_of_masks_match_llguidance() {
    let e = engine();
    let opts = JsonSchemaOptions::new();
    for (schema, texts) in [
        (
            parse_json(r#"{"type": "integer", "multipleOf": 7}"#),
            vec!["343", "-21", "0"],
        ),
        (
            parse_json(r#"{"type": "integer", "multipleOf": 12, "minimum": 0, "maximum": 1000}"#),
            vec!["984", "12"],
        ),
    ] {
        let constraint = e.compile_json_schema(&schema, &opts).unwrap();
        let mut guided = schema.clone();
        guided.as_object_mut().unwrap().insert(
            "x-guidance".into(),
            parse_json(
                r#"{"whitespace_flexible": false, "item_separator": ",", "key_separator": ":"}"#,
            ),
        );
        formwork_testkit::llg::differential(
            || llguidance::api::TopLevelGrammar::from_json_schema(guided.clone()),
            || Box::new(constraint.matcher()),
            &texts,
        );
    }
}

/// Hostile uses of the new constructions end in typed errors (or compile), on a small stack,
/// never in a hang or an overflow: `not` nested far past the nesting limit, a literal nested as
/// deep under `not`, `if` chains, and `oneOf`s whose complements multiply.
#[test]
fn hostile_complements_end_in_typed_errors() {
    let nest = |key: &str, depth: usize, leaf: Value| {
        let mut v = leaf;
        for _ in 0..depth {
            v = json!({ key: v });
        }
        v
    };
    let deep_not = nest("not", 1500, parse_json(r#"{"type": "string"}"#));
    let mut deep_literal = parse_json(r#"1"#);
    for _ in 0..1500 {
        deep_literal = json!([deep_literal]);
    }
    let deep_const = json!({"not": {"const": deep_literal}});
    let mut deep_if = parse_json(r#"{"type": "integer"}"#);
    for _ in 0..1500 {
        deep_if = json!({"if": {"minimum": 0}, "then": deep_if, "else": {"type": "null"}});
    }
    for schema in [&deep_not, &deep_const, &deep_if] {
        let e = on_small_stack(|| compile_schema(schema, &JsonSchemaOptions::new()))
            .expect_err("nested past the limit");
        assert_eq!(e.limit().map(|l| l.kind), Some(LimitKind::Nesting), "{e}");
    }
    // Thirty overlapping branches, each requiring its own pair of properties: the complements
    // multiply past the branch budget.
    let branches: Vec<Value> = (0..30)
        .map(|i| json!({"properties": {format!("p{i}"): {"type": "integer"}}, "required": [format!("p{i}"), format!("q{i}")]}))
        .collect();
    let wide = json!({"type": "object", "oneOf": branches});
    let e = on_small_stack(|| compile_schema(&wide, &JsonSchemaOptions::new()))
        .expect_err("too many branches");
    assert_eq!(
        e.limit().map(|l| l.kind),
        Some(LimitKind::Alternatives),
        "{e}"
    );
    // Under a short compile budget, complements of many patterns end on time.
    let patterns: Vec<Value> = (0..12)
        .map(|i| json!({"not": {"anyOf": [{"pattern": format!("a{i}")}, {"pattern": format!("{i}b"), "minLength": i}]}}))
        .collect();
    let slow = json!({"type": "string", "allOf": patterns});
    let limits = Limits::new().compile_time(Some(std::time::Duration::from_millis(20)));
    let outcome = on_small_stack(|| compile_schema_with(&slow, &JsonSchemaOptions::new(), &limits));
    if let Err(e) = outcome {
        assert!(e.limit().is_some(), "{e}");
    }
}

/// Many dependencies on independent optional properties multiply their branches: a typed
/// `Limit` error at the entry that passed the budget, on a small stack and promptly (no
/// 2^64 expansion); the same number on properties already required compiles.
#[test]
fn hostile_dependencies_end_in_typed_errors() {
    let keys: Vec<String> = (0..64).map(|i| format!("k{i}")).collect();
    let deps: serde_json::Map<String, Value> = keys
        .iter()
        .map(|k| (k.clone(), json!([format!("{k}x")])))
        .collect();
    let wide = json!({"type": "object", "dependencies": deps});
    let (kind, at) = on_small_stack(|| limit_of(&wide, &Limits::new()));
    assert_eq!(kind, LimitKind::Alternatives);
    assert!(at.starts_with("/dependencies/k"), "{at}");
    let required = json!({"type": "object", "required": keys, "dependencies": deps});
    on_small_stack(|| compile_schema(&required, &JsonSchemaOptions::new()))
        .unwrap_or_else(|e| panic!("{e}"));
    // Dependencies nested under dependencies, past the nesting limit.
    let mut deep = parse_json(r#"{"type": "integer"}"#);
    for _ in 0..1500 {
        deep = json!({"dependencies": {"a": deep}});
    }
    let e = on_small_stack(|| compile_schema(&deep, &JsonSchemaOptions::new()))
        .expect_err("nested past the limit");
    assert_eq!(e.limit().map(|l| l.kind), Some(LimitKind::Nesting), "{e}");
}

/// A schema met with a reference still being built (recursion inside it): the meeting waits
/// for the reference instead of failing as a cycle.
#[test]
fn meetings_with_references_being_built() {
    let schema = parse_json(
        r##"{"$defs": {"a": {"type": "object", "properties": {"b": {"allOf": [{"required": ["c"]}, {"$ref": "#/$defs/a"}]}}}}, "$ref": "#/$defs/a"}"##,
    );
    assert!(agrees(&schema, &any_order(), &values()) > 0);
    let nested = [
        r#"{"b":{"c":1,"b":{"c":null}}}"#,
        r#"{"b":{"b":{"c":1}}}"#,
        r#"{"b":{"c":1,"b":{}}}"#,
    ]
    .map(String::from);
    assert_eq!(agrees(&schema, &any_order(), &nested), 1);
    // A oneOf one of whose overlapping branches is the recursion itself: its complement keeps
    // making new entries (complements of intersections of complements) until the branch
    // budget refuses it, a typed error.
    let node = parse_json(
        r##"{"$defs": {"node": {"type": "object", "properties": {
        "a": {"oneOf": [{"$ref": "#/$defs/node"}, {"type": "object", "required": ["c"], "properties": {"c": {"type": "integer"}}}]}
    }}}, "$ref": "#/$defs/node"}"##,
    );
    let t = std::time::Instant::now();
    let e = compile_schema(&node, &JsonSchemaOptions::new()).unwrap_err();
    eprintln!("recursive oneOf refused in {:?}: {e}", t.elapsed());
    assert!(e.limit().is_some(), "{e}");
}

/// Lenient compilation only ever loosens: a `not` (an `if`) whose schema lost keywords
/// formwork cannot express is dropped with a warning rather than complemented (the
/// complement of what is left would refuse too much), and overlapping `oneOf` branches that
/// lost some are an `anyOf`.
#[test]
fn lenient_complements_only_loosen() {
    let lenient = JsonSchemaOptions::new().lenient(true);
    for schema in [
        parse_json(r#"{"not": {"uniqueItems": true}}"#),
        parse_json(
            r#"{"if": {"uniqueItems": true}, "then": {"type": "string"}, "else": {"type": "object"}}"#,
        ),
        parse_json(r#"{"oneOf": [{"uniqueItems": true}, {"type": "object"}]}"#),
    ] {
        let compiled = compile_schema(&schema, &lenient).unwrap();
        assert!(!compiled.warnings.is_empty(), "{schema}");
        let l = Lang::new(&compiled.grammar);
        l.yes(&["{}", r#"{"b":1}"#, r#"{"a":1}"#]);
        let e = compile_schema(&schema, &JsonSchemaOptions::new()).unwrap_err();
        assert_eq!(e.kind(), CompileErrorKind::Unsupported, "{schema}");
    }
}

/// Two objects with `patternProperties` meeting (`allOf`, a complement of one meeting the
/// other, overlapping `oneOf` branches): a name neither declares takes from each side the
/// shapes of the patterns it matches there, or that side's `additionalProperties` if it
/// matches none.
#[test]
fn pattern_properties_on_both_sides_of_an_intersection() {
    all_agree(&[
        parse_json(
            r#"{"allOf": [{"patternProperties": {"^[ab]$": {"type": "integer"}}}, {"patternProperties": {"^[bc]$": {"minimum": 1}}}]}"#,
        ),
        parse_json(
            r#"{"allOf": [
            {"patternProperties": {"^[ab]$": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
            {"patternProperties": {"^[bc]$": {"type": ["integer", "null"]}}, "additionalProperties": false}]}"#,
        ),
        parse_json(
            r#"{"allOf": [
            {"patternProperties": {"^[ab]$": {"type": ["integer", "string"]}}, "additionalProperties": {"type": "null"}},
            {"patternProperties": {"^[bc]$": {"type": ["integer", "null"]}}, "additionalProperties": {"type": ["string", "null"]}}]}"#,
        ),
        // The same pattern on both sides is one, with both shapes.
        parse_json(
            r#"{"allOf": [{"patternProperties": {"^a": {"type": "integer"}}}, {"patternProperties": {"^a": {"minimum": 2}}, "additionalProperties": {"type": "null"}}]}"#,
        ),
        parse_json(
            r#"{"allOf": [
            {"patternProperties": {"^a": {"type": "integer"}, "^[bc]$": {"type": "string"}}, "additionalProperties": false},
            {"patternProperties": {"^[bc]$": {"const": "x"}, "^a": true, "^c": {"type": "null"}}}]}"#,
        ),
        // Declared properties take the other side's patterns.
        parse_json(
            r#"{"type": "object", "properties": {"a": {"type": "integer"}}, "patternProperties": {"^[bc]$": {"type": "string"}},
               "allOf": [{"patternProperties": {"^[ab]$": {"not": {"type": "null"}}}, "additionalProperties": {"type": "integer"}}]}"#,
        ),
        // Three sides.
        parse_json(
            r#"{"allOf": [
            {"patternProperties": {"^[ab]$": {"type": ["integer", "null"]}}},
            {"patternProperties": {"^[bc]$": {"type": ["integer", "string"]}}, "additionalProperties": {"type": "boolean"}},
            {"patternProperties": {"^c": {"minLength": 1}}, "additionalProperties": false}]}"#,
        ),
        // Complements meeting patterns: witnesses among one side's names, placed in the merge.
        parse_json(
            r#"{"type": "object", "patternProperties": {"^[ab]$": {"type": "integer"}},
               "not": {"patternProperties": {"^[bc]$": {"type": "integer"}}}}"#,
        ),
        parse_json(
            r#"{"type": "object", "patternProperties": {"^a": {"type": "integer"}}, "additionalProperties": {"type": ["null", "integer"]},
               "not": {"patternProperties": {"^[bc]$": {"minimum": 2}}, "additionalProperties": {"type": "integer"}}}"#,
        ),
        parse_json(
            r#"{"type": "object", "allOf": [
            {"not": {"patternProperties": {"^[ab]$": {"type": "integer"}}}},
            {"not": {"patternProperties": {"^[bc]$": {"type": ["integer", "null"]}}, "additionalProperties": false}}]}"#,
        ),
        parse_json(
            r#"{"type": "object", "oneOf": [
            {"patternProperties": {"^[ab]$": {"type": "integer"}}, "additionalProperties": false},
            {"patternProperties": {"^[bc]$": {"type": ["integer", "null"]}}}]}"#,
        ),
    ]);
    // In schema order too, with the keys' spellings and values told apart.
    let l = Lang::new(&compiled(
        &parse_json(
            r#"{"allOf": [
            {"patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
            {"patternProperties": {"-y$": {"minimum": 0}}, "additionalProperties": {"maxLength": 2}}]}"#,
        ),
        &JsonSchemaOptions::new(),
    ));
    l.yes(&[
        r#"{"x-y":3}"#,
        r#"{"x-a":-3,"b":"ab"}"#,
        r#"{"q-y":"abcdef","x-":0}"#,
        r#"{}"#,
    ]);
    l.no(&[
        r#"{"x-y":-3}"#,
        r#"{"x-y":"a"}"#,
        r#"{"b":"abc"}"#,
        r#"{"b":1}"#,
        r#"{"q-y":-1}"#,
        r#"{"x-a":1.5}"#,
    ]);
}

/// The merge's undeclared names split into more kinds than one object's four patterns can
/// make: a typed `Unsupported` error at the object; lenient, a warning and a grammar that
/// admits at least the valid values.
/// An object's `patternProperties` cost by the kinds of names they make, not by their number:
/// patterns that exclude each other (one per fixed name, a prefix) are one kind each, however
/// many; overlapping ones make a kind per set a name can match, refused past 32.
/// Patterns opening with a look-ahead (`^(?!X)R`, `^(?=X)R`), as values and as names.
#[test]
fn leading_lookaheads() {
    all_agree(&[
        parse_json(r#"{"type": "string", "pattern": "^(?!ab)[a-z]+$"}"#),
        parse_json(
            r#"{"type": "object", "patternProperties": {"^(?!a)": {"type": "integer"}, "^(?=[ab])": {"type": ["integer", "string"]}}}"#,
        ),
        parse_json(r#"{"not": {"type": "string", "pattern": "^(?=a)(?!ab)"}}"#),
    ]);
}

#[test]
fn many_pattern_properties() {
    all_agree(&[
        parse_json(
            r#"{"type": "object", "patternProperties": {"^a$": {"type": "integer"}, "^b$": {"type": "null"}, "^c$": {"type": "string"}, "^d$": {"type": "boolean"}, "^x-": {}, "^[0-9]+$": {"type": "array"}}, "additionalProperties": false}"#,
        ),
        parse_json(
            r#"{"type": "object", "patternProperties": {"^[a-z]+$": {"type": ["integer", "string"]}, "^a$": {"type": "integer"}, "^b$": {"type": "string"}, "^c$": {"type": "null"}, "^d$": {}, "^e$": {}}}"#,
        ),
    ]);
    let unanchored: serde_json::Map<String, Value> = ["a", "b", "c", "d", "e", "f"]
        .iter()
        .map(|n| (n.to_string(), parse_json(r#"{"type": "integer"}"#)))
        .collect();
    let e = compile_schema(
        &json!({"patternProperties": unanchored}),
        &JsonSchemaOptions::new(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), CompileErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("more than 32 kinds"), "{e}");
}

#[test]
fn pattern_properties_meeting_past_the_limit() {
    let patterns = |names: &[&str]| -> Value {
        let map: serde_json::Map<String, Value> = names
            .iter()
            .map(|n| (n.to_string(), parse_json(r#"{"type": "integer"}"#)))
            .collect();
        json!({"patternProperties": map})
    };
    // Six kinds of names on each side (five prefixes, or none) meet in 36, past the 32 kinds
    // one object's undeclared names may come in.
    let wide = json!({"allOf": [patterns(&["^a", "^b", "^c", "^d", "^e"]), patterns(&["a$", "b$", "c$", "d$", "e$"])]});
    let e = compile_schema(&wide, &JsonSchemaOptions::new()).unwrap_err();
    assert_eq!(e.kind(), CompileErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("patternProperties"), "{e}");
    assert_eq!(e.location(), &Location::JsonPointer("/allOf/0".into()));
    let lenient = compile_schema(&wide, &JsonSchemaOptions::new().lenient(true)).unwrap();
    assert!(!lenient.warnings.is_empty());
    Lang::new(&lenient.grammar).yes(&[r#"{"ab":1,"q":null}"#]);
    // Five sides of four patterns each are more patterns than one object holds.
    let sides: Vec<Value> = (0..5)
        .map(|i| {
            patterns(&[
                &format!("^{i}a"),
                &format!("^{i}b"),
                &format!("^{i}c"),
                &format!("^{i}d"),
            ])
        })
        .collect();
    let e = compile_schema(&json!({"allOf": sides}), &JsonSchemaOptions::new()).unwrap_err();
    assert_eq!(e.kind(), CompileErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("patternProperties"), "{e}");
}

#[test]
fn pattern_properties_intersections_masks_match_the_oracle() {
    complements_masks(
        &[
            (
                parse_json(
                    r#"{"type": "object", "allOf": [
                    {"patternProperties": {"^x-": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
                    {"patternProperties": {"-y$": {"minimum": 0}}, "additionalProperties": {"maxLength": 2}}]}"#,
                ),
                &[r#"{"x-y":3,"b":"ab"}"#, r#"{"q-y":"abc"}"#],
                &[r#"{"x-y":-3}"#, r#"{"b":"abc"}"#],
            ),
            (
                parse_json(
                    r#"{"type": "object", "properties": {"ID": {"type": "string"}}, "patternProperties": {"^[a-c]": {"type": "integer"}},
                       "additionalProperties": false, "not": {"patternProperties": {"^[bc]": {"minimum": 1}}}}"#,
                ),
                &[r#"{"ID":"x","a":3,"cd":0}"#, r#"{"b":-2}"#],
                &[
                    r#"{"ID":"x","cd":30}"#,
                    r#"{"ID":"x","ab":0}"#,
                    r#"{"d":0}"#,
                ],
            ),
        ],
        &JsonSchemaOptions::new(),
    );
}

/// Arrays of zero to three items over scalars that `uniqueItems` must tell apart by value:
/// strings one of which is a prefix of another, booleans, `null`, and numbers with several
/// spellings of one value (`0`/`-0`, `1`/`1.0`).
fn distinct_items_universe() -> Vec<String> {
    let items = [
        r#""a""#, r#""ab""#, r#""b""#, "true", "false", "null", "0", "-0", "1", "1.0", "2",
    ];
    let mut out = vec!["[]".to_string(), r#""a""#.to_string(), "{}".to_string()];
    let mut arrays: Vec<Vec<&str>> = vec![vec![]];
    for _ in 0..3 {
        arrays = arrays
            .iter()
            .flat_map(|a| items.iter().map(move |i| [a.clone(), vec![*i]].concat()))
            .collect();
        out.extend(arrays.iter().map(|a| format!("[{}]", a.join(","))));
    }
    out
}

/// `uniqueItems` over items admitting finitely many values: the arrays of distinct values,
/// as `jsonschema` has them (integers written as digits: `1.0` is no spelling of an integral
/// enum value).
#[test]
fn unique_items_over_finite_values() {
    let universe = distinct_items_universe();
    let opts = JsonSchemaOptions::new();
    let spelled = |t: &str| !t.contains("1.0");
    for schema in [
        json!({"type": "array", "items": {"enum": ["a", "ab", "b"]}, "uniqueItems": true}),
        json!({"type": "array", "items": {"type": "boolean"}, "uniqueItems": true}),
        json!({"type": "array", "items": {"enum": ["a", "b", null]}, "uniqueItems": true, "minItems": 3}),
        json!({"type": "array", "items": {"enum": ["a", "b", null]}, "uniqueItems": true, "minItems": 1, "maxItems": 2}),
        json!({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 2}, "uniqueItems": true}),
        json!({"type": "array", "items": {"type": "integer", "minimum": -1, "maximum": 2, "multipleOf": 2}, "uniqueItems": true}),
        json!({"type": "array", "items": {"anyOf": [{"const": 1}, {"type": "boolean"}, {"$ref": "#/$defs/s"}]}, "uniqueItems": true, "$defs": {"s": {"enum": ["a", "b"]}}}),
        json!({"type": "array", "items": {"enum": [1, 1.0, 0, "a"]}, "uniqueItems": true}),
        json!({"allOf": [{"uniqueItems": true}, {"items": {"enum": [0, 1, true]}}]}),
        json!({"type": "array", "items": {"enum": [0, 1, 2, "a"]}, "contains": {"type": "integer", "minimum": 1}, "uniqueItems": true}),
        json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true, "maxItems": 1}),
        json!({"items": {"enum": ["a", "b"]}, "uniqueItems": true, "minItems": 3}),
        json!({"uniqueItems": true, "items": {"const": "a"}}),
        json!({"uniqueItems": true, "enum": [["a", "a"], ["a", "b"], [0, -0], "x"]}),
        json!({"type": ["array", "string"], "uniqueItems": true, "items": {"enum": [0, 1]}, "maxLength": 1}),
    ] {
        let valid = agrees_on(&schema, &opts, &universe, spelled);
        assert!(
            valid > 0 && valid < universe.len(),
            "{schema}: {valid} valid"
        );
    }
    // `uniqueItems` only constrains arrays: beside another type, or with `false`, nothing.
    for schema in [
        json!({"type": "object", "uniqueItems": true}),
        json!({"type": "array", "uniqueItems": false}),
    ] {
        compiled(&schema, &opts);
    }
}

/// The matcher refuses a repeated value at the token that would write it, whatever the
/// token also writes: every token starting a value already written is masked off.
#[test]
fn unique_items_masks_match_the_oracle() {
    let schema = json!({"type": "array", "items": {"enum": ["a", "ab", "b", 10, 1]}, "uniqueItems": true, "maxItems": 4});
    complements_masks(
        &[
            (
                schema.clone(),
                &[
                    r#"["a","ab"]"#,
                    r#"["ab","a"]"#,
                    "[1,10]",
                    r#"[10,"b",1,"a"]"#,
                    "[]",
                ],
                &[
                    r#"["a","a"]"#,
                    r#"["ab","b","ab"]"#,
                    "[1,1]",
                    "[10,10]",
                    r#"[10,"b",1,"a","ab"]"#,
                ],
            ),
            (
                json!({"type": "array", "items": {"type": "boolean"}, "uniqueItems": true, "minItems": 2}),
                &["[true,false]", "[false,true]"],
                &["[true,true]", "[false]", "[true,false,true]"],
            ),
            (
                json!({"type": "array", "items": {"enum": ["x", "y", "z"]}, "uniqueItems": true, "minItems": 3}),
                &[r#"["z","x","y"]"#],
                &[r#"["x","y"]"#, r#"["x","y","x"]"#],
            ),
        ],
        &JsonSchemaOptions::new(),
    );
    let e = engine();
    let vocab = e.vocab();
    let constraint = e
        .compile_json_schema(&schema, &JsonSchemaOptions::new())
        .unwrap();
    let mut m = constraint.matcher();
    for t in vocab.encode(r#"["a",10,"#).unwrap() {
        m.consume(t).unwrap();
    }
    let mask = mask_of(&mut m, vocab);
    for t in 0..vocab.len() as u32 {
        let bytes = vocab.token_bytes(t);
        if bytes.starts_with(b"\"a\"") || bytes.starts_with(b"10") {
            assert!(!mask.contains(t), "{:?} repeats a value", bytes);
        }
    }
    let token = |text: &str| -> u32 {
        (0..vocab.len() as u32)
            .find(|&t| vocab.token_bytes(t) == text.as_bytes())
            .unwrap_or_else(|| panic!("no token {text}"))
    };
    assert!(mask.contains(token("\"")) && mask.contains(token("1")));
    // `1` is fresh, `10` is not: after `1`, a `0` is refused and `,` allowed.
    m.consume(token("1")).unwrap();
    let mask = mask_of(&mut m, vocab);
    assert!(!mask.contains(token("0")) && mask.contains(token(",")));
}

/// Items admitting infinitely many values, too many for the subsets of them, given by
/// position, or a complement of `uniqueItems`: `Unsupported` at the keyword; lenient drops it.
#[test]
fn unique_items_out_of_reach_end_in_typed_errors() {
    let twenty: Vec<i64> = (0..20).collect();
    // 2,048 sets of values written, each spelling eleven 16-byte values: too big an automaton.
    let eleven: Vec<String> = (0..11).map(|i| format!("value number {i:02}")).collect();
    for (schema, at) in [
        (
            json!({"type": "array", "items": {"type": "string"}, "uniqueItems": true}),
            "/uniqueItems",
        ),
        (
            json!({"type": "array", "uniqueItems": true}),
            "/uniqueItems",
        ),
        (
            json!({"type": "array", "items": {"enum": twenty}, "uniqueItems": true}),
            "/uniqueItems",
        ),
        (
            json!({"type": "array", "items": {"enum": eleven}, "uniqueItems": true}),
            "/uniqueItems",
        ),
        (
            json!({"type": "array", "items": {"type": "integer", "minimum": 0}, "uniqueItems": true}),
            "/uniqueItems",
        ),
        (
            json!({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 1000}, "uniqueItems": true, "maxItems": 2}),
            "/uniqueItems",
        ),
        (
            json!({"type": "array", "prefixItems": [{"const": 1}], "items": {"const": 2}, "uniqueItems": true}),
            "/uniqueItems",
        ),
        (
            json!({"not": {"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": true}}),
            "/not/uniqueItems",
        ),
    ] {
        let e = compile_schema(&schema, &JsonSchemaOptions::new()).unwrap_err();
        assert_eq!(e.kind(), CompileErrorKind::Unsupported, "{schema}: {e}");
        assert!(e.to_string().contains("uniqueItems"), "{e}");
        assert_eq!(e.location(), &Location::JsonPointer(at.into()), "{schema}");
        let lenient = compile_schema(&schema, &JsonSchemaOptions::new().lenient(true)).unwrap();
        assert!(!lenient.warnings.is_empty(), "{schema}");
    }
    // Twenty values, at most two of them: 211 subsets.
    let two =
        json!({"type": "array", "items": {"enum": twenty}, "uniqueItems": true, "maxItems": 2});
    let lang = Lang::new(&compiled(&two, &JsonSchemaOptions::new()));
    lang.yes(&["[]", "[0,19]", "[19,0]", "[7]"]);
    lang.no(&["[3,3]", "[0,1,2]"]);
}
