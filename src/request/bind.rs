//! Binding a request against the factory: one walk over the structure recipes that resolves
//! names, type-checks arguments against parameter kinds, and assembles the result through a
//! [`Target`] — an operator program (the fast path) or grammar IR (the oracle and CFG path).
//! One binder for both, so the two cannot drift apart; the targets are in [`super::target`].

use std::collections::HashMap;

use smallvec::SmallVec;

use super::ast::{NodeId, NodeKind, Tree};
use super::range::int_range_regex;
use super::target::{IrTarget, OpsTarget, Target};
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::ir::{Grammar, GrammarBuilder};
use crate::limits::{Deadline, Limits};
use crate::ops::{Program, ProgramBuilder};
use crate::template::{Param, ParamDefault, ParamKind, Piece, StructId, StructureFactory};

pub(super) fn instantiate(
    factory: &StructureFactory,
    tree: &Tree,
    locate: &dyn Fn(u32) -> Location,
    deadline: &Deadline,
) -> Result<Program, CompileError> {
    // About one operator per request node (a section: its id, a `Write` and two `Wait`s).
    let target = OpsTarget {
        b: ProgramBuilder::with_capacity(tree.num_nodes()),
        factory,
        ops: Vec::with_capacity(tree.num_nodes()),
        pending: Vec::with_capacity(64),
    };
    let (target, root) = bind(factory, tree, locate, target, deadline)?;
    target.b.finish(root)
}

pub(super) fn instantiate_ir(
    factory: &StructureFactory,
    tree: &Tree,
    locate: &dyn Fn(u32) -> Location,
    limits: &Limits,
    deadline: &Deadline,
) -> Result<Grammar, CompileError> {
    let target = IrTarget {
        g: GrammarBuilder::with_limits(limits),
        limits,
        factory,
        copied: HashMap::new(),
    };
    let (mut target, root) = bind(factory, tree, locate, target, deadline)?;
    let start = target.g.rule("request");
    target.g.define(start, root)?;
    target.g.finish(start)
}

fn bind<T: Target>(
    factory: &StructureFactory,
    tree: &Tree,
    locate: &dyn Fn(u32) -> Location,
    target: T,
    deadline: &Deadline,
) -> Result<(T, T::Part), CompileError> {
    let mut binder = Binder {
        factory,
        tree,
        locate,
        target,
        memo: SmallVec::new(),
        deadline,
    };
    let id = binder.resolve(tree.root, None)?;
    let node = binder.run(id, tree.root)?;
    Ok((binder.target, node))
}

struct Binder<'f, 't, T: Target> {
    factory: &'f StructureFactory,
    tree: &'t Tree<'t>,
    locate: &'t dyn Fn(u32) -> Location,
    target: T,
    /// Nodes already built for an argument value: a parameter used several times (after
    /// inlining) builds its choice leaf or regex once.
    memo: SmallVec<[(NodeId, T::Part); 4]>,
    deadline: &'t Deadline,
}

/// A structure being emitted: its parameters and the request's argument for each.
struct Frame<'f> {
    params: &'f [Param],
    args: SmallVec<[Option<NodeId>; 8]>,
}

/// A step of the binding walk. The walk keeps explicit stacks, since requests nest as deeply
/// as `Limits::nesting` allows and recipes as deeply as the templates do: the innermost open
/// sequence (`seqs`) receives what is emitted, and the parts of an alternation being built
/// wait on `nodes`.
enum Step<'f, 't> {
    /// Emits `piece` of the structure in `frame` into the innermost sequence.
    Piece(&'f Piece, usize),
    /// Emits the parts of a sequence from `next` on.
    Parts {
        parts: &'f [Piece],
        next: usize,
        frame: usize,
    },
    /// The innermost sequence is branch `next - 1` of an alternation whose finished branches
    /// are `nodes[base..]`; then branch `next`, or the alternation itself.
    Branch {
        branches: &'f [Piece],
        next: usize,
        frame: usize,
        base: usize,
    },
    /// The innermost sequence is the body of a repetition.
    Repeat { min: u32, max: Option<u32> },
    /// The structure emitted last is done: its frame goes.
    EndStructure,
    /// Emits element `next` of a list argument (after the separator), then the next ones.
    ListItem {
        param: &'f Param,
        elems: &'f [StructId],
        sep: &'f [u8],
        items: &'t [NodeId],
        next: usize,
    },
    /// Like `Branch`, over the instances of a `oneof` argument.
    OneOf {
        param: &'f Param,
        elems: &'f [StructId],
        items: &'t [NodeId],
        next: usize,
        base: usize,
    },
}

impl<'f, 't, T: Target> Binder<'f, 't, T> {
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

    /// Structure `id` with the call's arguments, as one node.
    // Long: one explicit-stack interpreter over the recipes (requests nest as deeply as their
    // input, so no recursion); every arm updates the same four stacks (sequences, frames,
    // waiting parts, steps), which separate functions would all have to take.
    fn run(&mut self, id: StructId, call: NodeId) -> Result<T::Part, CompileError> {
        let mut seqs = vec![self.target.open()];
        let mut frames: Vec<Frame<'f>> = Vec::new();
        let mut nodes: Vec<T::Part> = Vec::new();
        let mut steps: Vec<Step<'f, 't>> = Vec::with_capacity(32);
        self.structure(id, call, &mut frames, &mut steps)?;
        while let Some(step) = steps.pop() {
            self.deadline.tick().map_err(|e| {
                CompileError::over_limit(e, (self.locate)(self.tree.node(call).at), "request")
            })?;
            // The walk opens a sequence before any step that emits into it, and closes it
            // only after: there is always an innermost one.
            let seq = seqs.last_mut().expect("an open sequence");
            match step {
                Step::Piece(piece, frame) => match piece {
                    Piece::Lit { .. } | Piece::Frag { .. } => {
                        self.atom(piece, seq);
                    }
                    Piece::Param(i) => {
                        let i = *i as usize;
                        let f = &frames[frame];
                        let (param, value) = (&f.params[i], f.args[i]);
                        self.argument(param, value, seq, &mut frames, &mut steps, &nodes)?;
                    }
                    Piece::Seq(parts) => steps.push(Step::Parts {
                        parts,
                        next: 0,
                        frame,
                    }),
                    Piece::Alt(branches) => {
                        seqs.push(self.target.open());
                        steps.push(Step::Branch {
                            branches,
                            next: 1,
                            frame,
                            base: nodes.len(),
                        });
                        steps.push(Step::Piece(&branches[0], frame));
                    }
                    Piece::Repeat { body, min, max } => {
                        seqs.push(self.target.open());
                        steps.push(Step::Repeat {
                            min: *min,
                            max: *max,
                        });
                        steps.push(Step::Piece(body, frame));
                    }
                },
                Step::Parts { parts, next, frame } => {
                    // Most of a recipe: literals and fragments are emitted here, without a
                    // step each.
                    let mut i = next;
                    while i < parts.len() && self.atom(&parts[i], seq) {
                        i += 1;
                    }
                    if i < parts.len() {
                        steps.push(Step::Parts {
                            parts,
                            next: i + 1,
                            frame,
                        });
                        steps.push(Step::Piece(&parts[i], frame));
                    }
                }
                Step::Branch {
                    branches,
                    next,
                    frame,
                    base,
                } => {
                    let branch = seqs.pop().expect("the branch's sequence");
                    nodes.push(self.target.close(branch));
                    match branches.get(next) {
                        Some(b) => {
                            seqs.push(self.target.open());
                            steps.push(Step::Branch {
                                branches,
                                next: next + 1,
                                frame,
                                base,
                            });
                            steps.push(Step::Piece(b, frame));
                        }
                        None => self.alt(&mut nodes, base, &mut seqs),
                    }
                }
                Step::Repeat { min, max } => {
                    let body = seqs.pop().expect("the body's sequence");
                    let body = self.target.close(body);
                    let node = self.target.repeat(body, min, max);
                    let seq = seqs.last_mut().expect("an open sequence");
                    self.target.push(seq, node);
                }
                Step::EndStructure => {
                    frames.pop();
                }
                Step::ListItem {
                    param,
                    elems,
                    sep,
                    items,
                    next,
                } => {
                    let Some(&item) = items.get(next) else {
                        continue;
                    };
                    if next > 0 && !sep.is_empty() {
                        self.target.text(seq, sep);
                    }
                    let id = self.resolve(item, Some((elems, param)))?;
                    steps.push(Step::ListItem {
                        param,
                        elems,
                        sep,
                        items,
                        next: next + 1,
                    });
                    self.structure(id, item, &mut frames, &mut steps)?;
                }
                Step::OneOf {
                    param,
                    elems,
                    items,
                    next,
                    base,
                } => {
                    if next > 0 {
                        let instance = seqs.pop().expect("the instance's sequence");
                        nodes.push(self.target.close(instance));
                    }
                    match items.get(next) {
                        Some(&item) => {
                            let id = self.resolve(item, Some((elems, param)))?;
                            seqs.push(self.target.open());
                            steps.push(Step::OneOf {
                                param,
                                elems,
                                items,
                                next: next + 1,
                                base,
                            });
                            self.structure(id, item, &mut frames, &mut steps)?;
                        }
                        None => self.alt(&mut nodes, base, &mut seqs),
                    }
                }
            }
        }
        let seq = seqs.pop().expect("the structure's sequence");
        Ok(self.target.close(seq))
    }

    /// The alternation of `nodes[base..]`, emitted into the innermost sequence.
    fn alt(&mut self, nodes: &mut Vec<T::Part>, base: usize, seqs: &mut [T::Seq]) {
        let node = self.target.alt(&nodes[base..]);
        nodes.truncate(base);
        let seq = seqs.last_mut().expect("an open sequence");
        self.target.push(seq, node);
    }

    /// Binds the call's arguments to structure `id`'s parameters and schedules its recipe.
    fn structure(
        &mut self,
        id: StructId,
        call: NodeId,
        frames: &mut Vec<Frame<'f>>,
        steps: &mut Vec<Step<'f, 't>>,
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
        frames.push(Frame {
            params,
            args: bound,
        });
        steps.push(Step::EndStructure);
        steps.push(Step::Piece(&s.recipe, frames.len() - 1));
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
        build: impl FnOnce(&mut T) -> Result<T::Part, CompileError>,
    ) -> Result<T::Part, CompileError> {
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

    /// Emits the argument `value` of `param` into `seq`, or schedules the steps that emit it
    /// (instances of structures; `nodes` is where an alternation's branches will wait).
    // Long: one match over the pairs of parameter kind and argument kind a request may bind.
    fn argument(
        &mut self,
        param: &'f Param,
        value: Option<NodeId>,
        seq: &mut T::Seq,
        frames: &mut Vec<Frame<'f>>,
        steps: &mut Vec<Step<'f, 't>>,
        nodes: &[T::Part],
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
                self.structure(id, value, frames, steps)?;
            }
            (ParamKind::List { elems, sep }, NodeKind::List(items)) => {
                let items = tree.children(items);
                self.instances(param, items)?;
                steps.push(Step::ListItem {
                    param,
                    elems,
                    sep,
                    items,
                    next: 0,
                });
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
                steps.push(Step::OneOf {
                    param,
                    elems,
                    items,
                    next: 0,
                    base: nodes.len(),
                });
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
