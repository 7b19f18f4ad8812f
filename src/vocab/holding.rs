//! Token sets a sliced walk reads when it takes a slice only in part: the tokens holding a
//! byte its proof left out, and the tokens longer than the length its proof covers. Those
//! tokens are the ones it walks instead of accepting.

use crate::base::bitmask::set_bit;
use crate::base::token::TokenId;

use super::Vocab;

/// The text tokens holding one byte.
#[derive(Debug)]
pub(crate) struct Holding {
    /// Their trie positions, ascending (a walk finds them under a node by its position range).
    pub positions: Box<[u32]>,
    /// Mask words with their ids.
    pub words: Box<[u32]>,
}

impl Holding {
    pub(super) fn new(vocab: &Vocab, byte: u8) -> Holding {
        let trie = vocab.trie();
        let positions = trie.positions_holding(byte);
        let mut words = vec![0u32; vocab.mask_words()];
        positions
            .iter()
            .for_each(|&p| set_bit(&mut words, trie.token_at(p)));
        Holding {
            positions: positions.into(),
            words: words.into(),
        }
    }
}

/// The text tokens, longest first (in trie order within a length: a counting sort).
pub(super) fn by_length(vocab: &Vocab) -> Box<[TokenId]> {
    let trie = vocab.trie();
    let len = |p: u32| vocab.token_bytes(trie.token_at(p)).len();
    let mut starts = vec![0usize; trie.max_depth() + 2];
    (0..trie.num_tokens() as u32).for_each(|p| starts[trie.max_depth() - len(p) + 1] += 1);
    for i in 1..starts.len() {
        starts[i] += starts[i - 1];
    }
    let mut tokens = vec![0; trie.num_tokens()];
    for p in 0..trie.num_tokens() as u32 {
        let slot = &mut starts[trie.max_depth() - len(p)];
        tokens[*slot] = trie.token_at(p);
        *slot += 1;
    }
    tokens.into()
}
