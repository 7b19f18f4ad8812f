//! What formwork's tests, benches, examples and fuzz targets share: one crate instead of files
//! included into each other with `#[path]`.
//!
//! - The fuzz targets ([`targets`], [`drive`], [`gen`], the synthetic [`vocab`]), shared by the
//!   libFuzzer binaries in `fuzz/` and the corpus replay test (`tests/fuzz_corpus.rs`), so a
//!   crash found by fuzzing is a failing `cargo test` once its input is committed under
//!   `fuzz/corpus/<target>/` or `fuzz/regressions/<target>/`. Each target takes the fuzzer's
//!   bytes and returns normally on any typed error: it panics only when formwork broke a rule
//!   of its boundary (a panic inside formwork, a mask that allows a token `consume` refuses, a
//!   rollback or fork that does not restore the masks, a verdict an independent oracle
//!   disagrees with).
//! - The test support: the shipped [`tokenizers`], one seeded [`rng`], the reference
//!   recognizer as the one [`oracle`] (membership and mask comparison), random [`walk`]s, the
//!   oracle tests' [`grammars`], a small-[`stack`] runner, a [`mask_only`] matcher.
//! - The workloads: the peers bench's cases ([`workloads`]); with feature `decode`, the decode
//!   loop and mixed batch of `examples/decode` (`decode`, `mixed`); with feature `peers`,
//!   llguidance beside formwork (`llg`); with feature `outlines`, outlines-core for the peers
//!   bench.

pub mod agree;
pub mod drive;
pub mod gen;
pub mod grammars;
pub mod json_schema;
pub mod mask_only;
pub mod oracle;
pub mod rng;
pub mod stack;
pub mod targets;
pub mod tokenizers;
pub mod vocab;
pub mod walk;
pub mod workloads;

#[cfg(feature = "decode")]
pub mod decode;
#[cfg(feature = "peers")]
pub mod llg;
#[cfg(feature = "decode")]
pub mod mixed;
/// outlines-core 0.2, for the peers bench (feature `outlines`).
#[cfg(feature = "outlines")]
pub use outlines_core;

use std::path::PathBuf;
use std::sync::OnceLock;

use formwork::engine::Engine;

pub use targets::{Target, TARGETS};

/// A path inside the formwork repository (`rel` from its root), where the shipped data,
/// templates and tokenizers are.
pub fn repo_path(rel: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join(rel)
}

/// An engine on Qwen3 with the shipped templates registered, built once per process.
pub fn template_engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| {
        let mut e = Engine::new(tokenizers::qwen3().clone());
        e.register_templates([repo_path("templates")])
            .expect("the shipped templates compile");
        e
    })
}

/// The JSON value of `text`, which a test wrote as valid JSON. The JSON-schema tests write
/// their schemas and instances as JSON text rather than with `serde_json::json!`: each `json!`
/// expands to code the test profile optimises at `opt-level = 3`, and their 386 literals took
/// about a sixth of the suite binary's build (111 CPU-seconds with them, 92 without).
#[track_caller]
pub fn parse_json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// The resident set size of this process in bytes (`VmRSS` of `/proc/self/status`; 0 where
/// there is none), for the memory tests and measurements.
pub fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}
