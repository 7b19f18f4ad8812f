//! Driving matchers like a model would: seeded random walks over allowed tokens, and checking
//! where an invalid output is rejected (against the reference recognizer's verdict).

use formwork::bitmask::{get_bit, iter_ones};
use formwork::ir::recognizer::Recognizer;
use formwork::ir::Grammar;
use formwork::vocab::Vocab;
use formwork::{Matcher, TokenId};

use crate::rng::Rng;

/// How a walk renders a special token: its content between 0xFF bytes, which valid UTF-8 text
/// never contains, so a checker can tell `<|vision_pad|>` the token from the same text.
pub fn render_special(content: &str) -> Vec<u8> {
    [&[0xFF][..], content.as_bytes(), &[0xFF]].concat()
}

/// Tokens as a walk renders them (text bytes, special tokens by [`render_special`]).
pub fn render_text(vocab: &Vocab, tokens: &[TokenId]) -> Vec<u8> {
    let mut out = Vec::new();
    for &t in tokens.iter().filter(|&&t| !vocab.is_eos(t)) {
        if vocab.is_special(t) {
            out.extend(render_special(&vocab.display_token(t)));
        } else {
            out.extend_from_slice(vocab.token_bytes(t));
        }
    }
    out
}

/// The regex (for `regex::bytes`) of a special token rendered by [`render_special`].
pub fn special_re(content: &str) -> String {
    format!("(?-u:\\xFF){}(?-u:\\xFF)", regex::escape(content))
}

/// Bytes that move structured output forward (quotes, brackets, separators, newlines).
const STRUCTURAL: &[u8] = b"\"{}[],:\n";

/// Samples allowed tokens until EOS or `max_steps`, like a model that likes to finish: EOS
/// with probability 1/2 when allowed, a special token with probability 1/3 when one is allowed,
/// a token with a structural byte half of the time, otherwise any allowed token. Returns the
/// output (special tokens rendered by [`render_special`]) if the walk ended on EOS.
pub fn random_walk(
    vocab: &Vocab,
    m: &mut dyn Matcher,
    rng: &mut Rng,
    max_steps: usize,
) -> Option<Vec<u8>> {
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut out = Vec::new();
    for _ in 0..max_steps {
        m.fill_mask(&mut mask).unwrap();
        let allowed: Vec<TokenId> = iter_ones(&mask).collect();
        assert!(
            !allowed.is_empty(),
            "stuck with an empty mask after {:?}",
            String::from_utf8_lossy(&out)
        );
        let (eos, rest): (Vec<TokenId>, Vec<TokenId>) =
            allowed.into_iter().partition(|&t| vocab.is_eos(t));
        if !eos.is_empty() && (rest.is_empty() || rng.below(2) == 0) {
            m.consume(eos[0]).unwrap();
            assert!(m.is_terminated());
            return Some(out);
        }
        let (specials, text): (Vec<TokenId>, Vec<TokenId>) =
            rest.into_iter().partition(|&t| vocab.is_special(t));
        let structural: Vec<TokenId> = text
            .iter()
            .copied()
            .filter(|&t| vocab.token_bytes(t).iter().any(|b| STRUCTURAL.contains(b)))
            .collect();
        let pool = if !specials.is_empty() && (text.is_empty() || rng.below(3) == 0) {
            &specials
        } else if !structural.is_empty() && rng.below(2) == 0 {
            &structural
        } else {
            &text
        };
        let t = pool[rng.below(pool.len())];
        m.consume(t).unwrap();
        out.extend(render_text(vocab, &[t]));
    }
    None
}

/// Runs `walks` [`random_walk`]s of at most `max_steps` on fresh matchers from `matcher`,
/// checks every output that ended on EOS with `check` (panicking with its error and the
/// output), and returns how many ended.
pub fn checked_walks(
    vocab: &Vocab,
    matcher: impl Fn() -> Box<dyn Matcher>,
    rng: &mut Rng,
    walks: usize,
    max_steps: usize,
    check: impl Fn(&[u8]) -> Result<(), String>,
) -> usize {
    let mut ended = 0;
    for _ in 0..walks {
        if let Some(out) = random_walk(vocab, &mut *matcher(), rng, max_steps) {
            check(&out).unwrap_or_else(|e| panic!("{e} in {:?}", String::from_utf8_lossy(&out)));
            ended += 1;
        }
    }
    ended
}

/// Steps `text`'s tokens through the matcher and the reference recognizer of `grammar`. The
/// recognizer decides where the text leaves the language (the first token it cannot push); the
/// matcher must allow and consume every token before it, and at that token clear the mask bit
/// and refuse `consume` with its state unchanged. Returns the rejected step and token, or
/// `None` if the whole text is a viable prefix (then the matcher took every token).
pub fn rejection_point(
    vocab: &Vocab,
    grammar: &Grammar,
    m: &mut dyn Matcher,
    text: &str,
) -> Option<(usize, TokenId)> {
    let tokens = vocab.encode(text).unwrap();
    let rec = Recognizer::new(grammar);
    let mut chart = rec.start();
    let mut mask = vec![0u32; vocab.mask_words()];
    for (step, &t) in tokens.iter().enumerate() {
        m.fill_mask(&mut mask).unwrap();
        if !chart.push_token(&rec, vocab, t) {
            assert!(
                !get_bit(&mask, t),
                "step {step}: the oracle rejects {} but the mask allows it",
                vocab.display_token(t)
            );
            assert!(
                m.consume(t).is_err(),
                "step {step}: consume accepted a rejected token"
            );
            let mut after = vec![0u32; vocab.mask_words()];
            m.fill_mask(&mut after).unwrap();
            assert_eq!(mask, after, "a rejected token changed the state");
            return Some((step, t));
        }
        assert!(
            get_bit(&mask, t),
            "step {step}: the oracle accepts {} but the mask does not",
            vocab.display_token(t)
        );
        m.consume(t).unwrap();
    }
    assert_eq!(m.is_accepting(), chart.is_accepting(&rec));
    None
}
