//! Operator backend on the Qwen3 vocabulary: regex compile, per-step mask (cold and warm
//! cache), consume.
//!
//! `cargo bench --bench ops`

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use formwork::ir::GrammarBuilder;
use formwork::ops::{lower, LowerConfig, OpsMatcher, Program, RegexCompiler, Runtime};
use formwork::vocab::Vocab;
use formwork::Matcher;

const PATTERNS: &[(&str, &str, &str)] = &[
    (
        "email",
        r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,4}",
        "john.doe@exa",
    ),
    (
        "date_time",
        r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z",
        "2026-11-2",
    ),
    (
        "json_object",
        r#"\{"name": "[^"\\]{0,40}", "age": [0-9]{1,3}, "tags": \["[a-z]+"(, "[a-z]+")*\]\}"#,
        r#"{"name": "Ada Love"#,
    ),
];

/// Free text until `<|im_end|>` after a chat header: the most permissive operator state.
fn chat_program(vocab: &Vocab) -> Arc<Program> {
    let mut g = GrammarBuilder::new();
    let open = g.special("<|im_start|>");
    let role = g.text("assistant\n");
    let ch = formwork::front::regex::regex_to_ir(r"(?s:.)", &mut g).unwrap();
    let body = g.repeat(ch, 0, None);
    let close = g.special("<|im_end|>");
    let root = g.seq([open, role, body, close]);
    let start = g.rule("start");
    g.define(start, root).unwrap();
    Arc::new(lower(&g.finish(start).unwrap(), root, vocab, &LowerConfig::new()).unwrap())
}

fn cases(vocab: &Vocab) -> Vec<(String, Arc<Program>, String)> {
    let mut out: Vec<(String, Arc<Program>, String)> = PATTERNS
        .iter()
        .map(|(name, re, prefix)| {
            (
                name.to_string(),
                RegexCompiler::new().compile(re).unwrap(),
                prefix.to_string(),
            )
        })
        .collect();
    out.push((
        "chat_text".into(),
        chat_program(vocab),
        "<|im_start|>assistant\nThe answer is".into(),
    ));
    out
}

fn matcher_at(
    runtime: &Arc<Runtime>,
    program: &Arc<Program>,
    vocab: &Vocab,
    prefix: &str,
) -> OpsMatcher {
    let mut m = OpsMatcher::new(runtime.clone(), program.clone());
    m.consume_all(&vocab.encode(prefix).unwrap()).unwrap();
    m
}

fn benches(c: &mut Criterion) {
    let vocab = Vocab::embedded_qwen3().unwrap();
    let mut mask = vec![0u32; vocab.mask_words()];

    let mut group = c.benchmark_group("regex_compile");
    for (name, re, _) in PATTERNS {
        group.bench_function(*name, |b| {
            b.iter(|| RegexCompiler::new().compile(black_box(re)).unwrap())
        });
    }
    group.finish();

    let mut group = c.benchmark_group("mask_warm");
    for (name, program, prefix) in cases(&vocab) {
        let runtime = Runtime::new(vocab.clone(), 512 << 20);
        let mut m = matcher_at(&runtime, &program, &vocab, &prefix);
        m.fill_mask(&mut mask).unwrap();
        group.bench_function(name, |b| {
            b.iter(|| m.fill_mask(black_box(&mut mask)).unwrap())
        });
    }
    group.finish();

    let mut group = c.benchmark_group("mask_cold");
    group.sample_size(10);
    for (name, program, prefix) in cases(&vocab) {
        group.bench_function(name, |b| {
            b.iter_batched_ref(
                || {
                    matcher_at(
                        &Runtime::new(vocab.clone(), 512 << 20),
                        &program,
                        &vocab,
                        &prefix,
                    )
                },
                |m| m.fill_mask(&mut mask).unwrap(),
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();

    // A whole output consumed from the start, reported per token (criterion's throughput).
    let mut group = c.benchmark_group("consume");
    for (name, program, prefix) in cases(&vocab) {
        let runtime = Runtime::new(vocab.clone(), 512 << 20);
        let tokens = vocab.encode(&prefix).unwrap();
        let fresh = OpsMatcher::new(runtime, program);
        group.throughput(criterion::Throughput::Elements(tokens.len() as u64));
        group.bench_function(name, |b| {
            b.iter_batched_ref(
                || fresh.clone(),
                |m| m.consume_all(black_box(&tokens)).unwrap(),
                BatchSize::SmallInput,
            )
        });
    }
    group.finish();
}

criterion_group!(ops, benches);
criterion_main!(ops);
