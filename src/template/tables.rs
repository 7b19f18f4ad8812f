//! Lookup tables on the instantiation path, where a request's microseconds are spent: the
//! interned `Write` leaves and the hashing of structure names.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};

use lru::LruCache;

use crate::ir::StructHasher;
use crate::ops::{Leaf, LeafOp, Unit};

const SHARDS: usize = 16;

/// Longest literal kept: a run this long holds a request argument that will hardly recur,
/// while the table exists for the short runs of template text around arguments that do.
const MAX_UNITS: usize = 4096;

/// Bytes a `Write` leaf of `units` units holds, as accounted against the budget: per position
/// a unit code, a text distance and a 128-bit suffix key (`ops::WriteLeaf`'s three arrays),
/// plus the leaf, its `Arc` and the table's entry.
fn entry_bytes(units: usize) -> usize {
    const PER_POSITION: usize = 4 + 4 + 16;
    const FIXED: usize = 256;
    (units + 1) * PER_POSITION + FIXED
}

/// `Write` leaves of literal runs, by a 128-bit hash of their units. The same run
/// (`<|vision_end|>\n<|vision_start|>1.2 `) recurs across requests: looking it up costs a few
/// dozen instructions, building it four allocations and a hash per unit.
///
/// Bounded in bytes ([`entry_bytes`] per leaf): each shard keeps its leaves in least recently
/// used order within its share of the budget.
pub(crate) struct WriteTable {
    shards: Box<[Mutex<Shard>]>,
    /// Budget of one shard.
    shard_bytes: usize,
}

struct Shard {
    /// Each leaf with its accounted bytes.
    leaves: LruCache<u128, (LeafOp, usize), BuildHasherDefault<KeyHasher>>,
    bytes: usize,
}

impl WriteTable {
    /// An empty table holding at most `budget` bytes of leaves.
    pub fn new(budget: usize) -> WriteTable {
        WriteTable {
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        leaves: LruCache::unbounded_with_hasher(BuildHasherDefault::default()),
                        bytes: 0,
                    })
                })
                .collect(),
            shard_bytes: budget / SHARDS,
        }
    }

    /// The shared `Write` leaf of `units` (a fresh one if `units` is too long to keep).
    pub fn get(&self, units: &[Unit]) -> LeafOp {
        let cost = entry_bytes(units.len());
        if units.len() > MAX_UNITS || cost > self.shard_bytes {
            return LeafOp::new(Arc::new(Leaf::write(units)));
        }
        let code = |u: &Unit| match *u {
            Unit::Byte(b) => b as u64,
            Unit::Special(t) => 0x100 + t as u64,
        };
        let mut h = StructHasher::new(0x7772);
        h.word(units.len() as u64);
        for pair in units.chunks(2) {
            h.word(code(&pair[0]) | pair.get(1).map_or(0, code) << 32);
        }
        let key = h.finish();
        let mut shard = self.shards[key as usize % SHARDS]
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some((leaf, _)) = shard.leaves.get(&key) {
            return leaf.clone();
        }
        while shard.bytes + cost > self.shard_bytes {
            match shard.leaves.pop_lru() {
                Some((_, (_, bytes))) => shard.bytes -= bytes,
                None => break,
            }
        }
        let leaf = LeafOp::new(Arc::new(Leaf::write(units)));
        shard.leaves.put(key, (leaf.clone(), cost));
        shard.bytes += cost;
        leaf
    }

    /// Leaves held.
    pub fn len(&self) -> usize {
        self.lock_each(|s| s.leaves.len())
    }

    /// Bytes held, as accounted against the budget.
    pub fn bytes(&self) -> usize {
        self.lock_each(|s| s.bytes)
    }

    fn lock_each(&self, f: impl Fn(&Shard) -> usize) -> usize {
        self.shards
            .iter()
            .map(|s| f(&s.lock().unwrap_or_else(|p| p.into_inner())))
            .sum()
    }
}

/// Keys that are already structural hashes need no further hashing.
#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }

    fn write_u128(&mut self, key: u128) {
        self.0 = key as u64 ^ (key >> 64) as u64;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// FNV-1a: structure names are short, and SipHash's setup would cost more than the lookup.
#[derive(Clone, Copy)]
pub(crate) struct NameHasher(u64);

impl Default for NameHasher {
    fn default() -> Self {
        NameHasher(0xcbf2_9ce4_8422_2325)
    }
}

impl Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0100_0000_01b3);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by structure names.
pub(crate) type NameMap<V> = HashMap<String, V, BuildHasherDefault<NameHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_units_share_a_leaf() {
        let table = WriteTable::new(1 << 20);
        let a = table.get(&[Unit::Byte(b'x'), Unit::Special(7)]);
        let b = table.get(&[Unit::Byte(b'x'), Unit::Special(7)]);
        let c = table.get(&[Unit::Byte(b'x'), Unit::Byte(7)]);
        assert!(Arc::ptr_eq(a.leaf(), b.leaf()));
        assert!(!Arc::ptr_eq(a.leaf(), c.leaf()));
        assert_ne!(a.leaf().hash(), c.leaf().hash());
        assert_eq!(table.len(), 2);
        assert_eq!(table.bytes(), 2 * entry_bytes(2));
    }

    #[test]
    fn the_table_stays_within_its_budget() {
        let budget = 64 << 10;
        let table = WriteTable::new(budget);
        let units = |i: usize, len: usize| -> Vec<Unit> {
            format!("{i:0len$}").bytes().map(Unit::Byte).collect()
        };
        for i in 0..10_000 {
            table.get(&units(i, 40));
            assert!(table.bytes() <= budget);
        }
        assert!(table.len() * entry_bytes(40) <= budget && table.len() > 0);
        // The most recent leaves are still shared; an old one was dropped.
        let recent = units(9_999, 40);
        assert!(Arc::ptr_eq(
            table.get(&recent).leaf(),
            table.get(&recent).leaf()
        ));
        // Too long to keep: built, not held.
        let before = table.bytes();
        let long = units(7, MAX_UNITS + 1);
        let (a, b) = (table.get(&long), table.get(&long));
        assert!(!Arc::ptr_eq(a.leaf(), b.leaf()));
        assert_eq!(a.leaf().hash(), b.leaf().hash());
        assert_eq!(table.bytes(), before);
    }
}
