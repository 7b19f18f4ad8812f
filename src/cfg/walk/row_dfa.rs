//! Earley rows memoized as a lazily built DFA over their structure.

use crate::automata::interner::SliceInterner;
use crate::base::byteset::ByteSet;
use crate::cfg::chart::{Chart, Item, EXT};
use crate::cfg::program::{Program, CALLS};
use crate::cfg::walk::horizon::Horizons;
use crate::vocab::SliceProofs;

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
    pub(super) base: usize,
    /// Per state: `[rows, len of each row.., items (state, origin, count).., follow set of
    /// the last row's EXT completions (8 words)]`.
    pub(super) states: SliceInterner,
    /// Per state: what may follow its last row's EXT completions.
    pub(super) follow: Vec<ByteSet>,
    /// `states.len() * n_classes` entries: a state with [`EXT_BIT`] set when the source
    /// row's EXT completions may be followed by the class (read together with the state, at
    /// every trie node), [`NO_ROW`], [`UNKNOWN`] or [`IN_CHART`].
    pub(super) trans: Vec<u32>,
    pub(super) n_classes: usize,
    scratch_rows: Vec<usize>,
    scratch_key: Vec<u32>,
    /// What slice walks proved about these states.
    pub(super) slice_proofs: SliceProofs,
    /// What slice walks learnt about unit states (not row states: these hold in any DFA).
    pub(super) horizons: Horizons,
}

pub(super) const NO_ROW: u32 = u32::MAX;

pub(super) const UNKNOWN: u32 = u32::MAX - 1;

/// The next row's structure is too large: it lives in the chart.
pub(super) const IN_CHART: u32 = u32::MAX - 2;

/// The state with no row above the base (every key of a pushed row has at least one row).
pub(super) const ROOT: u32 = 0;

/// A transition leaves an EXT completion for a byte that may follow it (the same bit as
/// [`Node::EXT`]).
pub(super) const EXT_BIT: u32 = 1 << 31;

/// Most states a DFA numbers: with [`EXT_BIT`] set, the largest id stays below the markers.
pub(super) const MAX_DFA_STATES: usize = (EXT_BIT - 3) as usize;

pub(crate) const MAX_DFA_ROWS: usize = 8;

const MAX_DFA_ITEMS: usize = 64;

impl StateDfa {
    /// A DFA for walks on top of `base` rows. With no row above the base the walk's root is
    /// state [`ROOT`], its transitions looked up like any other's.
    pub(crate) fn new(base: usize, n_classes: usize) -> StateDfa {
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
            horizons: Horizons::default(),
        }
    }

    /// The DFA with room for `states` states before its transition table grows.
    pub(crate) fn with_room(mut self, states: usize) -> StateDfa {
        self.trans.reserve(states * self.n_classes);
        self.follow.reserve(states);
        self
    }

    /// The state of the chart's last row, if its structure is small enough. Below the last
    /// row only waiting items matter (completions look for them; only the last row scans), so
    /// the others are left out: a finished item pointing back one row would otherwise chain
    /// every row of a loop into the structure.
    pub(super) fn intern(&mut self, prog: &Program, chart: &Chart) -> Option<u32> {
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
    pub(crate) fn heap_bytes(&self) -> usize {
        self.trans.len() * 4
            + self.states.heap_bytes()
            + self.follow.len() * std::mem::size_of::<ByteSet>()
            + self.slice_proofs.heap_bytes()
            + self.horizons.heap_bytes()
    }

    /// The number state `id`'s last row would have on the chart, and its items.
    pub(crate) fn last_row(&self, id: u32) -> (u32, impl Iterator<Item = Item> + '_) {
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
    pub(super) fn materialize(&self, id: u32, chart: &mut Chart, items: &mut Vec<Item>) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::testing::*;
    use crate::cfg::walk::stepper::Stepper;
    use crate::cfg::CfgCompiler;

    /// Inside a string the rows repeat: every letter after the first leads to the same state,
    /// whose rows put back on the chart intern to it again, and whose last row is the one the
    /// chart had.
    #[test]
    fn row_dfa_states_are_row_structures() {
        let vocab = small_vocab();
        let compiler = CfgCompiler::new(&vocab, built_up_front());
        let (g, _) = compile(&compiler, CASES[0].0);
        let mut chart = chart_after(&g, b"[\"");
        let base = chart.num_rows();
        let mut dfa = StateDfa::new(base, g.prog().n_classes());
        let budget = budget();
        let prog = g.prog();
        let mut stepper = Stepper::new(&prog, &mut chart, &mut dfa, &budget);
        let root = stepper.root();
        assert_eq!(root.dfa(), Some(ROOT));
        let mut states = Vec::new();
        let mut node = root;
        for &b in b"abcab" {
            node = stepper.advance(&node, b).unwrap().expect("letters go on");
            states.push(node.dfa().expect("a small structure"));
        }
        drop(stepper);
        assert_ne!(states[0], ROOT);
        assert!(states.iter().all(|&s| s == states[0]), "{states:?}");
        let id = states[0];
        // Put back, the rows intern to the same state, and its last row is the chart's.
        let mut items = Vec::new();
        dfa.materialize(id, &mut chart, &mut items);
        assert_eq!(chart.num_rows(), base + 1);
        assert_eq!(dfa.intern(&g.prog(), &chart), Some(id));
        let (row, last) = dfa.last_row(id);
        assert_eq!(row as usize, base);
        assert_eq!(last.collect::<Vec<_>>(), chart.last_row());
        // The same letters pushed on the chart itself reach the same structure.
        chart.truncate(base);
        let pushed = chart.push_byte(&g.prog(), b'a', &budget).unwrap();
        assert!(pushed);
        assert_eq!(dfa.intern(&g.prog(), &chart), Some(id));
    }

    /// Nesting deeper than the rows a state may hold inside one walk leaves the structure in
    /// the chart, and stepping on from there still follows the chart.
    #[test]
    fn row_dfa_leaves_deep_structures_in_the_chart() {
        let vocab = small_vocab();
        let compiler = CfgCompiler::new(&vocab, built_up_front());
        let (g, _) = compile(&compiler, CASES[1].0);
        let mut chart = chart_after(&g, b"");
        let mut dfa = StateDfa::new(chart.num_rows(), g.prog().n_classes());
        let budget = budget();
        let prog = g.prog();
        let mut stepper = Stepper::new(&prog, &mut chart, &mut dfa, &budget);
        let mut node = stepper.root();
        let mut in_chart = None;
        for depth in 1..=MAX_DFA_ROWS + 2 {
            node = stepper
                .advance(&node, b'[')
                .unwrap()
                .expect("brackets nest");
            if node.dfa().is_none() && in_chart.is_none() {
                in_chart = Some(depth);
            }
        }
        assert!(
            in_chart.is_some_and(|d| d > 1),
            "went to the chart at {in_chart:?}"
        );
        for &b in b"a]]" {
            node = stepper.advance(&node, b).unwrap().expect("closing is fine");
        }
        assert!(stepper.advance(&node, b'}').unwrap().is_none());
    }
}
