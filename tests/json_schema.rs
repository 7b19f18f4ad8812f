//! JSON Schema front end: each keyword against the reference recognizer (the exact language of
//! the grammar), errors with their JSON pointers, and a fixed MaskBench sample with a ratchet.

use formwork::front::json_schema::{compile_schema, JsonSchemaOptions, PropertyOrder, Whitespace};
use formwork::ir::reference::{Recognizer, Unit};
use formwork::{CompileErrorKind, Location};
use serde_json::{json, Value};

/// The language of a schema, as a membership test.
struct Lang(Recognizer);

impl Lang {
    fn new(schema: Value) -> Lang {
        Lang::with(schema, &JsonSchemaOptions::new())
    }

    fn with(schema: Value, opts: &JsonSchemaOptions) -> Lang {
        let compiled = compile_schema(&schema, opts).unwrap_or_else(|e| panic!("{schema}: {e}"));
        Lang(Recognizer::new(&compiled.grammar))
    }

    fn accepts(&self, text: &str) -> bool {
        let mut chart = self.0.start();
        text.bytes().all(|b| chart.push(&self.0, Unit::Byte(b))) && chart.is_accepting(&self.0)
    }

    #[track_caller]
    fn yes(&self, texts: &[&str]) {
        for t in texts {
            assert!(self.accepts(t), "should accept {t}");
        }
    }

    #[track_caller]
    fn no(&self, texts: &[&str]) {
        for t in texts {
            assert!(!self.accepts(t), "should reject {t}");
        }
    }
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
    let l = Lang::new(json!({"type": ["string", "null"]}));
    l.yes(&["null", r#""x""#, r#""""#]);
    l.no(&["1", "true", "[]", "{}", "nul"]);
    let any = Lang::new(json!({"description": "anything"}));
    any.yes(&[
        "1",
        "-2.5e3",
        "true",
        "null",
        r#"{"a":[1,{"b":null}]}"#,
        r#""\u00e9""#,
    ]);
    any.no(&["01", "tru", "{a:1}", "[1,]"]);
    let b = Lang::new(json!({"type": "boolean"}));
    b.yes(&["true", "false"]);
    b.no(&["null", "0"]);
    // Type-specific keywords do not constrain other types.
    let l = Lang::new(json!({"minLength": 2}));
    l.yes(&["1", r#""ab""#, "null"]);
    l.no(&[r#""a""#]);
}

#[test]
fn objects_properties_required_additional() {
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
        "required": ["a"]
    });
    let l = Lang::new(schema.clone());
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
    let closed = Lang::with(
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
    let typed_extra = Lang::new(
        json!({"type": "object", "additionalProperties": {"type": "integer"}, "minProperties": 1, "maxProperties": 2}),
    );
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
        .map(|n| (n.to_string(), json!({"type": "integer"})))
        .collect();
    let l = Lang::new(
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
    let l = Lang::new(
        json!({"type": "object", "required": ["id"], "additionalProperties": {"type": "string"}}),
    );
    l.yes(&[r#"{"id":"7"}"#, r#"{"id":"7","x":"y"}"#]);
    l.no(&[r#"{"id":7}"#, r#"{"x":"y"}"#]);
}

#[test]
fn property_counts_with_optional_properties() {
    let l = Lang::new(json!({
        "type": "object",
        "properties": {"a": {"const": 1}, "b": {"const": 2}, "c": {"const": 3}},
        "additionalProperties": false,
        "minProperties": 2,
        "maxProperties": 2
    }));
    l.yes(&[r#"{"a":1,"b":2}"#, r#"{"a":1,"c":3}"#, r#"{"b":2,"c":3}"#]);
    l.no(&[r#"{}"#, r#"{"a":1}"#, r#"{"a":1,"b":2,"c":3}"#]);
}

#[test]
fn pattern_properties() {
    // A pattern matching every name: its schema applies to every property.
    let all = Lang::new(
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "array", "enum": [1]}}, "patternProperties": {".*": {"minimum": 0}}}),
    );
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
    let closed = Lang::new(json!({
        "type": "object",
        "properties": {"id": {"type": "string"}},
        "patternProperties": {"^x-[a-z]+$": {"type": "boolean"}},
        "additionalProperties": false
    }));
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
    let open = Lang::new(json!({
        "type": "object",
        "properties": {"x-id": {"enum": [true, "s"]}},
        "patternProperties": {"^x-": {"type": "boolean"}},
        "additionalProperties": {"type": "integer"}
    }));
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
    let two = Lang::new(json!({
        "type": "object",
        "patternProperties": {
            "^a": {"type": "integer"},
            "b$": {"minimum": 10}
        },
        "additionalProperties": false
    }));
    two.yes(&[r#"{"a":1,"xb":10.5}"#, r#"{"ab":12}"#, "{}"]);
    two.no(&[r#"{"ab":5}"#, r#"{"ab":12.5}"#, r#"{"c":1}"#, r#"{"xb":9}"#]);
    // A required name nobody declares takes the schema of the patterns it matches.
    let required = Lang::new(json!({
        "type": "object",
        "required": ["n1"],
        "patternProperties": {"^n[0-9]$": {"type": "null"}}
    }));
    required.yes(&[r#"{"n1":null}"#, r#"{"n1":null,"n2":null,"z":[]}"#]);
    required.no(&[r#"{"n1":0}"#, r#"{"n2":null}"#, r#"{"n1":null,"n3":1}"#]);
}

/// Patterns, formats, lengths and excluded values of one string together: one automaton of
/// their intersection.
#[test]
fn string_constraints_intersect() {
    // Search semantics within a length: a hex digit somewhere, at most 4 characters.
    let hex = Lang::new(json!({"type": "string", "pattern": "[0-9a-f]+", "maxLength": 4}));
    hex.yes(&[r#""a""#, r#""zz0z""#, r#""Ab""#]);
    hex.no(&[r#""zzzzz0""#, r#""zz""#, r#""""#, r#""01234""#]);
    // Several variable parts under both bounds.
    let parts = Lang::new(json!({
        "type": "string",
        "pattern": "^([a-z]+):([a-z0-9.-]+)$",
        "minLength": 5,
        "maxLength": 7
    }));
    parts.yes(&[r#""ab:cd""#, r#""a:b.c-d""#, r#""abc:1.0""#]);
    parts.no(&[r#""a:b""#, r#""abcd:1.0""#, r#""ab:c""#, r#""AB:cd""#]);
    // Two patterns (allOf) and a format with a length.
    let both = Lang::new(json!({"allOf": [
        {"type": "string", "pattern": "^[a-z0-9]+$"},
        {"pattern": "[0-9]"},
        {"pattern": "^.{2,3}$"}
    ]}));
    both.yes(&[r#""a1""#, r#""1bc""#, r#""99""#]);
    both.no(&[r#""ab""#, r#""a1b2""#, r#""1""#, r#""A1""#]);
    let date = Lang::new(json!({"type": "string", "format": "date", "maxLength": 10}));
    date.yes(&[r#""2024-02-29""#]);
    date.no(&[r#""2024-2-29""#, r#""x""#]);
    // Excluded values next to a pattern (`not` with `enum`).
    let except = Lang::new(json!({
        "type": "string",
        "pattern": "^[a-c]{1,2}$",
        "not": {"enum": ["a", "bc"]}
    }));
    except.yes(&[r#""b""#, r#""ab""#, r#""cc""#]);
    except.no(&[r#""a""#, r#""bc""#, r#""abc""#, r#""""#]);
    // A huge length stays a counted repeat where the pattern's one repetition takes it (past
    // the automaton's budget, `errors_name_their_json_pointer` has the typed error).
    assert_compact(json!({"type": "string", "pattern": "^(a|b)*a(a|b){12}$", "maxLength": 100000}));
}

#[test]
fn one_of_required_sets() {
    let l = Lang::new(json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}},
        "oneOf": [{"required": ["a"]}, {"required": ["b", "c"]}]
    }));
    l.yes(&[
        r#"{"a":1}"#,
        r#"{"b":1,"c":2}"#,
        r#"{"a":1,"b":2}"#,
        r#"{"a":1,"c":2}"#,
    ]);
    l.no(&["{}", r#"{"b":1}"#, r#"{"a":1,"b":2,"c":3}"#]);
    // Non-objects match every branch, so none passes.
    let l = Lang::new(json!({"oneOf": [{"required": ["a"]}, {"required": ["b"]}]}));
    l.yes(&[r#"{"b":[]}"#]);
    l.no(&["1", r#""s""#, "null", r#"{"a":1,"b":2}"#]);
}

#[test]
fn not_where_exact() {
    let l = Lang::new(json!({"not": {"type": ["string", "null"]}}));
    l.yes(&["1", "true", "[]", "{}"]);
    l.no(&[r#""s""#, "null"]);
    // Objects lacking a property, and anything that is not an object.
    let l = Lang::new(json!({"not": {"required": ["a"]}}));
    l.yes(&["{}", r#"{"b":1}"#, "3"]);
    l.no(&[r#"{"a":1}"#, r#"{"b":1,"a":2}"#]);
    // Excluded strings in every spelling.
    let l = Lang::new(json!({"type": "string", "not": {"enum": ["ab", "c"]}}));
    l.yes(&[r#""a""#, r#""abc""#, r#""""#, r#""C""#]);
    l.no(&[r#""ab""#, r#""\u0061b""#, r#""c""#]);
    let l = Lang::new(json!({"not": {"const": true}}));
    l.yes(&["false", "null", "0"]);
    l.no(&["true"]);
    let (kind, pointer) = error_of(
        json!({"not": {"type": "integer"}}),
        &JsonSchemaOptions::new(),
    );
    assert_eq!(
        (kind, pointer.as_str()),
        (CompileErrorKind::Unsupported, "/not")
    );
    let e = compile_schema(
        &json!({"properties": {"a": {"not": {}}}, "required": ["a"], "type": "object"}),
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
    let l = Lang::with(
        json!({"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}, "c": {"type": "integer"}}, "required": ["a", "c"]}),
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
    let many: serde_json::Map<String, Value> =
        (0..12).map(|i| (format!("p{i}"), json!({}))).collect();
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
    let schema = json!({"type": "object", "properties": {"a": {"type": "array", "items": {"type": "integer"}}}});
    let compact = Lang::new(schema.clone());
    compact.yes(&[r#"{"a":[1,2]}"#]);
    compact.no(&[r#"{"a": [1,2]}"#, r#"{ "a":[1,2]}"#]);
    let flex = Lang::with(
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
    let l = Lang::new(
        json!({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}),
    );
    l.yes(&["[1]", "[1,2,3]"]);
    l.no(&["[]", "[1,2,3,4]", "[\"a\"]"]);
    let t = Lang::new(
        json!({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}], "items": false}),
    );
    t.yes(&["[]", "[\"a\"]", "[\"a\",1]"]);
    t.no(&["[1]", "[\"a\",1,2]", "[\"a\",\"b\"]"]);
    let t = Lang::new(
        json!({"type": "array", "prefixItems": [{"type": "string"}], "items": {"type": "null"}, "minItems": 2}),
    );
    t.yes(&["[\"a\",null]", "[\"a\",null,null]"]);
    t.no(&["[\"a\"]", "[\"a\",1]"]);
    // Draft 4 tuples.
    let d4 = Lang::new(
        json!({"type": "array", "items": [{"type": "integer"}, {"type": "boolean"}], "additionalItems": false}),
    );
    d4.yes(&["[1,true]", "[1]"]);
    d4.no(&["[1,true,3]", "[true]"]);
    // Counted repeats stay compact: a huge minItems compiles without unrolling.
    assert_compact(json!({"type": "array", "minItems": 500, "maxItems": 100000}));
}

/// `schema` compiles to a counted repeat, not an unrolled chain.
fn assert_compact(schema: Value) {
    let big = compile_schema(&schema, &JsonSchemaOptions::new()).unwrap();
    let exprs = big.grammar.exprs().len();
    assert!(exprs < 200, "{schema}: {exprs} expressions");
}

#[test]
fn enum_and_const() {
    let l = Lang::new(json!({"enum": ["red", 1, null, {"k": [true]}]}));
    l.yes(&[r#""red""#, "1", "null", r#"{"k":[true]}"#]);
    l.no(&[r#""Red""#, "2", "1.0", "true", r#"{"k":[false]}"#, "01"]);
    // A non-integral constant in each notation of its value.
    let half = Lang::new(json!({"const": 0.5}));
    half.yes(&["0.5", "0.50", "5e-1", "5.0E-1"]);
    half.no(&["0.51", ".5", "1"]);
    let c = Lang::new(json!({"const": "a\"b\n"}));
    c.yes(&[r#""a\"b\n""#]);
    // An enum filtered by its sibling keywords.
    let f = Lang::new(json!({"type": "string", "enum": ["a", "bb", 3], "maxLength": 1}));
    f.yes(&[r#""a""#]);
    f.no(&[r#""bb""#, "3"]);
    let (kind, pointer) = error_of(
        json!({"type": "object", "properties": {"x": {"type": "integer", "enum": ["a"]}}, "required": ["x"]}),
        &JsonSchemaOptions::new(),
    );
    assert_eq!(
        (kind, pointer.as_str()),
        (CompileErrorKind::EmptyLanguage, "")
    );
}

#[test]
fn any_of_one_of_all_of() {
    let l = Lang::new(
        json!({"anyOf": [{"type": "integer", "maximum": 0}, {"type": "integer", "minimum": 10}]}),
    );
    l.yes(&["-5", "0", "10", "12"]);
    l.no(&["5", "1"]);
    // oneOf with disjoint branches: types, and a discriminating const.
    let o = Lang::new(json!({"oneOf": [
        {"type": "object", "properties": {"kind": {"const": "circle"}, "r": {"type": "number"}}, "required": ["kind", "r"], "additionalProperties": false},
        {"type": "object", "properties": {"kind": {"const": "square"}, "side": {"type": "number"}}, "required": ["kind"], "additionalProperties": false},
        {"type": "string"}
    ]}));
    o.yes(&[
        r#"{"kind":"circle","r":1}"#,
        r#"{"kind":"square"}"#,
        r#""x""#,
    ]);
    o.no(&[r#"{"kind":"circle"}"#, r#"{"kind":"square","r":1}"#, "1"]);
    // Overlapping oneOf: an error at the oneOf, or anyOf with a warning when lenient.
    let overlapping = json!({"properties": {"v": {"oneOf": [{"type": "integer"}, {"type": "number", "minimum": 0}]}}});
    let (kind, pointer) = error_of(overlapping.clone(), &JsonSchemaOptions::new());
    assert_eq!(
        (kind, pointer.as_str()),
        (CompileErrorKind::Unsupported, "/properties/v/oneOf")
    );
    let lenient = compile_schema(&overlapping, &JsonSchemaOptions::new().lenient(true)).unwrap();
    assert_eq!(lenient.warnings.len(), 1);
    assert_eq!(
        lenient.warnings[0].location(),
        &Location::JsonPointer("/properties/v/oneOf".into())
    );
    // allOf merges objects and bounds.
    let a = Lang::new(json!({"allOf": [
        {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}, "required": ["a"]},
        {"properties": {"a": {"maximum": 5}, "b": {"type": "boolean"}}, "required": ["b"]}
    ]}));
    a.yes(&[r#"{"a":0,"b":true}"#, r#"{"a":5,"b":false}"#]);
    a.no(&[
        r#"{"a":6,"b":true}"#,
        r#"{"a":1}"#,
        r#"{"b":true}"#,
        r#"{"a":-1,"b":true}"#,
    ]);
    let a = Lang::new(json!({"type": "string", "allOf": [{"minLength": 2}, {"maxLength": 3}]}));
    a.yes(&[r#""ab""#, r#""abc""#]);
    a.no(&[r#""a""#, r#""abcd""#]);
}

#[test]
fn refs_defs_and_recursion() {
    let tree = json!({
        "$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "required": ["v"], "additionalProperties": false}},
        "$ref": "#/$defs/node"
    });
    let l = Lang::new(tree);
    l.yes(&[
        r#"{"v":1}"#,
        r#"{"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4,"kids":[]}]}]}"#,
    ]);
    l.no(&[
        r#"{"v":1,"kids":[{"kids":[]}]}"#,
        r#"{"v":1,"kids":[{"v":"x"}]}"#,
    ]);
    // Recursion through a oneOf whose disjointness is decided above the recursion.
    let r = Lang::new(
        json!({"$defs": {"r": {"oneOf": [{"type": "string"}, {"type": "object", "properties": {"ios": {"$ref": "#/$defs/r"}}, "required": ["ios"], "additionalProperties": false}]}}, "$ref": "#/$defs/r"}),
    );
    r.yes(&[r#""x""#, r#"{"ios":{"ios":"y"}}"#]);
    r.no(&[r#"{"ios":1}"#, "{}"]);
    let d4 = Lang::new(
        json!({"definitions": {"s": {"type": "string"}}, "type": "array", "items": {"$ref": "#/definitions/s"}}),
    );
    d4.yes(&[r#"["a","b"]"#]);
    d4.no(&["[1]"]);
    let anchors = Lang::new(
        json!({"$id": "https://x.example/s.json", "$defs": {"a": {"$anchor": "thing", "type": "null"}}, "properties": {"p": {"$ref": "#thing"}, "q": {"$ref": "https://x.example/s.json#/$defs/a"}}}),
    );
    anchors.yes(&[r#"{"p":null,"q":null}"#]);
    anchors.no(&[r#"{"p":1}"#]);
    let (kind, pointer) = error_of(
        json!({"properties": {"x": {"$ref": "#/$defs/missing"}}}),
        &JsonSchemaOptions::new(),
    );
    assert_eq!(
        (kind, pointer.as_str()),
        (CompileErrorKind::Undefined, "/properties/x/$ref")
    );
    let (kind, _) = error_of(json!({"$ref": "other.json#/a"}), &JsonSchemaOptions::new());
    assert_eq!(kind, CompileErrorKind::Undefined);
}

#[test]
fn patterns_search_semantics_and_ecma_classes() {
    let l = Lang::new(json!({"type": "string", "pattern": "b+c"}));
    l.yes(&[r#""bc""#, r#""abbcd""#, r#""xx bc""#]);
    l.no(&[r#""b c""#, r#""cb""#]);
    let l = Lang::new(json!({"type": "string", "pattern": "^\\d{3}$"}));
    l.yes(&[r#""123""#, r#""\u0031\u0032\u0033""#]);
    // ECMA \d is ASCII: Arabic-Indic digits do not match.
    l.no(&[r#""1234""#, r#""12""#, "\"\u{663}\u{663}\u{663}\""]);
    let l = Lang::new(json!({"type": "string", "pattern": "^a|b$"}));
    l.yes(&[r#""ax""#, r#""xb""#]);
    l.no(&[r#""xa""#, r#""bx""#]);
    let l = Lang::new(json!({"type": "string", "pattern": "^(x$|y)"}));
    l.yes(&[r#""x""#, r#""yz""#]);
    l.no(&[r#""xz""#]);
    let l = Lang::new(json!({"type": "string", "pattern": "^a.c$"}));
    l.yes(&[r#""abc""#, r#""a\"c""#, r#""a\tc""#]);
    l.no(&[r#""a\nc""#, r#""a\rc""#, r#""ac""#]);
}

#[test]
fn pattern_matches_decoded_text_in_every_spelling() {
    // The regex sees decoded characters: a quote, a backslash and a newline.
    let l = Lang::new(json!({"type": "string", "pattern": "^\"\\\\\\n$"}));
    l.yes(&[
        r#""\"\\\n""#,
        r#""\u0022\u005c\u000a""#,
        r#""\u0022\u005C\u000A""#,
    ]);
    // Raw quotes, raw backslashes and raw control characters are never JSON.
    l.no(&["\"\"\\\n\"", "\"\\\"\\\\\n\""]);
    let slash = Lang::new(json!({"type": "string", "pattern": "^/é😀$"}));
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
    let l = Lang::new(json!({"type": "string", "minLength": 2, "maxLength": 3}));
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
    let p = Lang::new(json!({"type": "string", "pattern": "^[a-z][a-z0-9-]*$", "maxLength": 4}));
    p.yes(&[r#""a""#, r#""ab-9""#]);
    p.no(&[r#""ab-9x""#, r#""9ab""#]);
    let p = Lang::new(
        json!({"type": "string", "pattern": "^([0-9]{2}:)+$|^x$", "minLength": 1, "maxLength": 6}),
    );
    p.yes(&[r#""12:""#, r#""12:34:""#, r#""x""#]);
    p.no(&[r#""12:34:56:""#, r#""""#]);
    // A huge maxLength compiles to a counted repeat, not an unrolled chain.
    assert_compact(json!({"type": "string", "maxLength": 1000000}));
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
        let mut schema = json!({"type": "integer"});
        if let Some(l) = lo {
            schema[if xlo { "exclusiveMinimum" } else { "minimum" }] = json!(l);
        }
        if let Some(h) = hi {
            schema[if xhi { "exclusiveMaximum" } else { "maximum" }] = json!(h);
        }
        let lang = Lang::new(schema.clone());
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
    let l = Lang::new(json!({"type": "integer", "minimum": -2.5, "maximum": 3.5}));
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
        json!({"minimum": -1.5, "maximum": 2.25}),
        json!({"exclusiveMinimum": 0.25, "exclusiveMaximum": 10}),
        json!({"minimum": 0}),
        json!({"exclusiveMinimum": 0}),
        json!({"maximum": -0.05}),
        json!({"minimum": 1.0, "maximum": 1.0}),
    ];
    for bounds in cases {
        let mut schema = bounds.clone();
        schema["type"] = json!("number");
        let lang = Lang::new(schema.clone());
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
    let f = |name: &str| Lang::new(json!({"type": "string", "format": name}));
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
    check("json-pointer", &["", "/a~1b/0"], &["a", "/a~2"]);
    // Unknown formats are annotations: ignored, with a warning.
    let w = compile_schema(
        &json!({"type": "string", "format": "int32"}),
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
            json!({"properties": {"a~b/c": {"not": {"minimum": 1}}}}),
            CompileErrorKind::Unsupported,
            "/properties/a~0b~1c/not",
        ),
        (
            json!({"items": {"type": "frog"}}),
            CompileErrorKind::Invalid,
            "/items/type",
        ),
        (
            json!({"type": "string", "pattern": "(?=x)"}),
            CompileErrorKind::Unsupported,
            "/pattern",
        ),
        (
            json!({"type": "string", "pattern": "a("}),
            CompileErrorKind::Syntax,
            "/pattern",
        ),
        (
            json!({"allOf": [{"type": "string", "pattern": "^(a|b)*a(a|b){12}$"}, {"pattern": "b"}]}),
            CompileErrorKind::Limit,
            "/allOf/0/pattern",
        ),
        (
            json!({"type": "string", "pattern": "^a\\b", "maxLength": 5}),
            CompileErrorKind::Unsupported,
            "/pattern",
        ),
        (
            json!({"type": "array", "uniqueItems": true}),
            CompileErrorKind::Unsupported,
            "/uniqueItems",
        ),
        (
            json!({"type": "array", "minItems": -1}),
            CompileErrorKind::Invalid,
            "/minItems",
        ),
        (
            json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
            CompileErrorKind::EmptyLanguage,
            "",
        ),
        (
            json!({"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]}),
            CompileErrorKind::EmptyLanguage,
            "",
        ),
        (
            json!({"type": "string", "format": "iri"}),
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
        &json!({"properties": {"a": {"not": {"maximum": 0}}}}),
        &JsonSchemaOptions::new().lenient(true),
    )
    .unwrap();
    assert_eq!(
        lenient.warnings[0].location(),
        &Location::JsonPointer("/properties/a/not".into())
    );
    // Keywords without effect are fine.
    compile_schema(&json!({"type": "array", "uniqueItems": false, "if": {"type": "null"}, "x-vendor": 1, "title": "t"}), &strict).unwrap();
}

#[test]
fn pathological_schemas_stay_bounded() {
    let mut deep = json!({"type": "integer"});
    for _ in 0..1000 {
        deep = json!({"type": "array", "items": deep});
    }
    let e = compile_schema(&deep, &JsonSchemaOptions::new()).expect_err("too deep");
    assert_eq!(e.kind(), CompileErrorKind::Limit);
    let mut nested = json!({"type": "integer"});
    for _ in 0..200 {
        nested = json!({"type": "array", "items": nested});
    }
    let ok = compile_schema(&nested, &JsonSchemaOptions::new()).unwrap();
    assert!(ok.grammar.exprs().len() < 10_000);
    let e = compile_schema(
        &json!({"type": "integer", "minimum": -1e300, "maximum": 1e300}),
        &JsonSchemaOptions::new().max_grammar_size(50),
    )
    .expect_err("too big");
    assert_eq!(e.kind(), CompileErrorKind::Limit);
}

/// The MaskBench sample through the same harness as `formwork maskbench` (the engine's router,
/// a mask before every token of each valid instance, EOS at the end, each invalid instance
/// rejected): compared with `expected.json`, a ratchet — passing may only grow, a file that
/// passed must pass, and a strict grammar never accepts an invalid instance.
#[test]
fn maskbench_sample_ratchet() {
    sample_ratchet(JsonSchemaOptions::new(), "expected.json", true);
}

/// The same with lenient compilation (dropped keywords may let invalid instances through:
/// their count may only fall).
#[test]
fn maskbench_sample_ratchet_lenient() {
    sample_ratchet(
        JsonSchemaOptions::new().lenient(true),
        "expected-lenient.json",
        false,
    );
}

fn sample_ratchet(options: JsonSchemaOptions, expected: &str, sound: bool) {
    use formwork::maskbench::{self, HarnessConfig, Status};
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/maskbench-sample");
    let cases = maskbench::load(&dir).unwrap();
    assert_eq!(cases.len(), 155);
    let engine = formwork::Engine::new(formwork::vocab::Vocab::embedded_qwen3().unwrap());
    let config = HarnessConfig::new().schema_options(options);
    let report = maskbench::run(&engine, &cases, &config, |_| {});
    for r in report
        .results
        .iter()
        .filter(|r| r.status != Status::Passing)
    {
        println!("{} {}: {}", r.status.name(), r.name, r.detail);
    }
    println!("{}", report.summary());
    if sound {
        assert_eq!(
            report.count(Status::InvalidationError),
            0,
            "a strict grammar accepted an invalid instance"
        );
    }
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join(expected)).unwrap()).unwrap();
    let regressions = report.compare(&expected).unwrap();
    assert!(regressions.is_empty(), "{}", regressions.join("\n"));
}
