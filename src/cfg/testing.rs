//! What the unit tests of the mask cache (`cache/`) and the walks (`walk/`) share: a
//! vocabulary small enough to check token by token, grammars compiled for it, charts after a
//! prefix, and the brute-force oracle (the plain recognizer, one token at a time).

use std::sync::Arc;

use crate::base::bitmask::iter_ones;
use crate::base::token::TokenId;
use crate::cfg::chart::{Chart, Item, EXT};
use crate::cfg::program::SCANS;
use crate::cfg::walk::row_dfa::StateDfa;
use crate::cfg::walk::trie_walk::TrieWalk;
use crate::cfg::{CfgCompiler, CfgConfig, CfgGrammar};
use crate::front::gbnf::gbnf_to_ir;
use crate::ir::recognizer::{Recognizer, Terminal};
use crate::limits::{Budget, Deadline, Limits};
use crate::vocab::{TokenKind, Vocab};

/// Grammars that exercise the cache levels, with prefixes to test them after: called rules
/// (the context level), recursion past the row DFA's depth, a counted loop over a wide class
/// (the near-bound level and the iteration starts), alternatives sharing prefixes, a counted
/// loop over a long body (an array's objects, their text read by slices at the near-bound
/// level), a counted loop calling another (words: the outer one relaxed in context, its
/// bound within a token of [`small_vocab`]'s words).
pub(crate) const CASES: &[(&str, &[&str])] = &[
    (
        r#"root ::= "[" item ("," item)* "]"
           item ::= "a"+ | "\"" [a-z]* "\"" | "-"? [0-9]+"#,
        &["", "[", "[a", "[\"ab", "[\"ab\",", "[-1", "[a,\"\""],
    ),
    (
        r#"root ::= v
           v ::= "a" | "[" v ("," v)* "]" | "{" v ":" v "}""#,
        &["", "[", "[[", "[[[", "[[[[[[[[[[[", "[a,[", "{a:", "{[a]:{"],
    ),
    (
        r#"root ::= "\"" [a-zA-Z]{2,6} "\"" ("," root)?"#,
        &[
            "",
            "\"",
            "\"a",
            "\"ab",
            "\"abcd",
            "\"abcde",
            "\"abcdef",
            "\"ab\",\"abc",
        ],
    ),
    (
        r#"root ::= ("ab" | "a" | "b")* "!" | "abab" [0-9]"#,
        &["", "a", "ab", "aba", "abab", "b"],
    ),
    (
        r#"root ::= "[" obj ("," obj){1,3} "]"
           obj ::= "{\"k\":\"" [a-z ]* "\"}""#,
        &[
            "",
            r#"[{"k":"ab"},{"k":"a"#,
            r#"[{"k":"ab"},{"k":"a""#,
            r#"[{"k":""},{"k":"a"},{"k":"b a"#,
            r#"[{"k":""},{"k":""},{"k":""},{"k":"a"#,
        ],
    ),
    (
        r#"root ::= "\"" ([a-z]{1,40} "!"){0,40} "\"""#,
        &[
            "\"",
            "\"a!b",
            "\"a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!b",
            "\"a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!b",
            "\"a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!b",
            "\"a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!a!",
        ],
    ),
];

/// A grammar of [`CASES`] after one of its prefixes.
pub(crate) struct Case<'a> {
    pub gbnf: &'a str,
    pub prefix: &'a str,
    pub g: &'a CfgGrammar,
    pub rec: &'a Recognizer,
    /// The grammar's chart after the prefix.
    pub chart: Chart,
    /// The text tokens the oracle allows there.
    pub allowed: Vec<TokenId>,
}

impl Case<'_> {
    /// Where a check failed.
    pub fn at(&self) -> String {
        format!("{} after {:?}", self.gbnf, self.prefix)
    }
}

/// Runs `check` on every grammar of [`CASES`], compiled by `compiler`, after each of its
/// prefixes.
pub(crate) fn each_case(compiler: &CfgCompiler, mut check: impl FnMut(&mut Case)) {
    for &(gbnf, prefixes) in CASES {
        let (g, rec) = compile(compiler, gbnf);
        for prefix in prefixes {
            let chart = chart_after(&g, prefix.as_bytes());
            let allowed = oracle(&rec, &g.vocab, prefix.as_bytes());
            let (g, rec) = (&g, &rec);
            check(&mut Case {
                gbnf,
                prefix,
                g,
                rec,
                chart,
                allowed,
            });
        }
    }
}

/// Every byte alone, every pair over the bytes the [`CASES`] use, longer tokens that cross
/// their pieces, two-byte characters, and one special token that is EOS.
pub(crate) fn small_vocab() -> Vocab {
    let mut tokens: Vec<Vec<u8>> = (0..=u8::MAX).map(|b| vec![b]).collect();
    let alphabet = b"ab{}[]\":,0-!zA";
    for &x in alphabet {
        for &y in alphabet {
            tokens.push(vec![x, y]);
        }
    }
    let longer = [
        "abc", "aaaa", "abab", "ababab", "\"a\"", "\"ab", "[a,", "a]", "a,[", "[[a", "abcdefg",
        "abcdef", "abcde", "Abcd", "ab\",", "0123", "-12", "é", "éa", "zzz\"", "ab!", "{a:a}",
        "a!b!", "a!a!a!", "ab!ab!",
    ];
    for t in longer {
        if !tokens.iter().any(|have| have == t.as_bytes()) {
            tokens.push(t.as_bytes().to_vec());
        }
    }
    tokens.push(b"<|end|>".to_vec());
    let end = tokens.len() as TokenId - 1;
    Vocab::from_token_bytes(tokens, &[end], &[end]).expect("a valid vocabulary")
}

/// The configuration of tests that step charts themselves: every unit built when the grammar
/// compiles (a chart halts at a unit not built yet; the matcher is what builds it).
pub(crate) fn built_up_front() -> CfgConfig {
    CfgConfig::new().eager_states(usize::MAX)
}

/// A budget and a deadline no test reaches.
pub(crate) fn budget() -> Budget {
    Limits::new().budget()
}

/// `gbnf` compiled by `compiler`, and its recognizer (the oracle).
pub(crate) fn compile(compiler: &CfgCompiler, gbnf: &str) -> (Arc<CfgGrammar>, Recognizer) {
    let ir = gbnf_to_ir(gbnf, "test").expect("a valid grammar");
    let g = compiler
        .compile_within(&ir, &Deadline::never())
        .expect("it compiles");
    (g, Recognizer::new(&ir))
}

/// The grammar's chart after `prefix` (which it must take).
pub(crate) fn chart_after(g: &CfgGrammar, prefix: &[u8]) -> Chart {
    let mut chart = g.initial.clone();
    for &b in prefix {
        let taken = chart.push_byte(&g.prog(), b, &budget()).unwrap();
        assert!(
            taken,
            "the grammar takes {:?}",
            String::from_utf8_lossy(prefix)
        );
    }
    chart
}

/// The text tokens the recognizer takes whole after `prefix`, one token at a time.
pub(crate) fn oracle(rec: &Recognizer, vocab: &Vocab, prefix: &[u8]) -> Vec<TokenId> {
    let mut chart = rec.start();
    prefix.iter().for_each(|&b| {
        assert!(chart.push(rec, Terminal::Byte(b)));
    });
    text_tokens(vocab)
        .filter(|&t| {
            let mut c = chart.clone();
            vocab
                .token_bytes(t)
                .iter()
                .all(|&b| c.push(rec, Terminal::Byte(b)))
        })
        .collect()
}

/// The vocabulary's text tokens, by id.
pub(crate) fn text_tokens(vocab: &Vocab) -> impl Iterator<Item = TokenId> + '_ {
    (0..vocab.len() as TokenId).filter(|&t| vocab.kind(t) == Some(TokenKind::Text))
}

/// The ids set in a mask row.
pub(crate) fn ones(words: &[u32]) -> Vec<TokenId> {
    iter_ones(words).collect()
}

/// The items of the chart's last row that scan bytes themselves (what the cache classifies).
pub(crate) fn scannable(g: &CfgGrammar, chart: &Chart) -> Vec<Item> {
    let scans = |it: &&Item| g.prog().state(it.state).flags & SCANS != 0;
    chart.last_row().iter().filter(scans).copied().collect()
}

/// The rows of a chart holding `item` alone, its unit entered from an unknown context (what
/// the item level walks).
pub(crate) fn item_rows(item: Item) -> Vec<Vec<Item>> {
    vec![vec![Item {
        origin: EXT,
        ..item
    }]]
}

/// One trie walk of a chart holding exactly `rows`, with a row DFA of its own: the accepted
/// tokens' mask words, and the uncertain tokens (they run past an unknown context), sorted.
pub(crate) fn walk_rows(g: &CfgGrammar, rows: &[Vec<Item>]) -> (Vec<u32>, Vec<TokenId>) {
    let mut chart = Chart::from_rows(&g.prog(), rows);
    let mut dfa = StateDfa::new(0, g.prog().n_classes());
    let (mut words, mut uncertain) = (vec![0u32; g.vocab.mask_words()], Vec::new());
    let budget = budget();
    TrieWalk::new(
        &g.prog(),
        &g.vocab,
        &mut chart,
        &mut dfa,
        &mut words,
        Some(&mut uncertain),
        &budget,
    )
    .walk()
    .unwrap();
    uncertain.sort_unstable();
    (words, uncertain)
}
