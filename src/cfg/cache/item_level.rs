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
use crate::cfg::chart::{waits_for, Chart, Halt, Item, EXT};
use crate::cfg::program::{Program, COUNTED, RELAXED};
use crate::cfg::walk::list_walk::{walk_list, Outcome};
use crate::cfg::walk::trie_walk::TrieWalk;
use crate::cfg::walk::Position;
use crate::ir::StructHasher;
use crate::limits::Budget;
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
            left: left.filter(|&l| l < cap(g.vocab)),
            relax: counts.len() == 1 && c.complete(counts[0]),
        }
    }

    /// The counters of the loop's items waiting for the subject (one per derivation that
    /// reached its row after a different number of iterations).
    pub(super) fn loop_counts(&self, g: &GrammarView<'_>, chart: &Chart) -> SmallVec<[u32; 2]> {
        let unit = g.prog.state(self.item.state).unit;
        let mut counts = SmallVec::new();
        for w in chart.row(self.item.origin as usize) {
            let waiting = Some(w.state) == self.lifted && waits_for(g.prog, w, unit);
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
        let mut h = StructHasher::new(LEVEL1_DOMAIN);
        h.hash(g.prog.hash(self.item.state))
            .word(self.item.count as u64);
        // A lifted loop is named by its body, the item's unit, alone: this level relaxes its
        // bounds, so the loops of `[0-9A-Za-z]{8}-[0-9A-Za-z]{4}-…` share one walk. Keys
        // built on this one that use the bounds add the loop's own hash.
        h.word(self.lifted.is_some() as u64);
        let outer = self.lifted.unwrap_or(self.item.state);
        hash_follow(&mut h, g.prog, outer);
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
) -> Result<CacheEntry, Halt> {
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
) -> Result<CacheEntry, Halt> {
    let (prog, vocab) = (&g.prog, &g.vocab);
    let left = subject.left.expect("near a bound");
    // The subject's state is in the loop's body, so its hash names the body too; the loop's
    // bounds do not matter to a relaxed walk.
    let key = StructHasher::new(STARTS_DOMAIN)
        .hash(g.prog.hash(subject.item.state))
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
    let long = vocab.longer_than(left as usize);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::testing::*;
    use crate::cfg::CfgCompiler;

    /// The cached entry of each scannable item is what a fresh walk of the item alone (its
    /// own row DFA, no cache) finds; its accepted tokens are allowed (where no loop bound is
    /// near), and with the uncertain ones they cover every allowed token.
    #[test]
    fn item_entries_are_fresh_walks_and_sound() {
        let vocab = small_vocab();
        each_case(&CfgCompiler::new(&vocab, built_up_front()), |case| {
            let prog = case.g.prog();
            let view = case.g.view(&prog);
            let mut covered = vec![0u32; vocab.mask_words()];
            for k in scannable(case.g, &case.chart) {
                let subject = Subject::of(&view, &case.chart, &k);
                let budget = budget();
                let key = subject.key(&view);
                let entry = cached(&view, key, &budget, || item_level(&view, &subject, &budget));
                let entry = entry.unwrap();
                let (accepted, longest, uncertain) = entry.item_parts();
                let mut words = vec![0u32; vocab.mask_words()];
                accepted.or_into(&mut words, vocab.text_mask());
                let (fresh, fresh_uncertain) = walk_rows(case.g, &subject.rows(&[RELAXED]));
                let at = format!("{}, item {k:?}", case.at());
                assert!(words == fresh, "{at}: accepted");
                assert_eq!(uncertain, &*view.index.positions(&fresh_uncertain), "{at}");
                let lengths = ones(&words).into_iter().map(|t| vocab.token_bytes(t).len());
                let want_longest = subject.lifted.map(|_| lengths.max().unwrap_or(0) as u32);
                assert_eq!(longest, want_longest, "{at}");
                for t in ones(&words) {
                    let allowed = case.allowed.contains(&t);
                    assert!(subject.left.is_some() || allowed, "{at}: {t}");
                    set_bit(&mut covered, t);
                }
                let trie = vocab.trie();
                uncertain
                    .iter()
                    .for_each(|&p| set_bit(&mut covered, trie.token_at(p)));
            }
            for &t in &case.allowed {
                assert!(get_bit(&covered, t), "{}: {t} lost", case.at());
            }
        });
    }

    /// The body of a counted loop is classified with its loop: one key at every count (its
    /// bounds relaxed), the iterations left known once a token could use them up, and the
    /// loop relaxed in context once its minimum is reached.
    #[test]
    fn loop_bodies_are_lifted_with_their_loop() {
        let vocab = small_vocab();
        let compiler = CfgCompiler::new(&vocab, built_up_front());
        let (g, _) = compile(&compiler, CASES[2].0);
        let prog = g.prog();
        let view = g.view(&prog);
        let mut keys = Vec::new();
        for prefix in ["\"", "\"a", "\"ab", "\"abcd", "\"abcde"] {
            let letters = prefix.len() - 1;
            let chart = chart_after(&g, prefix.as_bytes());
            let bodies: Vec<Subject> = scannable(&g, &chart)
                .iter()
                .map(|k| Subject::of(&view, &chart, k))
                .filter(|s| s.lifted.is_some())
                .collect();
            assert_eq!(bodies.len(), 1, "after {prefix:?}");
            let s = bodies[0];
            assert_eq!(s.left, Some(6 - letters as u32), "after {prefix:?}");
            assert_eq!(s.relax, letters >= 2, "after {prefix:?}");
            assert_eq!(s.loop_counts(&view, &chart).as_slice(), [letters as u32]);
            keys.push(s.key(&view));
        }
        assert!(
            keys.iter().all(|&k| k == keys[0]),
            "one key for every count"
        );
        // Elsewhere nothing is lifted, and another follow set is another key.
        let (other, _) = compile(&compiler, r#"root ::= "\"" [a-zA-Z]{2,6} "'""#);
        let chart = chart_after(&other, b"\"a");
        let k = scannable(&other, &chart)[0];
        let other_prog = other.prog();
        assert_ne!(
            Subject::of(&other.view(&other_prog), &chart, &k).key(&other.view(&other_prog)),
            keys[0]
        );
        let chart = chart_after(&g, b"\"ab\",");
        for k in scannable(&g, &chart) {
            assert!(Subject::of(&view, &chart, &k).lifted.is_none());
        }
    }

    /// Near the bound, the tokens kept by the iteration starts table (and the walks of those
    /// it does not know) are exactly those a walk with the real counters accepts, and what
    /// it leaves to the context is among what that walk leaves.
    #[test]
    fn near_bound_entries_are_the_walks_with_real_counters() {
        let vocab = small_vocab();
        let compiler = CfgCompiler::new(&vocab, built_up_front());
        let grammars = [CASES[2].0, r#"root ::= ([a-zA-Z]{1,5} "-")+"#, CASES[4].0];
        let prefixes = ["\"", "\"ab", "\"abcd", "\"abcdef", "a", "abc-abcd", "abcde"];
        let mut checked = 0;
        for gbnf in grammars {
            let (g, _) = compile(&compiler, gbnf);
            let prog = g.prog();
            let view = g.view(&prog);
            for prefix in prefixes.into_iter().chain(CASES[4].1.iter().copied()) {
                let mut chart = g.initial.clone();
                let budget = budget();
                if !prefix
                    .bytes()
                    .all(|b| chart.push_byte(&g.prog(), b, &budget).unwrap())
                {
                    continue;
                }
                for k in scannable(&g, &chart) {
                    let subject = Subject::of(&view, &chart, &k);
                    if subject.left.is_none() {
                        continue;
                    }
                    let item = item_level(&view, &subject, &budget).unwrap();
                    let (accepted, _, _) = item.item_parts();
                    let counts = subject.loop_counts(&view, &chart);
                    let CacheEntry::NearBound { valid, uncertain } =
                        near_bound(&view, &subject, &counts, accepted, &budget).unwrap()
                    else {
                        panic!("a near-bound entry")
                    };
                    let (walked, left_over) = walk_rows(&g, &subject.rows(&counts));
                    let at = format!("{gbnf} after {prefix:?}");
                    let mut kept = vec![0u32; vocab.mask_words()];
                    valid.or_into(&mut kept, vocab.text_mask());
                    assert_eq!(ones(&kept), ones(&walked), "{at}");
                    let trie = vocab.trie();
                    for &p in uncertain.iter() {
                        assert!(left_over.contains(&trie.token_at(p)), "{at}: {p}");
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked >= 5, "{checked} subjects near a bound");
    }
}
