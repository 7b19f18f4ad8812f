//! A mask from the last Earley row: each scannable item's classification from the cache
//! levels, what is still uncertain checked against the chart, specials and EOS.

use rustc_hash::FxHashSet;

use crate::base::bitmask::{get_bit, set_bit};
use crate::cfg::cache::context_level::{context_key, Context};
use crate::cfg::cache::entry::{
    cached, CacheEntry, NEAR_CONTEXT_DOMAIN, NEAR_DOMAIN, SETTLED_DOMAIN,
};
use crate::cfg::cache::item_level::{item_level, near_bound, Subject};
use crate::cfg::cache::view::GrammarView;
use crate::cfg::chart::{Chart, Halt, Item};
use crate::cfg::program::{Program, COUNTED, SCANS, SPECIALS};
use crate::cfg::walk::list_walk::{walk_list, Outcome};
use crate::cfg::walk::row_dfa::StateDfa;
use crate::cfg::walk::trie_walk::TrieWalk;
use crate::cfg::walk::Position;
use crate::ir::StructHasher;
use crate::limits::Budget;
use crate::vocab::Vocab;

/// Buffers reused across masks (a matcher owns one), so a cached mask allocates nothing.
#[derive(Default, Debug)]
pub(crate) struct Scratch {
    pub(super) scannable: Vec<Item>,
    pub(super) pending: Vec<Position>,
    settled: Settled,
    pub(super) done: Vec<u128>,
    pub(super) explored: Vec<(u32, u32)>,
    /// `explored` and `found` as sets: a row of thousands of callers made the look-ups
    /// quadratic.
    pub(super) explored_set: FxHashSet<(u32, u32)>,
    pub(super) found: Vec<(u32, Item)>,
    pub(super) found_set: FxHashSet<(u32, Item)>,
    pub(super) rows: Vec<u32>,
    pub(super) described: Vec<(u32, u128, u64, u32)>,
}

impl Scratch {
    /// Rows under the last one were removed (rollback, reset): what was learnt on them goes.
    pub(crate) fn forget_rows(&mut self) {
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
    g: &GrammarView<'_>,
    chart: &mut Chart,
    scratch: &mut Scratch,
    out: &mut [u32],
    budget: &Budget,
) -> Result<(), Halt> {
    out.fill(0);
    if g.mask_cache {
        fill_cached(g, chart, scratch, out, budget)?;
    } else {
        let mut dfa = StateDfa::new(chart.num_rows(), g.prog.n_classes());
        TrieWalk::new(g.prog, g.vocab, chart, &mut dfa, out, None, budget).walk()?;
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

// Long: one pass over the scannable items through the cache levels in order (item, near the
// loop bound, context, near the bound in context), each level fed by what the one before left
// uncertain, all of them sharing the scratch buffers.
fn fill_cached(
    g: &GrammarView<'_>,
    chart: &mut Chart,
    scratch: &mut Scratch,
    out: &mut [u32],
    budget: &Budget,
) -> Result<(), Halt> {
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
    // Units the item walks found missing. A halt on one restarts the whole mask once it is
    // built, so the other items are walked first and one build serves them all
    // (`cfg_lazy::a_mask_builds_every_unit_its_walks_meet_at_once`: 9 builds without, 6 with).
    let mut unbuilt: Vec<u32> = Vec::new();
    for k in &scannable {
        // Finding the subject reads the item's origin row (twice when it is a loop body), and
        // each part of the mask is first looked for among those already added.
        let origin_row = chart.row(k.origin as usize).len() as u64;
        budget.spend(2 * origin_row + scratch.done.len() as u64)?;
        let subject = Subject::of(g, chart, k);
        let k1 = subject.key(g);
        let item = match cached(g, k1, budget, || item_level(g, &subject, budget)) {
            Err(Halt::Unbuilt(units)) => {
                unbuilt.extend(units);
                continue;
            }
            item => item?,
        };
        if !unbuilt.is_empty() {
            continue;
        }
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
                key.hash(k1).hash(g.prog.hash(lifted));
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
        // All levels of callers but the outermost first, then all of them for what is still
        // uncertain: the outermost caller is where the places a unit is used from differ (the
        // member after a string property), and most tokens leaving the unit are decided
        // before it. Keyed without it, that classification is shared by every such place,
        // where the whole context told them apart and classified ~50k tokens again at each
        // (a word-count pattern in each property of an object: ~1.2 ms a mask).
        let mut last = item.clone();
        let mut base = k1;
        let mut gathered = None;
        for depth in [g.context_depth.saturating_sub(1), g.context_depth] {
            if depth == 0 {
                continue;
            }
            let uncertain = last.uncertain();
            if uncertain.is_empty() {
                break;
            }
            let (k2, callers) = context_key(g, chart, scratch, &subject, base, depth, budget)?;
            if gathered == Some(scratch.found.len()) {
                // No caller beyond the last step's: its uncertain tokens stay so.
                break;
            }
            gathered = Some(scratch.found.len());
            base = k2;
            let entry = cached(g, k2, budget, || {
                Context::build(scratch, k).classify(g, uncertain, budget)
            })?;
            last = entry.clone();
            let CacheEntry::Context { accepted, .. } = &*entry else {
                unreachable!("context keys hold context entries")
            };
            // Found with loops relaxed: tokens long enough to reach a bound depend on the
            // iterations left. Their fate is cached by the iterations left when only the
            // subject's loop was relaxed (then its real count is known); else checked against
            // the chart.
            let own = subject.left.filter(|_| subject.relax);
            let left = [own, callers.left].into_iter().flatten().min();
            let reaches_bound =
                |p: Position| left.is_some_and(|l| trie.position_len(p) > l as usize);
            let mut long = Vec::new();
            for &p in accepted.iter() {
                match reaches_bound(p) {
                    true => long.push(p),
                    false => set_bit(out, trie.token_at(p)),
                }
            }
            let (Some(left), false) = (left, long.is_empty()) else {
                continue;
            };
            let near = match callers.any {
                false => Context::build_near(g, scratch, k, &subject, left),
                true => None,
            };
            let Some(near) = near else {
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
        pending.extend_from_slice(last.uncertain());
    }
    scratch.scannable = scannable;
    if !unbuilt.is_empty() {
        unbuilt.sort_unstable();
        unbuilt.dedup();
        return Err(Halt::Unbuilt(unbuilt));
    }
    if !pending.is_empty() {
        settle(g, chart, &mut scratch.settled, &mut pending, out, budget)?;
    }
    scratch.pending = pending;
    Ok(())
}

/// Adds to `out` the `pending` tokens (sorted and deduplicated here) that neither cache level
/// could decide and that are not in it yet: they depend on the whole chart, so they are walked
/// along the trie against it, or found among the walks `settled` remembers for this row.
fn settle(
    g: &GrammarView<'_>,
    chart: &mut Chart,
    settled: &mut Settled,
    pending: &mut Vec<Position>,
    out: &mut [u32],
    budget: &Budget,
) -> Result<(), Halt> {
    let (prog, vocab) = (&g.prog, &g.vocab);
    let trie = vocab.trie();
    pending.sort_unstable();
    pending.dedup();
    pending.retain(|&p| !get_bit(out, trie.token_at(p)));
    let row = row_hash(chart.last_row());
    match settled.get(row, pending) {
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
                pending,
                budget,
                |p, outcome| {
                    if matches!(outcome, Outcome::Accepted) {
                        set_bit(out, trie.token_at(p));
                        accepted.push(p);
                    }
                },
            )?;
            settled.insert(row, pending, accepted);
        }
    }
    Ok(())
}

/// The repetition counter as it matters to a token of at most `cap - 1` bytes: its distance
/// to the upper bound and to the lower bound, each capped (XGrammar 2's repetition
/// compression, exact: counters further than a token from both bounds behave alike).
pub(super) fn count_class(prog: &Program, it: &Item, cap: u32) -> u64 {
    let st = prog.state(it.state);
    if st.flags & COUNTED == 0 {
        return 0;
    }
    let c = prog.units[st.unit as usize].counted.expect("counted state");
    let to_max = c.left(it.count).map_or(cap, |left| left.min(cap));
    let to_min = c.min.saturating_sub(it.count).min(cap);
    ((to_max as u64) << 32) | to_min as u64
}

pub(super) fn cap(vocab: &Vocab) -> u32 {
    vocab.max_token_len() as u32 + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::testing::*;
    use crate::cfg::CfgCompiler;
    use crate::ir::recognizer::Terminal;

    /// The mask through the cache levels (cold, then warm) is the mask of one plain trie walk
    /// and the oracle's, EOS included, with every context depth.
    #[test]
    fn cached_masks_are_the_walked_and_the_oracle_masks() {
        let vocab = small_vocab();
        let eos = vocab.eos_tokens()[0];
        let configs = [
            built_up_front(),
            built_up_front().context_depth(0),
            built_up_front().context_depth(1),
            built_up_front().mask_cache(false),
        ];
        for config in configs {
            let compiler = CfgCompiler::new(&vocab, config);
            each_case(&compiler, |case| {
                let mut want = case.allowed.clone();
                let mut r = case.rec.start();
                let bytes = case.prefix.bytes();
                bytes.for_each(|b| assert!(r.push(case.rec, Terminal::Byte(b))));
                if r.is_accepting(case.rec) {
                    want.push(eos);
                }
                let mut scratch = Scratch::default();
                for pass in ["cold", "warm"] {
                    let mut out = vec![u32::MAX; vocab.mask_words()];
                    let prog = case.g.prog();
                    let (view, chart) = (case.g.view(&prog), &mut case.chart);
                    fill(&view, chart, &mut scratch, &mut out, &budget()).unwrap();
                    assert_eq!(ones(&out), want, "{}, {pass}", case.at());
                }
            });
            let stats = compiler.cache_stats();
            match compiler.config.mask_cache {
                true => assert!(stats.hits > 0 && stats.misses > 0, "{stats:?}"),
                false => assert_eq!(stats.hits + stats.misses, 0),
            }
        }
    }

    /// Loops of words counted by a loop calling a counted loop of letters, their bounds drawn
    /// at random past the unrolling limit: the outer loop is a caller in context, relaxed near
    /// its bound ([`small_vocab`]'s tokens are all shorter than 8). After every prefix of a
    /// random text of the language, and with a scratch shared by all of them, the cached
    /// masks are the oracle's.
    #[test]
    fn counted_loops_in_context_agree_with_the_oracle() {
        let vocab = small_vocab();
        let eos = vocab.eos_tokens()[0];
        let compiler = CfgCompiler::new(&vocab, built_up_front());
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        for _ in 0..10 {
            let (lo, hi) = (1 + next(2), 33 + next(8));
            let (min, max) = (next(3), 33 + next(8));
            let gbnf = format!(r#"root ::= "\"" ([ab]{{{lo},{hi}}} "!"){{{min},{max}}} "\"""#);
            let (g, rec) = compile(&compiler, &gbnf);
            let mut text = b"\"".to_vec();
            for _ in 0..max - next(3) {
                for _ in 0..lo + next(3) {
                    text.push(b"ab"[next(2) as usize]);
                }
                text.push(b'!');
            }
            text.push(b'"');
            let mut scratch = Scratch::default();
            for end in 0..=text.len() {
                let prefix = &text[..end];
                let mut want = oracle(&rec, &vocab, prefix);
                let mut r = rec.start();
                prefix
                    .iter()
                    .for_each(|&b| assert!(r.push(&rec, Terminal::Byte(b))));
                if r.is_accepting(&rec) {
                    want.push(eos);
                }
                let mut chart = chart_after(&g, prefix);
                let mut out = vec![0u32; vocab.mask_words()];
                let prog = g.prog();
                fill(
                    &g.view(&prog),
                    &mut chart,
                    &mut scratch,
                    &mut out,
                    &budget(),
                )
                .unwrap();
                let at = String::from_utf8_lossy(prefix);
                assert_eq!(ones(&out), want, "{gbnf} after {at}");
            }
        }
    }

    /// A counter's class is its distance to each bound, capped: counters further than a token
    /// from both bounds are alike.
    #[test]
    fn count_classes_cap_the_distance_to_the_bounds() {
        let vocab = small_vocab();
        let compiler = CfgCompiler::new(&vocab, built_up_front());
        let (g, _) = compile(&compiler, r#"root ::= "\"" [a-zA-Z]{2,60} "\"""#);
        let chart = chart_after(&g, b"\"");
        let counted = chart
            .last_row()
            .iter()
            .find(|it| g.prog().state(it.state).flags & COUNTED != 0)
            .copied()
            .expect("the loop waits for its body");
        let cap = cap(&vocab);
        let class = |count| count_class(&g.prog(), &Item { count, ..counted }, cap);
        assert_eq!(class(0), (cap as u64) << 32 | 2);
        assert_eq!(class(1), (cap as u64) << 32 | 1);
        assert_eq!(class(10), class(20), "far from both bounds");
        assert_eq!(class(58), 2 << 32);
        assert_eq!(class(60), 0);
    }
}
