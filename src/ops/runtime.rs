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

use super::leaf::{Leaf, DEAD};
use super::program::{Op, OpId, UNBOUNDED};
use super::walker::{Thread, Threads, Walker};
use crate::base::bitmask::set_bit;
use crate::base::token::TokenId;
use crate::ir::StructHasher;
use crate::limits::{Budget, LimitExceeded, Limits};
use crate::mask::{MaskBuilder, MaskCache, StoredMask, Weigh};
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
    /// For a `Write`, whose uncertain tokens all leave it at its end: those tokens grouped by
    /// their first byte past it (empty for other leaves). A run lives on only if the leaf
    /// after the `Write` takes its first byte: after `", "`, the tokens that start with a
    /// space die at the id that follows, save those of a digit, so neither the
    /// continuation's signature nor its replay need to read the others.
    pub crossings: Box<[Crossing]>,
    /// Bytes of the `Write` before its end, which every uncertain token starts with.
    pub write_rest: u32,
}

/// The uncertain tokens of a `Write` whose run past its end starts with one byte.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Crossing {
    /// The first byte past the `Write`'s end.
    byte: u8,
    /// Longest run past the end.
    longest: u32,
    /// Where the group ends in the uncertain tokens (it starts where the previous one ends).
    end: u32,
}

impl Weigh for MaskEntry {
    fn weight(&self) -> usize {
        self.text.heap_bytes()
            + (self.specials.len() + self.uncertain.len()) * 4
            + self.crossings.len() * std::mem::size_of::<Crossing>()
            + 64
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

/// The per-vocabulary part shared by every operator matcher: the vocabulary, the global
/// mask cache and the limits every matcher works under.
pub struct Runtime {
    pub(crate) vocab: Vocab,
    pub(crate) cache: MaskCache<u128, MaskEntry>,
    pub(crate) limits: Limits,
    /// Text tokens in the vocabulary (the ids of its text mask).
    text_tokens: usize,
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
    /// A runtime for `vocab` whose mask cache holds at most `cache_bytes` (and its memo of
    /// continuation keys a sixteenth of that), with the default [`Limits`].
    pub fn new(vocab: Vocab, cache_bytes: usize) -> Arc<Runtime> {
        Runtime::with_limits(vocab, cache_bytes, Limits::new())
    }

    /// [`Runtime::new`] whose matchers work under `limits` (readings, work per call, history).
    pub fn with_limits(vocab: Vocab, cache_bytes: usize, limits: Limits) -> Arc<Runtime> {
        let text_tokens = vocab
            .text_mask()
            .iter()
            .map(|w| w.count_ones() as usize)
            .sum();
        Arc::new(Runtime {
            text_tokens,
            vocab,
            cache: MaskCache::new(cache_bytes),
            continuations: MaskCache::new(cache_bytes / 16),
            limits,
        })
    }

    /// The limits of the matchers on this runtime.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// Hit/miss counters and size of the global mask cache.
    pub fn cache_stats(&self) -> crate::mask::CacheStats {
        self.cache.stats()
    }

    fn l1_key(leaf: &Leaf, state: u32, rounds: Option<Rounds>) -> u128 {
        let mut h = StructHasher::new(L1_DOMAIN);
        h.hash(leaf.state_key(state));
        if let Some(r) = rounds {
            h.word(LOOP_MARK).word(r.word());
        }
        h.finish()
    }

    /// The leaf part of a thread in `leaf`'s `state` ([`Runtime::l1_key`]).
    fn leaf_part(
        &self,
        leaf: &Leaf,
        state: u32,
        rounds: Option<Rounds>,
        key: u128,
        budget: &Budget,
    ) -> Result<Arc<MaskEntry>, LimitExceeded> {
        match self.cache.get(&key) {
            Some(entry) => Ok(entry),
            None => Ok(self
                .cache
                .insert(key, self.compute_leaf_part(leaf, state, rounds, budget)?)),
        }
    }

    /// The `DoWhile` rounds of `thread`'s leaf, if the leaf is the whole body of the loop
    /// around it: its leaf part then follows the loop into further rounds.
    fn loop_rounds(&self, walker: &Walker, thread: &Thread) -> Option<Rounds> {
        let [.., parent, top] = thread.frames.as_slice() else {
            return None;
        };
        let Op::DoWhile { body, min, max } = *walker.program.op(OpId(parent.op)) else {
            return None;
        };
        let plain = matches!(walker.program.op(body), Op::Leaf { then, .. } if then.iter().all(Option::is_none));
        (body.0 == top.op && plain).then(|| Rounds::of(parent.count, min, max, self.count_cap()))
    }

    /// Past this many rounds (or units) a count looks the same to every token.
    fn count_cap(&self) -> u32 {
        self.vocab.max_token_len() as u32 + 1
    }

    /// The leaf part by a walk of the trie: one unit of work per trie node and per byte a
    /// slice proof steps. With `rounds`, the leaf is the body of a loop: where it ends, the
    /// walk starts another round while the loop has rounds left, so a token that stays inside
    /// the loop (a word in `[a-z]{0,3000}`) is accepted here instead of replayed through the
    /// cursor. Only a token that dies after a place where the loop (or a leaf with a way out
    /// and a way on) could have ended is left uncertain.
    // Long: the walk's trie visitor and slice probe are local types (only this walk uses them,
    // and they share its budget and result vectors); the walk itself is the last forty lines.
    fn compute_leaf_part(
        &self,
        leaf: &Leaf,
        state: u32,
        rounds: Option<Rounds>,
        budget: &Budget,
    ) -> Result<MaskEntry, LimitExceeded> {
        struct Walk<'a> {
            leaf: &'a Leaf,
            rounds: Option<Rounds>,
            vocab: &'a Vocab,
            accepted: MaskBuilder,
            uncertain: Vec<TokenId>,
            max_cross: u32,
            write_rest: u32,
            /// If the leaf is a `Write`, whose uncertain tokens are found only where it ends.
            crossings: Option<Vec<Crossing>>,
            budget: &'a Budget,
            error: Option<LimitExceeded>,
        }
        impl Walk<'_> {
            /// The state after `byte`, or `None` if the leaf (the loop) rejects it.
            fn next(&self, s: &WalkState, byte: u8, depth: u32) -> Option<WalkState> {
                let leaf = match s.leaf {
                    LOOP_DONE => return None,
                    leaf => self.leaf.step(leaf, byte as u32),
                };
                if leaf == DEAD {
                    return None;
                }
                let mut next = WalkState { leaf, ..*s };
                if self.leaf.exit(leaf).is_none() {
                    return Some(next);
                }
                if next.first_exit == NO_EXIT {
                    next.first_exit = depth;
                }
                let ends_here = match self.rounds {
                    // Staying in the leaf is followed; ending its round is left to the cursor.
                    None => true,
                    Some(_) if self.leaf.has_out(leaf) => true,
                    Some(r) => {
                        next.rounds += 1;
                        next.leaf = match next.rounds < r.to_max {
                            true => self.leaf.start(),
                            false => LOOP_DONE,
                        };
                        next.rounds >= r.to_min
                    }
                };
                if ends_here && next.could_end == NO_EXIT {
                    next.could_end = depth;
                }
                Some(next)
            }
        }
        impl TrieVisitor for Walk<'_> {
            type State = WalkState;
            fn step(
                &mut self,
                s: &WalkState,
                byte: u8,
                depth: usize,
                subtree: Subtree,
            ) -> TrieStep<WalkState> {
                if self.error.is_some() {
                    return TrieStep::Skip;
                }
                if let Err(e) = self.budget.spend(1) {
                    self.error = Some(e);
                    return TrieStep::Skip;
                }
                match self.next(s, byte, depth as u32) {
                    Some(next) => TrieStep::Enter(next),
                    None => {
                        if s.could_end != NO_EXIT {
                            let mut longest = 0;
                            for &t in subtree.tokens() {
                                self.uncertain.push(t);
                                let len = self.vocab.token_bytes(t).len() as u32;
                                longest = longest.max(len - s.first_exit);
                            }
                            self.max_cross = self.max_cross.max(longest);
                            // A `Write` ends once: `byte` is the first byte past its end.
                            if let Some(crossings) = &mut self.crossings {
                                crossings.push(Crossing {
                                    byte,
                                    longest,
                                    end: self.uncertain.len() as u32,
                                });
                                self.write_rest = s.first_exit;
                            }
                        }
                        TrieStep::Skip
                    }
                }
            }
            fn tokens(&mut self, _: &WalkState, tokens: &[TokenId]) {
                self.accepted.add(tokens);
            }
        }
        // Only aliveness matters to a slice: where the leaf could end does not.
        impl SliceProbe for Walk<'_> {
            type Error = LimitExceeded;
            fn advance(
                &mut self,
                s: &WalkState,
                byte: u8,
            ) -> Result<Option<WalkState>, Self::Error> {
                self.budget.spend(1)?;
                Ok(self.next(s, byte, 0).map(|next| WalkState {
                    first_exit: NO_EXIT,
                    could_end: NO_EXIT,
                    ..next
                }))
            }
            fn identity(&self, s: &WalkState) -> Option<u32> {
                let rounds_seen = self.rounds.map_or(1, |r| u64::from(r.to_max) + 1);
                u32::try_from(u64::from(s.leaf) * rounds_seen + u64::from(s.rounds)).ok()
            }
            fn accepted(&mut self) -> &mut [u32] {
                self.accepted.words()
            }
            // A slice's strings go on for ever, and a leaf without a loop dies within its
            // longest string (as the body of a loop, once the walk's rounds, counted up to a
            // token's length, run out): the proof could only fail, after up to ~1,300 steps
            // (150k of an id choice's first character's 205k instructions).
            fn tries_slice(&self, _: usize) -> bool {
                self.leaf.loops()
            }
        }
        let mut walk = Walk {
            leaf,
            rounds,
            vocab: &self.vocab,
            accepted: MaskBuilder::new(self.vocab.mask_words()),
            uncertain: Vec::new(),
            max_cross: 0,
            crossings: (rounds.is_none() && matches!(leaf, Leaf::Write(_))).then(Vec::new),
            write_rest: 0,
            budget,
            error: None,
        };
        let root = WalkState {
            leaf: state,
            rounds: 0,
            first_exit: NO_EXIT,
            could_end: NO_EXIT,
        };
        let mut proofs = SliceProofs::default();
        walk_sliced(&self.vocab, root, &mut walk, &mut proofs)?;
        if let Some(e) = walk.error {
            return Err(e);
        }
        let specials: Vec<TokenId> = leaf
            .specials(state)
            .into_iter()
            .filter(|&t| (t as usize) < self.vocab.mask_width())
            .collect();
        Ok(MaskEntry {
            text: walk
                .accepted
                .finish(self.vocab.text_mask(), self.text_tokens),
            specials: specials.into(),
            uncertain: walk.uncertain.into(),
            max_cross: walk.max_cross,
            crossings: walk.crossings.unwrap_or_default().into(),
            write_rest: walk.write_rest,
        })
    }

    /// Mixes into `h` what the continuation after `thread`'s leaf looks like to the runs of
    /// `l1`'s uncertain tokens past it: the leaves (and states) reachable after the exit, and,
    /// breadth first, the leaves after those while a run could still pass through (past a
    /// `Write`, only the runs the next leaf takes: [`Runtime::runs_into`]). Each (thread,
    /// budget) is visited once, so loops cost no more than their distinct states. Returns
    /// false past [`MAX_SIGNATURE_VISITS`] visits: a loop of short leaves under a long token
    /// (`(", " id)*` under a 100-byte run of spaces) visits thousands, each request anew, and
    /// the thread itself is then the cheaper key.
    fn continuation_signature(
        &self,
        walker: &Walker,
        thread: &Thread,
        l1: &MaskEntry,
        h: &mut StructHasher,
        budget: &Budget,
    ) -> Result<bool, LimitExceeded> {
        // Breadth first over (thread, remaining budget); the list doubles as the seen-set while
        // it is tiny (the next leaf or two), where a linear scan beats hashing.
        const LINEAR_SEEN: usize = 16;
        let mut visit: smallvec::SmallVec<[(Thread, u32); 4]> =
            smallvec::smallvec![(thread.clone(), l1.max_cross)];
        let mut seen: rustc_hash::FxHashSet<(Thread, u32)> = Default::default();
        let mut i = 0;
        while i < visit.len() {
            if i == MAX_SIGNATURE_VISITS {
                return Ok(false);
            }
            let (from, bytes) = visit[i].clone();
            i += 1;
            for next in walker.exit_closure(&from, budget)? {
                if next.is_end() {
                    h.word(END_MARK);
                    continue;
                }
                let top = next.top();
                let leaf = leaf_of(walker, top.op);
                h.hash(leaf.state_key(top.state));
                // Right after a `Write`, only the runs this leaf takes (`runs_into`); a leaf
                // that may end before reading a byte passes the others on to the leaves after
                // it, so it keeps them all.
                let may_pass = leaf.text_to_exit(top.state) == Some(0);
                let bytes = match l1.crossings.is_empty() || i > 1 || may_pass {
                    true => bytes,
                    false => self.runs_into(l1, leaf, top.state),
                };
                // Deeper leaves matter only if a run could pass all the way through this one.
                if let Some(d) = leaf.text_to_exit(top.state) {
                    let d = d.max(1);
                    if d < bytes {
                        h.word((bytes - d) as u64);
                        let entry = (next, bytes - d);
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
        Ok(true)
    }

    /// Longest run past the end of `l1`'s `Write` that `leaf`, in `state` right after it,
    /// reads: the runs of the groups whose first byte it takes. A `Write` next reads each of
    /// those runs (a few dozen tokens) for as long as it lasts, so only the runs that get
    /// through it count: after an id's closing quote, `", "` ends exactly where the next id
    /// would start, and no longer keys the continuation on the request's ids.
    fn runs_into(&self, l1: &MaskEntry, leaf: &Leaf, state: u32) -> u32 {
        let mut from = 0;
        let mut longest = 0;
        for c in l1.crossings.iter() {
            let group = &l1.uncertain[from..c.end as usize];
            from = c.end as usize;
            if leaf.step(state, u32::from(c.byte)) == DEAD {
                continue;
            }
            if !matches!(leaf, Leaf::Write(_)) {
                longest = longest.max(c.longest);
                continue;
            }
            for &t in group {
                let run = &self.vocab.token_bytes(t)[l1.write_rest as usize..];
                let mut s = state;
                for &b in run {
                    if s == DEAD || leaf.exit(s).is_some() {
                        break;
                    }
                    s = leaf.step(s, u32::from(b));
                }
                if s != DEAD {
                    longest = longest.max(run.len() as u32);
                }
            }
        }
        longest
    }

    /// `thread` as a key valid across programs and positions: each frame by its operator's
    /// structural hash (a root-to-leaf path with per-frame states names one place in any
    /// program of the same structure), a `DoWhile` round start only as "nothing consumed
    /// yet this round", the one thing the cursor asks of it, and a `DoWhile` count only as
    /// far as a token can tell ([`Rounds`]): every step of `[a-z]{0,3000}` away from its
    /// bounds has one key, where each used to replay the letter tokens again.
    fn thread_key(&self, walker: &Walker, thread: &Thread, l1_key: u128) -> u128 {
        let cap = self.count_cap();
        let mut h = StructHasher::new(THREAD_DOMAIN);
        h.hash(l1_key);
        for frame in &thread.frames {
            let op = OpId(frame.op);
            let (state, count) = match *walker.program.op(op) {
                Op::DoWhile { min, max, .. } => (
                    u64::from(frame.state == thread.pos),
                    Rounds::of(frame.count, min, max, cap).word(),
                ),
                _ => (u64::from(frame.state), u64::from(frame.count)),
            };
            h.hash(walker.program.info[op.index()].hash)
                .word(state)
                .word(count);
        }
        h.finish()
    }

    fn with_continuation(
        &self,
        walker: &Walker,
        thread: &Thread,
        l1: &MaskEntry,
        l1_key: u128,
        budget: &Budget,
    ) -> Result<Arc<MaskEntry>, LimitExceeded> {
        let thread_key = self.thread_key(walker, thread, l1_key);
        let key = match self.continuations.get(&thread_key) {
            Some(key) => key,
            None => {
                let mut h = StructHasher::new(L2_DOMAIN);
                h.hash(l1_key);
                let key = match self.continuation_signature(walker, thread, l1, &mut h, budget)? {
                    true => ContinuationKey(h.finish()),
                    // The thread key fixes the whole future (each frame's structural hash covers
                    // its operator's subtree): exact, only not shared.
                    false => ContinuationKey(
                        StructHasher::new(L2_THREAD_DOMAIN)
                            .hash(thread_key)
                            .finish(),
                    ),
                };
                self.continuations.insert(thread_key, key)
            }
        };
        if let Some(entry) = self.cache.get(&key.0) {
            return Ok(entry);
        }
        let mut built = MaskBuilder::from_stored(&l1.text, self.vocab.text_mask());
        // Steps into a slot whose thread list is reused: copying the list into a fresh one at
        // every byte was most of a replay's cost (85k of the ~100k instructions after an id's
        // closing quote).
        let step = |threads: &Threads, byte: u8, slot: &mut Threads| {
            walker.step_into(threads, byte as u32, slot, budget)
        };
        let start = Threads::from_elem(thread.clone(), 1);
        // Past a `Write`'s end, each group's first byte is stepped once, and only the groups
        // that live on are replayed (each from the start: they share the `Write`'s bytes).
        let mut replayed = vec![0..l1.uncertain.len()];
        if let Some(&first) = l1.uncertain.first().filter(|_| !l1.crossings.is_empty()) {
            replayed.clear();
            let rest = &self.vocab.token_bytes(first)[..l1.write_rest as usize];
            let (mut at_end, mut next) = (start.clone(), Threads::new());
            let mut alive = true;
            for &b in rest {
                alive = step(&at_end, b, &mut next)?;
                if !alive {
                    break;
                }
                std::mem::swap(&mut at_end, &mut next);
            }
            if alive {
                let mut from = 0;
                for c in l1.crossings.iter() {
                    if step(&at_end, c.byte, &mut next)? {
                        replayed.push(from..c.end as usize);
                    }
                    from = c.end as usize;
                }
            }
        }
        for group in replayed {
            self.vocab.walk_tokens(
                &l1.uncertain[group],
                start.clone(),
                step,
                |run, taken, _| {
                    if taken {
                        built.add(run);
                    }
                },
            )?;
        }
        let entry = MaskEntry {
            text: built.finish(self.vocab.text_mask(), self.text_tokens),
            specials: Box::new([]),
            uncertain: Box::new([]),
            max_cross: 0,
            crossings: Box::new([]),
            write_rest: 0,
        };
        Ok(self.cache.insert(key.0, entry))
    }

    /// Writes the mask of `threads` into `out` (every word written). One unit of work per
    /// thread, and whatever the cache's misses cost; an error past the budget.
    pub(crate) fn fill(
        &self,
        walker: &Walker,
        threads: &[Thread],
        out: &mut [u32],
        budget: &Budget,
    ) -> Result<(), LimitExceeded> {
        let universe = self.vocab.text_mask();
        let mut wrote = false;
        let mut accepting = false;
        for thread in threads {
            // A lookup, and a pass over the mask's words to add the thread's part.
            budget.spend(1 + (out.len() as u64 >> 6))?;
            if thread.is_end() {
                accepting = true;
                continue;
            }
            let top = thread.top();
            let leaf = leaf_of(walker, top.op);
            let rounds = self.loop_rounds(walker, thread);
            let key = Self::l1_key(leaf, top.state, rounds);
            let l1 = self.leaf_part(leaf, top.state, rounds, key, budget)?;
            let full = if l1.uncertain.is_empty() {
                l1.clone()
            } else {
                self.with_continuation(walker, thread, &l1, key, budget)?
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
        Ok(())
    }
}

/// A `DoWhile` count as a run of at most `cap - 1` units sees it: its distance to the upper
/// bound and to the lower one, each capped at `cap`. A round that counts consumes a unit, so
/// such a run moves the count by less than `cap`, and counts that agree here take the same
/// rounds and leave at the same places (XGrammar 2's repetition compression, exact).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rounds {
    to_min: u32,
    to_max: u32,
}

impl Rounds {
    fn of(count: u32, min: u32, max: u32, cap: u32) -> Rounds {
        let to_max = match max {
            UNBOUNDED => cap,
            max => max.saturating_sub(count).min(cap),
        };
        Rounds {
            to_min: min.saturating_sub(count).min(cap),
            to_max,
        }
    }

    fn word(self) -> u64 {
        u64::from(self.to_max) << 32 | u64::from(self.to_min)
    }
}

/// Where a leaf-part walk is after a node's prefix.
#[derive(Clone, Copy, Debug)]
struct WalkState {
    /// The leaf's state, or [`LOOP_DONE`] once the loop has no rounds left.
    leaf: u32,
    /// Rounds of the loop the prefix completed.
    rounds: u32,
    /// Depth of the leaf's first exit, where the continuation's signature starts.
    first_exit: u32,
    /// Depth of the first place where the leaf (or the loop) could have ended: a token that
    /// dies after it may live on in what follows.
    could_end: u32,
}

const NO_EXIT: u32 = u32::MAX;
/// The loop took its last round: every further byte is the continuation's.
const LOOP_DONE: u32 = u32::MAX - 1;
const LOOP_MARK: u64 = 0x100f;

pub(crate) fn leaf_of<'p>(walker: &Walker<'p>, op: u32) -> &'p Leaf {
    match walker.program.op(OpId(op)) {
        Op::Leaf { leaf, .. } => leaf,
        _ => unreachable!("the top frame of a thread is a leaf"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::Unit;

    /// Counts the trie nodes a walk of `leaf` alone enters or refuses.
    struct NodeCount<'a> {
        leaf: &'a Leaf,
        nodes: u64,
    }

    impl TrieVisitor for NodeCount<'_> {
        type State = u32;
        fn step(&mut self, s: &u32, byte: u8, _: usize, _: Subtree) -> TrieStep<u32> {
            self.nodes += 1;
            match self.leaf.step(*s, u32::from(byte)) {
                DEAD => TrieStep::Skip,
                next => TrieStep::Enter(next),
            }
        }
        fn tokens(&mut self, _: &u32, _: &[TokenId]) {}
    }

    /// A leaf without a loop (a choice among IDs, a literal) cannot survive a slice, so its
    /// leaf part costs its trie walk and nothing more: no slice proof is tried. A leaf with a
    /// loop may take a slice.
    #[test]
    fn leaves_without_a_loop_try_no_slice() {
        let vocab = Vocab::embedded_qwen3().unwrap();
        let runtime = Runtime::new(vocab.clone(), 1 << 20);
        let ids =
            Leaf::choice(["1", "1.1", "1.10", "10", "2", "2.1.1"].map(str::as_bytes)).unwrap();
        let literal = Leaf::write(&b"\", \"".map(Unit::Byte));
        let after_one = ids.step(ids.start(), u32::from(b'1'));
        for (leaf, state) in [(&ids, ids.start()), (&ids, after_one), (&literal, 0)] {
            assert!(!leaf.loops());
            let budget = Limits::new().budget();
            runtime
                .compute_leaf_part(leaf, state, None, &budget)
                .unwrap();
            let mut count = NodeCount { leaf, nodes: 0 };
            vocab.trie().walk(state, &mut count);
            assert_eq!(budget.spent(), count.nodes, "state {state}");
        }
        let words = crate::ops::RegexCompiler::new()
            .leaf("[A-Za-z0-9]+")
            .unwrap();
        assert!(words.loops());
    }
}
