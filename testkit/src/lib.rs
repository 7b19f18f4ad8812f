//! What formwork's fuzz targets run, shared by the libFuzzer binaries in `fuzz/` and the
//! corpus replay test (`tests/fuzz_corpus.rs`), so a crash found by fuzzing is a failing
//! `cargo test` once its input is committed under `fuzz/corpus/<target>/` or
//! `fuzz/regressions/<target>/`.
//!
//! Each target takes the fuzzer's bytes and returns normally on any typed error: it panics
//! only when formwork broke a rule of its boundary (a panic inside formwork, a mask that
//! allows a token `consume` refuses, a rollback or fork that does not restore the masks, a
//! verdict an independent oracle disagrees with).

pub mod drive;
pub mod gen;
pub mod targets;
pub mod vocab;

pub use targets::{Target, TARGETS};

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
