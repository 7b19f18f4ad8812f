//! Interners: keys numbered in the order they are first seen. The subset construction numbers
//! its state sets with them (the numbering is its worklist, see [`super::determinize`]); the
//! Earley compiler also interns minimization signatures, and its row DFA the row structures
//! of a walk.

use std::hash::{Hash, Hasher};

use smallvec::SmallVec;

use crate::base::collections::FastMap;

/// Keys numbered `0, 1, …` in the order they are first interned.
pub(crate) trait Numbering {
    /// What is numbered.
    type Key: ?Sized;

    /// The id of `key`, and whether it is new.
    fn intern(&mut self, key: &Self::Key) -> (u32, bool);

    /// The key with id `id`.
    fn get(&self, id: u32) -> &Self::Key;

    /// How many keys are numbered.
    fn len(&self) -> usize;
}

/// The 64-bit hash the interners index by.
fn fx_hash<K: Hash + ?Sized>(key: &K) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    key.hash(&mut h);
    h.finish()
}

/// Interns `u32` slices: ids in insertion order, all slices in one arena (no allocation per
/// slice).
#[derive(Default, Debug)]
pub(crate) struct SliceInterner {
    data: Vec<u32>,
    spans: Vec<(u32, u32)>,
    index: FastMap<u64, SmallVec<[u32; 1]>>,
}

impl SliceInterner {
    /// The id of `slice`, and whether it is new.
    pub fn intern(&mut self, slice: &[u32]) -> (u32, bool) {
        let candidates = self.index.entry(fx_hash(slice)).or_default();
        for &id in candidates.iter() {
            let (a, b) = self.spans[id as usize];
            if &self.data[a as usize..b as usize] == slice {
                return (id, false);
            }
        }
        let id = self.spans.len() as u32;
        candidates.push(id);
        let start = self.data.len() as u32;
        self.data.extend_from_slice(slice);
        self.spans.push((start, self.data.len() as u32));
        (id, true)
    }

    /// The slice with id `id`.
    #[inline]
    pub fn get(&self, id: u32) -> &[u32] {
        let (a, b) = self.spans[id as usize];
        &self.data[a as usize..b as usize]
    }

    /// How many slices are interned.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Bytes held, roughly (the index counted at one entry per slice).
    pub fn heap_bytes(&self) -> usize {
        self.data.len() * 4 + self.spans.len() * 8 + self.index.len() * 16
    }

    /// Forgets every slice; ids start from 0 again.
    pub fn clear(&mut self) {
        self.data.clear();
        self.spans.clear();
        self.index.clear();
    }
}

impl Numbering for SliceInterner {
    type Key = [u32];

    fn intern(&mut self, key: &[u32]) -> (u32, bool) {
        SliceInterner::intern(self, key)
    }

    fn get(&self, id: u32) -> &[u32] {
        SliceInterner::get(self, id)
    }

    fn len(&self) -> usize {
        SliceInterner::len(self)
    }
}

/// Interns keys of any hashable type (the states of a machine explored one character at a
/// time), each stored once.
pub(crate) struct KeyInterner<K> {
    keys: Vec<K>,
    index: FastMap<u64, SmallVec<[u32; 1]>>,
}

impl<K> Default for KeyInterner<K> {
    fn default() -> Self {
        KeyInterner {
            keys: Vec::new(),
            index: FastMap::default(),
        }
    }
}

impl<K: Clone + Eq + Hash> Numbering for KeyInterner<K> {
    type Key = K;

    fn intern(&mut self, key: &K) -> (u32, bool) {
        let candidates = self.index.entry(fx_hash(key)).or_default();
        if let Some(&id) = candidates
            .iter()
            .find(|&&id| self.keys[id as usize] == *key)
        {
            return (id, false);
        }
        let id = self.keys.len() as u32;
        candidates.push(id);
        self.keys.push(key.clone());
        (id, true)
    }

    fn get(&self, id: u32) -> &K {
        &self.keys[id as usize]
    }

    fn len(&self) -> usize {
        self.keys.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both interners number keys in first-seen order and give each its key back.
    #[test]
    fn interners_number_keys_in_first_seen_order() {
        let slices: [&[u32]; 6] = [&[1, 2], &[], &[1, 2], &[2, 1], &[], &[7]];
        let mut s = SliceInterner::default();
        let ids: Vec<(u32, bool)> = slices.iter().map(|k| s.intern(k)).collect();
        let want = [
            (0, true),
            (1, true),
            (0, false),
            (2, true),
            (1, false),
            (3, true),
        ];
        assert_eq!(ids, want);
        assert_eq!(s.len(), 4);
        assert_eq!(s.get(2), &[2, 1]);
        assert_eq!(s.get(1), &[] as &[u32]);
        s.clear();
        assert_eq!((s.len(), s.intern(&[7])), (0, (0, true)));

        let mut k = KeyInterner::<(char, bool)>::default();
        let keys = [('a', true), ('a', false), ('a', true), ('b', true)];
        let ids: Vec<(u32, bool)> = keys.iter().map(|key| k.intern(key)).collect();
        assert_eq!(ids, [(0, true), (1, true), (0, false), (2, true)]);
        assert_eq!((k.len(), *k.get(1)), (3, ('a', false)));
    }
}
