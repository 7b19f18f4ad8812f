//! The vocabulary as the mask cache reads it: tokens by length and trie position.

use crate::base::bitmask::{get_bit, iter_ones};
use crate::base::token::TokenId;
use crate::cfg::cache::entry::UNKNOWN_STARTS;
use crate::cfg::cache::starts::is_continuation;
use crate::cfg::walk::Position;
use crate::vocab::{Subtree, TrieStep, TrieVisitor, Vocab};

/// What the cache needs to know of the vocabulary's text tokens (positions, character
/// counts), computed once per compiler.
#[derive(Debug)]
pub(crate) struct VocabIndex {
    /// Position of each token (`u32::MAX` for non-text ids).
    pub(super) position: Box<[Position]>,
    /// Per token id, the UTF-8 characters its bytes start (bytes that are not continuation
    /// bytes), saturated.
    pub(super) characters: Box<[u16]>,
}

impl VocabIndex {
    pub(crate) fn new(vocab: &Vocab) -> VocabIndex {
        struct Order(Vec<u32>, u32);
        impl TrieVisitor for Order {
            type State = ();
            fn step(&mut self, _: &(), _: u8, _: usize, _: Subtree) -> TrieStep<()> {
                TrieStep::Enter(())
            }
            fn tokens(&mut self, _: &(), tokens: &[TokenId]) {
                for &t in tokens {
                    self.0[t as usize] = self.1;
                    self.1 += 1;
                }
            }
        }
        let mut order = Order(vec![u32::MAX; vocab.len()], 0);
        vocab.trie().walk((), &mut order);
        let characters = (0..vocab.len() as TokenId)
            .map(|t| {
                let starts = vocab
                    .token_bytes(t)
                    .iter()
                    .filter(|&&b| !is_continuation(b));
                starts.count().min(UNKNOWN_STARTS as usize - 1) as u16
            })
            .collect();
        VocabIndex {
            position: order.0.into(),
            characters,
        }
    }

    /// Bytes of the longest token set in `words` (0 if none). Few set bits are read directly:
    /// a forced stretch accepts a handful of tokens, and the longest-first scan passed most
    /// of the vocabulary before meeting one (~80 µs of a ~90 µs first mask after `{"`).
    pub(super) fn longest(&self, vocab: &Vocab, words: &[u32]) -> u32 {
        let set: usize = words.iter().map(|w| w.count_ones() as usize).sum();
        let by_length = vocab.by_length();
        if set * 16 >= by_length.len() {
            return by_length
                .iter()
                .find(|&&t| get_bit(words, t))
                .map_or(0, |&t| vocab.token_bytes(t).len() as u32);
        }
        iter_ones(words)
            .map(|t| vocab.token_bytes(t).len() as u32)
            .max()
            .unwrap_or(0)
    }

    /// The token's position in the trie.
    pub(super) fn position(&self, token: TokenId) -> Position {
        self.position[token as usize]
    }

    /// The tokens' positions, sorted.
    pub(super) fn positions(&self, tokens: &[TokenId]) -> Box<[Position]> {
        let mut positions: Vec<Position> = tokens.iter().map(|&t| self.position(t)).collect();
        positions.sort_unstable();
        positions.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::bitmask::set_bit;
    use crate::cfg::testing::{small_vocab, text_tokens};

    /// Positions number the text tokens in trie order (the trie gives each token back, and a
    /// token's bytes never sort before the previous one's); the other ids have none.
    #[test]
    fn positions_are_the_trie_order_of_text_tokens() {
        let vocab = small_vocab();
        let index = VocabIndex::new(&vocab);
        let text: Vec<TokenId> = text_tokens(&vocab).collect();
        for t in 0..vocab.len() as TokenId {
            match text.contains(&t) {
                true => assert_eq!(vocab.trie().token_at(index.position(t)), t),
                false => assert_eq!(index.position(t), u32::MAX),
            }
        }
        let in_order: Vec<&[u8]> = (0..text.len() as Position)
            .map(|p| vocab.token_bytes(vocab.trie().token_at(p)))
            .collect();
        assert!(in_order.is_sorted());
        let positions = index.positions(&[text[9], text[2], text[5]]);
        assert!(positions.is_sorted());
        assert_eq!(positions.len(), 3);
    }

    /// The vocabulary's `longer_than` is exactly the text tokens over a length; `longest` the
    /// longest token of a set, read either way (few tokens set, or many); `characters` counts
    /// the bytes that start a UTF-8 character.
    #[test]
    fn lengths_and_characters_of_tokens() {
        let vocab = small_vocab();
        let index = VocabIndex::new(&vocab);
        let len = |t: TokenId| vocab.token_bytes(t).len();
        for n in 0..8 {
            let mut longer = vocab.longer_than(n).to_vec();
            longer.sort_unstable();
            let want: Vec<TokenId> = text_tokens(&vocab).filter(|&t| len(t) > n).collect();
            assert_eq!(longer, want, "longer than {n}");
        }
        let mut words = vec![0u32; vocab.mask_words()];
        assert_eq!(index.longest(&vocab, &words), 0);
        let mut most = 0;
        for (i, t) in text_tokens(&vocab).enumerate() {
            // A handful first (read bit by bit), then most of the vocabulary (by length).
            if i % 40 == 7 || i > 100 {
                set_bit(&mut words, t);
                most = most.max(len(t) as u32);
                assert_eq!(index.longest(&vocab, &words), most, "after {i} tokens");
            }
        }
        for t in text_tokens(&vocab) {
            let bytes = vocab.token_bytes(t);
            let want = match std::str::from_utf8(bytes) {
                Ok(text) => text.chars().count(),
                // A lone continuation byte starts none; a lone lead byte one.
                Err(_) if bytes.len() == 1 => usize::from(bytes[0] & 0xC0 != 0x80),
                Err(_) => continue,
            };
            assert_eq!(index.characters[t as usize] as usize, want, "{bytes:?}");
        }
        let e_acute = text_tokens(&vocab).find(|&t| vocab.token_bytes(t) == "éa".as_bytes());
        assert_eq!(e_acute.map(|t| index.characters[t as usize]), Some(2));
    }
}
