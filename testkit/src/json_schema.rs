//! JSON Schema helpers shared by the differential tests of the matcher's state (objects in
//! any order, counted lengths).

use formwork::front::json_schema::{compile_schema_with, JsonSchemaOptions};
use formwork::{ConstraintMatcher, Engine, Limits};
use serde_json::{json, Value};

/// The matcher of the grammar the front end builds for `schema` alone, without a matcher to
/// keep state beside it (the oracle: the `2^n` grammar of objects in any order), and the
/// engine's matcher of the schema.
pub fn grammar_and_engine(
    engine: &Engine,
    schema: &Value,
    options: &JsonSchemaOptions,
) -> (ConstraintMatcher, ConstraintMatcher) {
    let grammar = compile_schema_with(schema, options, &Limits::new()).unwrap();
    let exact = engine.compile_grammar(&grammar.grammar).unwrap().matcher();
    let kept = engine
        .compile_json_schema(schema, options)
        .unwrap()
        .matcher();
    (exact, kept)
}

/// An object schema of these properties, required names and `additionalProperties`.
pub fn object(properties: Value, required: Value, additional: Value) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": additional
    })
}
