//! The template path on the Qwen3 vocabulary: start-up (`register_templates`), request text →
//! ready matcher, and per-step masks with a warm cache, for outline generation (50 sections)
//! and reference lookup (20 topics × 100 section ids).
//!
//! `cargo bench --bench templates`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use formwork::engine::Engine;
use formwork::request::Request;
use formwork::vocab::Vocab;
use formwork::Matcher;

const TEMPLATES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/templates");

/// 10 chapters of 4 sections each: 50 sections in all.
fn outline_request() -> String {
    let chapters: Vec<String> = (1..=10)
        .map(|c| {
            let children: Vec<String> = (1..=4)
                .map(|s| format!(r#"section(id: "{c}.{s}")"#))
                .collect();
            format!(r#"section(id: "{c}", children: [{}])"#, children.join(", "))
        })
        .collect();
    format!("outline(sections: [{}])", chapters.join(", "))
}

/// 20 topics, 100 section ids (1 .. 20 with sub-sections .1 .. .4).
fn reference_request() -> String {
    let ids: Vec<String> = (1..=20)
        .flat_map(|s| {
            (0..5).map(move |k| {
                if k == 0 {
                    format!("\"{s}\"")
                } else {
                    format!("\"{s}.{k}\"")
                }
            })
        })
        .collect();
    assert_eq!(ids.len(), 100);
    format!(
        "reference_lookup(topics: 1..20, ids: {{{}}})",
        ids.join(", ")
    )
}

fn tool_request() -> &'static str {
    r#"tool_call(tools: [
        tool(name: "get_weather", params: [param(name: "city", value: string),
            param(name: "unit", value: enum(values: {"celsius", "fahrenheit"}))]),
        tool(name: "search", params: [param(name: "query", value: string),
            param(name: "limit", value: integer(range: 1..50))])])"#
}

fn benches(c: &mut Criterion) {
    let vocab = Vocab::embedded_qwen3().unwrap();
    let mut engine = Engine::new(vocab.clone());
    engine.register_templates([TEMPLATES]).unwrap();

    let mut group = c.benchmark_group("startup");
    group.sample_size(20);
    group.bench_function("register_templates", |b| {
        b.iter(|| {
            let mut e = Engine::new(vocab.clone());
            e.register_templates([TEMPLATES]).unwrap();
            e
        })
    });
    group.finish();

    let outline = outline_request();
    let reference = reference_request();
    let requests = [
        ("outline_50", outline.as_str()),
        ("reference_20x100", reference.as_str()),
        ("tool_call_2", tool_request()),
    ];
    let mut group = c.benchmark_group("instantiate");
    for (name, text) in requests {
        group.bench_function(format!("{name}/text_to_matcher"), |b| {
            b.iter(|| engine.compile(black_box(text)).unwrap().matcher())
        });
        group.bench_function(format!("{name}/parse"), |b| {
            b.iter(|| Request::parse(black_box(text)).unwrap().structure().len())
        });
    }
    group.finish();

    let mut mask = vec![0u32; vocab.mask_words()];
    let states = [
        (
            "outline_50/title",
            outline.as_str(),
            "<|vision_start|>1 The plan",
        ),
        (
            "outline_50/summary",
            outline.as_str(),
            "<|vision_start|>1 Plan<|vision_pad|>We",
        ),
        (
            "outline_50/next_id",
            outline.as_str(),
            "<|vision_start|>1 Plan<|vision_pad|>We<|vision_end|>\n",
        ),
        (
            "reference_20x100/id",
            reference.as_str(),
            r#"[{"topic": [12], "reference": ["1"#,
        ),
        (
            "reference_20x100/topic",
            reference.as_str(),
            r#"[{"topic": [1"#,
        ),
    ];
    let mut group = c.benchmark_group("mask_warm");
    for (name, request, prefix) in states {
        let mut m = engine.compile(request).unwrap().matcher();
        m.consume_all(&vocab.encode(prefix).unwrap()).unwrap();
        m.fill_mask(&mut mask).unwrap();
        group.bench_function(name, |b| {
            b.iter(|| m.fill_mask(black_box(&mut mask)).unwrap())
        });
    }
    group.finish();
}

criterion_group!(templates, benches);
criterion_main!(templates);
