//! JSON Schema front end: each keyword against the reference recognizer (the exact language of
//! the grammar), errors with their JSON pointers, and a fixed MaskBench sample with a ratchet.

use formwork::engine::{BackendChoice, BackendKind, EngineConfig};
use formwork::front::json_schema::{
    compile_schema, compile_schema_with, JsonSchemaOptions, PropertyOrder, Whitespace,
};
use formwork::ir::{Expr, Grammar};
use formwork::{CompileError, CompileErrorKind, Engine, LimitKind, Limits, Location};
use formwork_testkit::oracle::Lang;
use formwork_testkit::parse_json;
use formwork_testkit::stack::on_small_stack;
use formwork_testkit::tokenizers;
use serde_json::{json, Value};

/// The language of a schema, as a membership test.
fn schema_lang(schema: Value) -> Lang {
    schema_lang_with(schema, &JsonSchemaOptions::new())
}

fn schema_lang_with(schema: Value, opts: &JsonSchemaOptions) -> Lang {
    let compiled = compile_schema(&schema, opts).unwrap_or_else(|e| panic!("{schema}: {e}"));
    Lang::new(&compiled.grammar)
}

fn error_of(schema: Value, opts: &JsonSchemaOptions) -> (CompileErrorKind, String) {
    let e = compile_schema(&schema, opts)
        .err()
        .unwrap_or_else(|| panic!("{schema} should fail"));
    match e.location() {
        Location::JsonPointer(p) => (e.kind(), p.clone()),
        other => panic!("no pointer: {other:?} ({e})"),
    }
}

#[test]
fn types_and_type_lists() {
    let l = schema_lang(parse_json(r#"{"type": ["string", "null"]}"#));
    l.yes(&["null", r#""x""#, r#""""#]);
    l.no(&["1", "true", "[]", "{}", "nul"]);
    let any = schema_lang(parse_json(r#"{"description": "anything"}"#));
    any.yes(&[
        "1",
        "-2.5e3",
        "true",
        "null",
        r#"{"a":[1,{"b":null}]}"#,
        r#""\u00e9""#,
    ]);
    any.no(&["01", "tru", "{a:1}", "[1,]"]);
    let b = schema_lang(parse_json(r#"{"type": "boolean"}"#));
    b.yes(&["true", "false"]);
    b.no(&["null", "0"]);
    // Type-specific keywords do not constrain other types.
    let l = schema_lang(parse_json(r#"{"minLength": 2}"#));
    l.yes(&["1", r#""ab""#, "null"]);
    l.no(&[r#""a""#]);
}

#[test]
fn objects_properties_required_additional() {
    let schema = parse_json(
        r#"{
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a"]
    }"#,
    );
    let l = schema_lang(schema.clone());
    l.yes(&[
        r#"{"a":1}"#,
        r#"{"a":1,"b":"x"}"#,
        r#"{"a":1,"c":true}"#,
        r#"{"a":1,"b":"x","c":[1]}"#,
    ]);
    // Missing required, wrong value type, duplicate of a declared name as an extra (even
    // escaped), schema order.
    l.no(&[
        r#"{}"#,
        r#"{"b":"x"}"#,
        r#"{"a":"1"}"#,
        r#"{"a":1,"a":2}"#,
        r#"{"a":1,"\u0061":2}"#,
        r#"{"b":"x","a":1}"#,
    ]);
    let closed = schema_lang_with(
        schema.clone(),
        &JsonSchemaOptions::new().additional_properties(false),
    );
    closed.yes(&[r#"{"a":1,"b":"x"}"#]);
    closed.no(&[r#"{"a":1,"c":true}"#]);
    // Keys are written as a serializer writes them: escapes only for `"`, `\` and controls
    // (`\u00xx` where there is no short one); values take every spelling.
    l.yes(&[r#"{"a":1,"q\"\\\n\u001f":0}"#, r#"{"a":1,"é/":"\u00e9\/"}"#]);
    l.no(&[
        r#"{"a":1,"\u00e9":0}"#,
        r#"{"a":1,"\/":0}"#,
        r#"{"a":1,"\u001F":0}"#,
        r#"{"a":1,"\u000a":0}"#,
    ]);
    let typed_extra = schema_lang(parse_json(
        r#"{"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1, "maxProperties": 2}"#,
    ));
    typed_extra.yes(&[r#"{"x":1}"#, r#"{"x":1,"y":2}"#]);
    typed_extra.no(&[r#"{}"#, r#"{"x":1,"y":2,"z":3}"#, r#"{"x":"1"}"#]);
    // Declared names with escaped, wide and surrogate-adjacent characters: the undeclared-name
    // trie leaves them, and only them, to the additional-properties schema.
    let names = [
        "\"q",
        "\n",
        "é",
        "\u{d7ff}",
        "\u{e000}",
        "a\u{e000}",
        "b\u{d7ff}",
    ];
    let properties: serde_json::Map<String, Value> = names
        .iter()
        .map(|n| (n.to_string(), parse_json(r#"{"type": "integer"}"#)))
        .collect();
    let l = schema_lang(
        json!({"type": "object", "properties": properties, "additionalProperties": {"type": "string"}}),
    );
    let object = |name: &str, value: &str| format!("{{{}:{value}}}", Value::from(name));
    for name in names {
        l.yes(&[&object(name, "1")]);
        l.no(&[&object(name, "\"x\"")]);
    }
    let undeclared = [
        "\"r",
        "\t",
        "ê",
        "\u{d7fe}",
        "\u{e001}",
        "\u{d7ff}\u{e000}",
        "\"",
        "é\n",
        "a\u{d7ff}",
        "b\u{e000}",
    ];
    for name in undeclared {
        l.yes(&[&object(name, "\"x\"")]);
        l.no(&[&object(name, "1")]);
    }
    // A required property that is not declared takes the additional-properties schema.
    let l = schema_lang(parse_json(
        r#"{"type": "object", "required": ["id"], "additionalProperties": {"type": "string"}}"#,
    ));
    l.yes(&[r#"{"id":"7"}"#, r#"{"id":"7","x":"y"}"#]);
    l.no(&[r#"{"id":7}"#, r#"{"x":"y"}"#]);
}

#[test]
fn property_counts_with_optional_properties() {
    let l = schema_lang(parse_json(
        r#"{
        "type": "object",
        "properties": {"a": {"const": 1}, "b": {"const": 2}, "c": {"const": 3}},
        "additionalProperties": false,
        "minProperties": 2,
        "maxProperties": 2
    }"#,
    ));
    l.yes(&[r#"{"a":1,"b":2}"#, r#"{"a":1,"c":3}"#, r#"{"b":2,"c":3}"#]);
    l.no(&[r#"{}"#, r#"{"a":1}"#, r#"{"a":1,"b":2,"c":3}"#]);
}

#[test]
fn pattern_properties() {
    // A pattern matching every name: its schema applies to every property.
    let all = schema_lang(parse_json(
        r#"{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "enum": [1]}}, "patternProperties": {".*": {"minimum": 0}}}"#,
    ));
    all.yes(&[r#"{"a":1,"c":2}"#, r#"{"x":0}"#]);
    // "b" can only be absent (an array equal to 1): not even as an additional property.
    all.no(&[
        r#"{"a":-1}"#,
        r#"{"c":-2}"#,
        r#"{"a":"s"}"#,
        r#"{"b":1}"#,
        r#"{"a":1,"b":[1]}"#,
    ]);
    // One pattern, no additional properties: undeclared names must match it.
    let closed = schema_lang(parse_json(
        r#"{
        "type": "object",
        "properties": {"id": {"type": "string"}},
        "patternProperties": {"^x-[a-z]+$": {"type": "boolean"}},
        "additionalProperties": false
    }"#,
    ));
    closed.yes(&[
        r#"{"id":"1","x-a":true}"#,
        r#"{"x-ab":false,"x-c":true}"#,
        "{}",
    ]);
    // Keys are spelled canonically: `x-\u0063` is `x-c` written another way.
    closed.no(&[
        r#"{"y":true}"#,
        r#"{"x-a":1}"#,
        r#"{"x-A":true}"#,
        r#"{"x-\u0063":true}"#,
    ]);
    // Next to additional properties: names matching the pattern take its schema, the others
    // the additional one (the pattern's complement).
    let open = schema_lang(parse_json(
        r#"{
        "type": "object",
        "properties": {"x-id": {"enum": [true, "s"]}},
        "patternProperties": {"^x-": {"type": "boolean"}},
        "additionalProperties": {"type": "integer"}
    }"#,
    ));
    open.yes(&[
        r#"{"x-a":true,"b":1}"#,
        r#"{"x-id":true,"x-":false,"x":2}"#,
        r#"{"":0,"y-x-":3}"#,
    ]);
    open.no(&[
        r#"{"x-a":1}"#,
        r#"{"b":true}"#,
        r#"{"x-id":"s"}"#,
        r#"{"x":false}"#,
    ]);
    // Several patterns: a name matching two takes both schemas.
    let two = schema_lang(parse_json(
        r#"{
        "type": "object",
        "patternProperties": {
            "^a": {"type": "integer"},
            "b$": {"minimum": 10}
        },
        "additionalProperties": false
    }"#,
    ));
    two.yes(&[r#"{"a":1,"xb":10.5}"#, r#"{"ab":12}"#, "{}"]);
    two.no(&[r#"{"ab":5}"#, r#"{"ab":12.5}"#, r#"{"c":1}"#, r#"{"xb":9}"#]);
    // A required name nobody declares takes the schema of the patterns it matches.
    let required = schema_lang(parse_json(
        r#"{
        "type": "object",
        "required": ["n1"],
        "patternProperties": {"^n[0-9]$": {"type": "null"}}
    }"#,
    ));
    required.yes(&[r#"{"n1":null}"#, r#"{"n1":null,"n2":null,"z":[]}"#]);
    required.no(&[r#"{"n1":0}"#, r#"{"n2":null}"#, r#"{"n1":null,"n3":1}"#]);
}

/// Patterns, formats, lengths and excluded values of one string together: one automaton of
/// their intersection.
#[test]
fn string_constraints_intersect() {
    // Search semantics within a length: a hex digit somewhere, at most 4 characters.
    let hex = schema_lang(parse_json(
        r#"{"type": "string", "pattern": "[0-9a-f]+", "maxLength": 4}"#,
    ));
    hex.yes(&[r#""a""#, r#""zz0z""#, r#""Ab""#]);
    hex.no(&[r#""zzzzz0""#, r#""zz""#, r#""""#, r#""01234""#]);
    // Several variable parts under both bounds.
    let parts = schema_lang(parse_json(
        r#"{
        "type": "string",
        "pattern": "^([a-z]+):([a-z0-9.-]+)$",
        "minLength": 5,
        "maxLength": 7
    }"#,
    ));
    parts.yes(&[r#""ab:cd""#, r#""a:b.c-d""#, r#""abc:1.0""#]);
    parts.no(&[r#""a:b""#, r#""abcd:1.0""#, r#""ab:c""#, r#""AB:cd""#]);
    // Two patterns (allOf) and a format with a length.
    let both = schema_lang(parse_json(
        r#"{"allOf": [
        {"type": "string", "pattern": "^[a-z0-9]+$"},
        {"pattern": "[0-9]"},
        {"pattern": "^.{2,3}$"}
    ]}"#,
    ));
    both.yes(&[r#""a1""#, r#""1bc""#, r#""99""#]);
    both.no(&[r#""ab""#, r#""a1b2""#, r#""1""#, r#""A1""#]);
    let date = schema_lang(parse_json(
        r#"{"type": "string", "format": "date", "maxLength": 10}"#,
    ));
    date.yes(&[r#""2024-02-29""#]);
    date.no(&[r#""2024-2-29""#, r#""x""#]);
    // Excluded values next to a pattern (`not` with `enum`).
    let except = schema_lang(parse_json(
        r#"{
        "type": "string",
        "pattern": "^[a-c]{1,2}$",
        "not": {"enum": ["a", "bc"]}
    }"#,
    ));
    except.yes(&[r#""b""#, r#""ab""#, r#""cc""#]);
    except.no(&[r#""a""#, r#""bc""#, r#""abc""#, r#""""#]);
    // A huge length stays a counted repeat where the pattern's one repetition takes it (past
    // the automaton's budget, `errors_name_their_json_pointer` has the typed error).
    assert_compact(parse_json(
        r#"{"type": "string", "pattern": "^(a|b)*a(a|b){12}$", "maxLength": 100000}"#,
    ));
}

#[test]
fn one_of_required_sets() {
    let l = schema_lang(parse_json(
        r#"{
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
        "oneOf": [{"required": ["a"]}, {"required": ["b", "c"]}]
    }"#,
    ));
    l.yes(&[
        r#"{"a":1}"#,
        r#"{"b":1,"c":2}"#,
        r#"{"a":1,"b":2}"#,
        r#"{"a":1,"c":2}"#,
    ]);
    l.no(&["{}", r#"{"b":1}"#, r#"{"a":1,"b":2,"c":3}"#]);
    // Non-objects match every branch, so none passes.
    let l = schema_lang(parse_json(
        r#"{"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}"#,
    ));
    l.yes(&[r#"{"b":[]}"#]);
    l.no(&["1", r#""s""#, "null", r#"{"a":1,"b":2}"#]);
}

#[test]
fn not_where_exact() {
    let l = schema_lang(parse_json(r#"{"not": {"type": ["string", "null"]}}"#));
    l.yes(&["1", "true", "[]", "{}"]);
    l.no(&[r#""s""#, "null"]);
    // Objects lacking a property: `required` admits every value that is not an object.
    let l = schema_lang(parse_json(r#"{"not": {"required": ["a"]}}"#));
    l.yes(&["{}", r#"{"b":1}"#]);
    l.no(&[r#"{"a":1}"#, r#"{"b":1,"a":2}"#, "3"]);
    // Excluded strings in every spelling.
    let l = schema_lang(parse_json(
        r#"{"type": "string", "not": {"enum": ["ab", "c"]}}"#,
    ));
    l.yes(&[r#""a""#, r#""abc""#, r#""""#, r#""C""#]);
    l.no(&[r#""ab""#, r#""\u0061b""#, r#""c""#]);
    let l = schema_lang(parse_json(r#"{"not": {"const": true}}"#));
    l.yes(&["false", "null", "0"]);
    l.no(&["true"]);
    // Numbers with a fraction that is not zero (exponent forms are not written).
    let l = schema_lang(parse_json(r#"{"not": {"type": "integer"}}"#));
    l.yes(&["2.5", "-0.1", r#""1""#]);
    l.no(&["2", "2.0", "1e3"]);
    // A keyword formwork cannot express inside `not`: an error at the keyword.
    let (kind, pointer) = error_of(
        parse_json(r#"{"not": {"type": "object", "unevaluatedProperties": false}}"#),
        &JsonSchemaOptions::new(),
    );
    assert_eq!(
        (kind, pointer.as_str()),
        (CompileErrorKind::Unsupported, "/not/unevaluatedProperties")
    );
    let e = compile_schema(
        &parse_json(r#"{"properties": {"a": {"not": {}}}, "required": ["a"], "type": "object"}"#),
        &JsonSchemaOptions::new(),
    );
    assert_eq!(
        e.err().map(|e| e.kind()),
        Some(CompileErrorKind::EmptyLanguage)
    );
}

#[test]
fn any_property_order() {
    let opts = JsonSchemaOptions::new()
        .property_order(PropertyOrder::Any)
        .additional_properties(false);
    let l = schema_lang_with(
        parse_json(
            r#"{"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}}, "required": ["a", "c"]}"#,
        ),
        &opts,
    );
    l.yes(&[
        r#"{"a":1,"c":2}"#,
        r#"{"c":2,"a":1}"#,
        r#"{"b":0,"c":2,"a":1}"#,
        r#"{"c":2,"b":0,"a":1}"#,
    ]);
    l.no(&[
        r#"{"a":1}"#,
        r#"{"a":1,"c":2,"a":3}"#,
        r#"{"a":1,"b":1,"b":2,"c":2}"#,
        r#"{}"#,
    ]);
    // 2^14 rules: past the budget of objects wider than 8 properties.
    let many: serde_json::Map<String, Value> = (0..14)
        .map(|i| (format!("p{i}"), parse_json(r#"{}"#)))
        .collect();
    let (kind, pointer) = error_of(
        json!({"properties": {"inner": {"type": "object", "properties": many}}}),
        &opts,
    );
    assert_eq!(
        (kind, pointer.as_str()),
        (CompileErrorKind::Limit, "/properties/inner")
    );
}

#[test]
fn whitespace_compact_and_flexible() {
    let schema = parse_json(
        r#"{"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}}"#,
    );
    let compact = schema_lang(schema.clone());
    compact.yes(&[r#"{"a":[1,2]}"#]);
    compact.no(&[r#"{"a": [1,2]}"#, r#"{ "a":[1,2]}"#]);
    let flex = schema_lang_with(
        schema,
        &JsonSchemaOptions::new().whitespace(Whitespace::Flexible { max_run: Some(2) }),
    );
    flex.yes(&[
        r#"{"a":[1,2]}"#,
        "{ \"a\" :\n[ 1 ,\t2 ] }",
        "{  }",
        "{\"a\":[  ]}",
    ]);
    flex.no(&["{   \"a\":[1]}", " {}", "{} "]);
}

#[test]
fn arrays_items_prefix_counts() {
    let l = schema_lang(parse_json(
        r#"{"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}"#,
    ));
    l.yes(&["[1]", "[1,2,3]"]);
    l.no(&["[]", "[1,2,3,4]", "[\"a\"]"]);
    let t = schema_lang(parse_json(
        r#"{"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}"#,
    ));
    t.yes(&["[]", "[\"a\"]", "[\"a\",1]"]);
    t.no(&["[1]", "[\"a\",1,2]", "[\"a\",\"b\"]"]);
    let t = schema_lang(parse_json(
        r#"{"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "null"}, "minItems": 2}"#,
    ));
    t.yes(&["[\"a\",null]", "[\"a\",null,null]"]);
    t.no(&["[\"a\"]", "[\"a\",1]"]);
    // Draft 4 tuples.
    let d4 = schema_lang(parse_json(
        r#"{"type": "array", "items": [{"type": "integer"}, {"type": "boolean"}], "additionalItems": false}"#,
    ));
    d4.yes(&["[1,true]", "[1]"]);
    d4.no(&["[1,true,3]", "[true]"]);
    // Counted repeats stay compact: a huge minItems compiles without unrolling.
    assert_compact(parse_json(
        r#"{"type": "array", "minItems": 500, "maxItems": 100000}"#,
    ));
}

/// `schema` compiles to a counted repeat, not an unrolled chain.
fn assert_compact(schema: Value) {
    let big = compile_schema(&schema, &JsonSchemaOptions::new()).unwrap();
    let exprs = big.grammar.exprs().len();
    assert!(exprs < 200, "{schema}: {exprs} expressions");
}

#[test]
fn enum_and_const() {
    let l = schema_lang(parse_json(r#"{"enum": ["red", 1, null, {"k": [true]}]}"#));
    l.yes(&[r#""red""#, "1", "null", r#"{"k":[true]}"#]);
    l.no(&[r#""Red""#, "2", "1.0", "true", r#"{"k":[false]}"#, "01"]);
    // A non-integral constant in each notation of its value.
    let half = schema_lang(parse_json(r#"{"const": 0.5}"#));
    half.yes(&["0.5", "0.50", "5e-1", "5.0E-1"]);
    half.no(&["0.51", ".5", "1"]);
    let c = schema_lang(parse_json(r#"{"const": "a\"b\n"}"#));
    c.yes(&[r#""a\"b\n""#]);
    // An enum filtered by its sibling keywords.
    let f = schema_lang(parse_json(
        r#"{"type": "string", "enum": ["a", "bb", 3], "maxLength": 1}"#,
    ));
    f.yes(&[r#""a""#]);
    f.no(&[r#""bb""#, "3"]);
    let (kind, pointer) = error_of(
        parse_json(
            r#"{"type": "object", "properties": {"x": {"type": "integer", "enum": ["a"]}}, "required": ["x"]}"#,
        ),
        &JsonSchemaOptions::new(),
    );
    assert_eq!(
        (kind, pointer.as_str()),
        (CompileErrorKind::EmptyLanguage, "")
    );
}

#[test]
fn any_of_one_of_all_of() {
    let l = schema_lang(parse_json(
        r#"{"anyOf": [{"type": "integer", "maximum": 0}, {"type": "integer", "minimum": 10}]}"#,
    ));
    l.yes(&["-5", "0", "10", "12"]);
    l.no(&["5", "1"]);
    // oneOf with disjoint branches: types, and a discriminating const.
    let o = schema_lang(parse_json(
        r#"{"oneOf": [
        {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"], "additionalProperties": false},
        {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "number"}}, "required": ["kind"], "additionalProperties": false},
        {"type": "string"}
    ]}"#,
    ));
    o.yes(&[
        r#"{"kind":"circle","r":1}"#,
        r#"{"kind":"square"}"#,
        r#""x""#,
    ]);
    o.no(&[r#"{"kind":"circle"}"#, r#"{"kind":"square","r":1}"#, "1"]);
    // Overlapping oneOf: each branch without the other's values.
    let o = schema_lang(parse_json(
        r#"{"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}"#,
    ));
    o.yes(&["-3", "2.5", "0.5"]);
    o.no(&["3", "0", "-2.5", "2.0"]);
    // Where a complement is out of reach (an array with an item outside each of five other
    // branches' items: more witnesses than an array keeps): an error at the oneOf, or anyOf
    // with a warning when lenient.
    let items = |t: &str| json!({"items": {"type": t}});
    let branches: Vec<Value> = ["integer", "string", "null", "boolean", "object", "array"]
        .into_iter()
        .map(items)
        .collect();
    let overlapping = json!({"properties": {"v": {"oneOf": branches}}});
    let (kind, pointer) = error_of(overlapping.clone(), &JsonSchemaOptions::new());
    assert_eq!(
        (kind, pointer.as_str()),
        (CompileErrorKind::Unsupported, "/properties/v/oneOf")
    );
    let lenient = compile_schema(&overlapping, &JsonSchemaOptions::new().lenient(true)).unwrap();
    assert!(!lenient.warnings.is_empty());
    for w in &lenient.warnings {
        assert_eq!(
            w.location(),
            &Location::JsonPointer("/properties/v/oneOf".into())
        );
    }
    // allOf merges objects and bounds.
    let a = schema_lang(parse_json(
        r#"{"allOf": [
        {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}, "required": ["a"]},
        {"properties": {"a": {"maximum": 5}, "b": {"type": "boolean"}}, "required": ["b"]}
    ]}"#,
    ));
    a.yes(&[r#"{"a":0,"b":true}"#, r#"{"a":5,"b":false}"#]);
    a.no(&[
        r#"{"a":6,"b":true}"#,
        r#"{"a":1}"#,
        r#"{"b":true}"#,
        r#"{"a":-1,"b":true}"#,
    ]);
    let a = schema_lang(parse_json(
        r#"{"type": "string", "allOf": [{"minLength": 2}, {"maxLength": 3}]}"#,
    ));
    a.yes(&[r#""ab""#, r#""abc""#]);
    a.no(&[r#""a""#, r#""abcd""#]);
}

#[test]
fn refs_defs_and_recursion() {
    let tree = parse_json(
        r##"{
        "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"], "additionalProperties": false}},
        "$ref": "#/$defs/node"
    }"##,
    );
    let l = schema_lang(tree);
    l.yes(&[
        r#"{"v":1}"#,
        r#"{"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4,"kids":[]}]}]}"#,
    ]);
    l.no(&[
        r#"{"v":1,"kids":[{"kids":[]}]}"#,
        r#"{"v":1,"kids":[{"v":"x"}]}"#,
    ]);
    // Recursion through a oneOf whose disjointness is decided above the recursion.
    let r = schema_lang(parse_json(
        r##"{"$defs": {"r": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"ios": {"$ref": "#/$defs/r"}}, "required": ["ios"], "additionalProperties": false}]}}, "$ref": "#/$defs/r"}"##,
    ));
    r.yes(&[r#""x""#, r#"{"ios":{"ios":"y"}}"#]);
    r.no(&[r#"{"ios":1}"#, "{}"]);
    let d4 = schema_lang(parse_json(
        r##"{"definitions": {"s": {"type": "string"}}, "type": "array", "items": {"$ref": "#/definitions/s"}}"##,
    ));
    d4.yes(&[r#"["a","b"]"#]);
    d4.no(&["[1]"]);
    let anchors = schema_lang(parse_json(
        r##"{"$id": "https://x.example/s.json", "$defs": {"a": {"$anchor": "thing", "type": "null"}}, "properties": {"p": {"$ref": "#thing"}, "q": {"$ref": "https://x.example/s.json#/$defs/a"}}}"##,
    ));
    anchors.yes(&[r#"{"p":null,"q":null}"#]);
    anchors.no(&[r#"{"p":1}"#]);
    let (kind, pointer) = error_of(
        parse_json(r##"{"properties": {"x": {"$ref": "#/$defs/missing"}}}"##),
        &JsonSchemaOptions::new(),
    );
    assert_eq!(
        (kind, pointer.as_str()),
        (CompileErrorKind::Undefined, "/properties/x/$ref")
    );
    let (kind, _) = error_of(
        parse_json(r#"{"$ref": "other.json#/a"}"#),
        &JsonSchemaOptions::new(),
    );
    assert_eq!(kind, CompileErrorKind::Undefined);
}

#[test]
fn patterns_search_semantics_and_ecma_classes() {
    let l = schema_lang(parse_json(r#"{"type": "string", "pattern": "b+c"}"#));
    l.yes(&[r#""bc""#, r#""abbcd""#, r#""xx bc""#]);
    l.no(&[r#""b c""#, r#""cb""#]);
    let l = schema_lang(parse_json(r#"{"type": "string", "pattern": "^\\d{3}$"}"#));
    l.yes(&[r#""123""#, r#""\u0031\u0032\u0033""#]);
    // ECMA \d is ASCII: Arabic-Indic digits do not match.
    l.no(&[r#""1234""#, r#""12""#, "\"\u{663}\u{663}\u{663}\""]);
    let l = schema_lang(parse_json(r#"{"type": "string", "pattern": "^a|b$"}"#));
    l.yes(&[r#""ax""#, r#""xb""#]);
    l.no(&[r#""xa""#, r#""bx""#]);
    let l = schema_lang(parse_json(r#"{"type": "string", "pattern": "^(x$|y)"}"#));
    l.yes(&[r#""x""#, r#""yz""#]);
    l.no(&[r#""xz""#]);
    let l = schema_lang(parse_json(r#"{"type": "string", "pattern": "^a.c$"}"#));
    l.yes(&[r#""abc""#, r#""a\"c""#, r#""a\tc""#]);
    l.no(&[r#""a\nc""#, r#""a\rc""#, r#""ac""#]);
    // `\<` and `\>` are the characters to ECMA-262 (identity escapes), not word boundaries.
    let l = schema_lang(parse_json(
        r#"{"type": "string", "pattern": "^.+\\<.+@.+\\>$"}"#,
    ));
    l.yes(&[r#""Ann <ann@x.org>""#]);
    l.no(&[r#""Ann ann@x.org""#, r#""<a@b>""#]);
}

/// A look-ahead right after the pattern's `^` is tested once, at the first character: the
/// pattern is the rest, searched from the start, with the look-ahead's own pattern required
/// (`(?=`) or refused (`(?!`) there, as a pattern or a `patternProperties` name.
#[test]
fn leading_lookaheads() {
    let l = schema_lang(parse_json(
        r#"{"type": "string", "pattern": "^(?!org\\.bukkit\\.)[a-z.]+$"}"#,
    ));
    l.yes(&[r#""com.x""#, r#""org.bukkitx""#, r#""org.buk""#]);
    l.no(&[r#""org.bukkit.x""#, r#""org.bukkit.""#, r#""Com""#]);
    let l = schema_lang(parse_json(
        r#"{"type": "string", "pattern": "^(?=.*[0-9])(?=.*[a-z])"}"#,
    ));
    l.yes(&[r#""a1""#, r#""9z!""#]);
    l.no(&[r#""abc""#, r#""123""#, r#""""#]);
    let l = schema_lang(parse_json(
        r#"{"type": "object", "patternProperties": {"^(?!@@)[@a-z]+$": {"type": "integer"}}, "additionalProperties": false}"#,
    ));
    l.yes(&[r#"{"ab":1,"@x":2}"#, "{}"]);
    l.no(&[r#"{"@@x":1}"#, r#"{"ab":"s"}"#]);
    // A `|` outside the look-ahead puts a branch beyond its reach: refused, typed.
    let e = compile_schema(
        &parse_json(r#"{"type": "string", "pattern": "^(?!a)b|c"}"#),
        &JsonSchemaOptions::new(),
    )
    .unwrap_err();
    assert_eq!(e.kind(), CompileErrorKind::Unsupported, "{e}");
    // Look-aheads in a row: each one more regex, as many as the nesting limit.
    let l = schema_lang(parse_json(
        r#"{"type": "string", "pattern": "^(?=.*[0-9])(?!.*x)[a-z0-9]+$"}"#,
    ));
    l.yes(&[r#""a1""#]);
    l.no(&[r#""ax1""#, r#""ab""#]);
    let many = format!("^{}a", "(?=a)".repeat(200));
    let e = compile_schema(
        &json!({"type": "string", "pattern": many}),
        &JsonSchemaOptions::new(),
    )
    .unwrap_err();
    assert_eq!(e.limit().map(|l| l.kind), Some(LimitKind::Nesting), "{e}");
}

#[test]
fn pattern_matches_decoded_text_in_every_spelling() {
    // The regex sees decoded characters: a quote, a backslash and a newline.
    let l = schema_lang(parse_json(
        r#"{"type": "string", "pattern": "^\"\\\\\\n$"}"#,
    ));
    l.yes(&[
        r#""\"\\\n""#,
        r#""\u0022\u005c\u000a""#,
        r#""\u0022\u005C\u000A""#,
    ]);
    // Raw quotes, raw backslashes and raw control characters are never JSON.
    l.no(&["\"\"\\\n\"", "\"\\\"\\\\\n\""]);
    let slash = schema_lang(parse_json(r#"{"type": "string", "pattern": "^/é😀$"}"#));
    slash.yes(&[
        "\"/é😀\"",
        r#""\/\u00e9\ud83d\ude00""#,
        r#""\u002F\u00E9\uD83D\uDE00""#,
    ]);
    // A lone surrogate is not a character; a wrong pair spells another character.
    slash.no(&[r#""/é\ud83d""#, r#""/é\ud83d\ude01""#]);
}

#[test]
fn lengths_count_characters() {
    let l = schema_lang(parse_json(
        r#"{"type": "string", "minLength": 2, "maxLength": 3}"#,
    ));
    l.yes(&[
        r#""ab""#,
        "\"é😀\"",
        r#""\u00e9\ud83d\ude00x""#,
        r#""\n\t""#,
    ]);
    l.no(&[
        r#""a""#,
        "\"😀\"",
        r#""abcd""#,
        r#""\ud83d\ude00""#,
        r#""\ud83d""#,
    ]);
    // A length pushed into the pattern's single repetition.
    let p = schema_lang(parse_json(
        r#"{"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "maxLength": 4}"#,
    ));
    p.yes(&[r#""a""#, r#""ab-9""#]);
    p.no(&[r#""ab-9x""#, r#""9ab""#]);
    let p = schema_lang(parse_json(
        r#"{"type": "string", "pattern": "^([0-9]{2}:)+$|^x$", "minLength": 1, "maxLength": 6}"#,
    ));
    p.yes(&[r#""12:""#, r#""12:34:""#, r#""x""#]);
    p.no(&[r#""12:34:56:""#, r#""""#]);
    // A huge maxLength compiles to a counted repeat, not an unrolled chain.
    assert_compact(parse_json(r#"{"type": "string", "maxLength": 1000000}"#));
}

/// Every integer literal around the bounds, against arithmetic.
#[test]
fn integer_ranges_exhaustive() {
    let cases: &[(Option<i64>, Option<i64>, bool, bool)] = &[
        (Some(-123), Some(57), false, false),
        (Some(-250), Some(-13), true, false),
        (Some(7), Some(205), false, true),
        (None, Some(-99), false, false),
        (Some(-9), None, true, false),
        (Some(0), Some(0), false, false),
        (Some(100), Some(100), false, false),
    ];
    for &(lo, hi, xlo, xhi) in cases {
        let mut schema = parse_json(r#"{"type": "integer"}"#);
        if let Some(l) = lo {
            schema[if xlo { "exclusiveMinimum" } else { "minimum" }] = json!(l);
        }
        if let Some(h) = hi {
            schema[if xhi { "exclusiveMaximum" } else { "maximum" }] = json!(h);
        }
        let lang = schema_lang(schema.clone());
        for v in -300i64..=300 {
            let inside = lo.is_none_or(|l| if xlo { v > l } else { v >= l })
                && hi.is_none_or(|h| if xhi { v < h } else { v <= h });
            let text = v.to_string();
            assert_eq!(lang.accepts(&text), inside, "{schema} on {text}");
            assert!(!lang.accepts(&format!("{v}.0")), "{schema} on {v}.0");
        }
        assert_eq!(lang.accepts("-0"), lang.accepts("0"), "{schema} on -0");
        lang.no(&["007", "+5", "1e1", "1.5", "--1"]);
    }
    // Fractional bounds on integers round inwards.
    let l = schema_lang(parse_json(
        r#"{"type": "integer", "minimum": -2.5, "maximum": 3.5}"#,
    ));
    l.yes(&["-2", "3"]);
    l.no(&["-3", "4"]);
}

/// Number literals against their f64 values: accepted ones are in range (sound) and every
/// plain or normalised-exponent literal in range is accepted (complete for those forms).
#[test]
fn number_ranges() {
    let mut literals = Vec::new();
    for int in -25i32..=25 {
        for frac in ["", ".0", ".5", ".25", ".05", ".999", ".0001"] {
            literals.push(format!("{int}{frac}"));
        }
    }
    literals.push("-0.5".into());
    literals.push("-0.25".into());
    for m in ["1", "2.5", "9.99", "1.25"] {
        for e in ["e0", "e1", "E-1", "e+1", "e-02", "e-3"] {
            literals.push(format!("{m}{e}"));
            literals.push(format!("-{m}{e}"));
        }
    }
    let odd = ["0.5e1", "25e-1", "0e3", "-0.0e-2", "0.0"];
    literals.extend(odd.iter().map(|s| s.to_string()));
    let normal = |t: &str| {
        let mantissa = t.trim_start_matches('-').split(['e', 'E']).next().unwrap();
        !t.contains(['e', 'E'])
            || (mantissa.as_bytes()[0] != b'0' && mantissa.split('.').next().unwrap().len() == 1)
    };
    let cases = [
        parse_json(r#"{"minimum": -1.5, "maximum": 2.25}"#),
        parse_json(r#"{"exclusiveMinimum": 0.25, "exclusiveMaximum": 10}"#),
        parse_json(r#"{"minimum": 0}"#),
        parse_json(r#"{"exclusiveMinimum": 0}"#),
        parse_json(r#"{"maximum": -0.05}"#),
        parse_json(r#"{"minimum": 1.0, "maximum": 1.0}"#),
    ];
    for bounds in cases {
        let mut schema = bounds.clone();
        schema["type"] = parse_json(r#""number""#);
        let lang = schema_lang(schema.clone());
        let get = |k: &str| bounds.get(k).and_then(Value::as_f64);
        let zero_bound = get("minimum") == Some(0.0) || get("exclusiveMinimum") == Some(0.0);
        for t in &literals {
            let v: f64 = t.parse().unwrap();
            let inside = get("minimum").is_none_or(|b| v >= b)
                && get("maximum").is_none_or(|b| v <= b)
                && get("exclusiveMinimum").is_none_or(|b| v > b)
                && get("exclusiveMaximum").is_none_or(|b| v < b);
            let got = lang.accepts(t);
            assert!(!got || inside, "{schema} accepts {t} out of range");
            if normal(t) || zero_bound {
                assert_eq!(got, inside, "{schema} on {t}");
            }
        }
    }
}

#[test]
fn formats() {
    let f = |name: &str| schema_lang(json!({"type": "string", "format": name}));
    let s = |x: &str| format!("\"{x}\"");
    let check = |name: &str, good: &[&str], bad: &[&str]| {
        let l = f(name);
        for g in good {
            assert!(l.accepts(&s(g)), "{name} should accept {g}");
        }
        for b in bad {
            assert!(!l.accepts(&s(b)), "{name} should reject {b}");
        }
    };
    check(
        "date",
        &["2024-02-29", "2000-02-29", "1999-12-31"],
        &[
            "1900-02-29",
            "2023-02-29",
            "2024-04-31",
            "2024-13-01",
            "24-01-01",
        ],
    );
    check(
        "time",
        &["23:59:60Z", "08:30:00.123+05:30", "00:00:00z"],
        &["24:00:00Z", "08:30:00", "8:30:00Z"],
    );
    check(
        "date-time",
        &["2024-01-15T08:30:00Z", "2024-01-15t08:30:00-01:00"],
        &["2024-01-15 08:30:00Z", "2024-01-15T08:30Z"],
    );
    // RFC 3339 appendix A: no skipping from hours to seconds or from years to days.
    check(
        "duration",
        &["P1Y2M3DT4H5M6S", "PT1S", "P3W", "P1M", "PT1H5M"],
        &["P", "PT", "P1Y1D1M", "1Y", "P1DT", "PT1H5S"],
    );
    check(
        "uuid",
        &["123e4567-e89b-12d3-a456-426614174000"],
        &[
            "123e4567e89b12d3a456426614174000",
            "123e4567-e89b-12d3-a456-42661417400g",
        ],
    );
    check(
        "ipv4",
        &["192.168.0.1", "0.0.0.0", "255.255.255.255"],
        &["256.1.1.1", "01.2.3.4", "1.2.3"],
    );
    check(
        "ipv6",
        &[
            "::1",
            "2001:db8::8a2e:370:7334",
            "::ffff:192.0.2.1",
            "1:2:3:4:5:6:7:8",
        ],
        &["1:2:3:4:5:6:7:8:9", ":::1", "12345::"],
    );
    check(
        "email",
        &["a.b+c@example.com", "x@y"],
        &["a@", "@b.com", "a..b@c.com", "a b@c.com"],
    );
    check(
        "hostname",
        &["example.com", "a-b.c1"],
        &["-a.com", "a..b", "a_b.com"],
    );
    check(
        "uri",
        &[
            "https://example.com/a?b=c#d",
            "urn:isbn:0451450523",
            "mailto:x@y.z",
        ],
        &["//example.com", "no scheme", "http://[::1"],
    );
    // RFC 3987: characters beyond ASCII where RFC 3986 has unreserved ones, private-use
    // characters in the query only.
    check(
        "iri",
        &[
            "https://例え.テスト/パス?q=値#片",
            "urn:isbn:0451450523",
            "http://example.com/?\u{E000}",
        ],
        &[
            "//例え.テスト",
            "http://example.com/\u{E000}",
            "http://a b",
            "http://example.com/\u{7F}",
        ],
    );
    check(
        "iri-reference",
        &["//例え.jp/x", "../ä?b", "", "http://ö.de"],
        &["a b", "http://[::1", "#\u{E000}"],
    );
    // RFC 6570 level 4.
    check(
        "uri-template",
        &[
            "http://example.com/{user}/{?q,lang}",
            "{+path:6}/here",
            "{var*}",
            "{/list*,path:4}{#x}",
            "plain",
            "",
        ],
        &[
            "{",
            "{}",
            "{a b}",
            "http://x/{a",
            "{a:0}",
            "{a:10000}",
            "a}b",
            "{a..b}",
        ],
    );
    check("json-pointer", &["", "/a~1b/0"], &["a", "/a~2"]);
    // Unknown formats are annotations: ignored, with a warning.
    let w = compile_schema(
        &parse_json(r#"{"type": "string", "format": "int32"}"#),
        &JsonSchemaOptions::new(),
    )
    .unwrap();
    assert_eq!(w.warnings.len(), 1);
}

#[test]
fn errors_name_their_json_pointer() {
    let strict = JsonSchemaOptions::new();
    let cases = [
        (
            parse_json(r#"{"properties": {"a~b/c": {"not": {"unevaluatedProperties": false}}}}"#),
            CompileErrorKind::Unsupported,
            "/properties/a~0b~1c/not/unevaluatedProperties",
        ),
        (
            parse_json(r#"{"items": {"type": "frog"}}"#),
            CompileErrorKind::Invalid,
            "/items/type",
        ),
        (
            parse_json(r#"{"type": "string", "pattern": "(?=x)"}"#),
            CompileErrorKind::Unsupported,
            "/pattern",
        ),
        (
            parse_json(r#"{"type": "string", "pattern": "a("}"#),
            CompileErrorKind::Syntax,
            "/pattern",
        ),
        (
            parse_json(
                r#"{"allOf": [{"type": "string", "pattern": "^(a|b)*a(a|b){12}$"}, {"pattern": "b"}]}"#,
            ),
            CompileErrorKind::Limit,
            "/allOf/0/pattern",
        ),
        (
            parse_json(r#"{"type": "string", "pattern": "^a\\b", "maxLength": 5}"#),
            CompileErrorKind::Unsupported,
            "/pattern",
        ),
        (
            parse_json(r#"{"type": "array", "uniqueItems": true}"#),
            CompileErrorKind::Unsupported,
            "/uniqueItems",
        ),
        (
            parse_json(r#"{"type": "array", "minItems": -1}"#),
            CompileErrorKind::Invalid,
            "/minItems",
        ),
        (
            parse_json(
                r##"{"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}"##,
            ),
            CompileErrorKind::EmptyLanguage,
            "",
        ),
        (
            parse_json(
                r##"{"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]}"##,
            ),
            CompileErrorKind::EmptyLanguage,
            "",
        ),
        (
            parse_json(r#"{"type": "string", "format": "idn-email"}"#),
            CompileErrorKind::Unsupported,
            "/format",
        ),
    ];
    for (schema, kind, pointer) in cases {
        assert_eq!(
            error_of(schema.clone(), &strict),
            (kind, pointer.to_string()),
            "{schema}"
        );
    }
    // Lenient drops the keyword and says where.
    let lenient = compile_schema(
        &parse_json(r#"{"properties": {"a": {"not": {"unevaluatedProperties": false}}}}"#),
        &JsonSchemaOptions::new().lenient(true),
    )
    .unwrap();
    assert_eq!(
        lenient.warnings[0].location(),
        &Location::JsonPointer("/properties/a/not/unevaluatedProperties".into())
    );
    // Keywords without effect are fine.
    compile_schema(&parse_json(r#"{"type": "array", "uniqueItems": false, "if": {"type": "null"}, "x-vendor": 1, "title": "t"}"#), &strict).unwrap();
}

#[test]
fn pathological_schemas_stay_bounded() {
    let mut deep = parse_json(r#"{"type": "integer"}"#);
    for _ in 0..1000 {
        deep = json!({"type": "array", "items": deep});
    }
    let e = compile_schema(&deep, &JsonSchemaOptions::new()).expect_err("too deep");
    assert_eq!(e.kind(), CompileErrorKind::Limit);
    // The default nesting limit (128 levels, the root one of them).
    let mut nested = parse_json(r#"{"type": "integer"}"#);
    for _ in 0..127 {
        nested = json!({"type": "array", "items": nested});
    }
    let ok = compile_schema(&nested, &JsonSchemaOptions::new()).unwrap();
    assert!(ok.grammar.exprs().len() < 10_000);
    let e = compile_schema_with(
        &parse_json(r#"{"type": "integer", "minimum": -1e300, "maximum": 1e300}"#),
        &JsonSchemaOptions::new(),
        &Limits::new().grammar_size(50),
    )
    .expect_err("too big");
    assert_eq!(e.limit().map(|l| l.kind), Some(LimitKind::GrammarSize));
}

// Untrusted input: every case below compiles on a thread with the smallest stack a server may
// give its workers, and ends in a correct grammar or a typed `Limit` error at its place.

/// The limit a `Limit` error reached and the JSON pointer it names.
fn limit_at(e: &CompileError) -> (LimitKind, String) {
    let kind = e
        .limit()
        .unwrap_or_else(|| panic!("not a typed limit: {e}"))
        .kind;
    match e.location() {
        Location::JsonPointer(p) => (kind, p.clone()),
        other => panic!("no pointer: {other:?} ({e})"),
    }
}

/// The grammar of `schema` compiled on a small stack within `limits`.
fn small_stack_compile(schema: &Value, limits: &Limits) -> Result<Grammar, CompileError> {
    on_small_stack(|| {
        compile_schema_with(schema, &JsonSchemaOptions::new(), limits).map(|c| c.grammar)
    })
}

/// Patterns whose characters lie beyond the BMP, several under one high surrogate (😀 and 😂
/// are D83D DE00 and D83D DE02), and Unicode properties (hundreds of ranges, astral ones
/// among them): every JSON spelling of the characters they admit, none of the others.
#[test]
fn astral_characters_and_unicode_properties_in_patterns() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "^[😀😂]$",
            &[
                r#""😀""#,
                r#""😂""#,
                r#""\ud83d\ude00""#,
                r#""\uD83D\uDE02""#,
                r#""\uD83D\ude00""#,
            ],
            &[
                r#""😁""#,
                r#""\ud83d\ude01""#,
                r#""\ud83d""#,
                r#""\ude00""#,
                r#""\ud83c\ude00""#,
                r#""a""#,
                r#""😀😂""#,
                r#""""#,
            ],
        ),
        (
            "^[😀-😏🙀a]+$",
            &[r#""😏a🙀""#, r#""\ud83d\ude40""#, r#""\ud83d\ude0f""#],
            &[r#""😐""#, r#""\ud83d\ude10""#, r#""\ud83d\ude41""#],
        ),
        (
            // A range over two high surrogates, partial at both ends, and a character sharing
            // the high surrogate where it ends.
            "^[\u{1F600}-\u{1F9FF}\u{1FA00}]$",
            &[
                r#""😀""#,
                r#""\ud83d\ude00""#,
                r#""\ud83d\udfff""#,
                r#""\ud83e\udc00""#,
                r#""\ud83e\uddff""#,
                r#""\ud83e\ude00""#,
            ],
            &[
                r#""\ud83d\uddff""#,
                r#""\ud83e\ude01""#,
                r#""\ud83e\udfff""#,
                r#""\ud83f\udc00""#,
            ],
        ),
        (
            "^\\p{Greek}+$",
            &[r#""αβγ""#, r#""\u03b1\u03B2""#],
            &[r#""a""#, r#""""#, r#""α1""#],
        ),
        (
            "^[^\\p{L}]$",
            &[
                r#""1""#,
                r#""😀""#,
                r#""\ud83d\ude00""#,
                r#""\u0031""#,
                r#""\n""#,
            ],
            &[
                r#""a""#,
                r#""\u0061""#,
                r#""𝐀""#,
                r#""\ud835\udc00""#,
                r#""é""#,
            ],
        ),
        (
            "\\p{N}",
            &[r#""x1""#, r#""𝟙""#, r#""\ud835\udfd9 ""#],
            &[r#""x""#, r#""\ud835\udc00""#],
        ),
        (
            "^\\p{Letter}{2}$",
            &[r#""ab""#, r#""𝐀a""#, r#""\ud835\udc00a""#],
            &[r#""a1""#, r#""a""#, r#""𝟙a""#],
        ),
    ];
    for (pattern, yes, no) in cases {
        for extra in [parse_json(r#"{}"#), parse_json(r#"{"maxLength": 3}"#)] {
            let mut schema = json!({"type": "string", "pattern": pattern});
            schema
                .as_object_mut()
                .unwrap()
                .extend(extra.as_object().unwrap().clone());
            let grammar = small_stack_compile(&schema, &Limits::new())
                .unwrap_or_else(|e| panic!("{schema}: {e}"));
            let lang = Lang::new(&grammar);
            let fits = |t: &str| {
                let chars = serde_json::from_str::<String>(t).unwrap().chars().count();
                extra.get("maxLength").is_none() || chars <= 3
            };
            lang.yes(&yes.iter().copied().filter(|t| fits(t)).collect::<Vec<_>>());
            lang.no(no);
        }
    }
}

/// The masks of such patterns on the Qwen3 vocabulary are the reference recognizer's, token by
/// token, for raw characters and for escaped surrogate pairs.
#[test]
fn astral_pattern_masks_match_the_oracle() {
    let vocab = tokenizers::qwen3();
    let engine = Engine::new(vocab.clone());
    let cases = [
        (
            parse_json(r#"{"type": "string", "pattern": "^[😀😂]$"}"#),
            [r#""😀""#, r#""\ud83d\ude02""#],
        ),
        (
            parse_json(r#"{"type": "string", "pattern": "^[^\\p{L}]+$", "maxLength": 4}"#),
            [r#""1😂""#, r#""\uD83D\uDE00!""#],
        ),
    ];
    for (schema, texts) in cases {
        let grammar = compile_schema(&schema, &JsonSchemaOptions::new())
            .unwrap()
            .grammar;
        let constraint = engine
            .compile_json_schema(&schema, &JsonSchemaOptions::new())
            .unwrap();
        for text in texts {
            let mut m = constraint.matcher();
            let tokens = vocab.encode(text).unwrap();
            let label = format!("{schema} on {text}");
            formwork_testkit::oracle::assert_masks_match_oracle(
                &label, vocab, &grammar, &mut m, &tokens,
            );
        }
    }
}

/// A chain of `n` references through `via` (`properties`, `items` or nothing), ending in an
/// integer.
fn ref_chain(via: &str, n: usize) -> Value {
    let mut defs = serde_json::Map::new();
    for i in 0..n {
        let next = json!({"$ref": format!("#/$defs/n{}", i + 1)});
        defs.insert(
            format!("n{i}"),
            match via {
                "properties" => json!({"type": "object", "properties": {"x": next}}),
                "items" => json!({"type": "array", "items": next}),
                _ => next,
            },
        );
    }
    defs.insert(format!("n{n}"), parse_json(r#"{"type": "integer"}"#));
    json!({"$defs": defs, "$ref": "#/$defs/n0"})
}

/// Each link `n{i}` of a chain of `n` is one rule that calls the next one's.
fn assert_linked(g: &Grammar, n: usize) {
    let rule_of: std::collections::HashMap<&str, usize> = g
        .rules()
        .iter()
        .enumerate()
        .map(|(i, r)| (r.name.as_str(), i))
        .collect();
    let link = |i: usize| rule_of[format!("ref #/$defs/n{i}").as_str()];
    for i in 0..n {
        let calls = g.rule_refs(g.rules()[link(i)].body);
        assert!(
            calls.iter().any(|r| r.index() == link(i + 1)),
            "n{i} calls {calls:?}"
        );
    }
}

/// References are lowered from a worklist, one rule each, never inside one another: chains of
/// 100,000 links compile on a small stack, each link a rule calling the next (the reference
/// recognizer checks the language of the same chains 1,000 links long: it is too slow for
/// 100,000 rules).
#[test]
fn long_reference_chains() {
    // Linear, but seconds on a busy machine: the result is what is checked, not the time.
    // 100,000 links are past the default grammar size (tested on its own), raised here.
    let untimed = Limits::new().compile_time(None).grammar_size(8_000_000);
    for via in ["", "properties", "items"] {
        let g = small_stack_compile(&ref_chain(via, 100_000), &untimed).unwrap();
        assert_linked(&g, 100_000);
    }
    let direct = small_stack_compile(&ref_chain("", 1000), &Limits::new()).unwrap();
    Lang::new(&direct).yes(&["7", "-12"]);
    Lang::new(&direct).no(&["1.5", "\"7\"", "[]"]);
    let props = small_stack_compile(&ref_chain("properties", 1000), &Limits::new()).unwrap();
    Lang::new(&props).yes(&["{}", r#"{"x":{}}"#, r#"{"x":{"x":{},"y":3}}"#]);
    Lang::new(&props).no(&[r#"{"x":1}"#, "[]", r#"{"x":{"x":[]}}"#]);
    let items = small_stack_compile(&ref_chain("items", 1000), &Limits::new()).unwrap();
    Lang::new(&items).yes(&["[]", "[[],[[]]]"]);
    Lang::new(&items).no(&["[1]", "[[1]]", "{}"]);
    let n = 100_000;
    // A chain of references that must each be intersected with a sibling keyword is resolved
    // inside the schema before it: its links nest, up to the nesting limit.
    let mut defs = serde_json::Map::new();
    for i in 0..n {
        let next = json!({"$ref": format!("#/$defs/n{}", i + 1), "type": "array"});
        defs.insert(format!("n{i}"), next);
    }
    defs.insert(
        format!("n{n}"),
        parse_json(r#"{"items": {"type": "integer"}}"#),
    );
    let sibling = json!({"$defs": defs, "$ref": "#/$defs/n0"});
    let e = small_stack_compile(&sibling, &Limits::new()).unwrap_err();
    assert_eq!(
        limit_at(&e),
        (LimitKind::Nesting, "/$defs/n128".to_string())
    );
    let short: Value = serde_json::from_str(&sibling.to_string().replace(
        "\"n1000\":{\"$ref\":\"#/$defs/n1001\",\"type\":\"array\"}",
        "\"n1000\":{}",
    ))
    .unwrap();
    let e = small_stack_compile(&short, &Limits::new().nesting(2000)).map(|g| g.rules().len());
    assert!(e.is_ok(), "{e:?}");
    // `allOf` of many references intersects them all, one nesting level each.
    let refs: Vec<Value> = (0..200)
        .map(|i| json!({"$ref": format!("#/$defs/n{i}")}))
        .collect();
    let mut defs = serde_json::Map::new();
    for i in 0..200 {
        defs.insert(format!("n{i}"), parse_json(r#"{"type": "array"}"#));
    }
    let all = json!({"$defs": defs, "allOf": refs});
    let e = small_stack_compile(&all, &Limits::new()).unwrap_err();
    assert_eq!(limit_at(&e), (LimitKind::Nesting, "/allOf/128".to_string()));
    // Enum values checked against an `anyOf` chain of references, and against a cycle.
    let cycle = parse_json(
        r##"{"$defs": {
        "a": {"anyOf": [{"$ref": "#/$defs/b"}, {"type": "null"}]},
        "b": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "string"}]}},
        "enum": [5, "s", null], "$ref": "#/$defs/a"}"##,
    );
    let g = small_stack_compile(&cycle, &Limits::new()).unwrap();
    Lang::new(&g).yes(&["\"s\"", "null"]);
    Lang::new(&g).no(&["5"]);
}

/// A schema nested `levels` deep (the root is level 1) through `via`; the pointer of its
/// innermost schema.
fn nested(via: &str, levels: usize) -> (Value, String) {
    let (mut schema, mut pointer) = (parse_json(r#"{"type": "integer"}"#), String::new());
    for _ in 1..levels {
        let (outer, step) = match via {
            "items" => (json!({"type": "array", "items": schema}), "/items"),
            "properties" => (
                json!({"type": "object", "properties": {"a": schema}}),
                "/properties/a",
            ),
            "additionalProperties" => (
                json!({"type": "object", "additionalProperties": schema}),
                "/additionalProperties",
            ),
            "prefixItems" => (
                json!({"type": "array", "prefixItems": [schema]}),
                "/prefixItems/0",
            ),
            "anyOf" => (json!({"anyOf": [schema, {"type": "null"}]}), "/anyOf/0"),
            "oneOf" => (json!({"oneOf": [schema]}), "/oneOf/0"),
            _ => (json!({"allOf": [schema]}), "/allOf/0"),
        };
        schema = outer;
        pointer.insert_str(0, step);
    }
    (schema, pointer)
}

/// Subschemas nest up to `Limits::nesting` on a 256 KiB stack, whatever the limit: at the
/// limit the schema compiles, past it the error names the limit and the innermost schema.
#[test]
fn nesting_limit_on_a_small_stack() {
    let kinds = [
        "items",
        "properties",
        "additionalProperties",
        "prefixItems",
        "anyOf",
        "oneOf",
        "allOf",
    ];
    for via in kinds {
        let (at_limit, _) = nested(via, 128);
        small_stack_compile(&at_limit, &Limits::new()).unwrap_or_else(|e| panic!("{via}: {e}"));
        let (past, innermost) = nested(via, 129);
        let e = small_stack_compile(&past, &Limits::new()).unwrap_err();
        assert_eq!(limit_at(&e), (LimitKind::Nesting, innermost), "{via}");
        assert_eq!(e.limit().map(|l| (l.value, l.max)), Some((129, 128)));
    }
    // A limit raised far past what the stack holds without the guard.
    for via in ["items", "properties", "anyOf"] {
        let (deep, innermost) = nested(via, 1500);
        let limits = Limits::new().nesting(1500);
        small_stack_compile(&deep, &limits).unwrap_or_else(|e| panic!("{via}: {e}"));
        let e = small_stack_compile(&deep, &Limits::new().nesting(1499)).unwrap_err();
        assert_eq!(limit_at(&e), (LimitKind::Nesting, innermost), "{via}");
    }
    // Values and pattern groups nest within the same limit.
    let mut value = parse_json(r#"1"#);
    for _ in 0..128 {
        value = json!([value]);
    }
    let e = small_stack_compile(&json!({"enum": [value]}), &Limits::new()).unwrap_err();
    assert_eq!(limit_at(&e), (LimitKind::Nesting, "/enum".to_string()));
    let e = small_stack_compile(&json!({"const": {"a": value}}), &Limits::new()).unwrap_err();
    assert_eq!(limit_at(&e), (LimitKind::Nesting, "/const".to_string()));
    let groups = |n: usize| format!("^{}a{}$", "(".repeat(n), ")".repeat(n));
    small_stack_compile(
        &json!({"type": "string", "pattern": groups(127)}),
        &Limits::new(),
    )
    .unwrap();
    let e = small_stack_compile(
        &json!({"type": "string", "pattern": groups(129)}),
        &Limits::new(),
    )
    .unwrap_err();
    assert_eq!(limit_at(&e), (LimitKind::Nesting, "/pattern".to_string()));
    let deep_pattern = json!({"type": "string", "pattern": groups(2000), "maxLength": 5});
    let g = small_stack_compile(&deep_pattern, &Limits::new().nesting(2001)).unwrap();
    Lang::new(&g).yes(&["\"a\""]);
    Lang::new(&g).no(&["\"b\"", "\"aa\""]);
}

/// Lists are held to `Limits::alternatives`, and long work to the compile-time budget.
#[test]
fn alternatives_and_compile_time() {
    let strings =
        |n: usize| -> Vec<Value> { (0..n).map(|i| json!(format!("value {i}"))).collect() };
    let big = json!({"enum": strings(200_000)});
    let e = small_stack_compile(&big, &Limits::new()).unwrap_err();
    assert_eq!(limit_at(&e), (LimitKind::Alternatives, "/enum".to_string()));
    assert_eq!(
        e.limit().map(|l| (l.value, l.max)),
        Some((200_000, 100_000))
    );
    let not = json!({"type": "string", "not": {"enum": strings(200_000)}});
    let e = small_stack_compile(&not, &Limits::new()).unwrap_err();
    assert_eq!(limit_at(&e).0, LimitKind::Alternatives);
    let branches: Vec<Value> = (0..1000).map(|i| json!({"const": i})).collect();
    let e = small_stack_compile(
        &json!({"anyOf": branches}),
        &Limits::new().alternatives(999),
    )
    .unwrap_err();
    assert_eq!(
        limit_at(&e),
        (LimitKind::Alternatives, "/anyOf".to_string())
    );
    // Within the limit, an enum compiles to one branch per value.
    let g = small_stack_compile(&json!({"enum": strings(100_000)}), &Limits::new()).unwrap();
    Lang::new(&g).yes(&["\"value 0\"", "\"value 99999\""]);
    Lang::new(&g).no(&["\"value 100000\"", "\"value\""]);
    // A budget already spent stops the front end inside its loops.
    let spent = Limits::new().compile_time(Some(std::time::Duration::ZERO));
    for schema in [
        json!({"enum": strings(20_000)}),
        ref_chain("items", 20_000),
        json!({"type": "object", "properties": strings(20_000).iter().map(|v| (v.as_str().unwrap().to_string(), json!({}))).collect::<serde_json::Map<_, _>>(), "additionalProperties": false}),
    ] {
        let e = small_stack_compile(&schema, &spent).unwrap_err();
        assert_eq!(
            e.limit().map(|l| l.kind),
            Some(LimitKind::CompileTime),
            "{e}"
        );
    }
}

/// The engine's limits hold on every path into the front end: `compile_json_schema` and the
/// `json_schema(...)` request built-in.
#[test]
fn engine_paths_honour_the_engine_limits() {
    let config = formwork::EngineConfig::new().limits(Limits::new().nesting(4));
    let engine = Engine::with_config(tokenizers::qwen3().clone(), config);
    let (ok, _) = nested("items", 4);
    let (deep, innermost) = nested("items", 5);
    engine
        .compile_json_schema(&ok, &JsonSchemaOptions::new())
        .unwrap();
    let e = engine
        .compile_json_schema(&deep, &JsonSchemaOptions::new())
        .unwrap_err();
    assert_eq!(limit_at(&e), (LimitKind::Nesting, innermost.clone()));
    let request = |schema: &Value| {
        let text = schema
            .to_string()
            .replace('\\', "\\\\")
            .replace('"', "\\\"");
        format!("json_schema(schema: \"{text}\")")
    };
    engine.compile(&request(&ok)).unwrap();
    let e = engine.compile(&request(&deep)).unwrap_err();
    assert_eq!(limit_at(&e), (LimitKind::Nesting, innermost));
    let astral = parse_json(r#"{"type": "string", "pattern": "^[😀😂]$"}"#);
    engine.compile(&request(&astral)).unwrap();
}

// Tails (issue 20): string shapes whose grammar, as written, made every mask a walk of the
// whole vocabulary through many readings at once.

fn grammar_of(schema: Value) -> Grammar {
    compile_schema(&schema, &JsonSchemaOptions::new())
        .unwrap_or_else(|e| panic!("{schema}: {e}"))
        .grammar
}

/// Rules lowered from character automata (one per state).
fn automaton_states(g: &Grammar) -> usize {
    g.rules()
        .iter()
        .filter(|r| r.name.contains("json string automaton"))
        .count()
}

#[test]
fn patterns_every_string_matches_constrain_nothing() {
    let plain = grammar_of(parse_json(r#"{"type": "string"}"#));
    for pattern in ["[A-Za-z0-9_-]*", "^a*", "x?", "", "(?:b*)|c"] {
        let g = grammar_of(json!({"type": "string", "pattern": pattern}));
        assert_eq!(
            (g.exprs().len(), g.rules().len()),
            (plain.exprs().len(), plain.rules().len()),
            "{pattern:?} should compile to the plain string"
        );
    }
    // One that is not universal stays.
    let g = grammar_of(parse_json(r#"{"type": "string", "pattern": "^a*$"}"#));
    Lang::new(&g).no(&[r#""b""#]);
}

#[test]
fn ambiguous_patterns_become_minimal_automata() {
    // Searched `.+`: two states, the second taking every string. As a grammar of the search
    // (`.*[^\n\r\u2028\u2029].*`) each position was one more reading.
    let g = grammar_of(parse_json(r#"{"type": "string", "pattern": ".+"}"#));
    assert_eq!(automaton_states(&g), 2);
    let takes_any_text = |body| matches!(g.expr(body), Expr::Repeat { max: None, .. });
    let any_text = g
        .rules()
        .iter()
        .filter(|r| r.name.contains("json string automaton") && takes_any_text(r.body))
        .count();
    assert_eq!(
        any_text, 1,
        "the state after a character is the shared any-text"
    );
    let l = Lang::new(&g);
    l.yes(&[
        r#""a""#,
        r#""\n a""#,
        "\"\u{2028}x\"",
        r#""\u2028x""#,
        r#""\r\n\t""#,
    ]);
    l.no(&[
        r#""""#,
        r#""\n""#,
        "\"\u{2028}\"",
        r#""\r\n""#,
        r#""\u000a\u2029""#,
    ]);
    // A nested repetition under `^` (MaskBench's URL pattern, 100 ms masks): a small DFA.
    let url = r"^(https?:\/\/)?([\da-z\.-]+)\.([a-z\.]{2,6})([\/\w \.-]*)*\/?";
    let g = grammar_of(json!({"type": "string", "pattern": url}));
    let states = automaton_states(&g);
    assert!((1..40).contains(&states), "{states} states");
    let l = Lang::new(&g);
    l.yes(&[
        r#""https://www.example.com/path/to""#,
        r#""a.bc""#,
        r#""x.yz anything \" goes""#,
    ]);
    l.no(&[r#""https://""#, r#""abc""#, r#""A.bc""#]);
    // Searched words share one `.*` on each side: an automaton of a state per prefix of a
    // word (each branch wrapped alone tracked which words had matched, 2^17 subsets).
    let words: Vec<String> = (0..17).map(|i| format!("INTERVAL_M{i}")).collect();
    let g = grammar_of(json!({"type": "string", "pattern": words.join("|")}));
    let states = automaton_states(&g);
    assert!((1..40).contains(&states), "{states} states");
    let l = Lang::new(&g);
    l.yes(&[r#""INTERVAL_M16""#, r#""x INTERVAL_M3 y INTERVAL_M1""#]);
    l.no(&[r#""INTERVAL_M""#, r#""INTERVAL_MX""#, r#""interval_m1""#]);
    // Anchored at both ends with no repetition of a repetition: lowered as it reads (a counted
    // loop, whose masks are shared by every count).
    let g = grammar_of(parse_json(
        r#"{"type": "string", "pattern": "^[0-9a-f]{8}$"}"#,
    ));
    assert_eq!(automaton_states(&g), 0);
}

/// `^.+$` refuses U+2028 and U+2029 inside the string, so the JSON string slice fails in its
/// states, and the Earley walk of the first one went through the whole trie (over 200,000
/// work units) before the backend tried the slice that leaves line terminators out. Each
/// mask now fits a budget a whole-trie walk would exceed, and equals the oracle's.
#[test]
fn anchored_dots_take_the_no_line_terminator_slice_on_earley() {
    let schema = parse_json(r#"{"type": "string", "pattern": "^.+$"}"#);
    masks_within_a_small_work_budget_on_earley(
        &schema,
        "\"Chrome \u{2027} a browser, \\u00e9 escaped\"",
    );
}

/// Every mask of `text` through `schema` on the Earley backend fits 50,000 work units (a
/// whole-trie walk needs several times that) and equals the oracle's.
#[track_caller]
fn masks_within_a_small_work_budget_on_earley(schema: &serde_json::Value, text: &str) {
    let vocab = tokenizers::qwen3();
    let options = JsonSchemaOptions::new();
    let config = EngineConfig::new()
        .backend(BackendChoice::Earley)
        .limits(Limits::new().mask_work(50_000));
    let engine = Engine::with_config(vocab.clone(), config);
    let constraint = engine.compile_json_schema(schema, &options).unwrap();
    assert_eq!(constraint.backend(), BackendKind::Earley);
    let grammar = compile_schema(schema, &options).unwrap().grammar;
    let tokens = vocab.encode(text).unwrap();
    formwork_testkit::oracle::assert_masks_match_oracle(
        &schema.to_string(),
        vocab,
        &grammar,
        &mut constraint.matcher(),
        &tokens,
    );
}

/// A length-bounded string with a searched pattern (MaskBench o45481's DynamoDB index names)
/// is a chain of a few thousand automaton states that dies after its 255th character, so the
/// slice proof, which asks for survival of every length, failed in each state and every
/// position walked the whole trie (over 300,000 work units, ~7 ms). Its states survive every
/// string of the JSON string slice as long as a token, read off the unit's transitions: each
/// mask fits a budget a whole-trie walk would exceed, and equals the oracle's.
#[test]
fn bounded_searched_strings_take_the_string_slice_on_earley() {
    let schema = parse_json(
        r#"{"type": "string", "minLength": 3, "maxLength": 255,
        "pattern": "[a-zA-Z0-9_.-]+"}"#,
    );
    masks_within_a_small_work_budget_on_earley(&schema, "\"name-index \u{e9}t\u{e9} ~ \u{1F600}\"");
}

#[test]
fn one_string_shape_is_one_automaton_for_all_its_properties() {
    for shape in [
        parse_json(r#"{"type": "string", "pattern": ".+"}"#),
        parse_json(r#"{"type": "string", "pattern": "^[a-z]+(-[a-z]+)*$", "maxLength": 12}"#),
        parse_json(
            r#"{"type": "string", "pattern": "^[a-z]+$", "not": {"enum": ["admin", "root"]}}"#,
        ),
    ] {
        let object = |n: usize| {
            let properties: serde_json::Map<String, Value> =
                (0..n).map(|i| (format!("p{i}"), shape.clone())).collect();
            grammar_of(json!({"type": "object", "properties": properties}))
        };
        let one = automaton_states(&object(1));
        assert!(one > 0, "{shape}");
        assert_eq!(automaton_states(&object(6)), one, "{shape}");
    }
}

/// ECMA-262 escapes `regex-syntax` reads otherwise: `\0` (not before a digit) is NUL, a
/// surrogate pair `\uD83D\uDE00` one character; an error's column is the pattern's own.
#[test]
fn ecma_nul_and_surrogate_pair_escapes_are_characters() {
    let no_nul = schema_lang(json!({"type": "string", "pattern": "^[^\\0]*$"}));
    no_nul.yes(&[r#""ab""#, r#""\u0001""#]);
    no_nul.no(&[r#""a\u0000b""#]);
    let smiles = schema_lang(json!({"type": "string", "pattern": "^\\ud83d\\ude00+$"}));
    smiles.yes(&["\"😀😀\"", r#""\ud83d\ude00""#]);
    smiles.no(&[r#""a""#, "\"😁\""]);
    let error = |pattern: &str| {
        compile_schema(&json!({"pattern": pattern}), &JsonSchemaOptions::new())
            .err()
            .unwrap()
    };
    let e = error("\\ud83d\\ude00\\0(?=x)");
    assert_eq!(e.kind(), CompileErrorKind::Unsupported, "{e}");
    assert!(e.to_string().contains("(column 15)"), "{e}");
    assert_eq!(error("a\\01").kind(), CompileErrorKind::Unsupported);
}

/// A pattern spelled like a format's rule name (`format "date"`, searched) is still a pattern:
/// the properties share no automaton, and `allOf` keeps both constraints.
#[test]
fn a_pattern_spelled_like_a_format_is_not_the_format() {
    let pattern = parse_json(r#"{"type": "string", "pattern": "format \"date\""}"#);
    let date = parse_json(r#"{"type": "string", "format": "date"}"#);
    for (first, second) in [(&pattern, &date), (&date, &pattern)] {
        let lang = schema_lang(json!({"type": "object",
            "properties": {"a": first, "b": second}, "required": ["a", "b"]}));
        let (a, b) = if first == &pattern {
            (r#""format \"date\"""#, r#""2024-01-31""#)
        } else {
            (r#""2024-01-31""#, r#""format \"date\"""#)
        };
        lang.yes(&[&format!(r#"{{"a":{a},"b":{b}}}"#)]);
        lang.no(&[&format!(r#"{{"a":{b},"b":{a}}}"#)]);
    }
    let both = schema_lang(parse_json(
        r#"{"allOf": [
        {"pattern": "format \"date\""}, {"format": "date"}]}"#,
    ));
    both.no(&[r#""format \"date\"""#, r#""2024-01-31""#]);
    both.yes(&["1"]);
}

/// `n` optional boolean properties named alike but for a number, in schema order.
fn optional_properties(n: usize) -> Value {
    let properties: serde_json::Map<String, Value> = (0..n)
        .map(|i| {
            (
                format!("property_{i:03}"),
                parse_json(r#"{"type": "boolean"}"#),
            )
        })
        .collect();
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

/// Expressions and the parts of sequences and alternations: the IR's size.
fn ir_size(g: &Grammar) -> usize {
    g.exprs()
        .iter()
        .map(|e| match e {
            Expr::Seq(xs) | Expr::Alt(xs) => 1 + xs.len(),
            _ => 1,
        })
        .sum()
}

#[test]
fn long_objects_compile_in_linear_size() {
    let cfg = formwork::cfg::CfgCompiler::new(tokenizers::qwen3(), formwork::cfg::CfgConfig::new());
    let size = |n: usize| {
        let g = grammar_of(optional_properties(n));
        let states = cfg.compile(&g).unwrap().num_states();
        (ir_size(&g), states)
    };
    let (ir_64, states_64) = size(64);
    let (ir_256, states_256) = size(256);
    // Four times the properties, about four times the grammar and the automaton states. As
    // one chain, each member's expression held every later one (IR ×15) and the backend's
    // automaton tracked after each member which later names may follow (×350: 1,672 states
    // for 64 properties, 594,704 for 256).
    assert!(ir_256 < 5 * ir_64, "IR {ir_64} -> {ir_256}");
    assert!(
        states_256 < 5 * states_64,
        "states {states_64} -> {states_256}"
    );
    // The order holds across the places the chain is cut.
    let l = schema_lang(optional_properties(40));
    l.yes(&[
        "{}",
        r#"{"property_000":true}"#,
        r#"{"property_007":true,"property_008":false,"property_039":true}"#,
        r#"{"property_031":true,"property_032":true,"property_033":false}"#,
    ]);
    l.no(&[
        r#"{"property_008":true,"property_007":true}"#,
        r#"{"property_032":true,"property_032":true}"#,
        r#"{"property_039":true,"property_000":true}"#,
        r#"{,"property_000":true}"#,
        r#"{"property_040":true}"#,
    ]);
}

/// Every unit of an object of optional object-valued properties that admits undeclared ones,
/// built: linear in the properties. The chain of its members is cut into rules of 8, each
/// reached without reading a byte from the one before; built in the place of each reference,
/// every block's first-member unit held all the later members, quadratic in them (2,985 ->
/// 40,310 states here; o39532's 153 members: 40k states built on entering the object, ~10 ms
/// of one mask), where the compile-time build above stops at its budget.
#[test]
fn open_objects_of_many_optional_members_build_linear_states() {
    let config = formwork::cfg::CfgConfig::new().eager_states(usize::MAX);
    let cfg = formwork::cfg::CfgCompiler::new(tokenizers::qwen3(), config);
    let states = |n: usize| {
        let properties: serde_json::Map<String, Value> = (0..n)
            .map(|i| (format!("property_{i:03}"), json!({"type": "object"})))
            .collect();
        let schema = json!({"type": "object", "properties": properties});
        let g = cfg.compile(&grammar_of(schema)).unwrap();
        assert_eq!(
            g.num_built_units(),
            g.num_units(),
            "{n} properties: all built"
        );
        g.num_states()
    };
    let (states_40, states_160) = (states(40), states(160));
    assert!(
        states_160 < 5 * states_40,
        "states {states_40} -> {states_160}"
    );
}

/// An object of `n` optional properties, each an object of ten integers.
fn heavy_members(n: usize) -> Value {
    let member = |i: usize| {
        let fields: serde_json::Map<String, Value> = (0..10)
            .map(|j| {
                (
                    format!("field_{j}_{i}"),
                    parse_json(r#"{"type": "integer"}"#),
                )
            })
            .collect();
        json!({"type": "object", "properties": fields, "additionalProperties": false})
    };
    let properties: serde_json::Map<String, Value> = (0..n)
        .map(|i| (format!("member_{i:02}"), member(i)))
        .collect();
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

#[test]
fn objects_of_large_members_compile_in_linear_states() {
    let cfg = formwork::cfg::CfgCompiler::new(tokenizers::qwen3(), formwork::cfg::CfgConfig::new());
    let states = |n: usize| {
        cfg.compile(&grammar_of(heavy_members(n)))
            .unwrap()
            .num_states()
    };
    let (states_8, states_32) = (states(8), states(32));
    // Four times the members, about four times the states. Each "first member written"
    // branch (member k, then every optional member after it) was a unit of its own that
    // inlined all the later members: 7,922 -> 125,149 states.
    assert!(states_32 < 6 * states_8, "states {states_8} -> {states_32}");
    let l = schema_lang(heavy_members(32));
    l.yes(&[
        "{}",
        r#"{"member_00":{}}"#,
        r#"{"member_03":{"field_0_3":1},"member_17":{"field_9_17":-2},"member_31":{}}"#,
        r#"{"member_30":{"field_1_30":0,"field_2_30":5}}"#,
    ]);
    l.no(&[
        r#"{"member_17":{},"member_03":{}}"#,
        r#"{"member_03":{"field_0_4":1}}"#,
        r#"{"member_31":{},}"#,
        r#"{,"member_00":{}}"#,
    ]);
}

/// `allOf` of `n` conditionals that pick a variant by a tag (`if` a `const`, `then` the
/// variant's properties), as config schemas write discriminated unions.
fn tagged_variants(n: usize) -> Value {
    let variants: Vec<Value> = (0..n)
        .map(|i| {
            json!({
                "if": {"properties": {"kind": {"const": format!("k{i}")}}, "required": ["kind"]},
                "then": {"properties": {"settings": {"type": "object", "properties": {format!("s{i}"): {"type": "integer"}}, "additionalProperties": false}}}
            })
        })
        .collect();
    json!({"type": "object", "properties": {"kind": {"type": "string"}, "settings": {}}, "allOf": variants})
}

#[test]
fn discriminated_unions_compile_in_linear_size() {
    // Three times the variants, about three times the grammar. Read as `not if or then`, the
    // conditionals' branches overlapped and the `allOf` multiplied out to an object per
    // subset of the variants (2^n: v4-config's ten tags were 1,024 objects, 0.9 s to
    // compile).
    let small = ir_size(&grammar_of(tagged_variants(4)));
    let large = ir_size(&grammar_of(tagged_variants(12)));
    assert!(large < 4 * small, "IR {small} -> {large}");
    let l = schema_lang(tagged_variants(12));
    l.yes(&[
        "{}",
        r#"{"kind":"k3","settings":{"s3":1}}"#,
        r#"{"kind":"other","settings":{"s3":"x","s4":[]}}"#,
        r#"{"settings":{"s11":"anything"}}"#,
    ]);
    l.no(&[
        r#"{"kind":"k3","settings":{"s4":1}}"#,
        r#"{"kind":"k11","settings":{"s11":"x"}}"#,
        r#"{"kind":"k0","settings":[]}"#,
    ]);
}

/// A `then` of more branches than a complement's product may have keeps the overlapping
/// form `not if or then` (the same language, no product).
#[test]
fn conditionals_past_the_branch_budget_keep_their_overlapping_form() {
    let one_of = |key: &str| -> Value {
        let branches: Vec<Value> = (0..33)
            .map(|i| json!({"properties": {key: {"const": i}}, "required": [key]}))
            .collect();
        json!({"anyOf": branches})
    };
    // 33 x 33 objects: past the budget of 1,024 once `if` meets them.
    let schema = json!({
        "if": {"required": ["t"]},
        "then": {"allOf": [one_of("a"), one_of("b")]},
    });
    let l = schema_lang(schema);
    l.yes(&[
        "{}",
        "1",
        r#"{"a":"free"}"#,
        r#"{"a":32,"b":7,"t":0}"#,
        r#"{"a":1,"b":2,"t":null}"#,
    ]);
    l.no(&[r#"{"t":0}"#, r#"{"a":33,"b":1,"t":0}"#, r#"{"a":1,"t":0}"#]);
}
