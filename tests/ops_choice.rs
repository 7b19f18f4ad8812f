//! `Leaf::choice`, the trie leaf a request's set of strings becomes: its masks equal the
//! oracle's for the alternation of the strings, inside operator programs, on Qwen3 and on a
//! byte vocabulary where the set uses every byte value.

use std::sync::Arc;

use formwork::ir::{ExprId, Grammar, GrammarBuilder};
use formwork::ops::{Leaf, OpsMatcher, Program, ProgramBuilder, Runtime, Unit};
use formwork::vocab::Vocab;
use formwork::{CompileErrorKind, TokenId};
use formwork_testkit::oracle::assert_masks_match_oracle;
use formwork_testkit::tokenizers;

/// `"[" (one of strings) "]"` as an operator program with a choice leaf, and as IR.
fn bracketed(strings: &[&[u8]]) -> (Arc<Program>, Grammar) {
    let mut p = ProgramBuilder::new();
    let open = p.write(&[Unit::Byte(b'[')]);
    let choice = p.leaf(Arc::new(Leaf::choice(strings.iter().copied()).unwrap()));
    let close = p.write(&[Unit::Byte(b']')]);
    let root = p.seq(&[open, choice, close]);
    let program = Arc::new(p.finish(root).unwrap());

    let mut g = GrammarBuilder::new();
    let options: Vec<ExprId> = strings.iter().map(|s| g.bytes(s)).collect();
    let alt = g.alt(options);
    let (o, c) = (g.bytes(b"["), g.bytes(b"]"));
    let body = g.seq([o, alt, c]);
    let start = g.rule("start");
    g.define(start, body).unwrap();
    (program, g.finish(start).unwrap())
}

fn check(vocab: &Vocab, strings: &[&[u8]], texts: &[Vec<TokenId>]) {
    let (program, grammar) = bracketed(strings);
    let runtime = Runtime::new(vocab.clone(), 64 << 20);
    for tokens in texts {
        let mut m = OpsMatcher::new(runtime.clone(), program.clone());
        let label = format!(
            "choice {:?}",
            strings
                .iter()
                .map(|s| String::from_utf8_lossy(s))
                .collect::<Vec<_>>()
        );
        assert_masks_match_oracle(&label, vocab, &grammar, &mut m, tokens);
    }
}

#[test]
fn choice_leaves_match_the_oracle_on_qwen3() {
    let vocab = tokenizers::qwen3();
    let enc = |s: &str| vocab.encode(s).unwrap();
    let ids: Vec<&[u8]> = ["1", "1.1", "1.10", "10", "2", "2.1.1"]
        .iter()
        .map(|s| s.as_bytes())
        .collect();
    check(
        vocab,
        &ids,
        &[enc("[1.10]"), enc("[1]"), enc("[2.1.1]"), enc("[10]")],
    );
    let words: Vec<&[u8]> = ["alpha", "alphabet", "beta", "βήτα", "日本", ""]
        .iter()
        .map(|s| s.as_bytes())
        .collect();
    check(
        vocab,
        &words,
        &[enc("[alphabet]"), enc("[βήτα]"), enc("[]"), enc("[日本]")],
    );
}

#[test]
fn a_choice_over_every_byte_value() {
    // All 256 single bytes plus longer strings: no byte is left for an "other" class.
    let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    tokens.extend([
        b"[a".to_vec(),
        b"a]".to_vec(),
        b"ab".to_vec(),
        b"\xffb]".to_vec(),
        b"</s>".to_vec(),
    ]);
    let eos = (tokens.len() - 1) as TokenId;
    let vocab = Vocab::from_token_bytes(tokens, &[eos], &[eos]).unwrap();
    let mut strings: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    strings.extend([b"ab".to_vec(), b"\xffb".to_vec(), b"a\x00".to_vec()]);
    let strings: Vec<&[u8]> = strings.iter().map(|s| s.as_slice()).collect();
    let (open, close, a, b) = (
        b'[' as TokenId,
        b']' as TokenId,
        b'a' as TokenId,
        b'b' as TokenId,
    );
    let texts = vec![
        vec![open, a, close],    // [ a ]
        vec![open, 259],         // [ \xffb]
        vec![256, b, close],     // [a b ]
        vec![open, a, 0, close], // [ a \0 ]
        vec![open, 257],         // [ a]
    ];
    check(&vocab, &strings, &texts);
}

#[test]
fn equal_sets_give_equal_leaves_and_an_empty_set_is_an_error() {
    let a = Leaf::choice(["b", "a", "ab"].map(str::as_bytes)).unwrap();
    let b = Leaf::choice(["ab", "a", "b", "a"].map(str::as_bytes)).unwrap();
    let c = Leaf::choice(["ab", "a"].map(str::as_bytes)).unwrap();
    assert_eq!(a.hash(), b.hash());
    assert_ne!(a.hash(), c.hash());
    assert_eq!(a.num_states(), 4); // start, a, b, ab
    let err = Leaf::choice(std::iter::empty::<&[u8]>()).unwrap_err();
    assert_eq!(err.kind(), CompileErrorKind::EmptyLanguage);
}
