//! Lowering checked templates into recipes: prebuilt operator fragments and literals around
//! parameter holes.
//!
//! Inside a structure's body, every stretch that does not depend on a parameter is turned into
//! IR once and cut where operators would be cut anyway: at special tokens and at `text*
//! <special>` (a `Wait`). Each piece in between is lowered with DFA fusion into a fragment —
//! usually a single leaf, which instantiation shares by `Arc` without copying anything.
//! Literal units (special tokens, and text at the edges of a stretch) are kept as units, so that
//! instantiation merges them with the request's literal arguments into one `Write`
//! (`<|vision_end|>\n<|vision_start|>` + `"1.2"` + `" "`). Calls of parameterised rules are
//! inlined with their arguments substituted.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use super::check::{Files, RArg, RExpr, RKind, RRule};
use super::tables::WriteTable;
use super::{Param, ParamDefault, StructId, Structure, StructureFactory};
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::regex::regex_to_ir;
use crate::ir::{Expr, ExprId, GrammarBuilder};
use crate::ops::{lower, LeafOp, LowerConfig, Program, RegexCompiler, Unit};
use crate::vocab::{TokenId, Vocab};

/// A structure's recipe: what instantiation assembles, given the request's arguments.
#[derive(Clone, Debug)]
pub(crate) enum Piece {
    /// Literal units; `expr` is their IR in the factory's grammar.
    Lit {
        units: Box<[Unit]>,
        expr: ExprId,
    },
    /// A prebuilt fragment: `StructureFactory::fragments[index]`, IR `expr`.
    Frag {
        index: u32,
        expr: ExprId,
    },
    /// The structure's parameter.
    Param(u16),
    Seq(Box<[Piece]>),
    Alt(Box<[Piece]>),
    Repeat {
        body: Box<Piece>,
        min: u32,
        max: Option<u32>,
    },
}

/// A prebuilt fragment of a recipe.
#[derive(Debug)]
pub(crate) enum Fragment {
    /// One leaf: added to a request's program by `Arc`, no copy.
    Leaf(LeafOp),
    /// Anything else: spliced.
    Program(Arc<Program>),
}

/// The pieces of a fixed stretch being cut (see `Build::fixed_run`).
#[derive(Default)]
struct Run {
    out: Vec<Piece>,
    literal: Vec<ExprId>,
    stretch: Vec<ExprId>,
}

/// What a parameter of the rule being expanded stands for.
#[derive(Clone)]
enum Subst {
    /// A parameter of the structure being built (a hole).
    Param(u16),
    /// Fixed text (a string argument or default).
    Lit(Vec<u8>),
    /// An empty list (a default).
    Empty,
}

struct Build<'a> {
    files: &'a Files,
    rules: &'a [RRule],
    vocab: &'a Vocab,
    g: GrammarBuilder,
    rule_ir: HashMap<usize, ExprId>,
    fragment_of: HashMap<ExprId, u32>,
    /// Each fragment's expression and where it starts (rule, offset), for errors.
    fragments: Vec<(ExprId, usize, usize)>,
    specials: BTreeMap<String, TokenId>,
}

pub(crate) fn build(
    files: &Files,
    rules: Vec<RRule>,
    vocab: &Vocab,
    config: &LowerConfig,
    regex: Arc<RegexCompiler>,
) -> Result<StructureFactory, CompileError> {
    let mut b = Build {
        files,
        rules: &rules,
        vocab,
        g: GrammarBuilder::new(),
        rule_ir: HashMap::new(),
        fragment_of: HashMap::new(),
        fragments: Vec::new(),
        specials: BTreeMap::new(),
    };
    let mut recipes = Vec::with_capacity(rules.len());
    for (r, rule) in rules.iter().enumerate() {
        let subst: Vec<Subst> = (0..rule.params.len() as u16).map(Subst::Param).collect();
        recipes.push(b.piece(r, &rule.body, &subst)?);
    }
    let Build {
        mut g,
        fragments,
        specials,
        ..
    } = b;
    let start = g.rule("<templates>");
    let empty = g.empty();
    g.define(start, empty)?;
    let grammar = g.finish(start)?;
    let programs = fragments
        .iter()
        .map(|&(expr, rule, at)| {
            let program = lower(&grammar, expr, vocab, config).map_err(|e| {
                let r = &rules[rule];
                CompileError::new(
                    e.kind(),
                    files.loc(r.file, at),
                    format!("in rule `{}`: {}", r.name, e.message()),
                )
            })?;
            Ok(match program.as_leaf() {
                Some(leaf) => Fragment::Leaf(LeafOp::new(leaf.clone())),
                None => Fragment::Program(Arc::new(program)),
            })
        })
        .collect::<Result<Vec<_>, CompileError>>()?;
    let structures: Vec<Structure> = rules
        .into_iter()
        .zip(recipes)
        .map(|(rule, recipe)| Structure {
            location: files.loc(rule.file, rule.at),
            name: rule.name,
            params: rule
                .params
                .into_iter()
                .map(|p| Param {
                    name: p.name,
                    kind: p.kind,
                    default: p.default,
                })
                .collect(),
            recipe,
        })
        .collect();
    let by_name = structures
        .iter()
        .enumerate()
        .map(|(i, s)| (s.name.clone(), StructId(i as u32)))
        .collect();
    Ok(StructureFactory {
        structures,
        by_name,
        specials,
        grammar,
        fragments: programs,
        writes: WriteTable::new(),
        regex,
        vocab: vocab.clone(),
    })
}

impl Build<'_> {
    fn loc(&self, owner: usize, at: usize) -> Location {
        self.files.loc(self.rules[owner].file, at)
    }

    /// The argument substitution for a call of `callee` from a rule expanded with `subst`.
    fn call_subst(&self, callee: usize, args: &[RArg], subst: &[Subst]) -> Vec<Subst> {
        args.iter()
            .zip(&self.rules[callee].params)
            .map(|(a, p)| match a {
                RArg::Param(i) => subst[*i].clone(),
                RArg::Str(bytes) => Subst::Lit(bytes.clone()),
                RArg::Default => match &p.default {
                    Some(ParamDefault::Str(s)) => Subst::Lit(s.as_bytes().to_vec()),
                    Some(ParamDefault::EmptyList) => Subst::Empty,
                    None => unreachable!("the checker binds parameters without defaults"),
                },
            })
            .collect()
    }

    /// True if `e` does not depend on the structure's parameters.
    fn is_fixed(&self, e: &RExpr, subst: &[Subst]) -> bool {
        match &e.kind {
            RKind::Param(i) => !matches!(subst[*i], Subst::Param(_)),
            RKind::Call(callee, args) => {
                let inner = self.call_subst(*callee, args, subst);
                self.is_fixed(&self.rules[*callee].body, &inner)
            }
            RKind::Seq(xs) | RKind::Alt(xs) => xs.iter().all(|x| self.is_fixed(x, subst)),
            RKind::Repeat { body, .. } => self.is_fixed(body, subst),
            _ => true,
        }
    }

    fn piece(&mut self, owner: usize, e: &RExpr, subst: &[Subst]) -> Result<Piece, CompileError> {
        if self.is_fixed(e, subst) {
            let mut pieces = self.fixed_run(owner, &[e], subst)?;
            return Ok(match pieces.len() {
                1 => pieces.pop().unwrap(),
                _ => Piece::Seq(pieces.into()),
            });
        }
        Ok(match &e.kind {
            RKind::Param(i) => match subst[*i] {
                Subst::Param(p) => Piece::Param(p),
                _ => unreachable!("fixed parameters are handled above"),
            },
            RKind::Call(callee, args) => {
                let inner = self.call_subst(*callee, args, subst);
                let rules = self.rules;
                self.piece(*callee, &rules[*callee].body, &inner)?
            }
            RKind::Seq(items) => {
                let mut out = Vec::new();
                let mut run: Vec<&RExpr> = Vec::new();
                for item in items {
                    if self.is_fixed(item, subst) {
                        run.push(item);
                        continue;
                    }
                    out.extend(self.fixed_run(owner, &run, subst)?);
                    run.clear();
                    out.push(self.piece(owner, item, subst)?);
                }
                out.extend(self.fixed_run(owner, &run, subst)?);
                Piece::Seq(out.into())
            }
            RKind::Alt(branches) => Piece::Alt(
                branches
                    .iter()
                    .map(|b| self.piece(owner, b, subst))
                    .collect::<Result<Vec<_>, _>>()?
                    .into(),
            ),
            RKind::Repeat { body, min, max } => Piece::Repeat {
                body: Box::new(self.piece(owner, body, subst)?),
                min: *min,
                max: *max,
            },
            _ => unreachable!("atoms are fixed"),
        })
    }

    /// Pieces for a stretch of fixed items, cut where operators are cut anyway: literal units
    /// (special tokens; text unless inside a fused stretch), `text* <special>` groups (one
    /// `Wait` each), and maximal stretches in between (fused into one DFA where they fit).
    fn fixed_run(
        &mut self,
        owner: usize,
        items: &[&RExpr],
        subst: &[Subst],
    ) -> Result<Vec<Piece>, CompileError> {
        let mut ids = Vec::with_capacity(items.len());
        for item in items {
            ids.push(self.ir(owner, item, subst)?);
        }
        let whole = self.g.seq(ids.iter().copied());
        let parts: Vec<ExprId> = match self.g.expr(whole) {
            Expr::Seq(xs) => xs.to_vec(),
            Expr::Empty => Vec::new(),
            _ => vec![whole],
        };
        let at = items.first().map_or(self.rules[owner].at, |e| e.at);
        let mut run = Run::default();
        let mut i = 0;
        while i < parts.len() {
            if self.is_wait(&parts[i..]) {
                self.flush_stretch(&mut run, owner, at);
                self.flush_literal(&mut run);
                let piece = self.fragment(&parts[i..i + 2], owner, at);
                run.out.push(piece);
                i += 2;
                continue;
            }
            match self.g.expr(parts[i]) {
                Expr::Special(_) => {
                    self.flush_stretch(&mut run, owner, at);
                    run.literal.push(parts[i]);
                }
                Expr::Bytes(_) if run.stretch.is_empty() => run.literal.push(parts[i]),
                _ => {
                    self.flush_literal(&mut run);
                    run.stretch.push(parts[i]);
                }
            }
            i += 1;
        }
        self.flush_stretch(&mut run, owner, at);
        self.flush_literal(&mut run);
        Ok(run.out)
    }

    /// `text* <special>` (or a choice of specials): what `lower` makes one `Wait`.
    fn is_wait(&self, parts: &[ExprId]) -> bool {
        let [first, second, ..] = parts else {
            return false;
        };
        let is_special = |e: ExprId| matches!(self.g.expr(e), Expr::Special(_));
        matches!(
            self.g.expr(*first),
            Expr::Repeat {
                min: 0,
                max: None,
                ..
            }
        ) && match self.g.expr(*second) {
            Expr::Alt(xs) => xs.iter().all(|&x| is_special(x)),
            _ => is_special(*second),
        }
    }

    /// Ends the pending stretch: its text tail becomes literal units, the rest a fragment.
    fn flush_stretch(&mut self, run: &mut Run, owner: usize, at: usize) {
        let keep = run
            .stretch
            .iter()
            .rposition(|&e| !matches!(self.g.expr(e), Expr::Bytes(_)))
            .map_or(0, |p| p + 1);
        let tail = run.stretch.split_off(keep);
        if !run.stretch.is_empty() {
            let stretch = std::mem::take(&mut run.stretch);
            let piece = self.fragment(&stretch, owner, at);
            run.out.push(piece);
        }
        run.literal.extend(tail);
    }

    fn flush_literal(&mut self, run: &mut Run) {
        if run.literal.is_empty() {
            return;
        }
        let units: Vec<Unit> = run
            .literal
            .iter()
            .flat_map(|&p| self.literal_units(p).expect("literal parts"))
            .collect();
        let expr = self.g.seq(run.literal.drain(..));
        run.out.push(Piece::Lit {
            units: units.into(),
            expr,
        });
    }

    /// The fragment of `parts` (shared with every equal fragment of the templates).
    fn fragment(&mut self, parts: &[ExprId], owner: usize, at: usize) -> Piece {
        let expr = self.g.seq(parts.iter().copied());
        let index = match self.fragment_of.get(&expr) {
            Some(&i) => i,
            None => {
                let i = self.fragments.len() as u32;
                self.fragments.push((expr, owner, at));
                self.fragment_of.insert(expr, i);
                i
            }
        };
        Piece::Frag { index, expr }
    }

    fn literal_units(&self, e: ExprId) -> Option<Vec<Unit>> {
        match self.g.expr(e) {
            Expr::Bytes(b) => Some(b.iter().map(|&x| Unit::Byte(x)).collect()),
            Expr::Special(name) => Some(vec![Unit::Special(self.specials[&**name])]),
            _ => None,
        }
    }

    /// The IR of a fixed expression.
    fn ir(&mut self, owner: usize, e: &RExpr, subst: &[Subst]) -> Result<ExprId, CompileError> {
        Ok(match &e.kind {
            RKind::Bytes(b) => self.g.bytes(b),
            RKind::Class(text) => self.regex(owner, e.at, "character class", text)?,
            RKind::Regex(text) => self.regex(owner, e.at, "regex", text)?,
            RKind::Special(name) => {
                let Some(id) = self.vocab.special_id(name) else {
                    return Err(CompileError::new(
                        CompileErrorKind::UnknownSpecialToken,
                        self.loc(owner, e.at),
                        format!(
                            "`{name}` is not a special token of the vocabulary {}; if the model writes it as ordinary text, use the string {name:?}",
                            self.vocab.source()
                        ),
                    ));
                };
                self.specials.insert(name.clone(), id);
                self.g.special(name)
            }
            RKind::Param(i) => match &subst[*i] {
                Subst::Lit(bytes) => self.g.bytes(bytes),
                Subst::Empty => self.g.empty(),
                Subst::Param(_) => unreachable!("only fixed expressions have IR here"),
            },
            RKind::Rule(r) => match self.rule_ir.get(r) {
                Some(&id) => id,
                None => {
                    let rules = self.rules;
                    let id = self.ir(*r, &rules[*r].body, &[])?;
                    self.rule_ir.insert(*r, id);
                    id
                }
            },
            RKind::Call(callee, args) => {
                let inner = self.call_subst(*callee, args, subst);
                let rules = self.rules;
                self.ir(*callee, &rules[*callee].body, &inner)?
            }
            RKind::Seq(xs) | RKind::Alt(xs) => {
                let mut ids = Vec::with_capacity(xs.len());
                for x in xs {
                    ids.push(self.ir(owner, x, subst)?);
                }
                if matches!(e.kind, RKind::Seq(_)) {
                    self.g.seq(ids)
                } else {
                    self.g.alt(ids)
                }
            }
            RKind::Repeat { body, min, max } => {
                let body = self.ir(owner, body, subst)?;
                self.g.repeat(body, *min, *max)
            }
        })
    }

    fn regex(
        &mut self,
        owner: usize,
        at: usize,
        what: &str,
        text: &str,
    ) -> Result<ExprId, CompileError> {
        regex_to_ir(text, &mut self.g)
            .map_err(|e| e.within(self.loc(owner, at), &format!("in {what} `{text}`")))
    }
}
