//! Differential driving: a matcher against the reference recognizer, step by step.

use formwork::ir::recognizer::{Chart, Recognizer};
use formwork::ir::Grammar;
use formwork::vocab::Vocab;
use formwork::{Matcher, TokenId};

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
    let mut out = vec![0u32; vocab.mask_words()];
    for (step, &t) in tokens.iter().enumerate() {
        compare(label, step, vocab, &rec, &chart, matcher, &mut out);
        assert!(
            chart.push_token(&rec, vocab, t),
            "{label}: the oracle rejects token {t} ({}) at step {step}: the test text is not in the language",
            vocab.display_token(t)
        );
        matcher
            .consume(t)
            .unwrap_or_else(|e| panic!("{label}: step {step}: {e}"));
    }
    compare(label, tokens.len(), vocab, &rec, &chart, matcher, &mut out);
    assert!(
        matcher.is_accepting(),
        "{label}: the full text must be accepted"
    );
    assert!(chart.is_accepting(&rec));
}

fn compare(
    label: &str,
    step: usize,
    vocab: &Vocab,
    rec: &Recognizer,
    chart: &Chart,
    matcher: &mut dyn Matcher,
    out: &mut [u32],
) {
    let expected = chart.mask(rec, vocab);
    matcher.fill_mask(out).unwrap();
    if out != expected.words() {
        let got: Vec<TokenId> = formwork::bitmask::iter_ones(out).collect();
        let want: Vec<TokenId> = expected.iter().collect();
        let extra: Vec<String> = got
            .iter()
            .filter(|t| !expected.contains(**t))
            .take(8)
            .map(|&t| vocab.display_token(t))
            .collect();
        let missing: Vec<String> = want
            .iter()
            .filter(|t| !got.contains(t))
            .take(8)
            .map(|&t| vocab.display_token(t))
            .collect();
        panic!(
            "{label}: step {step}: mask differs from the oracle: {} allowed vs {} expected; extra {:?}; missing {:?}",
            got.len(),
            want.len(),
            extra,
            missing
        );
    }
}
