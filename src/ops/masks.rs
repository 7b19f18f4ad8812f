//! Masks of operator states through the global cache.
//!
//! A thread's mask has two parts (DESIGN.md, Hot path):
//!
//! 1. **Leaf part** (`L1`), keyed by the leaf's structural hash and its state: one walk of the
//!    token trie with the leaf alone sorts every token into *accepted* (it stays inside the leaf,
//!    which can always still finish), *rejected* (the leaf dies before it could have ended) and
//!    *uncertain* (the leaf could end part-way through the token, so the rest of the token belongs
//!    to whatever follows). Context-independent: shared by every program, request and step that
//!    reaches the same leaf state.
//! 2. **Continuation part** (`L2`), only when there are uncertain tokens: each is replayed
//!    through the real cursor. The result is keyed by the L1 key plus a *signature* of the
//!    continuation that covers exactly what the uncertain tokens can reach: the next leaves and
//!    their states, and deeper ones only while a token's remaining bytes could pass through.
//!    So `Write(" ")` followed by free text until `<|vision_pad|>` has one entry however many
//!    sections or requests go through it.

use std::sync::Arc;

use super::cursor::{Thread, Threads, Walker};
use super::leaf::Leaf;
use super::program::{Op, OpId};
use crate::base::bitmask::set_bit;
use crate::base::token::TokenId;
use crate::ir::StructHasher;
use crate::mask::{MaskCache, StoredMask, Weigh};
use crate::vocab::{walk_sliced, SliceProbe, SliceProofs, Subtree, TrieStep, TrieVisitor, Vocab};

/// A cached mask: text tokens in adaptive storage, plus the special tokens and (for a leaf
/// part) the tokens left for the continuation to decide.
#[derive(Debug)]
pub(crate) struct MaskEntry {
    pub text: StoredMask,
    pub specials: Box<[TokenId]>,
    pub uncertain: Box<[TokenId]>,
    /// Longest byte run of an uncertain token past the leaf's earliest possible end.
    pub max_cross: u32,
}

impl Weigh for MaskEntry {
    fn weight(&self) -> usize {
        self.text.heap_bytes() + (self.specials.len() + self.uncertain.len()) * 4 + 64
    }
}

const L1_DOMAIN: u64 = 0x4c31;
const L2_DOMAIN: u64 = 0x4c32;
const THREAD_DOMAIN: u64 = 0x5448;
const L2_THREAD_DOMAIN: u64 = 0x4c33;
const END_MARK: u64 = 0xe4d;
/// Most (thread, budget) pairs a continuation signature visits.
const MAX_SIGNATURE_VISITS: usize = 128;

/// The continuation key (L2) a thread's mask resolves to.
#[derive(Debug)]
pub(crate) struct ContinuationKey(u128);

impl Weigh for ContinuationKey {
    fn weight(&self) -> usize {
        16
    }
}

/// The per-vocabulary part shared by every operator matcher: the vocabulary and the global
/// mask cache.
pub struct Runtime {
    pub(crate) vocab: Vocab,
    pub(crate) cache: MaskCache<u128, MaskEntry>,
    /// Thread (position-free) -> continuation key. The signature walk of a leaf inside a loop
    /// of short leaves under long tokens (an id in `(", " id)*`) visits dozens of (leaf, budget)
    /// pairs each step; its result depends only on the program's structure and the thread, so
    /// it is computed once per thread shape.
    continuations: MaskCache<u128, ContinuationKey>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("vocab", &self.vocab)
            .field("cache", &self.cache.stats())
            .finish()
    }
}

impl Runtime {
    /// A runtime for `vocab` whose mask cache holds at most `cache_bytes`.
    pub fn new(vocab: Vocab, cache_bytes: usize) -> Arc<Runtime> {
        Arc::new(Runtime {
            vocab,
            cache: MaskCache::new(cache_bytes),
            continuations: MaskCache::new(cache_bytes / 16),
        })
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// Hit/miss counters and size of the global mask cache.
    pub fn cache_stats(&self) -> crate::mask::CacheStats {
        self.cache.stats()
    }

    fn l1_key(leaf: &Leaf, state: u32) -> u128 {
        StructHasher::new(L1_DOMAIN)
            .hash(leaf.state_key(state))
            .finish()
    }

    fn leaf_part(&self, leaf: &Leaf, state: u32) -> Arc<MaskEntry> {
        self.cache
            .get_or_insert_with(Self::l1_key(leaf, state), || {
                self.compute_leaf_part(leaf, state)
            })
    }

    fn compute_leaf_part(&self, leaf: &Leaf, state: u32) -> MaskEntry {
        const NO_EXIT: u32 = u32::MAX;
        struct Walk<'a> {
            leaf: &'a Leaf,
            vocab: &'a Vocab,
            accepted: Vec<u32>,
            uncertain: Vec<TokenId>,
            max_cross: u32,
        }
        // State: the leaf's state and the depth of the earliest point where it could have ended.
        impl TrieVisitor for Walk<'_> {
            type State = (u32, u32);
            fn step(
                &mut self,
                &(s, ended_at): &(u32, u32),
                byte: u8,
                depth: usize,
                subtree: Subtree,
            ) -> TrieStep<(u32, u32)> {
                let next = self.leaf.step(s, byte as u32);
                if next == super::leaf::DEAD {
                    if ended_at != NO_EXIT {
                        for &t in subtree.tokens() {
                            self.uncertain.push(t);
                            let len = self.vocab.token_bytes(t).len() as u32;
                            self.max_cross = self.max_cross.max(len - ended_at);
                        }
                    }
                    return TrieStep::Skip;
                }
                let ended_at = if ended_at == NO_EXIT && self.leaf.exit(next).is_some() {
                    depth as u32
                } else {
                    ended_at
                };
                TrieStep::Enter((next, ended_at))
            }
            fn tokens(&mut self, _: &(u32, u32), tokens: &[TokenId]) {
                tokens.iter().for_each(|&t| set_bit(&mut self.accepted, t));
            }
        }
        // Only aliveness matters to a slice: where the leaf could end does not.
        impl SliceProbe for Walk<'_> {
            type Error = std::convert::Infallible;
            fn advance(
                &mut self,
                &(s, _): &(u32, u32),
                byte: u8,
            ) -> Result<Option<(u32, u32)>, Self::Error> {
                let next = self.leaf.step(s, byte as u32);
                Ok((next != super::leaf::DEAD).then_some((next, NO_EXIT)))
            }
            fn identity(&self, &(s, _): &(u32, u32)) -> Option<u32> {
                Some(s)
            }
            fn accepted(&mut self) -> &mut [u32] {
                &mut self.accepted
            }
        }
        let mut walk = Walk {
            leaf,
            vocab: &self.vocab,
            accepted: vec![0; self.vocab.mask_words()],
            uncertain: Vec::new(),
            max_cross: 0,
        };
        let mut proofs = SliceProofs::default();
        let Ok(()) = walk_sliced(&self.vocab, (state, NO_EXIT), &mut walk, &mut proofs);
        let specials: Vec<TokenId> = leaf
            .specials(state)
            .into_iter()
            .filter(|&t| (t as usize) < self.vocab.mask_width())
            .collect();
        MaskEntry {
            text: StoredMask::from_words(&walk.accepted, self.vocab.text_mask()),
            specials: specials.into(),
            uncertain: walk.uncertain.into(),
            max_cross: walk.max_cross,
        }
    }

    /// Mixes into `h` what the continuation after `thread`'s leaf looks like to byte runs of at
    /// most `budget` bytes: the leaves (and states) reachable after the exit, and, breadth
    /// first, the leaves after those while a run could still pass through. Each (thread,
    /// budget) is visited once, so loops cost no more than their distinct states. Returns
    /// false past [`MAX_SIGNATURE_VISITS`] visits: a loop of short leaves under a long token
    /// (`(", " id)*` under a 100-byte run of spaces) visits thousands, each request anew, and
    /// the thread itself is then the cheaper key.
    fn continuation_signature(
        &self,
        walker: &Walker,
        thread: &Thread,
        budget: u32,
        h: &mut StructHasher,
    ) -> bool {
        // Breadth first over (thread, remaining budget); the list doubles as the seen-set while
        // it is tiny (the next leaf or two), where a linear scan beats hashing.
        const LINEAR_SEEN: usize = 16;
        let mut visit: smallvec::SmallVec<[(Thread, u32); 4]> =
            smallvec::smallvec![(thread.clone(), budget)];
        let mut seen: rustc_hash::FxHashSet<(Thread, u32)> = Default::default();
        let mut i = 0;
        while i < visit.len() {
            if i == MAX_SIGNATURE_VISITS {
                return false;
            }
            let (from, budget) = visit[i].clone();
            i += 1;
            for next in walker.exit_closure(&from) {
                if next.is_end() {
                    h.word(END_MARK);
                    continue;
                }
                let top = next.top();
                let leaf = leaf_of(walker, top.op);
                h.hash(leaf.state_key(top.state));
                // Deeper leaves matter only if a run could pass all the way through this one.
                if let Some(d) = leaf.text_to_exit(top.state) {
                    let d = d.max(1);
                    if d < budget {
                        h.word((budget - d) as u64);
                        let entry = (next, budget - d);
                        let new = if visit.len() <= LINEAR_SEEN {
                            !visit.contains(&entry)
                        } else {
                            if seen.is_empty() {
                                seen.extend(visit.iter().cloned());
                            }
                            seen.insert(entry.clone())
                        };
                        if new {
                            visit.push(entry);
                        }
                    }
                }
            }
            h.word(u64::MAX);
        }
        true
    }

    /// `thread` as a key valid across programs and positions: each frame by its operator's
    /// structural hash (a root-to-leaf path with per-frame states names one place in any
    /// program of the same structure) and a `DoWhile` round start only as "nothing consumed
    /// yet this round", the one thing the cursor asks of it.
    fn thread_key(walker: &Walker, thread: &Thread, l1_key: u128) -> u128 {
        let mut h = StructHasher::new(THREAD_DOMAIN);
        h.hash(l1_key);
        for frame in &thread.frames {
            let op = OpId(frame.op);
            let state = match walker.program.op(op) {
                Op::DoWhile { .. } => u32::from(frame.state == thread.pos),
                _ => frame.state,
            };
            h.hash(walker.program.info[op.index()].hash)
                .word(u64::from(state) << 32 | u64::from(frame.count));
        }
        h.finish()
    }

    fn with_continuation(
        &self,
        walker: &Walker,
        thread: &Thread,
        l1: &MaskEntry,
        l1_key: u128,
    ) -> Arc<MaskEntry> {
        let thread_key = Self::thread_key(walker, thread, l1_key);
        let key = self.continuations.get_or_insert_with(thread_key, || {
            let mut h = StructHasher::new(L2_DOMAIN);
            h.hash(l1_key);
            if self.continuation_signature(walker, thread, l1.max_cross, &mut h) {
                ContinuationKey(h.finish())
            } else {
                // The thread key fixes the whole future (each frame's structural hash covers its
                // operator's subtree): exact, only not shared.
                let h = StructHasher::new(L2_THREAD_DOMAIN)
                    .hash(thread_key)
                    .finish();
                ContinuationKey(h)
            }
        });
        self.cache.get_or_insert_with(key.0, || {
            let mut words = vec![0u32; self.vocab.mask_words()];
            l1.text.write_to(&mut words, self.vocab.text_mask());
            let mut scratch = Threads::new();
            let Ok(()) = self.vocab.walk_tokens(
                &l1.uncertain,
                Threads::from_elem(thread.clone(), 1),
                |threads, byte| {
                    let mut next = threads.clone();
                    let alive = walker.step(&mut next, byte as u32, &mut scratch);
                    Ok::<_, std::convert::Infallible>(alive.then_some(next))
                },
                |run, taken, _| {
                    if taken {
                        run.iter().for_each(|&t| set_bit(&mut words, t));
                    }
                },
            );
            MaskEntry {
                text: StoredMask::from_words(&words, self.vocab.text_mask()),
                specials: Box::new([]),
                uncertain: Box::new([]),
                max_cross: 0,
            }
        })
    }

    /// Writes the mask of `threads` into `out` (every word written).
    pub(crate) fn fill(&self, walker: &Walker, threads: &[Thread], out: &mut [u32]) {
        let universe = self.vocab.text_mask();
        let mut wrote = false;
        let mut accepting = false;
        for thread in threads {
            if thread.is_end() {
                accepting = true;
                continue;
            }
            let top = thread.top();
            let leaf = leaf_of(walker, top.op);
            let l1 = self.leaf_part(leaf, top.state);
            let full = if l1.uncertain.is_empty() {
                l1.clone()
            } else {
                self.with_continuation(walker, thread, &l1, Self::l1_key(leaf, top.state))
            };
            if wrote {
                full.text.or_into(out, universe);
            } else {
                full.text.write_to(out, universe);
                wrote = true;
            }
            l1.specials.iter().for_each(|&t| set_bit(out, t));
        }
        if !wrote {
            out.fill(0);
        }
        if accepting {
            self.vocab
                .eos_tokens()
                .iter()
                .for_each(|&t| set_bit(out, t));
        }
    }
}

pub(crate) fn leaf_of<'p>(walker: &Walker<'p>, op: u32) -> &'p Leaf {
    match walker.program.op(OpId(op)) {
        Op::Leaf { leaf, .. } => leaf,
        _ => unreachable!("the top frame of a thread is a leaf"),
    }
}
