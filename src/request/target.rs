//! What a request binding assembles ([`Target`]) and its two implementations: an operator
//! program with literal runs merged ([`OpsTarget`]) and grammar IR copied from the factory's
//! fragments ([`IrTarget`]).

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::CompileError;
use crate::front::regex::regex_to_ir_with;
use crate::ir::{Expr, ExprId, GrammarBuilder};
use crate::limits::Limits;
use crate::ops::{Leaf, OpId, ProgramBuilder, Unit};
use crate::template::{Fragment, StructureFactory};

/// What a binding assembles.
pub(super) trait Target {
    /// A finished part.
    type Part: Copy;
    /// A sequence being built. Sequences nest strictly: one opened inside another is closed
    /// before the outer one is used again.
    type Seq;

    fn open(&mut self) -> Self::Seq;
    fn lit(&mut self, seq: &mut Self::Seq, units: &[Unit], expr: ExprId);
    fn text(&mut self, seq: &mut Self::Seq, text: &[u8]);
    fn fragment(&mut self, seq: &mut Self::Seq, index: u32, expr: ExprId);
    fn push(&mut self, seq: &mut Self::Seq, node: Self::Part);
    fn close(&mut self, seq: Self::Seq) -> Self::Part;
    /// One of at least two strings.
    fn choice(&mut self, strings: &[&str]) -> Result<Self::Part, CompileError>;
    fn regex(&mut self, pattern: &str) -> Result<Self::Part, CompileError>;
    fn alt(&mut self, branches: &[Self::Part]) -> Self::Part;
    fn repeat(&mut self, body: Self::Part, min: u32, max: Option<u32>) -> Self::Part;
}

/// Assembles an operator program: fragments spliced, literal runs merged into one `Write`.
///
/// The open sequences share two stacks instead of owning their parts, so that nesting costs no
/// allocation and a sequence is two indices.
pub(super) struct OpsTarget<'f> {
    pub(super) b: ProgramBuilder,
    pub(super) factory: &'f StructureFactory,
    /// The operators of the open sequences, innermost last.
    pub(super) ops: Vec<OpId>,
    /// Literal units not yet written, innermost sequence last.
    pub(super) pending: Vec<Unit>,
}

/// Where an open sequence's operators and pending units start on the stacks.
pub(super) struct OpsSeq {
    ops: usize,
    pending: usize,
}

impl OpsTarget<'_> {
    fn flush(&mut self, seq: &OpsSeq) {
        if self.pending.len() > seq.pending {
            let leaf = self.factory.write_leaf(&self.pending[seq.pending..]);
            let op = self.b.leaf_op(leaf);
            self.ops.push(op);
            self.pending.truncate(seq.pending);
        }
    }
}

impl Target for OpsTarget<'_> {
    type Part = OpId;
    type Seq = OpsSeq;

    fn open(&mut self) -> OpsSeq {
        OpsSeq {
            ops: self.ops.len(),
            pending: self.pending.len(),
        }
    }

    fn lit(&mut self, _: &mut OpsSeq, units: &[Unit], _: ExprId) {
        self.pending.extend_from_slice(units);
    }

    fn text(&mut self, _: &mut OpsSeq, text: &[u8]) {
        self.pending.extend(text.iter().map(|&b| Unit::Byte(b)));
    }

    fn fragment(&mut self, seq: &mut OpsSeq, index: u32, _: ExprId) {
        self.flush(seq);
        let op = match &self.factory.fragments[index as usize] {
            Fragment::Leaf(leaf) => self.b.leaf_op(leaf.clone()),
            Fragment::Program(program) => self.b.splice(program),
        };
        self.ops.push(op);
    }

    fn push(&mut self, seq: &mut OpsSeq, node: OpId) {
        self.flush(seq);
        self.ops.push(node);
    }

    fn close(&mut self, seq: OpsSeq) -> OpId {
        self.flush(&seq);
        let op = match &self.ops[seq.ops..] {
            [] => self.b.empty(),
            ops => self.b.seq(ops),
        };
        self.ops.truncate(seq.ops);
        op
    }

    fn choice(&mut self, strings: &[&str]) -> Result<OpId, CompileError> {
        let leaf = Leaf::choice(strings.iter().map(|s| s.as_bytes()))?;
        Ok(self.b.leaf(Arc::new(leaf)))
    }

    fn regex(&mut self, pattern: &str) -> Result<OpId, CompileError> {
        let program = self.factory.regex.compile(pattern)?;
        Ok(self.b.splice(&program))
    }

    fn alt(&mut self, branches: &[OpId]) -> OpId {
        self.b.if_else(branches)
    }

    fn repeat(&mut self, body: OpId, min: u32, max: Option<u32>) -> OpId {
        self.b.do_while(body, min, max)
    }
}

/// Assembles grammar IR, copying the factory's fragment expressions.
pub(super) struct IrTarget<'f> {
    pub(super) g: GrammarBuilder,
    pub(super) limits: &'f Limits,
    pub(super) factory: &'f StructureFactory,
    pub(super) copied: HashMap<ExprId, ExprId>,
}

impl IrTarget<'_> {
    /// `id` of the factory's grammar, in this one. Post-order on an explicit stack: the
    /// factory's expressions are as deep as `ir::MAX_EXPR_DEPTH`.
    fn copy(&mut self, id: ExprId) -> ExprId {
        let grammar = &self.factory.grammar;
        let mut stack = vec![id];
        while let Some(&e) = stack.last() {
            if self.copied.contains_key(&e) {
                stack.pop();
                continue;
            }
            let children = match grammar.expr(e) {
                Expr::Seq(xs) | Expr::Alt(xs) => &xs[..],
                Expr::Repeat { body, .. } => std::slice::from_ref(body),
                _ => &[],
            };
            let waiting = stack.len();
            stack.extend(children.iter().filter(|x| !self.copied.contains_key(x)));
            if stack.len() > waiting {
                continue;
            }
            let copied = |x: &ExprId| self.copied[x];
            let c = match grammar.expr(e) {
                Expr::Empty => self.g.empty(),
                Expr::Nothing => self.g.nothing(),
                Expr::Bytes(b) => self.g.bytes(b),
                Expr::Class(c) => self.g.class(*c),
                Expr::Special(s) => self.g.special(s),
                Expr::Seq(xs) => {
                    let parts: Vec<ExprId> = xs.iter().map(copied).collect();
                    self.g.seq(parts)
                }
                Expr::Alt(xs) => {
                    let parts: Vec<ExprId> = xs.iter().map(copied).collect();
                    self.g.alt(parts)
                }
                &Expr::Repeat { body, min, max } => {
                    let body = copied(&body);
                    self.g.repeat(body, min, max)
                }
                Expr::Rule(_) => unreachable!("factory fragments inline their rules"),
            };
            self.copied.insert(e, c);
            stack.pop();
        }
        self.copied[&id]
    }
}

impl Target for IrTarget<'_> {
    type Part = ExprId;
    type Seq = Vec<ExprId>;

    fn open(&mut self) -> Vec<ExprId> {
        Vec::new()
    }

    fn lit(&mut self, seq: &mut Vec<ExprId>, _: &[Unit], expr: ExprId) {
        let e = self.copy(expr);
        seq.push(e);
    }

    fn text(&mut self, seq: &mut Vec<ExprId>, text: &[u8]) {
        let e = self.g.bytes(text);
        seq.push(e);
    }

    fn fragment(&mut self, seq: &mut Vec<ExprId>, _: u32, expr: ExprId) {
        let e = self.copy(expr);
        seq.push(e);
    }

    fn push(&mut self, seq: &mut Vec<ExprId>, node: ExprId) {
        seq.push(node);
    }

    fn close(&mut self, seq: Vec<ExprId>) -> ExprId {
        self.g.seq(seq)
    }

    fn choice(&mut self, strings: &[&str]) -> Result<ExprId, CompileError> {
        let options: Vec<ExprId> = strings.iter().map(|s| self.g.text(s)).collect();
        Ok(self.g.alt(options))
    }

    fn regex(&mut self, pattern: &str) -> Result<ExprId, CompileError> {
        regex_to_ir_with(pattern, &mut self.g, self.limits)
    }

    fn alt(&mut self, branches: &[ExprId]) -> ExprId {
        self.g.alt(branches.iter().copied())
    }

    fn repeat(&mut self, body: ExprId, min: u32, max: Option<u32>) -> ExprId {
        self.g.repeat(body, min, max)
    }
}
