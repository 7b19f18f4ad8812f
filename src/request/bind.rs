//! Binding a request against the factory: one walk over the structure recipes that resolves
//! names, type-checks arguments against parameter kinds, and assembles the result through a
//! [`Target`] — an operator program (the fast path) or grammar IR (the oracle and CFG path).
//! One binder for both, so the two cannot drift apart.

use std::collections::HashMap;
use std::sync::Arc;

use smallvec::SmallVec;

use super::ast::{NodeId, NodeKind, Tree};
use super::range::int_range_regex;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::regex::regex_to_ir;
use crate::ir::{Expr, ExprId, Grammar, GrammarBuilder};
use crate::ops::{Leaf, OpId, Program, ProgramBuilder, Unit};
use crate::template::{
    Fragment, Param, ParamDefault, ParamKind, Piece, StructId, StructureFactory,
};

/// What a binding assembles.
trait Target {
    /// A finished part.
    type Node: Copy;
    /// A sequence being built. Sequences nest strictly: one opened inside another is closed
    /// before the outer one is used again.
    type Seq;

    fn open(&mut self) -> Self::Seq;
    fn lit(&mut self, seq: &mut Self::Seq, units: &[Unit], expr: ExprId);
    fn text(&mut self, seq: &mut Self::Seq, text: &[u8]);
    fn fragment(&mut self, seq: &mut Self::Seq, index: u32, expr: ExprId);
    fn push(&mut self, seq: &mut Self::Seq, node: Self::Node);
    fn close(&mut self, seq: Self::Seq) -> Self::Node;
    /// One of at least two strings.
    fn choice(&mut self, strings: &[&str]) -> Result<Self::Node, CompileError>;
    fn regex(&mut self, pattern: &str) -> Result<Self::Node, CompileError>;
    fn alt(&mut self, branches: &[Self::Node]) -> Self::Node;
    fn repeat(&mut self, body: Self::Node, min: u32, max: Option<u32>) -> Self::Node;
}

pub(super) fn instantiate(
    factory: &StructureFactory,
    tree: &Tree,
    locate: &dyn Fn(u32) -> Location,
) -> Result<Program, CompileError> {
    // About one operator per request node (a section: its id, a `Write` and two `Wait`s).
    let target = OpsTarget {
        b: ProgramBuilder::with_capacity(tree.num_nodes()),
        factory,
        ops: Vec::with_capacity(tree.num_nodes()),
        pending: Vec::with_capacity(64),
    };
    let (target, root) = bind(factory, tree, locate, target)?;
    target.b.finish(root)
}

pub(super) fn instantiate_ir(
    factory: &StructureFactory,
    tree: &Tree,
    locate: &dyn Fn(u32) -> Location,
) -> Result<Grammar, CompileError> {
    let target = IrTarget {
        g: GrammarBuilder::new(),
        factory,
        copied: HashMap::new(),
    };
    let (mut target, root) = bind(factory, tree, locate, target)?;
    let start = target.g.rule("request");
    target.g.define(start, root)?;
    target.g.finish(start)
}

fn bind<T: Target>(
    factory: &StructureFactory,
    tree: &Tree,
    locate: &dyn Fn(u32) -> Location,
    target: T,
) -> Result<(T, T::Node), CompileError> {
    let mut binder = Binder {
        factory,
        tree,
        locate,
        target,
        memo: SmallVec::new(),
    };
    let id = binder.resolve(tree.root, None)?;
    let mut seq = binder.target.open();
    binder.structure(id, tree.root, &mut seq)?;
    let node = binder.target.close(seq);
    Ok((binder.target, node))
}

struct Binder<'f, 't, T: Target> {
    factory: &'f StructureFactory,
    tree: &'t Tree<'t>,
    locate: &'t dyn Fn(u32) -> Location,
    target: T,
    /// Nodes already built for an argument value: a parameter used several times (after
    /// inlining) builds its choice leaf or regex once.
    memo: SmallVec<[(NodeId, T::Node); 4]>,
}

impl<T: Target> Binder<'_, '_, T> {
    /// An error about request node `node`.
    fn error(&self, kind: CompileErrorKind, node: NodeId, message: String) -> CompileError {
        CompileError::new(kind, (self.locate)(self.tree.node(node).at), message)
    }

    /// The structure a call names, which must be one of `allowed` (if given).
    fn resolve(
        &self,
        call: NodeId,
        allowed: Option<(&[StructId], &Param)>,
    ) -> Result<StructId, CompileError> {
        let name = self.tree.call_parts(call).0;
        if let Some((ids, _)) = allowed {
            // One or two structures, usually: comparing their names is cheaper than hashing.
            let factory = self.factory;
            if let Some(&id) = ids.iter().find(|&&id| factory.structure(id).name() == name) {
                return Ok(id);
            }
        }
        let Some(id) = self.factory.find(name) else {
            return Err(self.error(
                CompileErrorKind::Undefined,
                call,
                format!("no structure `{name}` in the templates"),
            ));
        };
        if let Some((ids, param)) = allowed {
            if !ids.contains(&id) {
                return Err(self.error(
                    CompileErrorKind::Invalid,
                    call,
                    format!(
                        "parameter `{}` takes {}, not `{name}`",
                        param.name(),
                        self.factory.describe_kind(param.kind()),
                    ),
                ));
            }
        }
        Ok(id)
    }

    /// Emits structure `id` with the call's arguments into `seq`.
    fn structure(
        &mut self,
        id: StructId,
        call: NodeId,
        seq: &mut T::Seq,
    ) -> Result<(), CompileError> {
        let (factory, tree) = (self.factory, self.tree);
        let s = factory.structure(id);
        let params = s.params();
        let mut bound: SmallVec<[Option<NodeId>; 8]> = SmallVec::from_elem(None, params.len());
        for &arg in tree.call_parts(call).1 {
            let (arg_name, value) = tree.arg_parts(arg);
            let Some(i) = params.iter().position(|p| p.name() == arg_name) else {
                let names: Vec<&str> = params.iter().map(|p| p.name()).collect();
                return Err(self.error(
                    CompileErrorKind::Undefined,
                    arg,
                    format!(
                        "`{}` has no parameter `{arg_name}` (parameters: {})",
                        s.name(),
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                ));
            };
            if bound[i].replace(value).is_some() {
                return Err(self.error(
                    CompileErrorKind::Invalid,
                    arg,
                    format!("argument `{arg_name}` is given twice"),
                ));
            }
        }
        if let Some(i) =
            (0..params.len()).find(|&i| bound[i].is_none() && params[i].default().is_none())
        {
            return Err(self.error(
                CompileErrorKind::Invalid,
                call,
                format!(
                    "missing argument `{}: {}` of `{}`",
                    params[i].name(),
                    factory.describe_kind(params[i].kind()),
                    s.name()
                ),
            ));
        }
        self.piece(&s.recipe, params, &bound, seq)
    }

    fn piece(
        &mut self,
        piece: &Piece,
        params: &[Param],
        args: &[Option<NodeId>],
        seq: &mut T::Seq,
    ) -> Result<(), CompileError> {
        match piece {
            Piece::Lit { .. } | Piece::Frag { .. } => {
                self.atom(piece, seq);
            }
            Piece::Param(i) => {
                let i = *i as usize;
                self.argument(&params[i], args[i], seq)?
            }
            Piece::Seq(parts) => {
                for p in parts.iter() {
                    // Most of a recipe: emitted here rather than through a recursive call each.
                    if !self.atom(p, seq) {
                        self.piece(p, params, args, seq)?;
                    }
                }
            }
            Piece::Alt(branches) => {
                let mut nodes: SmallVec<[T::Node; 4]> = SmallVec::new();
                for b in branches.iter() {
                    let mut inner = self.target.open();
                    self.piece(b, params, args, &mut inner)?;
                    nodes.push(self.target.close(inner));
                }
                let node = self.target.alt(&nodes);
                self.target.push(seq, node);
            }
            Piece::Repeat { body, min, max } => {
                let mut inner = self.target.open();
                self.piece(body, params, args, &mut inner)?;
                let body = self.target.close(inner);
                let node = self.target.repeat(body, *min, *max);
                self.target.push(seq, node);
            }
        }
        Ok(())
    }

    /// Emits a literal or a fragment; false for the other pieces.
    fn atom(&mut self, piece: &Piece, seq: &mut T::Seq) -> bool {
        match piece {
            Piece::Lit { units, expr } => self.target.lit(seq, units, *expr),
            Piece::Frag { index, expr } => self.target.fragment(seq, *index, *expr),
            _ => return false,
        }
        true
    }

    fn wrong_kind(&self, param: &Param, value: NodeId) -> CompileError {
        let wants = match param.kind() {
            ParamKind::Str => "a string".to_string(),
            ParamKind::Choice => "a choice set {\"a\", \"b\", ...}".to_string(),
            ParamKind::Regex => "a /regex/".to_string(),
            ParamKind::Int => "an integer or a range lo..hi".to_string(),
            ParamKind::Structure(_) => format!(
                "an instance of {}",
                self.factory.describe_kind(param.kind())
            ),
            ParamKind::List { .. } | ParamKind::OneOf(_) => format!(
                "a list of instances ({})",
                self.factory.describe_kind(param.kind())
            ),
        };
        self.error(
            CompileErrorKind::Invalid,
            value,
            format!(
                "parameter `{}` takes {wants}, found {}",
                param.name(),
                self.tree.node(value).kind.describe()
            ),
        )
    }

    fn wrong_kind_element(&self, param: &Param, item: NodeId) -> CompileError {
        self.error(
            CompileErrorKind::Invalid,
            item,
            format!(
                "the elements of `{}` are instances of {}, found {}",
                param.name(),
                self.factory.describe_kind(param.kind()),
                self.tree.node(item).kind.describe()
            ),
        )
    }

    /// A memoized node for an argument value.
    fn node_for(
        &mut self,
        value: NodeId,
        build: impl FnOnce(&mut T) -> Result<T::Node, CompileError>,
    ) -> Result<T::Node, CompileError> {
        if let Some(&(_, node)) = self.memo.iter().find(|(k, _)| *k == value) {
            return Ok(node);
        }
        let node = build(&mut self.target)
            .map_err(|e| e.within((self.locate)(self.tree.node(value).at), "in this argument"))?;
        self.memo.push((value, node));
        Ok(node)
    }

    /// The instances of a list argument, each checked to be a call.
    fn instances(&self, param: &Param, items: &[NodeId]) -> Result<(), CompileError> {
        match items
            .iter()
            .find(|&&i| !matches!(self.tree.node(i).kind, NodeKind::Call { .. }))
        {
            Some(&bad) => Err(self.wrong_kind_element(param, bad)),
            None => Ok(()),
        }
    }

    fn argument(
        &mut self,
        param: &Param,
        value: Option<NodeId>,
        seq: &mut T::Seq,
    ) -> Result<(), CompileError> {
        let tree = self.tree;
        let Some(value) = value else {
            match param.default() {
                Some(ParamDefault::Str(s)) => self.target.text(seq, s.as_bytes()),
                Some(ParamDefault::EmptyList) | None => {}
            }
            return Ok(());
        };
        match (param.kind(), tree.node(value).kind) {
            (ParamKind::Str, NodeKind::Str(s)) => self.target.text(seq, tree.str(s).as_bytes()),
            (ParamKind::Choice, NodeKind::Choice(set)) => match tree.children(set) {
                [] => {
                    return Err(self.error(
                        CompileErrorKind::EmptyLanguage,
                        value,
                        format!(
                            "parameter `{}`: a choice among no strings matches nothing",
                            param.name()
                        ),
                    ))
                }
                [only] => self.target.text(seq, str_of(tree, *only).as_bytes()),
                ids => {
                    let node = self.node_for(value, |t| {
                        let strings: SmallVec<[&str; 16]> =
                            ids.iter().map(|&i| str_of(tree, i)).collect();
                        t.choice(&strings)
                    })?;
                    self.target.push(seq, node);
                }
            },
            (ParamKind::Regex, NodeKind::Regex(pattern)) => {
                let node = self.node_for(value, |t| t.regex(tree.str(pattern)))?;
                self.target.push(seq, node);
            }
            (ParamKind::Int, NodeKind::Int(n)) => self.target.text(seq, n.to_string().as_bytes()),
            (ParamKind::Int, NodeKind::Range(lo, hi)) => {
                let Some(pattern) = int_range_regex(lo, hi) else {
                    return Err(self.error(
                        CompileErrorKind::Invalid,
                        value,
                        format!(
                            "parameter `{}`: empty range {lo}..{hi} (lo > hi)",
                            param.name()
                        ),
                    ));
                };
                let node = self.node_for(value, |t| t.regex(&pattern))?;
                self.target.push(seq, node);
            }
            (ParamKind::Structure(ids), NodeKind::Call { .. }) => {
                let id = self.resolve(value, Some((ids, param)))?;
                self.structure(id, value, seq)?;
            }
            (ParamKind::List { elems, sep }, NodeKind::List(items)) => {
                let items = tree.children(items);
                self.instances(param, items)?;
                for (i, &item) in items.iter().enumerate() {
                    if i > 0 && !sep.is_empty() {
                        self.target.text(seq, sep);
                    }
                    let id = self.resolve(item, Some((elems, param)))?;
                    self.structure(id, item, seq)?;
                }
            }
            (ParamKind::OneOf(elems), NodeKind::List(items)) => {
                let items = tree.children(items);
                if items.is_empty() {
                    return Err(self.error(
                        CompileErrorKind::EmptyLanguage,
                        value,
                        format!(
                            "parameter `{}`: one of no instances matches nothing",
                            param.name()
                        ),
                    ));
                }
                self.instances(param, items)?;
                let mut nodes: SmallVec<[T::Node; 8]> = SmallVec::new();
                for &item in items {
                    let id = self.resolve(item, Some((elems, param)))?;
                    let mut inner = self.target.open();
                    self.structure(id, item, &mut inner)?;
                    nodes.push(self.target.close(inner));
                }
                let node = self.target.alt(&nodes);
                self.target.push(seq, node);
            }
            _ => return Err(self.wrong_kind(param, value)),
        }
        Ok(())
    }
}

/// The text of a choice set's element (the parsers only put strings there).
fn str_of<'t>(tree: &'t Tree, id: NodeId) -> &'t str {
    match tree.node(id).kind {
        NodeKind::Str(s) => tree.str(s),
        other => unreachable!("a choice holds strings, not {other:?}"),
    }
}

/// Assembles an operator program: fragments spliced, literal runs merged into one `Write`.
///
/// The open sequences share two stacks instead of owning their parts, so that nesting costs no
/// allocation and a sequence is two indices.
struct OpsTarget<'f> {
    b: ProgramBuilder,
    factory: &'f StructureFactory,
    /// The operators of the open sequences, innermost last.
    ops: Vec<OpId>,
    /// Literal units not yet written, innermost sequence last.
    pending: Vec<Unit>,
}

/// Where an open sequence's operators and pending units start on the stacks.
struct OpsSeq {
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
    type Node = OpId;
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
struct IrTarget<'f> {
    g: GrammarBuilder,
    factory: &'f StructureFactory,
    copied: HashMap<ExprId, ExprId>,
}

impl IrTarget<'_> {
    fn copy(&mut self, id: ExprId) -> ExprId {
        if let Some(&c) = self.copied.get(&id) {
            return c;
        }
        let grammar = &self.factory.grammar;
        let c = match grammar.expr(id).clone() {
            Expr::Empty => self.g.empty(),
            Expr::Nothing => self.g.nothing(),
            Expr::Bytes(b) => self.g.bytes(&b),
            Expr::Class(c) => self.g.class(c),
            Expr::Special(s) => self.g.special(&s),
            Expr::Seq(xs) => {
                let parts: Vec<ExprId> = xs.iter().map(|&x| self.copy(x)).collect();
                self.g.seq(parts)
            }
            Expr::Alt(xs) => {
                let parts: Vec<ExprId> = xs.iter().map(|&x| self.copy(x)).collect();
                self.g.alt(parts)
            }
            Expr::Repeat { body, min, max } => {
                let body = self.copy(body);
                self.g.repeat(body, min, max)
            }
            Expr::Rule(_) => unreachable!("factory fragments inline their rules"),
        };
        self.copied.insert(id, c);
        c
    }
}

impl Target for IrTarget<'_> {
    type Node = ExprId;
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
        regex_to_ir(pattern, &mut self.g)
    }

    fn alt(&mut self, branches: &[ExprId]) -> ExprId {
        self.g.alt(branches.iter().copied())
    }

    fn repeat(&mut self, body: ExprId, min: u32, max: Option<u32>) -> ExprId {
        self.g.repeat(body, min, max)
    }
}
