//! Adaptive storage for cached masks (XGrammar §3.2): a mask is kept as whichever of three forms
//! is smallest.

use crate::base::bitmask::{clear_bit, get_bit, iter_ones, set_bit};
use crate::base::token::TokenId;

/// How many bitset words cost as much to write as one listed id (measured on Qwen3's 4,748
/// words: writing a Rejected list of ~2,000 ids took 4x a 19 KB copy).
const LIST_COST_PER_ID: usize = 8;

/// A cached mask over a fixed universe (usually the vocabulary's text tokens).
///
/// - `Accepted`: the allowed ids (reject-heavy masks: a Write's next byte allows a few tokens);
/// - `Rejected`: the universe minus these ids (accept-heavy masks: free text);
/// - `Bitset`: the words themselves, when neither list is smaller.
///
/// # Example
///
/// ```
/// use formwork::mask::StoredMask;
///
/// let universe = vec![u32::MAX; 1024]; // 32,768 tokens, all text
/// let mut words = universe.clone();
/// words[0] &= !1; // everything but token 0
/// let stored = StoredMask::from_words(&words, &universe);
/// assert!(matches!(stored, StoredMask::Rejected(ref ids) if &ids[..] == [0]));
/// let mut out = vec![0; 1024];
/// stored.write_to(&mut out, &universe);
/// assert_eq!(out, words);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoredMask {
    /// Only these ids are allowed.
    Accepted(Box<[TokenId]>),
    /// Every id of the universe but these is allowed.
    Rejected(Box<[TokenId]>),
    /// The full bitset.
    Bitset(Box<[u32]>),
}

impl StoredMask {
    /// Chooses the smallest form for `words`, a subset of `universe`.
    pub fn from_words(words: &[u32], universe: &[u32]) -> StoredMask {
        // A list is kept only while applying it (one scattered bit per id) costs less than
        // copying the bitset (one streaming word per 32 tokens): masks are written every step,
        // so speed decides before size does.
        let bitset = StoredMask::list_limit(words.len());
        // One pass that counts a list only while it could still win (past `bitset` it cannot)
        // and only words with bits to count: without a `popcnt` target feature each count is
        // a dozen instructions, and most masks are nearly empty or nearly full. A count that
        // stopped is past `bitset`, which is all the choice below asks of it.
        let (mut accepted, mut rejected) = (0, 0);
        for (&w, &u) in words.iter().zip(universe) {
            if w != 0 && accepted <= bitset {
                accepted += w.count_ones() as usize;
            }
            if u & !w != 0 && rejected <= bitset {
                rejected += (u & !w).count_ones() as usize;
            }
            if accepted > bitset && rejected > bitset {
                return StoredMask::Bitset(words.into());
            }
        }
        if accepted <= rejected && accepted <= bitset {
            StoredMask::Accepted(iter_ones(words).collect())
        } else if rejected <= bitset {
            let missing: Vec<u32> = words.iter().zip(universe).map(|(w, u)| u & !w).collect();
            StoredMask::Rejected(iter_ones(&missing).collect())
        } else {
            StoredMask::Bitset(words.into())
        }
    }

    /// Most ids an `Accepted` mask over `words` words holds: past it, writing the list costs
    /// more than copying the bitset.
    fn list_limit(words: usize) -> usize {
        words / LIST_COST_PER_ID
    }

    /// Overwrites `out` with the mask.
    pub fn write_to(&self, out: &mut [u32], universe: &[u32]) {
        match self {
            StoredMask::Accepted(ids) => {
                out.fill(0);
                ids.iter().for_each(|&t| set_bit(out, t));
            }
            StoredMask::Rejected(ids) => {
                out.copy_from_slice(universe);
                ids.iter().for_each(|&t| clear_bit(out, t));
            }
            StoredMask::Bitset(words) => out.copy_from_slice(words),
        }
    }

    /// `out |= mask`.
    pub fn or_into(&self, out: &mut [u32], universe: &[u32]) {
        match self {
            StoredMask::Accepted(ids) => ids.iter().for_each(|&t| set_bit(out, t)),
            StoredMask::Rejected(ids) => {
                // Universe words with the rejected bits cleared, word by word.
                let mut next = ids.iter().peekable();
                for (i, (o, &u)) in out.iter_mut().zip(universe).enumerate() {
                    let mut w = u;
                    while let Some(&&t) = next.peek() {
                        if t as usize / 32 != i {
                            break;
                        }
                        w &= !(1 << (t % 32));
                        next.next();
                    }
                    *o |= w;
                }
            }
            StoredMask::Bitset(words) => {
                out.iter_mut().zip(words.iter()).for_each(|(o, w)| *o |= w)
            }
        }
    }

    /// Number of allowed ids. For tests.
    #[cfg(feature = "internals")]
    pub fn count(&self, universe: &[u32]) -> usize {
        match self {
            StoredMask::Accepted(ids) => ids.len(),
            StoredMask::Rejected(ids) => {
                universe
                    .iter()
                    .map(|w| w.count_ones() as usize)
                    .sum::<usize>()
                    - ids.len()
            }
            StoredMask::Bitset(words) => words.iter().map(|w| w.count_ones() as usize).sum(),
        }
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        match self {
            StoredMask::Accepted(ids) | StoredMask::Rejected(ids) => ids.len() * 4,
            StoredMask::Bitset(words) => words.len() * 4,
        }
    }
}

/// A mask being built, as the list of its ids while they are few enough for an `Accepted`
/// mask and as words once they are not: a cached mask of a literal's state or a choice of
/// ids allows a handful of tokens, and zeroing, scanning and listing the vocabulary's words
/// for it cost several times the trie walk that found them.
pub(crate) struct MaskBuilder {
    ids: Vec<TokenId>,
    /// Empty until the ids outgrow the list (or a caller needs the words).
    words: Vec<u32>,
    width: usize,
}

impl MaskBuilder {
    /// An empty mask of `width` words.
    pub fn new(width: usize) -> MaskBuilder {
        MaskBuilder {
            ids: Vec::new(),
            words: Vec::new(),
            width,
        }
    }

    /// `stored` (over `universe`), to add to.
    pub fn from_stored(stored: &StoredMask, universe: &[u32]) -> MaskBuilder {
        let mut b = MaskBuilder::new(universe.len());
        match stored {
            StoredMask::Accepted(ids) => b.add(ids),
            _ => stored.write_to(b.words(), universe),
        }
        b
    }

    /// Allows `tokens`.
    pub fn add(&mut self, tokens: &[TokenId]) {
        let listed = self.ids.len() + tokens.len() <= StoredMask::list_limit(self.width);
        if self.words.is_empty() && listed {
            self.ids.extend_from_slice(tokens);
        } else {
            let words = self.words();
            tokens.iter().for_each(|&t| set_bit(words, t));
        }
    }

    /// The mask as words, from now on kept so.
    pub fn words(&mut self) -> &mut [u32] {
        if self.words.is_empty() {
            self.words = vec![0; self.width];
            for &t in &self.ids {
                set_bit(&mut self.words, t);
            }
            self.ids = Vec::new();
        }
        &mut self.words
    }

    /// The mask in the form [`StoredMask::from_words`] chooses for it; `universe_ones` is the
    /// number of ids in `universe`.
    pub fn finish(mut self, universe: &[u32], universe_ones: usize) -> StoredMask {
        if self.words.is_empty() {
            self.ids.sort_unstable();
            self.ids.dedup();
            let n = self.ids.len();
            // `from_words` keeps the ids when they are no more than the list limit and no
            // more than the universe's ids they leave out.
            let inside = self.ids.iter().all(|&t| get_bit(universe, t));
            if inside && n <= universe_ones - n {
                return StoredMask::Accepted(self.ids.into());
            }
        }
        StoredMask::from_words(self.words(), universe)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_round_trips_through_write_and_or() {
        let universe: Vec<u32> = (0..10)
            .map(|i| if i == 9 { 0x0fff_ffff } else { u32::MAX })
            .collect();
        let cases: Vec<Vec<u32>> = vec![
            vec![0; 10],
            universe.clone(),
            {
                let mut w = vec![0; 10];
                w[3] = 0b1010;
                w
            },
            {
                let mut w = universe.clone();
                w[9] &= !(1 << 5);
                w
            },
            (0..10).map(|i| 0x5555_5555 & universe[i]).collect(),
        ];
        for words in cases {
            let stored = StoredMask::from_words(&words, &universe);
            let mut out = vec![0xdead_beef; 10];
            stored.write_to(&mut out, &universe);
            assert_eq!(out, words, "{stored:?}");
            let mut or = vec![0; 10];
            or[0] = 1;
            stored.or_into(&mut or, &universe);
            let mut expected = words.clone();
            expected[0] |= 1;
            assert_eq!(or, expected);
            assert_eq!(
                stored.count(&universe),
                words.iter().map(|w| w.count_ones() as usize).sum::<usize>()
            );
        }
    }

    #[test]
    fn a_built_mask_takes_the_form_from_words_chooses() {
        let universe: Vec<u32> = (0..64).map(|i| if i == 63 { 0xff } else { !0 }).collect();
        let ones = universe.iter().map(|w| w.count_ones() as usize).sum();
        let limit = StoredMask::list_limit(universe.len());
        let cases: Vec<Vec<TokenId>> = vec![
            vec![],
            vec![5, 3, 5],
            (0..limit as u32).collect(),
            (0..limit as u32 + 1).collect(),
            (0..2_000).step_by(3).collect(),
            vec![64 * 32 - 1],
        ];
        for ids in cases {
            let mut words = vec![0; universe.len()];
            ids.iter().for_each(|&t| set_bit(&mut words, t));
            let mut b = MaskBuilder::new(universe.len());
            ids.chunks(7).for_each(|c| b.add(c));
            assert_eq!(
                b.finish(&universe, ones),
                StoredMask::from_words(&words, &universe),
                "{ids:?}"
            );
            let stored = StoredMask::from_words(&words, &universe);
            let mut again = MaskBuilder::from_stored(&stored, &universe);
            again.add(&[1]);
            set_bit(&mut words, 1);
            assert_eq!(
                again.finish(&universe, ones),
                StoredMask::from_words(&words, &universe)
            );
        }
    }
}
