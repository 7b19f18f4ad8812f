//! Replays every committed fuzz input (`fuzz/corpus/<target>/`: seeds and what the fuzzer
//! kept; `fuzz/regressions/<target>/`: minimized reproducers of fixed crashes) through the
//! same target code the libFuzzer binaries run, so a crash once found stays fixed.

use std::path::Path;

use formwork_testkit::stack::SMALL_STACK;
use formwork_testkit::{Target, TARGETS};

fn inputs(target: &Target) -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz");
    let mut files = Vec::new();
    for dir in ["corpus", "regressions"] {
        let Ok(entries) = std::fs::read_dir(root.join(dir).join(target.name)) else {
            continue;
        };
        files.extend(
            entries
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.is_file()),
        );
    }
    files.sort();
    files
}

/// Runs every committed input of `name`; fails listing each input that broke a rule (all of
/// them, not only the first, so one known bug does not hide another).
fn replay(name: &str) {
    let target = TARGETS
        .iter()
        .find(|t| t.name == name)
        .expect("a target of that name");
    let files = inputs(target);
    assert!(!files.is_empty(), "no committed inputs for {name}");
    let mut failed = Vec::new();
    for file in &files {
        let data = std::fs::read(file).expect("read a corpus file");
        let run = target.run;
        // Each input on a worker of the size a server gives (the targets' own rule).
        let outcome = std::thread::Builder::new()
            .stack_size(SMALL_STACK)
            .spawn(move || run(&data))
            .expect("spawn")
            .join();
        if let Err(panic) = outcome {
            let message = panic
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| panic.downcast_ref::<&str>().copied())
                .unwrap_or("a panic");
            failed.push(format!("{}: {message}", file.display()));
        }
    }
    println!("{name}: {} inputs, {} failed", files.len(), failed.len());
    assert!(
        failed.is_empty(),
        "{name}: {} of {} inputs failed:\n{}",
        failed.len(),
        files.len(),
        failed.join("\n")
    );
}

#[test]
fn regex_corpus() {
    replay("regex");
}

#[test]
fn json_schema_corpus() {
    replay("json_schema");
}

#[test]
fn gbnf_corpus() {
    replay("gbnf");
}

#[test]
fn tags_corpus() {
    replay("tags");
}

#[test]
fn templates_corpus() {
    replay("templates");
}

#[test]
fn tokenizer_corpus() {
    replay("tokenizer");
}

#[test]
fn matcher_corpus() {
    replay("matcher");
}

#[test]
fn every_target_is_replayed() {
    let names: Vec<&str> = TARGETS.iter().map(|t| t.name).collect();
    let this = include_str!("fuzz_corpus.rs");
    for name in names {
        assert!(
            this.contains(&format!("replay(\"{name}\")")),
            "{name} has no replay test"
        );
    }
}

#[test]
fn limits_corpus() {
    replay("limits");
}
