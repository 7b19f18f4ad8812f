//! The operator backend on hostile input: deep programs lower and run on a 256 KiB stack,
//! fusion is tried only where the determinizer's work is bounded, compile time and automaton
//! sizes are typed limits, ambiguous counted repeats keep a few threads and cheap masks (and
//! exact ones), the rollback history and the regex cache are bounded.

use std::sync::Arc;

use formwork::engine::{BackendChoice, BackendKind, Engine, EngineConfig};
use formwork::ir::{Grammar, GrammarBuilder};
use formwork::ops::{fits_operators, LowerConfig, OpsMatcher, RegexCompiler, Runtime};
use formwork::vocab::Vocab;
use formwork::{
    ByteSet, CompileErrorKind, LimitKind, Limits, Location, MatchErrorKind, Matcher, TokenId,
};
use formwork_testkit::grammars::rule_chain;
use formwork_testkit::stack::on_small_stack;
use formwork_testkit::tokenizers;

/// `((a?b)?b)?b...`: `n` optional repeats nested in one another. The IR builder allows 8
/// levels per level of [`Limits::nesting`]; raised here so that the depth reaches the backend.
fn nested_optionals(n: usize) -> Grammar {
    let mut g = GrammarBuilder::with_limits(&Limits::new().nesting((2 * n + 1).div_ceil(8)));
    let mut e = g.text("a");
    for _ in 0..n {
        e = g.optional(e);
        let b = g.text("b");
        e = g.seq([e, b]);
    }
    let root = g.rule("root");
    g.define(root, e).unwrap();
    g.finish(root).unwrap()
}

fn engine(choice: BackendChoice, limits: Limits) -> Engine {
    Engine::with_config(
        tokenizers::qwen3().clone(),
        EngineConfig::new().backend(choice).limits(limits),
    )
}

#[test]
fn deep_grammars_route_lower_and_run_on_a_small_stack() {
    on_small_stack(|| {
        let chain = rule_chain(20_000);
        let nested = nested_optionals(60_000);
        assert!(!fits_operators(&chain, &LowerConfig::new()));
        assert!(!fits_operators(&nested, &LowerConfig::new()));

        // Forced onto operators, the chain is a right-nested sequence: its threads stay
        // shallow, so it lowers and runs.
        let ops = engine(BackendChoice::Operators, Limits::new());
        let c = ops.compile_grammar(&chain).unwrap();
        assert_eq!(c.backend(), BackendKind::Operators);
        assert!(c
            .program()
            .unwrap()
            .describe()
            .starts_with("Seq(Write, Seq(Write"));
        let vocab = ops.vocab();
        let mut m = c.matcher();
        m.consume_all(&vocab.encode(&format!("{}b", "a".repeat(20_000))).unwrap())
            .unwrap();
        assert!(m.is_accepting());

        // The nested optionals would stack a frame per level in every thread: a typed limit.
        let err = ops.compile_grammar(&nested).unwrap_err();
        assert_eq!(err.kind(), CompileErrorKind::Limit);
        assert_eq!(err.limit().unwrap().kind, LimitKind::Nesting);
    });
}

/// A sequence of 20,000 nullable parts, none fused: entering it runs the closure through
/// every part (an explicit task stack, not recursion, whose tasks are shared by the threads
/// of a step), and stepping it too.
#[test]
fn a_long_sequence_of_nullable_parts_closes_on_a_small_stack() {
    on_small_stack(|| {
        let mut g = GrammarBuilder::new();
        let x = g.text("x");
        let part = g.optional(x);
        let body = g.seq(std::iter::repeat_n(part, 20_000));
        let y = g.text("y");
        let root_expr = g.seq([body, y]);
        let root = g.rule("root");
        g.define(root, root_expr).unwrap();
        let grammar = g.finish(root).unwrap();
        let vocab = tokenizers::qwen3();
        let runtime = Runtime::new(vocab.clone(), 64 << 20);
        let program = formwork::ops::lower(
            &grammar,
            root_expr,
            vocab,
            &LowerConfig::new().dfa_state_limit(1),
        )
        .unwrap();
        let mut m = OpsMatcher::new(runtime, Arc::new(program));
        let xy = vocab.encode("xxxy").unwrap();
        m.consume_all(&xy).unwrap();
        assert!(m.is_accepting());
        assert_eq!(m.num_threads(), 1);
    });
}

/// Alternated pieces of a Unicode `\w{0,k}`: each piece's NFA is thousands of states, and
/// determinizing one against the fusion limit cost 40 ms to 1 s, so fusing them was a minute
/// per regex. They stay operators (an `IfElse` of counted loops of one-character leaves),
/// whose masks follow each loop through its rounds: within the default work budget for 58
/// pieces (`ops_llguidance.rs` checks their masks against llguidance's).
#[test]
fn fusion_is_not_tried_where_the_determinizer_would_work_without_bound() {
    let pieces: Vec<String> = (1..59).map(|k| format!(r"\w{{0,{k}}}")).collect();
    let pattern = format!("({})", pieces.join("|"));
    assert!(pattern.len() > 500);
    let program = RegexCompiler::new().compile(&pattern).unwrap();
    let described = program.describe();
    assert!(
        described.starts_with("IfElse(DoWhile{0,1}(Dfa)"),
        "{described}"
    );

    let vocab = tokenizers::qwen3();
    let e = engine(BackendChoice::Auto, Limits::new());
    let mut m = e.compile_regex(&pattern).unwrap().matcher();
    let mut mask = vec![0u32; vocab.mask_words()];
    for (step, &t) in tokens_of(vocab, "héllo_wörld").iter().enumerate() {
        m.fill_mask(&mut mask)
            .unwrap_or_else(|e| panic!("step {step}: {e}"));
        assert!(formwork::bitmask::get_bit(&mask, t), "step {step}");
        m.consume(t).unwrap();
    }
    assert!(m.is_accepting());

    for pattern in [r"\w{0,8}x|\w{0,9}y|\w{0,10}z", r"(\w{0,1}|\w{0,2}|\w{0,3})"] {
        let c = e.compile_regex(pattern).unwrap();
        assert!(
            c.program().unwrap().describe().starts_with("IfElse("),
            "{pattern}"
        );
    }
}

#[test]
fn compile_time_and_automaton_sizes_are_typed_limits() {
    // A regex whose lowering takes well over a clock reading's worth of steps.
    let words: Vec<String> = (0..3000).map(|i| format!("w{i}x")).collect();
    let pattern = format!("({})+", words.join("|"));
    let e = engine(
        BackendChoice::Auto,
        Limits::new().compile_time(Some(std::time::Duration::ZERO)),
    );
    let err = e.compile_regex(&pattern).unwrap_err();
    assert_eq!(err.limit().unwrap().kind, LimitKind::CompileTime, "{err}");

    // Free text up to a special token is one `Wait` automaton, past a limit of 4 states; it
    // is a rule of its own, which the error names.
    let mut g = GrammarBuilder::new();
    let text = g.class(ByteSet::range(b'a', b'z'));
    let body = g.repeat(text, 0, None);
    let end = g.special("<|im_end|>");
    let free_expr = g.seq([body, end]);
    let free = g.rule("free text");
    g.define(free, free_expr).unwrap();
    let open = g.text("> ");
    let call = g.rule_ref(free);
    let root_expr = g.seq([open, call]);
    let root = g.rule("root");
    g.define(root, root_expr).unwrap();
    let grammar = g.finish(root).unwrap();
    let e = engine(BackendChoice::Operators, Limits::new().automaton_states(1));
    let err = e.compile_grammar(&grammar).unwrap_err();
    assert_eq!(
        err.limit().unwrap().kind,
        LimitKind::AutomatonStates,
        "{err}"
    );
    assert_eq!(err.location(), &Location::Rule("free text".into()), "{err}");
    assert!(engine(BackendChoice::Operators, Limits::new())
        .compile_grammar(&grammar)
        .is_ok());
}

fn tokens_of(vocab: &Vocab, text: &str) -> Vec<TokenId> {
    vocab.encode(text).unwrap()
}

/// A matcher for `pattern` on its own runtime under `limits`.
fn ops_matcher(pattern: &str, limits: Limits) -> (Arc<Runtime>, OpsMatcher) {
    let vocab = tokenizers::qwen3();
    let runtime = Runtime::with_limits(vocab.clone(), 256 << 20, limits);
    let program = RegexCompiler::new().compile(pattern).unwrap();
    (runtime.clone(), OpsMatcher::new(runtime, program))
}

/// Ambiguous counted repeats: readings that differ only in a loop's count, past its minimum,
/// are one (the lower count can do all the other can), and the cache keys see a count only
/// as far as a token can tell. So the cursor holds a few threads however far the input is
/// (the end of the program among them: every prefix is accepted), every mask and consume
/// stays within a tenth of the default work budget, and once the keys repeat (40 steps in)
/// no mask computes anything new.
#[test]
fn ambiguous_counted_repeats_keep_few_threads_and_cheap_masks() {
    let vocab = tokenizers::qwen3();
    let cases: [(&str, String, usize); 4] = [
        ("(a|aa){0,5000}", "a".repeat(600), 3),
        (
            "[a-z]{0,3000}[a-z]{0,3000}",
            "thequickbrownfox".repeat(40),
            3,
        ),
        ("([a-z]{0,2500}b?){0,3}", "abcdefghij".repeat(60), 8),
        ("(a{0,50}){0,200}", "a".repeat(600), 51),
    ];
    for (pattern, text, max_threads) in cases {
        let (runtime, mut m) = ops_matcher(pattern, Limits::new().mask_work(5_000_000));
        let mut mask = vec![0u32; vocab.mask_words()];
        let mut misses_after_warmup = None;
        for (step, &t) in tokens_of(vocab, &text).iter().enumerate() {
            let misses = runtime.cache_stats().misses;
            m.fill_mask(&mut mask)
                .unwrap_or_else(|e| panic!("{pattern} step {step}: {e}"));
            assert!(
                formwork::bitmask::get_bit(&mask, t),
                "{pattern} step {step}"
            );
            m.consume(t)
                .unwrap_or_else(|e| panic!("{pattern} step {step}: {e}"));
            assert!(
                m.num_threads() <= max_threads,
                "{pattern} step {step}: {} threads",
                m.num_threads()
            );
            match step {
                40 => misses_after_warmup = Some(misses),
                41.. => assert_eq!(
                    Some(misses),
                    misses_after_warmup,
                    "{pattern} step {step}: a mask missed the cache"
                ),
                _ => {}
            }
        }
    }
}

/// With nothing fused, the operators of ambiguous counted repeats give the Earley backend's
/// masks and the reference recognizer's, bit for bit, up to and past their bounds: pruning
/// threads and abstracting counts loses nothing.
#[test]
fn pruned_threads_keep_masks_exact() {
    let vocab = tokenizers::qwen3();
    let cases = [
        ("(a|aa){0,40}", "a".repeat(80)),
        (
            "[a-z]{0,30}[a-z]{0,30}",
            "abcdefghijklmnopqrstuvwxyz".repeat(2),
        ),
        (
            "([a-z]{0,12}b?){2,3}",
            "abcdefghijklmnopqrstuvwxyzab".to_string(),
        ),
        ("(a{0,5}){0,8}", "a".repeat(38)),
        ("(ab|a)*(ba){3,5}", "abababababa".to_string()),
    ];
    let config = |choice| {
        EngineConfig::new()
            .backend(choice)
            .lower(LowerConfig::new().dfa_state_limit(1))
    };
    let ops = Engine::with_config(vocab.clone(), config(BackendChoice::Operators));
    let earley = Engine::with_config(vocab.clone(), config(BackendChoice::Earley));
    for (pattern, text) in cases {
        let grammar = ops
            .request_grammar(&format!("regex(pattern: /{pattern}/)"))
            .unwrap();
        let tokens = tokens_of(vocab, &text);
        let mut a = ops.compile_regex(pattern).unwrap().matcher();
        formwork_testkit::oracle::assert_masks_match_oracle(
            pattern, vocab, &grammar, &mut a, &tokens,
        );
        let mut b = earley.compile_regex(pattern).unwrap().matcher();
        formwork_testkit::oracle::assert_masks_match_oracle(
            pattern, vocab, &grammar, &mut b, &tokens,
        );
    }
}

/// A token the constraint allows is consumed even when stepping it goes past the readings
/// limit: the matcher is then over its limit (every mask and consume reports it) until the
/// token is rolled back. Whatever the limit, the mask never allowed a token `consume` then
/// refused; at some limits the mask itself is what fails (a typed error, nothing changed).
#[test]
fn a_limit_reached_by_an_allowed_token_leaves_the_matcher_over_it() {
    let vocab = tokenizers::qwen3();
    let long_a = (0..vocab.len() as TokenId)
        .filter(|&t| {
            let b = vocab.token_bytes(t);
            !b.is_empty() && b.iter().all(|&x| x == b'a')
        })
        .max_by_key(|&t| vocab.token_bytes(t).len())
        .unwrap();
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut went_over = 0;
    for readings in 2..=40 {
        // Every prefix of this language is in it: a matcher that does not accept is over
        // its limit.
        let (_, mut m) = ops_matcher("(a{0,50}){0,200}", Limits::new().readings(readings));
        let mut failed = None;
        for step in 0..100 {
            match m.fill_mask(&mut mask) {
                Ok(()) => {
                    assert!(formwork::bitmask::get_bit(&mask, long_a), "step {step}");
                    m.consume(long_a).unwrap();
                }
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        let err = failed.expect("the readings limit is reached");
        let MatchErrorKind::Limit(exceeded) = err.kind() else {
            panic!("{err}")
        };
        assert_eq!(exceeded.kind, LimitKind::Readings);
        if !m.is_accepting() {
            went_over += 1;
            assert_eq!(m.consume(long_a).unwrap_err().kind(), err.kind());
            m.rollback(1).unwrap();
            assert!(m.is_accepting());
        }
    }
    assert!(went_over > 0);
}

/// A history of 3 tokens: rolling back 3 restores the mask from 3 tokens ago, 4 is refused
/// with the number available, and the matcher counts every token consumed.
#[test]
fn the_rollback_history_is_capped() {
    let vocab = tokenizers::qwen3();
    let (_, mut m) = ops_matcher(r"[a-z]+(, [a-z]+)*", Limits::new().history(3));
    let tokens = tokens_of(vocab, "alpha, beta, gamma, delta");
    let mut masks = Vec::new();
    let mut mask = vec![0u32; vocab.mask_words()];
    for &t in &tokens {
        m.fill_mask(&mut mask).unwrap();
        masks.push(mask.clone());
        m.consume(t).unwrap();
    }
    assert_eq!(m.num_consumed(), tokens.len());
    let err = m.rollback(4).unwrap_err();
    assert_eq!(
        err.kind(),
        &MatchErrorKind::RollbackTooFar {
            requested: 4,
            available: 3
        }
    );
    m.rollback(3).unwrap();
    m.fill_mask(&mut mask).unwrap();
    assert_eq!(mask, masks[tokens.len() - 3]);
    assert_eq!(m.num_consumed(), tokens.len() - 3);
    assert!(m.rollback(1).is_err(), "the history was emptied");
}

/// Compiled regexes are kept within a byte budget, however many distinct patterns come.
#[test]
fn the_regex_cache_is_bounded_in_bytes() {
    let budget = 1 << 20;
    let compiler = RegexCompiler::new().with_cache_bytes(budget);
    for i in 0..2_000 {
        compiler
            .compile(&format!("[a-z]{{{i}}}-(x|y{i})+[0-9]{{1,{}}}", i % 50 + 1))
            .unwrap();
    }
    let stats = compiler.cache_stats();
    assert!(stats.bytes <= budget, "{stats:?}");
    assert!(stats.evictions > 0, "{stats:?}");
    assert!(stats.entries > 0, "{stats:?}");
}
