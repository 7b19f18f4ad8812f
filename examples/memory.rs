//! Memory under load, measured (the README's memory figures): resident set size read from
//! `/proc/self/status` while
//!
//! 1. one engine compiles 10,000 distinct JSON schemas and walks the first masks of each,
//!    against the configured cache budget;
//! 2. one matcher is driven 100,000 steps on free text, on each backend;
//! 3. several threads run many matchers from one shared engine.
//!
//! `cargo run --release --example memory [-- --schemas N --steps N --threads N]`.
//! It measures; the tests check the mechanisms (caches bounded in bytes, history capped).

use std::sync::Arc;
use std::thread;
use std::time::Instant;

use formwork::cfg::CfgConfig;
use formwork::engine::BackendChoice;
use formwork::{Engine, EngineConfig, JsonSchemaOptions, Matcher, Vocab};
use serde_json::json;

const CACHE_BUDGET: usize = 64 << 20;

fn rss_mib() -> f64 {
    formwork_testkit::rss_bytes() as f64 / (1 << 20) as f64
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A schema of its own for each `i`: property names, bounds, patterns and enums all vary,
/// so nothing but the shared JSON pieces hits the cache.
fn schema(i: usize) -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            format!("key_{i}"): {"type": "string", "maxLength": 5 + i % 40},
            "n": {"type": "integer", "minimum": i, "maximum": i + 1000},
            format!("tag{}", i % 97): {"enum": [format!("a{i}"), format!("b{i}"), "c"]},
            "code": {"type": "string", "pattern": format!("^[A-Z]{{{}}}-[0-9]{{2,{}}}$", 1 + i % 5, 2 + i % 7)},
        },
        "required": [format!("key_{i}"), "n"],
        "additionalProperties": i % 3 == 0,
    })
}

fn walk(m: &mut impl Matcher, tokens: &[u32], mask: &mut [u32]) -> usize {
    let mut steps = 0;
    for &t in tokens {
        if m.fill_mask(mask).is_err() || m.consume(t).is_err() {
            break;
        }
        steps += 1;
    }
    steps
}

fn many_schemas(vocab: &Vocab, n: usize) {
    // Each backend has its own cross-request cache; together they get the budget.
    let config = EngineConfig::new()
        .cache_bytes(CACHE_BUDGET / 2)
        .cfg(CfgConfig::new().cache_bytes(CACHE_BUDGET / 2));
    let engine = Engine::with_config(vocab.clone(), config);
    let mut mask = vec![0u32; vocab.mask_words()];
    let start_rss = rss_mib();
    let started = Instant::now();
    println!(
        "## {n} distinct schemas, one engine, cache budget {} MiB (half per backend)",
        CACHE_BUDGET >> 20
    );
    println!("| schemas | RSS MiB | growth MiB | operator cache MiB | Earley cache MiB | s |");
    println!("| ---: | ---: | ---: | ---: | ---: | ---: |");
    for i in 0..n {
        let c = engine
            .compile_json_schema(&schema(i), &JsonSchemaOptions::new())
            .expect("a generated schema compiles");
        let text = format!("{{\"key_{i}\":\"abc\",\"n\":{},", i + 5);
        let tokens = vocab.encode(&text).expect("tokenize");
        walk(&mut c.matcher(), &tokens, &mut mask);
        if (i + 1) % (n / 10).max(1) == 0 {
            let stats = engine.cache_stats();
            let rss = rss_mib();
            println!(
                "| {} | {rss:.0} | {:.0} | {:.1} | {:.1} | {:.1} |",
                i + 1,
                rss - start_rss,
                stats.operators.bytes as f64 / (1 << 20) as f64,
                stats.earley.bytes as f64 / (1 << 20) as f64,
                started.elapsed().as_secs_f64()
            );
        }
    }
}

fn long_matcher(vocab: &Vocab, steps: usize) {
    let paragraph = "The quick brown fox jumps over the lazy dog; 42 sheep, ä ö ü, 你好. ";
    let tokens = vocab.encode(&paragraph.repeat(64)).expect("tokenize");
    println!("\n## one matcher, {steps} steps of free text");
    println!("| backend | steps | RSS MiB | growth MiB | s |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for backend in [BackendChoice::Operators, BackendChoice::Earley] {
        let engine = Engine::with_config(vocab.clone(), EngineConfig::new().backend(backend));
        let c = engine.compile_regex("(?s:.)*").expect("free text");
        let mut m = c.matcher();
        let mut mask = vec![0u32; vocab.mask_words()];
        let start_rss = rss_mib();
        let started = Instant::now();
        let mut done = 0;
        while done < steps {
            let n = walk(&mut m, &tokens[..tokens.len().min(steps - done)], &mut mask);
            assert!(n > 0, "free text refused a token");
            done += n;
            if done % (steps / 5).max(1) < n {
                let rss = rss_mib();
                println!(
                    "| {backend:?} | {done} | {rss:.0} | {:.1} | {:.1} |",
                    rss - start_rss,
                    started.elapsed().as_secs_f64()
                );
            }
        }
    }
}

fn threads(vocab: &Vocab, threads: usize) {
    let engine = Arc::new(Engine::new(vocab.clone()));
    let per_thread = 200;
    let start_rss = rss_mib();
    let started = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let engine = engine.clone();
            let vocab = vocab.clone();
            thread::spawn(move || {
                let mut mask = vec![0u32; vocab.mask_words()];
                let mut steps = 0;
                for i in 0..per_thread {
                    let c = engine
                        .compile_json_schema(&schema(i % 50), &JsonSchemaOptions::new())
                        .expect("compile");
                    let text = format!("{{\"key_{}\":\"t{t}\",\"n\":{},", i % 50, i % 50 + 1);
                    let tokens = vocab.encode(&text).expect("tokenize");
                    steps += walk(&mut c.matcher(), &tokens, &mut mask);
                }
                steps
            })
        })
        .collect();
    let steps: usize = workers
        .into_iter()
        .map(|w| w.join().expect("a worker"))
        .sum();
    println!(
        "\n## {threads} threads x {per_thread} matchers from one engine: {steps} steps, RSS {:.0} MiB (+{:.0}), {:.1} s",
        rss_mib(),
        rss_mib() - start_rss,
        started.elapsed().as_secs_f64()
    );
}

fn main() {
    let before = rss_mib();
    let vocab = Vocab::embedded_qwen3().expect("the embedded tokenizer");
    println!(
        "RSS: {before:.0} MiB at start, {:.0} MiB with the Qwen3 vocabulary\n",
        rss_mib()
    );
    many_schemas(&vocab, arg("--schemas", 10_000));
    long_matcher(&vocab, arg("--steps", 100_000));
    threads(&vocab, arg("--threads", 4));
}
