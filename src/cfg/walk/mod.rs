//! The walks that push tokens' bytes through Earley rows for the mask cache:
//!
//! - `row_dfa`: Earley rows memoized as a lazily built DFA;
//! - `stepper`: one byte at a time through that DFA or the chart;
//! - `trie_walk`: the whole token trie, with slice proofs;
//! - `horizon`: how far a unit's own transitions carry a slice's strings;
//! - `list_walk`: a sorted list of trie positions.

pub(crate) mod horizon;
pub(crate) mod list_walk;
pub(crate) mod row_dfa;
pub(crate) mod stepper;
pub(crate) mod trie_walk;

/// A token's position in the vocabulary trie, the order token lists are kept in (see
/// [`cache`](super::cache)).
pub(crate) type Position = u32;
