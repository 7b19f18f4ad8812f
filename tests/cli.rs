//! The `formwork` binary's contract: exit codes, trace and JSON output, typed errors.

use std::process::{Command, Output};

fn formwork(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_formwork"))
        .args(args)
        .output()
        .expect("run formwork")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn vocab_reports_the_embedded_tokenizer() {
    let o = formwork(&["vocab"]);
    assert!(o.status.success());
    let out = stdout(&o);
    assert!(out.contains("tokens:        151669"), "{out}");
    assert!(
        out.contains("mask width:    151936 (4748 u32 words)"),
        "{out}"
    );
    assert!(out.contains("<|im_end|>"), "{out}");
}

#[test]
fn check_accepts_rejects_and_fails_with_distinct_exit_codes() {
    let ok = formwork(&["check", "--regex", r"\d+(\.\d+)*", "--text", "3.14"]);
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
    assert!(stdout(&ok).contains("accepted"));

    let bad = formwork(&["check", "--regex", r"\d+(\.\d+)*", "--text", "3..14"]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stdout(&bad).contains("rejected at step 1"),
        "{}",
        stdout(&bad)
    );

    let incomplete = formwork(&["check", "--regex", r"\d+(\.\d+)*", "--text", "3."]);
    assert_eq!(incomplete.status.code(), Some(1));
    assert!(stdout(&incomplete).contains("incomplete"));

    let err = formwork(&["check", "--regex", r"(?=x)", "--text", "x"]);
    assert_eq!(err.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&err.stderr).contains("look-around"));

    let missing = formwork(&[
        "check",
        "--tokenizer",
        "/nonexistent.json",
        "--regex",
        "a",
        "--text",
        "a",
    ]);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn json_output_has_one_object_per_step_and_a_summary() {
    let o = formwork(&[
        "check",
        "--regex",
        "[a-z]+",
        "--text",
        "hello world",
        "--json",
        "--dump-masks",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let lines: Vec<serde_json::Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    let summary = lines.last().unwrap();
    assert_eq!(summary["summary"], true);
    assert_eq!(summary["accepted"], false);
    assert_eq!(summary["rejected_at"], 1);
    let first = &lines[0];
    assert_eq!(first["step"], 0);
    assert_eq!(first["allowed"], true);
    let mask = first["mask"].as_array().unwrap();
    assert_eq!(mask.len() as u64, first["mask_count"].as_u64().unwrap());
    assert!(mask.iter().any(|t| t.as_u64() == first["token"].as_u64()));
    assert!(first["mask_ns"].as_u64().is_some());
}

#[test]
fn trace_prints_a_line_per_step_and_eos() {
    let o = formwork(&["check", "--regex", "[0-9]{2}", "--text", "42", "--trace"]);
    assert!(o.status.success());
    let out = stdout(&o);
    assert_eq!(
        out.lines().filter(|l| l.starts_with("step")).count(),
        3,
        "{out}"
    );
    assert!(out.contains("EOS"));
}
