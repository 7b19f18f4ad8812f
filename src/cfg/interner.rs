//! Interned `u32` slices, for the sets and signatures the compiler and the mask walks key by.

use smallvec::SmallVec;

use crate::base::collections::FastMap;

/// Interns `u32` slices: ids in insertion order, all slices in one arena (no allocation per
/// slice). Determinization interns state sets with it, minimization signatures, the trie
/// walk its row structures.
#[derive(Default, Debug)]
pub(crate) struct SliceInterner {
    data: Vec<u32>,
    spans: Vec<(u32, u32)>,
    index: FastMap<u64, SmallVec<[u32; 1]>>,
}

impl SliceInterner {
    /// The id of `slice`, and whether it is new.
    pub fn intern(&mut self, slice: &[u32]) -> (u32, bool) {
        use std::hash::{Hash, Hasher};
        let mut h = rustc_hash::FxHasher::default();
        slice.hash(&mut h);
        let candidates = self.index.entry(h.finish()).or_default();
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

    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Bytes held, roughly (the index counted at one entry per slice).
    pub fn heap_bytes(&self) -> usize {
        self.data.len() * 4 + self.spans.len() * 8 + self.index.len() * 16
    }

    pub fn clear(&mut self) {
        self.data.clear();
        self.spans.clear();
        self.index.clear();
    }
}
