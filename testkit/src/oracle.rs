//! The reference recognizer (`formwork::ir::reference`, a plain Earley parser) as the judge of
//! languages and masks: membership of a text, and a matcher's mask compared bit for bit with
//! the recognizer's at every step of a text.

use std::sync::Arc;

use formwork::cfg::CfgGrammar;
use formwork::ir::recognizer::{Chart, Recognizer, Terminal};
use formwork::ir::Grammar;
use formwork::mask::TokenMask;
use formwork::vocab::Vocab;
use formwork::{Matcher, TokenId};

use crate::grammars::{compile, configs, ir};

/// The language of a grammar, as a membership test.
pub struct Lang(Recognizer);

impl Lang {
    /// The language of `grammar`.
    pub fn new(grammar: &Grammar) -> Lang {
        Lang(Recognizer::new(grammar))
    }

    /// Is the sequence of bytes and special tokens in the language?
    pub fn accepts_units(&self, units: &[Terminal]) -> bool {
        let mut chart = self.0.start();
        units.iter().all(|u| chart.push(&self.0, *u)) && chart.is_accepting(&self.0)
    }

    /// Are these bytes (no special tokens) in the language?
    pub fn accepts_bytes(&self, bytes: &[u8]) -> bool {
        let units: Vec<Terminal> = bytes.iter().map(|&b| Terminal::Byte(b)).collect();
        self.accepts_units(&units)
    }

    /// Is the text (as bytes, no special tokens) in the language?
    pub fn accepts(&self, text: &str) -> bool {
        self.accepts_bytes(text.as_bytes())
    }

    /// Asserts that every text is in the language.
    #[track_caller]
    pub fn yes(&self, texts: &[&str]) {
        for t in texts {
            assert!(self.accepts(t), "should accept {t}");
        }
    }

    /// Asserts that no text is in the language.
    #[track_caller]
    pub fn no(&self, texts: &[&str]) {
        for t in texts {
            assert!(!self.accepts(t), "should reject {t}");
        }
    }
}

/// The matcher's current mask.
pub fn mask_of(m: &mut (impl Matcher + ?Sized), vocab: &Vocab) -> TokenMask {
    let mut words = vec![0u32; vocab.mask_words()];
    m.fill_mask(&mut words).unwrap();
    TokenMask::from_words(words, vocab.mask_width())
}

/// The one mask comparison: panics with the first differing tokens if the masks differ.
pub fn assert_same_mask(got: &TokenMask, expected: &TokenMask, vocab: &Vocab, what: &str) {
    if got == expected {
        return;
    }
    let diff: Vec<String> = (0..vocab.mask_width() as TokenId)
        .filter(|&t| got.contains(t) != expected.contains(t))
        .take(12)
        .map(|t| {
            format!(
                "{}{}",
                if got.contains(t) { "+" } else { "-" },
                vocab.display_token(t)
            )
        })
        .collect();
    panic!(
        "{what}: mask differs from the oracle ({} vs {} allowed; +extra -missing): {}",
        got.count(),
        expected.count(),
        diff.join(" ")
    );
}

/// One step of a walk checked against an oracle: `m`'s mask must equal `expected` (pushed on
/// `seen`, for the rollback checks after the walk). A token outside it ends the walk of a text
/// that must be invalid (`valid` false), and `m` must refuse it and stay where it was. Returns
/// whether `token` may be consumed.
#[track_caller]
pub fn step_matches(
    m: &mut (impl Matcher + ?Sized),
    vocab: &Vocab,
    expected: &TokenMask,
    token: TokenId,
    valid: bool,
    seen: &mut Vec<TokenMask>,
    what: &str,
) -> bool {
    let got = mask_of(m, vocab);
    assert_same_mask(&got, expected, vocab, what);
    seen.push(got);
    if expected.contains(token) {
        return true;
    }
    assert!(!valid, "{what}: a valid text's token is refused");
    assert!(
        m.consume(token).is_err(),
        "{what}: a masked token is consumed"
    );
    assert_same_mask(&mask_of(m, vocab), expected, vocab, what);
    false
}

/// Walks `tokens` through `matcher` and the reference chart; at every step (and after the
/// last token) the matcher's mask must equal the oracle's bit for bit.
pub fn assert_masks_match_oracle(
    label: &str,
    vocab: &Vocab,
    grammar: &Grammar,
    matcher: &mut dyn Matcher,
    tokens: &[TokenId],
) {
    let rec = Recognizer::new(grammar);
    let mut chart = rec.start();
    for (step, &t) in tokens.iter().enumerate() {
        let what = format!("{label}: step {step}");
        assert_same_mask(
            &mask_of(matcher, vocab),
            &chart.mask(&rec, vocab),
            vocab,
            &what,
        );
        assert!(
            chart.push_token(&rec, vocab, t),
            "{label}: the oracle rejects token {t} ({}) at step {step}: the test text is not in the language",
            vocab.display_token(t)
        );
        matcher
            .consume(t)
            .unwrap_or_else(|e| panic!("{label}: step {step}: {e}"));
    }
    let what = format!("{label}: step {}", tokens.len());
    assert_same_mask(
        &mask_of(matcher, vocab),
        &chart.mask(&rec, vocab),
        vocab,
        &what,
    );
    assert!(
        matcher.is_accepting(),
        "{label}: the full text must be accepted"
    );
    assert!(chart.is_accepting(&rec));
}

/// For every text: tokenize with `vocab.encode`, and at every step (and after the last token)
/// compare each Earley configuration's mask with the reference recognizer's, bit for bit; then
/// check the texts end accepting with EOS allowed.
pub fn check_oracle(vocab: &Vocab, gbnf: &str, texts: &[&str]) {
    let ir = ir(gbnf);
    let engines: Vec<(&str, Arc<CfgGrammar>)> = configs()
        .into_iter()
        .map(|(name, c)| (name, compile(vocab, c, &ir)))
        .collect();
    check_engines(vocab, &ir, &engines, texts);
}

/// [`check_oracle`] for grammars compiled by the caller (e.g. sharing one compiler's cache).
pub fn check_engines(
    vocab: &Vocab,
    ir: &Grammar,
    engines: &[(&str, Arc<CfgGrammar>)],
    texts: &[&str],
) {
    let rec = Recognizer::new(ir);
    for text in texts {
        let tokens = vocab.encode(text).unwrap();
        let mut matchers: Vec<_> = engines.iter().map(|(n, g)| (*n, g.matcher())).collect();
        let mut chart: Chart = rec.start();
        for step in 0..=tokens.len() {
            let expected = chart.mask(&rec, vocab);
            for (name, m) in matchers.iter_mut() {
                let got = mask_of(m, vocab);
                let at = tokens
                    .get(step)
                    .map_or("<end>".to_string(), |&t| vocab.display_token(t));
                assert_same_mask(
                    &got,
                    &expected,
                    vocab,
                    &format!("{name}, {text:?} step {step} ({at})"),
                );
            }
            let Some(&t) = tokens.get(step) else { break };
            assert!(
                expected.contains(t),
                "{text:?}: token {step} is not allowed by the oracle"
            );
            for (name, m) in matchers.iter_mut() {
                m.consume(t)
                    .unwrap_or_else(|e| panic!("{name}, {text:?} step {step}: {e}"));
            }
            assert!(chart.push_token(&rec, vocab, t));
        }
        for (name, m) in matchers.iter_mut() {
            assert!(
                m.is_accepting(),
                "{name}: {text:?} complete but not accepting"
            );
            let eos = vocab.eos_tokens()[0];
            m.consume(eos)
                .unwrap_or_else(|e| panic!("{name}: EOS after {text:?}: {e}"));
            assert!(m.is_terminated());
        }
    }
}
