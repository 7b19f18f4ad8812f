//! The shipped reference-lookup template (WGrammar Figure 2) on Qwen3: oracle-equal masks,
//! random walks whose JSON parses with topics and references from the request's sets, and
//! invalid outputs rejected where they leave the language.

use std::collections::HashSet;

use formwork::Matcher;
use formwork_testkit::oracle::assert_masks_match_oracle;
use formwork_testkit::rng::Rng;
use formwork_testkit::tokenizers;
use formwork_testkit::walk::{checked_walks, rejection_point};
use serde_json::Value;

fn request(topics: (i64, i64), ids: &[&str]) -> String {
    let ids: Vec<String> = ids.iter().map(|id| format!("{id:?}")).collect();
    format!(
        "reference_lookup(topics: {}..{}, ids: {{{}}})",
        topics.0,
        topics.1,
        ids.join(", ")
    )
}

/// The independent checker: the output parses as JSON, is a non-empty array of objects with
/// exactly the keys "topic" and "reference" (in that order), topics are integers in range and
/// references are strings from the set, each list non-empty.
fn check_output(out: &[u8], topics: (i64, i64), ids: &[&str]) -> Result<(), String> {
    let json: Value = serde_json::from_slice(out).map_err(|e| e.to_string())?;
    let entries = json
        .as_array()
        .filter(|a| !a.is_empty())
        .ok_or("not a non-empty array")?;
    let ids: HashSet<&str> = ids.iter().copied().collect();
    for e in entries {
        let obj = e.as_object().ok_or("an entry is not an object")?;
        let keys: Vec<&str> = obj.keys().map(|k| k.as_str()).collect();
        if keys != ["topic", "reference"] {
            return Err(format!("keys {keys:?}"));
        }
        let topic = obj["topic"]
            .as_array()
            .filter(|a| !a.is_empty())
            .ok_or("topic")?;
        for t in topic {
            let t = t.as_i64().ok_or("a topic is not an integer")?;
            if !(topics.0..=topics.1).contains(&t) {
                return Err(format!("topic {t} out of range"));
            }
        }
        let refs = obj["reference"]
            .as_array()
            .filter(|a| !a.is_empty())
            .ok_or("reference")?;
        for r in refs {
            let r = r.as_str().ok_or("a reference is not a string")?;
            if !ids.contains(r) {
                return Err(format!("reference {r:?} is not a section id"));
            }
        }
    }
    Ok(())
}

#[test]
fn masks_equal_the_oracle_at_every_step() {
    let vocab = tokenizers::qwen3();
    let ids = ["1", "1.1", "2", "2.1.1", "10"];
    let cases = [
        (
            (1, 3),
            vec![
                r#"[{"topic": [1], "reference": ["1.1", "2"]}, {"topic": [3, 2], "reference": ["2.1.1"]}]"#,
                r#"[{"topic": [2], "reference": ["10", "1", "10"]}]"#,
            ],
        ),
        ((7, 12), vec![r#"[{"topic": [12], "reference": ["2"]}]"#]),
    ];
    for (topics, texts) in cases {
        let req = request(topics, &ids);
        let constraint = formwork_testkit::template_engine().compile(&req).unwrap();
        let grammar = formwork_testkit::template_engine()
            .request_grammar(&req)
            .unwrap();
        for text in texts {
            check_output(text.as_bytes(), topics, &ids).unwrap();
            let tokens = vocab.encode(text).unwrap();
            let mut m = constraint.matcher();
            assert_masks_match_oracle(
                &format!("{req} on {text}"),
                vocab,
                &grammar,
                &mut m,
                &tokens,
            );
        }
    }
}

#[test]
fn random_walks_give_json_with_ids_from_the_request() {
    let vocab = tokenizers::qwen3();
    let mut rng = Rng::new(0x2ef);
    let many: Vec<String> = (1..=12)
        .flat_map(|s| {
            (0..=4).map(move |sub| {
                if sub == 0 {
                    s.to_string()
                } else {
                    format!("{s}.{sub}")
                }
            })
        })
        .collect();
    let many: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
    for (topics, ids) in [
        ((1, 20), &many[..]),
        ((0, 0), &["a", "ab", "abc"][..]),
        ((95, 105), &["x"][..]),
    ] {
        let req = request(topics, ids);
        let constraint = formwork_testkit::template_engine().compile(&req).unwrap();
        let matcher = || Box::new(constraint.matcher()) as Box<dyn Matcher>;
        let ended = checked_walks(vocab, matcher, &mut rng, 20, 300, |out| {
            check_output(out, topics, ids).map_err(|e| format!("{req}: {e}"))
        });
        assert!(ended >= 15, "{req}: only {ended} of 20 walks ended");
    }
}

#[test]
fn invalid_outputs_are_rejected_where_they_leave_the_language() {
    let vocab = tokenizers::qwen3();
    let ids = ["1", "1.1", "2", "2.1.1"];
    let req = request((1, 3), &ids);
    let constraint = formwork_testkit::template_engine().compile(&req).unwrap();
    let grammar = formwork_testkit::template_engine()
        .request_grammar(&req)
        .unwrap();
    let reject = |text: &str| rejection_point(vocab, &grammar, &mut constraint.matcher(), text);
    let rejected_bytes = |text: &str| {
        let (_, t) = reject(text).unwrap_or_else(|| panic!("{text} was not rejected"));
        String::from_utf8_lossy(vocab.token_bytes(t)).into_owned()
    };

    assert_eq!(reject(r#"[{"topic": [1], "reference": ["2.1.1"]}]"#), None);
    // A section id not in the set: "2.1" continues to "2.1.1" only.
    assert!(rejected_bytes(r#"[{"topic": [1], "reference": ["2.1"]}]"#).starts_with('"'));
    assert!(rejected_bytes(r#"[{"topic": [1], "reference": ["3"]}]"#).starts_with('3'));
    // A topic out of range, or written with a leading zero.
    assert!(rejected_bytes(r#"[{"topic": [4], "reference": ["1"]}]"#).starts_with('4'));
    assert!(rejected_bytes(r#"[{"topic": [0], "reference": ["1"]}]"#).starts_with('0'));
    let from_zero = request((0, 12), &ids);
    let (_, t) = rejection_point(
        vocab,
        &formwork_testkit::template_engine()
            .request_grammar(&from_zero)
            .unwrap(),
        &mut formwork_testkit::template_engine()
            .compile(&from_zero)
            .unwrap()
            .matcher(),
        r#"[{"topic": [01], "reference": ["1"]}]"#,
    )
    .unwrap();
    assert_eq!(vocab.token_bytes(t), b"1", "a leading zero");
    // Keys in the wrong order, a missing quote, an empty reference list, other whitespace.
    assert!(rejected_bytes(r#"[{"reference": ["1"], "topic": [1]}]"#).contains('r'));
    assert!(rejected_bytes(r#"[{"topic": [1], "reference": [1]}]"#).contains('1'));
    assert!(rejected_bytes(r#"[{"topic": [1], "reference": []}]"#).contains(']'));
    assert!(rejected_bytes(r#"[ {"topic": [1], "reference": ["1"]}]"#).starts_with(' '));
    // An unfinished array is a viable prefix but not complete.
    let mut m = constraint.matcher();
    assert_eq!(
        rejection_point(
            vocab,
            &grammar,
            &mut m,
            r#"[{"topic": [1], "reference": ["1"]}"#
        ),
        None
    );
    assert!(!m.is_accepting());
}
