//! Minimization: Hopcroft's partition refinement of deterministic (possibly partial) automata.

use crate::limits::{Deadline, LimitExceeded};

/// The block of each state and the number of blocks of the coarsest partition of a
/// deterministic, possibly partial automaton that respects finality and transitions. States
/// are `0..finals.len()`; `edges` are `(label, source, target)` with at most one edge per
/// label out of a state.
///
/// Partial transition functions need every initial block as a splitter; after that, splitting
/// by the smaller half suffices as usual, because `pre(B2) = pre(B) \ pre(B1)` holds whenever
/// each state has at most one edge per label. So each state is handled O(log n) times, where
/// Moore's rounds take O(n) on long chains.
pub(crate) fn hopcroft(
    finals: &[bool],
    edges: &[(u32, u32, u32)],
    deadline: &Deadline,
) -> Result<(Vec<u32>, usize), LimitExceeded> {
    let n = finals.len();
    // Incoming edges of each state, `(label, source)`, as one flat array.
    let mut in_start = vec![0u32; n + 1];
    edges.iter().for_each(|e| in_start[e.2 as usize + 1] += 1);
    for i in 0..n {
        in_start[i + 1] += in_start[i];
    }
    let mut fill = in_start.clone();
    let mut incoming = vec![(0u32, 0u32); edges.len()];
    for &(label, from, to) in edges {
        incoming[fill[to as usize] as usize] = (label, from);
        fill[to as usize] += 1;
    }
    let mut p = Partition::new(finals.iter().copied());
    let mut pending: Vec<u32> = (0..p.blocks.len() as u32).collect();
    let mut in_pending = vec![true; p.blocks.len()];
    // The pre-image grouped by label with a counting sort over the labels it has: a
    // comparison sort of it was most of the refinement's time.
    let labels = edges.iter().map(|e| e.0 as usize + 1).max().unwrap_or(0);
    let mut count = vec![0u32; labels];
    let mut present: Vec<u32> = Vec::new();
    let mut preimage: Vec<u32> = Vec::new();
    let mut group_starts: Vec<u32> = Vec::new();
    let mut splits: Vec<(u32, u32)> = Vec::new();
    while let Some(b) = pending.pop() {
        deadline.tick()?;
        in_pending[b as usize] = false;
        let (lo, hi) = p.blocks[b as usize];
        let members = &p.elems[lo as usize..hi as usize];
        let incoming_of = |s: u32| {
            let (a, z) = (in_start[s as usize], in_start[s as usize + 1]);
            &incoming[a as usize..z as usize]
        };
        for &(label, _) in members.iter().flat_map(|&s| incoming_of(s)) {
            if count[label as usize] == 0 {
                present.push(label);
            }
            count[label as usize] += 1;
        }
        // `count` becomes each present label's end in `preimage`, then its start.
        let mut end = 0;
        for &label in &present {
            end += count[label as usize];
            count[label as usize] = end;
        }
        preimage.clear();
        preimage.resize(end as usize, 0);
        for &(label, from) in members.iter().flat_map(|&s| incoming_of(s)) {
            count[label as usize] -= 1;
            preimage[count[label as usize] as usize] = from;
        }
        group_starts.clear();
        group_starts.extend(
            present
                .drain(..)
                .map(|label| std::mem::take(&mut count[label as usize])),
        );
        for (i, &start) in group_starts.iter().enumerate() {
            let stop = group_starts.get(i + 1).copied().unwrap_or(end);
            p.split(
                preimage[start as usize..stop as usize].iter().copied(),
                &mut splits,
            );
            for &(old, new) in &splits {
                in_pending.push(false);
                let smaller = match in_pending[old as usize] {
                    true => new,
                    false if p.size(new) <= p.size(old) => new,
                    false => old,
                };
                in_pending[smaller as usize] = true;
                pending.push(smaller);
            }
        }
    }
    let blocks = p.blocks.len();
    Ok((p.block_of, blocks))
}

/// A partition of `0..n` into blocks, each a contiguous run of `elems`, that can be refined
/// by a set of members in time proportional to the set.
struct Partition {
    elems: Vec<u32>,
    pos: Vec<u32>,
    block_of: Vec<u32>,
    blocks: Vec<(u32, u32)>,
    /// Members of each block moved to its front by the current split.
    marked: Vec<u32>,
    touched: Vec<u32>,
}

impl Partition {
    /// Two blocks (or one): members where `key` is false, then where it is true.
    fn new(key: impl Iterator<Item = bool>) -> Partition {
        let key: Vec<bool> = key.collect();
        let mut elems: Vec<u32> = (0..key.len() as u32).collect();
        elems.sort_by_key(|&s| key[s as usize]);
        let cut = key.iter().filter(|&&k| !k).count() as u32;
        let mut blocks = vec![(0, cut), (cut, key.len() as u32)];
        blocks.retain(|b| b.0 < b.1);
        let mut pos = vec![0u32; key.len()];
        let mut block_of = vec![0u32; key.len()];
        for (i, &s) in elems.iter().enumerate() {
            pos[s as usize] = i as u32;
            block_of[s as usize] = (blocks.len() == 2 && i as u32 >= cut) as u32;
        }
        Partition {
            marked: vec![0; blocks.len()],
            elems,
            pos,
            block_of,
            blocks,
            touched: Vec::new(),
        }
    }

    fn size(&self, b: u32) -> u32 {
        let (lo, hi) = self.blocks[b as usize];
        hi - lo
    }

    /// Separates `members` from the rest of each block they touch; `splits` receives the
    /// `(old, new)` block pairs that split, `new` holding the members.
    fn split(&mut self, members: impl Iterator<Item = u32>, splits: &mut Vec<(u32, u32)>) {
        splits.clear();
        for s in members {
            let b = self.block_of[s as usize] as usize;
            let front = self.blocks[b].0 + self.marked[b];
            let at = self.pos[s as usize];
            if at < front {
                continue; // marked already (an automaton edge repeated in the pre-image)
            }
            let other = self.elems[front as usize];
            self.elems.swap(at as usize, front as usize);
            self.pos[other as usize] = at;
            self.pos[s as usize] = front;
            if self.marked[b] == 0 {
                self.touched.push(b as u32);
            }
            self.marked[b] += 1;
        }
        for i in 0..self.touched.len() {
            let b = self.touched[i];
            let (lo, hi) = self.blocks[b as usize];
            let cut = lo + std::mem::replace(&mut self.marked[b as usize], 0);
            if cut == hi {
                continue;
            }
            let new = self.blocks.len() as u32;
            self.blocks.push((lo, cut));
            self.marked.push(0);
            self.blocks[b as usize].0 = cut;
            for &s in &self.elems[lo as usize..cut as usize] {
                self.block_of[s as usize] = new;
            }
            splits.push((b, new));
        }
        self.touched.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The coarsest partition by plain signature refinement (Moore): a state's block and the
    /// blocks its labels lead to (`u32::MAX` where it has no edge).
    fn moore(finals: &[bool], edges: &[(u32, u32, u32)], labels: u32) -> Vec<u32> {
        let n = finals.len();
        let mut block: Vec<u32> = finals.iter().map(|&f| f as u32).collect();
        loop {
            let mut table = vec![vec![u32::MAX; labels as usize]; n];
            for &(l, s, t) in edges {
                table[s as usize][l as usize] = block[t as usize];
            }
            let mut ids = std::collections::HashMap::new();
            let next: Vec<u32> = (0..n)
                .map(|s| {
                    let key = (block[s], table[s].clone());
                    let len = ids.len() as u32;
                    *ids.entry(key).or_insert(len)
                })
                .collect();
            if ids.len() == block.iter().collect::<std::collections::HashSet<_>>().len() {
                return next;
            }
            block = next;
        }
    }

    /// Same blocks up to numbering.
    fn same_partition(a: &[u32], b: &[u32]) -> bool {
        (0..a.len()).all(|i| (0..a.len()).all(|j| (a[i] == a[j]) == (b[i] == b[j])))
    }

    #[test]
    fn hopcroft_finds_the_coarsest_partition_of_partial_automata() {
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: u32| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as u32
        };
        let deadline = crate::limits::Limits::new().compile_time(None).deadline();
        for _ in 0..300 {
            let (n, labels) = (1 + next(12), 1 + next(4));
            let finals: Vec<bool> = (0..n).map(|_| next(3) == 0).collect();
            let mut edges = Vec::new();
            for s in 0..n {
                for l in 0..labels {
                    // Partial: about a third of the transitions are missing.
                    if next(3) != 0 {
                        edges.push((l, s, next(n)));
                    }
                }
            }
            let (block, blocks) = hopcroft(&finals, &edges, &deadline).unwrap();
            let expected = moore(&finals, &edges, labels);
            assert!(same_partition(&block, &expected), "{finals:?} {edges:?}");
            let distinct: std::collections::HashSet<_> = block.iter().collect();
            assert_eq!(distinct.len(), blocks);
        }
    }
}
