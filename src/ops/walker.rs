//! The cursor: where in an operator program the output so far can be.
//!
//! A *thread* is a stack of frames from the root to a leaf: `Seq` frames remember which child
//! runs, `DoWhile` frames count rounds, and the top frame is always a leaf in a state that can
//! consume a unit (or the stack is empty: the program has ended). A cursor is the set of
//! threads the input allows — usually one; several while an `IfElse` or a `DoWhile` has not yet
//! been decided by the input. Stepping a unit is O(depth) per thread, no allocation while
//! threads fit inline.
//!
//! Entering operators (the closure after a leaf exits) runs on an explicit task stack, never on
//! the call stack: a sequence of ten thousand nullable parts closes like any other. Past a few
//! dozen tasks the closure remembers the (task, thread) pairs it ran, so alternatives that
//! reconverge (a sequence of optional branches) cost their distinct states, not their paths.
//!
//! The thread set is kept small without changing the language it stands for: threads that
//! differ only in where a `DoWhile` round began (once it consumed something) are one, and a
//! thread that differs from another only in `DoWhile` counts, each at least its `min` and no
//! larger than the other's, is dropped: the other can do everything it can (see [`prune`]).
//! That is what keeps `(a|aa){0,5000}` or `[a-z]{0,3000}[a-z]{0,3000}` at two threads instead
//! of one per position.

use std::cell::RefCell;
use std::hash::{Hash, Hasher};

use rustc_hash::{FxHashMap, FxHashSet, FxHasher};
use smallvec::SmallVec;

use super::leaf::DEAD;
use super::program::{Op, OpId, Program, UNBOUNDED};
use crate::ir::StructHasher;
use crate::limits::{Budget, LimitExceeded};

/// Work units a thread stepped or a closure task costs: copying and hashing a thread cost
/// about as much as visiting 4 nodes of the token trie (measured on the replays of
/// `([a-z]{0,2500}b?){0,3}`: ~60 ns per task or thread step; trie nodes ~5-20 ns each).
pub(crate) const THREAD_WORK: u64 = 4;

/// One frame of a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Frame {
    /// The operator.
    pub op: u32,
    /// Leaf: automaton state. Seq: running child index. DoWhile: input position when the
    /// current round began, or [`ROUND_CONSUMED`] once the round has consumed a unit (a round
    /// that consumed nothing does not count and cannot loop).
    pub state: u32,
    /// DoWhile: rounds completed (saturated at `min` when unbounded).
    pub count: u32,
}

/// A `DoWhile` frame's state once its round has consumed a unit: where the round began no
/// longer matters (only "nothing consumed yet" does), so threads that differ only there
/// compare equal.
pub(crate) const ROUND_CONSUMED: u32 = u32::MAX;

/// One reading of the input: frames root → leaf, and how many units it consumed.
#[derive(Debug, PartialEq, Eq, Hash)]
pub(crate) struct Thread {
    pub frames: SmallVec<[Frame; 8]>,
    pub pos: u32,
}

// Frames are `Copy`: copied as one block, not frame by frame as `SmallVec`'s `Clone` does.
// Stepping copies a thread at every byte, and a replay copies whole thread lists into reused
// slots (`clone_from`).
impl Clone for Thread {
    fn clone(&self) -> Thread {
        Thread {
            frames: SmallVec::from_slice(&self.frames),
            pos: self.pos,
        }
    }

    fn clone_from(&mut self, source: &Thread) {
        self.frames.clear();
        self.frames.extend_from_slice(&source.frames);
        self.pos = source.pos;
    }
}

impl Thread {
    pub fn is_end(&self) -> bool {
        self.frames.is_empty()
    }

    /// The leaf frame. Only called on threads that have not ended (every thread of a cursor
    /// either ended, checked with [`Thread::is_end`] first, or stands in a leaf).
    pub fn top(&self) -> Frame {
        *self.frames.last().expect("thread has a leaf frame")
    }
}

/// Every reading of the input so far.
pub(crate) type Threads = SmallVec<[Thread; 1]>;

/// A step of the closure: what to do with the thread it is paired with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Task {
    /// Enter the operator on top of the thread's frames.
    Enter(OpId),
    /// The `DoWhile` frame on top is between rounds: start another and/or leave.
    Boundary,
    /// The operator above the top frame completed: continue its parent.
    Finish,
    /// The leaf `op` (its frame already popped) took exit `exit`: run what follows it.
    Exit { op: u32, exit: u32 },
    /// The thread stands in a leaf (or at the end): it is a result.
    Emit,
}

/// Tasks a closure runs before it starts remembering them (below that, duplicates are cheaper
/// than hashing threads).
const UNREMEMBERED_TASKS: usize = 64;

#[derive(Default)]
struct Closure {
    stack: Vec<(Task, Thread)>,
    /// The tasks run, by a 128-bit hash of the task and its thread (a thread is not copied
    /// to be remembered).
    seen: FxHashSet<u128>,
    ran: usize,
}

/// A 128-bit name of a task and its thread (equal for equal pairs; a collision, ~2^-128 per
/// pair, would drop a task).
fn task_key(task: Task, thread: &Thread) -> u128 {
    let (tag, a, b) = match task {
        Task::Enter(op) => (0, op.0, 0),
        Task::Boundary => (1, 0, 0),
        Task::Finish => (2, 0, 0),
        Task::Exit { op, exit } => (3, op, exit),
        Task::Emit => (4, 0, 0),
    };
    let mut h = StructHasher::new(0x7461_736b);
    h.word(tag << 32 | u64::from(thread.pos))
        .word(u64::from(a) << 32 | u64::from(b));
    for f in &thread.frames {
        h.word(u64::from(f.op) << 32 | u64::from(f.state))
            .word(u64::from(f.count));
    }
    h.finish()
}

/// A unit on the leaf on top of a thread.
enum TopStep {
    /// The leaf rejects it.
    Dead,
    /// The leaf takes it and cannot end there: the thread stays, no closure to run.
    Stays(u32),
    /// The leaf may end after it: the closure decides.
    MayExit,
}

/// Walks programs: closure (entering operators until a leaf can consume) and stepping.
pub(crate) struct Walker<'p> {
    pub program: &'p Program,
    closure: RefCell<Closure>,
}

impl<'p> Walker<'p> {
    pub fn new(program: &'p Program) -> Walker<'p> {
        Walker {
            program,
            closure: RefCell::default(),
        }
    }

    /// The threads at the start of the program.
    pub fn initial(&self, budget: &Budget) -> Result<Threads, LimitExceeded> {
        let mut out = Threads::new();
        let thread = Thread {
            frames: SmallVec::new(),
            pos: 0,
        };
        self.close(
            [(Task::Enter(self.program.root), thread)].into_iter(),
            &mut out,
            budget,
        )?;
        prune(self.program, &mut out, budget)?;
        budget.readings(out.len())?;
        Ok(out)
    }

    /// Runs `seeds` (first one first) and everything they lead to, depth first, pushing every
    /// thread that reaches a consuming leaf (or the program's end) to `out`. [`THREAD_WORK`]
    /// per task.
    fn close(
        &self,
        seeds: impl DoubleEndedIterator<Item = (Task, Thread)>,
        out: &mut Threads,
        budget: &Budget,
    ) -> Result<(), LimitExceeded> {
        let mut guard = self.closure.borrow_mut();
        let closure = &mut *guard;
        closure.stack.clear();
        closure.stack.extend(seeds.rev());
        while let Some((task, thread)) = closure.stack.pop() {
            budget.spend(THREAD_WORK)?;
            closure.ran += 1;
            if closure.ran > UNREMEMBERED_TASKS && !closure.seen.insert(task_key(task, &thread)) {
                continue;
            }
            self.run(task, thread, &mut closure.stack, out);
        }
        Ok(())
    }

    /// Forgets the tasks remembered by earlier closures (each step is a new position).
    fn forget(&self) {
        let mut closure = self.closure.borrow_mut();
        closure.seen.clear();
        closure.ran = 0;
    }

    /// One task: pushes the tasks it leads to on `stack` (last to run first) or the thread to
    /// `out`.
    // Long: one match over the task kinds of the cursor's explicit-stack interpreter (enter,
    // exit, boundary, finish), each with an arm per operator; every arm pushes onto the same
    // task stack and output.
    fn run(
        &self,
        task: Task,
        mut thread: Thread,
        stack: &mut Vec<(Task, Thread)>,
        out: &mut Threads,
    ) {
        let program = self.program;
        match task {
            Task::Emit => out.push(thread),
            Task::Enter(op) => match program.op(op) {
                Op::Leaf { leaf, .. } => {
                    let start = leaf.start();
                    if leaf.has_out(start) {
                        let mut inside = thread.clone();
                        inside.frames.push(Frame {
                            op: op.0,
                            state: start,
                            count: 0,
                        });
                        stack.push((Task::Emit, inside));
                    }
                    if let Some(exit) = leaf.exit(start) {
                        stack.push((Task::Exit { op: op.0, exit }, thread));
                    }
                }
                Op::Seq(children) => match children.first() {
                    None => stack.push((Task::Finish, thread)),
                    Some(&first) => {
                        thread.frames.push(Frame {
                            op: op.0,
                            state: 0,
                            count: 0,
                        });
                        stack.push((Task::Enter(first), thread));
                    }
                },
                Op::IfElse(branches) => {
                    for &b in branches.iter().rev() {
                        stack.push((Task::Enter(b), thread.clone()));
                    }
                }
                Op::DoWhile { .. } => {
                    thread.frames.push(Frame {
                        op: op.0,
                        state: thread.pos,
                        count: 0,
                    });
                    stack.push((Task::Boundary, thread));
                }
            },
            Task::Boundary => {
                let f = thread.top();
                let Op::DoWhile { body, min, max } = *program.op(OpId(f.op)) else {
                    unreachable!("a Boundary task has a DoWhile frame on top")
                };
                if f.count >= min || program.info(body.0).nullable {
                    let mut leave = thread.clone();
                    leave.frames.pop();
                    stack.push((Task::Finish, leave));
                }
                if f.count < max {
                    if let Some(top) = thread.frames.last_mut() {
                        top.state = thread.pos;
                    }
                    stack.push((Task::Enter(body), thread));
                }
            }
            Task::Exit { op, exit } => {
                let Op::Leaf { then, .. } = program.op(OpId(op)) else {
                    unreachable!("an Exit task names a leaf")
                };
                match then.get(exit as usize).copied().flatten() {
                    Some(body) => stack.push((Task::Enter(body), thread)),
                    None => stack.push((Task::Finish, thread)),
                }
            }
            Task::Finish => {
                let pos = thread.pos;
                let Some(parent) = thread.frames.last_mut() else {
                    out.push(thread);
                    return;
                };
                match program.op(OpId(parent.op)) {
                    Op::Seq(children) => {
                        let next = parent.state as usize + 1;
                        if next + 1 == children.len() {
                            // The last child runs in the Seq's place.
                            thread.frames.pop();
                        } else {
                            parent.state = next as u32;
                        }
                        stack.push((Task::Enter(children[next]), thread));
                    }
                    Op::DoWhile { max, min, .. } => {
                        if parent.state == pos {
                            // An empty round: it neither counts nor loops (the body is nullable).
                            thread.frames.pop();
                            stack.push((Task::Finish, thread));
                        } else {
                            let cap = if *max == UNBOUNDED { *min } else { *max };
                            parent.count = (parent.count + 1).min(cap);
                            stack.push((Task::Boundary, thread));
                        }
                    }
                    Op::Leaf { .. } | Op::IfElse(_) => {
                        unreachable!("only Seq and DoWhile frames have children running")
                    }
                }
            }
        }
    }

    /// Advances one thread by one unit, pushing the resulting threads to `out`.
    #[inline]
    fn step_thread(
        &self,
        thread: &Thread,
        unit: u32,
        out: &mut Threads,
        budget: &Budget,
    ) -> Result<(), LimitExceeded> {
        let Some(top) = thread.frames.last() else {
            return Ok(());
        };
        let Op::Leaf { leaf, .. } = self.program.op(OpId(top.op)) else {
            unreachable!("the top frame of a thread is a leaf")
        };
        let next = leaf.step(top.state, unit);
        if next == DEAD {
            return Ok(());
        }
        let mut t = thread.clone();
        t.pos += 1;
        let Some(exit) = leaf.exit(next) else {
            // The common case: stay in the leaf, no closure.
            if let Some(f) = t.frames.last_mut() {
                f.state = next;
            }
            out.push(t);
            return Ok(());
        };
        let mut stay = None;
        if leaf.has_out(next) {
            let mut s = t.clone();
            if let Some(f) = s.frames.last_mut() {
                f.state = next;
            }
            stay = Some((Task::Emit, s));
        }
        let op = top.op;
        t.frames.pop();
        let after = (Task::Exit { op, exit }, t);
        self.close(stay.into_iter().chain([after]), out, budget)
    }

    /// Advances every thread by one unit. Returns false (and leaves `threads` unchanged) if
    /// no thread survives; an error (threads unchanged) past the budget's work or readings.
    /// [`THREAD_WORK`] per thread stepped and per closure task.
    pub fn step(
        &self,
        threads: &mut Threads,
        unit: u32,
        scratch: &mut Threads,
        budget: &Budget,
    ) -> Result<bool, LimitExceeded> {
        budget.spend(threads.len() as u64 * THREAD_WORK)?;
        // The common case, one thread staying inside its leaf: update in place.
        if let [thread] = threads.as_mut_slice() {
            let Some(top) = thread.frames.last_mut() else {
                return Ok(false);
            };
            match self.top_step(top, unit) {
                TopStep::Dead => return Ok(false),
                TopStep::Stays(next) => {
                    top.state = next;
                    thread.pos += 1;
                    return Ok(true);
                }
                TopStep::MayExit => {}
            }
        }
        if !self.step_all(threads, unit, scratch, budget)? {
            return Ok(false);
        }
        std::mem::swap(threads, scratch);
        Ok(true)
    }

    /// [`Walker::step`] that leaves `threads` as they are and writes the threads after `unit`
    /// into `out` (false, and `out` unspecified, if none survives): a walk that steps many
    /// strings from shared prefixes keeps each prefix's threads and reuses `out`'s memory,
    /// where copying the threads before each step was most of its cost. Same work units.
    pub fn step_into(
        &self,
        threads: &Threads,
        unit: u32,
        out: &mut Threads,
        budget: &Budget,
    ) -> Result<bool, LimitExceeded> {
        budget.spend(threads.len() as u64 * THREAD_WORK)?;
        if let [thread] = threads.as_slice() {
            let Some(&top) = thread.frames.last() else {
                return Ok(false);
            };
            match self.top_step(&top, unit) {
                TopStep::Dead => return Ok(false),
                TopStep::Stays(next) => {
                    out.clone_from(threads);
                    if let Some(t) = out.first_mut() {
                        t.pos += 1;
                        if let Some(f) = t.frames.last_mut() {
                            f.state = next;
                        }
                    }
                    return Ok(true);
                }
                TopStep::MayExit => {}
            }
        }
        self.step_all(threads, unit, out, budget)
    }

    /// What `unit` does to the leaf on top of a thread.
    fn top_step(&self, top: &Frame, unit: u32) -> TopStep {
        let Op::Leaf { leaf, .. } = self.program.op(OpId(top.op)) else {
            unreachable!("the top frame of a thread is a leaf")
        };
        match leaf.step(top.state, unit) {
            DEAD => TopStep::Dead,
            next if leaf.exit(next).is_none() => TopStep::Stays(next),
            _ => TopStep::MayExit,
        }
    }

    /// Steps every thread of `threads` into `out` (cleared first), with the closure after any
    /// leaf that exits, and prunes the result. False if no thread survives.
    fn step_all(
        &self,
        threads: &[Thread],
        unit: u32,
        out: &mut Threads,
        budget: &Budget,
    ) -> Result<bool, LimitExceeded> {
        out.clear();
        self.forget();
        for t in threads.iter() {
            self.step_thread(t, unit, out, budget)?;
        }
        if out.is_empty() {
            return Ok(false);
        }
        prune(self.program, out, budget)?;
        budget.readings(out.len())?;
        Ok(true)
    }

    /// The threads after the leaf on top of `thread` exits, for every exit the leaf has.
    pub fn exit_closure(&self, thread: &Thread, budget: &Budget) -> Result<Threads, LimitExceeded> {
        let mut out = Threads::new();
        let top = thread.top();
        let Op::Leaf { leaf, .. } = self.program.op(OpId(top.op)) else {
            unreachable!("the top frame of a thread is a leaf")
        };
        let mut rest = thread.clone();
        rest.frames.pop();
        rest.pos += 1;
        self.forget();
        let exits =
            (0..leaf.num_exits()).map(|exit| (Task::Exit { op: top.op, exit }, rest.clone()));
        self.close(exits, &mut out, budget)?;
        prune(self.program, &mut out, budget)?;
        Ok(out)
    }
}

/// Puts every `DoWhile` frame whose round consumed something in its canonical state.
fn canonicalize(program: &Program, thread: &mut Thread) {
    let pos = thread.pos;
    for f in thread.frames.iter_mut() {
        if f.state != pos && matches!(program.op(OpId(f.op)), Op::DoWhile { .. }) {
            f.state = ROUND_CONSUMED;
        }
    }
}

/// Does `a` read at least everything `b` does, by its frames alone? Same frames, except
/// `DoWhile` counts where `a`'s is lower and already at the minimum: from then on `a` may end
/// the loop wherever `b` may (both are past `min`) and start a round wherever `b` may (it has
/// more rounds left), so every way `b` can go on, `a` can too.
fn dominates(program: &Program, a: &Thread, b: &Thread) -> bool {
    a.pos == b.pos
        && a.frames.len() == b.frames.len()
        && a.frames.iter().zip(&b.frames).all(|(fa, fb)| {
            fa == fb
                || (fa.op == fb.op
                    && fa.state == fb.state
                    && fa.count < fb.count
                    && matches!(program.op(OpId(fa.op)), Op::DoWhile { min, .. } if fa.count >= *min))
        })
}

/// A hash of a thread with its `DoWhile` counts left out: threads that could dominate one
/// another share it.
fn shape(program: &Program, t: &Thread) -> u64 {
    let mut h = FxHasher::default();
    t.pos.hash(&mut h);
    for f in &t.frames {
        let count = match program.op(OpId(f.op)) {
            Op::DoWhile { .. } => 0,
            _ => f.count,
        };
        (f.op, f.state, count).hash(&mut h);
    }
    h.finish()
}

/// Threads compared pairwise without hashing.
const LINEAR_PRUNE: usize = 8;
/// Most threads of one shape a new thread is compared with; past it, only equal threads are
/// found (through a hash of the whole thread), which is still exact, only less small.
const MAX_SHAPE_PEERS: usize = 32;

/// Canonicalizes threads and removes duplicates and dominated ones ([`dominates`]); the
/// union of what the threads read is unchanged. Order: first seen first, a thread that
/// replaces one it dominates taking its place. A unit of work per thread and per comparison.
pub(crate) fn prune(
    program: &Program,
    threads: &mut Threads,
    budget: &Budget,
) -> Result<(), LimitExceeded> {
    budget.spend(threads.len() as u64)?;
    threads.iter_mut().for_each(|t| canonicalize(program, t));
    if threads.len() < 2 {
        return Ok(());
    }
    let input = std::mem::take(threads);
    let mut kept: Vec<Option<Thread>> = Vec::with_capacity(input.len());
    if input.len() <= LINEAR_PRUNE {
        'next: for t in input {
            for slot in kept.iter_mut() {
                let Some(k) = slot else { continue };
                if dominates(program, k, &t) {
                    continue 'next;
                }
                if dominates(program, &t, k) {
                    *slot = Some(t);
                    continue 'next;
                }
            }
            kept.push(Some(t));
        }
    } else {
        let mut by_shape: FxHashMap<u64, SmallVec<[usize; 2]>> = FxHashMap::default();
        let mut exact: FxHashMap<u64, SmallVec<[usize; 1]>> = FxHashMap::default();
        let full = |t: &Thread| {
            let mut h = FxHasher::default();
            t.hash(&mut h);
            h.finish()
        };
        'next: for t in input {
            let peers = by_shape.entry(shape(program, &t)).or_default();
            budget.spend(peers.len().min(MAX_SHAPE_PEERS) as u64)?;
            for &i in peers.iter().take(MAX_SHAPE_PEERS) {
                let Some(k) = &kept[i] else { continue };
                if dominates(program, k, &t) {
                    continue 'next;
                }
                if dominates(program, &t, k) {
                    kept[i] = None;
                }
            }
            let same = exact.entry(full(&t)).or_default();
            if same.iter().any(|&i| kept[i].as_ref() == Some(&t)) {
                continue;
            }
            same.push(kept.len());
            peers.push(kept.len());
            kept.push(Some(t));
        }
    }
    threads.extend(kept.into_iter().flatten());
    Ok(())
}
