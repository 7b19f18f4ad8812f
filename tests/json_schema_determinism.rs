//! A schema compiles to the same grammar every time. std's hash maps seed each instance
//! differently (even two maps of one process), so a compiler that iterated one into its output
//! made rules, branches or budget decisions in an order that changed from one compilation to
//! the next. Each schema here is compiled many times in one process; the grammar's expression
//! arena and rules (the whole IR, ids included), the error of a schema that does not compile,
//! and the engine's verdicts on a set of instances must never change.

use formwork::front::json_schema::{compile_schema, JsonSchemaOptions, PropertyOrder};
use formwork::ir::Grammar;
use formwork::{Engine, Matcher};
use formwork_testkit::parse_json;
use formwork_testkit::tokenizers;
use serde_json::Value;

/// Compilations of each schema compared with the first.
const RUNS: usize = 24;

/// The whole IR as text: every expression by id, every rule's name and body, the start rule.
fn ir_text(g: &Grammar) -> String {
    let mut out = String::new();
    for (i, e) in g.exprs().iter().enumerate() {
        out.push_str(&format!("e{i} = {e:?}\n"));
    }
    for (i, r) in g.rules().iter().enumerate() {
        out.push_str(&format!("r{i} {:?} = e{}\n", r.name, r.body.index()));
    }
    out.push_str(&format!("start r{}\n", g.start().index()));
    out
}

/// The grammar's text, or the error's.
fn compiled_text(schema: &Value, opts: &JsonSchemaOptions) -> String {
    match compile_schema(schema, opts) {
        Ok(s) => {
            let warnings: Vec<String> = s.warnings.iter().map(|w| w.to_string()).collect();
            format!("{}warnings {warnings:?}\n", ir_text(&s.grammar))
        }
        Err(e) => format!("error {e}"),
    }
}

/// The engine's verdict on each instance (accepted through a mask at every token, or refused),
/// or the compile error.
fn verdicts(
    engine: &Engine,
    schema: &Value,
    opts: &JsonSchemaOptions,
    instances: &[Value],
) -> String {
    let constraint = match engine.compile_json_schema(schema, opts) {
        Ok(c) => c,
        Err(e) => return format!("error {e}"),
    };
    let vocab = engine.vocab();
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut out = String::new();
    for v in instances {
        let text = serde_json::to_string(v).unwrap();
        let mut m = constraint.matcher();
        let mut accepted = true;
        for t in vocab.encode(&text).unwrap() {
            m.fill_mask(&mut mask).unwrap();
            if !formwork::bitmask::get_bit(&mask, t) {
                accepted = false;
                break;
            }
            m.consume(t).unwrap();
        }
        accepted &= m.is_accepting();
        out.push_str(&format!("{text}: {accepted}\n"));
    }
    out
}

/// Schemas whose compilation goes through complements (`not`, `if`/`then`/`else`, overlapping
/// `oneOf`), witnesses (complements of `additionalProperties`, `patternProperties`, `items`;
/// `contains`), `dependencies` and `patternProperties`, with instances telling them apart.
fn cases() -> Vec<(Value, Vec<Value>)> {
    vec![
        (
            parse_json(
                r#"{"type": "object", "not": {"additionalProperties": {"type": "string"}}}"#,
            ),
            vec![
                parse_json(r#"{}"#),
                parse_json(r#"{"a": "x"}"#),
                parse_json(r#"{"a": 1}"#),
                parse_json(r#"{"a": "x", "b": null}"#),
            ],
        ),
        (
            parse_json(
                r#"{"type": "object", "properties": {"a": {"type": "integer"}},
                   "not": {"patternProperties": {"^x": {"type": "string"}, "y$": {"type": "integer"}},
                           "additionalProperties": {"type": "boolean"}}}"#,
            ),
            vec![
                parse_json(r#"{"a": 1}"#),
                parse_json(r#"{"a": 1, "xy": true}"#),
                parse_json(r#"{"a": 1, "x": 2}"#),
                parse_json(r#"{"q": "s"}"#),
            ],
        ),
        (
            parse_json(
                r#"{"type": "object", "minProperties": 1,
                   "allOf": [{"not": {"additionalProperties": {"type": "integer"}}},
                             {"not": {"additionalProperties": {"type": "string"}}}]}"#,
            ),
            vec![
                parse_json(r#"{"a": null}"#),
                parse_json(r#"{"a": 1, "b": "s"}"#),
                parse_json(r#"{"a": 1}"#),
                parse_json(r#"{"a": "s"}"#),
            ],
        ),
        (
            parse_json(
                r#"{"type": "array", "allOf": [{"contains": {"const": 1}}, {"contains": {"const": 2}},
                                               {"not": {"items": {"type": "integer"}}}],
                   "maxItems": 4}"#,
            ),
            vec![
                parse_json(r#"[1, 2, "a"]"#),
                parse_json(r#"[1, 2]"#),
                parse_json(r#"[2, "a", 1]"#),
                parse_json(r#"[1, "a"]"#),
            ],
        ),
        (
            parse_json(
                r#"{"oneOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"type": "object", "properties": {"b": {"type": "integer"}}, "required": ["b"]},
                {"type": "object", "additionalProperties": {"type": "string"}}]}"#,
            ),
            vec![
                parse_json(r#"{"a": "x"}"#),
                parse_json(r#"{"b": 1}"#),
                parse_json(r#"{"a": "x", "b": 1}"#),
                parse_json(r#"{"c": "y"}"#),
                parse_json(r#"{"a": 1, "b": 1}"#),
            ],
        ),
        (
            parse_json(
                r#"{"type": "object",
                   "properties": {"kind": {"enum": ["a", "b"]}, "n": {"type": "number"}, "s": {"type": "string"}},
                   "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
                   "then": {"required": ["n"]},
                   "else": {"required": ["s"], "not": {"required": ["n"]}}}"#,
            ),
            vec![
                parse_json(r#"{"kind": "a", "n": 1}"#),
                parse_json(r#"{"kind": "b", "s": "x"}"#),
                parse_json(r#"{"kind": "a"}"#),
                parse_json(r#"{"kind": "b", "n": 1, "s": "x"}"#),
            ],
        ),
        (
            parse_json(
                r#"{"type": "object",
                   "properties": {"card": {"type": "string"}, "billing": {"type": "string"}, "zip": {"type": "integer"}},
                   "dependencies": {"card": ["billing"], "billing": {"properties": {"zip": {"minimum": 10}}, "required": ["zip"]}}}"#,
            ),
            vec![
                parse_json(r#"{"card": "1", "billing": "x", "zip": 12}"#),
                parse_json(r#"{"card": "1"}"#),
                parse_json(r#"{"billing": "x", "zip": 3}"#),
                parse_json(r#"{}"#),
            ],
        ),
        (
            parse_json(
                r#"{"type": "object",
                   "patternProperties": {"^a": {"type": "integer"}, "b$": {"minimum": 3}, "^c": {"type": "string"}, "d": {"type": "null"}},
                   "additionalProperties": false, "maxProperties": 3}"#,
            ),
            vec![
                parse_json(r#"{"ab": 4}"#),
                parse_json(r#"{"ab": 2}"#),
                parse_json(r#"{"c": "x", "xd": null}"#),
                parse_json(r#"{"z": 1}"#),
                parse_json(r#"{"a": 1, "cb": 5}"#),
            ],
        ),
        (
            parse_json(
                r#"{"type": "object", "oneOf": [
                {"patternProperties": {"^[ab]": {"type": "integer"}}, "additionalProperties": {"type": "string"}},
                {"patternProperties": {"[bc]$": {"minimum": 2}, "^a": {"type": "number"}}, "additionalProperties": false}]}"#,
            ),
            vec![
                parse_json(r#"{"ab": 1}"#),
                parse_json(r#"{"ab": 3}"#),
                parse_json(r#"{"x": "s"}"#),
                parse_json(r#"{"ac": 2.5}"#),
                parse_json(r#"{"bc": 5, "x": "s"}"#),
            ],
        ),
        (
            parse_json(
                r#"{"oneOf": [{"type": "integer", "multipleOf": 3}, {"type": "integer", "multipleOf": 5}, {"not": {"type": ["integer", "object"]}}]}"#,
            ),
            vec![
                parse_json(r#"3"#),
                parse_json(r#"5"#),
                parse_json(r#"15"#),
                parse_json(r#""s""#),
                parse_json(r#"{}"#),
            ],
        ),
        (
            parse_json(
                r##"{"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}, "v": {"type": "integer"}},
                                      "not": {"required": ["w"]}}},
                   "oneOf": [{"$ref": "#/$defs/node"}, {"type": "object", "required": ["v"], "properties": {"v": {"minimum": 5}}}]}"##,
            ),
            vec![
                parse_json(r#"{"v": 1}"#),
                parse_json(r#"{"v": 7}"#),
                parse_json(r#"{"next": {"v": 2}}"#),
                parse_json(r#"{"w": 1, "v": 6}"#),
            ],
        ),
    ]
}

#[test]
fn grammars_are_the_same_at_every_compilation() {
    for opts in [
        JsonSchemaOptions::new(),
        JsonSchemaOptions::new().property_order(PropertyOrder::Any),
    ] {
        for (schema, _) in cases() {
            let first = compiled_text(&schema, &opts);
            for run in 1..RUNS {
                let again = compiled_text(&schema, &opts);
                assert!(
                    again == first,
                    "{schema} ({opts:?}): compilation {run} differs from the first:\n{}",
                    first_difference(&first, &again)
                );
            }
        }
    }
}

#[test]
fn verdicts_are_the_same_at_every_compilation() {
    let engine = Engine::new(tokenizers::qwen3().clone());
    let opts = JsonSchemaOptions::new();
    let mut compiled = 0;
    for (schema, instances) in cases() {
        let first = verdicts(&engine, &schema, &opts, &instances);
        compiled += usize::from(!first.starts_with("error"));
        for run in 1..RUNS / 4 {
            let again = verdicts(&engine, &schema, &opts, &instances);
            assert_eq!(again, first, "{schema}: compilation {run}");
        }
    }
    // The cases must exercise the constructions, not their refusals.
    assert_eq!(compiled, cases().len());
}

/// The committed MaskBench sample's schemas that use complements, `oneOf`, `dependencies`,
/// `patternProperties` or `contains` (those compiling or not): each compiles to one grammar
/// (or one error) every time.
#[test]
fn sample_schemas_compile_the_same_every_time() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/maskbench-sample");
    let keywords = [
        "\"not\"",
        "\"oneOf\"",
        "\"if\"",
        "\"dependencies\"",
        "\"dependentSchemas\"",
        "\"patternProperties\"",
        "\"contains\"",
    ];
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let opts = JsonSchemaOptions::new();
    let mut checked = 0;
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let Some(schema) = serde_json::from_str::<Value>(&text)
            .unwrap()
            .get("schema")
            .cloned()
        else {
            continue;
        };
        let schema_text = schema.to_string();
        if !keywords.iter().any(|k| schema_text.contains(k)) {
            continue;
        }
        checked += 1;
        let first = compiled_text(&schema, &opts);
        for run in 1..RUNS / 3 {
            let again = compiled_text(&schema, &opts);
            assert!(
                again == first,
                "{}: compilation {run} differs from the first:\n{}",
                path.display(),
                first_difference(&first, &again)
            );
        }
    }
    assert!(
        checked >= 30,
        "only {checked} sample schemas use the keywords"
    );
}

/// The first line where two texts differ, with both versions.
fn first_difference(a: &str, b: &str) -> String {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let i = (0..la.len().max(lb.len()))
        .find(|&i| la.get(i) != lb.get(i))
        .unwrap_or(0);
    format!("first:  {:?}\nagain:  {:?}", la.get(i), lb.get(i))
}
