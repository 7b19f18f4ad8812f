//! Driving matchers like a model would: seeded random walks over allowed tokens, and checking
//! where an invalid output is rejected (against the reference recognizer's verdict).

use formwork::bitmask::get_bit;
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
    walk_classes(vocab, &Classes::new(vocab), m, rng, max_steps)
}

/// The tokens a walk picks among, as bitmasks over a vocabulary's ids: EOS, special (not EOS),
/// text (every other id) and text with a [`STRUCTURAL`] byte. A step counts and picks the
/// allowed tokens of a class word by word: listing and partitioning every allowed token at
/// every step was most of the time of the walks over the Qwen3 vocabulary.
struct Classes {
    eos: Vec<u32>,
    special: Vec<u32>,
    text: Vec<u32>,
    structural: Vec<u32>,
}

impl Classes {
    fn new(vocab: &Vocab) -> Classes {
        let words = vocab.mask_words();
        let mut c = Classes {
            eos: vec![0; words],
            special: vec![0; words],
            text: vec![u32::MAX; words],
            structural: vec![0; words],
        };
        for t in 0..(words * 32) as TokenId {
            let (w, bit) = (t as usize / 32, 1u32 << (t % 32));
            if vocab.is_eos(t) {
                c.eos[w] |= bit;
                c.text[w] &= !bit;
            } else if vocab.is_special(t) {
                c.special[w] |= bit;
                c.text[w] &= !bit;
            } else if vocab.token_bytes(t).iter().any(|b| STRUCTURAL.contains(b)) {
                c.structural[w] |= bit;
            }
        }
        c
    }
}

/// How many tokens `mask` allows in `class`.
fn count(mask: &[u32], class: &[u32]) -> usize {
    mask.iter()
        .zip(class)
        .map(|(m, c)| (m & c).count_ones() as usize)
        .sum()
}

/// The `k`-th token (from 0, by id) that `mask` allows in `class`; `k` is below their count.
fn nth(mask: &[u32], class: &[u32], mut k: usize) -> TokenId {
    for (w, (m, c)) in mask.iter().zip(class).enumerate() {
        let mut bits = m & c;
        let n = bits.count_ones() as usize;
        if k < n {
            (0..k).for_each(|_| bits &= bits - 1);
            return (w * 32) as TokenId + bits.trailing_zeros();
        }
        k -= n;
    }
    panic!("the mask allows fewer tokens of the class than asked for")
}

/// [`random_walk`] with the vocabulary's [`Classes`] built by the caller.
fn walk_classes(
    vocab: &Vocab,
    classes: &Classes,
    m: &mut dyn Matcher,
    rng: &mut Rng,
    max_steps: usize,
) -> Option<Vec<u8>> {
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut out = Vec::new();
    for _ in 0..max_steps {
        m.fill_mask(&mut mask).unwrap();
        let eos = count(&mask, &classes.eos);
        let specials = count(&mask, &classes.special);
        let text = count(&mask, &classes.text);
        assert!(
            eos + specials + text > 0,
            "stuck with an empty mask after {:?}",
            String::from_utf8_lossy(&out)
        );
        if eos > 0 && (specials + text == 0 || rng.below(2) == 0) {
            m.consume(nth(&mask, &classes.eos, 0)).unwrap();
            assert!(m.is_terminated());
            return Some(out);
        }
        let structural = count(&mask, &classes.structural);
        let (pool, n) = if specials > 0 && (text == 0 || rng.below(3) == 0) {
            (&classes.special, specials)
        } else if structural > 0 && rng.below(2) == 0 {
            (&classes.structural, structural)
        } else {
            (&classes.text, text)
        };
        let t = nth(&mask, pool, rng.below(n));
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
    let classes = Classes::new(vocab);
    let mut ended = 0;
    for _ in 0..walks {
        if let Some(out) = walk_classes(vocab, &classes, &mut *matcher(), rng, max_steps) {
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
