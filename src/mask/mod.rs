//! Token bitmasks: the layout inference engines consume, adaptive storage for cached masks and
//! the bounded global mask cache.
//!
//! A mask over `V` tokens is `ceil(V / 32)` u32 words; bit `t % 32` of word `t / 32` set means
//! token `t` is allowed. This is the layout of xgrammar's `allocate_token_bitmask` and of the
//! vLLM / SGLang grammar backends, so a row can be copied to the device as is.

mod cache;
mod store;

pub use cache::{CacheStats, MaskCache, Weigh};
pub(crate) use store::MaskBuilder;
pub use store::StoredMask;

use crate::base::bitmask::{clear_bit, get_bit, iter_ones, set_bit, words_for};
use crate::base::token::TokenId;

/// An owned token mask.
///
/// # Example
///
/// ```
/// use formwork::TokenMask;
///
/// let mut a = TokenMask::new(70);
/// a.insert(3);
/// a.insert(69);
/// let mut b = TokenMask::new(70);
/// b.insert(69);
/// a.intersect_with(&b);
/// assert_eq!(a.iter().collect::<Vec<_>>(), vec![69]);
/// assert_eq!(a.words().len(), 3);
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct TokenMask {
    words: Vec<u32>,
    n_tokens: usize,
}

impl std::fmt::Debug for TokenMask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TokenMask({} of {})", self.count(), self.n_tokens)
    }
}

impl TokenMask {
    /// An empty mask (nothing allowed) over `n_tokens` tokens.
    pub fn new(n_tokens: usize) -> TokenMask {
        TokenMask {
            words: vec![0; words_for(n_tokens)],
            n_tokens,
        }
    }

    /// A mask from existing words; `words.len()` must be `ceil(n_tokens / 32)`.
    ///
    /// # Panics
    ///
    /// If the word count does not match.
    pub fn from_words(words: Vec<u32>, n_tokens: usize) -> TokenMask {
        assert_eq!(
            words.len(),
            words_for(n_tokens),
            "mask words for {n_tokens} tokens"
        );
        TokenMask { words, n_tokens }
    }

    /// Number of tokens covered.
    pub fn n_tokens(&self) -> usize {
        self.n_tokens
    }

    /// The words, in the device layout.
    pub fn words(&self) -> &[u32] {
        &self.words
    }

    /// The words, mutable.
    pub fn words_mut(&mut self) -> &mut [u32] {
        &mut self.words
    }

    /// Allows `token`.
    pub fn insert(&mut self, token: TokenId) {
        set_bit(&mut self.words, token)
    }

    /// Forbids `token`.
    pub fn remove(&mut self, token: TokenId) {
        clear_bit(&mut self.words, token);
    }

    /// Is `token` allowed?
    pub fn contains(&self, token: TokenId) -> bool {
        get_bit(&self.words, token)
    }

    /// Number of allowed tokens.
    pub fn count(&self) -> usize {
        self.words.iter().map(|w| w.count_ones() as usize).sum()
    }

    /// Allowed tokens, ascending.
    pub fn iter(&self) -> impl Iterator<Item = TokenId> + '_ {
        iter_ones(&self.words)
    }

    /// Forbids everything.
    pub fn clear(&mut self) {
        self.words.fill(0)
    }

    /// `self |= other`.
    pub fn union_with(&mut self, other: &TokenMask) {
        self.words
            .iter_mut()
            .zip(&other.words)
            .for_each(|(a, b)| *a |= b);
    }

    /// `self &= other`.
    pub fn intersect_with(&mut self, other: &TokenMask) {
        self.words
            .iter_mut()
            .zip(&other.words)
            .for_each(|(a, b)| *a &= b);
    }

    /// `self &= !other`.
    pub fn subtract(&mut self, other: &TokenMask) {
        self.words
            .iter_mut()
            .zip(&other.words)
            .for_each(|(a, b)| *a &= !b);
    }
}
