//! The global mask cache: bounded by a byte budget, least recently used entries evicted first.

use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use lru::LruCache;

/// Bytes an entry holds, for the cache's budget.
pub trait Weigh {
    /// Approximate heap + inline bytes of the value.
    fn weight(&self) -> usize;
}

/// Counters of one of the engine's bounded mask caches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that had to compute the entry.
    pub misses: u64,
    /// Entries dropped to stay within the budget.
    pub evictions: u64,
    /// Entries held now.
    pub entries: usize,
    /// Bytes held now.
    pub bytes: usize,
}

const SHARDS: usize = 16;

struct Shard<K: Hash + Eq, V> {
    lru: LruCache<K, Arc<V>>,
    bytes: usize,
}

/// A thread-safe, byte-bounded LRU cache of computed masks, shared by every matcher of an
/// engine: what one request computed for an operator state, the next one reuses.
///
/// Sharded so that threads filling masks for different sequences rarely contend. Values are
/// computed outside the lock; two threads missing on the same key at once both compute it, and
/// the second insert wins (values for one key are equal by construction).
///
/// # Example
///
/// ```
/// use formwork::mask::{MaskCache, Weigh};
///
/// struct Bytes(Vec<u8>);
/// impl Weigh for Bytes { fn weight(&self) -> usize { self.0.len() } }
///
/// let cache: MaskCache<u64, Bytes> = MaskCache::new(1 << 20);
/// let a = cache.get_or_insert_with(7, || Bytes(vec![1, 2, 3]));
/// let b = cache.get_or_insert_with(7, || unreachable!());
/// assert_eq!(a.0, b.0);
/// assert_eq!(cache.stats().hits, 1);
/// assert_eq!(cache.stats().misses, 1);
/// ```
pub struct MaskCache<K: Hash + Eq, V> {
    // Unbounded LRUs: the bound is in bytes, kept by `insert`, not in entries.
    shards: Box<[Mutex<Shard<K, V>>]>,
    shard_budget: usize,
    hasher: std::collections::hash_map::RandomState,
    hits: AtomicU64,
    misses: AtomicU64,
    evictions: AtomicU64,
}

impl<K: Hash + Eq + Clone, V: Weigh> MaskCache<K, V> {
    /// A cache holding at most about `budget_bytes` of entries.
    pub fn new(budget_bytes: usize) -> MaskCache<K, V> {
        let shards = (0..SHARDS)
            .map(|_| {
                Mutex::new(Shard {
                    lru: LruCache::unbounded(),
                    bytes: 0,
                })
            })
            .collect();
        MaskCache {
            shards,
            shard_budget: (budget_bytes / SHARDS).max(1),
            hasher: Default::default(),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: &K) -> &Mutex<Shard<K, V>> {
        &self.shards[self.hasher.hash_one(key) as usize % SHARDS]
    }

    /// The cached value for `key`, if any (counts a hit or a miss).
    pub fn get(&self, key: &K) -> Option<Arc<V>> {
        let found = self
            .shard(key)
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .lru
            .get(key)
            .cloned();
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    /// Stores `value` under `key`, evicting least recently used entries past the budget. A value
    /// larger than a shard's budget is returned but not kept.
    pub fn insert(&self, key: K, value: V) -> Arc<V> {
        let value = Arc::new(value);
        let weight = value.weight() + std::mem::size_of::<K>() + 32;
        if weight > self.shard_budget {
            return value;
        }
        let mut shard = self.shard(&key).lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = shard.lru.put(key, value.clone()) {
            shard.bytes -= old.weight() + std::mem::size_of::<K>() + 32;
        }
        shard.bytes += weight;
        while shard.bytes > self.shard_budget {
            match shard.lru.pop_lru() {
                Some((_, old)) => {
                    shard.bytes -= old.weight() + std::mem::size_of::<K>() + 32;
                    self.evictions.fetch_add(1, Ordering::Relaxed);
                }
                None => break,
            }
        }
        value
    }

    /// The value for `key`, computing and storing it on a miss.
    #[cfg(feature = "internals")]
    pub fn get_or_insert_with(&self, key: K, compute: impl FnOnce() -> V) -> Arc<V> {
        match self.get(&key) {
            Some(v) => v,
            None => self.insert(key, compute()),
        }
    }

    /// Counters and current size.
    pub fn stats(&self) -> CacheStats {
        let (mut entries, mut bytes) = (0, 0);
        for s in self.shards.iter() {
            let s = s.lock().unwrap_or_else(|p| p.into_inner());
            entries += s.lru.len();
            bytes += s.bytes;
        }
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            entries,
            bytes,
        }
    }

    /// Drops every entry (counters are kept). For tests.
    #[cfg(feature = "internals")]
    pub fn clear(&self) {
        for s in self.shards.iter() {
            let mut s = s.lock().unwrap_or_else(|p| p.into_inner());
            s.lru.clear();
            s.bytes = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Blob(usize);
    impl Weigh for Blob {
        fn weight(&self) -> usize {
            self.0
        }
    }

    #[test]
    fn stays_within_budget_and_evicts_least_recent() {
        let cache: MaskCache<u32, Blob> = MaskCache::new(SHARDS * 1000);
        for k in 0..10_000 {
            cache.insert(k, Blob(100));
        }
        let s = cache.stats();
        assert!(s.bytes <= SHARDS * 1000, "{s:?}");
        assert!(s.evictions > 0);
        assert!(cache.get(&9_999).is_some());
        assert!(cache.get(&0).is_none());
    }
}
