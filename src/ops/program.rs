//! Operator programs: `Write`, `Wait`, `IfElse`, `DoWhile` and `Seq` over leaf automata.
//!
//! A [`Program`] is a tree of operators in one flat arena. Leaves (`Write`, `Wait`, DFA pieces)
//! are shared behind `Arc`s, so a program built per request costs a few pushes into a vector:
//! the expensive parts (DFAs, their cached masks) are made once and reused.
//!
//! Semantics are those of the language each operator denotes; the cursor (see `walker.rs`)
//! follows every way the input can be read at once, so an `IfElse` whose branches share a
//! prefix, or a `DoWhile` whose exit and body start alike, are still exact.

use std::sync::Arc;

use super::leaf::{Leaf, Unit};
use crate::error::{CompileError, CompileErrorKind};
use crate::ir::StructHasher;

/// Index of an operator in a [`ProgramBuilder`] / [`Program`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OpId(pub(crate) u32);

impl OpId {
    /// The index as usize.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Unbounded repetition count.
pub(crate) const UNBOUNDED: u32 = u32::MAX;

/// One operator.
#[derive(Clone, Debug)]
pub(crate) enum Op {
    /// A leaf automaton. After exit `i`, `then[i]` runs (if any) before the operator ends: this
    /// is `Wait`'s "terminator, then body". Plain leaves have no `then`.
    Leaf {
        leaf: Arc<Leaf>,
        then: Box<[Option<OpId>]>,
    },
    /// Children one after another.
    Seq(Box<[OpId]>),
    /// One of the branches, chosen by what comes next.
    IfElse(Box<[OpId]>),
    /// `body` repeated `min..=max` times (`max = UNBOUNDED` for no bound).
    DoWhile { body: OpId, min: u32, max: u32 },
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct OpInfo {
    pub hash: u128,
    pub nullable: bool,
}

/// The info of a leaf operator followed by `then` (see [`Op::Leaf`]).
fn leaf_info(leaf: &Leaf, then: &[Option<OpId>], child: impl Fn(&OpId) -> OpInfo) -> OpInfo {
    let mut h = StructHasher::new(0x01);
    h.hash(leaf.hash());
    let mut nullable = false;
    for (exit, t) in then.iter().enumerate() {
        h.hash(t.map_or(0, |t| child(&t).hash));
        let exits_at_start = leaf.exit(leaf.start()) == Some(exit as u32);
        nullable |= exits_at_start && t.is_none_or(|t| child(&t).nullable);
    }
    if then.is_empty() {
        nullable = leaf.exit(leaf.start()).is_some();
    }
    OpInfo {
        hash: h.finish(),
        nullable,
    }
}

/// A leaf with its operator info (structural hash, nullability) computed once: what is added to
/// every request's program by reference (template fragments, interned `Write`s), so that adding
/// it costs a push rather than a hash.
#[derive(Clone, Debug)]
pub(crate) struct LeafOp {
    leaf: Arc<Leaf>,
    info: OpInfo,
}

impl LeafOp {
    /// `leaf` as a plain leaf operator (no `Wait` bodies).
    pub fn new(leaf: Arc<Leaf>) -> LeafOp {
        let info = leaf_info(&leaf, &[], |_| unreachable!("a plain leaf has no bodies"));
        LeafOp { leaf, info }
    }

    /// The leaf, for tests of sharing.
    #[cfg(test)]
    pub fn leaf(&self) -> &Arc<Leaf> {
        &self.leaf
    }
}

/// Builds a [`Program`].
///
/// # Example
///
/// The WGrammar paper's `\d+(\.\d+)*` as explicit operators:
///
/// ```
/// use formwork::ops::{ProgramBuilder, Leaf, Unit};
/// use std::sync::Arc;
///
/// let mut p = ProgramBuilder::new();
/// let digit = p.leaf(Arc::new(formwork::ops::RegexCompiler::new().leaf(r"[0-9]").unwrap()));
/// let digits = p.do_while(digit, 1, None);
/// let dot = p.write(&[Unit::Byte(b'.')]);
/// let more_digits = p.do_while(digit, 1, None);
/// let part = p.seq(&[dot, more_digits]);
/// let parts = p.do_while(part, 0, None);
/// let root = p.seq(&[digits, parts]);
/// let program = p.finish(root).unwrap();
/// assert_eq!(program.num_ops(), 7);
/// ```
#[derive(Clone, Debug, Default)]
pub struct ProgramBuilder {
    ops: Vec<Op>,
    info: Vec<OpInfo>,
}

impl ProgramBuilder {
    /// An empty builder.
    pub fn new() -> ProgramBuilder {
        ProgramBuilder::default()
    }

    /// An empty builder with room for `ops` operators.
    pub fn with_capacity(ops: usize) -> ProgramBuilder {
        ProgramBuilder {
            ops: Vec::with_capacity(ops),
            info: Vec::with_capacity(ops),
        }
    }

    fn push(&mut self, op: Op) -> OpId {
        let info = self.info_of(&op);
        self.ops.push(op);
        self.info.push(info);
        OpId((self.ops.len() - 1) as u32)
    }

    fn info_of(&self, op: &Op) -> OpInfo {
        let child = |id: &OpId| self.info[id.index()];
        match op {
            Op::Leaf { leaf, then } => leaf_info(leaf, then, child),
            Op::Seq(xs) | Op::IfElse(xs) => {
                let is_seq = matches!(op, Op::Seq(_));
                let mut h = StructHasher::new(if is_seq { 0x02 } else { 0x03 });
                xs.iter().for_each(|x| {
                    h.hash(child(x).hash);
                });
                let nullable = if is_seq {
                    xs.iter().all(|x| child(x).nullable)
                } else {
                    xs.iter().any(|x| child(x).nullable)
                };
                OpInfo {
                    hash: h.finish(),
                    nullable,
                }
            }
            Op::DoWhile { body, min, max } => {
                let mut h = StructHasher::new(0x04);
                h.hash(child(body).hash).word(*min as u64).word(*max as u64);
                OpInfo {
                    hash: h.finish(),
                    nullable: *min == 0 || child(body).nullable,
                }
            }
        }
    }

    /// A leaf automaton as an operator (a regex piece, a class, a choice among strings).
    pub fn leaf(&mut self, leaf: Arc<Leaf>) -> OpId {
        self.push(Op::Leaf {
            leaf,
            then: Box::new([]),
        })
    }

    /// A leaf whose operator info was computed once (see [`LeafOp`]).
    pub(crate) fn leaf_op(&mut self, leaf: LeafOp) -> OpId {
        self.info.push(leaf.info);
        // Built only once there is room: an operator built before a possible reallocation
        // lives on the stack across it and is copied back in halves that do not match the
        // stores that wrote it, which stalls (this is most of a request's operators).
        self.ops.extend(std::iter::once_with(|| Op::Leaf {
            leaf: leaf.leaf,
            then: Box::new([]),
        }));
        OpId((self.ops.len() - 1) as u32)
    }

    /// `Write`: a forced literal of bytes and special tokens.
    pub fn write(&mut self, units: &[Unit]) -> OpId {
        self.leaf(Arc::new(Leaf::write(units)))
    }

    /// `Write` of UTF-8 text.
    #[cfg(feature = "internals")]
    pub fn write_text(&mut self, text: &str) -> OpId {
        let units: Vec<Unit> = text.bytes().map(Unit::Byte).collect();
        self.write(&units)
    }

    /// `Wait`: the leaf built by [`Leaf::wait`](super::Leaf::wait), then the body of whichever
    /// terminator matched (`bodies[i]`, `None` for none).
    pub fn wait(&mut self, leaf: Arc<Leaf>, bodies: &[Option<OpId>]) -> Result<OpId, CompileError> {
        if bodies.len() != leaf.num_exits() as usize {
            return Err(CompileError::unplaced(
                CompileErrorKind::Invalid,
                format!(
                    "Wait has {} terminators but {} bodies",
                    leaf.num_exits(),
                    bodies.len()
                ),
            ));
        }
        Ok(self.push(Op::Leaf {
            leaf,
            then: bodies.into(),
        }))
    }

    /// `Seq`: operators one after another.
    pub fn seq(&mut self, ops: &[OpId]) -> OpId {
        if ops.len() == 1 {
            return ops[0];
        }
        self.push(Op::Seq(ops.into()))
    }

    /// `IfElse`: one of the branches, decided by the input (every branch is followed until the
    /// input rules it out, so overlapping branches stay exact).
    pub fn if_else(&mut self, branches: &[OpId]) -> OpId {
        if branches.len() == 1 {
            return branches[0];
        }
        self.push(Op::IfElse(branches.into()))
    }

    /// `DoWhile`: `body` repeated between `min` and `max` times (`None`: no bound). A body that
    /// can match the empty string is fine: empty rounds simply do not count.
    pub fn do_while(&mut self, body: OpId, min: u32, max: Option<u32>) -> OpId {
        let max = max.unwrap_or(UNBOUNDED);
        self.push(Op::DoWhile {
            body,
            min,
            max: max.max(min),
        })
    }

    /// The empty sequence (matches the empty string).
    pub fn empty(&mut self) -> OpId {
        self.push(Op::Seq(Box::new([])))
    }

    /// Copies `program`'s operators into this builder (leaves are shared, not copied), returning
    /// its root here. This is how a cached fragment (a compiled regex, a template piece) is
    /// reused in many programs.
    pub fn splice(&mut self, program: &Program) -> OpId {
        let base = self.ops.len() as u32;
        let shift = |id: OpId| OpId(id.0 + base);
        for op in &program.ops {
            let moved = match op {
                Op::Leaf { leaf, then } => Op::Leaf {
                    leaf: leaf.clone(),
                    then: then.iter().map(|t| t.map(shift)).collect(),
                },
                Op::Seq(xs) => Op::Seq(xs.iter().copied().map(shift).collect()),
                Op::IfElse(xs) => Op::IfElse(xs.iter().copied().map(shift).collect()),
                Op::DoWhile { body, min, max } => Op::DoWhile {
                    body: shift(*body),
                    min: *min,
                    max: *max,
                },
            };
            self.ops.push(moved);
        }
        self.info.extend_from_slice(&program.info);
        shift(program.root)
    }

    /// Number of operators so far.
    #[cfg(feature = "internals")]
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True before any operator was added.
    #[cfg(feature = "internals")]
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The program rooted at `root`.
    pub fn finish(self, root: OpId) -> Result<Program, CompileError> {
        if root.index() >= self.ops.len() {
            return Err(CompileError::unplaced(
                CompileErrorKind::Invalid,
                "root operator out of range",
            ));
        }
        Ok(Program {
            ops: self.ops,
            info: self.info,
            root,
        })
    }
}

/// An operator program: the compiled form of a regular constraint.
#[derive(Clone, Debug)]
pub struct Program {
    pub(crate) ops: Vec<Op>,
    pub(crate) info: Vec<OpInfo>,
    pub(crate) root: OpId,
}

impl Program {
    /// Number of operators.
    pub fn num_ops(&self) -> usize {
        self.ops.len()
    }

    /// The structural hash of the whole program.
    pub fn hash(&self) -> u128 {
        self.info[self.root.index()].hash
    }

    /// True if the program accepts the empty string.
    pub fn is_nullable(&self) -> bool {
        self.info[self.root.index()].nullable
    }

    pub(crate) fn op(&self, id: OpId) -> &Op {
        &self.ops[id.index()]
    }

    pub(crate) fn info(&self, id: u32) -> &OpInfo {
        &self.info[id as usize]
    }

    /// The leaf, if the whole program is one leaf that ends when the leaf exits (a `Write`, a
    /// DFA, or a `Wait` without bodies). Adding it to another program with
    /// [`ProgramBuilder::leaf`] shares it without copying anything, unlike
    /// [`ProgramBuilder::splice`]: what a request instantiates per template fragment.
    ///
    /// ```
    /// use formwork::ops::{ProgramBuilder, RegexCompiler};
    ///
    /// let compiler = RegexCompiler::new();
    /// assert!(compiler.compile("[a-z]+@[a-z]+").unwrap().as_leaf().is_some());
    /// let mut p = ProgramBuilder::new();
    /// let a = p.write_text("a");
    /// let rounds = p.do_while(a, 1, None);
    /// assert!(p.finish(rounds).unwrap().as_leaf().is_none());
    /// ```
    pub fn as_leaf(&self) -> Option<&Arc<Leaf>> {
        match self.op(self.root) {
            Op::Leaf { leaf, then } if then.iter().all(Option::is_none) => Some(leaf),
            _ => None,
        }
    }

    /// A one-line description of the operator tree, e.g. `Seq(DoWhile{1,}(Dfa), ...)`.
    pub fn describe(&self) -> String {
        // Pieces of text and operators still to describe, last first (programs can nest
        // deeper than a thread's stack should recurse).
        enum Piece<'a> {
            Text(&'a str),
            Owned(String),
            Op(OpId),
        }
        let mut out = String::new();
        let mut stack = vec![Piece::Op(self.root)];
        let mut children: Vec<Piece> = Vec::new();
        while let Some(piece) = stack.pop() {
            let id = match piece {
                Piece::Text(t) => {
                    out.push_str(t);
                    continue;
                }
                Piece::Owned(t) => {
                    out.push_str(&t);
                    continue;
                }
                Piece::Op(id) => id,
            };
            children.clear();
            let list = |children: &mut Vec<Piece>, xs: &mut dyn Iterator<Item = Option<OpId>>| {
                children.push(Piece::Text("("));
                for (i, x) in xs.enumerate() {
                    if i > 0 {
                        children.push(Piece::Text(", "));
                    }
                    children.push(x.map_or(Piece::Text("-"), Piece::Op));
                }
                children.push(Piece::Text(")"));
            };
            match self.op(id) {
                Op::Leaf { leaf, then } => {
                    children.push(Piece::Text(match leaf.as_ref() {
                        Leaf::Write(_) => "Write",
                        Leaf::Dfa(_) if then.is_empty() => "Dfa",
                        Leaf::Dfa(_) => "Wait",
                    }));
                    if then.iter().any(|t| t.is_some()) {
                        list(&mut children, &mut then.iter().copied());
                    }
                }
                Op::Seq(xs) | Op::IfElse(xs) => {
                    children.push(Piece::Text(match self.op(id) {
                        Op::Seq(_) => "Seq",
                        _ => "IfElse",
                    }));
                    list(&mut children, &mut xs.iter().map(|&x| Some(x)));
                }
                Op::DoWhile { body, min, max } => {
                    children.push(Piece::Owned(match *max {
                        UNBOUNDED => format!("DoWhile{{{min},}}"),
                        max => format!("DoWhile{{{min},{max}}}"),
                    }));
                    list(&mut children, &mut std::iter::once(Some(*body)));
                }
            }
            stack.extend(children.drain(..).rev());
        }
        out
    }

    /// The most frames a thread of this program can stack (see `walker.rs`): a `Seq` frame
    /// under every child but the last (which runs in its place), a `DoWhile` frame under its
    /// body, a leaf's frame on top (popped before a `Wait` body runs). Operators only refer to
    /// operators built before them, so one pass in order computes it.
    pub(crate) fn frame_depth(&self) -> usize {
        let mut depth = vec![0usize; self.ops.len()];
        for (i, op) in self.ops.iter().enumerate() {
            let d = |x: &OpId| depth.get(x.index()).copied().unwrap_or(0);
            depth[i] = match op {
                Op::Leaf { then, .. } => then.iter().flatten().map(d).max().unwrap_or(0).max(1),
                Op::Seq(xs) => match xs.split_last() {
                    Some((last, init)) => init
                        .iter()
                        .map(|x| 1 + d(x))
                        .max()
                        .unwrap_or(0)
                        .max(d(last)),
                    None => 0,
                },
                Op::IfElse(xs) => xs.iter().map(d).max().unwrap_or(0),
                Op::DoWhile { body, .. } => 1 + d(body),
            };
        }
        depth[self.root.index()]
    }

    /// Bytes the program holds on the heap, its leaves included.
    pub(crate) fn heap_bytes(&self) -> usize {
        let op_bytes = std::mem::size_of::<Op>() + std::mem::size_of::<OpInfo>();
        self.ops
            .iter()
            .map(|op| {
                op_bytes
                    + match op {
                        Op::Leaf { leaf, then } => leaf.heap_bytes() + then.len() * 8,
                        Op::Seq(xs) | Op::IfElse(xs) => xs.len() * 4,
                        Op::DoWhile { .. } => 0,
                    }
            })
            .sum()
    }
}
