//! The harness's own checks, and the tests that run the committed MaskBench sample through it.

use std::path::{Path, PathBuf};

use formwork_testkit::tokenizers;
use llguidance::api::TopLevelGrammar;
use serde_json::json;

use super::*;

fn sample_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/maskbench-sample")
}

#[test]
fn a_case_is_walked_with_a_mask_per_token() {
    let engine = Engine::new(Vocab::embedded_qwen3().unwrap());
    let case = Case {
        name: "small".into(),
        schema: json!({"type": "array", "items": {"type": "integer"}, "maxItems": 2}),
        tests: vec![
            Instance {
                valid: true,
                data: json!([1, 22]),
            },
            Instance {
                valid: false,
                data: json!([1, 2, 3]),
            },
        ],
    };
    let result = run_case(&engine, &case, &HarnessConfig::new());
    assert_eq!(result.status, Status::Passing, "{}", result.detail);
    assert!(result.time_to_first_mask().is_some());
    // Each valid token and EOS had a mask; the slowest are kept with where they were.
    assert_eq!(result.mask_ns.len(), result.slowest.len());
    assert!(result.slowest.windows(2).all(|w| w[0].ns >= w[1].ns));
    assert_eq!(
        result.slowest.iter().map(|m| m.step).max(),
        Some(result.mask_ns.len() - 1)
    );
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
    let dir = sample_dir();
    let cases = load(&dir).unwrap();
    assert_eq!(cases.len(), 155);
    let engine = Engine::new(Vocab::embedded_qwen3().unwrap());
    let config = HarnessConfig::new().schema_options(options);
    let report = run(&engine, &cases, &config, |_| {});
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

/// MaskBench schemas from the committed sample (every fifth file, where formwork compiles it
/// and accepts its first valid instance), that instance in compact form: formwork's default
/// JSON (compact, schema order) against llguidance told the same (`x-guidance` separators, no
/// flexible whitespace), through the engine's router.
#[test]
fn maskbench_sample_masks_match_llguidance() {
    let dir = sample_dir();
    let engine = Engine::new(tokenizers::qwen3().clone());
    let options = JsonSchemaOptions::new();
    let mut compared = 0;
    for case in load(&dir).unwrap().iter().step_by(5) {
        let Ok(constraint) = engine.compile_json_schema(&case.schema, &options) else {
            continue;
        };
        let Some(valid) = case.tests.iter().find(|t| t.valid) else {
            continue;
        };
        let text = serde_json::to_string(&valid.data).unwrap();
        if !accepts(&constraint, &text) {
            continue; // a documented formwork rejection (property order), counted by the ratchet
        }
        let mut schema = case.schema.clone();
        let Some(obj) = schema.as_object_mut() else {
            continue;
        };
        obj.insert(
            "x-guidance".into(),
            serde_json::json!({
                "whitespace_flexible": false,
                "item_separator": ",",
                "key_separator": ":",
            }),
        );
        eprintln!("{}", case.name);
        formwork_testkit::llg::differential(
            || TopLevelGrammar::from_json_schema(schema.clone()),
            || Box::new(constraint.matcher()),
            &[&text],
        );
        compared += 1;
    }
    assert!(compared >= 15, "only {compared} schemas compared");
}

fn accepts(constraint: &formwork::Constraint, text: &str) -> bool {
    let vocab = tokenizers::qwen3();
    let mut m = constraint.matcher();
    vocab
        .encode(text)
        .is_ok_and(|tokens| m.consume_all(&tokens).is_ok() && m.is_accepting())
}
