//! The context level: an item's uncertain tokens re-walked with its real callers from the
//! chart.

use std::sync::PoisonError;

use smallvec::SmallVec;

use crate::base::byteset::ByteSet;
use crate::cfg::cache::entry::{CacheEntry, LEVEL2_DOMAIN, OUTER_DOMAIN};
use crate::cfg::cache::fill::{cap, count_class, Scratch};
use crate::cfg::cache::item_level::{hash_follow, Subject};
use crate::cfg::cache::view::GrammarView;
use crate::cfg::chart::{waits_for, Chart, Halt, Item, EXT};
use crate::cfg::program::{Program, CALLS, COUNTED, FINAL, RELAXED, SCANS, SPECIALS};
use crate::cfg::walk::list_walk::{walk_list, Outcome};
use crate::cfg::walk::row_dfa::{StateDfa, MAX_DFA_ROWS};
use crate::cfg::walk::Position;
use crate::ir::StructHasher;
use crate::limits::Budget;

/// Most tokens a counted caller's relaxed classification may leave to the exact check: those
/// long enough to reach its upper bound ([`context_key`]).
const MAX_TOKENS_PAST_BOUND: usize = 1024;

/// The counted callers [`context_key`] relaxed besides the subject's own loop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct RelaxedCallers {
    /// Some caller was relaxed ([`Context::build_near`] then cannot stand for them all).
    pub any: bool,
    /// The fewest iterations one of them had left before its upper bound, where a token could
    /// use them up: longer tokens need the exact check.
    pub left: Option<u32>,
}

/// Gathers `k`'s callers in the chart into `scratch` (callers of its unit in its origin row,
/// their callers, ... up to `depth` levels) and returns the context-level key: `base` (the
/// item-level key, or the key of the level below whose uncertain tokens are classified) and a
/// canonical description of those rows, where origins inside the gathered
/// rows are renumbered and callers whose own callers were not gathered get origin [`EXT`].
///
/// A counted caller past its lower bound is relaxed, like the subject's own loop, when few
/// tokens are long enough to reach its upper bound: its counter would otherwise be part of
/// the key, and a loop over words (`(?:\S+\s+){0,99}` in a `pattern`) made every word a new
/// key, each classifying ~100k tokens again (MaskBench o21075: ~1.2 ms at every step of its
/// texts). The relaxed classification is exact for a token shorter than the iterations left
/// (an iteration reads a byte at least); the caller checks the longer ones against the chart
/// (see [`RelaxedCallers`]).
pub(super) fn context_key(
    g: &GrammarView<'_>,
    chart: &Chart,
    scratch: &mut Scratch,
    subject: &Subject,
    base: u128,
    depth: usize,
    budget: &Budget,
) -> Result<(u128, RelaxedCallers), Halt> {
    gather_callers(g, chart, scratch, &subject.item, depth, budget)?;
    // Describing the callers sorts them and looks each one's rows up: an ambiguous grammar
    // gathers thousands at every scannable item of a row, and this work, uncharged, let a
    // mask run 2-4 s within the default budget (`x ::= "a" x | x "a" | "a" | x x`).
    let n = scratch.found.len() as u64;
    budget.spend(n * u64::from(1 + n.max(1).ilog2()))?;
    let k = &subject.item;
    let prog = &g.prog;
    let Scratch {
        explored,
        explored_set,
        found,
        rows,
        described,
        ..
    } = scratch;
    rows.clear();
    described.clear();
    rows.extend(explored.iter().map(|e| e.0));
    rows.sort_unstable();
    rows.dedup();
    let cap = cap(g.vocab);
    let mut relaxed = RelaxedCallers::default();
    for (row, w) in found.iter_mut() {
        if Some(w.state) == subject.lifted {
            if subject.relax && *row == k.origin {
                w.count = RELAXED;
            }
        } else if let Some(left) = relaxable(g, w, cap) {
            w.count = RELAXED;
            relaxed.any = true;
            relaxed.left = [relaxed.left, left].into_iter().flatten().min();
        }
        *row = vrow(rows, *row);
        w.origin = if explored_set.contains(&(w.origin, prog.state(w.state).unit)) {
            vrow(rows, w.origin)
        } else {
            EXT
        };
    }
    // An outermost caller's unit completes into the unknown context: what may follow it
    // decides which tokens stay uncertain.
    let state_key = |w: &Item| match w.origin {
        EXT => {
            let mut h = StructHasher::new(OUTER_DOMAIN);
            h.hash(prog.hash(w.state));
            hash_follow(&mut h, prog, w.state);
            h.finish()
        }
        _ => prog.hash(w.state),
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
    h.hash(base)
        .word(count_class(prog, k, cap))
        .word(rows.len() as u64)
        .word(top_origin as u64)
        .word(described.len() as u64);
    for (r, s, c, o) in described.iter() {
        h.word(*r as u64).hash(*s).word(*c).word(*o as u64);
    }
    Ok((h.finish(), relaxed))
}

/// If caller `w` is a counted loop past its lower bound whose upper bound few tokens can
/// reach: `Some` of its iterations left when a token could use them up (`Some(None)`: none
/// can).
fn relaxable(g: &GrammarView<'_>, w: &Item, cap: u32) -> Option<Option<u32>> {
    if g.prog.state(w.state).flags & COUNTED == 0 || w.count == RELAXED {
        return None;
    }
    let c = g.prog.units[g.prog.state(w.state).unit as usize]
        .counted
        .expect("counted state");
    if !c.complete(w.count) {
        return None;
    }
    match c.left(w.count).filter(|&l| l < cap) {
        None => Some(None),
        Some(l) if g.vocab.longer_than(l as usize).len() <= MAX_TOKENS_PAST_BOUND => Some(Some(l)),
        Some(_) => None,
    }
}

/// Gathers `k`'s callers into `scratch.explored` (the (row, unit) pairs looked into) and
/// `scratch.found` (the items waiting there), `depth` levels up, tail callers free.
fn gather_callers(
    g: &GrammarView<'_>,
    chart: &Chart,
    scratch: &mut Scratch,
    k: &Item,
    depth: usize,
    budget: &Budget,
) -> Result<(), Halt> {
    let prog = &g.prog;
    let Scratch {
        explored,
        explored_set,
        found,
        found_set,
        ..
    } = scratch;
    explored.clear();
    explored_set.clear();
    found.clear();
    found_set.clear();
    explored.push((k.origin, prog.state(k.state).unit));
    explored_set.insert(explored[0]);
    // A caller that only returns into the end of its own unit (a rule called last in its
    // caller's body) decides nothing: its completion passes straight up. When it is the only
    // caller, it is gathered at no cost in depth, so a chain of tail calls does not use the
    // levels up (several callers, as in an ambiguous loop, would grow the context each byte).
    let mut level: SmallVec<[(u32, u32); 8]> = smallvec::smallvec![explored[0]];
    for level_up in 1..=depth {
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
                } else if level_up < depth {
                    explored.push(next);
                    explored_set.insert(next);
                    next_level.push(next);
                }
            }
        }
        level = next_level;
    }
    Ok(())
}

/// Index of a gathered row among the gathered rows.
fn vrow(rows: &[u32], r: u32) -> u32 {
    rows.binary_search(&r).expect("gathered row") as u32
}

/// A scannable item's callers, as frozen rows for a local chart.
pub(super) struct Context {
    rows: Vec<Vec<Item>>,
    top: Item,
}

impl Context {
    /// The local chart's rows from what [`context_key`] gathered.
    pub(super) fn build(scratch: &Scratch, k: &Item) -> Context {
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
    pub(super) fn build_near(
        g: &GrammarView<'_>,
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
    pub(super) fn classify(
        &self,
        g: &GrammarView<'_>,
        uncertain: &[Position],
        budget: &Budget,
    ) -> Result<CacheEntry, Halt> {
        let mut accepted = Vec::new();
        let mut still = Vec::new();
        with_shared(g, &self.rows, |chart, dfa| {
            chart.push_raw(&[self.top], ByteSet::EMPTY);
            walk_list(
                g.prog,
                g.vocab,
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
    /// States of the largest program that walked with it: its rows may name any of them.
    states: usize,
}

/// Most bytes a grammar's shared row DFA keeps; past it the next walk starts a new one.
const SHARED_DFA_BYTES: usize = 4 << 20;

/// States a grammar's shared row DFA has room for from the start: a JSON schema's first
/// walks make a few hundred to a few thousand, and growing the table by doubling copied it
/// (~3% of a JSON schema's first walks).
const SHARED_DFA_ROOM: usize = 2048;

/// Runs `walk` on a chart holding exactly `rows`, with the grammar's shared row DFA.
pub(super) fn with_shared<R>(
    g: &GrammarView<'_>,
    rows: &[Vec<Item>],
    walk: impl FnOnce(&mut Chart, &mut StateDfa) -> R,
) -> R {
    // Matchers of one grammar hold snapshots of its program, which grows as units are built
    // (states only appended). Rows learnt under a larger snapshot may name states a smaller
    // one lacks, so a matcher behind the one that filled the DFA walks with its own.
    let states = g.prog.states.len();
    let lent = {
        let mut slot = g.walks.lock().unwrap_or_else(PoisonError::into_inner);
        match slot.as_ref() {
            Some(shared) if shared.states <= states => slot.take(),
            _ => None,
        }
    };
    let mut shared = lent.unwrap_or_else(|| SharedWalks {
        dfa: StateDfa::new(0, g.prog.n_classes()).with_room(SHARED_DFA_ROOM),
        chart: Chart::from_rows(g.prog, &[]),
        states,
    });
    shared.states = states;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::token::TokenId;
    use crate::cfg::cache::item_level::item_level;
    use crate::cfg::testing::*;
    use crate::cfg::CfgCompiler;

    /// The context keys of a chart's scannable items, sorted.
    fn keys(g: &crate::cfg::CfgGrammar, prefix: &str) -> Vec<u128> {
        let prog = g.prog();
        let view = g.view(&prog);
        let chart = chart_after(g, prefix.as_bytes());
        let mut scratch = Scratch::default();
        let mut keys: Vec<u128> = scannable(g, &chart)
            .iter()
            .map(|k| {
                let subject = Subject::of(&view, &chart, k);
                let k1 = subject.key(&view);
                let depth = view.context_depth;
                context_key(&view, &chart, &mut scratch, &subject, k1, depth, &budget())
                    .unwrap()
                    .0
            })
            .collect();
        keys.sort_unstable();
        keys
    }

    /// Two levels of callers are the key: charts whose items have the same two callers share
    /// it, wherever they are and whatever lies further out; another caller is another key.
    #[test]
    fn context_keys_name_the_callers_up_to_the_depth() {
        let vocab = small_vocab();
        let compiler = CfgCompiler::new(&vocab, built_up_front().context_depth(2));
        let (g, _) = compile(&compiler, CASES[1].0);
        let deep = keys(&g, "[[[");
        assert_eq!(deep, keys(&g, "[[[["), "the same callers one row further");
        assert_eq!(
            deep,
            keys(&g, "{[["),
            "what is beyond the depth does not count"
        );
        assert_eq!(deep, keys(&g, "[a,[[["), "nor where the rows are");
        assert_ne!(deep, keys(&g, "[{["), "another caller at the second level");
        assert_ne!(deep, keys(&g, "["), "the start rule at the second level");
        assert_ne!(
            keys(&g, "{"),
            keys(&g, "["),
            "another caller at the first level"
        );
    }

    /// The context level decides some of the item level's uncertain tokens with the real
    /// callers: what it accepts is allowed, and the rest stays uncertain or is rejected.
    #[test]
    fn context_level_accepts_allowed_tokens_among_the_uncertain() {
        let vocab = small_vocab();
        let trie = vocab.trie();
        let mut decided = 0;
        each_case(
            &CfgCompiler::new(&vocab, built_up_front().context_depth(2)),
            |case| {
                let prog = case.g.prog();
                let view = case.g.view(&prog);
                let mut scratch = Scratch::default();
                for k in scannable(case.g, &case.chart) {
                    let subject = Subject::of(&view, &case.chart, &k);
                    let budget = budget();
                    let item = item_level(&view, &subject, &budget).unwrap();
                    let (_, _, uncertain) = item.item_parts();
                    let k1 = subject.key(&view);
                    let depth = view.context_depth;
                    context_key(
                        &view,
                        &case.chart,
                        &mut scratch,
                        &subject,
                        k1,
                        depth,
                        &budget,
                    )
                    .unwrap();
                    let context = Context::build(&scratch, &k);
                    let entry = context.classify(&view, uncertain, &budget).unwrap();
                    let (accepted, still) = entry.context_parts();
                    for &p in accepted.iter().chain(still) {
                        assert!(
                            uncertain.contains(&p),
                            "{}: {p} was not uncertain",
                            case.at()
                        );
                    }
                    for &p in accepted {
                        // Near a bound the relaxed loop may take more than the chart does.
                        let (t, near) = (trie.token_at(p), subject.left.is_some());
                        assert!(near || case.allowed.contains(&t), "{}: {t}", case.at());
                    }
                    assert!(accepted.iter().all(|p| !still.contains(p)), "{}", case.at());
                    decided += accepted.len();
                }
            },
        );
        assert!(decided > 0, "the context level decided something");
    }

    /// Inside two brackets the item alone cannot close one (its unit ends inside the token),
    /// the callers can: `a]` is accepted in context.
    #[test]
    fn context_level_closes_what_the_callers_close() {
        let vocab = small_vocab();
        let compiler = CfgCompiler::new(&vocab, built_up_front().context_depth(2));
        let (g, _) = compile(&compiler, CASES[1].0);
        let prog = g.prog();
        let view = g.view(&prog);
        let chart = chart_after(&g, b"[[");
        let trie = vocab.trie();
        let a_close = text_tokens(&vocab)
            .find(|&t| vocab.token_bytes(t) == b"a]")
            .expect("a token");
        let position = view.index.position(a_close);
        let mut scratch = Scratch::default();
        let mut found = false;
        for k in scannable(&g, &chart) {
            let subject = Subject::of(&view, &chart, &k);
            let budget = budget();
            let item = item_level(&view, &subject, &budget).unwrap();
            let (_, _, uncertain) = item.item_parts();
            if !uncertain.contains(&position) {
                continue;
            }
            let k1 = subject.key(&view);
            let depth = view.context_depth;
            context_key(&view, &chart, &mut scratch, &subject, k1, depth, &budget).unwrap();
            let entry = Context::build(&scratch, &k).classify(&view, &[position], &budget);
            let entry = entry.unwrap();
            let (accepted, _) = entry.context_parts();
            let tokens: Vec<TokenId> = accepted.iter().map(|&p| trie.token_at(p)).collect();
            assert_eq!(tokens, [a_close]);
            found = true;
        }
        assert!(found, "`a]` is uncertain for some item");
    }
}
