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
use super::factory::StructureFactory;
use super::recipe::{Fragment, Piece};
use super::structure::{Param, ParamDefault, StructId, Structure};
use super::tables::WriteTable;
use crate::base::token::TokenId;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::regex::regex_to_ir_with;
use crate::ir::{Expr, ExprId, GrammarBuilder};
use crate::limits::{Deadline, LimitExceeded, LimitKind, Limits};
use crate::ops::{lower, LeafOp, LowerConfig, RegexCompiler, Unit};
use crate::vocab::Vocab;

/// What a build takes from its [`FactoryBuilder`](super::FactoryBuilder).
pub(super) struct BuildOptions<'a> {
    pub vocab: &'a Vocab,
    pub lower: &'a LowerConfig,
    pub limits: &'a Limits,
    /// Shared with the caller, or a new one with `lower`.
    pub regex: Option<Arc<RegexCompiler>>,
    /// Budget of the table of request literals.
    pub literal_bytes: usize,
}

/// The pieces of a fixed stretch being cut (see `Build::fixed_run`).
#[derive(Default)]
struct Run {
    out: Vec<Piece>,
    literal: Vec<ExprId>,
    stretch: Vec<ExprId>,
}

/// What a parameter of the rule being expanded stands for.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Subst {
    /// A parameter of the structure being built (a hole).
    Param(u16),
    /// Fixed text (a string argument or default).
    Lit(Vec<u8>),
    /// An empty list (a default).
    Empty,
}

/// Index of an argument substitution in `Build::substs`.
type SubstId = u32;

struct Build<'a> {
    files: &'a Files,
    rules: &'a [RRule],
    vocab: &'a Vocab,
    limits: &'a Limits,
    g: GrammarBuilder,
    /// Every argument substitution met, interned, so that a rule expanded twice with the same
    /// arguments is one key of `expansions`.
    substs: Vec<Vec<Subst>>,
    subst_ids: HashMap<Vec<Subst>, SubstId>,
    /// The IR of each fixed rule body already built, by (rule, substitution): a rule called
    /// twice from each of a chain of callers is built once, not once per path.
    expansions: HashMap<(usize, SubstId), ExprId>,
    fragment_of: HashMap<ExprId, u32>,
    /// Each fragment's expression and where it starts (rule, offset), for errors.
    fragments: Vec<(ExprId, usize, usize)>,
    specials: BTreeMap<String, TokenId>,
    /// Recipe pieces built so far, against `Limits::grammar_size` (a recipe inlines its calls
    /// with their arguments, so a chain of rules each calling the next twice doubles per link).
    pieces: u64,
    max_pieces: u64,
    deadline: &'a Deadline,
}

/// The factory of the checked `rules`, with the options of `options`.
// Long: the factory's stages in order: each structure's recipe over the shared builder, the
// grammar finished once, each fragment lowered to an operator program, the structures indexed
// by name; every stage reads the tables the one before left in `Build`.
pub(super) fn build(
    files: &Files,
    rules: Vec<RRule>,
    options: &BuildOptions,
    deadline: &Deadline,
) -> Result<StructureFactory, CompileError> {
    let (vocab, config, limits) = (options.vocab, options.lower, options.limits);
    let regex = options
        .regex
        .clone()
        .unwrap_or_else(|| Arc::new(RegexCompiler::with_config(*config)));
    let mut b = Build {
        files,
        rules: &rules,
        vocab,
        limits,
        g: GrammarBuilder::with_limits(limits),
        substs: Vec::new(),
        subst_ids: HashMap::new(),
        expansions: HashMap::new(),
        fragment_of: HashMap::new(),
        fragments: Vec::new(),
        specials: BTreeMap::new(),
        pieces: 0,
        max_pieces: limits.get(LimitKind::GrammarSize),
        deadline,
    };
    let mut recipes = Vec::with_capacity(rules.len());
    for (r, rule) in rules.iter().enumerate() {
        // A rule has fewer parameters than tokens (`syntax::MAX_RULE_TOKENS`): they fit 16 bits.
        let subst: Vec<Subst> = (0..rule.params.len() as u16).map(Subst::Param).collect();
        let subst = b.subst_id(subst);
        recipes.push(b.piece(r, &rule.body, subst)?);
        b.g.check()
            .map_err(|e| e.or_at(files.loc(rule.file, rule.at)))?;
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
            deadline.check().map_err(|e| {
                CompileError::over_limit(e, files.loc(rules[rule].file, at), "templates")
            })?;
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
        writes: WriteTable::new(options.literal_bytes),
        regex,
        vocab: vocab.clone(),
    })
}

/// A step of [`Build::piece`]'s walk.
enum PieceStep<'r> {
    /// Build the recipe of `e` (a value).
    Visit {
        owner: usize,
        e: &'r RExpr,
        subst: SubstId,
    },
    /// Go on with a sequence from `items[next]` (its pieces so far are the innermost open
    /// sequence); `take` first moves the last value into it.
    Seq {
        owner: usize,
        items: &'r [RExpr],
        next: usize,
        subst: SubstId,
        take: bool,
    },
    /// The last `n` values are the branches of an alternation.
    Alt(usize),
    /// The last value is the body of a repetition.
    Repeat { min: u32, max: Option<u32> },
}

/// A step of [`Build::ir`]'s walk.
enum IrStep<'r> {
    Visit {
        owner: usize,
        e: &'r RExpr,
        subst: SubstId,
    },
    /// The last `n` values are the parts of `e` (a sequence, an alternation or a repetition).
    Build(&'r RExpr, usize),
    /// The last value is the expansion of this rule with this substitution.
    Expanded(usize, SubstId),
}

impl Build<'_> {
    fn loc(&self, owner: usize, at: usize) -> Location {
        self.files.loc(self.rules[owner].file, at)
    }

    fn subst_id(&mut self, subst: Vec<Subst>) -> SubstId {
        if let Some(&id) = self.subst_ids.get(&subst) {
            return id;
        }
        let id = self.substs.len() as SubstId;
        self.substs.push(subst.clone());
        self.subst_ids.insert(subst, id);
        id
    }

    /// The argument substitution for a call of `callee` from a rule expanded with `subst`.
    fn call_subst(&mut self, callee: usize, args: &[RArg], subst: SubstId) -> SubstId {
        let outer = &self.substs[subst as usize];
        let inner = args
            .iter()
            .zip(&self.rules[callee].params)
            .map(|(a, p)| match a {
                RArg::Param(i) => outer[*i].clone(),
                RArg::Str(bytes) => Subst::Lit(bytes.clone()),
                RArg::Default => match &p.default {
                    Some(ParamDefault::Str(s)) => Subst::Lit(s.as_bytes().to_vec()),
                    Some(ParamDefault::EmptyList) => Subst::Empty,
                    None => unreachable!("the checker binds parameters without defaults"),
                },
            })
            .collect();
        self.subst_id(inner)
    }

    /// True if `e` does not depend on the structure's parameters.
    fn is_fixed(&self, e: &RExpr, subst: SubstId) -> bool {
        let subst = &self.substs[subst as usize];
        e.uses
            .iter()
            .all(|&i| !matches!(subst[i as usize], Subst::Param(_)))
    }

    /// One more step of a walk: the compile deadline and the size of what is built.
    fn step(&mut self, owner: usize, at: usize) -> Result<(), CompileError> {
        self.pieces += 1;
        let over = match self.pieces > self.max_pieces {
            true => Some(LimitExceeded {
                kind: LimitKind::GrammarSize,
                value: self.pieces,
                max: self.max_pieces,
            }),
            false => self.deadline.tick().err(),
        };
        match over {
            Some(e) => Err(CompileError::over_limit(
                e,
                self.loc(owner, at),
                "template recipes",
            )),
            None => Ok(()),
        }
    }

    /// The recipe of `e` in rule `owner` expanded with `subst`. Iterative: calls are inlined,
    /// and chains of rules are as long as the templates.
    // Long: one explicit-stack expansion of a recipe (calls are inlined, rule chains are as long
    // as the templates); every arm works on the same step, value and open-sequence stacks.
    fn piece(&mut self, owner: usize, e: &RExpr, subst: SubstId) -> Result<Piece, CompileError> {
        let rules = self.rules;
        let mut steps = vec![PieceStep::Visit { owner, e, subst }];
        let mut values: Vec<Piece> = Vec::new();
        let mut open: Vec<Vec<Piece>> = Vec::new();
        while let Some(step) = steps.pop() {
            match step {
                PieceStep::Visit { owner, e, subst } => {
                    self.step(owner, e.at)?;
                    if self.is_fixed(e, subst) {
                        let mut pieces = self.fixed_run(owner, &[e], subst)?;
                        values.push(match pieces.len() {
                            1 => pieces.pop().expect("one piece"),
                            _ => Piece::Seq(pieces.into()),
                        });
                        continue;
                    }
                    match &e.kind {
                        RKind::Param(i) => match self.substs[subst as usize][*i] {
                            Subst::Param(p) => values.push(Piece::Param(p)),
                            _ => unreachable!("fixed parameters are handled above"),
                        },
                        RKind::Call(callee, args) => {
                            let inner = self.call_subst(*callee, args, subst);
                            steps.push(PieceStep::Visit {
                                owner: *callee,
                                e: &rules[*callee].body,
                                subst: inner,
                            });
                        }
                        RKind::Seq(items) => {
                            open.push(Vec::new());
                            steps.push(PieceStep::Seq {
                                owner,
                                items,
                                next: 0,
                                subst,
                                take: false,
                            });
                        }
                        RKind::Alt(branches) => {
                            steps.push(PieceStep::Alt(branches.len()));
                            steps.extend(branches.iter().rev().map(|b| PieceStep::Visit {
                                owner,
                                e: b,
                                subst,
                            }));
                        }
                        RKind::Repeat { body, min, max } => {
                            steps.push(PieceStep::Repeat {
                                min: *min,
                                max: *max,
                            });
                            steps.push(PieceStep::Visit {
                                owner,
                                e: body,
                                subst,
                            });
                        }
                        _ => unreachable!("atoms are fixed"),
                    }
                }
                PieceStep::Seq {
                    owner,
                    items,
                    next,
                    subst,
                    take,
                } => {
                    // `Visit` opened the sequence; `take` follows a visit, which left a value.
                    let out = open.last_mut().expect("an open sequence");
                    if take {
                        out.push(values.pop().expect("the visited item"));
                    }
                    let end = items[next..]
                        .iter()
                        .position(|item| !self.is_fixed(item, subst))
                        .map_or(items.len(), |k| next + k);
                    let run: Vec<&RExpr> = items[next..end].iter().collect();
                    let pieces = self.fixed_run(owner, &run, subst)?;
                    let out = open.last_mut().expect("an open sequence");
                    out.extend(pieces);
                    if end == items.len() {
                        let parts = open.pop().expect("an open sequence");
                        values.push(Piece::Seq(parts.into()));
                        continue;
                    }
                    steps.push(PieceStep::Seq {
                        owner,
                        items,
                        next: end + 1,
                        subst,
                        take: true,
                    });
                    steps.push(PieceStep::Visit {
                        owner,
                        e: &items[end],
                        subst,
                    });
                }
                PieceStep::Alt(n) => {
                    let branches = values.split_off(values.len() - n);
                    values.push(Piece::Alt(branches.into()));
                }
                PieceStep::Repeat { min, max } => {
                    let body = values.pop().expect("the repeated body");
                    values.push(Piece::Repeat {
                        body: Box::new(body),
                        min,
                        max,
                    });
                }
            }
        }
        // Each visit leaves one value, and the composite steps consume their parts'.
        Ok(values.pop().expect("the recipe"))
    }

    /// Pieces for a stretch of fixed items, cut where operators are cut anyway: literal units
    /// (special tokens; text unless inside a fused stretch), `text* <special>` groups (one
    /// `Wait` each), and maximal stretches in between (fused into one DFA where they fit).
    fn fixed_run(
        &mut self,
        owner: usize,
        items: &[&RExpr],
        subst: SubstId,
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

    /// The IR of a fixed expression. Iterative (post-order on an explicit stack), each rule
    /// body built once per argument substitution.
    fn ir(&mut self, owner: usize, e: &RExpr, subst: SubstId) -> Result<ExprId, CompileError> {
        let rules = self.rules;
        let mut steps = vec![IrStep::Visit { owner, e, subst }];
        let mut values: Vec<ExprId> = Vec::new();
        while let Some(step) = steps.pop() {
            let value = match step {
                IrStep::Visit { owner, e, subst } => {
                    self.step(owner, e.at)?;
                    match &e.kind {
                        RKind::Bytes(b) => self.g.bytes(b),
                        RKind::Class(text) => self.regex(owner, e.at, "character class", text)?,
                        RKind::Regex(text) => self.regex(owner, e.at, "regex", text)?,
                        RKind::Special(name) => self.special(owner, e.at, name)?,
                        RKind::Param(i) => match &self.substs[subst as usize][*i] {
                            Subst::Lit(bytes) => self.g.bytes(bytes),
                            Subst::Empty => self.g.empty(),
                            Subst::Param(_) => unreachable!("only fixed expressions have IR here"),
                        },
                        RKind::Rule(r) | RKind::Call(r, _) => {
                            let inner = match &e.kind {
                                RKind::Call(_, args) => self.call_subst(*r, args, subst),
                                _ => self.subst_id(Vec::new()),
                            };
                            match self.expansions.get(&(*r, inner)) {
                                Some(&id) => id,
                                None => {
                                    steps.push(IrStep::Expanded(*r, inner));
                                    steps.push(IrStep::Visit {
                                        owner: *r,
                                        e: &rules[*r].body,
                                        subst: inner,
                                    });
                                    continue;
                                }
                            }
                        }
                        RKind::Seq(xs) | RKind::Alt(xs) => {
                            steps.push(IrStep::Build(e, xs.len()));
                            steps.extend(xs.iter().rev().map(|x| IrStep::Visit {
                                owner,
                                e: x,
                                subst,
                            }));
                            continue;
                        }
                        RKind::Repeat { body, .. } => {
                            steps.push(IrStep::Build(e, 1));
                            steps.push(IrStep::Visit {
                                owner,
                                e: body,
                                subst,
                            });
                            continue;
                        }
                    }
                }
                IrStep::Build(e, n) => {
                    let parts = values.split_off(values.len() - n);
                    match &e.kind {
                        RKind::Seq(_) => self.g.seq(parts),
                        RKind::Alt(_) => self.g.alt(parts),
                        RKind::Repeat { min, max, .. } => self.g.repeat(parts[0], *min, *max),
                        _ => unreachable!("only composite expressions are built from parts"),
                    }
                }
                IrStep::Expanded(r, inner) => {
                    let id = *values.last().expect("the expansion");
                    self.expansions.insert((r, inner), id);
                    continue;
                }
            };
            values.push(value);
        }
        // Each visit leaves one value, and the composite steps consume their parts'.
        Ok(values.pop().expect("the expression's IR"))
    }

    fn special(&mut self, owner: usize, at: usize, name: &str) -> Result<ExprId, CompileError> {
        let Some(id) = self.vocab.special_id(name) else {
            return Err(CompileError::new(
                CompileErrorKind::UnknownSpecialToken,
                self.loc(owner, at),
                format!(
                    "`{name}` is not a special token of the vocabulary {}; if the model writes it as ordinary text, use the string {name:?}",
                    self.vocab.source()
                ),
            ));
        };
        self.specials.insert(name.to_string(), id);
        Ok(self.g.special(name))
    }

    fn regex(
        &mut self,
        owner: usize,
        at: usize,
        what: &str,
        text: &str,
    ) -> Result<ExprId, CompileError> {
        regex_to_ir_with(text, &mut self.g, self.limits)
            .map_err(|e| e.within(self.loc(owner, at), &format!("in {what} `{text}`")))
    }
}
