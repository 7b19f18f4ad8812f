//! The Earley engine side by side with llguidance 1.9 on the Qwen3 tokenizer: per-mask time
//! (warm and cold cache), consume time and compile time, on generic JSON and on a
//! schema-shaped grammar. After criterion's runs, prints per-mask p50/p99 over every step of
//! the texts for both engines.
//!
//! Run: `cargo bench --bench cfg`.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use formwork::cfg::{CfgCompiler, CfgConfig, CfgGrammar};
use formwork::front::gbnf::gbnf_to_ir;
use formwork::vocab::Vocab;
use formwork::{Matcher, TokenId};
use formwork_testkit::{grammars, llg};
use llguidance::api::TopLevelGrammar;
use llguidance::toktrie::TokEnv;
use llguidance::ParserFactory;

const JSON_TEXT: &str = r#"{"id": 4127, "name": "Ada Lovelace", "email": "ada@example.org", "tags": ["math", "poetry", "engines"], "address": {"street": "12 St James's Square", "city": "London", "zip": "SW1Y 4JH"}, "scores": [98.5, 87.25, -3e2], "active": true, "notes": "First published algorithm (1843); \"Note G\" computes Bernoulli numbers.", "manager": null}"#;

const PERSON_GBNF: &str = r#"
root ::= "{" ws "\"name\"" ws ":" ws name ws "," ws "\"age\"" ws ":" ws age ws "," ws "\"email\"" ws ":" ws email ws "," ws "\"tags\"" ws ":" ws "[" ws ( tag ( ws "," ws tag )* ws )? "]" ws "}"
name  ::= "\"" [A-Za-z .'-]{1,100} "\""
age   ::= [0-9]{1,3}
email ::= "\"" [a-z0-9._]{1,64} "@" [a-z0-9.-]{1,255} "\""
tag   ::= "\"" [a-z]{0,20} "\""
ws    ::= [ \t\n\r]*
"#;

const PERSON_LARK: &str = r#"
start: "{" "\"name\"" ":" NAME "," "\"age\"" ":" AGE "," "\"email\"" ":" EMAIL "," "\"tags\"" ":" "[" [TAG ("," TAG)*] "]" "}"
NAME: /"[A-Za-z .'-]{1,100}"/
AGE: /[0-9]{1,3}/
EMAIL: /"[a-z0-9._]{1,64}@[a-z0-9.-]{1,255}"/
TAG: /"[a-z]{0,20}"/
%ignore /[ \t\n\r]+/
"#;

const PERSON_TEXT: &str = r#"{"name": "Grace Brewster Murray Hopper", "age": 85, "email": "grace.hopper@navy.example.mil", "tags": ["cobol", "compilers", "nanoseconds"]}"#;

struct Workload {
    name: &'static str,
    gbnf: String,
    lark: &'static str,
    text: &'static str,
}

fn workloads() -> [Workload; 2] {
    [
        Workload {
            name: "json",
            gbnf: grammars::json_gbnf_as_lark_reads_it(),
            lark: grammars::JSON_LARK,
            text: JSON_TEXT,
        },
        Workload {
            name: "schema",
            gbnf: PERSON_GBNF.to_string(),
            lark: PERSON_LARK,
            text: PERSON_TEXT,
        },
    ]
}

fn llg_env(vocab: &Vocab) -> TokEnv {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("data/tokenizers/qwen3/tokenizer.json.gz");
    llg::tok_env(&path, vocab.mask_width())
}

fn llg_matcher(factory: &ParserFactory, lark: &str) -> llguidance::Matcher {
    llguidance::Matcher::new(factory.create_parser(TopLevelGrammar::from_lark(lark.to_string())))
}

/// Times `mask` at every step of `tokens`, `passes` times over (warm after the first).
fn per_step<S>(
    tokens: &[TokenId],
    passes: usize,
    state: &mut S,
    fresh: impl Fn(&mut S),
    mut mask: impl FnMut(&mut S),
    consume: impl Fn(&mut S, TokenId),
) -> Vec<Duration> {
    let mut out = Vec::new();
    for _ in 0..passes {
        fresh(state);
        for &t in tokens {
            let start = Instant::now();
            mask(state);
            out.push(start.elapsed());
            consume(state, t);
        }
    }
    out
}

fn summary(label: &str, mut times: Vec<Duration>) {
    times.sort();
    let q = |p: f64| times[((times.len() - 1) as f64 * p) as usize];
    println!(
        "{label:<34} p50 {:>9.1?} p99 {:>9.1?} max {:>9.1?} ({} masks)",
        q(0.5),
        q(0.99),
        times[times.len() - 1],
        times.len()
    );
}

fn benches(c: &mut Criterion) {
    let vocab = Vocab::embedded_qwen3().unwrap();
    let env = llg_env(&vocab);
    let factory = ParserFactory::new_simple(&env).unwrap();
    let mut words = vec![0u32; vocab.mask_words()];
    for w in &workloads() {
        let tokens = vocab.encode(w.text).unwrap();
        let ir = gbnf_to_ir(&w.gbnf, w.name).unwrap();
        let compiler = CfgCompiler::new(&vocab, CfgConfig::new());
        let grammar: std::sync::Arc<CfgGrammar> = compiler.compile(&ir).unwrap();

        let mut group = c.benchmark_group(format!("cfg/{}", w.name));
        group.bench_function("compile/formwork", |b| {
            b.iter(|| {
                compiler
                    .compile(&gbnf_to_ir(black_box(&w.gbnf), w.name).unwrap())
                    .unwrap()
            })
        });
        group.bench_function("compile/llguidance", |b| {
            b.iter(|| llg_matcher(&factory, black_box(w.lark)))
        });

        // Warm: cycle through the text's steps; only fill_mask is timed.
        per_step(
            &tokens,
            1,
            &mut grammar.matcher(),
            |_| {},
            |m| m.fill_mask(&mut words).unwrap(),
            |m, t| m.consume(t).unwrap(),
        );
        group.bench_function("mask_warm/formwork", |b| {
            let mut m = grammar.matcher();
            let mut i = 0;
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    m.fill_mask(&mut words).unwrap();
                    total += start.elapsed();
                    m.consume(tokens[i]).unwrap();
                    i += 1;
                    if i == tokens.len() {
                        m.reset();
                        i = 0;
                    }
                }
                total
            })
        });
        group.bench_function("mask/llguidance", |b| {
            let mut m = llg_matcher(&factory, w.lark);
            let mut i = 0;
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    black_box(m.compute_mask().unwrap());
                    total += start.elapsed();
                    m.consume_token(tokens[i]).unwrap();
                    i += 1;
                    if i == tokens.len() {
                        m = llg_matcher(&factory, w.lark);
                        i = 0;
                    }
                }
                total
            })
        });
        group.sample_size(10);
        group.bench_function("text_cold/formwork", |b| {
            b.iter(|| {
                let compiler = CfgCompiler::new(&vocab, CfgConfig::new());
                let g = compiler.compile(&ir).unwrap();
                let mut m = g.matcher();
                for &t in &tokens {
                    m.fill_mask(&mut words).unwrap();
                    m.consume(t).unwrap();
                }
            })
        });
        group.sample_size(100);
        group.bench_function("consume/formwork", |b| {
            let mut m = grammar.matcher();
            let mut i = 0;
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let start = Instant::now();
                    m.consume(tokens[i]).unwrap();
                    total += start.elapsed();
                    i += 1;
                    if i == tokens.len() {
                        m.reset();
                        i = 0;
                    }
                }
                total
            })
        });
        group.finish();

        // Per-mask distributions over every step.
        let cold_compiler = CfgCompiler::new(&vocab, CfgConfig::new());
        let cold_grammar = cold_compiler.compile(&ir).unwrap();
        let cold = per_step(
            &tokens,
            1,
            &mut cold_grammar.matcher(),
            |_| {},
            |m| m.fill_mask(&mut words).unwrap(),
            |m, t| m.consume(t).unwrap(),
        );
        let warm = per_step(
            &tokens,
            20,
            &mut grammar.matcher(),
            |m| m.reset(),
            |m| m.fill_mask(&mut words).unwrap(),
            |m, t| m.consume(t).unwrap(),
        );
        let llg = per_step(
            &tokens,
            20,
            &mut llg_matcher(&factory, w.lark),
            |l| *l = llg_matcher(&factory, w.lark),
            |l| {
                black_box(l.compute_mask().unwrap());
            },
            |l, t| l.consume_token(t).unwrap(),
        );
        summary(&format!("{} formwork, cold cache", w.name), cold);
        summary(&format!("{} formwork, warm cache", w.name), warm);
        summary(&format!("{} llguidance", w.name), llg);
    }
}

criterion_group!(cfg, benches);
criterion_main!(cfg);
