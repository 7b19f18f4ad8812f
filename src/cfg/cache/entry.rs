//! What the mask cache holds: its entries, the domains that keep their keys apart, and how
//! a mask is stored.

use std::sync::Arc;

use crate::cfg::cache::view::GrammarView;
use crate::cfg::walk::Position;
use crate::limits::{Budget, LimitExceeded};
use crate::mask::{StoredMask, Weigh};

pub(super) const LEVEL1_DOMAIN: u64 = 0x6366_676c_6576_0001;

pub(super) const LEVEL2_DOMAIN: u64 = 0x6366_676c_6576_0002;

pub(super) const NEAR_DOMAIN: u64 = 0x6366_676c_6576_0003;

pub(super) const NEAR_CONTEXT_DOMAIN: u64 = 0x6366_676c_6576_0004;

pub(super) const SETTLED_DOMAIN: u64 = 0x6366_676c_6576_0005;

pub(super) const OUTER_DOMAIN: u64 = 0x6366_676c_6576_0006;

pub(super) const STARTS_DOMAIN: u64 = 0x6366_676c_6576_0007;

/// A cached classification. Lists are sorted positions.
#[derive(Debug)]
pub(crate) enum CacheEntry {
    Item {
        accepted: StoredMask,
        /// Byte length of the longest accepted token, for a loop body's item (the only one
        /// asked how close a token comes to a bound).
        longest: Option<u32>,
        uncertain: Box<[Position]>,
    },
    Context {
        accepted: Box<[Position]>,
        uncertain: Box<[Position]>,
    },
    /// What a loop with this many iterations left makes of an item-level entry's accepted
    /// tokens: the ones it takes, and those it does not take but that may leave it after an
    /// iteration and go on in the context (`g` ending `[a-z]{8}`, then `d` starting the next
    /// repetition of an enclosing loop), for the whole chart to decide.
    NearBound {
        valid: StoredMask,
        uncertain: Box<[Position]>,
    },
    /// Per token id, the loop iterations it starts past the one in progress, for a lifted
    /// subject ([`iteration_starts`]); [`UNKNOWN_STARTS`] where that is not one number.
    Starts(Box<[u16]>),
}

/// A token whose iteration starts the table does not know (ambiguous boundaries on its path,
/// a structure too deep for the row DFA, or a token the walk rejected).
pub(super) const UNKNOWN_STARTS: u16 = u16::MAX;

impl Weigh for CacheEntry {
    fn weight(&self) -> usize {
        std::mem::size_of::<Self>()
            + match self {
                CacheEntry::Item {
                    accepted,
                    uncertain,
                    ..
                } => accepted.heap_bytes() + uncertain.len() * 4,
                CacheEntry::Context {
                    accepted,
                    uncertain,
                } => (accepted.len() + uncertain.len()) * 4,
                CacheEntry::NearBound { valid, uncertain } => {
                    valid.heap_bytes() + uncertain.len() * 4
                }
                CacheEntry::Starts(starts) => starts.len() * 2,
            }
    }
}

/// The cache's entry for `key`, computed and inserted if missing (a unit of work for the
/// lookup; an entry whose computation failed is not kept).
pub(super) fn cached(
    g: &GrammarView<'_>,
    key: u128,
    budget: &Budget,
    compute: impl FnOnce() -> Result<CacheEntry, LimitExceeded>,
) -> Result<Arc<CacheEntry>, LimitExceeded> {
    budget.spend(1)?;
    match g.cache.get(&key) {
        Some(entry) => Ok(entry),
        None => Ok(g.cache.insert(key, compute()?)),
    }
}

/// A cached token set in the form that is fastest to OR into a mask: an id list while it is
/// short, else the bitset (one vectorized pass beats thousands of scattered bit writes).
pub(super) fn stored(words: &[u32], universe: &[u32]) -> StoredMask {
    const MAX_IDS: usize = 256;
    match StoredMask::from_words(words, universe) {
        StoredMask::Accepted(ids) | StoredMask::Rejected(ids) if ids.len() > MAX_IDS => {
            StoredMask::Bitset(words.into())
        }
        small => small,
    }
}
