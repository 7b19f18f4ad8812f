//! Every integration test, in one binary: one module per file of `tests/` (a file's tests are
//! `FILE::name`, so `cargo test --test suite cfg_oracle::` runs those of `tests/cfg_oracle.rs`).
//! Each file its own binary linked the whole crate, `tokenizers` and the peers once per file:
//! most of the suite's build time. `autotests = false` (Cargo.toml) keeps cargo from building
//! the files as binaries of their own too, so a new file must be declared here;
//! `every_file_is_a_module` fails until it is.

mod bench_workloads;
mod cfg_gbnf;
mod cfg_lazy;
mod cfg_limits;
mod cfg_llguidance;
mod cfg_matcher;
mod cfg_oracle;
mod cli;
mod decode;
mod engine_shared;
mod fuzz_corpus;
mod gpu_apply;
mod gpu_cuda;
mod gpu_fill;
mod hostile;
mod json_schema;
mod json_schema_any_order;
mod json_schema_any_order_break;
mod json_schema_determinism;
mod json_schema_distinct;
mod json_schema_distinct_listed;
mod json_schema_distinct_listed_break;
mod json_schema_keywords;
mod json_schema_lengths;
mod json_schema_lengths_break;
mod limit_sweeps;
mod matcher_text;
mod ops_behaviour;
mod ops_choice;
mod ops_exact;
mod ops_limits;
mod ops_llguidance;
mod request_parse;
mod route;
mod tags;
mod template_outline;
mod template_parse;
mod template_reference;
mod template_tool_call;
mod template_warm;
mod vocab;

/// Every `.rs` file beside this one is declared above: with `autotests = false`, a file that is
/// not would silently never run.
#[test]
fn every_file_is_a_module() {
    let this = include_str!("suite.rs");
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let Some(name) = path.file_stem().and_then(|s| s.to_str()) else {
            continue;
        };
        if path.extension().is_some_and(|e| e == "rs") && name != "suite" {
            assert!(
                this.contains(&format!("\nmod {name};\n")),
                "tests/{name}.rs is not a module of tests/suite.rs"
            );
        }
    }
}
