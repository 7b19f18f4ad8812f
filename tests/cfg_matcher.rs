//! The Earley matcher keeps the `Matcher` contract: random walks over allowed tokens stay in
//! the language, rejected tokens change nothing, rollback restores earlier masks exactly,
//! forced tokens are consumable, grammars are shared across threads, and pathological inputs
//! end in typed errors instead of hangs.

mod cfg_support;
mod common;

use std::sync::Arc;
use std::time::Duration;

use cfg_support::*;
use formwork::cfg::{CfgCompiler, CfgConfig, CfgGrammar, CfgMatcher};
use formwork::ir::recognizer::Recognizer;
use formwork::ir::reference::token_units;
use formwork::ir::GrammarBuilder;
use formwork::vocab::{TokenKind, Vocab};
use formwork::{ByteSet, CompileErrorKind, LimitKind, Limits, MatchErrorKind, Matcher, TokenId};

/// Random walks sampling only allowed tokens: every sampled token is accepted by the reference
/// recognizer, a live state never has an empty mask, and a walk that samples EOS has produced a
/// string of the language.
#[test]
fn random_walks_stay_in_the_language() {
    let vocab = common::qwen3();
    let grammars = [
        ("json", JSON),
        ("arith", ARITH),
        ("clike", CLIKE),
        ("leftrec", LEFTREC),
        ("ambiguous", AMBIGUOUS),
        ("specials", SPECIALS),
        ("repeats", REPEATS),
    ];
    let compiler = CfgCompiler::new(vocab, CfgConfig::new());
    let mut rng = Rng::new(7);
    for (name, gbnf) in grammars {
        let ir = ir(gbnf);
        let rec = Recognizer::new(&ir);
        let g = compiler.compile(&ir).unwrap();
        let mut ended = 0;
        for walk in 0..12 {
            let mut m = g.matcher();
            let mut chart = rec.start();
            for step in 0..40 {
                let mask = mask_of(&mut m, vocab);
                let allowed: Vec<TokenId> = mask.iter().collect();
                assert!(
                    !allowed.is_empty(),
                    "{name} walk {walk} step {step}: empty mask on a live state"
                );
                let eos: Vec<TokenId> = allowed
                    .iter()
                    .copied()
                    .filter(|&t| vocab.is_eos(t))
                    .collect();
                assert_eq!(
                    !eos.is_empty(),
                    chart.is_accepting(&rec),
                    "{name}: EOS iff accepting"
                );
                // EOS now and then, and always late in the walk, so walks do end.
                if !eos.is_empty() && (step >= 25 || rng.below(4) == 0) {
                    m.consume(eos[0]).unwrap();
                    assert!(m.is_terminated());
                    ended += 1;
                    break;
                }
                // Half the time prefer short tokens, so structures get closed now and then.
                let short: Vec<TokenId> = allowed
                    .iter()
                    .copied()
                    .filter(|&t| !vocab.is_eos(t) && token_units(vocab, t).len() <= 2)
                    .collect();
                let pool: Vec<TokenId> = if !short.is_empty() && rng.below(2) == 0 {
                    short
                } else {
                    allowed
                        .iter()
                        .copied()
                        .filter(|&t| !vocab.is_eos(t))
                        .collect()
                };
                if pool.is_empty() {
                    break;
                }
                let t = pool[rng.below(pool.len())];
                assert!(
                    chart.push_token(&rec, vocab, t),
                    "{name} walk {walk} step {step}: allowed token {} is not viable",
                    vocab.display_token(t)
                );
                m.consume(t).unwrap();
            }
        }
        // Grammars whose random continuations reach a complete string often (in LEFTREC an
        // identifier needs `[...]` after it and random letters keep extending it; SPECIALS
        // needs `</think>` to come out of free text).
        if ["arith", "ambiguous"].contains(&name) {
            assert!(ended > 0, "{name}: no walk reached EOS");
        }
    }
}

fn text_token_not_in(mask: &formwork::mask::TokenMask, vocab: &Vocab) -> TokenId {
    (0..vocab.len() as TokenId)
        .find(|&t| {
            vocab.kind(t) == Some(TokenKind::Text)
                && !mask.contains(t)
                && vocab.token_bytes(t).len() > 2
        })
        .expect("some text token is rejected")
}

/// Where the reference recognizer rejects a token's bytes.
fn failing_byte(
    rec: &Recognizer,
    chart: &formwork::ir::recognizer::Chart,
    vocab: &Vocab,
    t: TokenId,
) -> usize {
    let mut c = chart.clone();
    token_units(vocab, t)
        .iter()
        .take_while(|u| c.push(rec, **u))
        .count()
}

#[test]
fn rejected_tokens_leave_the_state_unchanged() {
    let vocab = common::qwen3();
    let ir = ir(JSON);
    let rec = Recognizer::new(&ir);
    let g = compile(vocab, CfgConfig::new(), &ir);
    let tokens = vocab.encode(r#"{"key": [12, "v"]}"#).unwrap();
    let mut m = g.matcher();
    let mut chart = rec.start();
    let special = vocab.special_id("<|vision_start|>").unwrap();
    for (step, &t) in tokens.iter().enumerate() {
        let before = mask_of(&mut m, vocab);
        let forced = m.forced_bytes();
        let bad = text_token_not_in(&before, vocab);
        let err = m.consume(bad).unwrap_err();
        let at = failing_byte(&rec, &chart, vocab, bad);
        assert_eq!(
            err.kind(),
            &MatchErrorKind::Rejected {
                token: bad,
                step,
                at_byte: at
            }
        );
        let err = m.consume(special).unwrap_err();
        assert_eq!(
            err.kind(),
            &MatchErrorKind::Rejected {
                token: special,
                step,
                at_byte: 0
            }
        );
        let out_of_range = vocab.mask_width() as TokenId;
        assert!(matches!(
            m.consume(out_of_range).unwrap_err().kind(),
            MatchErrorKind::UnknownToken { .. }
        ));
        if vocab.mask_width() > vocab.len() {
            let unused = vocab.len() as TokenId;
            assert!(matches!(
                m.consume(unused).unwrap_err().kind(),
                MatchErrorKind::Rejected { .. }
            ));
        }
        assert_eq!(m.num_consumed(), step);
        assert_eq!(
            mask_of(&mut m, vocab),
            before,
            "step {step}: mask changed by a rejected token"
        );
        assert_eq!(m.forced_bytes(), forced);
        m.consume(t).unwrap();
        assert!(chart.push_token(&rec, vocab, t));
    }
    let mut short = vec![0u32; vocab.mask_words() - 1];
    assert!(matches!(
        m.fill_mask(&mut short).unwrap_err().kind(),
        MatchErrorKind::MaskSize { .. }
    ));
    // After EOS only EOS.
    let eos = vocab.eos_tokens()[0];
    m.consume(eos).unwrap();
    let after = mask_of(&mut m, vocab);
    assert_eq!(after.iter().collect::<Vec<_>>(), {
        let mut e = vocab.eos_tokens().to_vec();
        e.sort();
        e
    });
    assert_eq!(
        m.consume(tokens[0]).unwrap_err().kind(),
        &MatchErrorKind::Terminated
    );
    m.consume(eos).unwrap();
    assert!(m.is_terminated() && m.is_accepting());
}

/// After a rollback, a different text whose last row looks the same (a string opened at the
/// same byte, in an object instead of an array; without context levels, only the run-time
/// walk tells them apart) gets its own masks, not the ones learnt on the rows that were rolled
/// back.
#[test]
fn rollback_forgets_what_the_removed_rows_decided() {
    let vocab = common::qwen3();
    let g = compile(vocab, CfgConfig::new().context_depth(0), &ir(JSON));
    let in_object = vocab.encode(r#"{"k":"ab"#).unwrap();
    let in_array = vocab.encode(r#"[1,2,"ab"#).unwrap();
    let mut fresh = g.matcher();
    fresh.consume_all(&in_array).unwrap();
    let expected = mask_of(&mut fresh, vocab);
    let mut m = g.matcher();
    m.consume_all(&in_object).unwrap();
    let object_mask = mask_of(&mut m, vocab);
    assert_ne!(object_mask, expected, "`\"}}` closes only the object");
    m.rollback(in_object.len()).unwrap();
    m.consume_all(&in_array).unwrap();
    assert_eq!(mask_of(&mut m, vocab), expected);
    m.reset();
    m.consume_all(&in_object).unwrap();
    assert_eq!(mask_of(&mut m, vocab), object_mask);
}

#[test]
fn rollback_restores_earlier_masks() {
    let vocab = common::qwen3();
    let g = compile(vocab, CfgConfig::new(), &ir(JSON));
    let tokens = vocab
        .encode(r#"{"a": [1, {"b": "xyz"}], "c": false}"#)
        .unwrap();
    let mut m = g.matcher();
    let mut masks = vec![mask_of(&mut m, vocab)];
    for &t in &tokens {
        m.consume(t).unwrap();
        masks.push(mask_of(&mut m, vocab));
    }
    let eos = vocab.eos_tokens()[0];
    m.consume(eos).unwrap();
    m.rollback(1).unwrap();
    assert!(!m.is_terminated());
    assert_eq!(mask_of(&mut m, vocab), masks[tokens.len()]);
    for n in [3, 1, 5, 2] {
        let at = m.num_consumed() - n;
        m.rollback(n).unwrap();
        assert_eq!(m.num_consumed(), at);
        assert_eq!(mask_of(&mut m, vocab), masks[at], "after rollback to {at}");
        // Going forward again along the same text gives the same masks.
        m.consume(tokens[at]).unwrap();
        assert_eq!(mask_of(&mut m, vocab), masks[at + 1]);
    }
    let err = m.rollback(m.num_consumed() + 1).unwrap_err();
    assert!(matches!(err.kind(), MatchErrorKind::RollbackTooFar { .. }));
    m.rollback(m.num_consumed()).unwrap();
    assert_eq!(mask_of(&mut m, vocab), masks[0]);
    m.consume_all(&tokens[..4]).unwrap();
    m.reset();
    assert_eq!(m.num_consumed(), 0);
    assert_eq!(mask_of(&mut m, vocab), masks[0]);
}

fn bytes_of(vocab: &Vocab, tokens: &[TokenId]) -> Vec<u8> {
    tokens
        .iter()
        .flat_map(|&t| vocab.token_bytes(t).iter().copied())
        .collect()
}

/// Forced tokens are canonical, consumable one after the other, and cover the forced bytes
/// except the last token when the stretch does not reach the end of the language.
#[test]
fn forced_tokens_jump_forward() {
    let vocab = common::qwen3();
    let g = compile(
        vocab,
        CfgConfig::new(),
        &ir(r#"root ::= "{\"name\": \"" [a-z]+ "\", \"id\": " [0-9] "}\n" | "[" [0-9] "]""#),
    );
    let mut m = g.matcher();
    assert_eq!(m.forced_bytes(), b"");
    m.consume(vocab.encode("{").unwrap()[0]).unwrap();
    assert_eq!(m.forced_bytes(), b"\"name\": \"");
    let forced = m.forced_tokens();
    assert!(!forced.is_empty());
    let bytes = bytes_of(vocab, &forced);
    assert!(
        b"\"name\": \"".starts_with(&bytes) && bytes.len() < 9,
        "last token kept back"
    );
    for &t in &forced {
        assert!(mask_of(&mut m, vocab).contains(t));
        m.consume(t).unwrap();
    }
    m.consume_all(
        &vocab
            .encode(&String::from_utf8(b"\"name\": \"".to_vec()).unwrap()[bytes.len()..])
            .unwrap(),
    )
    .unwrap();
    m.consume_all(&vocab.encode("abc\", \"id\": 7").unwrap())
        .unwrap();
    // The rest is forced to the end of the language: nothing kept back.
    assert_eq!(m.forced_bytes(), b"}\n");
    let forced = m.forced_tokens();
    assert_eq!(bytes_of(vocab, &forced), b"}\n");
    m.consume_all(&forced).unwrap();
    assert!(m.is_accepting());
    assert_eq!(m.forced_tokens(), Vec::<TokenId>::new());

    // Special tokens in a forced stretch.
    let g = compile(
        vocab,
        CfgConfig::new(),
        &ir(r#"root ::= <|im_start|> "assistant\n" [a-z]+"#),
    );
    let mut m = g.matcher();
    assert_eq!(m.forced_bytes(), b"", "a special token comes first");
    let forced = m.forced_tokens();
    assert_eq!(forced[0], vocab.special_id("<|im_start|>").unwrap());
    assert!(b"assistant\n".starts_with(&bytes_of(vocab, &forced[1..])));
    assert!(bytes_of(vocab, &forced[1..]).len() < 10);
    m.consume_all(&forced).unwrap();
}

#[test]
fn grammars_are_shared_across_threads() {
    fn send<T: Send>() {}
    fn send_sync<T: Send + Sync>() {}
    send::<CfgMatcher>();
    send_sync::<CfgGrammar>();
    send_sync::<CfgCompiler>();
    let vocab = common::qwen3();
    let g: Arc<CfgGrammar> = compile(vocab, CfgConfig::new(), &ir(JSON));
    let texts = [r#"{"x": [1, 2, 3]}"#, r#"["a", "b", {"c": null}]"#];
    let run = |g: &Arc<CfgGrammar>, text: &str| -> Vec<Vec<u32>> {
        let mut m = g.matcher();
        let mut out = Vec::new();
        for t in vocab.encode(text).unwrap() {
            out.push(mask_of(&mut m, vocab).words().to_vec());
            m.consume(t).unwrap();
        }
        out
    };
    let alone: Vec<_> = texts.iter().map(|t| run(&g, t)).collect();
    let together: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = texts.iter().map(|t| s.spawn(|| run(&g, t))).collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(alone, together);
}

/// `x{0,100000}` and `x{500,}` compile to a counter, not to 100000 states, and keep exact
/// masks far from and near their bounds.
#[test]
fn counted_repeats_stay_small() {
    let vocab = common::qwen3();
    let g = compile(
        vocab,
        CfgConfig::new(),
        &ir("root ::= \"\\\"\" [a-z ]{0,100000} \"\\\"\" | \"[\" item (\",\" item){499,} \"]\"\nitem ::= [0-9]+"),
    );
    assert!(g.num_states() < 64, "{} states", g.num_states());
    let mut m = g.matcher();
    m.consume_all(&vocab.encode("\"").unwrap()).unwrap();
    let start = mask_of(&mut m, vocab);
    m.consume_all(&vocab.encode(&"lorem ipsum ".repeat(2000)).unwrap())
        .unwrap();
    assert_eq!(
        mask_of(&mut m, vocab),
        start,
        "far from the bound the counter does not matter"
    );

    let g = compile(vocab, CfgConfig::new(), &ir("root ::= [a-z]{0,1000}"));
    let mut m = g.matcher();
    m.consume_all(&vocab.encode(&"a".repeat(998)).unwrap())
        .unwrap();
    let mask = mask_of(&mut m, vocab);
    let rec = Recognizer::new(&ir("root ::= [a-z]{0,1000}"));
    let mut chart = rec.start();
    for _ in 0..998 {
        chart.push(&rec, formwork::ir::recognizer::Terminal::Byte(b'a'));
    }
    assert_same_mask(
        &mask,
        &chart.mask(&rec, vocab),
        vocab,
        "two bytes before the bound",
    );
    assert!(mask.contains(vocab.encode("ab").unwrap()[0]));
    assert!(!mask.contains(vocab.encode("abc").unwrap()[0]));
}

/// An exponentially ambiguous grammar reaches the readings or work limit with a typed error,
/// in bounded time. The token that reached it is consumed (the grammar allows it: a limit
/// never refuses such a token), after which every call reports the limit until it is rolled
/// back; rolling back gives a matcher that works again.
#[test]
fn ambiguity_hits_row_limits() {
    let vocab = common::qwen3();
    let limits = Limits::new().readings(2_000).mask_work(50_000);
    let g = CfgCompiler::new(vocab, CfgConfig::new())
        .with_limits(limits)
        .compile(&ir("root ::= s\ns ::= s s | s s s | \"a\" | \"\""))
        .unwrap();
    let mut m = g.matcher();
    let a = vocab.encode("a").unwrap()[0];
    let mut limit = None;
    for step in 0..5_000 {
        match m.consume(a) {
            Ok(()) => {}
            Err(e) => {
                let MatchErrorKind::Limit(exceeded) = e.kind() else {
                    panic!("{e}")
                };
                limit = Some((step, *exceeded));
                break;
            }
        }
    }
    let (step, exceeded) = limit.expect("a limit is reached");
    assert!(matches!(
        exceeded.kind,
        LimitKind::Readings | LimitKind::MaskWork
    ));
    assert_eq!(m.num_consumed(), step);
    let mut out = vec![0u32; vocab.mask_words()];
    if !m.is_accepting() {
        // Over its limit: the mask reports it, and the last token rolls back.
        let err = m.fill_mask(&mut out).unwrap_err();
        assert_eq!(err.kind(), &MatchErrorKind::Limit(exceeded));
        m.rollback(1).unwrap();
    }
    assert!(m.is_accepting());
    match m.fill_mask(&mut out) {
        Ok(()) => assert!(formwork::bitmask::get_bit(&out, a)),
        Err(e) => assert!(matches!(e.kind(), MatchErrorKind::Limit(_))),
    }
}

#[test]
fn compile_errors_are_typed() {
    let vocab = common::qwen3();
    let compiler = |c: CfgConfig| CfgCompiler::new(vocab, c);
    let err = compiler(CfgConfig::new())
        .compile(&ir("root ::= a\na ::= \"x\" a"))
        .unwrap_err();
    assert_eq!(err.kind(), CompileErrorKind::EmptyLanguage);
    let err = compiler(CfgConfig::new())
        .compile(&ir("root ::= \"a\" <|no_such_token|>"))
        .unwrap_err();
    assert_eq!(err.kind(), CompileErrorKind::UnknownSpecialToken);
    assert!(err.to_string().contains("<|no_such_token|>"));
    // `<think>` is not special in Qwen3: as a token symbol it is unknown, as text it is fine.
    let err = compiler(CfgConfig::new())
        .compile(&ir("root ::= <think>"))
        .unwrap_err();
    assert_eq!(err.kind(), CompileErrorKind::UnknownSpecialToken);
    let limited = |limits: Limits| compiler(CfgConfig::new()).with_limits(limits);
    let err = limited(Limits::new().grammar_size(50))
        .compile(&ir(CLIKE))
        .unwrap_err();
    assert_eq!(err.kind(), CompileErrorKind::Limit);
    assert_eq!(err.limit().unwrap().kind, LimitKind::GrammarSize);
    let err = limited(Limits::new().compile_time(Some(Duration::ZERO)))
        .compile(&ir(CLIKE))
        .unwrap_err();
    assert_eq!(err.kind(), CompileErrorKind::Limit);
    assert_eq!(err.limit().unwrap().kind, LimitKind::CompileTime);
}

/// A regex-like rule whose DFA would need 2^19 states stays a nondeterministic automaton (no
/// error, no blow-up) with exact masks.
#[test]
fn determinization_blowup_falls_back_to_nfa() {
    let vocab = common::qwen3();
    check_oracle(
        vocab,
        "root ::= [ab]* \"a\" [ab]{18} \";\"",
        &["babbabababbbabaabbab;", "aaaaaaaaaaaaaaaaaaaaaaaa;"],
    );
}

/// IR nested 20000 levels deep (as a generated schema might be) compiles without exhausting
/// the stack, and matches. The IR builder bounds depth by the nesting limit (8 IR levels per
/// level), raised here so that the depth reaches the compiler.
#[test]
fn deep_ir_nesting() {
    let vocab = common::qwen3();
    let mut g = GrammarBuilder::with_limits(&Limits::new().nesting(6_000));
    let digit = g.class(ByteSet::range(b'0', b'9'));
    let mut e = digit;
    for i in 0..20_000 {
        let open = g.bytes(if i % 2 == 0 { b"(" } else { b"[" });
        let close = g.bytes(if i % 2 == 0 { b")" } else { b"]" });
        let wrapped = g.seq([open, e, close]);
        e = g.alt([wrapped, digit]);
    }
    let root = g.rule("root");
    g.define(root, e).unwrap();
    let grammar = CfgCompiler::new(vocab, CfgConfig::new())
        .compile(&g.finish(root).unwrap())
        .unwrap();
    let mut m = grammar.matcher();
    // The outermost level (the last built) is `[...]`.
    m.consume_all(&vocab.encode("[([7])]").unwrap()).unwrap();
    assert!(m.is_accepting());
    assert!(m.consume(vocab.encode("]").unwrap()[0]).is_err());
}
