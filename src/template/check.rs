//! Checking parsed templates: every name resolved, every parameter kind known and bound, every
//! parameter used, no rule recursion. The result is the resolved form the factory lowers.

use std::collections::HashMap;

use super::syntax::{ArgValue, DefaultExpr, Expr, ExprKind, KindExpr, Name, RuleDef};
use super::{ParamDefault, ParamKind, StructId};
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::limits::{Deadline, LimitExceeded, LimitKind, Limits};

/// The template files being compiled, for turning byte offsets into `file:line:col`.
#[derive(Default)]
pub(crate) struct Files {
    pub names: Vec<String>,
    pub texts: Vec<String>,
}

impl Files {
    pub fn loc(&self, file: usize, at: usize) -> Location {
        Location::in_text(&self.names[file], &self.texts[file], at)
    }

    pub fn error(
        &self,
        kind: CompileErrorKind,
        file: usize,
        at: usize,
        message: impl Into<String>,
    ) -> CompileError {
        CompileError::new(kind, self.loc(file, at), message)
    }
}

/// Parameter kinds written as plain names.
const BUILTIN_KINDS: [(&str, ParamKind); 4] = [
    ("str", ParamKind::Str),
    ("choice", ParamKind::Choice),
    ("regex", ParamKind::Regex),
    ("int", ParamKind::Int),
];
const RESERVED: [&str; 6] = ["str", "choice", "regex", "int", "list", "oneof"];

pub(crate) struct RRule {
    pub name: String,
    pub file: usize,
    pub at: usize,
    pub params: Vec<RParam>,
    pub body: RExpr,
}

pub(crate) struct RParam {
    pub name: String,
    pub kind: ParamKind,
    pub default: Option<ParamDefault>,
}

/// A resolved expression: names replaced by rule and parameter indices. Shaped like the
/// syntax tree it resolves, so its drop recurses as deep (bounded by the lexer's check).
pub(crate) struct RExpr {
    pub kind: RKind,
    pub at: usize,
    /// The rule's parameters the expression depends on, through the rules it calls too
    /// (sorted): with an argument substitution, whether it is fixed text or has holes.
    pub uses: Box<[u16]>,
}

pub(crate) enum RKind {
    Bytes(Vec<u8>),
    Class(String),
    Regex(String),
    Special(String),
    Param(usize),
    Rule(usize),
    /// A rule with parameters; arguments in the callee's parameter order.
    Call(usize, Vec<RArg>),
    Seq(Vec<RExpr>),
    Alt(Vec<RExpr>),
    Repeat {
        body: Box<RExpr>,
        min: u32,
        max: Option<u32>,
    },
}

pub(crate) enum RArg {
    /// The caller's parameter.
    Param(usize),
    Str(Vec<u8>),
    /// The callee parameter's default.
    Default,
}

/// Resolves and checks the rules of every file (`rules[i]` = (file index, rules of that file)):
/// names, kinds, bindings, no recursion, and no structure nesting deeper than
/// `limits.nesting` once its rules are inlined (what the factory builds).
pub(crate) fn check(
    files: &Files,
    parsed: Vec<(usize, Vec<RuleDef>)>,
    limits: &Limits,
    deadline: &Deadline,
) -> Result<Vec<RRule>, CompileError> {
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut defs: Vec<(usize, RuleDef)> = Vec::new();
    for (file, rules) in parsed {
        for rule in rules {
            let name = &rule.name;
            if RESERVED.contains(&name.text.as_str()) {
                return Err(files.error(
                    CompileErrorKind::Invalid,
                    file,
                    name.at,
                    format!("`{}` is a parameter kind, not a rule name", name.text),
                ));
            }
            if let Some(&first) = index.get(&name.text) {
                let (f, d) = &defs[first];
                return Err(files.error(
                    CompileErrorKind::Invalid,
                    file,
                    name.at,
                    format!(
                        "rule `{}` is defined twice (first at {})",
                        name.text,
                        files.loc(*f, d.name.at)
                    ),
                ));
            }
            index.insert(name.text.clone(), defs.len());
            defs.push((file, rule));
        }
    }
    let checker = Checker {
        files,
        index: &index,
        defs: &defs,
    };
    // Parameters first: bodies check call arguments against the callees' kinds.
    let params: Vec<Vec<RParam>> = defs
        .iter()
        .map(|(file, def)| checker.params(*file, def))
        .collect::<Result<_, _>>()?;
    let mut rules = Vec::with_capacity(defs.len());
    for (i, (file, def)) in defs.iter().enumerate() {
        let mut used = vec![false; def.params.len()];
        let body = checker.body(*file, i, &params, &def.body, &mut used, deadline)?;
        if let Some(p) = used.iter().position(|u| !u) {
            let name = &def.params[p].name;
            return Err(files.error(
                CompileErrorKind::Invalid,
                *file,
                name.at,
                format!(
                    "parameter `{}` of `{}` is never used in its body",
                    name.text, def.name.text
                ),
            ));
        }
        rules.push(RRule {
            name: def.name.text.clone(),
            file: *file,
            at: def.name.at,
            params: Vec::new(),
            body,
        });
    }
    for (rule, p) in rules.iter_mut().zip(params) {
        rule.params = p;
    }
    let order = check_recursion(files, &rules)?;
    annotate(files, &mut rules, &order, limits, deadline)?;
    Ok(rules)
}

struct Checker<'a> {
    files: &'a Files,
    index: &'a HashMap<String, usize>,
    defs: &'a [(usize, RuleDef)],
}

impl Checker<'_> {
    fn structures(&self, file: usize, names: &[Name]) -> Result<Vec<StructId>, CompileError> {
        names
            .iter()
            .map(|n| match self.index.get(&n.text) {
                Some(&i) => Ok(StructId(i as u32)),
                None if RESERVED.contains(&n.text.as_str()) => Err(self.files.error(
                    CompileErrorKind::Invalid,
                    file,
                    n.at,
                    format!(
                        "`{}` cannot be combined with other kinds: expected a structure name",
                        n.text
                    ),
                )),
                None => Err(self.files.error(
                    CompileErrorKind::Undefined,
                    file,
                    n.at,
                    format!("unknown kind `{}`: expected str, choice, regex, int, list<...>, oneof<...> or a structure name", n.text),
                )),
            })
            .collect()
    }

    fn kind(&self, file: usize, kind: &KindExpr) -> Result<ParamKind, CompileError> {
        match kind {
            KindExpr::Names(names) => {
                if let [single] = &names[..] {
                    if let Some((_, k)) = BUILTIN_KINDS.iter().find(|(n, _)| *n == single.text) {
                        return Ok(k.clone());
                    }
                    if single.text == "list" || single.text == "oneof" {
                        return Err(self.files.error(
                            CompileErrorKind::Invalid,
                            file,
                            single.at,
                            format!(
                                "`{}` needs its element structures: `{}<name>`",
                                single.text, single.text
                            ),
                        ));
                    }
                }
                Ok(ParamKind::Structure(self.structures(file, names)?))
            }
            KindExpr::Generic { ctor, elems, sep } => {
                let elems = self.structures(file, elems)?;
                match (ctor.text.as_str(), sep) {
                    ("list", sep) => Ok(ParamKind::List {
                        elems,
                        sep: sep.as_ref().map_or_else(Vec::new, |s| s.0.clone()),
                    }),
                    ("oneof", None) => Ok(ParamKind::OneOf(elems)),
                    ("oneof", Some((_, at))) => Err(self.files.error(
                        CompileErrorKind::Invalid,
                        file,
                        *at,
                        "`oneof<...>` takes no separator: one instance is chosen",
                    )),
                    (other, _) => Err(self.files.error(
                        CompileErrorKind::Undefined,
                        file,
                        ctor.at,
                        format!(
                            "unknown kind `{other}<...>`: expected `list<...>` or `oneof<...>`"
                        ),
                    )),
                }
            }
        }
    }

    fn params(&self, file: usize, def: &RuleDef) -> Result<Vec<RParam>, CompileError> {
        let mut out: Vec<RParam> = Vec::new();
        for p in &def.params {
            if out.iter().any(|q| q.name == p.name.text) {
                return Err(self.files.error(
                    CompileErrorKind::Invalid,
                    file,
                    p.name.at,
                    format!("parameter `{}` is declared twice", p.name.text),
                ));
            }
            if self.index.contains_key(&p.name.text) {
                return Err(self.files.error(
                    CompileErrorKind::Invalid,
                    file,
                    p.name.at,
                    format!(
                        "parameter `{}` has the name of a rule; rename one of them",
                        p.name.text
                    ),
                ));
            }
            let kind = self.kind(file, &p.kind)?;
            let default = match (&p.default, &kind) {
                (None, _) => None,
                (Some(DefaultExpr::EmptyList(_)), ParamKind::List { .. }) => {
                    Some(ParamDefault::EmptyList)
                }
                (Some(DefaultExpr::Str(bytes, at)), ParamKind::Str) => {
                    let s = String::from_utf8(bytes.clone()).map_err(|_| {
                        self.files
                            .error(CompileErrorKind::Invalid, file, *at, "not UTF-8")
                    })?;
                    Some(ParamDefault::Str(s))
                }
                (Some(DefaultExpr::EmptyList(at) | DefaultExpr::Str(_, at)), _) => {
                    return Err(self.files.error(
                        CompileErrorKind::Invalid,
                        file,
                        *at,
                        "only a list parameter may default to `[]` and only a str parameter to a string",
                    ))
                }
            };
            out.push(RParam {
                name: p.name.text.clone(),
                kind,
                default,
            });
        }
        Ok(out)
    }

    /// The resolved body of rule `rule`, marking the parameters it uses in `used`. Iterative
    /// (post-order with an explicit stack): the lexer bounded the nesting, but a frame of this
    /// function is large.
    fn body(
        &self,
        file: usize,
        rule: usize,
        params: &[Vec<RParam>],
        body: &Expr,
        used: &mut [bool],
        deadline: &Deadline,
    ) -> Result<RExpr, CompileError> {
        enum Step<'e> {
            Visit(&'e Expr),
            /// Build the node from its children, the last values on the stack.
            Build(&'e Expr),
        }
        let mut steps = vec![Step::Visit(body)];
        let mut done: Vec<RExpr> = Vec::new();
        while let Some(step) = steps.pop() {
            deadline.tick().map_err(|e| {
                CompileError::over_limit(e, self.files.loc(file, body.at), "template")
            })?;
            let (e, kind) = match step {
                Step::Visit(e) => match &e.kind {
                    ExprKind::Seq(xs) | ExprKind::Alt(xs) => {
                        steps.push(Step::Build(e));
                        steps.extend(xs.iter().rev().map(Step::Visit));
                        continue;
                    }
                    ExprKind::Repeat { body, min, max } => {
                        if max.is_some_and(|m| m < *min) {
                            return Err(self.files.error(
                                CompileErrorKind::Invalid,
                                file,
                                body.at,
                                format!(
                                    "repetition {{{min},{}}}: the maximum is below the minimum",
                                    max.unwrap_or_default()
                                ),
                            ));
                        }
                        steps.push(Step::Build(e));
                        steps.push(Step::Visit(body));
                        continue;
                    }
                    _ => (e, self.atom(file, rule, params, e, used)?),
                },
                Step::Build(e) => {
                    let kind = match &e.kind {
                        ExprKind::Seq(xs) => RKind::Seq(done.split_off(done.len() - xs.len())),
                        ExprKind::Alt(xs) => RKind::Alt(done.split_off(done.len() - xs.len())),
                        ExprKind::Repeat { min, max, .. } => RKind::Repeat {
                            // Its body was the last value built.
                            body: Box::new(done.pop().expect("the repeated body")),
                            min: *min,
                            max: *max,
                        },
                        _ => unreachable!("only composite expressions are built from children"),
                    };
                    (e, kind)
                }
            };
            done.push(RExpr {
                kind,
                at: e.at,
                uses: Box::default(),
            });
        }
        // One value per visited expression, and every composite consumed its children's.
        Ok(done.pop().expect("the body's value"))
    }

    /// A leaf of a body: literals, references and calls.
    fn atom(
        &self,
        file: usize,
        rule: usize,
        params: &[Vec<RParam>],
        e: &Expr,
        used: &mut [bool],
    ) -> Result<RKind, CompileError> {
        let own = &self.defs[rule].1;
        let names = |s: StructId| self.defs[s.index()].1.name.text.clone();
        let err = |kind, at, msg: String| Err(self.files.error(kind, file, at, msg));
        let param_index = |name: &str| own.params.iter().position(|p| p.name.text == name);
        Ok(match &e.kind {
            ExprKind::Str(b) => RKind::Bytes(b.clone()),
            ExprKind::Class(c) => RKind::Class(c.clone()),
            ExprKind::Regex(r) => RKind::Regex(r.clone()),
            ExprKind::Special(s) => RKind::Special(s.clone()),
            ExprKind::Ref(name) => {
                if let Some(p) = param_index(name) {
                    used[p] = true;
                    RKind::Param(p)
                } else if let Some(&r) = self.index.get(name) {
                    if !params[r].is_empty() {
                        return err(
                            CompileErrorKind::Invalid,
                            e.at,
                            format!(
                                "`{name}` takes parameters: call it as `{name}({}: ...)`",
                                params[r][0].name
                            ),
                        );
                    }
                    RKind::Rule(r)
                } else {
                    return err(
                        CompileErrorKind::Undefined,
                        e.at,
                        format!("no rule or parameter named `{name}`"),
                    );
                }
            }
            ExprKind::Call(name, args) => {
                let Some(&callee) = self.index.get(name) else {
                    let what = if param_index(name).is_some() {
                        format!("`{name}` is a parameter; it takes no arguments")
                    } else {
                        format!("no rule named `{name}`")
                    };
                    return err(CompileErrorKind::Undefined, e.at, what);
                };
                let expected = &params[callee];
                if expected.is_empty() {
                    return err(
                        CompileErrorKind::Invalid,
                        e.at,
                        format!("`{name}` takes no parameters: write it without `(...)`"),
                    );
                }
                let mut bound: Vec<Option<RArg>> = (0..expected.len()).map(|_| None).collect();
                for a in args {
                    let Some(j) = expected.iter().position(|p| p.name == a.name.text) else {
                        return err(
                            CompileErrorKind::Undefined,
                            a.name.at,
                            format!("`{name}` has no parameter `{}`", a.name.text),
                        );
                    };
                    if bound[j].is_some() {
                        return err(
                            CompileErrorKind::Invalid,
                            a.name.at,
                            format!("parameter `{}` is bound twice", a.name.text),
                        );
                    }
                    let want = &expected[j].kind;
                    bound[j] = Some(match &a.value {
                        ArgValue::Param(q) => {
                            let Some(i) = param_index(&q.text) else {
                                return err(
                                    CompileErrorKind::Undefined,
                                    q.at,
                                    format!(
                                        "`{}` is not a parameter of `{}`: a call inside a template forwards the caller's parameters",
                                        q.text, own.name.text
                                    ),
                                );
                            };
                            let have = &params[rule][i].kind;
                            if have != want {
                                return err(
                                    CompileErrorKind::Invalid,
                                    q.at,
                                    format!(
                                        "parameter `{}` of `{name}` is {}, but `{}` is {}",
                                        a.name.text,
                                        want.describe(&|s| names(s)),
                                        q.text,
                                        have.describe(&|s| names(s))
                                    ),
                                );
                            }
                            used[i] = true;
                            RArg::Param(i)
                        }
                        ArgValue::Str(bytes, at) => {
                            if *want != ParamKind::Str {
                                return err(
                                    CompileErrorKind::Invalid,
                                    *at,
                                    format!(
                                        "parameter `{}` of `{name}` is {}; only a str parameter takes a string here",
                                        a.name.text,
                                        want.describe(&|s| names(s))
                                    ),
                                );
                            }
                            RArg::Str(bytes.clone())
                        }
                    });
                }
                let args = bound
                    .into_iter()
                    .zip(expected)
                    .map(|(b, p)| match b {
                        Some(b) => Ok(b),
                        None if p.default.is_some() => Ok(RArg::Default),
                        None => Err(self.files.error(
                            CompileErrorKind::Invalid,
                            file,
                            e.at,
                            format!(
                                "unbound parameter `{}` ({}) in the call of `{name}`",
                                p.name,
                                p.kind.describe(&|s| names(s))
                            ),
                        )),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                RKind::Call(callee, args)
            }
            ExprKind::Seq(_) | ExprKind::Alt(_) | ExprKind::Repeat { .. } => {
                unreachable!("composite expressions are built by `body`")
            }
        })
    }
}

/// The rules `e` refers to (rules and calls), with where.
fn refs(e: &RExpr) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut stack = vec![e];
    while let Some(e) = stack.pop() {
        match &e.kind {
            RKind::Rule(r) | RKind::Call(r, _) => out.push((*r, e.at)),
            RKind::Seq(xs) | RKind::Alt(xs) => stack.extend(xs.iter().rev()),
            RKind::Repeat { body, .. } => stack.push(body),
            _ => {}
        }
    }
    out
}

/// Rules referring to themselves (through bodies, not parameter kinds) need a stack: an error
/// naming the cycle. Otherwise the rules in an order where each comes after those it refers to.
fn check_recursion(files: &Files, rules: &[RRule]) -> Result<Vec<usize>, CompileError> {
    let edges: Vec<Vec<(usize, usize)>> = rules.iter().map(|r| refs(&r.body)).collect();
    // Depth-first search on an explicit stack (rule chains are as long as the templates),
    // which is the path, to name the cycle: (rule, next edge to follow).
    const NEW: u8 = 0;
    const ON_PATH: u8 = 1;
    const DONE: u8 = 2;
    let mut state = vec![NEW; rules.len()];
    let mut order = Vec::with_capacity(rules.len());
    for root in 0..rules.len() {
        if state[root] != NEW {
            continue;
        }
        state[root] = ON_PATH;
        let mut path: Vec<(usize, usize)> = vec![(root, 0)];
        while let Some((r, edge)) = path.last_mut() {
            let r = *r;
            let Some(&(next, at)) = edges[r].get(*edge) else {
                state[r] = DONE;
                order.push(r);
                path.pop();
                continue;
            };
            *edge += 1;
            match state[next] {
                NEW => {
                    state[next] = ON_PATH;
                    path.push((next, 0));
                }
                ON_PATH => {
                    let start = path.iter().position(|&(x, _)| x == next).unwrap_or(0);
                    let cycle: Vec<&str> = path[start..]
                        .iter()
                        .map(|&(x, _)| x)
                        .chain(std::iter::once(next))
                        .map(|x| rules[x].name.as_str())
                        .collect();
                    return Err(files.error(
                        CompileErrorKind::NotRegular,
                        rules[r].file,
                        at,
                        format!(
                            "rule `{}` is recursive ({}): templates are finite-state; use `*`/`+` for repetition, or a structure-typed parameter so the request bounds the nesting",
                            rules[next].name,
                            cycle.join(" -> ")
                        ),
                    ));
                }
                _ => {}
            }
        }
    }
    Ok(order)
}

/// What [`annotate`] computes for an expression.
struct Summary {
    /// Depth of the expression tree with the rules it refers to inlined: sequences,
    /// alternations, repetitions and references are levels, literals and parameters not.
    depth: u64,
    /// [`RExpr::uses`].
    uses: Vec<u16>,
}

/// Fills in every expression's [`RExpr::uses`], and checks that no rule, inlined, nests deeper
/// than `limits.nesting` (the factory's recipes and the IR have that shape). Rules are visited
/// in `order` (callees first), so a reference reads its callee's summary.
fn annotate(
    files: &Files,
    rules: &mut [RRule],
    order: &[usize],
    limits: &Limits,
    deadline: &Deadline,
) -> Result<(), CompileError> {
    let max = limits.get(LimitKind::Nesting);
    let mut rule_summary: Vec<Option<Summary>> = (0..rules.len()).map(|_| None).collect();
    for &r in order {
        // Pre-order of the body; read backwards, each node comes after its subtrees, which
        // leave one summary each on the stack, first child on top.
        let mut preorder: Vec<&RExpr> = Vec::new();
        let mut stack = vec![&rules[r].body];
        while let Some(e) = stack.pop() {
            preorder.push(e);
            match &e.kind {
                RKind::Seq(xs) | RKind::Alt(xs) => stack.extend(xs.iter().rev()),
                RKind::Repeat { body, .. } => stack.push(body),
                _ => {}
            }
        }
        let mut values: Vec<Summary> = Vec::new();
        let mut summaries: Vec<Summary> = Vec::with_capacity(preorder.len());
        for e in preorder.iter().rev() {
            deadline.tick().map_err(|x| {
                CompileError::over_limit(x, files.loc(rules[r].file, e.at), "template")
            })?;
            // `order` puts callees first.
            let callee = |c: &usize| rule_summary[*c].as_ref().expect("callees come first");
            let summary = match &e.kind {
                RKind::Seq(xs) | RKind::Alt(xs) => {
                    let children = values.split_off(values.len() - xs.len());
                    let mut uses: Vec<u16> = children
                        .iter()
                        .flat_map(|c| c.uses.iter().copied())
                        .collect();
                    uses.sort_unstable();
                    uses.dedup();
                    Summary {
                        depth: 1 + children.iter().map(|c| c.depth).max().unwrap_or(0),
                        uses,
                    }
                }
                RKind::Repeat { .. } => {
                    let body = values.pop().expect("the repeated body");
                    Summary {
                        depth: 1 + body.depth,
                        uses: body.uses,
                    }
                }
                // A rule has at most as many parameters as its tokens (a parse is bounded by
                // `syntax::MAX_RULE_TOKENS`), so an index fits 16 bits.
                RKind::Param(i) => Summary {
                    depth: 0,
                    uses: vec![*i as u16],
                },
                RKind::Rule(c) => Summary {
                    depth: 1 + callee(c).depth,
                    uses: Vec::new(),
                },
                RKind::Call(c, args) => {
                    let mut uses: Vec<u16> = callee(c)
                        .uses
                        .iter()
                        .filter_map(|&j| match args[j as usize] {
                            RArg::Param(i) => Some(i as u16),
                            RArg::Str(_) | RArg::Default => None,
                        })
                        .collect();
                    uses.sort_unstable();
                    uses.dedup();
                    Summary {
                        depth: 1 + callee(c).depth,
                        uses,
                    }
                }
                RKind::Bytes(_) | RKind::Class(_) | RKind::Regex(_) | RKind::Special(_) => {
                    Summary {
                        depth: 0,
                        uses: Vec::new(),
                    }
                }
            };
            if summary.depth > max {
                let exceeded = LimitExceeded {
                    kind: LimitKind::Nesting,
                    value: summary.depth,
                    max,
                };
                let what = format!(
                    "template rule `{}` with the rules it uses inlined",
                    rules[r].name
                );
                return Err(CompileError::over_limit(
                    exceeded,
                    files.loc(rules[r].file, e.at),
                    &what,
                ));
            }
            values.push(Summary {
                depth: summary.depth,
                uses: summary.uses.clone(),
            });
            summaries.push(summary);
        }
        // Write the uses back in pre-order (`summaries` is in reverse pre-order).
        let mut stack = vec![&mut rules[r].body];
        while let Some(e) = stack.pop() {
            e.uses = summaries
                .pop()
                .expect("one summary per expression")
                .uses
                .into();
            match &mut e.kind {
                RKind::Seq(xs) | RKind::Alt(xs) => stack.extend(xs.iter_mut().rev()),
                RKind::Repeat { body, .. } => stack.push(body),
                _ => {}
            }
        }
        rule_summary[r] = values.pop();
    }
    Ok(())
}
