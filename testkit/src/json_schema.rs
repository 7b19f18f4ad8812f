//! JSON Schema helpers shared by the differential tests of the matcher's state (objects in
//! any order, counted lengths).

use formwork::front::json_schema::{compile_schema_with, JsonSchemaOptions};
use formwork::vocab::Vocab;
use formwork::{ConstraintMatcher, Engine, Limits};
use serde_json::{json, Value};

use crate::agree::{walks_agree, Walks};

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

/// `walks` random walks of 40 steps over `vocab`, choosing uniformly among the allowed tokens:
/// the engine's masks of `schema` equal those of its grammar alone at every step (see
/// [`grammar_and_engine`] and [`walks_agree`]).
#[track_caller]
pub fn walks_match_the_grammar(
    vocab: Vocab,
    schema: &Value,
    options: &JsonSchemaOptions,
    walks: usize,
    seed: u64,
) {
    let engine = Engine::new(vocab);
    let (exact, kept) = grammar_and_engine(&engine, schema, options);
    let walks = Walks {
        walks,
        steps: 40,
        seed,
    };
    walks_agree(engine.vocab(), &exact, &kept, walks, |rng, allowed| {
        allowed[rng.below(allowed.len())]
    });
}

/// An array of distinct items from the list `words` (an `enum`), with the keywords of `extra`.
pub fn distinct_list(words: &[&str], extra: Value) -> Value {
    let mut schema = json!({"type": "array", "uniqueItems": true, "items": {"enum": words}});
    if let (Some(s), Value::Object(extra)) = (schema.as_object_mut(), extra) {
        s.extend(extra);
    }
    schema
}
