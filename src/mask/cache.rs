//! The global mask cache: bounded by a byte budget, least recently used entries evicted first.

use std::hash::{BuildHasher, Hash};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use lru::LruCache;
use rustc_hash::FxHashMap;

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
    /// Entries held now (pinned ones apart).
    pub entries: usize,
    /// Bytes held now (pinned ones apart).
    pub bytes: usize,
    /// Pinned entries (see `MaskCache::pin`): never evicted, outside the byte budget.
    pub pinned: usize,
    /// Bytes the pinned entries hold.
    pub pinned_bytes: usize,
    /// Lookups (counted in `hits`) answered by a pinned entry.
    pub pinned_hits: u64,
}

const SHARDS: usize = 16;

struct Shard<K: Hash + Eq, V> {
    lru: LruCache<K, Arc<V>>,
    bytes: usize,
    pinned: FxHashMap<K, Arc<V>>,
    pinned_bytes: usize,
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
    pinned_hits: AtomicU64,
}

impl<K: Hash + Eq + Clone, V: Weigh> MaskCache<K, V> {
    /// A cache holding at most about `budget_bytes` of entries.
    pub fn new(budget_bytes: usize) -> MaskCache<K, V> {
        let shards = (0..SHARDS)
            .map(|_| {
                Mutex::new(Shard {
                    lru: LruCache::unbounded(),
                    bytes: 0,
                    pinned: FxHashMap::default(),
                    pinned_bytes: 0,
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
            pinned_hits: AtomicU64::new(0),
        }
    }

    fn shard(&self, key: &K) -> &Mutex<Shard<K, V>> {
        &self.shards[self.hasher.hash_one(key) as usize % SHARDS]
    }

    /// The cached value for `key`, if any (counts a hit or a miss).
    pub fn get(&self, key: &K) -> Option<Arc<V>> {
        let mut shard = self.shard(key).lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pinned) = shard.pinned.get(key) {
            self.hits.fetch_add(1, Ordering::Relaxed);
            self.pinned_hits.fetch_add(1, Ordering::Relaxed);
            return Some(pinned.clone());
        }
        let found = shard.lru.get(key).cloned();
        drop(shard);
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
        let weight = Self::weight_of(&value);
        if weight > self.shard_budget {
            return value;
        }
        let mut shard = self.shard(&key).lock().unwrap_or_else(|p| p.into_inner());
        if let Some(pinned) = shard.pinned.get(&key) {
            return pinned.clone();
        }
        if let Some(old) = shard.lru.put(key, value.clone()) {
            shard.bytes -= Self::weight_of(&old);
        }
        shard.bytes += weight;
        while shard.bytes > self.shard_budget {
            match shard.lru.pop_lru() {
                Some((_, old)) => {
                    shard.bytes -= Self::weight_of(&old);
                    self.evictions.fetch_add(1, Ordering::Relaxed);
                }
                None => break,
            }
        }
        value
    }

    /// What an entry costs the budget: the value, its key and the list's bookkeeping.
    fn weight_of(value: &V) -> usize {
        value.weight() + std::mem::size_of::<K>() + 32
    }

    /// Keeps `entries` for good, in place of those pinned before: never evicted, outside the
    /// byte budget (the caller bounds them), found before the evictable entries. What a
    /// server precomputes at start-up (the template masks) so that no request pays for it.
    /// Returns the bytes they hold, counted as [`MaskCache::insert`] counts.
    pub fn pin(&self, entries: impl IntoIterator<Item = (K, Arc<V>)>) -> usize {
        for s in self.shards.iter() {
            let mut s = s.lock().unwrap_or_else(|p| p.into_inner());
            s.pinned.clear();
            s.pinned_bytes = 0;
        }
        let mut total = 0;
        for (key, value) in entries {
            let weight = Self::weight_of(&value);
            let mut shard = self.shard(&key).lock().unwrap_or_else(|p| p.into_inner());
            if let Some(old) = shard.lru.pop(&key) {
                shard.bytes -= Self::weight_of(&old);
            }
            if let Some(old) = shard.pinned.insert(key, value) {
                shard.pinned_bytes -= Self::weight_of(&old);
                total -= Self::weight_of(&old);
            }
            shard.pinned_bytes += weight;
            total += weight;
        }
        total
    }

    /// A snapshot of the evictable entries, each with the bytes it costs the budget.
    pub fn entries(&self) -> Vec<(K, Arc<V>, usize)> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let s = s.lock().unwrap_or_else(|p| p.into_inner());
            let entries = s
                .lru
                .iter()
                .map(|(k, v)| (k.clone(), v.clone(), Self::weight_of(v)));
            out.extend(entries);
        }
        out
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
        let mut stats = CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            pinned_hits: self.pinned_hits.load(Ordering::Relaxed),
            ..CacheStats::default()
        };
        for s in self.shards.iter() {
            let s = s.lock().unwrap_or_else(|p| p.into_inner());
            stats.entries += s.lru.len();
            stats.bytes += s.bytes;
            stats.pinned += s.pinned.len();
            stats.pinned_bytes += s.pinned_bytes;
        }
        stats
    }

    /// Drops every evictable entry (pinned ones and the counters are kept). For tests.
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

    #[test]
    fn pinned_entries_outlive_eviction_and_answer_first() {
        let cache: MaskCache<u32, Blob> = MaskCache::new(SHARDS * 1000);
        cache.insert(7, Blob(1));
        let kept = cache.entries();
        assert_eq!(kept.len(), 1);
        let bytes = cache.pin(kept.into_iter().map(|(k, v, _)| (k, v)));
        assert_eq!(bytes, Blob(1).0 + std::mem::size_of::<u32>() + 32);
        for k in 100..10_000 {
            cache.insert(k, Blob(100));
        }
        // A later insert of a pinned key keeps the pinned value.
        assert_eq!(cache.insert(7, Blob(5)).0, 1);
        assert_eq!(cache.get(&7).map(|b| b.0), Some(1));
        let s = cache.stats();
        assert_eq!((s.pinned, s.pinned_bytes, s.pinned_hits), (1, bytes, 1));
        assert!(s.evictions > 0 && s.bytes <= SHARDS * 1000, "{s:?}");
        cache.clear();
        assert!(cache.get(&7).is_some());
        cache.pin([]);
        assert!(cache.get(&7).is_none());
    }
}
