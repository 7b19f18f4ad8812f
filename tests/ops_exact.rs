//! The operator backend's masks equal the brute-force oracle bit for bit, at every step of
//! valid texts, for regexes and operator compositions, on the Qwen3 and Mistral vocabularies,
//! with DFA fusion on (the default) and off (pure operator compositions).

use std::sync::Arc;

use formwork::front::regex::regex_to_ir;
use formwork::ir::{ExprId, Grammar, GrammarBuilder};
use formwork::ops::{
    leaf::Terminator, lower, Leaf, LowerConfig, OpsMatcher, ProgramBuilder, Runtime, Unit,
};
use formwork::vocab::Vocab;
use formwork::ByteSet;
use formwork_testkit::oracle::assert_masks_match_oracle;
use formwork_testkit::tokenizers;

fn grammar_of(build: impl FnOnce(&mut GrammarBuilder) -> ExprId) -> (Grammar, ExprId) {
    let mut g = GrammarBuilder::new();
    let root = build(&mut g);
    let start = g.rule("start");
    g.define(start, root).unwrap();
    (g.finish(start).unwrap(), root)
}

fn check_grammar(
    label: &str,
    vocab: &Vocab,
    grammar: &Grammar,
    root: ExprId,
    texts: &[&str],
    limits: &[usize],
) {
    let runtime = Runtime::new(vocab.clone(), 256 << 20);
    for &limit in limits {
        let program = Arc::new(
            lower(
                grammar,
                root,
                vocab,
                &LowerConfig::new().dfa_state_limit(limit),
            )
            .unwrap(),
        );
        for text in texts {
            let tokens = vocab.encode(text).unwrap();
            let mut m = OpsMatcher::new(runtime.clone(), program.clone());
            let label = format!(
                "{label} limit={limit} text={text:?} program={}",
                program.describe()
            );
            assert_masks_match_oracle(&label, vocab, grammar, &mut m, &tokens);
        }
    }
}

fn check_regex(vocab: &Vocab, pattern: &str, texts: &[&str], limits: &[usize]) {
    let (grammar, root) = grammar_of(|g| regex_to_ir(pattern, g).unwrap());
    check_grammar(
        &format!("regex {pattern:?}"),
        vocab,
        &grammar,
        root,
        texts,
        limits,
    );
}

/// Fusion on, and small limits that force operator compositions.
const ALL_LIMITS: &[usize] = &[2000, 4, 1];
const FUSED_AND_SMALL: &[usize] = &[2000, 8];

fn regex_suite(vocab: &Vocab) {
    check_regex(
        vocab,
        r"[0-9]+(\.[0-9]+)*",
        &["12.345.6", "7", "2024.11.21"],
        ALL_LIMITS,
    );
    check_regex(vocab, r"\d+(\.\d+)*", &["12.3", "١٢٣.٤"], ALL_LIMITS);
    check_regex(vocab, r"abc|abd|ab", &["abc", "abd", "ab"], ALL_LIMITS);
    check_regex(
        vocab,
        r"(foo|foobar|fob)+baz",
        &["foobarfoobaz", "fobbaz"],
        ALL_LIMITS,
    );
    check_regex(
        vocab,
        r"a{2,5}b{0,3}c?",
        &["aaab", "aaaaabbbc", "aa"],
        ALL_LIMITS,
    );
    check_regex(
        vocab,
        r"[a-z]{3,40}",
        &["hello", "abcdefghijklmnopqrstuvwxyz"],
        ALL_LIMITS,
    );
    check_regex(
        vocab,
        r"[0-9]{1,5000}",
        &["123456789012345678901234567890", "0"],
        &[2000, 1],
    );
    check_regex(
        vocab,
        r"\p{Greek}+ \p{Han}{2,}",
        &["αβγ 你好世界"],
        FUSED_AND_SMALL,
    );
    check_regex(vocab, r"(?s:.){0,30}", &["hello 世界 🎉", ""], &[2000]);
    check_regex(
        vocab,
        r"[a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,4}",
        &["john.doe@example.com"],
        ALL_LIMITS,
    );
    check_regex(
        vocab,
        r#""([^"\\]|\\.)*""#,
        &[r#""he said \"hi\"""#, r#""""#],
        FUSED_AND_SMALL,
    );
    check_regex(vocab, r"true|false|null", &["true", "null"], ALL_LIMITS);
    check_regex(
        vocab,
        r"\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2}Z)?",
        &["2026-11-21T21:45:09Z", "1999-01-01"],
        &[2000],
    );
    check_regex(vocab, r"( [a-z]+)*\.", &[" hello world.", "."], ALL_LIMITS);
    check_regex(vocab, r"(ab|a)(bc|c)", &["abc"], ALL_LIMITS);
    check_regex(vocab, r" *[a-z]+ *", &["   hi  ", "x"], ALL_LIMITS);
    check_regex(vocab, r"(a|b)*abb", &["abababb", "abb"], ALL_LIMITS);
}

#[test]
fn regexes_on_qwen3() {
    regex_suite(tokenizers::qwen3());
}

#[test]
fn regexes_on_mistral() {
    regex_suite(tokenizers::mistral());
}

/// UTF-8 text: any character, as the IR's byte sequences.
fn utf8_char(g: &mut GrammarBuilder) -> ExprId {
    regex_to_ir(r"(?s:.)", g).unwrap()
}

#[test]
fn chat_turn_with_special_tokens_lowers_to_write_and_wait() {
    let vocab = tokenizers::qwen3();
    let (grammar, root) = grammar_of(|g| {
        let open = g.special("<|im_start|>");
        let role = g.text("assistant\n");
        let ch = utf8_char(g);
        let body = g.repeat(ch, 0, None);
        let close = g.special("<|im_end|>");
        g.seq([open, role, body, close])
    });
    let program = lower(&grammar, root, vocab, &LowerConfig::new()).unwrap();
    assert_eq!(program.describe(), "Seq(Write, Wait)");
    check_grammar(
        "chat turn",
        vocab,
        &grammar,
        root,
        &[
            "<|im_start|>assistant\nHello there! 你好 🎉<|im_end|>",
            "<|im_start|>assistant\n<|im_end|>",
        ],
        &[2000],
    );
}

#[test]
fn outline_sections_with_special_separators() {
    let vocab = tokenizers::qwen3();
    let (grammar, root) = grammar_of(|g| {
        let ch = utf8_char(g);
        let text = g.repeat(ch, 0, None);
        let mut sections = Vec::new();
        for id in ["1", "1.1", "2"] {
            let start = g.special("<|vision_start|>");
            let id_text = g.text(&format!("{id} "));
            let pad = g.special("<|vision_pad|>");
            let end = g.special("<|vision_end|>");
            sections.push(g.seq([start, id_text, text, pad, text, end]));
        }
        g.seq(sections)
    });
    check_grammar(
        "outline",
        vocab,
        &grammar,
        root,
        &["<|vision_start|>1 Intro<|vision_pad|>What it is.<|vision_end|><|vision_start|>1.1 Scope<|vision_pad|> Why.<|vision_end|><|vision_start|>2 End<|vision_pad|>Done<|vision_end|>"],
        &[2000, 8],
    );
}

/// The IR of "UTF-8 text up to the first `terminator`, then `after`", written out as a
/// right-linear grammar from a naive failure function: an independent spec for `Wait`.
fn text_until_grammar(terminator: &str, after: &str) -> (Grammar, ExprId) {
    let t = terminator.as_bytes();
    assert!(terminator.is_ascii());
    // Longest suffix of t[..k] + b that is a prefix of t.
    let delta = |k: usize, b: u8| -> usize {
        let mut s: Vec<u8> = t[..k].to_vec();
        s.push(b);
        (0..=s.len().min(t.len()))
            .rev()
            .find(|&l| s[s.len() - l..] == t[..l])
            .unwrap()
    };
    grammar_of(|g| {
        let rules: Vec<_> = (0..t.len()).map(|k| g.rule(&format!("s{k}"))).collect();
        let non_ascii = regex_to_ir(r"[^\x00-\x7f]", g).unwrap();
        let tail = g.text(after);
        for k in 0..t.len() {
            // One branch per successor state: the ASCII bytes leading there form one class.
            let mut by_next: Vec<ByteSet> = vec![ByteSet::EMPTY; t.len() + 1];
            for b in 0u8..=127 {
                by_next[delta(k, b)].insert(b);
            }
            let mut branches = Vec::new();
            for (next, bytes) in by_next
                .into_iter()
                .enumerate()
                .filter(|(_, c)| !c.is_empty())
            {
                let class = g.class(bytes);
                let rest = if next == t.len() {
                    tail
                } else {
                    g.rule_ref(rules[next])
                };
                branches.push(g.seq([class, rest]));
            }
            let r0 = g.rule_ref(rules[0]);
            branches.push(g.seq([non_ascii, r0]));
            let body = g.alt(branches);
            g.define(rules[k], body).unwrap();
        }
        g.rule_ref(rules[0])
    })
}

fn check_wait_program(vocab: &Vocab, terminator: &str, after: &str, texts: &[&str]) {
    let (grammar, _) = text_until_grammar(terminator, after);
    let content = formwork::ops::RegexCompiler::new()
        .leaf(r"(?s:.)*")
        .unwrap();
    let wait = Leaf::wait(
        &content,
        &[Terminator::Text(terminator.as_bytes().to_vec())],
    )
    .unwrap();
    let mut p = ProgramBuilder::new();
    let w = p.wait(Arc::new(wait), &[None]).unwrap();
    let tail = p.write_text(after);
    let root = p.seq(&[w, tail]);
    let program = Arc::new(p.finish(root).unwrap());
    let runtime = Runtime::new(vocab.clone(), 256 << 20);
    for text in texts {
        let tokens = vocab.encode(text).unwrap();
        let mut m = OpsMatcher::new(runtime.clone(), program.clone());
        assert_masks_match_oracle(
            &format!("wait until {terminator:?}: {text:?}"),
            vocab,
            &grammar,
            &mut m,
            &tokens,
        );
    }
}

#[test]
fn wait_with_multibyte_text_terminators() {
    check_wait_program(
        tokenizers::qwen3(),
        "</tool_call>",
        "\nDONE",
        &[
            "call f(x) < / </tool </tool_call>\nDONE",
            "</tool_call>\nDONE",
        ],
    );
    check_wait_program(tokenizers::mistral(), "]]", ";", &["a]b]];", "]];"]);
    check_wait_program(
        tokenizers::qwen3(),
        "aab",
        "!",
        &["aaaab!", "abaab!", "xaab!"],
    );
}

#[test]
fn composed_regex_pieces_cross_operator_boundaries() {
    let vocab = tokenizers::qwen3();
    let (grammar, root) = grammar_of(|g| {
        let word = regex_to_ir(r"[a-z]+", g).unwrap();
        let comma = g.text(", ");
        let num = regex_to_ir(r"[0-9]+", g).unwrap();
        let item = g.seq([word, comma, num]);
        let sep = g.text("; ");
        let more = g.seq([sep, item]);
        let tail = g.repeat(more, 0, Some(3));
        g.seq([item, tail])
    });
    check_grammar(
        "composed",
        vocab,
        &grammar,
        root,
        &["hello, 42; world, 7", "a, 1; b, 2; c, 3; d, 4"],
        &[2000, 1],
    );
}

#[test]
fn handwritten_operator_program_matches_the_oracle() {
    // \d+(\.\d+)* built from operators by hand (the WGrammar paper's example), ASCII digits.
    let vocab = tokenizers::qwen3();
    let digit = Arc::new(formwork::ops::RegexCompiler::new().leaf(r"[0-9]").unwrap());
    let mut p = ProgramBuilder::new();
    let d = p.leaf(digit.clone());
    let digits = p.do_while(d, 1, None);
    let dot = p.write(&[Unit::Byte(b'.')]);
    let d2 = p.leaf(digit);
    let more = p.do_while(d2, 1, None);
    let part = p.seq(&[dot, more]);
    let parts = p.do_while(part, 0, None);
    let root = p.seq(&[digits, parts]);
    let program = Arc::new(p.finish(root).unwrap());
    assert_eq!(
        program.describe(),
        "Seq(DoWhile{1,}(Dfa), DoWhile{0,}(Seq(Write, DoWhile{1,}(Dfa))))"
    );
    let (grammar, _) = grammar_of(|g| regex_to_ir(r"[0-9]+(\.[0-9]+)*", g).unwrap());
    let runtime = Runtime::new(vocab.clone(), 64 << 20);
    for text in ["3.14.159", "2026"] {
        let mut m = OpsMatcher::new(runtime.clone(), program.clone());
        assert_masks_match_oracle(text, vocab, &grammar, &mut m, &vocab.encode(text).unwrap());
    }
}
