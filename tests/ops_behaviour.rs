//! Operator matcher behaviour beyond single masks: random walks validated by the `regex`
//! crate, cache sharing between constraints, rollback, jump-forward, and bad input.

use std::sync::Arc;

use formwork::bitmask::{get_bit, iter_ones};
use formwork::ir::GrammarBuilder;
use formwork::ops::{lower, LowerConfig, OpsMatcher, ProgramBuilder, RegexCompiler, Runtime};
use formwork::vocab::Vocab;
use formwork::{CompileErrorKind, MatchErrorKind, Matcher, TokenId};
use formwork_testkit::rng::Rng;
use formwork_testkit::tokenizers;
use formwork_testkit::walk::checked_walks;

fn matcher(vocab: &Vocab, pattern: &str) -> OpsMatcher {
    let runtime = Runtime::new(vocab.clone(), 128 << 20);
    OpsMatcher::new(runtime, RegexCompiler::new().compile(pattern).unwrap())
}

#[test]
fn random_walks_produce_full_regex_matches() {
    let vocab = tokenizers::qwen3();
    let patterns = [
        r"\d+(\.\d+)*",
        r"[a-z]{1,12}( [a-z]{1,12}){0,4}\.",
        r#"\{"id": [0-9]{1,6}, "tag": "(red|green|blue)"\}"#,
        r"(foo|foobar|fob)+baz",
        r"[A-Z][a-z]{1,8}, [A-Z]{2} [0-9]{5}",
        r"\p{Han}{1,4}",
        r"(ab|a)(bc|c)",
        r"[0-9]{3,200}",
    ];
    let mut rng = Rng::new(0x5eed);
    for pattern in patterns {
        let full = regex::bytes::Regex::new(&format!("^(?:{pattern})$")).unwrap();
        let fresh = || Box::new(matcher(vocab, pattern)) as Box<dyn Matcher>;
        let ended = checked_walks(vocab, fresh, &mut rng, 20, 1500, |text| {
            match full.is_match(text) {
                true => Ok(()),
                false => Err(format!("{pattern}: not a full match")),
            }
        });
        // Uniform sampling over ~150k tokens lingers in unbounded repeats; most walks still end.
        assert!(
            ended >= 4,
            "{pattern}: only {ended} of 20 walks reached EOS"
        );
    }
}

#[test]
fn a_second_constraint_reaching_the_same_operator_state_hits_the_cache() {
    let vocab = tokenizers::qwen3();
    let runtime = Runtime::new(vocab.clone(), 64 << 20);
    // Two different programs: different literal heads, the same free-text Wait after them.
    let program = |head: &str| {
        let mut g = GrammarBuilder::new();
        let head = g.text(head);
        let ch = formwork::front::regex::regex_to_ir(r"(?s:.)", &mut g).unwrap();
        let body = g.repeat(ch, 0, None);
        let end = g.special("<|im_end|>");
        let root = g.seq([head, body, end]);
        let start = g.rule("start");
        g.define(start, root).unwrap();
        Arc::new(lower(&g.finish(start).unwrap(), root, vocab, &LowerConfig::new()).unwrap())
    };
    let (a, b) = (program("name: "), program("title: "));
    assert_ne!(a.hash(), b.hash());
    let mut mask = vec![0u32; vocab.mask_words()];

    let mut first = OpsMatcher::new(runtime.clone(), a);
    first.consume_all(&vocab.encode("name: ").unwrap()).unwrap();
    first.fill_mask(&mut mask).unwrap();
    let after_first = runtime.cache_stats();

    let mut second = OpsMatcher::new(runtime.clone(), b);
    second
        .consume_all(&vocab.encode("title: ").unwrap())
        .unwrap();
    let mut mask2 = vec![0u32; vocab.mask_words()];
    second.fill_mask(&mut mask2).unwrap();
    let after_second = runtime.cache_stats();

    assert_eq!(
        after_second.misses, after_first.misses,
        "the Wait state was computed again"
    );
    assert!(after_second.hits > after_first.hits);
    assert_eq!(mask, mask2);
    assert!(get_bit(&mask, vocab.special_id("<|im_end|>").unwrap()));
}

#[test]
fn crossing_tokens_share_the_continuation_entry_across_positions() {
    // Write "N. " followed by free text until <|im_end|>, three times: tokens like " The" cross
    // from the Write into the Wait; their check is cached once, not once per position.
    let vocab = tokenizers::qwen3();
    let runtime = Runtime::new(vocab.clone(), 64 << 20);
    let mut g = GrammarBuilder::new();
    let ch = formwork::front::regex::regex_to_ir(r"(?s:.)", &mut g).unwrap();
    let body = g.repeat(ch, 0, None);
    let end = g.special("<|im_end|>");
    let parts: Vec<_> = ["1.", "2.", "3."]
        .iter()
        .map(|n| {
            let head = g.text(n);
            g.seq([head, body, end])
        })
        .collect();
    let root = g.seq(parts);
    let start = g.rule("start");
    g.define(start, root).unwrap();
    let program =
        Arc::new(lower(&g.finish(start).unwrap(), root, vocab, &LowerConfig::new()).unwrap());
    let mut m = OpsMatcher::new(runtime.clone(), program);
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut misses_at_dot = Vec::new();
    for part in ["1. One<|im_end|>", "2. Two<|im_end|>", "3. Three<|im_end|>"] {
        let tokens = vocab.encode(part).unwrap();
        // After the digit: the Write has "." left, and "." + " One" style tokens cross.
        m.consume(tokens[0]).unwrap();
        let before = runtime.cache_stats().misses;
        m.fill_mask(&mut mask).unwrap();
        misses_at_dot.push(runtime.cache_stats().misses - before);
        m.consume_all(&tokens[1..]).unwrap();
    }
    assert!(misses_at_dot[0] > 0);
    assert_eq!(
        &misses_at_dot[1..],
        &[0, 0],
        "positions 2 and 3 recomputed: {misses_at_dot:?}"
    );
}

#[test]
fn rejected_and_unknown_tokens_leave_the_state_unchanged() {
    let vocab = tokenizers::qwen3();
    let mut m = matcher(vocab, r"[0-9]+(\.[0-9]+)*");
    m.consume_all(&vocab.encode("12.").unwrap()).unwrap();
    let mut before = vec![0u32; vocab.mask_words()];
    m.fill_mask(&mut before).unwrap();
    let consumed = m.num_consumed();

    let dot = vocab.encode(".").unwrap()[0];
    let err = m.consume(dot).unwrap_err();
    assert!(
        matches!(err.kind(), MatchErrorKind::Rejected { token, step: 3, at_byte: 0 } if *token == dot),
        "{err}"
    );
    let err = m.consume(vocab.mask_width() as TokenId + 5).unwrap_err();
    assert!(
        matches!(err.kind(), MatchErrorKind::UnknownToken { .. }),
        "{err}"
    );
    let err = m.consume(151_800).unwrap_err(); // inside the mask width, no token behind it
    assert!(
        matches!(err.kind(), MatchErrorKind::Rejected { .. }),
        "{err}"
    );
    let im_end = vocab.special_id("<|im_end|>").unwrap();
    assert!(m.consume(im_end).is_err(), "EOS is not allowed mid-number");

    let mut after = vec![0u32; vocab.mask_words()];
    m.fill_mask(&mut after).unwrap();
    assert_eq!(before, after);
    assert_eq!(m.num_consumed(), consumed);
    let err = m.fill_mask(&mut after[1..]).unwrap_err();
    assert!(matches!(err.kind(), MatchErrorKind::MaskSize { .. }));
}

#[test]
fn rollback_restores_earlier_masks_and_eos_terminates() {
    let vocab = tokenizers::qwen3();
    let mut m = matcher(vocab, r"[a-z]+(, [a-z]+)*");
    let tokens = vocab.encode("alpha, beta, gamma").unwrap();
    let mut masks = Vec::new();
    let mut mask = vec![0u32; vocab.mask_words()];
    for &t in &tokens {
        m.fill_mask(&mut mask).unwrap();
        masks.push(mask.clone());
        m.consume(t).unwrap();
    }
    m.fill_mask(&mut mask).unwrap();
    masks.push(mask.clone());
    let eos = vocab.eos_tokens()[0];
    m.consume(eos).unwrap();
    assert!(m.is_terminated());
    m.fill_mask(&mut mask).unwrap();
    let mut eos_ids = vocab.eos_tokens().to_vec();
    eos_ids.sort();
    assert_eq!(iter_ones(&mask).collect::<Vec<_>>(), eos_ids);
    assert!(matches!(
        m.consume(tokens[0]).unwrap_err().kind(),
        MatchErrorKind::Terminated
    ));

    for back in 1..=tokens.len() + 1 {
        let mut r = matcher(vocab, r"[a-z]+(, [a-z]+)*");
        r.consume_all(&tokens).unwrap();
        r.consume(eos).unwrap();
        r.rollback(back).unwrap();
        assert!(!r.is_terminated());
        r.fill_mask(&mut mask).unwrap();
        assert_eq!(mask, masks[tokens.len() + 1 - back], "rollback({back})");
    }
    let err = m.rollback(tokens.len() + 2).unwrap_err();
    assert!(matches!(err.kind(), MatchErrorKind::RollbackTooFar { .. }));
    m.reset();
    assert_eq!(m.num_consumed(), 0);
}

#[test]
fn forced_tokens_jump_forward_over_literals() {
    let vocab = tokenizers::qwen3();
    let mut m = matcher(vocab, r#"\{"name": "[a-z]+", "ok": (true|false)\}"#);
    assert_eq!(m.forced_bytes(), br#"{"name": ""#);
    let forced = m.forced_tokens();
    let bytes: Vec<u8> = forced
        .iter()
        .flat_map(|&t| vocab.token_bytes(t).to_vec())
        .collect();
    assert!(br#"{"name": ""#.starts_with(&bytes) && !bytes.is_empty());
    assert!(
        bytes.len() < br#"{"name": ""#.len(),
        "the last token is held back: free text follows"
    );
    m.consume_all(&forced).unwrap();
    // The held-back bytes come back in the model's own tokenization of what follows.
    let held_back = String::from_utf8(br#"{"name": ""#[bytes.len()..].to_vec()).unwrap();
    m.consume_all(
        &vocab
            .encode(&format!(r#"{held_back}bob", "ok": t"#))
            .unwrap(),
    )
    .unwrap();
    // Only "rue}" can follow, and then the end: the whole stretch is forced.
    assert_eq!(m.forced_bytes(), b"rue}");
    let rest = m.forced_tokens();
    let rest_bytes: Vec<u8> = rest
        .iter()
        .flat_map(|&t| vocab.token_bytes(t).to_vec())
        .collect();
    assert_eq!(rest_bytes, b"rue}");
    m.consume_all(&rest).unwrap();
    assert!(m.is_accepting());
}

#[test]
fn bad_regexes_are_typed_errors_naming_the_construct() {
    let c = RegexCompiler::new();
    let err = c.compile("a(b").unwrap_err();
    assert_eq!(err.kind(), CompileErrorKind::Syntax);
    assert!(err.to_string().contains(":1:"), "{err}");
    for (pattern, what) in [
        ("(?=a)b", "look-around"),
        ("(?<!a)b", "look-around"),
        (r"(a)\1", "backreference"),
        (r"\bfoo", "word boundaries"),
        ("a^b", "anchor"),
        ("a$b", "anchor"),
    ] {
        let err = c.compile(pattern).unwrap_err();
        assert_eq!(
            err.kind(),
            CompileErrorKind::Unsupported,
            "{pattern}: {err}"
        );
        assert!(err.to_string().contains(what), "{pattern}: {err}");
    }
    // Anchors at the edges are redundant and accepted.
    assert!(c.compile("^abc$").is_ok());
    assert_eq!(
        c.compile(r"[^\x00-\x{10FFFF}]").unwrap_err().kind(),
        CompileErrorKind::EmptyLanguage
    );
}

#[test]
fn unknown_special_tokens_and_malformed_programs_are_errors() {
    let vocab = tokenizers::qwen3();
    let mut g = GrammarBuilder::new();
    let s = g.special("<|no_such_token|>");
    let start = g.rule("start");
    g.define(start, s).unwrap();
    let err = lower(&g.finish(start).unwrap(), s, vocab, &LowerConfig::new()).unwrap_err();
    assert_eq!(err.kind(), CompileErrorKind::UnknownSpecialToken);
    assert!(err.to_string().contains("<|no_such_token|>"));

    let mut g = GrammarBuilder::new();
    let r = g.rule("r");
    let a = g.text("a");
    let rr = g.rule_ref(r);
    let body = g.seq([a, rr]);
    let alt = g.optional(body);
    g.define(r, alt).unwrap();
    let err = lower(&g.finish(r).unwrap(), rr, vocab, &LowerConfig::new()).unwrap_err();
    assert_eq!(err.kind(), CompileErrorKind::NotRegular);

    let mut p = ProgramBuilder::new();
    let text = Arc::new(RegexCompiler::new().leaf(r"(?s:.)*").unwrap());
    let err = p.wait(text, &[None, None]).unwrap_err();
    assert_eq!(err.kind(), CompileErrorKind::Invalid);
}
