//! Byte-level Earley parsing over the program's unit automata.
//!
//! An item is `(state, origin, count)`: a state of some unit's automaton, the row where that
//! unit was predicted, and the repetition counter of a counted unit (0 elsewhere). Rows are
//! kept (one per byte or special token), so popping bytes is a truncation: that is what makes
//! the token-trie walk (push a byte going down, pop coming back up) and `rollback` cheap.
//!
//! Nullable units are handled the Aycock–Horspool way: predicting a nullable unit also
//! advances the predicting item, and a completion inside its own row is skipped. Left
//! recursion needs nothing special; ambiguity is bounded by deduplication within a row.

use super::program::{Program, CALLS, COUNTED, DEAD, FINAL, MULTI};
use crate::base::byteset::ByteSet;
use crate::limits::{LimitExceeded, LimitKind};

/// An Earley item.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Item {
    pub state: u32,
    pub origin: u32,
    pub count: u32,
}

/// Origin of an item whose unit was entered outside the chart (the unknown context of a
/// cached classification): completing it is recorded in the row's `follow` set.
pub(crate) const EXT: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Row {
    start: u32,
    /// The bytes that may follow the units of the items with origin [`EXT`] that completed in
    /// this row ([`Program::follow`]): past such a completion, the unknown context may take
    /// the next byte only if it is one of these.
    follow: ByteSet,
}

/// Bounds on one row, so ambiguous grammars fail with an error instead of running away.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowLimits {
    pub max_items: usize,
    pub max_work: usize,
}

/// A row went past [`RowLimits`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Overflow(pub LimitExceeded);

/// Earley rows over one program.
#[derive(Clone, Debug)]
pub(crate) struct Chart {
    items: Vec<Item>,
    rows: Vec<Row>,
    /// Per state, the row number (rows.len()) that last added an item in it: a cheap filter
    /// before the exact duplicate check.
    stamp: Vec<u32>,
    limits: RowLimits,
}

impl Chart {
    /// The chart before any input: the start unit predicted in row 0.
    pub fn new(prog: &Program, limits: RowLimits) -> Result<Chart, Overflow> {
        let mut chart = Chart::from_rows(prog, limits, &[]);
        chart.open_row();
        chart.add(Item {
            state: prog.units[prog.start_unit as usize].start,
            origin: 0,
            count: 0,
        });
        chart.close(prog)?;
        Ok(chart)
    }

    /// A chart holding exactly `rows`, not closed: a cached classification's item with the
    /// callers it completes into (see `mask.rs`).
    pub fn from_rows(prog: &Program, limits: RowLimits, rows: &[Vec<Item>]) -> Chart {
        let mut chart = Chart {
            items: Vec::new(),
            rows: Vec::new(),
            stamp: vec![0; prog.states.len()],
            limits,
        };
        rows.iter()
            .for_each(|row| chart.push_raw(row, ByteSet::EMPTY));
        chart
    }

    /// Replaces every row by `rows`, as [`Chart::from_rows`] builds them, keeping the buffers.
    pub fn reset(&mut self, rows: &[Vec<Item>]) {
        // Stale stamps are harmless: a stamp only lets `add` skip the duplicate check when it
        // differs from the current row.
        self.truncate(0);
        rows.iter()
            .for_each(|row| self.push_raw(row, ByteSet::EMPTY));
    }

    /// Number of rows (1 + units consumed, for a chart from [`Chart::new`]).
    #[inline]
    pub fn num_rows(&self) -> usize {
        self.rows.len()
    }

    /// The items of row `r`.
    #[inline]
    pub fn row(&self, r: usize) -> &[Item] {
        let start = self.rows[r].start as usize;
        let end = self
            .rows
            .get(r + 1)
            .map_or(self.items.len(), |n| n.start as usize);
        &self.items[start..end]
    }

    /// The items of the last row.
    #[inline]
    pub fn last_row(&self) -> &[Item] {
        self.row(self.rows.len() - 1)
    }

    /// What may follow the [`EXT`] completions of row `r` (empty without any).
    #[inline]
    pub fn row_follow(&self, r: usize) -> &ByteSet {
        &self.rows[r].follow
    }

    /// Drops rows past the first `n`.
    #[inline]
    pub fn truncate(&mut self, n: usize) {
        if n < self.rows.len() {
            self.items.truncate(self.rows[n].start as usize);
            self.rows.truncate(n);
        }
    }

    /// Consumes a byte. `Ok(false)` (chart unchanged) if no item continues.
    pub fn push_byte(&mut self, prog: &Program, byte: u8) -> Result<bool, Overflow> {
        let class = prog.alphabet.class_of[byte as usize] as usize;
        let last = self.rows.len() - 1;
        let (lo, hi) = (self.rows[last].start as usize, self.items.len());
        self.open_row();
        for i in lo..hi {
            let it = self.items[i];
            let e = prog.entry(it.state, class);
            if e == DEAD {
                continue;
            }
            if e & MULTI == 0 {
                self.add(Item { state: e, ..it });
            } else {
                for &t in prog.targets(e) {
                    self.add(Item { state: t, ..it });
                }
            }
        }
        self.finish_row(prog)
    }

    /// Appends a row holding exactly `items`, without closing it: a row computed earlier on
    /// the same rows underneath, put back to continue from it.
    pub fn push_raw(&mut self, items: &[Item], follow: ByteSet) {
        self.rows.push(Row {
            start: self.items.len() as u32,
            follow,
        });
        self.items.extend_from_slice(items);
    }

    /// Consumes the special token with index `sid` in the program's special list.
    pub fn push_special(&mut self, prog: &Program, sid: u32) -> Result<bool, Overflow> {
        let last = self.rows.len() - 1;
        let (lo, hi) = (self.rows[last].start as usize, self.items.len());
        self.open_row();
        for i in lo..hi {
            let it = self.items[i];
            for &(s, t) in prog.specials_of(it.state) {
                if s == sid {
                    self.add(Item { state: t, ..it });
                }
            }
        }
        self.finish_row(prog)
    }

    /// Does the last row hold a complete parse of the start unit from row 0?
    pub fn is_accepting(&self, prog: &Program) -> bool {
        self.last_row().iter().any(|it| {
            it.origin == 0
                && prog.states[it.state as usize].unit == prog.start_unit
                && is_complete(prog, it)
        })
    }

    fn open_row(&mut self) {
        self.rows.push(Row {
            start: self.items.len() as u32,
            follow: ByteSet::EMPTY,
        });
    }

    fn finish_row(&mut self, prog: &Program) -> Result<bool, Overflow> {
        let start = self.rows.last().unwrap().start as usize;
        if self.items.len() == start {
            self.rows.pop();
            return Ok(false);
        }
        if let Err(e) = self.close(prog) {
            self.truncate(self.rows.len() - 1);
            return Err(e);
        }
        Ok(true)
    }

    #[inline]
    fn add(&mut self, it: Item) {
        let r = self.rows.len() as u32;
        let stamp = &mut self.stamp[it.state as usize];
        if *stamp != r {
            *stamp = r;
            self.items.push(it);
            return;
        }
        let start = self.rows.last().unwrap().start as usize;
        if !self.items[start..].contains(&it) {
            self.items.push(it);
        }
    }

    /// Predictions and completions in the last row, until nothing new appears.
    fn close(&mut self, prog: &Program) -> Result<(), Overflow> {
        let here = (self.rows.len() - 1) as u32;
        let start = self.rows[here as usize].start as usize;
        let mut work = 0usize;
        let mut i = start;
        while i < self.items.len() {
            let it = self.items[i];
            i += 1;
            let st = prog.states[it.state as usize];
            if st.flags & (CALLS | FINAL) == 0 {
                continue;
            }
            if st.flags & COUNTED != 0 {
                let c = prog.units[st.unit as usize].counted.expect("counted state");
                if c.can_iterate(it.count) {
                    let body = prog.units[c.body as usize].start;
                    self.add(Item {
                        state: body,
                        origin: here,
                        count: 0,
                    });
                }
            } else if st.flags & CALLS != 0 {
                for call in prog.calls_of(it.state) {
                    let callee = &prog.units[call.unit as usize];
                    self.add(Item {
                        state: callee.start,
                        origin: here,
                        count: 0,
                    });
                    if callee.nullable {
                        self.add(Item {
                            state: call.ret,
                            origin: it.origin,
                            count: it.count,
                        });
                    }
                }
            }
            if is_complete(prog, &it) {
                match it.origin {
                    EXT => {
                        let row = &mut self.rows[here as usize];
                        row.follow = row.follow.union(&prog.follow[st.unit as usize]);
                    }
                    o if o == here => {}
                    o => work += self.complete(prog, st.unit, o as usize),
                }
            }
            let size = self.items.len() - start;
            if size > self.limits.max_items {
                return Err(Overflow(LimitExceeded {
                    kind: LimitKind::Readings,
                    value: size as u64,
                    max: self.limits.max_items as u64,
                }));
            }
            if work > self.limits.max_work {
                return Err(Overflow(LimitExceeded {
                    kind: LimitKind::MaskWork,
                    value: work as u64,
                    max: self.limits.max_work as u64,
                }));
            }
        }
        Ok(())
    }

    /// Advances the items of row `origin` waiting for `unit`; returns the work done.
    fn complete(&mut self, prog: &Program, unit: u32, origin: usize) -> usize {
        let lo = self.rows[origin].start as usize;
        let hi = self.rows[origin + 1].start as usize;
        for w in lo..hi {
            let wi = self.items[w];
            let ws = prog.states[wi.state as usize];
            if ws.flags & CALLS == 0 {
                continue;
            }
            if ws.flags & COUNTED != 0 {
                let c = prog.units[ws.unit as usize].counted.expect("counted state");
                if c.body == unit && c.can_iterate(wi.count) {
                    self.add(Item {
                        count: c.inc(wi.count),
                        ..wi
                    });
                }
            } else {
                for call in prog.calls_of(wi.state) {
                    if call.unit == unit {
                        self.add(Item {
                            state: call.ret,
                            origin: wi.origin,
                            count: wi.count,
                        });
                    }
                }
            }
        }
        hi - lo + 1
    }
}

/// Has the item's unit derived a complete string here?
#[inline]
pub(crate) fn is_complete(prog: &Program, it: &Item) -> bool {
    let st = &prog.states[it.state as usize];
    if st.flags & COUNTED != 0 {
        prog.units[st.unit as usize]
            .counted
            .expect("counted state")
            .complete(it.count)
    } else {
        st.flags & FINAL != 0
    }
}
