//! The Earley backend on hostile input: deep grammars compile and run on a 256 KiB stack,
//! ambiguous counted repeats keep small rows and bounded mask work (with exact masks), and a
//! long sequence under a small history keeps a bounded chart.

use formwork::cfg::{CfgCompiler, CfgConfig};
use formwork::ir::{Grammar, GrammarBuilder};
use std::time::Duration;

use formwork::{LimitKind, Limits, Location, MatchErrorKind, Matcher};
use formwork_testkit::grammars::{ir, rule_chain};
use formwork_testkit::stack::on_small_stack;
use formwork_testkit::tokenizers;

fn compiler(limits: Limits) -> CfgCompiler {
    CfgCompiler::new(tokenizers::qwen3(), CfgConfig::new()).with_limits(limits)
}

/// A builder that lets IR nest `depth` levels deep (it allows 8 per level of
/// [`Limits::nesting`]), so that the depth reaches the compiler.
fn deep_builder(depth: usize) -> GrammarBuilder {
    GrammarBuilder::with_limits(&Limits::new().nesting(depth.div_ceil(8)))
}

/// `n` optional repeats nested in one another, their bounds alternating `{0,1}` and `{0,2}`.
fn nested_repeats(n: usize) -> Grammar {
    let mut g = deep_builder(n + 1);
    let mut e = g.text("a");
    for i in 0..n {
        e = g.repeat(e, 0, Some(1 + (i % 2) as u32));
    }
    let root = g.rule("root");
    g.define(root, e).unwrap();
    g.finish(root).unwrap()
}

/// `((ab)?b)?...`, `n` levels: `a` followed by `n` times `b`, or up to `n - 1` times `b`.
fn nested_suffixes(n: usize) -> Grammar {
    let mut g = deep_builder(2 * n + 1);
    let mut e = g.text("a");
    for _ in 0..n {
        let b = g.text("b");
        let part = g.seq([e, b]);
        e = g.repeat(part, 0, Some(1));
    }
    let root = g.rule("root");
    g.define(root, e).unwrap();
    g.finish(root).unwrap()
}

#[test]
fn deep_grammars_compile_and_run_on_a_small_stack() {
    on_small_stack(|| {
        let vocab = tokenizers::qwen3();
        let g = compiler(Limits::new())
            .compile(&rule_chain(20_000))
            .unwrap();
        let mut m = g.matcher();
        m.consume_all(&vocab.encode(&format!("{}b", "a".repeat(20_000))).unwrap())
            .unwrap();
        assert!(m.is_accepting());
        // Optional parts nested 1,000 levels deep, each ending in a `b`: compiled (a subset of
        // the subset construction holds a state per level) and matched up to the deepest.
        let g = compiler(Limits::new())
            .compile(&nested_suffixes(1_000))
            .unwrap();
        let deepest = format!("a{}", "b".repeat(1_000));
        for (text, accepted) in [
            (deepest.as_str(), true),
            ("bbb", true),
            (&deepest[1..], false),
        ] {
            let mut m = g.matcher();
            let consumed = m.consume_all(&vocab.encode(text).unwrap());
            assert_eq!(
                consumed.is_ok() && m.is_accepting(),
                accepted,
                "{} bytes",
                text.len()
            );
        }
        // 30,000 levels, with no clock: the subset construction gives up on its work budget
        // and the automata without epsilon edges (a state per level, each with the edges of
        // the levels it can skip) on the grammar size, before their quadratic work is done.
        let unclocked = Limits::new().compile_time(None);
        let err = compiler(unclocked)
            .compile(&nested_repeats(30_000))
            .unwrap_err();
        assert_eq!(err.limit().unwrap().kind, LimitKind::GrammarSize, "{err}");
        // Recursion 5,000 deep in the input.
        let g = compiler(Limits::new())
            .compile(&ir(r#"root ::= "(" root ")" | "x""#))
            .unwrap();
        let mut m = g.matcher();
        let text = format!("{}x{}", "(".repeat(5_000), ")".repeat(5_000));
        m.consume_all(&vocab.encode(&text).unwrap()).unwrap();
        assert!(m.is_accepting());
    });
}

/// Ambiguous counted repeats: items of one state whose units were entered from rows with the
/// same callers are one, and so are counted items past their minimum whose count is higher
/// than another's. Rows stay small however far the input goes, so every mask and consume of
/// a 600-step walk fits a budget of a tenth of the default.
#[test]
fn ambiguous_counted_repeats_keep_mask_work_bounded() {
    let vocab = tokenizers::qwen3();
    let cases = [
        (r#"root ::= ("a" | "aa"){0,5000}"#, "a".repeat(600)),
        (
            r#"root ::= [a-z]{0,3000} [a-z]{0,3000}"#,
            "thequickbrownfox".repeat(40),
        ),
        (
            r#"root ::= ([a-z]{0,2500} "b"?){0,3}"#,
            "abcdefghij".repeat(60),
        ),
        (r#"root ::= ("a"{0,50}){0,200}"#, "a".repeat(600)),
    ];
    for (gbnf, text) in cases {
        let g = compiler(Limits::new().mask_work(5_000_000))
            .compile(&ir(gbnf))
            .unwrap();
        let mut m = g.matcher();
        let mut mask = vec![0u32; vocab.mask_words()];
        for (step, &t) in vocab.encode(&text).unwrap().iter().enumerate() {
            m.fill_mask(&mut mask)
                .unwrap_or_else(|e| panic!("{gbnf} step {step}: {e}"));
            assert!(formwork::bitmask::get_bit(&mask, t), "{gbnf} step {step}");
            m.consume(t)
                .unwrap_or_else(|e| panic!("{gbnf} step {step}: {e}"));
        }
        assert!(m.is_accepting(), "{gbnf}");
    }
}

/// Merging items by their callers and counted items by their counts loses nothing: masks
/// equal the reference recognizer's up to and past the bounds.
#[test]
fn merged_items_keep_masks_exact() {
    let vocab = tokenizers::qwen3();
    let cases = [
        (r#"root ::= ("a" | "aa"){0,12}"#, "a".repeat(24)),
        (
            r#"root ::= [a-z]{0,12} [a-z]{0,12}"#,
            "abcdefghijklmnopqrstuvwx".to_string(),
        ),
        (
            r##"root ::= ([a-z]{0,10} "b"?){2,3} ".""##,
            "abcdefghijklmnopqrstuvwxyzab.".to_string(),
        ),
        (
            r#"root ::= ("a"{0,11}){0,3} "b""#,
            format!("{}b", "a".repeat(30)),
        ),
        (
            "root ::= x x x\nx ::= [a-z]{3,12} | [a-z]{0,2}",
            "abcdefghij".repeat(3),
        ),
    ];
    for (gbnf, text) in cases {
        let grammar = ir(gbnf);
        let g = compiler(Limits::new()).compile(&grammar).unwrap();
        let mut m = g.matcher();
        let tokens = vocab.encode(&text).unwrap();
        formwork_testkit::oracle::assert_masks_match_oracle(gbnf, vocab, &grammar, &mut m, &tokens);
    }
}

/// Under a history of 8 tokens, 20,000 tokens of text inside a structure still open keep a
/// chart of a few thousand rows (what the history can roll back, and the rows the open
/// structure needs), close correctly, and roll back as far as the history allows.
#[test]
fn a_small_history_bounds_the_chart() {
    let vocab = tokenizers::qwen3();
    let g = compiler(Limits::new().history(8))
        .compile(&ir(r#"root ::= "[" "[" "\"" [a-z ]* "\"" "]" "]""#))
        .unwrap();
    let mut m = g.matcher();
    let open = vocab.encode("[[\"").unwrap();
    m.consume_all(&open).unwrap();
    let word = vocab.encode(" hello").unwrap();
    assert_eq!(word.len(), 1);
    let mut most = 0;
    for _ in 0..20_000 {
        m.consume(word[0]).unwrap();
        most = most.max(m.num_rows());
    }
    assert!(most < 10_000, "{most} rows");
    let mut mask = vec![0u32; vocab.mask_words()];
    m.fill_mask(&mut mask).unwrap();
    let before = mask.clone();
    let close = vocab.encode("\"]]").unwrap();
    m.consume_all(&close).unwrap();
    assert!(m.is_accepting());
    m.rollback(close.len()).unwrap();
    m.fill_mask(&mut mask).unwrap();
    assert_eq!(mask, before);
    let err = m.rollback(9).unwrap_err();
    assert_eq!(
        err.kind(),
        &MatchErrorKind::RollbackTooFar {
            requested: 9,
            available: 8 - close.len()
        }
    );
    assert_eq!(m.num_consumed(), open.len() + 20_000);
}

#[test]
fn the_first_row_over_the_readings_limit_is_a_typed_compile_error() {
    let err = compiler(Limits::new().readings(0))
        .compile(&ir(r#"root ::= "a""#))
        .unwrap_err();
    assert_eq!(err.limit().unwrap().kind, LimitKind::Readings, "{err}");
}

/// A limit the backend reaches while compiling names the grammar rule whose unit reached it
/// (front ends name rules after JSON pointers and shapes): the rule that makes the program
/// too big, and the unit being built when the compile time ran out.
#[test]
fn backend_limit_errors_name_the_rule_responsible() {
    // `words` is called from two places and too big to inline: its own unit, built after
    // `root`'s, alone past a grammar size of 300 states.
    let words: Vec<String> = (0..300).map(|i| format!("\"w{i}x\"")).collect();
    let gbnf = format!(
        "root ::= \"[\" words \",\" words \"]\"\nwords ::= {}",
        words.join(" | ")
    );
    let grammar = ir(&gbnf);
    let err = compiler(Limits::new().grammar_size(300))
        .compile(&grammar)
        .unwrap_err();
    assert_eq!(err.limit().unwrap().kind, LimitKind::GrammarSize, "{err}");
    assert_eq!(err.location(), &Location::Rule("words".into()), "{err}");
    assert!(err.to_string().starts_with("rule `words`: "), "{err}");
    assert!(compiler(Limits::new()).compile(&grammar).is_ok());

    // Out of time before the first unit is built (the cost pass of a grammar this small
    // reads the clock less often than it ticks): the start rule's unit is the one named.
    let err = compiler(Limits::new().compile_time(Some(Duration::ZERO)))
        .compile(&ir(
            "root ::= \"[\" words \",\" words \"]\"\nwords ::= \"a\" | \"b\"",
        ))
        .unwrap_err();
    assert_eq!(err.limit().unwrap().kind, LimitKind::CompileTime, "{err}");
    assert_eq!(err.location(), &Location::Rule("root".into()), "{err}");
}

/// A mask over its work limit names the rule the matcher is in: the rule of the items that
/// read the next bytes.
#[test]
fn a_mask_over_its_work_limit_names_the_rule_the_matcher_is_in() {
    let vocab = tokenizers::qwen3();
    let words: Vec<String> = (0..300).map(|i| format!("\"w{i}x\"")).collect();
    let gbnf = format!(
        "root ::= \"[\" words \",\" words \"]\"\nwords ::= {}",
        words.join(" | ")
    );
    let g = compiler(Limits::new().mask_work(200))
        .compile(&ir(&gbnf))
        .unwrap();
    let mut m = g.matcher();
    m.consume_all(&vocab.encode("[").unwrap()).unwrap();
    let mut mask = vec![0u32; vocab.mask_words()];
    let err = m.fill_mask(&mut mask).unwrap_err();
    match err.kind() {
        MatchErrorKind::Limit(e) => assert_eq!(e.kind, LimitKind::MaskWork, "{err}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(err.location(), &Location::Rule("words".into()), "{err}");
    assert!(err.to_string().starts_with("rule `words`: "), "{err}");
}
