//! The cursor: where in an operator program the output so far can be.
//!
//! A *thread* is a stack of frames from the root to a leaf: `Seq` frames remember which child
//! runs, `DoWhile` frames count rounds, and the top frame is always a leaf in a state that can
//! consume a unit (or the stack is empty: the program has ended). A cursor is the set of
//! threads the input allows — usually one; several while an `IfElse` or a `DoWhile` has not yet
//! been decided by the input. Stepping a unit is O(depth) per thread, no allocation while
//! threads fit inline.

use smallvec::SmallVec;

use super::leaf::DEAD;
use super::program::{Op, OpId, Program, UNBOUNDED};

/// One frame of a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Frame {
    /// The operator.
    pub op: u32,
    /// Leaf: automaton state. Seq: running child index. DoWhile: input position when the
    /// current round began (a round that consumed nothing does not count and cannot loop).
    pub state: u32,
    /// DoWhile: rounds completed (saturated at `min` when unbounded).
    pub count: u32,
}

/// One reading of the input: frames root → leaf, and how many units it consumed.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Thread {
    pub frames: SmallVec<[Frame; 8]>,
    pub pos: u32,
}

impl Thread {
    pub fn is_end(&self) -> bool {
        self.frames.is_empty()
    }

    pub fn top(&self) -> Frame {
        *self.frames.last().expect("thread has a leaf frame")
    }
}

/// Every reading of the input so far.
pub(crate) type Threads = SmallVec<[Thread; 1]>;

/// Most threads a cursor may hold; past this a step fails with a limit error rather than
/// growing without bound (only pathological programs get near it).
pub(crate) const MAX_THREADS: usize = 4096;

/// Walks programs: closure (entering operators until a leaf can consume) and stepping.
pub(crate) struct Walker<'p> {
    pub program: &'p Program,
}

impl<'p> Walker<'p> {
    pub fn new(program: &'p Program) -> Walker<'p> {
        Walker { program }
    }

    /// The threads at the start of the program.
    pub fn initial(&self) -> Threads {
        let mut out = Threads::new();
        let thread = Thread {
            frames: SmallVec::new(),
            pos: 0,
        };
        self.enter(self.program.root, thread, &mut out);
        dedup(&mut out);
        out
    }

    /// Enters `op` on top of `thread`'s frames, pushing every thread that reaches a consuming
    /// leaf (or the program's end) to `out`.
    pub fn enter(&self, op: OpId, mut thread: Thread, out: &mut Threads) {
        match self.program.op(op) {
            Op::Leaf { leaf, then } => {
                let start = leaf.start();
                if let Some(exit) = leaf.exit(start) {
                    let after = thread.clone();
                    self.after_exit(then, exit, after, out);
                }
                if leaf.has_out(start) {
                    thread.frames.push(Frame {
                        op: op.0,
                        state: start,
                        count: 0,
                    });
                    out.push(thread);
                }
            }
            Op::Seq(children) => match children.len() {
                0 => self.finish(thread, out),
                _ => {
                    thread.frames.push(Frame {
                        op: op.0,
                        state: 0,
                        count: 0,
                    });
                    self.enter(children[0], thread, out);
                }
            },
            Op::IfElse(branches) => {
                for &b in branches.iter() {
                    self.enter(b, thread.clone(), out);
                }
            }
            Op::DoWhile { .. } => {
                thread.frames.push(Frame {
                    op: op.0,
                    state: thread.pos,
                    count: 0,
                });
                self.round_boundary(thread, out);
            }
        }
    }

    /// At a DoWhile frame (on top) between rounds: start another round and/or leave.
    fn round_boundary(&self, mut thread: Thread, out: &mut Threads) {
        let f = thread.top();
        let Op::DoWhile { body, min, max } = *self.program.op(OpId(f.op)) else {
            unreachable!()
        };
        let body_nullable = self.program.info(body.0).nullable;
        if f.count < max {
            let mut again = thread.clone();
            again.frames.last_mut().unwrap().state = again.pos;
            self.enter(body, again, out);
        }
        if f.count >= min || body_nullable {
            thread.frames.pop();
            self.finish(thread, out);
        }
    }

    /// Runs what follows exit `exit` of a leaf whose frame was already popped.
    fn after_exit(&self, then: &[Option<OpId>], exit: u32, thread: Thread, out: &mut Threads) {
        match then.get(exit as usize).copied().flatten() {
            Some(body) => self.enter(body, thread, out),
            None => self.finish(thread, out),
        }
    }

    /// The operator above the top of `thread` completed: continue its parent.
    fn finish(&self, mut thread: Thread, out: &mut Threads) {
        let Some(parent) = thread.frames.last_mut() else {
            out.push(thread);
            return;
        };
        match self.program.op(OpId(parent.op)) {
            Op::Seq(children) => {
                let next = parent.state as usize + 1;
                if next + 1 == children.len() {
                    // The last child runs in the Seq's place.
                    thread.frames.pop();
                } else {
                    parent.state = next as u32;
                }
                self.enter(children[next], thread, out);
            }
            Op::DoWhile { max, min, .. } => {
                if parent.state == thread.pos {
                    // An empty round: it neither counts nor loops (the body is nullable).
                    thread.frames.pop();
                    self.finish(thread, out);
                } else {
                    let cap = if *max == UNBOUNDED { *min } else { *max };
                    parent.count = (parent.count + 1).min(cap);
                    self.round_boundary(thread, out);
                }
            }
            Op::Leaf { .. } | Op::IfElse(_) => {
                unreachable!("only Seq and DoWhile frames have children running")
            }
        }
    }

    /// Advances one thread by one unit, pushing the resulting threads to `out`.
    #[inline]
    pub fn step_thread(&self, thread: &Thread, unit: u32, out: &mut Threads) {
        let Some(top) = thread.frames.last() else {
            return;
        };
        let Op::Leaf { leaf, then } = self.program.op(OpId(top.op)) else {
            unreachable!()
        };
        let next = leaf.step(top.state, unit);
        if next == DEAD {
            return;
        }
        let exit = leaf.exit(next);
        if exit.is_none() {
            // The common case: stay in the leaf, no closure.
            let mut t = thread.clone();
            t.frames.last_mut().unwrap().state = next;
            t.pos += 1;
            out.push(t);
            return;
        }
        let mut t = thread.clone();
        t.pos += 1;
        if leaf.has_out(next) {
            let mut stay = t.clone();
            stay.frames.last_mut().unwrap().state = next;
            out.push(stay);
        }
        t.frames.pop();
        self.after_exit(then, exit.unwrap(), t, out);
    }

    /// Advances every thread by one unit. Returns false (and leaves `threads` unchanged) if
    /// no thread survives.
    pub fn step(&self, threads: &mut Threads, unit: u32, scratch: &mut Threads) -> bool {
        // The common case, one thread staying inside its leaf: update in place.
        if let [thread] = threads.as_mut_slice() {
            let Some(top) = thread.frames.last_mut() else {
                return false;
            };
            let Op::Leaf { leaf, .. } = self.program.op(OpId(top.op)) else {
                unreachable!()
            };
            let next = leaf.step(top.state, unit);
            if next == DEAD {
                return false;
            }
            if leaf.exit(next).is_none() {
                top.state = next;
                thread.pos += 1;
                return true;
            }
        }
        scratch.clear();
        for t in threads.iter() {
            self.step_thread(t, unit, scratch);
        }
        if scratch.is_empty() {
            return false;
        }
        dedup(scratch);
        std::mem::swap(threads, scratch);
        true
    }

    /// The threads after the leaf on top of `thread` exits, for every exit the leaf has.
    pub fn exit_closure(&self, thread: &Thread) -> Threads {
        let mut out = Threads::new();
        let top = thread.top();
        let Op::Leaf { leaf, then } = self.program.op(OpId(top.op)) else {
            unreachable!()
        };
        let mut rest = thread.clone();
        rest.frames.pop();
        rest.pos += 1;
        for exit in 0..leaf.num_exits() {
            self.after_exit(then, exit, rest.clone(), &mut out);
        }
        dedup(&mut out);
        out
    }
}

/// Removes duplicate threads (order kept).
pub(crate) fn dedup(threads: &mut Threads) {
    if threads.len() < 2 {
        return;
    }
    let mut i = 1;
    while i < threads.len() {
        if threads[..i].contains(&threads[i]) {
            threads.remove(i);
        } else {
            i += 1;
        }
    }
}
