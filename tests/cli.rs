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

fn data(name: &str) -> String {
    format!("{}/tests/data/cli/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn summary(o: &Output) -> serde_json::Value {
    let out = stdout(o);
    serde_json::from_str(out.lines().last().expect("a summary line")).expect("JSON")
}

#[test]
fn check_schema_gbnf_and_tags_keep_the_regex_contract() {
    let schema = data("person.schema.json");
    let ok = formwork(&[
        "check",
        "--schema",
        &schema,
        "--text",
        r#"{"name":"Ann","age":3}"#,
        "--json",
    ]);
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
    let s = summary(&ok);
    assert_eq!(s["accepted"], true);
    // Regular, but past the size the router gives the operator backend: Earley compiles it
    // faster. Forced onto operators, same answer.
    assert_eq!(s["backend"], "earley");
    let ops = formwork(&[
        "check",
        "--schema",
        &schema,
        "--backend",
        "ops",
        "--text",
        r#"{"name":"Ann","age":3}"#,
        "--json",
    ]);
    assert_eq!(ops.status.code(), Some(0), "{}", stdout(&ops));
    assert_eq!(summary(&ops)["backend"], "operators");
    let bad = formwork(&[
        "check",
        "--schema",
        &schema,
        "--text",
        r#"{"name":"Ann","height":3}"#,
    ]);
    assert_eq!(bad.status.code(), Some(1));
    assert!(
        stdout(&bad).contains("rejected at step"),
        "{}",
        stdout(&bad)
    );
    let incomplete = formwork(&["check", "--schema", &schema, "--text", r#"{"name":"Ann""#]);
    assert_eq!(incomplete.status.code(), Some(1));
    assert!(stdout(&incomplete).contains("incomplete"));
    // Recursive schema: Earley, same output.
    let tree = formwork(&[
        "check",
        "--schema",
        &data("tree.schema.json"),
        "--text",
        r#"{"v":1,"kids":[{"kids":[]}]}"#,
        "--json",
    ]);
    assert_eq!(tree.status.code(), Some(0));
    assert_eq!(summary(&tree)["backend"], "earley");
    // GBNF, with --trace: one line per token and one for EOS.
    let expr = formwork(&[
        "check",
        "--gbnf",
        &data("expr.gbnf"),
        "--text",
        "1+2*(3-4)",
        "--trace",
    ]);
    assert_eq!(expr.status.code(), Some(0), "{}", stdout(&expr));
    let steps = stdout(&expr)
        .lines()
        .filter(|l| l.starts_with("step"))
        .count();
    assert_eq!(steps, 9, "{}", stdout(&expr));
    let rejected = formwork(&["check", "--gbnf", &data("expr.gbnf"), "--text", "1+*2"]);
    assert_eq!(rejected.status.code(), Some(1));
    // Tool calls: OpenAI-style tools in Llama 3.1 format, BFCL tools in Qwen format.
    let llama = formwork(&[
        "check",
        "--tags",
        &data("tools-llama.json"),
        "--text",
        r#"Sure. <function=get_weather>{"city":"Oslo"}</function>"#,
    ]);
    assert_eq!(llama.status.code(), Some(0), "{}", stdout(&llama));
    let unknown = formwork(&[
        "check",
        "--tags",
        &data("tools-llama.json"),
        "--text",
        r#"<function=get_time>{}</function>"#,
    ]);
    assert_eq!(unknown.status.code(), Some(1));
    let qwen = formwork(&[
        "check",
        "--tags",
        &data("tools-bfcl-qwen.json"),
        "--text",
        "<tool_call>\n{\"name\": \"add\", \"arguments\": {\"a\": 1, \"b\": 2.5}}\n</tool_call>",
    ]);
    assert_eq!(qwen.status.code(), Some(0), "{}", stdout(&qwen));
    // require_call: text without a call is incomplete.
    let no_call = formwork(&[
        "check",
        "--tags",
        &data("tools-bfcl-qwen.json"),
        "--text",
        "no call",
    ]);
    assert_eq!(no_call.status.code(), Some(1));
    assert!(stdout(&no_call).contains("incomplete"));
}

/// Fourteen properties under two branches of an array: no key set holds their objects and
/// their `2^n` grammar is past its limit, so `--any-order` keeps them in the schema's order
/// (a warning), and `--no-order-fallback` fails the schema instead.
#[test]
fn any_order_keeps_the_schema_order_of_what_it_cannot_hold() {
    let schema = data("wide-union.schema.json");
    let check = |text: &str, extra: &[&str]| {
        let mut args = vec!["check", "--schema", &schema, "--any-order"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--text", text]);
        formwork(&args)
    };
    let in_order = check(r#"[{"p0":1,"p12":2}]"#, &[]);
    assert_eq!(in_order.status.code(), Some(0), "{}", stdout(&in_order));
    assert!(
        stderr(&in_order).contains("kept in the schema's order"),
        "{}",
        stderr(&in_order)
    );
    assert_eq!(check(r#"[{"p12":2,"p0":1}]"#, &[]).status.code(), Some(1));
    let exact = check(r#"[{"p0":1,"p12":2}]"#, &["--no-order-fallback"]);
    assert_eq!(exact.status.code(), Some(2));
    assert!(
        stderr(&exact).contains("in any order"),
        "{}",
        stderr(&exact)
    );
}

#[test]
fn check_schema_options_and_errors() {
    let schema = data("person.schema.json");
    let spaced = r#"{ "name": "Ann" }"#;
    let compact = formwork(&["check", "--schema", &schema, "--text", spaced]);
    assert_eq!(compact.status.code(), Some(1));
    let flexible = formwork(&[
        "check",
        "--schema",
        &schema,
        "--whitespace",
        "flexible",
        "--text",
        spaced,
    ]);
    assert_eq!(flexible.status.code(), Some(0), "{}", stdout(&flexible));
    let reordered = r#"{"age":3,"name":"Ann"}"#;
    let in_order = formwork(&["check", "--schema", &schema, "--text", reordered]);
    assert_eq!(in_order.status.code(), Some(1));
    let any_order = formwork(&[
        "check",
        "--schema",
        &schema,
        "--any-order",
        "--text",
        reordered,
    ]);
    assert_eq!(any_order.status.code(), Some(0));
    // Forcing the backend gives the same verdicts.
    for backend in ["ops", "earley"] {
        let o = formwork(&[
            "check",
            "--schema",
            &schema,
            "--backend",
            backend,
            "--text",
            r#"{"name":"x"}"#,
            "--json",
        ]);
        assert_eq!(o.status.code(), Some(0));
        assert_eq!(
            summary(&o)["backend"],
            if backend == "ops" {
                "operators"
            } else {
                "earley"
            }
        );
    }
    // Unsupported keyword: a typed error naming its JSON pointer, or a warning with --lenient.
    let strict = formwork(&[
        "check",
        "--schema",
        &data("unsupported.schema.json"),
        "--text",
        r#"{"a":1}"#,
    ]);
    assert_eq!(strict.status.code(), Some(2));
    assert!(
        stderr(&strict).contains("#/properties/a/not"),
        "{}",
        stderr(&strict)
    );
    let lenient = formwork(&[
        "check",
        "--schema",
        &data("unsupported.schema.json"),
        "--lenient",
        "--text",
        r#"{"a":1}"#,
    ]);
    assert_eq!(lenient.status.code(), Some(0));
    assert!(stderr(&lenient).contains("warning: #/properties/a/not"));
    // Malformed grammar: its position.
    let bad = formwork(&["check", "--gbnf", &data("bad.gbnf"), "--text", "a"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(stderr(&bad).contains("bad.gbnf:1:14"), "{}", stderr(&bad));
    let missing = formwork(&["check", "--schema", "/nonexistent.json", "--text", "1"]);
    assert_eq!(missing.status.code(), Some(2));
}

#[test]
fn maskbench_reports_counts_and_fails_on_a_regression() {
    let sample = format!("{}/tests/data/maskbench-sample", env!("CARGO_MANIFEST_DIR"));
    let expected = format!("{sample}/expected.json");
    let o = formwork(&["maskbench", &sample, "--limit", "4", "--expect", &expected]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    for line in [
        "schemas:",
        "passing:",
        "compile_error:",
        "validation_error:",
        "invalidation_error:",
        "timeout:",
        "routes:",
        "mask:",
        "compile:",
    ] {
        assert!(out.contains(line), "{line} missing in {out}");
    }
    let j = formwork(&["maskbench", &sample, "--limit", "4", "--json"]);
    let s = summary(&j);
    assert_eq!(s["counts"]["schemas"], 4);
    let routed =
        s["routes"]["operators"].as_u64().unwrap() + s["routes"]["earley"].as_u64().unwrap();
    assert_eq!(routed, 4 - s["counts"]["compile_error"].as_u64().unwrap());
    assert!(s["mask_us"]["p99"].as_f64().unwrap() >= s["mask_us"]["p50"].as_f64().unwrap());
    // An expected file that claims more than the run achieves is a regression: exit 1. A
    // first-of-the-sample file that fails to compile strictly, claimed passing:
    let strict: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&expected).unwrap()).unwrap();
    let (failing, _) = strict["files"]
        .as_object()
        .unwrap()
        .iter()
        .find(|(_, st)| *st != "passing")
        .expect("the sample has a failing file");
    let dir = std::env::temp_dir().join(format!("formwork-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(format!("{sample}/{failing}"), dir.join(failing)).unwrap();
    let claim =
        std::env::temp_dir().join(format!("formwork-cli-{}-claim.json", std::process::id()));
    std::fs::write(
        &claim,
        serde_json::json!({"files": {failing.clone(): "passing"}}).to_string(),
    )
    .unwrap();
    let r = formwork(&[
        "maskbench",
        dir.to_str().unwrap(),
        "--expect",
        claim.to_str().unwrap(),
    ]);
    assert_eq!(r.status.code(), Some(1), "{}", stdout(&r));
    assert!(stderr(&r).contains("regression"), "{}", stderr(&r));
    std::fs::remove_dir_all(&dir).unwrap();
    std::fs::remove_file(&claim).unwrap();
}

#[test]
fn check_verdict_comes_from_the_matcher_not_an_eos_bit() {
    // `<|im_end|>` is both a symbol this template names and an EOS id of Qwen3: after "hi" the
    // mask allows it, yet the text without it is incomplete.
    let templates = data("reply.fw");
    let check = |text: &str| {
        formwork(&[
            "check",
            "--templates",
            &templates,
            "--request",
            "reply",
            "--text",
            text,
            "--json",
        ])
    };
    let missing_end = check("hi");
    assert_eq!(
        missing_end.status.code(),
        Some(1),
        "{}",
        stdout(&missing_end)
    );
    let s = summary(&missing_end);
    assert_eq!(s["accepted"], false);
    assert_eq!(s["rejected_at"], serde_json::Value::Null);
    assert_eq!(s["eos_allowed"], true);
    let complete = check("hi<|im_end|>");
    assert_eq!(complete.status.code(), Some(0), "{}", stdout(&complete));
    assert_eq!(summary(&complete)["accepted"], true);
}

#[test]
fn text_and_regex_may_start_with_a_hyphen() {
    let negative = formwork(&["check", "--regex", "-?[0-9]+", "--text", "-42"]);
    assert_eq!(
        negative.status.code(),
        Some(0),
        "{}{}",
        stdout(&negative),
        stderr(&negative)
    );
    let dashes = formwork(&["check", "--regex", "--[a-z]+", "--text", "--x"]);
    assert_eq!(
        dashes.status.code(),
        Some(0),
        "{}{}",
        stdout(&dashes),
        stderr(&dashes)
    );
    let rejected = formwork(&["check", "--regex", "-[0-9]", "--text", "-x"]);
    assert_eq!(rejected.status.code(), Some(1), "{}", stderr(&rejected));
}

#[test]
fn check_warns_when_the_tokenizer_normalises_the_text() {
    // Qwen3 normalises to NFC: `a` + U+0308 (combining diaeresis) is checked as `ä`.
    let decomposed = "a\u{308}";
    let o = formwork(&["check", "--regex", "(?s:.)*", "--text", decomposed]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let warning = stderr(&o);
    assert!(warning.contains("warning: the tokenizer"), "{warning}");
    assert!(warning.contains("normalised"), "{warning}");
    assert!(warning.contains("\"ä\""), "{warning}");
    let composed = formwork(&["check", "--regex", "(?s:.)*", "--text", "ä"]);
    assert_eq!(composed.status.code(), Some(0));
    assert!(
        !stderr(&composed).contains("warning"),
        "{}",
        stderr(&composed)
    );
}

#[test]
fn a_closed_stdout_ends_the_command_quietly() {
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_formwork"))
        .arg("vocab")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run formwork");
    // The reader goes away before the first line (loading the vocabulary takes longer),
    // as `head` does after its lines.
    drop(child.stdout.take());
    let o = child.wait_with_output().expect("wait for formwork");
    assert!(!stderr(&o).contains("panicked"), "{}", stderr(&o));
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn mask_width_is_checked_and_applies_to_the_embedded_vocabulary() {
    let absurd = formwork(&["vocab", "--mask-width", "1000000000000"]);
    assert_eq!(absurd.status.code(), Some(2));
    assert!(
        stderr(&absurd).contains("mask width 1000000000000"),
        "{}",
        stderr(&absurd)
    );
    let narrow = formwork(&["vocab", "--mask-width", "1000"]);
    assert_eq!(narrow.status.code(), Some(2));
    assert!(
        stderr(&narrow).contains("mask width 1000 <"),
        "{}",
        stderr(&narrow)
    );
    let wide = formwork(&["vocab", "--mask-width", "152064"]);
    assert!(wide.status.success(), "{}", stderr(&wide));
    assert!(
        stdout(&wide).contains("mask width:    152064 (4752 u32 words)"),
        "{}",
        stdout(&wide)
    );
    let checked = formwork(&[
        "check",
        "--mask-width",
        "152064",
        "--regex",
        "[0-9]+",
        "--text",
        "42",
        "--json",
        "--dump-masks",
    ]);
    assert_eq!(checked.status.code(), Some(0), "{}", stderr(&checked));
    let absurd_check = formwork(&[
        "check",
        "--mask-width",
        "99999999999",
        "--regex",
        "a",
        "--text",
        "a",
    ]);
    assert_eq!(absurd_check.status.code(), Some(2));
}

#[test]
fn limit_flags_are_validated() {
    let all = formwork(&[
        "check",
        "--max-nesting",
        "64",
        "--max-input-bytes",
        "1000000",
        "--max-grammar-size",
        "100000",
        "--max-states",
        "10000",
        "--max-alternatives",
        "1000",
        "--compile-time-ms",
        "5000",
        "--max-mask-work",
        "10000000",
        "--max-history",
        "100",
        "--max-readings",
        "1000",
        "--regex",
        "[a-z]+",
        "--text",
        "abc",
    ]);
    assert_eq!(all.status.code(), Some(0), "{}", stderr(&all));
    let not_a_number = formwork(&[
        "check",
        "--max-nesting",
        "deep",
        "--regex",
        "a",
        "--text",
        "a",
    ]);
    assert_eq!(not_a_number.status.code(), Some(2));
    assert!(
        stderr(&not_a_number).contains("--max-nesting"),
        "{}",
        stderr(&not_a_number)
    );
    let both = formwork(&[
        "check",
        "--compile-time-ms",
        "5",
        "--no-compile-deadline",
        "--regex",
        "a",
        "--text",
        "a",
    ]);
    assert_eq!(both.status.code(), Some(2));
    let maskbench = formwork(&["maskbench", "--help"]);
    assert!(
        stdout(&maskbench).contains("--max-mask-work"),
        "{}",
        stdout(&maskbench)
    );
}

/// A file past the input limit (here a device that never ends) is a typed error read no
/// further than the limit, for a constraint and for the text alike.
#[test]
fn files_past_the_input_limit_are_refused_without_reading_them_whole() {
    for args in [
        ["--schema", "/dev/zero", "--text", "{}"],
        ["--regex", "a", "--file", "/dev/zero"],
    ] {
        let o = formwork(&[&["check", "--max-input-bytes", "4096"][..], &args].concat());
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("/dev/zero") && err.contains("input bytes"),
            "{err}"
        );
    }
}
