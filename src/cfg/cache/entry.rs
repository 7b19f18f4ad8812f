//! What the mask cache holds: its entries, the domains that keep their keys apart, and how
//! a mask is stored.

use std::sync::Arc;

use crate::cfg::cache::view::GrammarView;
use crate::cfg::chart::Halt;
use crate::cfg::walk::Position;
use crate::limits::Budget;
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

impl CacheEntry {
    /// The tokens an item or context entry left to the next level.
    pub(super) fn uncertain(&self) -> &[Position] {
        match self {
            CacheEntry::Item { uncertain, .. } => uncertain,
            CacheEntry::Context { uncertain, .. } => uncertain,
            other => panic!("an item or context entry, not {other:?}"),
        }
    }
}

/// The parts of an entry of a known kind, for tests (a wrong kind is a failed test).
#[cfg(test)]
impl CacheEntry {
    pub(super) fn item_parts(&self) -> (&StoredMask, Option<u32>, &[Position]) {
        match self {
            CacheEntry::Item {
                accepted,
                longest,
                uncertain,
            } => (accepted, *longest, uncertain),
            other => panic!("an item entry, not {other:?}"),
        }
    }

    pub(super) fn context_parts(&self) -> (&[Position], &[Position]) {
        match self {
            CacheEntry::Context {
                accepted,
                uncertain,
            } => (accepted, uncertain),
            other => panic!("a context entry, not {other:?}"),
        }
    }
}

/// The cache's entry for `key`, computed and inserted if missing (a unit of work for the
/// lookup; an entry whose computation failed is not kept).
pub(super) fn cached(
    g: &GrammarView<'_>,
    key: u128,
    budget: &Budget,
    compute: impl FnOnce() -> Result<CacheEntry, Halt>,
) -> Result<Arc<CacheEntry>, Halt> {
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

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use super::*;
    use crate::base::bitmask::set_bit;
    use crate::cfg::testing::*;
    use crate::cfg::CfgCompiler;
    use crate::limits::Limits;

    /// Short lists stay lists; a list `StoredMask` would keep that is past 256 ids becomes the
    /// bitset; every form writes back the same set.
    #[test]
    fn stored_lists_few_ids_and_sets_the_rest() {
        // Qwen3's width: lists of a few hundred ids would still be smaller than the bitset.
        let universe = vec![u32::MAX; 4748];
        let set = |ids: &mut dyn Iterator<Item = u32>| {
            let mut words = vec![0u32; universe.len()];
            ids.for_each(|t| set_bit(&mut words, t));
            words
        };
        let few = set(&mut (0..200).map(|i| i * 7));
        let many = set(&mut (0..300).map(|i| i * 7));
        let all_but_few = set(&mut (3..universe.len() as u32 * 32));
        let all_but_many = set(&mut (0..universe.len() as u32 * 32).filter(|t| t % 300 != 0));
        for words in [&few, &many, &all_but_few, &all_but_many] {
            let mut back = vec![0u32; universe.len()];
            stored(words, &universe).or_into(&mut back, &universe);
            assert!(back == *words);
        }
        assert!(matches!(stored(&few, &universe), StoredMask::Accepted(ids) if ids.len() == 200));
        assert!(matches!(stored(&many, &universe), StoredMask::Bitset(_)));
        let rejected = stored(&all_but_few, &universe);
        assert!(matches!(rejected, StoredMask::Rejected(ids) if *ids == [0, 1, 2]));
        assert!(matches!(
            stored(&all_but_many, &universe),
            StoredMask::Bitset(_)
        ));
    }

    /// An entry is computed once per key and then shared; a failed computation is not kept;
    /// every lookup costs a unit of work.
    #[test]
    fn cached_computes_each_key_once() {
        let vocab = small_vocab();
        let compiler = CfgCompiler::new(&vocab, built_up_front());
        let (g, _) = compile(&compiler, CASES[0].0);
        let prog = g.prog();
        let view = g.view(&prog);
        let computed = Cell::new(0);
        let entry = || {
            computed.set(computed.get() + 1);
            Ok(CacheEntry::Starts(vec![1, 2, 3].into()))
        };
        let budget = budget();
        let first = cached(&view, 1, &budget, entry).unwrap();
        let again = cached(&view, 1, &budget, entry).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(computed.get(), 1);
        cached(&view, 2, &budget, entry).unwrap();
        assert_eq!(computed.get(), 2, "another key is another entry");
        let over = Halt::Limit(crate::limits::LimitExceeded {
            kind: crate::limits::LimitKind::MaskWork,
            value: 2,
            max: 1,
        });
        assert_eq!(
            cached(&view, 3, &budget, || Err(over.clone())).unwrap_err(),
            over
        );
        cached(&view, 3, &budget, entry).unwrap();
        assert_eq!(computed.get(), 3, "a failure is not kept");
        let two = Limits::new().mask_work(2).budget();
        cached(&view, 1, &two, entry).unwrap();
        cached(&view, 1, &two, entry).unwrap();
        assert!(
            cached(&view, 1, &two, entry).is_err(),
            "the third lookup is over"
        );
    }
}
