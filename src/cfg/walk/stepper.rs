//! One byte at a time, through the row DFA where it knows the structure, the chart where not.

use crate::cfg::chart::{Chart, Halt, Item};
use crate::cfg::program::{Program, SCANS};
use crate::cfg::walk::row_dfa::{
    StateDfa, EXT_BIT, IN_CHART, MAX_DFA_STATES, NO_ROW, ROOT, UNKNOWN,
};
use crate::limits::Budget;

/// The walk's state at a trie node, packed in one word: it is written and read at every trie
/// node, and a struct of separate fields is stored piecewise and then reloaded whole, which
/// stalls store forwarding. The low 31 bits are a [`StateDfa`] state or, with
/// [`Node::IN_CHART`], the number of chart rows underneath this depth.
#[derive(Clone, Copy)]
pub(crate) struct Node(u64);

impl Node {
    /// An EXT completion happened on the path after at least one byte, followed by a byte
    /// that may follow it (the bit a known transition carries, so following one is an OR).
    const EXT: u64 = EXT_BIT as u64;
    /// The row structure is too large for the DFA: it lives in the chart.
    const IN_CHART: u64 = 1 << 32;
    const LOW: u64 = Node::EXT - 1;

    pub(super) fn state(id: u32, ext: bool) -> Node {
        debug_assert!((id as usize) < MAX_DFA_STATES);
        Node(id as u64 | if ext { Node::EXT } else { 0 })
    }

    pub(super) fn chart(rows: usize, ext: bool) -> Node {
        debug_assert!(rows as u64 <= Node::LOW, "a chart of 2^31 rows");
        Node(rows as u64 | Node::IN_CHART | if ext { Node::EXT } else { 0 })
    }

    /// The node a known transition leads to: its target, with [`Node::EXT`] set if it was
    /// set here or the transition sets it.
    pub(super) fn follow(self, transition: u32) -> Node {
        Node(transition as u64 | self.0 & Node::EXT)
    }

    /// The [`StateDfa`] state, unless the structure lives in the chart.
    pub(crate) fn dfa(self) -> Option<u32> {
        (self.0 & Node::IN_CHART == 0).then_some((self.0 & Node::LOW) as u32)
    }

    /// Chart rows underneath this depth (when [`Node::dfa`] is `None`).
    pub(super) fn rows(self) -> usize {
        (self.0 & Node::LOW) as usize
    }

    pub(crate) fn ext(self) -> bool {
        self.0 & Node::EXT != 0
    }
}

/// Byte steps on top of a chart, memoized by [`StateDfa`]: the chart holds the walk's base
/// rows, and a state's rows are put back on it only when a transition is not known yet.
pub(crate) struct Stepper<'a> {
    pub(crate) prog: &'a Program,
    pub(super) chart: &'a mut Chart,
    /// Rows of the chart when the walk started (the walk leaves it so).
    pub(super) start: usize,
    pub(crate) dfa: &'a mut StateDfa,
    raw: Vec<Item>,
    /// The DFA state last put back on the chart and its number of rows: stepping a byte only
    /// adds a row above them, so the next unknown transition of the same state (the next
    /// class a prover tries, the next child in the trie) cuts back to them instead.
    on_chart: Option<(u32, usize)>,
    pub(super) budget: &'a Budget,
    /// Steps not yet charged to the budget (charged by the thousand: a known transition is a
    /// table lookup, and the charge should not cost as much).
    steps: u64,
}

/// Steps charged to the budget at once.
const STEPS_PER_CHARGE: u64 = 1024;

impl<'a> Stepper<'a> {
    pub(crate) fn new(
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
    pub(crate) fn root(&mut self) -> Node {
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
    pub(crate) fn advance(&mut self, parent: &Node, byte: u8) -> Result<Option<Node>, Halt> {
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
    ) -> Result<Option<Node>, Halt> {
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
    /// most rows treat them alike; a slice proof asks a state for every class. The alike
    /// classes are found as sets, from each scanner's transitions, rather than by asking every
    /// scanner about every class: that cost a cold walk of a property name a third of its time.
    fn record(&mut self, slot: usize, row: usize, transition: u32) {
        let Stepper {
            prog, chart, dfa, ..
        } = self;
        let n = dfa.n_classes;
        let (first, class) = (slot - slot % n, slot % n);
        let leaving = prog.alphabet.classes(chart.row_follow(row));
        let mut alike = match leaving.contains(class as u8) {
            true => leaving,
            false => leaving.complement(),
        };
        for it in chart.row(row) {
            if prog.state(it.state).flags & SCANS != 0 {
                let here = prog.entry(it.state, class);
                alike = alike.intersection(&prog.classes_with_entry(it.state, here));
            }
        }
        dfa.trans[slot] = transition;
        for c in alike.iter().map(usize::from).take_while(|&c| c < n) {
            if dfa.trans[first + c] == UNKNOWN {
                dfa.trans[first + c] = transition;
            }
        }
    }

    /// May the unknown context take `byte` right after an EXT completion in `node`'s last row?
    pub(super) fn may_leave(&self, node: &Node, byte: u8) -> bool {
        let follow = match node.dfa() {
            Some(id) => &self.dfa.follow[id as usize],
            None => self.chart.row_follow(node.rows() - 1),
        };
        node.ext() || follow.contains(byte)
    }

    /// Charges the steps not charged yet.
    pub(crate) fn finish(&mut self) -> Result<(), Halt> {
        Ok(self.budget.spend(std::mem::take(&mut self.steps))?)
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

#[cfg(test)]
mod tests {
    use formwork_testkit::rng::Rng;

    use super::*;
    use crate::cfg::testing::*;
    use crate::cfg::CfgCompiler;

    /// Random byte strings over the grammars' bytes, each stepped twice through one DFA (the
    /// second time on known transitions): a byte is taken exactly when the chart takes it.
    #[test]
    fn stepper_takes_exactly_the_bytes_the_chart_takes() {
        let vocab = small_vocab();
        let bytes = "ab{}[]\":,0-!zAé".as_bytes();
        let mut rng = Rng::new(3);
        each_case(&CfgCompiler::new(&vocab, built_up_front()), |case| {
            let (prog, rows) = (&case.g.prog(), case.chart.num_rows());
            let mut dfa = StateDfa::new(rows, prog.n_classes());
            let strings: Vec<Vec<u8>> = (0..60)
                .map(|_| {
                    (0..1 + rng.below(14))
                        .map(|_| bytes[rng.below(bytes.len())])
                        .collect()
                })
                .collect();
            for s in strings.iter().chain(&strings) {
                // The chart's own verdict, on a copy.
                let (mut alone, budget) = (case.chart.clone(), budget());
                let taken = s
                    .iter()
                    .take_while(|&&b| alone.push_byte(prog, b, &budget).unwrap())
                    .count();
                let mut stepper = Stepper::new(prog, &mut case.chart, &mut dfa, &budget);
                let mut node = stepper.root();
                let mut stepped = 0;
                while let Some(next) = s
                    .get(stepped)
                    .and_then(|&b| stepper.advance(&node, b).unwrap())
                {
                    node = next;
                    stepped += 1;
                }
                stepper.finish().unwrap();
                drop(stepper);
                assert_eq!(stepped, taken, "{}, then {s:?}", case.at());
                assert_eq!(case.chart.num_rows(), rows, "the chart is left as it was");
            }
        });
    }

    /// A node packs a DFA state or a row count, and the EXT flag, which following a known
    /// transition keeps.
    #[test]
    fn nodes_pack_their_parts() {
        let n = Node::state(5, false);
        assert_eq!((n.dfa(), n.ext()), (Some(5), false));
        let c = Node::chart(3, true);
        assert_eq!((c.dfa(), c.rows(), c.ext()), (None, 3, true));
        assert!(Node::state(1, true).follow(7).ext());
        let leaves = n.follow(7 | EXT_BIT);
        assert_eq!((leaves.dfa(), leaves.ext()), (Some(7), true));
        assert_eq!(n.follow(9).dfa(), Some(9));
    }
}
