//! Token bitmask rows: `ceil(V / 32)` u32 words, bit `t % 32` of word `t / 32` set means
//! token `t` is allowed (the layout of xgrammar's `allocate_token_bitmask` and of the vLLM /
//! SGLang grammar backends, so a row can be copied to the device as is).

use super::token::TokenId;

/// Number of u32 words of a mask over `n_tokens` tokens.
pub fn words_for(n_tokens: usize) -> usize {
    n_tokens.div_ceil(32)
}

/// Sets bit `token` in a mask row.
#[inline]
pub fn set_bit(words: &mut [u32], token: TokenId) {
    words[token as usize / 32] |= 1 << (token % 32);
}

/// Clears bit `token` in a mask row.
#[inline]
pub fn clear_bit(words: &mut [u32], token: TokenId) {
    words[token as usize / 32] &= !(1 << (token % 32));
}

/// Reads bit `token` of a mask row; ids past the row are not allowed.
#[inline]
pub fn get_bit(words: &[u32], token: TokenId) -> bool {
    words
        .get(token as usize / 32)
        .is_some_and(|w| w & (1 << (token % 32)) != 0)
}

/// The allowed ids of a mask row, ascending.
pub fn iter_ones(words: &[u32]) -> Ones<'_> {
    Ones {
        words,
        base: 0,
        next_base: 0,
        current: 0,
    }
}

/// Iterator of [`iter_ones`]: a plain loop over words that skips zero words (a flattened
/// iterator of per-word iterators did not compile to one, and masks are mostly zeros).
#[derive(Clone, Debug)]
pub struct Ones<'a> {
    words: &'a [u32],
    /// The word being read (its bits not yet returned) and the id of its bit 0.
    current: u32,
    base: TokenId,
    /// Id of bit 0 of `words[0]`.
    next_base: TokenId,
}

impl Iterator for Ones<'_> {
    type Item = TokenId;

    #[inline]
    fn next(&mut self) -> Option<TokenId> {
        while self.current == 0 {
            let (&w, rest) = self.words.split_first()?;
            self.words = rest;
            self.current = w;
            self.base = self.next_base;
            self.next_base += 32;
        }
        let bit = self.current.trailing_zeros();
        self.current &= self.current - 1;
        Some(self.base + bit)
    }
}
