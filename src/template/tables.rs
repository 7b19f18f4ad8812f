//! Lookup tables on the instantiation path, where a request's microseconds are spent: the
//! interned `Write` leaves and the hashing of structure names.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{Arc, Mutex};

use crate::ir::StructHasher;
use crate::ops::{Leaf, LeafOp, Unit};

const SHARDS: usize = 16;
/// Entries per shard before the shard starts over: request literals are unbounded, the table
/// is not.
const SHARD_ENTRIES: usize = 4096;

/// `Write` leaves of literal runs, by a 128-bit hash of their units. The same run
/// (`<|vision_end|>\n<|vision_start|>1.2 `) recurs across requests: looking it up costs a few
/// dozen instructions, building it four allocations and a hash per unit.
pub(crate) struct WriteTable {
    shards: Box<[Mutex<LeafMap>]>,
}

type LeafMap = HashMap<u128, LeafOp, BuildHasherDefault<KeyHasher>>;

impl WriteTable {
    pub fn new() -> WriteTable {
        WriteTable {
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
        }
    }

    /// The shared `Write` leaf of `units`.
    pub fn get(&self, units: &[Unit]) -> LeafOp {
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
        if let Some(leaf) = shard.get(&key) {
            return leaf.clone();
        }
        if shard.len() >= SHARD_ENTRIES {
            shard.clear();
        }
        let leaf = LeafOp::new(Arc::new(Leaf::write(units)));
        shard.insert(key, leaf.clone());
        leaf
    }

    /// Leaves held.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).len())
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
        let table = WriteTable::new();
        let a = table.get(&[Unit::Byte(b'x'), Unit::Special(7)]);
        let b = table.get(&[Unit::Byte(b'x'), Unit::Special(7)]);
        let c = table.get(&[Unit::Byte(b'x'), Unit::Byte(7)]);
        assert!(Arc::ptr_eq(a.leaf(), b.leaf()));
        assert!(!Arc::ptr_eq(a.leaf(), c.leaf()));
        assert_ne!(a.leaf().hash(), c.leaf().hash());
        assert_eq!(table.len(), 2);
    }
}
