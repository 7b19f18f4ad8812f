//! The vocabulary as the mask cache reads it: tokens by length and trie position.

use crate::base::bitmask::{get_bit, iter_ones};
use crate::base::token::TokenId;
use crate::cfg::cache::entry::UNKNOWN_STARTS;
use crate::cfg::cache::starts::is_continuation;
use crate::cfg::walk::Position;
use crate::vocab::{Subtree, TrieStep, TrieVisitor, Vocab};

/// What the cache needs to know of the vocabulary's text tokens (orders, character counts),
/// computed once per compiler.
#[derive(Debug)]
pub(crate) struct VocabIndex {
    /// Longest first (for counters near their bound).
    by_len: Box<[TokenId]>,
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
        let mut by_len: Vec<TokenId> = (0..vocab.len() as TokenId)
            .filter(|&t| order.0[t as usize] != u32::MAX)
            .collect();
        by_len.sort_by_key(|&t| std::cmp::Reverse(vocab.token_bytes(t).len()));
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
            by_len: by_len.into(),
            position: order.0.into(),
            characters,
        }
    }

    /// The text tokens longer than `n` bytes.
    pub(super) fn longer_than(&self, vocab: &Vocab, n: u32) -> &[TokenId] {
        &self.by_len[..self
            .by_len
            .partition_point(|&t| vocab.token_bytes(t).len() > n as usize)]
    }

    /// Bytes of the longest token set in `words` (0 if none). Few set bits are read directly:
    /// a forced stretch accepts a handful of tokens, and the longest-first scan passed most
    /// of the vocabulary before meeting one (~80 µs of a ~90 µs first mask after `{"`).
    pub(super) fn longest(&self, vocab: &Vocab, words: &[u32]) -> u32 {
        let set: usize = words.iter().map(|w| w.count_ones() as usize).sum();
        if set * 16 >= self.by_len.len() {
            return self
                .by_len
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
