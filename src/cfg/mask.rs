//! Token masks for the Earley engine: the adaptive token-mask cache (XGrammar §3, XGrammar 2's
//! Earley-based cache) and the trie walks that fill it.
//!
//! Every token's first byte is read by some item of the last row that has byte transitions
//! of its own (a *scannable* item; the others only predict or complete, and what they produce
//! is in the row too). So the mask is the union over scannable items of the tokens each can
//! start, classified in two cached levels:
//!
//! 1. **Item level** (keyed by the state's structural hash and what may follow its unit in
//!    this grammar): walk the whole token trie with a chart holding only the item, its unit
//!    entered from an unknown context. A token is *accepted* if the item's own derivations
//!    take all its bytes, *uncertain* if the unit completes inside the token and the byte after
//!    is one that may follow the unit in some caller (XGrammar's context expansion, as a
//!    one-byte follow set: `Program::follow`), *rejected* otherwise. Without the follow set,
//!    a string's content unit left every token with a newline or a tab after some text to the
//!    context level: a JME key-trie step sent it 2,529 tokens (it accepted 159), now 871.
//!    The body of a counted loop is classified together with its loop, whose counter is
//!    relaxed (XGrammar 2's repetition compression, done exactly): near the bound, the
//!    accepted tokens that start too many iterations are dropped, by a table of the
//!    iterations each token starts that one walk per loop body fills ([`iteration_starts`]).
//!    The walk memoizes Earley rows as a lazily built DFA, so dense regions (inside strings)
//!    cost a table lookup per trie node, and takes whole token slices (`vocab/slice.rs`) when
//!    the item survives every string of one: inside a JSON string only ~5k of Qwen3's 151k
//!    tokens are walked.
//! 2. **Context level** (keyed by the item-level key and the item's callers in the chart, up to
//!    `context_depth` levels, as a canonical description): re-walk only the uncertain tokens
//!    with those callers present (context expansion with the real parents instead of a static
//!    follow set). What they accept is added; what completes past the outermost caller stays
//!    uncertain and is checked against the full chart at run time (each such walk remembered
//!    by the matcher for as long as the rows under its last row stay).
//!
//! Both levels hold exact facts (accepted tokens really are allowed, rejected ones never are),
//! so a cache hit for a structurally equal item of another grammar is as good as a local one.
//! Special tokens and EOS are decided directly from the last row.
//!
//! Token lists (uncertain tokens, a context's accepted ones, the run-time checks) are kept as
//! sorted trie *positions* ([`TokenTrie::token_at`]): the trie keeps its tokens' bytes in that
//! order, so re-walking a list reads them in order and steps each token from the prefix it
//! shares with the previous one.

use std::cell::Cell;
use std::sync::{Arc, PoisonError};

use rustc_hash::FxHashSet;
use smallvec::SmallVec;

use super::chart::{waits_for, Chart, Item, EXT};
use super::program::{Program, SliceInterner, CALLS, COUNTED, FINAL, RELAXED, SCANS, SPECIALS};
use super::CfgGrammar;
use crate::base::bitmask::{clear_bit, get_bit, iter_ones, set_bit};
use crate::base::byteset::ByteSet;
use crate::base::token::TokenId;
use crate::ir::StructHasher;
use crate::limits::{Budget, LimitExceeded};
use crate::mask::{StoredMask, Weigh};
use crate::vocab::{
    walk_sliced, SliceProbe, SliceProofs, SliceState, Subtree, TokenSlice, TrieStep, TrieVisitor,
    Vocab,
};

const LEVEL1_DOMAIN: u64 = 0x6366_676c_6576_0001;
const LEVEL2_DOMAIN: u64 = 0x6366_676c_6576_0002;
const NEAR_DOMAIN: u64 = 0x6366_676c_6576_0003;
const NEAR_CONTEXT_DOMAIN: u64 = 0x6366_676c_6576_0004;
const SETTLED_DOMAIN: u64 = 0x6366_676c_6576_0005;
const OUTER_DOMAIN: u64 = 0x6366_676c_6576_0006;
const STARTS_DOMAIN: u64 = 0x6366_676c_6576_0007;

/// A token's position in the vocabulary trie (see the module notes).
type Position = u32;

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
const UNKNOWN_STARTS: u16 = u16::MAX;

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

/// What the cache needs to know of the vocabulary's text tokens (orders, character counts),
/// computed once per compiler.
#[derive(Debug)]
pub(crate) struct VocabIndex {
    /// Longest first (for counters near their bound).
    by_len: Box<[TokenId]>,
    /// Position of each token (`u32::MAX` for non-text ids).
    position: Box<[Position]>,
    /// Per token id, the UTF-8 characters its bytes start (bytes that are not continuation
    /// bytes), saturated.
    characters: Box<[u16]>,
}

impl VocabIndex {
    pub fn new(vocab: &Vocab) -> VocabIndex {
        struct Order(Vec<u32>, u32);
        impl TrieVisitor for Order {
            type State = ();
            fn step(&mut self, _: &(), _: u8, _: usize, _: Subtree) -> TrieStep<()> {
                TrieStep::Enter(())
            }
            fn tokens(&mut self, _: &(), tokens: &[TokenId]) {
                for &t in tokens {
                    self.0[t as usize] = self.1;
                    self.1 += 1;
                }
            }
        }
        let mut order = Order(vec![u32::MAX; vocab.len()], 0);
        vocab.trie().walk((), &mut order);
        let mut by_len: Vec<TokenId> = (0..vocab.len() as TokenId)
            .filter(|&t| order.0[t as usize] != u32::MAX)
            .collect();
        by_len.sort_by_key(|&t| std::cmp::Reverse(vocab.token_bytes(t).len()));
        let characters = (0..vocab.len() as TokenId)
            .map(|t| {
                let starts = vocab
                    .token_bytes(t)
                    .iter()
                    .filter(|&&b| !is_continuation(b));
                starts.count().min(UNKNOWN_STARTS as usize - 1) as u16
            })
            .collect();
        VocabIndex {
            by_len: by_len.into(),
            position: order.0.into(),
            characters,
        }
    }

    /// The text tokens longer than `n` bytes.
    fn longer_than(&self, vocab: &Vocab, n: u32) -> &[TokenId] {
        &self.by_len[..self
            .by_len
            .partition_point(|&t| vocab.token_bytes(t).len() > n as usize)]
    }

    /// Bytes of the longest token set in `words` (0 if none). Few set bits are read directly:
    /// a forced stretch accepts a handful of tokens, and the longest-first scan passed most
    /// of the vocabulary before meeting one (~80 µs of a ~90 µs first mask after `{"`).
    fn longest(&self, vocab: &Vocab, words: &[u32]) -> u32 {
        let set: usize = words.iter().map(|w| w.count_ones() as usize).sum();
        if set * 16 >= self.by_len.len() {
            return self
                .by_len
                .iter()
                .find(|&&t| get_bit(words, t))
                .map_or(0, |&t| vocab.token_bytes(t).len() as u32);
        }
        iter_ones(words)
            .map(|t| vocab.token_bytes(t).len() as u32)
            .max()
            .unwrap_or(0)
    }

    /// The token's position in the trie.
    fn position(&self, token: TokenId) -> Position {
        self.position[token as usize]
    }

    /// The tokens' positions, sorted.
    fn positions(&self, tokens: &[TokenId]) -> Box<[Position]> {
        let mut positions: Vec<Position> = tokens.iter().map(|&t| self.position(t)).collect();
        positions.sort_unstable();
        positions.into()
    }
}

/// Buffers reused across masks (a matcher owns one), so a cached mask allocates nothing.
#[derive(Default, Debug)]
pub(crate) struct Scratch {
    scannable: Vec<Item>,
    pending: Vec<Position>,
    settled: Settled,
    done: Vec<u128>,
    explored: Vec<(u32, u32)>,
    /// `explored` and `found` as sets: a row of thousands of callers made the look-ups
    /// quadratic.
    explored_set: FxHashSet<(u32, u32)>,
    found: Vec<(u32, Item)>,
    found_set: FxHashSet<(u32, Item)>,
    rows: Vec<u32>,
    described: Vec<(u32, u128, u64, u32)>,
}

impl Scratch {
    /// Rows under the last one were removed (rollback, reset): what was learnt on them goes.
    pub fn forget_rows(&mut self) {
        self.settled.clear();
    }
}

/// The run-time walks of one matcher, by the last row's items: which of the tokens that only
/// the whole chart decides it accepted. While tokens are only consumed the rows under the last
/// one never change, and every step inside a string ends on the same row, so in a grammar
/// whose strings the context levels cannot close (recursive JSON values) the walk is done once
/// per string instead of once per token.
#[derive(Default, Debug)]
struct Settled {
    walks: rustc_hash::FxHashMap<u128, SettledWalk>,
    positions: usize,
}

/// By the last row's hash: the tokens walked and those accepted.
type SettledWalk = (Box<[Position]>, Box<[Position]>);

/// Most positions [`Settled`] holds per matcher (256 KiB); past it, it starts again.
const MAX_SETTLED_POSITIONS: usize = 1 << 16;

impl Settled {
    fn clear(&mut self) {
        self.walks.clear();
        self.positions = 0;
    }

    fn get(&self, row: u128, walked: &[Position]) -> Option<&[Position]> {
        self.walks
            .get(&row)
            .filter(|(w, _)| **w == *walked)
            .map(|(_, accepted)| &**accepted)
    }

    /// Keeps a walk, unless it alone is over the budget.
    fn insert(&mut self, row: u128, walked: &[Position], accepted: Vec<Position>) {
        let size = walked.len() + accepted.len();
        if size > MAX_SETTLED_POSITIONS {
            return;
        }
        if self.positions + size > MAX_SETTLED_POSITIONS {
            self.clear();
        }
        self.positions += size;
        if let Some((w, a)) = self.walks.insert(row, (walked.into(), accepted.into())) {
            self.positions -= w.len() + a.len();
        }
    }
}

fn row_hash(row: &[Item]) -> u128 {
    let mut h = StructHasher::new(SETTLED_DOMAIN);
    h.word(row.len() as u64);
    for it in row {
        h.word(it.state as u64 | (it.origin as u64) << 32)
            .word(it.count as u64);
    }
    h.finish()
}

/// Fills `out` (already sized) with the mask after the chart's rows.
/// Work: a unit per trie node a walk visits and per cached entry looked up, plus what the
/// Earley rows the walks push cost (see [`Chart`]); an error past the budget.
pub(crate) fn fill(
    g: &CfgGrammar,
    chart: &mut Chart,
    scratch: &mut Scratch,
    out: &mut [u32],
    budget: &Budget,
) -> Result<(), LimitExceeded> {
    out.fill(0);
    if g.config.mask_cache {
        fill_cached(g, chart, scratch, out, budget)?;
    } else {
        let mut dfa = StateDfa::new(chart.num_rows(), g.prog.n_classes());
        TrieWalk::new(&g.prog, &g.vocab, chart, &mut dfa, out, None, budget).walk()?;
    }
    let prog = &g.prog;
    for it in chart.last_row() {
        if prog.state(it.state).flags & SPECIALS != 0 {
            for &(sid, _) in prog.specials_of(it.state) {
                set_bit(out, prog.specials[sid as usize].1);
            }
        }
    }
    if chart.is_accepting(prog) {
        g.vocab.eos_tokens().iter().for_each(|&t| set_bit(out, t));
    }
    Ok(())
}

fn fill_cached(
    g: &CfgGrammar,
    chart: &mut Chart,
    scratch: &mut Scratch,
    out: &mut [u32],
    budget: &Budget,
) -> Result<(), LimitExceeded> {
    let prog = &g.prog;
    let vocab = &g.vocab;
    let trie = vocab.trie();
    let Scratch {
        scannable,
        pending,
        done,
        ..
    } = scratch;
    scannable.clear();
    // Every token's first byte is read by an item of the last row that scans it itself.
    scannable.extend(
        chart
            .last_row()
            .iter()
            .filter(|it| prog.state(it.state).flags & SCANS != 0),
    );
    pending.clear();
    done.clear();
    let scannable = std::mem::take(scannable);
    let mut pending = std::mem::take(pending);
    for k in &scannable {
        // Finding the subject reads the item's origin row (twice when it is a loop body), and
        // each part of the mask is first looked for among those already added.
        let origin_row = chart.row(k.origin as usize).len() as u64;
        budget.spend(2 * origin_row + scratch.done.len() as u64)?;
        let subject = Subject::of(g, chart, k);
        let k1 = subject.key(g);
        let item = cached(g, k1, budget, || item_level(g, &subject, budget))?;
        let CacheEntry::Item {
            accepted,
            longest,
            uncertain,
        } = &*item
        else {
            unreachable!("item keys hold item entries")
        };
        // The accepted tokens this subject's loop can take, by the loop's counters when a token
        // could reach its bound.
        let near = match subject.left {
            Some(left) if longest.is_some_and(|longest| left < longest) => {
                let counts = subject.loop_counts(g, chart);
                let mut key = StructHasher::new(NEAR_DOMAIN);
                let lifted = subject.lifted.expect("only loops have iterations left");
                key.hash(k1).hash(g.hashes().state(lifted));
                counts.iter().for_each(|&n| {
                    key.word(n as u64);
                });
                Some((key.finish(), counts))
            }
            _ => None,
        };
        let done = near.as_ref().map_or(k1, |(key, _)| *key);
        if !scratch.done.contains(&done) {
            match &near {
                Some((key, counts)) => {
                    let near = cached(g, *key, budget, || {
                        near_bound(g, &subject, counts, accepted, budget)
                    })?;
                    let CacheEntry::NearBound { valid, uncertain } = &*near else {
                        unreachable!("near-bound keys hold near-bound entries")
                    };
                    valid.or_into(out, vocab.text_mask());
                    pending.extend_from_slice(uncertain);
                }
                None => accepted.or_into(out, vocab.text_mask()),
            }
            scratch.done.push(done);
        }
        if uncertain.is_empty() {
            continue;
        }
        if g.config.context_depth == 0 {
            pending.extend_from_slice(uncertain);
            continue;
        }
        let k2 = context_key(g, chart, scratch, &subject, k1, budget)?;
        let entry = cached(g, k2, budget, || {
            Context::build(scratch, k).classify(g, uncertain, budget)
        })?;
        let CacheEntry::Context {
            accepted,
            uncertain,
        } = &*entry
        else {
            unreachable!("context keys hold context entries")
        };
        pending.extend_from_slice(uncertain);
        // Found with the loop relaxed: tokens long enough to reach its bound depend on the
        // iterations left. Their fate is cached by the iterations left when one loop item was
        // relaxed (then its real count is known); else checked against the chart.
        let left = subject.left.filter(|_| subject.relax);
        let reaches_bound =
            |t: TokenId| left.is_some_and(|l| vocab.token_bytes(t).len() > l as usize);
        let mut long = Vec::new();
        for &p in accepted.iter() {
            let t = trie.token_at(p);
            match reaches_bound(t) {
                true => long.push(p),
                false => set_bit(out, t),
            }
        }
        let (Some(left), false) = (left, long.is_empty()) else {
            continue;
        };
        let Some(near) = Context::build_near(g, scratch, k, &subject, left) else {
            pending.extend_from_slice(&long);
            continue;
        };
        let key = StructHasher::new(NEAR_CONTEXT_DOMAIN)
            .hash(k2)
            .word(left as u64)
            .finish();
        let entry = cached(g, key, budget, || near.classify(g, &long, budget))?;
        let CacheEntry::Context {
            accepted,
            uncertain,
        } = &*entry
        else {
            unreachable!("near-context keys hold context entries")
        };
        accepted
            .iter()
            .for_each(|&p| set_bit(out, trie.token_at(p)));
        pending.extend_from_slice(uncertain);
    }
    scratch.scannable = scannable;
    if !pending.is_empty() {
        // What is left depends on the whole chart: check it along the trie.
        pending.sort_unstable();
        pending.dedup();
        pending.retain(|&p| !get_bit(out, trie.token_at(p)));
        let row = row_hash(chart.last_row());
        match scratch.settled.get(row, &pending) {
            Some(accepted) => accepted
                .iter()
                .for_each(|&p| set_bit(out, trie.token_at(p))),
            None => {
                let mut accepted = Vec::new();
                let mut dfa = StateDfa::new(chart.num_rows(), prog.n_classes());
                walk_list(
                    prog,
                    vocab,
                    chart,
                    &mut dfa,
                    &pending,
                    budget,
                    |p, outcome| {
                        if matches!(outcome, Outcome::Accepted) {
                            set_bit(out, trie.token_at(p));
                            accepted.push(p);
                        }
                    },
                )?;
                scratch.settled.insert(row, &pending, accepted);
            }
        }
    }
    scratch.pending = pending;
    Ok(())
}

/// The cache's entry for `key`, computed and inserted if missing (a unit of work for the
/// lookup; an entry whose computation failed is not kept).
fn cached(
    g: &CfgGrammar,
    key: u128,
    budget: &Budget,
    compute: impl FnOnce() -> Result<CacheEntry, LimitExceeded>,
) -> Result<Arc<CacheEntry>, LimitExceeded> {
    budget.spend(1)?;
    match g.cache.get(&key) {
        Some(entry) => Ok(entry),
        None => Ok(g.cache.insert(key, compute()?)),
    }
}

/// A cached token set in the form that is fastest to OR into a mask: an id list while it is
/// short, else the bitset (one vectorized pass beats thousands of scattered bit writes).
fn stored(words: &[u32], universe: &[u32]) -> StoredMask {
    const MAX_IDS: usize = 256;
    match StoredMask::from_words(words, universe) {
        StoredMask::Accepted(ids) | StoredMask::Rejected(ids) if ids.len() > MAX_IDS => {
            StoredMask::Bitset(words.into())
        }
        small => small,
    }
}

/// The repetition counter as it matters to a token of at most `cap - 1` bytes: its distance
/// to the upper bound and to the lower bound, each capped (XGrammar 2's repetition
/// compression, exact: counters further than a token from both bounds behave alike).
fn count_class(prog: &Program, it: &Item, cap: u32) -> u64 {
    let st = prog.state(it.state);
    if st.flags & COUNTED == 0 {
        return 0;
    }
    let c = prog.units[st.unit as usize].counted.expect("counted state");
    let to_max = c.left(it.count).map_or(cap, |left| left.min(cap));
    let to_min = c.min.saturating_sub(it.count).min(cap);
    ((to_max as u64) << 32) | to_min as u64
}

fn cap(vocab: &Vocab) -> u32 {
    vocab.max_token_len() as u32 + 1
}

/// What the item level classifies: a scannable item and, when it is the body of a counted
/// loop (every caller of its unit in its origin row is that loop's counted state), the loop.
/// A loop body is often a single character, so alone its unit would end after every byte and
/// leave almost every token to the context level; with the loop it covers whole strings.
///
/// The loop's counter is relaxed (bounds ignored) in both cache levels, so every step of a
/// bounded string shares their entries: a token of `n` bytes runs at most `n` iterations (an
/// iteration reads at least one byte), so an upper bound more than a token away changes
/// nothing, and a lower bound only decides where the loop may complete. Near an upper bound
/// (`left`), accepted tokens long enough to reach it go to the exact run-time check; below the
/// lower bound the context level sees the real counter.
#[derive(Clone, Copy, Debug)]
struct Subject {
    item: Item,
    /// The loop's counted state.
    lifted: Option<u32>,
    /// Iterations the loop has left (the most, over its items), when a token could use them
    /// all up (fewer than `cap`).
    left: Option<u32>,
    /// The loop, with one counter, has reached its minimum: the context level may relax it too.
    relax: bool,
}

impl Subject {
    fn of(g: &CfgGrammar, chart: &Chart, k: &Item) -> Subject {
        let prog = &g.prog;
        let plain = Subject {
            item: *k,
            lifted: None,
            left: None,
            relax: false,
        };
        let unit = prog.state(k.state).unit;
        let mut lifted = None;
        for w in chart.row(k.origin as usize) {
            if !waits_for(prog, w, unit) {
                continue;
            }
            if prog.state(w.state).flags & COUNTED == 0 || lifted.is_some_and(|l| l != w.state) {
                return plain;
            }
            lifted = Some(w.state);
        }
        let Some(state) = lifted else {
            return plain;
        };
        let counts = Subject { lifted, ..plain }.loop_counts(g, chart);
        let c = prog.units[prog.state(state).unit as usize]
            .counted
            .expect("counted state");
        // Derivations that reached this row after different numbers of iterations: a token
        // fits if it fits one of them, so the most iterations left bound it.
        let left = counts
            .iter()
            .map(|&n| c.left(n))
            .try_fold(0, |most, l| l.map(|l| most.max(l)));
        Subject {
            item: *k,
            lifted,
            left: left.filter(|&l| l < cap(&g.vocab)),
            relax: counts.len() == 1 && c.complete(counts[0]),
        }
    }

    /// The counters of the loop's items waiting for the subject (one per derivation that
    /// reached its row after a different number of iterations).
    fn loop_counts(&self, g: &CfgGrammar, chart: &Chart) -> SmallVec<[u32; 2]> {
        let unit = g.prog.state(self.item.state).unit;
        let mut counts = SmallVec::new();
        for w in chart.row(self.item.origin as usize) {
            let waiting = Some(w.state) == self.lifted && waits_for(&g.prog, w, unit);
            if waiting && !counts.contains(&w.count) {
                counts.push(w.count);
            }
        }
        counts.sort_unstable();
        counts
    }

    /// The item-level key. The unit entered from the unknown context (the loop, if lifted)
    /// adds what may follow it in this grammar: that decides which tokens are uncertain.
    fn key(&self, g: &CfgGrammar) -> u128 {
        let hashes = g.hashes();
        let mut h = StructHasher::new(LEVEL1_DOMAIN);
        h.hash(hashes.state(self.item.state))
            .word(self.item.count as u64);
        // A lifted loop is named by its body, the item's unit, alone: this level relaxes its
        // bounds, so the loops of `[0-9A-Za-z]{8}-[0-9A-Za-z]{4}-…` share one walk. Keys
        // built on this one that use the bounds add the loop's own hash.
        h.word(self.lifted.is_some() as u64);
        let outer = self.lifted.unwrap_or(self.item.state);
        hash_follow(&mut h, &g.prog, outer);
        h.finish()
    }

    /// The chart the subject is walked on: the item alone, its unit entered from an unknown
    /// context, or the item under its loop's items with these counters.
    fn rows(&self, counts: &[u32]) -> Vec<Vec<Item>> {
        match self.lifted {
            Some(l) => vec![
                counts
                    .iter()
                    .map(|&count| Item {
                        state: l,
                        origin: EXT,
                        count,
                    })
                    .collect(),
                vec![Item {
                    origin: 0,
                    ..self.item
                }],
            ],
            None => vec![vec![Item {
                origin: EXT,
                ..self.item
            }]],
        }
    }
}

/// Adds what may follow `state`'s unit ([`Program::follow`]) to a key.
fn hash_follow(h: &mut StructHasher, prog: &Program, state: u32) {
    let follow = &prog.follow[prog.state(state).unit as usize];
    follow.words().iter().for_each(|&w| {
        h.word(w);
    });
}

/// Item level: the whole trie against the subject alone, the loop's counter (if any) relaxed.
fn item_level(
    g: &CfgGrammar,
    subject: &Subject,
    budget: &Budget,
) -> Result<CacheEntry, LimitExceeded> {
    let prog = &g.prog;
    let vocab = &g.vocab;
    let rows = subject.rows(&[RELAXED]);
    let mut words = vec![0u32; vocab.mask_words()];
    let mut uncertain = Vec::new();
    let listed = with_shared(g, &rows, |chart, dfa| {
        let mut walk = TrieWalk::new(
            prog,
            vocab,
            chart,
            dfa,
            &mut words,
            Some(&mut uncertain),
            budget,
        );
        walk.walk().map(|()| walk.listed.take())
    })?;
    let in_loop = subject.lifted.is_some();
    let (accepted, longest) = match listed {
        Some((mut ids, longest)) => {
            ids.sort_unstable();
            (StoredMask::Accepted(ids.into()), in_loop.then_some(longest))
        }
        None => (
            stored(&words, vocab.text_mask()),
            in_loop.then(|| g.index.longest(vocab, &words)),
        ),
    };
    Ok(CacheEntry::Item {
        accepted,
        longest,
        uncertain: g.index.positions(&uncertain),
    })
}

/// What a lifted subject's loop, its items at `counts`, makes of its accepted tokens (see
/// [`CacheEntry::NearBound`]): the ones it can take. An accepted token has a way through
/// the relaxed loop that never completes it, so only the upper bound matters, and only
/// through the iterations the token starts past the one in progress: each needs the counter
/// below the bound, so the loop takes the token iff it starts fewer than the most iterations
/// any item has left. The counts come from a table shared by every bound of every loop over
/// the same body ([`iteration_starts`]); the tokens it does not know, among them those that
/// may also leave the loop and go on in the context, are walked with the real counters, and
/// those left to the context are the entry's uncertain ones.
fn near_bound(
    g: &CfgGrammar,
    subject: &Subject,
    counts: &[u32],
    accepted: &StoredMask,
    budget: &Budget,
) -> Result<CacheEntry, LimitExceeded> {
    let (prog, vocab) = (&g.prog, &g.vocab);
    let left = subject.left.expect("near a bound");
    // The subject's state is in the loop's body, so its hash names the body too; the loop's
    // bounds do not matter to a relaxed walk.
    let key = StructHasher::new(STARTS_DOMAIN)
        .hash(g.hashes().state(subject.item.state))
        .word(subject.item.count as u64)
        .finish();
    let table = cached(g, key, budget, || iteration_starts(g, subject, budget))?;
    let CacheEntry::Starts(starts) = &*table else {
        unreachable!("starts keys hold starts entries")
    };
    let mut words = vec![0u32; vocab.mask_words()];
    accepted.write_to(&mut words, vocab.text_mask());
    let below = left.min(UNKNOWN_STARTS as u32) as u16;
    // Unknown counts: a token of at most `left` bytes cannot start `left` iterations (each
    // reads a byte, and the first byte continues the one in progress); longer ones are walked.
    let mut unknown = Vec::new();
    let long = g.index.longer_than(vocab, left);
    if long.len() * 16 < vocab.len() {
        // Far from the bound only a few long tokens can tell.
        for &t in long {
            match starts[t as usize] {
                _ if !get_bit(&words, t) => {}
                n if n < below => {}
                UNKNOWN_STARTS => {
                    clear_bit(&mut words, t);
                    unknown.push(g.index.position(t));
                }
                _ => clear_bit(&mut words, t),
            }
        }
    } else {
        // Near it most tokens can: one pass over the table.
        for (i, (w, chunk)) in words.iter_mut().zip(starts.chunks(32)).enumerate() {
            let (takes, unknowns) = starts_below(chunk, below);
            let mut unknown_here = *w & unknowns;
            *w &= takes;
            while unknown_here != 0 {
                let t = (i * 32) as TokenId + unknown_here.trailing_zeros();
                unknown_here &= unknown_here - 1;
                match vocab.token_bytes(t).len() as u32 > left {
                    true => unknown.push(g.index.position(t)),
                    false => *w |= 1 << (t % 32),
                }
            }
        }
    }
    let mut uncertain = Vec::new();
    if !unknown.is_empty() {
        unknown.sort_unstable();
        let rows = subject.rows(counts);
        let trie = vocab.trie();
        with_shared(g, &rows, |chart, dfa| {
            walk_list(
                prog,
                vocab,
                chart,
                dfa,
                &unknown,
                budget,
                |p, outcome| match outcome {
                    Outcome::Accepted => set_bit(&mut words, trie.token_at(p)),
                    Outcome::Failed { ext: true } => uncertain.push(p),
                    Outcome::Failed { ext: false } => {}
                },
            )
        })?;
    }
    Ok(CacheEntry::NearBound {
        valid: stored(&words, vocab.text_mask()),
        uncertain: uncertain.into(),
    })
}

/// Bits of the tokens of a 32-token chunk that start fewer than `below` iterations, and of
/// those the table does not know.
#[inline]
fn starts_below(chunk: &[u16], below: u16) -> (u32, u32) {
    let mut lanes = [UNKNOWN_STARTS; 32];
    lanes[..chunk.len()].copy_from_slice(chunk);
    let (mut takes, mut unknowns) = (0u32, 0u32);
    for (j, &n) in lanes.iter().enumerate() {
        takes |= ((n < below) as u32) << j;
        unknowns |= ((n == UNKNOWN_STARTS) as u32) << j;
    }
    (takes, unknowns)
}

/// The iteration starts table of a lifted subject: a walk of the whole trie with the loop
/// relaxed, counting along each path the bytes read at an iteration boundary (where the only
/// way on is a new iteration). Where a row both continues an iteration and could start one,
/// the tokens below it get [`UNKNOWN_STARTS`].
fn iteration_starts(
    g: &CfgGrammar,
    subject: &Subject,
    budget: &Budget,
) -> Result<CacheEntry, LimitExceeded> {
    let (prog, vocab) = (&g.prog, &g.vocab);
    let lifted = subject.lifted.expect("only loop bodies have bounds");
    let rows = subject.rows(&[RELAXED]);
    let mut starts = vec![UNKNOWN_STARTS; vocab.len()];
    with_shared(g, &rows, |chart, dfa| {
        let mut walk = StartsWalk {
            stepper: Stepper::new(prog, chart, dfa, budget),
            lifted,
            boundaries: Vec::new(),
            starts: &mut starts,
            error: None,
        };
        let root = walk.stepper.root();
        let mut counted = None;
        for slice in vocab.slices() {
            if let Some(root_starts) = walk.starts_with_characters(slice, root)? {
                counted = Some((slice, root_starts));
                break;
            }
        }
        match counted {
            Some((slice, root_starts)) => {
                for t in iter_ones(slice.members()) {
                    let first = vocab.token_bytes(t).first();
                    let first_continues =
                        !root_starts && !first.is_some_and(|&b| is_continuation(b));
                    walk.starts[t as usize] =
                        g.index.characters[t as usize] - u16::from(first_continues);
                }
                slice.rest().walk((root, 0), &mut walk);
            }
            None => vocab.trie().walk((root, 0), &mut walk),
        }
        walk.stepper.finish()?;
        walk.error.map_or(Ok(()), Err)
    })?;
    Ok(CacheEntry::Starts(starts.into()))
}

/// Where a row stands in the lifted loop's iterations.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Boundary {
    /// Inside an iteration: the next byte continues it.
    Inside,
    /// Between iterations: the next byte starts one.
    Between,
    /// Both (or a structure the row DFA does not hold).
    Unknown,
}

/// The walk of [`iteration_starts`]; its state is the row DFA's and the starts so far.
struct StartsWalk<'a> {
    stepper: Stepper<'a>,
    lifted: u32,
    /// Per row-DFA state, where it stands (`None`: not looked at yet).
    boundaries: Vec<Option<Boundary>>,
    starts: &'a mut [u16],
    error: Option<LimitExceeded>,
}

impl StartsWalk<'_> {
    fn boundary(&mut self, node: &Node) -> Boundary {
        let Some(id) = node.dfa() else {
            return Boundary::Unknown;
        };
        let id = id as usize;
        if id >= self.boundaries.len() {
            self.boundaries.resize(id + 1, None);
        }
        if let Some(b) = self.boundaries[id] {
            return b;
        }
        // The loop's item in the last row means an iteration just ended; any other item from
        // an earlier row that can still read or call continues one.
        let prog = self.stepper.prog;
        let (here, last) = self.stepper.dfa.last_row(id as u32);
        let (mut ended, mut continues) = (false, false);
        for it in last {
            if it.state == self.lifted && it.origin == EXT {
                ended = true;
            } else if it.origin != here && prog.state(it.state).flags & (SCANS | CALLS) != 0 {
                continues = true;
            }
        }
        let b = match (ended, continues) {
            (false, _) => Boundary::Inside,
            (true, false) => Boundary::Between,
            (true, true) => Boundary::Unknown,
        };
        self.boundaries[id] = Some(b);
        b
    }

    /// Does every string of `slice` that the relaxed loop takes from `root` start an iteration
    /// exactly at each byte after the first that starts a UTF-8 character (a loop over single
    /// characters, as a string's)? Then each of the slice's tokens the loop takes starts as
    /// many iterations as it has characters, less the first when it continues the iteration
    /// in progress, and only the slice's rest needs a walk. `Some(whether the root's first
    /// byte starts an iteration)` if so.
    ///
    /// Explores the pairs of slice and row states those strings reach: every byte the slice
    /// allows from a pair is rejected by the loop (no token the loop takes passes there), or
    /// starts an iteration iff it starts a character, from a known boundary, without leaving
    /// the loop. At the root only the boundary matters: between iterations any first byte
    /// starts one (a continuation byte cannot come first), inside one none does.
    fn starts_with_characters(
        &mut self,
        slice: &TokenSlice,
        root: Node,
    ) -> Result<Option<bool>, LimitExceeded> {
        let mut met: FxHashSet<(SliceState, u32)> = FxHashSet::default();
        let mut stack = vec![(slice.start(), root, true)];
        let mut root_starts = false;
        while let Some((s, node, at_root)) = stack.pop() {
            let between = match self.boundary(&node) {
                Boundary::Between => true,
                Boundary::Inside => false,
                Boundary::Unknown => return Ok(None),
            };
            if at_root {
                root_starts = between;
            }
            for byte in 0..=u8::MAX {
                let Some(next_s) = slice.next(s, byte) else {
                    continue;
                };
                let Some(next) = self.stepper.advance(&node, byte)? else {
                    continue;
                };
                let Some(id) = next.dfa() else {
                    return Ok(None);
                };
                let counted_right = at_root || between != is_continuation(byte);
                if next.ext() || !counted_right {
                    return Ok(None);
                }
                if met.insert((next_s, id)) {
                    if met.len() > MAX_CHARACTER_PAIRS {
                        return Ok(None);
                    }
                    stack.push((next_s, next, false));
                }
            }
        }
        Ok(Some(root_starts))
    }
}

/// Most (slice state, row state) pairs [`StartsWalk::starts_with_characters`] explores.
const MAX_CHARACTER_PAIRS: usize = 64;

/// Is `byte` a UTF-8 continuation byte (one that starts no character)?
fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

impl TrieVisitor for StartsWalk<'_> {
    type State = (Node, u16);

    fn step(
        &mut self,
        (parent, n): &(Node, u16),
        byte: u8,
        _: usize,
        _: Subtree,
    ) -> TrieStep<(Node, u16)> {
        if self.error.is_some() {
            return TrieStep::Skip;
        }
        let n = match (self.boundary(parent), *n) {
            (_, UNKNOWN_STARTS) | (Boundary::Unknown, _) => UNKNOWN_STARTS,
            (Boundary::Between, n) => (n + 1).min(UNKNOWN_STARTS - 1),
            (Boundary::Inside, n) => n,
        };
        match self.stepper.advance(parent, byte) {
            Ok(Some(next)) => TrieStep::Enter((next, n)),
            Ok(None) => TrieStep::Skip,
            Err(e) => {
                self.error = Some(e);
                TrieStep::Skip
            }
        }
    }

    fn tokens(&mut self, &(node, n): &(Node, u16), tokens: &[TokenId]) {
        // A token that may also leave the loop after an iteration and go on in the context
        // is not decided by the iterations it starts inside it.
        let n = if node.ext() { UNKNOWN_STARTS } else { n };
        tokens.iter().for_each(|&t| self.starts[t as usize] = n);
    }
}

/// Gathers `k`'s callers in the chart into `scratch` (callers of its unit in its origin row,
/// their callers, ... up to `context_depth` levels) and returns the context-level key: the
/// item-level key and a canonical description of those rows, where origins inside the gathered
/// rows are renumbered and callers whose own callers were not gathered get origin [`EXT`].
fn context_key(
    g: &CfgGrammar,
    chart: &Chart,
    scratch: &mut Scratch,
    subject: &Subject,
    item_key: u128,
    budget: &Budget,
) -> Result<u128, LimitExceeded> {
    let k = &subject.item;
    let prog = &g.prog;
    let Scratch {
        explored,
        explored_set,
        found,
        found_set,
        rows,
        described,
        ..
    } = scratch;
    explored.clear();
    explored_set.clear();
    found.clear();
    found_set.clear();
    rows.clear();
    described.clear();
    explored.push((k.origin, prog.state(k.state).unit));
    explored_set.insert(explored[0]);
    // A caller that only returns into the end of its own unit (a rule called last in its
    // caller's body) decides nothing: its completion passes straight up. When it is the only
    // caller, it is gathered at no cost in depth, so a chain of tail calls does not use the
    // levels up (several callers, as in an ambiguous loop, would grow the context each byte).
    let mut level: SmallVec<[(u32, u32); 8]> = smallvec::smallvec![explored[0]];
    for depth in 1..=g.config.context_depth {
        let mut next_level: SmallVec<[(u32, u32); 8]> = SmallVec::new();
        while let Some((row, unit)) = level.pop() {
            let first = found.len();
            budget.spend(chart.row(row as usize).len() as u64)?;
            for w in chart.row(row as usize) {
                if waits_for(prog, w, unit) && found_set.insert((row, *w)) {
                    found.push((row, *w));
                }
            }
            budget.spend((found.len() - first) as u64)?;
            let only = found.len() == first + 1;
            for &(_, w) in &found[first..] {
                let next = (w.origin, prog.state(w.state).unit);
                if explored_set.contains(&next) {
                    continue;
                }
                if only && returns_to_end(prog, &w, unit) && explored.len() < MAX_CONTEXT_ROWS {
                    explored.push(next);
                    explored_set.insert(next);
                    level.push(next);
                } else if depth < g.config.context_depth {
                    explored.push(next);
                    explored_set.insert(next);
                    next_level.push(next);
                }
            }
        }
        level = next_level;
    }
    rows.extend(explored.iter().map(|e| e.0));
    rows.sort_unstable();
    rows.dedup();
    for (row, w) in found.iter_mut() {
        if subject.relax && *row == k.origin && Some(w.state) == subject.lifted {
            w.count = RELAXED;
        }
        *row = vrow(rows, *row);
        w.origin = if explored_set.contains(&(w.origin, prog.state(w.state).unit)) {
            vrow(rows, w.origin)
        } else {
            EXT
        };
    }
    let hashes = g.hashes();
    let cap = cap(&g.vocab);
    // An outermost caller's unit completes into the unknown context: what may follow it
    // decides which tokens stay uncertain.
    let state_key = |w: &Item| match w.origin {
        EXT => {
            let mut h = StructHasher::new(OUTER_DOMAIN);
            h.hash(hashes.state(w.state));
            hash_follow(&mut h, prog, w.state);
            h.finish()
        }
        _ => hashes.state(w.state),
    };
    described.extend(
        found
            .iter()
            .map(|(r, w)| (*r, state_key(w), count_class(prog, w, cap), w.origin)),
    );
    described.sort_unstable();
    let top_origin = vrow(rows, k.origin);
    let mut h = StructHasher::new(LEVEL2_DOMAIN);
    // The item level saw a relaxed counter; this level sees the real one.
    h.hash(item_key)
        .word(count_class(prog, k, cap))
        .word(rows.len() as u64)
        .word(top_origin as u64)
        .word(described.len() as u64);
    for (r, s, c, o) in described.iter() {
        h.word(*r as u64).hash(*s).word(*c).word(*o as u64);
    }
    Ok(h.finish())
}

/// Index of a gathered row among the gathered rows.
fn vrow(rows: &[u32], r: u32) -> u32 {
    rows.binary_search(&r).expect("gathered row") as u32
}

/// A scannable item's callers, as frozen rows for a local chart.
struct Context {
    rows: Vec<Vec<Item>>,
    top: Item,
}

impl Context {
    /// The local chart's rows from what [`context_key`] gathered.
    fn build(scratch: &Scratch, k: &Item) -> Context {
        let mut rows = vec![Vec::new(); scratch.rows.len()];
        for (r, w) in &scratch.found {
            rows[*r as usize].push(*w);
        }
        Context {
            rows,
            top: Item {
                origin: vrow(&scratch.rows, k.origin),
                ..*k
            },
        }
    }

    /// [`Context::build`] with the subject's relaxed loop at its real count, `left` iterations
    /// before its upper bound (relaxed because it had reached its lower bound). `None` unless
    /// exactly one loop item was relaxed: with several, one count would not stand for all.
    fn build_near(
        g: &CfgGrammar,
        scratch: &Scratch,
        k: &Item,
        subject: &Subject,
        left: u32,
    ) -> Option<Context> {
        let mut context = Context::build(scratch, k);
        let mut relaxed = context
            .rows
            .iter_mut()
            .flatten()
            .filter(|w| w.count == RELAXED);
        let loop_item = relaxed.next()?;
        if relaxed.next().is_some() {
            return None;
        }
        let c = g.prog.units[g.prog.state(loop_item.state).unit as usize]
            .counted
            .expect("a relaxed item is a counted loop's");
        debug_assert_eq!(Some(loop_item.state), subject.lifted);
        loop_item.count = c.max - left;
        Some(context)
    }

    /// Re-walks the item level's uncertain tokens with the callers present.
    fn classify(
        &self,
        g: &CfgGrammar,
        uncertain: &[Position],
        budget: &Budget,
    ) -> Result<CacheEntry, LimitExceeded> {
        let mut accepted = Vec::new();
        let mut still = Vec::new();
        with_shared(g, &self.rows, |chart, dfa| {
            chart.push_raw(&[self.top], ByteSet::EMPTY);
            walk_list(
                &g.prog,
                &g.vocab,
                chart,
                dfa,
                uncertain,
                budget,
                |t, outcome| match outcome {
                    Outcome::Accepted => accepted.push(t),
                    Outcome::Failed { ext: true } => still.push(t),
                    Outcome::Failed { ext: false } => {}
                },
            )
        })?;
        Ok(CacheEntry::Context {
            accepted: accepted.into(),
            uncertain: still.into(),
        })
    }
}

/// What a grammar's walks over self-describing charts share: the row DFA (base 0) and a
/// chart to build their rows in. Lent to one walk at a time; a walk that finds it lent out
/// (another thread) starts its own.
pub(crate) struct SharedWalks {
    dfa: StateDfa,
    chart: Chart,
}

/// Most bytes a grammar's shared row DFA keeps; past it the next walk starts a new one.
const SHARED_DFA_BYTES: usize = 4 << 20;

/// States a grammar's shared row DFA has room for from the start: a JSON schema's first
/// walks make a few hundred to a few thousand, and growing the table by doubling copied it
/// (~3% of a JSON schema's first walks).
const SHARED_DFA_ROOM: usize = 2048;

/// Runs `walk` on a chart holding exactly `rows`, with the grammar's shared row DFA.
fn with_shared<R>(
    g: &CfgGrammar,
    rows: &[Vec<Item>],
    walk: impl FnOnce(&mut Chart, &mut StateDfa) -> R,
) -> R {
    let lent = g
        .walks
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    let mut shared = lent.unwrap_or_else(|| SharedWalks {
        dfa: StateDfa::new(0, g.prog.n_classes()).with_room(SHARED_DFA_ROOM),
        chart: Chart::from_rows(&g.prog, &[]),
    });
    shared.chart.reset(rows);
    let out = walk(&mut shared.chart, &mut shared.dfa);
    if shared.dfa.heap_bytes() <= SHARED_DFA_BYTES {
        let mut slot = g.walks.lock().unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(shared);
        }
    }
    out
}

/// Most rows a context gathers through tail calls (the row DFA keeps structures of at most
/// [`MAX_DFA_ROWS`] rows).
const MAX_CONTEXT_ROWS: usize = MAX_DFA_ROWS;

/// Does `w`, waiting for `unit`, only end its own unit when `unit` completes (every call of
/// `unit` returns to a final state with no edge out)?
fn returns_to_end(prog: &Program, w: &Item, unit: u32) -> bool {
    let st = prog.state(w.state);
    st.flags & COUNTED == 0
        && prog
            .calls_of(w.state)
            .iter()
            .filter(|c| c.unit == unit)
            .all(|c| prog.state(c.ret).flags & (FINAL | SCANS | CALLS | SPECIALS) == FINAL)
}

enum Outcome {
    Accepted,
    /// Some byte was rejected; `ext` if an [`EXT`] completion happened after at least one byte
    /// and before the rejected one, followed by a byte that may follow it
    /// ([`Program::follow`]): only then can the unknown context take the rest.
    Failed {
        ext: bool,
    },
}

/// Pushes the tokens at `positions` (ascending) on top of the chart, along the trie.
fn walk_list(
    prog: &Program,
    vocab: &Vocab,
    chart: &mut Chart,
    dfa: &mut StateDfa,
    positions: &[Position],
    budget: &Budget,
    mut report: impl FnMut(Position, Outcome),
) -> Result<(), LimitExceeded> {
    let mut stepper = Stepper::new(prog, chart, dfa, budget);
    let root = stepper.root();
    // Whether the context may take the rest of the last rejected token: known to the stepper
    // at the rejected byte, read when the run behind it is reported.
    let context_may_continue = Cell::new(false);
    vocab.trie().walk_positions(
        positions,
        root,
        |node, byte| {
            let next = stepper.advance(node, byte)?;
            if next.is_none() {
                context_may_continue.set(stepper.may_leave(node, byte));
            }
            Ok(next)
        },
        |run, taken, _| {
            for &p in run {
                report(
                    p,
                    match taken {
                        true => Outcome::Accepted,
                        false => Outcome::Failed {
                            ext: context_may_continue.get(),
                        },
                    },
                )
            }
        },
    )?;
    stepper.finish()
}

/// A lazily built DFA over Earley rows. A *state* is the last row together with every row of
/// the walk that its items' origins reach (transitively), renumbered as if pushed right above
/// the walk's base: what the next row depends on, and nothing else. Inside a JSON string, a
/// number, a keyword or a counted loop these structures repeat, so after the first visit a trie
/// node costs one table lookup. Structures past [`MAX_DFA_ROWS`] rows (deep recursion inside
/// one token) stay in the chart, and so does everything under them.
///
/// With base 0 (a chart built by [`Chart::from_rows`], which describes itself: an item alone,
/// or with the callers gathered for it) a state depends on nothing outside its key, so one
/// DFA serves every such walk of the grammar ([`SharedWalks`]): a string's states learnt by
/// one classification are lookups for the next. Above a live chart (base = its rows) the
/// states mean something only on top of those rows, and the DFA lives for one walk.
pub(crate) struct StateDfa {
    base: usize,
    /// Per state: `[rows, len of each row.., items (state, origin, count).., follow set of
    /// the last row's EXT completions (8 words)]`.
    states: SliceInterner,
    /// Per state: what may follow its last row's EXT completions.
    follow: Vec<ByteSet>,
    /// `states.len() * n_classes` entries: a state with [`EXT_BIT`] set when the source
    /// row's EXT completions may be followed by the class (read together with the state, at
    /// every trie node), [`NO_ROW`], [`UNKNOWN`] or [`IN_CHART`].
    trans: Vec<u32>,
    n_classes: usize,
    scratch_rows: Vec<usize>,
    scratch_key: Vec<u32>,
    /// What slice walks proved about these states.
    slice_proofs: SliceProofs,
}

const NO_ROW: u32 = u32::MAX;
const UNKNOWN: u32 = u32::MAX - 1;
/// The next row's structure is too large: it lives in the chart.
const IN_CHART: u32 = u32::MAX - 2;
/// The state with no row above the base (every key of a pushed row has at least one row).
const ROOT: u32 = 0;
/// A transition leaves an EXT completion for a byte that may follow it (the same bit as
/// [`Node::EXT`]).
const EXT_BIT: u32 = 1 << 31;
/// Most states a DFA numbers: with [`EXT_BIT`] set, the largest id stays below the markers.
const MAX_DFA_STATES: usize = (EXT_BIT - 3) as usize;
const MAX_DFA_ROWS: usize = 8;
const MAX_DFA_ITEMS: usize = 64;

impl StateDfa {
    /// A DFA for walks on top of `base` rows. With no row above the base the walk's root is
    /// state [`ROOT`], its transitions looked up like any other's.
    fn new(base: usize, n_classes: usize) -> StateDfa {
        let mut states = SliceInterner::default();
        let (root, _) = states.intern(&[0]);
        debug_assert_eq!(root, ROOT);
        StateDfa {
            base,
            states,
            follow: vec![ByteSet::EMPTY],
            trans: vec![UNKNOWN; n_classes],
            n_classes,
            scratch_rows: Vec::new(),
            scratch_key: Vec::new(),
            slice_proofs: SliceProofs::default(),
        }
    }

    /// The DFA with room for `states` states before its transition table grows.
    fn with_room(mut self, states: usize) -> StateDfa {
        self.trans.reserve(states * self.n_classes);
        self.follow.reserve(states);
        self
    }

    /// The state of the chart's last row, if its structure is small enough. Below the last
    /// row only waiting items matter (completions look for them; only the last row scans), so
    /// the others are left out: a finished item pointing back one row would otherwise chain
    /// every row of a loop into the structure.
    fn intern(&mut self, prog: &Program, chart: &Chart) -> Option<u32> {
        if self.follow.len() == MAX_DFA_STATES {
            return None;
        }
        let base = self.base;
        let last = chart.num_rows() - 1;
        let keep = |r: usize, it: &Item| r == last || prog.state(it.state).flags & CALLS != 0;
        let rows = &mut self.scratch_rows;
        rows.clear();
        rows.push(last);
        let mut i = 0;
        let mut items = 0;
        while i < rows.len() {
            let r = rows[i];
            i += 1;
            for it in chart.row(r).iter().filter(|it| keep(r, it)) {
                items += 1;
                if items > MAX_DFA_ITEMS {
                    return None;
                }
                let o = it.origin as usize;
                if it.origin != EXT && o >= base && !rows.contains(&o) {
                    if rows.len() == MAX_DFA_ROWS {
                        return None;
                    }
                    rows.push(o);
                }
            }
        }
        rows.sort_unstable();
        let key = &mut self.scratch_key;
        key.clear();
        key.push(rows.len() as u32);
        key.extend(
            rows.iter()
                .map(|&r| chart.row(r).iter().filter(|it| keep(r, it)).count() as u32),
        );
        for &r in rows.iter() {
            for it in chart.row(r).iter().filter(|it| keep(r, it)) {
                let o = it.origin as usize;
                let origin = if it.origin != EXT && o >= base {
                    (base + rows.binary_search(&o).expect("gathered row")) as u32
                } else {
                    it.origin
                };
                key.extend([it.state, origin, it.count]);
            }
        }
        // The follow set last (after what `materialize` reads): a walk's root is a raw row,
        // whose set says nothing of its items, so it must not meet a closed row with the
        // same items and a set filled in.
        let follow = *chart.row_follow(last);
        key.extend(
            follow
                .words()
                .iter()
                .flat_map(|w| [*w as u32, (*w >> 32) as u32]),
        );
        let (id, new) = self.states.intern(key);
        if new {
            self.follow.push(follow);
            self.trans
                .resize(self.trans.len() + self.n_classes, UNKNOWN);
        }
        Some(id)
    }

    /// Bytes held (what [`SharedWalks`] bounds).
    fn heap_bytes(&self) -> usize {
        self.trans.len() * 4
            + self.states.heap_bytes()
            + self.follow.len() * std::mem::size_of::<ByteSet>()
            + self.slice_proofs.heap_bytes()
    }

    /// The number state `id`'s last row would have on the chart, and its items.
    fn last_row(&self, id: u32) -> (u32, impl Iterator<Item = Item> + '_) {
        let key = self.states.get(id);
        let n = key[0] as usize;
        let lens = &key[1..1 + n];
        let (before, last) = match lens.split_last() {
            Some((&last, before)) => (before.iter().sum::<u32>() as usize, last as usize),
            None => (0, 0),
        };
        let at = 1 + n + 3 * before;
        let items = key[at..at + 3 * last].chunks(3).map(|c| Item {
            state: c[0],
            origin: c[1],
            count: c[2],
        });
        ((self.base + n.max(1) - 1) as u32, items)
    }

    /// Puts state `id`'s rows back on the chart, right above the base.
    fn materialize(&self, id: u32, chart: &mut Chart, items: &mut Vec<Item>) {
        let (key, follow) = (self.states.get(id), self.follow[id as usize]);
        chart.truncate(self.base);
        let n = key[0] as usize;
        let mut at = 1 + n;
        for r in 0..n {
            let len = key[1 + r] as usize;
            items.clear();
            items.extend(key[at..at + 3 * len].chunks(3).map(|c| Item {
                state: c[0],
                origin: c[1],
                count: c[2],
            }));
            at += 3 * len;
            let last = r == n - 1;
            chart.push_raw(items, if last { follow } else { ByteSet::EMPTY });
        }
    }
}

/// The walk's state at a trie node, packed in one word: it is written and read at every trie
/// node, and a struct of separate fields is stored piecewise and then reloaded whole, which
/// stalls store forwarding. The low 31 bits are a [`StateDfa`] state or, with
/// [`Node::IN_CHART`], the number of chart rows underneath this depth.
#[derive(Clone, Copy)]
struct Node(u64);

impl Node {
    /// An EXT completion happened on the path after at least one byte, followed by a byte
    /// that may follow it (the bit a known transition carries, so following one is an OR).
    const EXT: u64 = EXT_BIT as u64;
    /// The row structure is too large for the DFA: it lives in the chart.
    const IN_CHART: u64 = 1 << 32;
    const LOW: u64 = Node::EXT - 1;

    fn state(id: u32, ext: bool) -> Node {
        debug_assert!((id as usize) < MAX_DFA_STATES);
        Node(id as u64 | if ext { Node::EXT } else { 0 })
    }

    fn chart(rows: usize, ext: bool) -> Node {
        debug_assert!(rows as u64 <= Node::LOW, "a chart of 2^31 rows");
        Node(rows as u64 | Node::IN_CHART | if ext { Node::EXT } else { 0 })
    }

    /// The node a known transition leads to: its target, with [`Node::EXT`] set if it was
    /// set here or the transition sets it.
    fn follow(self, transition: u32) -> Node {
        Node(transition as u64 | self.0 & Node::EXT)
    }

    /// The [`StateDfa`] state, unless the structure lives in the chart.
    fn dfa(self) -> Option<u32> {
        (self.0 & Node::IN_CHART == 0).then_some((self.0 & Node::LOW) as u32)
    }

    /// Chart rows underneath this depth (when [`Node::dfa`] is `None`).
    fn rows(self) -> usize {
        (self.0 & Node::LOW) as usize
    }

    fn ext(self) -> bool {
        self.0 & Node::EXT != 0
    }
}

/// Byte steps on top of a chart, memoized by [`StateDfa`]: the chart holds the walk's base
/// rows, and a state's rows are put back on it only when a transition is not known yet.
struct Stepper<'a> {
    prog: &'a Program,
    chart: &'a mut Chart,
    /// Rows of the chart when the walk started (the walk leaves it so).
    start: usize,
    dfa: &'a mut StateDfa,
    raw: Vec<Item>,
    /// The DFA state last put back on the chart and its number of rows: stepping a byte only
    /// adds a row above them, so the next unknown transition of the same state (the next
    /// class a prover tries, the next child in the trie) cuts back to them instead.
    on_chart: Option<(u32, usize)>,
    budget: &'a Budget,
    /// Steps not yet charged to the budget (charged by the thousand: a known transition is a
    /// table lookup, and the charge should not cost as much).
    steps: u64,
}

/// Steps charged to the budget at once.
const STEPS_PER_CHARGE: u64 = 1024;

impl<'a> Stepper<'a> {
    fn new(
        prog: &'a Program,
        chart: &'a mut Chart,
        dfa: &'a mut StateDfa,
        budget: &'a Budget,
    ) -> Self {
        debug_assert!(
            chart.num_rows() >= dfa.base,
            "the DFA's base rows are in the chart"
        );
        Stepper {
            prog,
            start: chart.num_rows(),
            chart,
            dfa,
            raw: Vec::new(),
            on_chart: None,
            budget,
            steps: 0,
        }
    }

    /// The state before any byte: the chart as it is.
    fn root(&mut self) -> Node {
        let dfa = if self.start == self.dfa.base {
            Some(ROOT)
        } else {
            self.dfa.intern(self.prog, self.chart)
        };
        match dfa {
            Some(id) => Node::state(id, false),
            None => Node::chart(self.start, false),
        }
    }

    /// The state after `byte` from `parent`, or `None` if the byte is rejected. A known
    /// transition is a table lookup, inlined into every walk; the rest goes to the chart.
    #[inline(always)]
    fn advance(&mut self, parent: &Node, byte: u8) -> Result<Option<Node>, LimitExceeded> {
        self.steps += 1;
        if self.steps == STEPS_PER_CHARGE {
            self.budget.spend(std::mem::take(&mut self.steps))?;
        }
        let Some(r) = parent.dfa() else {
            return self.advance_in_chart(parent, byte, None);
        };
        let slot =
            r as usize * self.dfa.n_classes + self.prog.alphabet.class_of[byte as usize] as usize;
        match self.dfa.trans[slot] {
            NO_ROW => Ok(None),
            UNKNOWN | IN_CHART => self.advance_in_chart(parent, byte, Some(slot)),
            known => Ok(Some(parent.follow(known))),
        }
    }

    /// [`Stepper::advance`] through the chart, recording the transition at `slot` (when the
    /// parent is a DFA state).
    #[cold]
    fn advance_in_chart(
        &mut self,
        parent: &Node,
        byte: u8,
        slot: Option<usize>,
    ) -> Result<Option<Node>, LimitExceeded> {
        // Under a node in the chart, everything stays in the chart: putting a DFA state back
        // would replace the rows its ancestors still stand on.
        match (parent.dfa(), self.on_chart) {
            (Some(id), Some((on, rows))) if on == id => self.chart.truncate(rows),
            (Some(id), _) => {
                self.dfa.materialize(id, self.chart, &mut self.raw);
                self.on_chart = Some((id, self.chart.num_rows()));
            }
            (None, _) => {
                self.chart.truncate(parent.rows());
                self.on_chart = None;
            }
        }
        let row = self.chart.num_rows() - 1;
        let leaves = self.chart.row_follow(row).contains(byte);
        if !self.chart.push_byte(self.prog, byte, self.budget)? {
            if let Some(s) = slot {
                self.record(s, row, NO_ROW);
            }
            return Ok(None);
        }
        let id = slot.and_then(|_| self.dfa.intern(self.prog, self.chart));
        if let Some(s) = slot {
            let transition = match id {
                Some(id) if leaves => id | EXT_BIT,
                Some(id) => id,
                None => IN_CHART,
            };
            self.record(s, row, transition);
        }
        let rows = self.chart.num_rows();
        let ext = parent.ext() || leaves;
        Ok(Some(match id {
            Some(id) => Node::state(id, ext),
            None => Node::chart(rows, ext),
        }))
    }

    /// Records `transition` at `slot`, and for every class not known yet from the same state
    /// that its last row (the chart's `row`) cannot tell from the slot's: a class with the
    /// same program transition for each item and on the same side of the row's follow set
    /// pushes the same row. A JSON grammar has a class per letter of its property names, and
    /// most rows treat them alike; a slice proof asks a state for every class.
    fn record(&mut self, slot: usize, row: usize, transition: u32) {
        let Stepper {
            prog, chart, dfa, ..
        } = self;
        let n = dfa.n_classes;
        let (first, class) = (slot - slot % n, slot % n);
        let follow = chart.row_follow(row);
        let leaves = |c: usize| !follow.intersection(&prog.alphabet.sets[c]).is_empty();
        let leaves_here = leaves(class);
        let mut scanners: SmallVec<[u32; 16]> = chart
            .row(row)
            .iter()
            .filter(|it| prog.state(it.state).flags & SCANS != 0)
            .map(|it| it.state)
            .collect();
        scanners.sort_unstable();
        scanners.dedup();
        let entries: SmallVec<[(&[u32], u32); 16]> = scanners
            .iter()
            .map(|&s| (prog.entries(s), prog.entry(s, class)))
            .collect();
        dfa.trans[slot] = transition;
        for c in 0..n {
            if dfa.trans[first + c] == UNKNOWN
                && entries.iter().all(|&(e, here)| e[c] == here)
                && leaves(c) == leaves_here
            {
                dfa.trans[first + c] = transition;
            }
        }
    }

    /// May the unknown context take `byte` right after an EXT completion in `node`'s last row?
    fn may_leave(&self, node: &Node, byte: u8) -> bool {
        let follow = match node.dfa() {
            Some(id) => &self.dfa.follow[id as usize],
            None => self.chart.row_follow(node.rows() - 1),
        };
        node.ext() || follow.contains(byte)
    }

    /// Charges the steps not charged yet.
    fn finish(&mut self) -> Result<(), LimitExceeded> {
        self.budget.spend(std::mem::take(&mut self.steps))
    }
}

/// Leaves a live chart as it was, whichever way the walk ended (an error included: a failed
/// mask changes no matcher). A self-describing chart (base 0) is truncated as well, though
/// its walks would build their own rows anyway.
impl Drop for Stepper<'_> {
    fn drop(&mut self) {
        self.chart.truncate(self.start);
    }
}

/// A token-trie walk. With `uncertain`, also collects tokens whose bytes run past an [`EXT`]
/// completion (after the first byte).
struct TrieWalk<'a> {
    stepper: Stepper<'a>,
    vocab: &'a Vocab,
    accepted: &'a mut [u32],
    /// The accepted tokens and the longest one's length, while they are few and all came
    /// from the walk itself (not from a slice taken whole): then the cached entry is built
    /// from the list, without passes over the mask words.
    listed: Option<(Vec<TokenId>, u32)>,
    uncertain: Option<&'a mut Vec<TokenId>>,
    error: Option<LimitExceeded>,
}

/// Most accepted tokens a walk lists (see [`TrieWalk::listed`]); more are stored as a bitset.
const MAX_LISTED: usize = 256;

impl<'a> TrieWalk<'a> {
    fn new(
        prog: &'a Program,
        vocab: &'a Vocab,
        chart: &'a mut Chart,
        dfa: &'a mut StateDfa,
        accepted: &'a mut [u32],
        uncertain: Option<&'a mut Vec<TokenId>>,
        budget: &'a Budget,
    ) -> Self {
        TrieWalk {
            stepper: Stepper::new(prog, chart, dfa, budget),
            vocab,
            accepted,
            listed: Some((Vec::new(), 0)),
            uncertain,
            error: None,
        }
    }

    fn walk(&mut self) -> Result<(), LimitExceeded> {
        let root = self.stepper.root();
        // The proofs are about this DFA's states: they live and go with it.
        let mut proofs = std::mem::take(&mut self.stepper.dfa.slice_proofs);
        let sliced = walk_sliced(self.vocab, root, self, &mut proofs);
        self.stepper.dfa.slice_proofs = proofs;
        sliced?;
        self.stepper.finish()?;
        self.error.take().map_or(Ok(()), Err)
    }
}

impl SliceProbe for TrieWalk<'_> {
    type Error = LimitExceeded;

    fn advance(&mut self, s: &Node, byte: u8) -> Result<Option<Node>, LimitExceeded> {
        self.stepper.advance(s, byte)
    }

    /// The DFA state: it fixes every later row. A structure too large for the DFA has none.
    fn identity(&self, s: &Node) -> Option<u32> {
        s.dfa()
    }

    fn accepted(&mut self) -> &mut [u32] {
        self.listed = None;
        self.accepted
    }

    fn byte_classes(&self) -> Option<&[u8; 256]> {
        Some(&self.stepper.prog.alphabet.class_of)
    }

    fn tries_slice(&self, k: usize) -> bool {
        self.stepper.prog.slices & 1 << k != 0
    }
}

impl TrieVisitor for TrieWalk<'_> {
    type State = Node;

    #[inline(always)]
    fn step(&mut self, parent: &Node, byte: u8, _: usize, subtree: Subtree) -> TrieStep<Node> {
        if self.error.is_some() {
            return TrieStep::Skip;
        }
        match self.stepper.advance(parent, byte) {
            Ok(Some(next)) => TrieStep::Enter(next),
            Ok(None) => {
                if let Some(u) = self.uncertain.as_mut() {
                    if self.stepper.may_leave(parent, byte) {
                        // Ids, not positions: a walk may run over a slice's own trie.
                        u.extend_from_slice(subtree.tokens());
                    }
                }
                TrieStep::Skip
            }
            Err(e) => {
                self.error = Some(e);
                TrieStep::Skip
            }
        }
    }

    #[inline(always)]
    fn tokens(&mut self, _: &Node, tokens: &[TokenId]) {
        tokens.iter().for_each(|&t| set_bit(self.accepted, t));
        if let Some((ids, longest)) = &mut self.listed {
            if ids.len() + tokens.len() > MAX_LISTED {
                self.listed = None;
            } else {
                ids.extend_from_slice(tokens);
                *longest = (*longest).max(self.vocab.token_bytes(tokens[0]).len() as u32);
            }
        }
    }
}
