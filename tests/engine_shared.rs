//! The engine as a server uses it: one engine shared by threads, requests sharing cached
//! masks, the router's decisions, start-up registration.

mod common;

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use formwork::bitmask::get_bit;
use formwork::engine::{BackendKind, Constraint, ConstraintMatcher, Engine};
use formwork::vocab::Vocab;
use formwork::{CompileErrorKind, Location, Matcher, TokenId};

const TEMPLATES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/templates");

fn engine() -> Engine {
    let mut e = Engine::new(common::qwen3().clone());
    e.register_templates([TEMPLATES]).unwrap();
    e
}

#[test]
fn engine_and_matchers_can_cross_threads() {
    fn send_sync<T: Send + Sync>() {}
    fn send<T: Send>() {}
    send_sync::<Engine>();
    send_sync::<Constraint>();
    send::<ConstraintMatcher>();
}

/// Consumes `text` and fills the mask; the cache misses that fill cost.
fn misses_at(engine: &Engine, m: &mut ConstraintMatcher, text: &str, mask: &mut [u32]) -> u64 {
    let vocab = engine.vocab();
    m.consume_all(&vocab.encode(text).unwrap()).unwrap();
    let before = engine.runtime().cache_stats().misses;
    m.fill_mask(mask).unwrap();
    engine.runtime().cache_stats().misses - before
}

#[test]
fn a_second_request_hits_masks_cached_by_the_first() {
    let engine = engine();
    let vocab = engine.vocab();
    let words = vocab.mask_words();
    let (mut a_title, mut a_summary) = (vec![0u32; words], vec![0u32; words]);
    let (mut b_title, mut b_summary) = (vec![0u32; words], vec![0u32; words]);

    // Outline: different section trees and ids; the title and summary states are shared.
    let first = engine
        .compile(r#"outline(sections: [section(id: "1", children: [section(id: "1.1")])])"#)
        .unwrap();
    let mut m = first.matcher();
    let cold_title = misses_at(&engine, &mut m, "<|vision_start|>1 The", &mut a_title);
    let cold_summary = misses_at(&engine, &mut m, " plan<|vision_pad|>We", &mut a_summary);
    assert!(
        cold_title > 0 && cold_summary > 0,
        "the first request computes"
    );

    let second = engine
        .compile(r#"outline(sections: [section(id: "A"), section(id: "B")])"#)
        .unwrap();
    let hits = engine.runtime().cache_stats().hits;
    let mut m = second.matcher();
    assert_eq!(
        misses_at(&engine, &mut m, "<|vision_start|>A The", &mut b_title),
        0
    );
    assert_eq!(
        misses_at(&engine, &mut m, " plan<|vision_pad|>We", &mut b_summary),
        0
    );
    assert!(engine.runtime().cache_stats().hits >= hits + 2);
    assert_eq!(a_title, b_title);
    assert_eq!(a_summary, b_summary);
    assert!(get_bit(
        &a_title,
        vocab.special_id("<|vision_pad|>").unwrap()
    ));

    // Reference lookup: the same id set in another request is the same choice leaf.
    let ids = r#"ids: {"1", "1.1", "2", "2.1", "3"}"#;
    let mut m = engine
        .compile(&format!("reference_lookup(topics: 1..9, {ids})"))
        .unwrap()
        .matcher();
    let prefix = r#"[{"topic": [4], "reference": ["2"#;
    let cold = misses_at(&engine, &mut m, prefix, &mut a_title);
    assert!(cold > 0);
    let mut m = engine
        .compile(&format!("reference_lookup(topics: 1..20, {ids})"))
        .unwrap()
        .matcher();
    assert_eq!(misses_at(&engine, &mut m, prefix, &mut b_title), 0);
    assert_eq!(a_title, b_title);
}

/// Steps texts through a request's matcher, hashing every mask.
fn digest(constraint: &Constraint, vocab: &Vocab, texts: &[&str]) -> u64 {
    let mut h = DefaultHasher::new();
    let mut mask = vec![0u32; vocab.mask_words()];
    for text in texts {
        let mut m = constraint.matcher();
        for t in vocab.encode(text).unwrap() {
            m.fill_mask(&mut mask).unwrap();
            mask.hash(&mut h);
            m.consume(t).unwrap();
        }
        m.fill_mask(&mut mask).unwrap();
        mask.hash(&mut h);
    }
    h.finish()
}

fn workload(i: usize) -> (String, Vec<String>) {
    match i % 3 {
        0 => (
            format!(
                r#"outline(sections: [section(id: "{i}"), section(id: "{}")])"#,
                i + 1
            ),
            vec![format!(
                "<|vision_start|>{i} T{i}<|vision_pad|>S<|vision_end|>\n<|vision_start|>{} U",
                i + 1
            )],
        ),
        1 => (
            format!(
                r#"reference_lookup(topics: 1..{}, ids: {{"a{i}", "b{i}", "a{i}.1"}})"#,
                i + 2
            ),
            vec![format!(
                r#"[{{"topic": [{}], "reference": ["a{i}.1", "b{i}"]}}]"#,
                i % 2 + 1
            )],
        ),
        _ => (
            format!(
                r#"tool_call(tools: [tool(name: "t{i}", params: [param(name: "n", value: integer(range: 0..{i}))]), tool(name: "u")])"#
            ),
            vec![format!(
                "<tool_call>\n{{\"name\": \"t{i}\", \"arguments\": {{\"n\": {}}}}}\n</tool_call>",
                i / 2
            )],
        ),
    }
}

#[test]
fn many_requests_from_several_threads_give_the_same_masks() {
    const THREADS: usize = 4;
    const PER_THREAD: usize = 9;
    let vocab = common::qwen3();
    // Sequentially, on a separate engine (its own cache).
    let sequential_engine = engine();
    let expected: Vec<u64> = (0..THREADS * PER_THREAD)
        .map(|i| {
            let (req, texts) = workload(i);
            let texts: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
            digest(&sequential_engine.compile(&req).unwrap(), vocab, &texts)
        })
        .collect();
    // Concurrently, sharing one engine and its cache, each thread interleaving templates.
    let shared = Arc::new(engine());
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let shared = shared.clone();
            std::thread::spawn(move || {
                (0..PER_THREAD)
                    .map(|k| {
                        let i = k * THREADS + t;
                        let (req, texts) = workload(i);
                        let texts: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
                        let constraint = shared.compile(&req).unwrap();
                        (i, digest(&constraint, common::qwen3(), &texts))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut seen = 0;
    for h in handles {
        for (i, d) in h.join().unwrap() {
            assert_eq!(d, expected[i], "request {i} differs across threads");
            seen += 1;
        }
    }
    assert_eq!(seen, THREADS * PER_THREAD);
}

#[test]
fn the_router_sends_unknown_structures_to_an_unsupported_error() {
    let engine = engine();
    let c = engine.compile(r#"outline(sections: [])"#).unwrap();
    assert_eq!(c.backend(), BackendKind::Operators);
    // Built-ins reach the grammar router (any JSON value is recursive: Earley).
    let c = engine.compile(r#"  json_schema(schema: "{}")"#).unwrap();
    assert_eq!(c.backend(), BackendKind::Earley);
    let e = engine.compile(r#"  widget(schema: "{}")"#).unwrap_err();
    assert_eq!(e.kind(), CompileErrorKind::Unsupported);
    assert_eq!(
        e.to_string(),
        r#"<request>:1:3: no template structure `widget` (built-ins without templates: json_schema(schema: "..."), gbnf(grammar: "..."), regex(pattern: /.../))"#
    );
    let e = engine
        .compile_json_request(r#"{"widget": {}}"#)
        .unwrap_err();
    assert_eq!(e.kind(), CompileErrorKind::Unsupported);
    assert_eq!(e.location(), &Location::JsonPointer(String::new()));
    assert_eq!(
        engine.request_grammar("widget").unwrap_err().kind(),
        CompileErrorKind::Unsupported
    );
    // A built-in with the wrong arguments is invalid, at its place.
    let e = engine.compile_json_request(r#"{"gbnf": {}}"#).unwrap_err();
    assert_eq!(e.kind(), CompileErrorKind::Invalid);
    assert_eq!(e.location(), &Location::JsonPointer(String::new()));
    // A syntax error is not routed anywhere.
    assert_eq!(
        engine.compile("outline(").unwrap_err().kind(),
        CompileErrorKind::Syntax
    );
    // The same request as text and JSON compiles to the same program.
    let text = r#"reference_lookup(topics: 1..3, ids: {"1", "2"})"#;
    let json =
        r#"{"reference_lookup": {"topics": {"$range": [1, 3]}, "ids": {"$choice": ["1", "2"]}}}"#;
    assert_eq!(
        engine.compile(text).unwrap().program().unwrap().hash(),
        engine
            .compile_json_request(json)
            .unwrap()
            .program()
            .unwrap()
            .hash()
    );
    // Regexes go to the operator backend too, cached by pattern.
    let r = engine.compile_regex(r"[0-9]+").unwrap();
    assert!(Arc::ptr_eq(
        r.program().unwrap(),
        engine.compile_regex(r"[0-9]+").unwrap().program().unwrap()
    ));
    let mut m = r.matcher();
    m.consume_all(&engine.vocab().encode("2024").unwrap())
        .unwrap();
    assert!(m.is_accepting());
}

#[test]
fn registration_is_all_or_nothing_and_files_share_a_namespace() {
    let mut engine = engine();
    let before = engine.factory().structures().len();
    let e = engine
        .register_template_source(
            "extra.fw",
            "greeting(name: str) ::= \"Hi \" name <|no_such|>",
        )
        .unwrap_err();
    assert_eq!(e.kind(), CompileErrorKind::UnknownSpecialToken);
    assert_eq!(e.location().to_string(), "extra.fw:1:36");
    assert_eq!(engine.factory().structures().len(), before);
    assert!(engine.compile("outline(sections: [])").is_ok());
    // A later file may use the shipped structures.
    engine
        .register_template_source(
            "extra.fw",
            "digest(sections: list<section>) ::= \"Summary\\n\" sections",
        )
        .unwrap();
    assert_eq!(engine.factory().structures().len(), before + 1);
    let c = engine
        .compile(r#"digest(sections: [section(id: "1")])"#)
        .unwrap();
    let mut m = c.matcher();
    let text = "Summary\n<|vision_start|>1 T<|vision_pad|>S<|vision_end|>\n";
    m.consume_all(&engine.vocab().encode(text).unwrap())
        .unwrap();
    assert!(m.is_accepting());
    let e = engine
        .register_templates(["/no/such/templates"])
        .unwrap_err();
    assert!(e.to_string().contains("/no/such/templates"), "{e}");
}

/// Whatever a mask allows, `consume` accepts, on both backends and under limits from the
/// defaults down to a few units of work: seeded random walks sample an allowed token at every
/// step (and try a refused one on a fork). A limit only ever shows as a typed error of a call
/// that changed nothing (the walk then stops), or, after an allowed token was consumed, as a
/// matcher over its limit: every later mask reports it and one rollback clears it.
#[test]
fn whatever_a_mask_allows_consume_accepts_under_any_limits() {
    use formwork::bitmask::iter_ones;
    use formwork::engine::{BackendChoice, EngineConfig};
    use formwork::{Limits, MatchErrorKind};

    let vocab = common::qwen3();
    let patterns = [
        "(a{0,50}){0,200}",
        "(a|aa){0,500}",
        "[a-z]{0,300}[a-z]{0,300}",
        r#"\{"id": [0-9]{1,6}, "tags": \[("[a-z]{1,8}"(, "[a-z]{1,8}")*)?\]\}"#,
        "(ab|a)*(ba){3,5}c?",
    ];
    let limit_sets = [
        Limits::new(),
        Limits::new().readings(3),
        Limits::new().readings(16).mask_work(20_000),
        Limits::new().mask_work(2_000),
        Limits::new().readings(2).mask_work(200).history(2),
    ];
    let mut rng = common::rng::Rng::new(0x5eed_c0de);
    let mut mask = vec![0u32; vocab.mask_words()];
    for limits in &limit_sets {
        for backend in [BackendChoice::Operators, BackendChoice::Earley] {
            let config = EngineConfig::new().backend(backend).limits(limits.clone());
            let engine = Engine::with_config(vocab.clone(), config);
            for pattern in patterns {
                let label = format!("{pattern} {backend:?} {limits:?}");
                let constraint = match engine.compile_regex(pattern) {
                    Ok(c) => c,
                    Err(e) => {
                        assert_eq!(e.kind(), CompileErrorKind::Limit, "{label}: {e}");
                        continue;
                    }
                };
                let mut m = constraint.matcher();
                for step in 0..60 {
                    if let Err(e) = m.fill_mask(&mut mask) {
                        assert!(matches!(e.kind(), MatchErrorKind::Limit(_)), "{label}: {e}");
                        break;
                    }
                    let allowed: Vec<TokenId> = iter_ones(&mask).collect();
                    assert!(!allowed.is_empty(), "{label} step {step}: empty mask");
                    // Prefer long tokens: they are the ones that cross limits.
                    let t = match rng.below(2) {
                        0 => allowed[rng.below(allowed.len())],
                        _ => *allowed
                            .iter()
                            .max_by_key(|&&t| (vocab.token_bytes(t).len(), t))
                            .unwrap(),
                    };
                    let refused = (0..64)
                        .map(|_| rng.below(vocab.len()) as TokenId)
                        .find(|&r| !get_bit(&mask, r));
                    if let Some(r) = refused {
                        let mut fork = m.clone();
                        assert!(
                            fork.consume(r).is_err(),
                            "{label} step {step}: refused token accepted"
                        );
                        assert_eq!(fork.num_consumed(), m.num_consumed());
                    }
                    m.consume(t).unwrap_or_else(|e| {
                        panic!("{label} step {step}: token {t} was allowed, then {e}")
                    });
                    if m.is_terminated() {
                        break;
                    }
                }
            }
        }
    }
}

/// EOS after EOS: both backends allow only EOS and accept it again, counting each, so that
/// rolling back one EOS leaves the sequence still finished.
#[test]
fn eos_after_eos_is_the_same_on_both_backends() {
    use formwork::bitmask::iter_ones;
    use formwork::engine::{BackendChoice, EngineConfig};

    let vocab = common::qwen3();
    let eos = vocab.eos_tokens()[0];
    for backend in [BackendChoice::Operators, BackendChoice::Earley] {
        let config = EngineConfig::new().backend(backend);
        let engine = Engine::with_config(vocab.clone(), config);
        let mut m = engine.compile_regex("ab").unwrap().matcher();
        let ab = vocab.encode("ab").unwrap();
        m.consume_all(&ab).unwrap();
        m.consume(eos).unwrap();
        let mut mask = vec![0u32; vocab.mask_words()];
        m.fill_mask(&mut mask).unwrap();
        let mut eos_ids = vocab.eos_tokens().to_vec();
        eos_ids.sort_unstable();
        assert_eq!(iter_ones(&mask).collect::<Vec<_>>(), eos_ids, "{backend:?}");
        m.consume(eos).unwrap();
        assert_eq!(m.num_consumed(), ab.len() + 2, "{backend:?}");
        m.rollback(1).unwrap();
        assert!(m.is_terminated(), "{backend:?}");
        m.rollback(1).unwrap();
        assert!(!m.is_terminated() && m.is_accepting(), "{backend:?}");
        let a = vocab.encode("a").unwrap()[0];
        m.consume(eos).unwrap();
        assert!(
            matches!(
                m.consume(a).unwrap_err().kind(),
                formwork::MatchErrorKind::Terminated
            ),
            "{backend:?}"
        );
    }
}
