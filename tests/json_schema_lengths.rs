//! Strings whose `maxLength` the matcher counts beside their pattern (`matcher::json_state`,
//! `lengths.rs`), where the pattern's automaton times the bound is too big to build. Near the
//! bound, the mask equals bit for bit over the whole vocabulary the mask of the schema without
//! `maxLength`, less the tokens after which the string can no longer end within it, found here
//! independently for the test's pattern. The mask without the bound is the Earley backend's
//! (which `cfg_oracle` and the JSON Schema suites hold to the reference recognizer): the
//! recognizer itself is quadratic in a string of repeated words this long. Characters split
//! across tokens (UTF-8, escapes, surrogate pairs) are written a byte at a time near the bound,
//! and rollback gives back the masks seen.

use formwork::front::json_schema::{compile_schema, compile_schema_with, JsonSchemaOptions};
use formwork::mask::TokenMask;
use formwork::vocab::Vocab;
use formwork::{
    CompileErrorKind, ConstraintMatcher, Engine, EngineConfig, Limits, Matcher, TokenId,
};
use formwork_testkit::oracle::{assert_same_mask, mask_of, step_matches};
use formwork_testkit::tokenizers;
use serde_json::{json, Value};

const MAX: usize = 3000;

/// Words separated by white space without an `x`, at least two characters: two patterns, so
/// no single one narrows to the bound, and times a bound of 3,000 their automaton is past the
/// front end's 4,096 states.
fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "t": {
                "type": "string",
                "allOf": [{"pattern": "^(?:\\S+\\s+)*\\S+$"}, {"pattern": "^[^x]*$"}],
                "minLength": 2,
                "maxLength": MAX
            },
            "n": {"type": "integer"}
        },
        "required": ["t"],
        "additionalProperties": false
    })
}

/// ECMA-262 `\s`: white space and line terminators.
fn is_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{b}' | '\u{c}' | '\r' | ' ' | '\u{a0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200a}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202f}'
                | '\u{205f}'
                | '\u{3000}'
                | '\u{feff}'
    )
}

/// The value of `"t"` read so far, up to its last whole character: the characters, the last
/// of them, and the bytes after them (a character partly written).
#[derive(Clone)]
struct Read {
    n: usize,
    last: Option<char>,
    rest: Vec<u8>,
    closed: bool,
}

/// Reads `bytes` of the value's raw content after `read`, decoding as `serde_json` does.
fn read_on(read: &Read, bytes: &[u8]) -> Read {
    let mut out = Read {
        rest: Vec::new(),
        ..read.clone()
    };
    let content = [read.rest.as_slice(), bytes].concat();
    let mut i = 0;
    while i < content.len() && !out.closed {
        let len = match content[i] {
            b'"' => {
                out.closed = true;
                break;
            }
            b'\\' => match content.get(i + 1) {
                Some(b'u') => match content
                    .get(i + 2..i + 6)
                    .map(|h| u32::from_str_radix(std::str::from_utf8(h).unwrap(), 16).unwrap())
                {
                    Some(0xD800..=0xDBFF) => 12,
                    _ => 6,
                },
                _ => 2,
            },
            0..=0x7f => 1,
            0xc0..=0xdf => 2,
            0xe0..=0xef => 3,
            _ => 4,
        };
        if i + len > content.len() {
            break;
        }
        let piece = &content[i..i + len];
        let decoded: String = match piece[0] {
            b'\\' => serde_json::from_slice(&[b"\"", piece, b"\""].concat()).unwrap(),
            _ => std::str::from_utf8(piece).unwrap().to_string(),
        };
        out.n += decoded.chars().count();
        out.last = decoded.chars().last().or(out.last);
        i += len;
    }
    if !out.closed {
        out.rest = content[i..].to_vec();
    }
    out
}

/// Can the value still end within `MAX` characters? Every state of the patterns is one
/// character from their end at most, none once the last is not white space, and a partial
/// character may still become one that continues a word.
fn within_bound(read: &Read) -> bool {
    let in_word = read.last.is_some_and(|c| !is_space(c));
    match (read.closed, read.rest.is_empty()) {
        (true, _) => read.n <= MAX,
        (false, false) => read.n < MAX,
        (false, true) => read.n + usize::from(!in_word) <= MAX,
    }
}

/// The exact mask after `read` (inside the value of `"t"`): `unbounded`'s (the schema
/// without `maxLength`), less the tokens leaving the bound.
fn oracle_mask(unbounded: &mut ConstraintMatcher, engine: &Engine, read: &Read) -> TokenMask {
    let vocab = engine.vocab();
    let mut mask = mask_of(unbounded, vocab);
    let leaving: Vec<TokenId> = mask
        .iter()
        .filter(|&t| !vocab.is_special(t))
        .filter(|&t| !within_bound(&read_on(read, vocab.token_bytes(t))))
        .collect();
    for t in leaving {
        mask.remove(t);
    }
    mask
}

/// Writes `head` (whole tokens) then `tail` a byte at a time; from `check_from` characters
/// of the value on, masks must equal the oracle's at every step and at the end, where the
/// matcher accepts iff `valid`. Rolling back gives back the masks seen.
#[track_caller]
fn masks_match_near_the_bound(head: &str, tail: &str, valid: bool) {
    let engine = Engine::new(tokenizers::qwen3().clone());
    let vocab = engine.vocab();
    let schema = schema();
    let mut without_max = schema.clone();
    without_max["properties"]["t"]
        .as_object_mut()
        .unwrap()
        .remove("maxLength");
    let mut unbounded = engine
        .compile_json_schema(&without_max, &JsonSchemaOptions::new())
        .unwrap()
        .matcher();
    let mut m = engine
        .compile_json_schema(&schema, &JsonSchemaOptions::new())
        .unwrap()
        .matcher();
    let mut tokens = vocab.encode(head).unwrap();
    let checked_from = tokens.len().saturating_sub(3);
    for b in tail.bytes() {
        tokens.extend(vocab.encode_greedy(&[b]).unwrap());
    }
    let mut prefix = Vec::new();
    let opening = b"{\"t\":\"";
    let mut read = Read {
        n: 0,
        last: None,
        rest: Vec::new(),
        closed: false,
    };
    let mut seen = Vec::new();
    let mut consumed = 0;
    for (step, &t) in tokens.iter().enumerate() {
        let what = format!("step {step} after …{}", tail_of(&prefix));
        if step >= checked_from {
            let expected = oracle_mask(&mut unbounded, &engine, &read);
            if !step_matches(&mut m, vocab, &expected, t, valid, &mut seen, &what) {
                break;
            }
        }
        m.consume(t).unwrap_or_else(|e| panic!("{what}: {e}"));
        unbounded
            .consume(t)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let before = prefix.len();
        prefix.extend_from_slice(vocab.token_bytes(t));
        if prefix.len() > opening.len() && !read.closed {
            read = read_on(&read, &prefix[before.max(opening.len())..]);
        }
        consumed += 1;
    }
    if consumed == tokens.len() {
        let expected = mask_of(&mut unbounded, vocab);
        assert_same_mask(&mask_of(&mut m, vocab), &expected, vocab, "the end");
        assert_eq!(m.is_accepting(), valid);
        seen.push(mask_of(&mut m, vocab));
    }
    let checked = seen.len();
    for back in 1..checked {
        let mut fork = m.clone();
        fork.rollback(back).unwrap();
        let what = format!("rolled back {back}");
        assert_same_mask(
            &mask_of(&mut fork, vocab),
            &seen[checked - 1 - back],
            vocab,
            &what,
        );
    }
}

fn tail_of(prefix: &[u8]) -> String {
    String::from_utf8_lossy(&prefix[prefix.len().saturating_sub(24)..]).into_owned()
}

/// Words of `n` characters in all (`ab cd ab …`), ending in a word.
fn words(n: usize) -> String {
    let mut s: String = "ab cd ".repeat(n / 6 + 1).chars().take(n).collect();
    if s.ends_with(' ') {
        s.pop();
        s.push('y');
    }
    s
}

/// The tail spells 10 characters: `é` raw and escaped, a line feed escaped, an emoji as a
/// surrogate pair, and a word.
const TAIL: &str = "\u{e9}\\u00e9 \\n\\ud83d\\ude00 word";
const TAIL_CHARS: usize = 10;

#[test]
fn counted_strings_masks_match_the_oracle_at_the_bound() {
    // Exactly `MAX` characters, closed, then the rest of the object.
    let head = format!("{{\"t\":\"{}", words(MAX - TAIL_CHARS));
    masks_match_near_the_bound(&head, &format!("{TAIL}\",\"n\":1}}"), true);
}

#[test]
fn counted_strings_refuse_the_character_past_the_bound() {
    let head = format!("{{\"t\":\"{}", words(MAX - TAIL_CHARS + 1));
    masks_match_near_the_bound(&head, &format!("{TAIL}\"}}"), false);
}

#[test]
fn counted_strings_refuse_a_space_with_no_room_for_a_word() {
    // A space as the last character allowed leaves no room for the word the pattern needs
    // after it; an escaped one split across tokens likewise.
    let head = format!("{{\"t\":\"{}", words(MAX - 1));
    masks_match_near_the_bound(&head, " y\"}", false);
    masks_match_near_the_bound(&head, "\\u0020y\"}", false);
}

/// The grammar alone cannot hold the bound (`compile_schema`, which hands out a grammar, still
/// refuses it), nor can the matcher where another branch allows other strings at the place.
#[test]
fn counted_strings_refused_where_a_matcher_cannot_count_them() {
    let engine = Engine::new(tokenizers::qwen3().clone());
    let options = JsonSchemaOptions::new();
    let err = compile_schema(&schema(), &options).err().unwrap();
    assert!(err.to_string().contains("automaton states"), "{err}");
    assert!(engine.compile_json_schema(&schema(), &options).is_ok());
    let t = schema()["properties"]["t"].clone();
    let mixed = json!({"anyOf": [t, {"type": "string", "maxLength": 3}]});
    let err = engine.compile_json_schema(&mixed, &options).err().unwrap();
    assert_eq!(err.kind(), CompileErrorKind::Unsupported, "{err}");
    assert!(err.to_string().contains("another branch"), "{err}");
    let beside_number = json!({"anyOf": [t, {"type": "integer"}]});
    assert!(engine.compile_json_schema(&beside_number, &options).is_ok());
    // A bound small enough for the product automaton (counted from 512 of its states on) is
    // held by the product where other strings share the place.
    let mut short = schema()["properties"]["t"].clone();
    short["maxLength"] = json!(300);
    let shared = json!({"anyOf": [short, {"type": "string", "maxLength": 3}]});
    let c = engine.compile_json_schema(&shared, &options).unwrap();
    let mut m = c.matcher();
    m.consume_bytes(b"\"a\"").unwrap();
    assert!(m.is_accepting(), "the other branch's string");
    let mut m = c.matcher();
    let words = format!("\"{}", words(300));
    m.consume_bytes(words.as_bytes()).unwrap();
    assert!(m.consume_bytes(b"z").is_err(), "301 characters");
    m.consume_bytes(b"\"").unwrap();
    assert!(m.is_accepting());
}

/// A token may open a counted string and leave its bound within itself: outside the string,
/// the mask reads the long tokens holding `"` whole. A vocabulary of bytes and two long
/// tokens, with a state budget of 300 so that a bound of 200 is counted.
#[test]
fn a_long_token_opening_a_counted_string_is_read_whole() {
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let near = [b"\"".as_slice(), &[b'a'; 190]].concat();
    let past = [b"\"".as_slice(), &[b'a'; 210]].concat();
    tokens.extend([near, past, b"<eos>".to_vec()]);
    let (near, past) = (256, 257);
    let vocab = Vocab::from_token_bytes(tokens, &[258], &[258]).unwrap();
    let limits = Limits::new().automaton_states(300);
    let engine = Engine::with_config(vocab, EngineConfig::new().limits(limits.clone()));
    let schema = json!({
        "type": "string",
        "allOf": [{"pattern": "^(?:\\S+\\s+)*\\S+$"}, {"pattern": "^[^x]*$"}],
        "maxLength": 200
    });
    let options = JsonSchemaOptions::new();
    let err = compile_schema_with(&schema, &options, &limits)
        .err()
        .unwrap();
    assert!(err.to_string().contains("automaton states"), "{err}");
    let mut m = engine
        .compile_json_schema(&schema, &options)
        .unwrap()
        .matcher();
    let mask = mask_of(&mut m, engine.vocab());
    assert!(mask.contains(near));
    assert!(!mask.contains(past));
    assert!(m.consume(past).is_err());
    m.consume(near).unwrap();
    assert!(
        m.consume(past).is_err(),
        "no quote: the walk inside the string refuses it"
    );
}

/// The tables of a schema's counted strings share one budget (8 MiB): many bounds of a
/// million characters are refused with the automaton's limit error instead of taking
/// hundreds of megabytes and seconds.
#[test]
fn counted_strings_share_one_table_budget() {
    let engine = Engine::new(tokenizers::qwen3().clone());
    let t = schema()["properties"]["t"].clone();
    let properties: serde_json::Map<String, Value> = (0..24)
        .map(|i| {
            let mut p = t.clone();
            p["maxLength"] = json!(1_000_000 + i);
            (format!("p{i}"), p)
        })
        .collect();
    let err = engine
        .compile_json_schema(
            &json!({"properties": properties}),
            &JsonSchemaOptions::new(),
        )
        .err()
        .unwrap();
    assert_eq!(err.kind(), CompileErrorKind::Limit, "{err}");
    assert!(err.to_string().contains("automaton states"), "{err}");
}
