//! Two matchers of one language, one of them exact by construction (the oracle), walked side
//! by side: the same masks, acceptance and refusals at every step, and rollback, reset and
//! a whole text as one step giving back the masks seen.

use formwork::vocab::Vocab;
use formwork::{ConstraintMatcher, Matcher, TokenId};

use crate::oracle::{assert_same_mask, mask_of};
use crate::rng::Rng;

/// How many walks, how long, from which seed.
#[derive(Clone, Copy, Debug)]
pub struct Walks {
    pub walks: usize,
    pub steps: usize,
    pub seed: u64,
}

/// `walks.walks` random walks of up to `walks.steps` tokens from `exact`'s masks, `pick`
/// choosing among the allowed tokens (the last token, end of sequence, left out), and now
/// and then a token outside the mask (both must refuse it, as a token and as text): `got`'s
/// masks equal `exact`'s at every step, acceptance too, and `got` forces no byte `exact`
/// does not. After each walk, the text as one step, rollback up to 40 steps and reset give
/// back the masks seen.
#[track_caller]
pub fn walks_agree(
    vocab: &Vocab,
    exact: &ConstraintMatcher,
    got: &ConstraintMatcher,
    walks: Walks,
    mut pick: impl FnMut(&mut Rng, &[TokenId]) -> TokenId,
) {
    let mut rng = Rng::new(walks.seed);
    let eos = vocab.len() as TokenId - 1;
    for walk in 0..walks.walks {
        let (mut exact, mut got) = (exact.clone(), got.clone());
        let start = got.clone();
        let mut text = Vec::new();
        let mut seen = Vec::new();
        for step in 0..walks.steps {
            let what = format!(
                "walk {walk} step {step} after {:?}",
                String::from_utf8_lossy(&text)
            );
            let expected = mask_of(&mut exact, vocab);
            let mask = mask_of(&mut got, vocab);
            assert_same_mask(&mask, &expected, vocab, &what);
            assert_eq!(got.is_accepting(), exact.is_accepting(), "{what}");
            let forced = got.forced_bytes();
            assert!(
                exact.forced_bytes().starts_with(&forced),
                "{what}: forces {forced:?}"
            );
            if step == 0 {
                seen.push(mask);
            }
            if rng.below(8) == 0 {
                let t = rng.below(vocab.len()) as TokenId;
                if !expected.contains(t) {
                    assert!(got.consume(t).is_err(), "{what}: refuses {t}");
                    assert!(
                        vocab.is_special(t) || got.consume_bytes(vocab.token_bytes(t)).is_err(),
                        "{what}: refuses {:?} as text",
                        String::from_utf8_lossy(vocab.token_bytes(t))
                    );
                    continue;
                }
            }
            let allowed: Vec<TokenId> = expected.iter().filter(|&t| t != eos).collect();
            if allowed.is_empty() {
                break;
            }
            let t = pick(&mut rng, &allowed);
            exact.consume(t).unwrap_or_else(|e| panic!("{what}: {e}"));
            match rng.below(2) {
                0 => got.consume(t),
                _ => got.consume_bytes(vocab.token_bytes(t)),
            }
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            text.extend_from_slice(vocab.token_bytes(t));
            seen.push(mask_of(&mut got, vocab));
        }
        let mut whole = start.clone();
        whole.consume_bytes(&text).unwrap();
        let what = format!("walk {walk}: the text as one step");
        assert_same_mask(
            &mask_of(&mut whole, vocab),
            seen.last().unwrap(),
            vocab,
            &what,
        );
        whole.rollback(1).unwrap();
        assert_same_mask(&mask_of(&mut whole, vocab), &seen[0], vocab, &what);
        let mut fresh = got.clone();
        fresh.reset();
        assert_same_mask(&mask_of(&mut fresh, vocab), &seen[0], vocab, "reset");
        let last = seen.len() - 1;
        for back in 1..=last.min(40) {
            let mut fork = got.clone();
            if fork.rollback(back).is_err() {
                break;
            }
            let what = format!("walk {walk}: rolled back {back}");
            assert_same_mask(&mask_of(&mut fork, vocab), &seen[last - back], vocab, &what);
        }
    }
}
