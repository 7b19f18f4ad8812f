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

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use super::program::{Counted, Program, CALLS, COUNTED, DEAD, FINAL, MULTI, RELAXED};
use crate::base::byteset::ByteSet;
use crate::ir::StructHasher;
use crate::limits::{Budget, LimitExceeded};

/// Why a step of the parse (a byte, a token, a mask) stopped short, with the chart as before
/// it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Halt {
    /// A limit of the call ([`Budget`]).
    Limit(LimitExceeded),
    /// The step predicts these units, which the program does not have yet: once they are
    /// built (`CfgGrammar::build`), the step is taken again on the new program.
    Unbuilt(Vec<u32>),
}

impl From<LimitExceeded> for Halt {
    fn from(e: LimitExceeded) -> Halt {
        Halt::Limit(e)
    }
}

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

/// Items a row may hold before [`Chart::add`] finds an item's peers through a hash index
/// instead of a scan of the row.
const LINEAR_ROW: usize = 32;

/// (row, unit) pairs whose waiting items [`Chart::waiting`] remembers before starting again.
const MAX_WAITING_MEMO: usize = 1 << 14;
const WAITING_DOMAIN: u64 = 0x6366_6777_6169_7401;
const ORIGIN_DOMAIN: u64 = 0x6366_676f_7269_6701;
/// Stands for the start of the input in row 0's waiting set of the start unit.
const START_MARK: u128 = 0x5354_4152_545f_4d41_524b_0000_0000_0001;

/// Earley rows over one program.
#[derive(Clone, Debug)]
pub(crate) struct Chart {
    items: Vec<Item>,
    /// Where each row starts in `items`.
    starts: Vec<u32>,
    /// The rows where items of origin [`EXT`] completed, in row order, with the bytes that may
    /// follow their units ([`Program::follow`]): past such a completion, the unknown context
    /// may take the next byte only if it is one of these. Only the charts of cached
    /// classifications have such items, so a live chart's rows cost no set each.
    follows: Vec<(u32, ByteSet)>,
    /// Per state, the row number (rows.len()) that last added an item in it: a cheap filter
    /// before the exact duplicate check.
    stamp: Vec<u32>,
    /// The last row's items by state and context ([`Chart::context`]), once it is past
    /// [`LINEAR_ROW`] items.
    index: FxHashMap<(u32, u128), SmallVec<[u32; 2]>>,
    /// Work done by [`Chart::add`] (items compared, rows hashed) not charged to a budget yet.
    uncharged: u64,
    indexed: bool,
    /// A number for each row, new each time a row is pushed, so what is remembered of a row
    /// (its waiting items) is known to be about the same row.
    gens: Vec<u32>,
    next_gen: u32,
    /// [`Chart::waiting`] by (row, unit), with the row's number when computed.
    waiting_memo: FxHashMap<(u32, u32), (u32, u128)>,
    /// Where the closure of the last row has got to: an item before it that changes is
    /// processed again.
    closed_to: usize,
    revisit: Vec<usize>,
    /// Closed rows of more than [`LINEAR_ROW`] items that a completion advanced, by row: the
    /// row's number when indexed and its items waiting for each unit, as sorted `(unit, item)`
    /// pairs. A completion into such a row looks only at the items waiting for its unit:
    /// scanning the whole row each time made a row of thousands of predictions (nested
    /// counted repeats) cost its size once per item completed into it.
    waiters: FxHashMap<u32, (u32, Vec<(u32, u32)>)>,
    /// Pairs held in `waiters` (kept no larger than the chart's items).
    waiters_len: usize,
    /// Units the row being closed predicts that are not built yet.
    unbuilt: Vec<u32>,
}

impl Chart {
    /// The chart before any input: the start unit predicted in row 0.
    pub fn new(prog: &Program, budget: &Budget) -> Result<Chart, Halt> {
        let mut chart = Chart::from_rows(prog, &[]);
        chart.open_row(ByteSet::EMPTY);
        chart.add(
            prog,
            Item {
                state: prog.units[prog.start_unit as usize].start,
                origin: 0,
                count: 0,
            },
        );
        chart.close(prog, budget)?;
        Ok(chart)
    }

    /// A chart holding exactly `rows`, not closed: a cached classification's item with the
    /// callers it completes into (see `cache/`).
    pub fn from_rows(prog: &Program, rows: &[Vec<Item>]) -> Chart {
        let mut chart = Chart {
            items: Vec::new(),
            starts: Vec::new(),
            follows: Vec::new(),
            stamp: vec![0; prog.states.len()],
            index: FxHashMap::default(),
            uncharged: 0,
            indexed: false,
            gens: Vec::new(),
            next_gen: 0,
            waiting_memo: FxHashMap::default(),
            closed_to: 0,
            revisit: Vec::new(),
            waiters: FxHashMap::default(),
            waiters_len: 0,
            unbuilt: Vec::new(),
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

    /// Number of rows (1 + units consumed, for a chart from [`Chart::new`], less the rows
    /// [`Chart::forget_below`] dropped).
    #[inline]
    pub fn num_rows(&self) -> usize {
        self.starts.len()
    }

    /// The items of row `r`.
    #[inline]
    pub fn row(&self, r: usize) -> &[Item] {
        let start = self.starts[r] as usize;
        let end = self
            .starts
            .get(r + 1)
            .map_or(self.items.len(), |&n| n as usize);
        &self.items[start..end]
    }

    /// The items of the last row.
    #[inline]
    pub fn last_row(&self) -> &[Item] {
        self.row(self.starts.len() - 1)
    }

    /// What may follow the [`EXT`] completions of row `r` (empty without any).
    #[inline]
    pub fn row_follow(&self, r: usize) -> &ByteSet {
        match self.follows.last() {
            Some((last, follow)) if *last as usize == r => follow,
            _ => match self.follows.binary_search_by_key(&(r as u32), |f| f.0) {
                Ok(i) => &self.follows[i].1,
                Err(_) => &ByteSet::EMPTY,
            },
        }
    }

    /// Drops rows past the first `n`.
    #[inline]
    pub fn truncate(&mut self, n: usize) {
        if n < self.starts.len() {
            self.items.truncate(self.starts[n] as usize);
            self.starts.truncate(n);
            self.gens.truncate(n);
            while self.follows.last().is_some_and(|f| f.0 as usize >= n) {
                self.follows.pop();
            }
        }
    }

    /// Drops the rows below `boundary` that nothing at or above it reaches through origins,
    /// and in those it keeps, the items that wait for no unit (only the last row scans, and a
    /// completion only looks for waiting items): the rows a long sequence no longer needs.
    /// The rest are renumbered; returns how many rows went (rows at or above `boundary` move
    /// down by that much).
    pub fn forget_below(&mut self, prog: &Program, boundary: usize) -> usize {
        let n = self.starts.len();
        if boundary == 0 || boundary >= n {
            return 0;
        }
        let mut live = vec![false; boundary];
        let reach = |live: &mut [bool], o: u32| {
            if o != EXT && (o as usize) < boundary {
                live[o as usize] = true;
            }
        };
        for it in &self.items[self.starts[boundary] as usize..] {
            reach(&mut live, it.origin);
        }
        // An item's origin is at most its own row, so one pass downwards closes the set.
        for r in (0..boundary).rev() {
            if live[r] {
                let waiting = self
                    .row(r)
                    .iter()
                    .filter(|it| prog.state(it.state).flags & CALLS != 0);
                let origins: SmallVec<[u32; 8]> = waiting.map(|it| it.origin).collect();
                origins.into_iter().for_each(|o| reach(&mut live, o));
            }
        }
        let kept = live.iter().filter(|&&l| l).count();
        let dropped = boundary - kept;
        if dropped == 0 {
            return 0;
        }
        let mut renumbered = vec![u32::MAX; n];
        let mut next = 0u32;
        for r in 0..n {
            if r >= boundary || live[r] {
                renumbered[r] = next;
                next += 1;
            }
        }
        let origin = |o: u32| match o {
            EXT => EXT,
            o => renumbered[o as usize],
        };
        let mut items = Vec::with_capacity(self.items.len());
        let mut starts = Vec::with_capacity(n - dropped);
        for r in (0..n).filter(|&r| renumbered[r] != u32::MAX) {
            starts.push(items.len() as u32);
            for it in self.row(r) {
                if r >= boundary || prog.state(it.state).flags & CALLS != 0 {
                    items.push(Item {
                        origin: origin(it.origin),
                        ..*it
                    });
                }
            }
        }
        self.follows.retain_mut(|(r, _)| {
            *r = renumbered[*r as usize];
            *r != u32::MAX
        });
        self.items = items;
        self.starts = starts;
        self.gens = (0..self.starts.len())
            .map(|_| {
                self.next_gen = self.next_gen.wrapping_add(1);
                self.next_gen
            })
            .collect();
        self.index.clear();
        self.indexed = false;
        self.waiters.clear();
        self.waiters_len = 0;
        dropped
    }

    /// Consumes a byte. `Ok(false)` (chart unchanged) if no item continues; an error (chart
    /// unchanged) past the budget.
    pub fn push_byte(&mut self, prog: &Program, byte: u8, budget: &Budget) -> Result<bool, Halt> {
        let class = prog.alphabet.class_of[byte as usize] as usize;
        let last = self.starts.len() - 1;
        let (lo, hi) = (self.starts[last] as usize, self.items.len());
        budget.spend((hi - lo) as u64)?;
        self.open_row(ByteSet::EMPTY);
        for i in lo..hi {
            let it = self.items[i];
            let e = prog.entry(it.state, class);
            if e == DEAD {
                continue;
            }
            if e & MULTI == 0 {
                self.add(prog, Item { state: e, ..it });
            } else {
                for &t in prog.targets(e) {
                    self.add(prog, Item { state: t, ..it });
                }
            }
        }
        self.finish_row(prog, budget)
    }

    /// Appends a row holding exactly `items`, without closing it: a row computed earlier on
    /// the same rows underneath, put back to continue from it.
    pub fn push_raw(&mut self, items: &[Item], follow: ByteSet) {
        self.open_row(follow);
        self.items.extend_from_slice(items);
    }

    /// Consumes the special token with index `sid` in the program's special list.
    pub fn push_special(
        &mut self,
        prog: &Program,
        sid: u32,
        budget: &Budget,
    ) -> Result<bool, Halt> {
        let last = self.starts.len() - 1;
        let (lo, hi) = (self.starts[last] as usize, self.items.len());
        budget.spend((hi - lo) as u64)?;
        self.open_row(ByteSet::EMPTY);
        for i in lo..hi {
            let it = self.items[i];
            for &(s, t) in prog.specials_of(it.state) {
                if s == sid {
                    self.add(prog, Item { state: t, ..it });
                }
            }
        }
        self.finish_row(prog, budget)
    }

    /// Does the last row hold a complete parse of the start unit from row 0?
    pub fn is_accepting(&self, prog: &Program) -> bool {
        self.last_row().iter().any(|it| {
            it.origin == 0
                && prog.states[it.state as usize].unit == prog.start_unit
                && is_complete(prog, it)
        })
    }

    fn open_row(&mut self, follow: ByteSet) {
        if !follow.is_empty() {
            self.follows.push((self.starts.len() as u32, follow));
        }
        self.starts.push(self.items.len() as u32);
        self.next_gen = self.next_gen.wrapping_add(1);
        self.gens.push(self.next_gen);
        if self.indexed {
            self.index.clear();
            self.indexed = false;
        }
        self.closed_to = self.items.len();
        self.revisit.clear();
    }

    fn finish_row(&mut self, prog: &Program, budget: &Budget) -> Result<bool, Halt> {
        let last = self.starts.len() - 1;
        if self.items.len() == self.starts[last] as usize {
            self.truncate(last);
            return Ok(false);
        }
        if let Err(e) = self.close(prog, budget) {
            self.truncate(last);
            return Err(e);
        }
        Ok(true)
    }

    /// Adds `it` to the last row unless the row holds an item that can do all it can:
    ///
    /// - the same item;
    /// - the same state in a unit entered from an earlier row whose items waiting for that unit
    ///   are the same as those of `it`'s origin row: completing either advances the same
    ///   items, so one stands for both. In `[a-z]{0,3000}[a-z]{0,3000}` the second loop is
    ///   entered after every letter, each time from a row holding the same caller: without
    ///   this every row held an item per letter read;
    /// - a counted item of the same state and context whose count is lower, with both counts
    ///   at least the loop's minimum: it ends the loop wherever `it` could and has more
    ///   iterations left (an ambiguous body, `(a|aa){0,5000}`, left an item per reachable
    ///   count in every row). A new item that dominates an old one this way takes its place.
    fn add(&mut self, prog: &Program, it: Item) {
        let r = self.starts.len() as u32;
        if it.state as usize >= self.stamp.len() {
            // Units built since the chart was made (rows start at 1: 0 is "never").
            self.stamp.resize(prog.states.len(), 0);
        }
        let stamp = &mut self.stamp[it.state as usize];
        if *stamp != r {
            *stamp = r;
            self.push_item(prog, it);
            return;
        }
        let here = self.starts.len() - 1;
        let start = self.starts[here] as usize;
        if !self.indexed && self.items.len() - start > LINEAR_ROW {
            for at in start..self.items.len() {
                let x = self.items[at];
                let key = (x.state, self.context(prog, &x));
                self.index.entry(key).or_default().push(at as u32);
            }
            self.indexed = true;
        }
        // The items that may stand for `it`: of its state, entered from the same callers.
        let peers: SmallVec<[u32; 8]> = match self.indexed {
            true => {
                let key = (it.state, self.context(prog, &it));
                self.index
                    .get(&key)
                    .map_or(SmallVec::new(), |v| v.iter().copied().collect())
            }
            false => {
                let same_state: SmallVec<[u32; 8]> = (start..self.items.len())
                    .filter(|&i| self.items[i].state == it.state)
                    .map(|i| i as u32)
                    .collect();
                match same_state
                    .iter()
                    .all(|&at| self.items[at as usize].origin == it.origin)
                {
                    true => same_state,
                    false => {
                        let mine = self.context(prog, &it);
                        same_state
                            .into_iter()
                            .filter(|&at| {
                                let old = self.items[at as usize];
                                old.origin == it.origin || self.context(prog, &old) == mine
                            })
                            .collect()
                    }
                }
            }
        };
        self.uncharged += peers.len() as u64;
        let bounds = counted_bounds(prog, &it);
        for at in peers {
            let at = at as usize;
            let old = self.items[at];
            if old.count == it.count {
                return;
            }
            let Some(c) = bounds else { continue };
            if old.count == RELAXED || old.count < c.min || it.count < c.min {
                continue;
            }
            if old.count < it.count {
                return;
            }
            // The new item dominates the old one: it takes its place. Its only effect the old
            // one may not have had is starting another iteration.
            self.items[at].count = it.count;
            if at < self.closed_to && c.can_iterate(it.count) && !c.can_iterate(old.count) {
                self.revisit.push(at);
            }
            return;
        }
        self.push_item(prog, it);
    }

    #[inline]
    fn push_item(&mut self, prog: &Program, it: Item) {
        if self.indexed {
            let at = self.items.len() as u32;
            let key = (it.state, self.context(prog, &it));
            self.index.entry(key).or_default().push(at);
        }
        self.items.push(it);
    }

    /// What completing `it`'s unit advances: the waiting items of its origin row when that
    /// row is closed ([`Chart::waiting`]), else its origin itself (the last row's waiting items
    /// may still grow; an unknown context is its own).
    fn context(&mut self, prog: &Program, it: &Item) -> u128 {
        let here = self.starts.len() - 1;
        match it.origin {
            EXT => StructHasher::new(ORIGIN_DOMAIN).word(u64::MAX).finish(),
            o if o as usize >= here => StructHasher::new(ORIGIN_DOMAIN).word(o as u64).finish(),
            o => self.waiting(prog, o, prog.state(it.state).unit),
        }
    }

    /// A hash of the items of (closed) row `row` waiting for `unit`, as a set: what completing
    /// an item of `unit` from that row advances. Row 0 also marks the start unit, which a
    /// complete parse of the input reads there.
    fn waiting(&mut self, prog: &Program, row: u32, unit: u32) -> u128 {
        let gen = self.gens[row as usize];
        if let Some(&(g, h)) = self.waiting_memo.get(&(row, unit)) {
            if g == gen {
                return h;
            }
        }
        if self.waiting_memo.len() >= MAX_WAITING_MEMO {
            self.waiting_memo.clear();
        }
        self.uncharged += self.row(row as usize).len() as u64;
        let mut sum = match row == 0 && unit == prog.start_unit {
            true => START_MARK,
            false => 0,
        };
        for w in self.row(row as usize) {
            if waits_for(prog, w, unit) {
                let h = StructHasher::new(WAITING_DOMAIN)
                    .word(u64::from(w.state) << 32 | u64::from(w.origin))
                    .word(u64::from(w.count))
                    .finish();
                // A set: the sum does not depend on the order.
                sum = sum.wrapping_add(h);
            }
        }
        self.waiting_memo.insert((row, unit), (gen, sum));
        sum
    }

    /// Predictions and completions in the last row, until nothing new appears. One unit of
    /// work per item processed and per item a completion looks at; an error past the budget
    /// or when the row holds more items than the readings allowed.
    ///
    /// A unit it would predict that is not built yet is left out and named in the error
    /// ([`Halt::Unbuilt`], with every such unit of the row) once the row is otherwise closed.
    fn close(&mut self, prog: &Program, budget: &Budget) -> Result<(), Halt> {
        self.unbuilt.clear();
        let here = (self.starts.len() - 1) as u32;
        let start = self.starts[here as usize] as usize;
        let mut i = start;
        loop {
            let at = match self.revisit.pop() {
                Some(at) => at,
                None if i < self.items.len() => {
                    i += 1;
                    self.closed_to = i;
                    i - 1
                }
                None => break,
            };
            budget.spend(1 + std::mem::take(&mut self.uncharged))?;
            budget.readings(self.items.len() - start)?;
            let it = self.items[at];
            let st = prog.states[it.state as usize];
            if st.flags & (CALLS | FINAL) == 0 {
                continue;
            }
            if st.flags & COUNTED != 0 {
                let c = counted(prog, st.unit);
                if !prog.units[c.body as usize].is_built() {
                    self.unbuilt.push(c.body);
                } else if c.can_iterate(it.count) {
                    let body = prog.units[c.body as usize].start;
                    self.add(
                        prog,
                        Item {
                            state: body,
                            origin: here,
                            count: 0,
                        },
                    );
                }
            } else if st.flags & CALLS != 0 {
                for call in prog.calls_of(it.state) {
                    let callee = &prog.units[call.unit as usize];
                    if !callee.is_built() {
                        self.unbuilt.push(call.unit);
                        continue;
                    }
                    self.add(
                        prog,
                        Item {
                            state: callee.start,
                            origin: here,
                            count: 0,
                        },
                    );
                    if callee.nullable {
                        self.add(
                            prog,
                            Item {
                                state: call.ret,
                                origin: it.origin,
                                count: it.count,
                            },
                        );
                    }
                }
            }
            if is_complete(prog, &it) {
                match it.origin {
                    EXT => {
                        let follow = &prog.follow[st.unit as usize];
                        match self.follows.last_mut() {
                            Some((r, f)) if *r == here => *f = f.union(follow),
                            _ => self.follows.push((here, *follow)),
                        }
                    }
                    o if o == here => {}
                    o => self.complete(prog, st.unit, o as usize, budget)?,
                }
            }
        }
        budget.spend(std::mem::take(&mut self.uncharged))?;
        budget.readings(self.items.len() - start)?;
        if self.unbuilt.is_empty() {
            return Ok(());
        }
        let mut unbuilt = std::mem::take(&mut self.unbuilt);
        unbuilt.sort_unstable();
        unbuilt.dedup();
        Err(Halt::Unbuilt(unbuilt))
    }

    /// Advances the items of row `origin` waiting for `unit`.
    fn complete(
        &mut self,
        prog: &Program,
        unit: u32,
        origin: usize,
        budget: &Budget,
    ) -> Result<(), Halt> {
        let lo = self.starts[origin] as usize;
        let hi = self.starts[origin + 1] as usize;
        if hi - lo <= LINEAR_ROW {
            budget.spend((hi - lo) as u64)?;
            (lo..hi).for_each(|w| self.advance(prog, w, unit));
            return Ok(());
        }
        let waiting = self.waiting_items(prog, origin, unit, budget)?;
        waiting
            .into_iter()
            .for_each(|w| self.advance(prog, w as usize, unit));
        Ok(())
    }

    /// The items of closed row `row` (past [`LINEAR_ROW`] items) waiting for `unit`, through
    /// [`Chart::waiters`]: indexing a row costs its size once.
    fn waiting_items(
        &mut self,
        prog: &Program,
        row: usize,
        unit: u32,
        budget: &Budget,
    ) -> Result<SmallVec<[u32; 8]>, LimitExceeded> {
        let gen = self.gens[row];
        let fresh = matches!(self.waiters.get(&(row as u32)), Some((g, _)) if *g == gen);
        if !fresh {
            let (lo, hi) = (self.starts[row] as usize, self.starts[row + 1] as usize);
            budget.spend((hi - lo) as u64)?;
            let mut pairs: Vec<(u32, u32)> = Vec::new();
            for w in lo..hi {
                let wi = self.items[w];
                let ws = prog.state(wi.state);
                if ws.flags & CALLS == 0 {
                    continue;
                }
                if ws.flags & COUNTED != 0 {
                    let c = counted(prog, ws.unit);
                    if c.can_iterate(wi.count) {
                        pairs.push((c.body, w as u32));
                    }
                } else {
                    pairs.extend(prog.calls_of(wi.state).iter().map(|c| (c.unit, w as u32)));
                }
            }
            pairs.sort_unstable();
            pairs.dedup();
            if self.waiters_len + pairs.len() > self.items.len() {
                self.waiters.clear();
                self.waiters_len = 0;
            }
            self.waiters_len += pairs.len();
            if let Some((_, stale)) = self.waiters.insert(row as u32, (gen, pairs)) {
                self.waiters_len -= stale.len();
            }
        }
        let pairs = &self.waiters[&(row as u32)].1;
        let from = pairs.partition_point(|&(u, _)| u < unit);
        let found: SmallVec<[u32; 8]> = pairs[from..]
            .iter()
            .take_while(|&&(u, _)| u == unit)
            .map(|&(_, w)| w)
            .collect();
        budget.spend(1 + found.len() as u64)?;
        Ok(found)
    }

    /// Advances item `w` (of a closed row) past its unit `unit` if it waits for it.
    fn advance(&mut self, prog: &Program, w: usize, unit: u32) {
        let wi = self.items[w];
        let ws = prog.states[wi.state as usize];
        if ws.flags & CALLS == 0 {
            return;
        }
        if ws.flags & COUNTED != 0 {
            let c = counted(prog, ws.unit);
            if c.body == unit && c.can_iterate(wi.count) {
                self.add(
                    prog,
                    Item {
                        count: c.inc(wi.count),
                        ..wi
                    },
                );
            }
        } else {
            for call in prog.calls_of(wi.state) {
                if call.unit == unit {
                    self.add(
                        prog,
                        Item {
                            state: call.ret,
                            origin: wi.origin,
                            count: wi.count,
                        },
                    );
                }
            }
        }
    }
}

/// The bounds of a counted unit. Only called for a counted state (`COUNTED` is set exactly on
/// the single state of each counted unit, whose `counted` the compiler fills in).
#[inline]
fn counted(prog: &Program, unit: u32) -> Counted {
    prog.units[unit as usize].counted.expect("counted state")
}

/// The bounds of `it`'s loop if it is a counted item with a real count (not [`RELAXED`]).
#[inline]
fn counted_bounds(prog: &Program, it: &Item) -> Option<Counted> {
    let st = prog.state(it.state);
    (st.flags & COUNTED != 0 && it.count != RELAXED).then(|| counted(prog, st.unit))
}

/// Is `w` waiting in its row for `unit` to complete?
pub(crate) fn waits_for(prog: &Program, w: &Item, unit: u32) -> bool {
    let st = prog.state(w.state);
    if st.flags & CALLS == 0 {
        return false;
    }
    if st.flags & COUNTED != 0 {
        let c = counted(prog, st.unit);
        c.body == unit && c.can_iterate(w.count)
    } else {
        prog.calls_of(w.state).iter().any(|c| c.unit == unit)
    }
}

/// Has the item's unit derived a complete string here?
#[inline]
pub(crate) fn is_complete(prog: &Program, it: &Item) -> bool {
    let st = &prog.states[it.state as usize];
    if st.flags & COUNTED != 0 {
        counted(prog, st.unit).complete(it.count)
    } else {
        st.flags & FINAL != 0
    }
}
