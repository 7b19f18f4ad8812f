//! The item level: an item classified alone, its unit entered from an unknown context, and
//! near a counted loop's bound the tokens that would start too many iterations dropped.

use smallvec::SmallVec;

use crate::base::bitmask::{clear_bit, get_bit, set_bit};
use crate::base::token::TokenId;
use crate::cfg::cache::context_level::with_shared;
use crate::cfg::cache::entry::{
    cached, stored, CacheEntry, LEVEL1_DOMAIN, STARTS_DOMAIN, UNKNOWN_STARTS,
};
use crate::cfg::cache::fill::cap;
use crate::cfg::cache::starts::{iteration_starts, starts_below};
use crate::cfg::cache::view::GrammarView;
use crate::cfg::chart::{waits_for, Chart, Item, EXT};
use crate::cfg::program::{Program, COUNTED, RELAXED};
use crate::cfg::walk::list_walk::{walk_list, Outcome};
use crate::cfg::walk::trie_walk::TrieWalk;
use crate::cfg::walk::Position;
use crate::ir::StructHasher;
use crate::limits::{Budget, LimitExceeded};
use crate::mask::StoredMask;

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
pub(super) struct Subject {
    pub(super) item: Item,
    /// The loop's counted state.
    pub(super) lifted: Option<u32>,
    /// Iterations the loop has left (the most, over its items), when a token could use them
    /// all up (fewer than `cap`).
    pub(super) left: Option<u32>,
    /// The loop, with one counter, has reached its minimum: the context level may relax it too.
    pub(super) relax: bool,
}

impl Subject {
    pub(super) fn of(g: &GrammarView<'_>, chart: &Chart, k: &Item) -> Subject {
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
    pub(super) fn loop_counts(&self, g: &GrammarView<'_>, chart: &Chart) -> SmallVec<[u32; 2]> {
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
    pub(super) fn key(&self, g: &GrammarView<'_>) -> u128 {
        let hashes = g.hashes;
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
    pub(super) fn rows(&self, counts: &[u32]) -> Vec<Vec<Item>> {
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
pub(super) fn hash_follow(h: &mut StructHasher, prog: &Program, state: u32) {
    let follow = &prog.follow[prog.state(state).unit as usize];
    follow.words().iter().for_each(|&w| {
        h.word(w);
    });
}

/// Item level: the whole trie against the subject alone, the loop's counter (if any) relaxed.
pub(super) fn item_level(
    g: &GrammarView<'_>,
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
pub(super) fn near_bound(
    g: &GrammarView<'_>,
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
        .hash(g.hashes.state(subject.item.state))
        .word(subject.item.count as u64)
        .finish();
    let table = cached(g, key, budget, || iteration_starts(g, subject, budget))?;
    let CacheEntry::Starts(starts) = &*table else {
        unreachable!("starts keys hold starts entries")
    };
    let mut words = vec![0u32; vocab.mask_words()];
    accepted.write_to(&mut words, vocab.text_mask());
    let mut unknown = keep_below_bound(g, starts, left, &mut words);
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

/// Clears from `words` the tokens that start `left` or more iterations by the `starts` table,
/// and returns (cleared too) the positions of those the table does not know and that are
/// long enough to start that many: they are walked with the real counters.
fn keep_below_bound(
    g: &GrammarView<'_>,
    starts: &[u16],
    left: u32,
    words: &mut [u32],
) -> Vec<Position> {
    let vocab = &g.vocab;
    let below = left.min(UNKNOWN_STARTS as u32) as u16;
    // Unknown counts: a token of at most `left` bytes cannot start `left` iterations (each
    // reads a byte, and the first byte continues the one in progress); longer ones are walked.
    let mut unknown = Vec::new();
    let long = g.index.longer_than(vocab, left);
    if long.len() * 16 < vocab.len() {
        // Far from the bound only a few long tokens can tell.
        for &t in long {
            match starts[t as usize] {
                _ if !get_bit(words, t) => {}
                n if n < below => {}
                UNKNOWN_STARTS => {
                    clear_bit(words, t);
                    unknown.push(g.index.position(t));
                }
                _ => clear_bit(words, t),
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
    unknown
}
