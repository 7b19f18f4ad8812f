//! JSON Schema helpers shared by the differential tests of the matcher's state (objects in
//! any order, counted lengths).

use formwork::front::json_schema::{compile_schema_with, JsonSchemaOptions};
use formwork::vocab::Vocab;
use formwork::{ConstraintMatcher, Engine, Limits, Matcher, TokenId};
use serde_json::{json, Value};

use crate::agree::{walks_agree, Walks};
use crate::oracle::mask_of;
use crate::rng::Rng;

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

/// Does `text` write some name twice in one object (names compared decoded)?
pub fn writes_a_name_twice(text: &[u8]) -> bool {
    // Per open container: the names of an object (`None` for an array), and whether the
    // next string is a name.
    let mut open: Vec<(Option<Vec<Vec<u8>>>, bool)> = Vec::new();
    let mut string: Option<Vec<u8>> = None;
    let mut escaped = false;
    for &b in text {
        if let Some(raw) = &mut string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => {
                    let name = serde_json::from_slice::<String>(&[b"\"", &raw[..], b"\""].concat())
                        .map_or(raw.clone(), String::into_bytes);
                    string = None;
                    if let Some((Some(names), expect @ true)) = open.last_mut() {
                        if names.contains(&name) {
                            return true;
                        }
                        names.push(name);
                        *expect = false;
                    }
                    continue;
                }
                _ => {}
            }
            raw.push(b);
            continue;
        }
        match b {
            b'"' => string = Some(Vec::new()),
            b'{' => open.push((Some(Vec::new()), true)),
            b'[' => open.push((None, false)),
            b'}' | b']' => {
                open.pop();
            }
            b',' => {
                if let Some((Some(_), expect)) = open.last_mut() {
                    *expect = true;
                }
            }
            _ => {}
        }
    }
    false
}

/// Random walks where `kept`'s mask is `exact`'s less tokens that write a name twice in one
/// object: the `2^n` grammar refuses a declared name twice and admits an undeclared one
/// again, where a key group refuses every name written twice (an object only `{}`
/// describes, held to none, takes names again in both). For places where undeclared names
/// may repeat in the oracle; `pick` chooses among `kept`'s allowed tokens.
#[track_caller]
pub fn walks_agree_but_repeated_names(
    vocab: &Vocab,
    exact: &ConstraintMatcher,
    kept: &ConstraintMatcher,
    walks: Walks,
    mut pick: impl FnMut(&mut Rng, &[TokenId]) -> TokenId,
) {
    let mut rng = Rng::new(walks.seed);
    let eos = vocab.len() as TokenId - 1;
    for walk in 0..walks.walks {
        let (mut exact, mut kept) = (exact.clone(), kept.clone());
        let mut text = Vec::new();
        for step in 0..walks.steps {
            let what = format!(
                "walk {walk} step {step} after {:?}",
                String::from_utf8_lossy(&text)
            );
            let (expected, got) = (mask_of(&mut exact, vocab), mask_of(&mut kept, vocab));
            assert_eq!(kept.is_accepting(), exact.is_accepting(), "{what}");
            for t in 0..vocab.len() as TokenId {
                let token = vocab.token_bytes(t);
                let twice = writes_a_name_twice(&[&text[..], token].concat());
                match (got.contains(t), expected.contains(t)) {
                    (true, false) => panic!("{what}: {:?} allowed", vocab.display_token(t)),
                    (false, true) if !twice => {
                        panic!("{what}: {:?} refused", vocab.display_token(t))
                    }
                    _ => {}
                }
            }
            let allowed: Vec<TokenId> = got.iter().filter(|&t| t != eos).collect();
            if allowed.is_empty() {
                break;
            }
            let t = pick(&mut rng, &allowed);
            exact.consume(t).unwrap_or_else(|e| panic!("{what}: {e}"));
            kept.consume(t).unwrap_or_else(|e| panic!("{what}: {e}"));
            text.extend_from_slice(vocab.token_bytes(t));
        }
    }
}
