//! Binding a request against the factory: one walk over the structure recipes that resolves
//! names, type-checks arguments against parameter kinds, and assembles the result through a
//! [`Target`] — an operator program (the fast path) or grammar IR (the oracle and CFG path).
//! One binder for both, so the two cannot drift apart.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;

use smallvec::SmallVec;

use super::ast::{Call, Value, ValueKind};
use super::range::int_range_regex;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::regex::regex_to_ir;
use crate::ir::{Expr, ExprId, Grammar, GrammarBuilder};
use crate::ops::{Leaf, OpId, Program, ProgramBuilder, Unit};
use crate::template::{Param, ParamDefault, ParamKind, Piece, StructId, StructureFactory};

/// What a binding assembles.
trait Target {
    /// A finished part.
    type Node: Copy;
    /// A sequence being built.
    type Seq: Default;

    fn lit(&mut self, seq: &mut Self::Seq, units: &[Unit], expr: ExprId);
    fn text(&mut self, seq: &mut Self::Seq, text: &[u8]);
    fn fragment(&mut self, seq: &mut Self::Seq, index: u32, expr: ExprId);
    fn push(&mut self, seq: &mut Self::Seq, node: Self::Node);
    fn close(&mut self, seq: Self::Seq) -> Self::Node;
    /// One of at least two strings.
    fn choice(&mut self, strings: &[Cow<str>]) -> Result<Self::Node, CompileError>;
    fn regex(&mut self, pattern: &str) -> Result<Self::Node, CompileError>;
    fn alt(&mut self, branches: &[Self::Node]) -> Self::Node;
    fn repeat(&mut self, body: Self::Node, min: u32, max: Option<u32>) -> Self::Node;
}

pub(super) fn instantiate(
    factory: &StructureFactory,
    root: &Call,
    locate: &dyn Fn(u32) -> Location,
) -> Result<Program, CompileError> {
    let target = OpsTarget {
        b: ProgramBuilder::new(),
        factory,
    };
    let (target, root) = bind(factory, root, locate, target)?;
    target.b.finish(root)
}

pub(super) fn instantiate_ir(
    factory: &StructureFactory,
    root: &Call,
    locate: &dyn Fn(u32) -> Location,
) -> Result<Grammar, CompileError> {
    let target = IrTarget {
        g: GrammarBuilder::new(),
        factory,
        copied: HashMap::new(),
    };
    let (mut target, root) = bind(factory, root, locate, target)?;
    let start = target.g.rule("request");
    target.g.define(start, root)?;
    target.g.finish(start)
}

fn bind<T: Target>(
    factory: &StructureFactory,
    root: &Call,
    locate: &dyn Fn(u32) -> Location,
    target: T,
) -> Result<(T, T::Node), CompileError> {
    let mut binder = Binder {
        factory,
        locate,
        target,
        memo: SmallVec::new(),
    };
    let id = binder.resolve(root, None)?;
    let mut seq = T::Seq::default();
    binder.structure(id, root, &mut seq)?;
    let node = binder.target.close(seq);
    Ok((binder.target, node))
}

struct Binder<'f, 'l, T: Target> {
    factory: &'f StructureFactory,
    locate: &'l dyn Fn(u32) -> Location,
    target: T,
    /// Nodes already built for an argument value (by address): a parameter used several times
    /// (after inlining) builds its choice leaf or regex once.
    memo: SmallVec<[(usize, T::Node); 4]>,
}

impl<T: Target> Binder<'_, '_, T> {
    fn error(&self, kind: CompileErrorKind, at: u32, message: String) -> CompileError {
        CompileError::new(kind, (self.locate)(at), message)
    }

    /// The structure a call names, which must be one of `allowed` (if given).
    fn resolve(
        &self,
        call: &Call,
        allowed: Option<(&[StructId], &Param)>,
    ) -> Result<StructId, CompileError> {
        let Some(id) = self.factory.find(&call.name) else {
            return Err(self.error(
                CompileErrorKind::Undefined,
                call.at,
                format!("no structure `{}` in the templates", call.name),
            ));
        };
        if let Some((ids, param)) = allowed {
            if !ids.contains(&id) {
                return Err(self.error(
                    CompileErrorKind::Invalid,
                    call.at,
                    format!(
                        "parameter `{}` takes {}, not `{}`",
                        param.name(),
                        self.factory.describe_kind(param.kind()),
                        call.name
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
        call: &Call,
        seq: &mut T::Seq,
    ) -> Result<(), CompileError> {
        let factory = self.factory;
        let s = factory.structure(id);
        let params = s.params();
        let mut bound: SmallVec<[Option<&Value>; 8]> = SmallVec::from_elem(None, params.len());
        for arg in &call.args {
            let Some(i) = params.iter().position(|p| p.name() == arg.name) else {
                let names: Vec<&str> = params.iter().map(|p| p.name()).collect();
                return Err(self.error(
                    CompileErrorKind::Undefined,
                    arg.at,
                    format!(
                        "`{}` has no parameter `{}` (parameters: {})",
                        s.name(),
                        arg.name,
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                ));
            };
            if bound[i].replace(&arg.value).is_some() {
                return Err(self.error(
                    CompileErrorKind::Invalid,
                    arg.at,
                    format!("argument `{}` is given twice", arg.name),
                ));
            }
        }
        if let Some(i) =
            (0..params.len()).find(|&i| bound[i].is_none() && params[i].default().is_none())
        {
            return Err(self.error(
                CompileErrorKind::Invalid,
                call.at,
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
        args: &[Option<&Value>],
        seq: &mut T::Seq,
    ) -> Result<(), CompileError> {
        match piece {
            Piece::Lit { units, expr } => self.target.lit(seq, units, *expr),
            Piece::Frag { index, expr } => self.target.fragment(seq, *index, *expr),
            Piece::Param(i) => {
                let i = *i as usize;
                self.argument(&params[i], args[i], seq)?
            }
            Piece::Seq(parts) => {
                for p in parts.iter() {
                    self.piece(p, params, args, seq)?;
                }
            }
            Piece::Alt(branches) => {
                let mut nodes: SmallVec<[T::Node; 4]> = SmallVec::new();
                for b in branches.iter() {
                    let mut inner = T::Seq::default();
                    self.piece(b, params, args, &mut inner)?;
                    nodes.push(self.target.close(inner));
                }
                let node = self.target.alt(&nodes);
                self.target.push(seq, node);
            }
            Piece::Repeat { body, min, max } => {
                let mut inner = T::Seq::default();
                self.piece(body, params, args, &mut inner)?;
                let body = self.target.close(inner);
                let node = self.target.repeat(body, *min, *max);
                self.target.push(seq, node);
            }
        }
        Ok(())
    }

    fn wrong_kind(&self, param: &Param, value: &Value) -> CompileError {
        let wants = match param.kind() {
            ParamKind::Str => "a string".to_string(),
            ParamKind::Choice => "a choice set {\"a\", \"b\", ...}".to_string(),
            ParamKind::Regex => "a /regex/".to_string(),
            ParamKind::Int => "an integer or a range lo..hi".to_string(),
            ParamKind::Structure(_) => format!(
                "an instance of {}",
                self.factory.describe_kind(param.kind())
            ),
            ParamKind::List { .. } | ParamKind::OneOf(_) => {
                format!(
                    "a list of instances ({})",
                    self.factory.describe_kind(param.kind())
                )
            }
        };
        self.error(
            CompileErrorKind::Invalid,
            value.at,
            format!(
                "parameter `{}` takes {wants}, found {}",
                param.name(),
                value.kind.describe()
            ),
        )
    }

    /// A memoized node for an argument value.
    fn node_for(
        &mut self,
        value: &Value,
        build: impl FnOnce(&mut T) -> Result<T::Node, CompileError>,
    ) -> Result<T::Node, CompileError> {
        let key = value as *const Value as usize;
        if let Some(&(_, node)) = self.memo.iter().find(|(k, _)| *k == key) {
            return Ok(node);
        }
        let node = build(&mut self.target)
            .map_err(|e| e.within((self.locate)(value.at), "in this argument"))?;
        self.memo.push((key, node));
        Ok(node)
    }

    fn argument(
        &mut self,
        param: &Param,
        value: Option<&Value>,
        seq: &mut T::Seq,
    ) -> Result<(), CompileError> {
        let Some(value) = value else {
            match param.default() {
                Some(ParamDefault::Str(s)) => self.target.text(seq, s.as_bytes()),
                Some(ParamDefault::EmptyList) | None => {}
            }
            return Ok(());
        };
        match (param.kind(), &value.kind) {
            (ParamKind::Str, ValueKind::Str(s)) => self.target.text(seq, s.as_bytes()),
            (ParamKind::Choice, ValueKind::Choice(set)) => match &set[..] {
                [] => {
                    return Err(self.error(
                        CompileErrorKind::EmptyLanguage,
                        value.at,
                        format!(
                            "parameter `{}`: a choice among no strings matches nothing",
                            param.name()
                        ),
                    ))
                }
                [only] => self.target.text(seq, only.as_bytes()),
                _ => {
                    let node = self.node_for(value, |t| t.choice(set))?;
                    self.target.push(seq, node);
                }
            },
            (ParamKind::Regex, ValueKind::Regex(pattern)) => {
                let node = self.node_for(value, |t| t.regex(pattern))?;
                self.target.push(seq, node);
            }
            (ParamKind::Int, ValueKind::Int(n)) => self.target.text(seq, n.to_string().as_bytes()),
            (ParamKind::Int, &ValueKind::Range(lo, hi)) => {
                let Some(pattern) = int_range_regex(lo, hi) else {
                    return Err(self.error(
                        CompileErrorKind::Invalid,
                        value.at,
                        format!(
                            "parameter `{}`: empty range {lo}..{hi} (lo > hi)",
                            param.name()
                        ),
                    ));
                };
                let node = self.node_for(value, |t| t.regex(&pattern))?;
                self.target.push(seq, node);
            }
            (ParamKind::Structure(ids), ValueKind::Call(call)) => {
                let id = self.resolve(call, Some((ids, param)))?;
                self.structure(id, call, seq)?;
            }
            (ParamKind::List { elems, sep }, ValueKind::List(items)) => {
                for (i, item) in items.iter().enumerate() {
                    let ValueKind::Call(call) = &item.kind else {
                        return Err(self.wrong_kind_element(param, item));
                    };
                    if i > 0 && !sep.is_empty() {
                        self.target.text(seq, sep);
                    }
                    let id = self.resolve(call, Some((elems, param)))?;
                    self.structure(id, call, seq)?;
                }
            }
            (ParamKind::OneOf(elems), ValueKind::List(items)) => {
                if items.is_empty() {
                    return Err(self.error(
                        CompileErrorKind::EmptyLanguage,
                        value.at,
                        format!(
                            "parameter `{}`: one of no instances matches nothing",
                            param.name()
                        ),
                    ));
                }
                let mut nodes: SmallVec<[T::Node; 8]> = SmallVec::new();
                for item in items {
                    let ValueKind::Call(call) = &item.kind else {
                        return Err(self.wrong_kind_element(param, item));
                    };
                    let id = self.resolve(call, Some((elems, param)))?;
                    let mut inner = T::Seq::default();
                    self.structure(id, call, &mut inner)?;
                    nodes.push(self.target.close(inner));
                }
                let node = self.target.alt(&nodes);
                self.target.push(seq, node);
            }
            _ => return Err(self.wrong_kind(param, value)),
        }
        Ok(())
    }

    fn wrong_kind_element(&self, param: &Param, item: &Value) -> CompileError {
        self.error(
            CompileErrorKind::Invalid,
            item.at,
            format!(
                "the elements of `{}` are instances of {}, found {}",
                param.name(),
                self.factory.describe_kind(param.kind()),
                item.kind.describe()
            ),
        )
    }
}

/// Assembles an operator program: fragments spliced, literal runs merged into one `Write`.
struct OpsTarget<'f> {
    b: ProgramBuilder,
    factory: &'f StructureFactory,
}

#[derive(Default)]
struct OpsSeq {
    ops: SmallVec<[OpId; 8]>,
    pending: SmallVec<[Unit; 32]>,
}

impl OpsTarget<'_> {
    fn flush(&mut self, seq: &mut OpsSeq) {
        if !seq.pending.is_empty() {
            seq.ops.push(self.b.write(&seq.pending));
            seq.pending.clear();
        }
    }
}

impl Target for OpsTarget<'_> {
    type Node = OpId;
    type Seq = OpsSeq;

    fn lit(&mut self, seq: &mut OpsSeq, units: &[Unit], _: ExprId) {
        seq.pending.extend_from_slice(units);
    }

    fn text(&mut self, seq: &mut OpsSeq, text: &[u8]) {
        seq.pending.extend(text.iter().map(|&b| Unit::Byte(b)));
    }

    fn fragment(&mut self, seq: &mut OpsSeq, index: u32, _: ExprId) {
        self.flush(seq);
        let op = self.b.splice(&self.factory.fragments[index as usize]);
        seq.ops.push(op);
    }

    fn push(&mut self, seq: &mut OpsSeq, node: OpId) {
        self.flush(seq);
        seq.ops.push(node);
    }

    fn close(&mut self, mut seq: OpsSeq) -> OpId {
        self.flush(&mut seq);
        match seq.ops.len() {
            0 => self.b.empty(),
            _ => self.b.seq(&seq.ops),
        }
    }

    fn choice(&mut self, strings: &[Cow<str>]) -> Result<OpId, CompileError> {
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

    fn choice(&mut self, strings: &[Cow<str>]) -> Result<ExprId, CompileError> {
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
