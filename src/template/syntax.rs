//! The template syntax tree and its parser: tokens from the lexer, an `earlgrey` Earley parser
//! over them, and the parse forest evaluated into the tree.
//!
//! earlgrey reports a failed parse without a place, so the terminal predicates keep score:
//! the first token no terminal accepted is where the text stops being a viable prefix (Earley
//! sets hold every viable item), and the terminals that were tried there are what was
//! expected.
//!
//! earlgrey's parse forest is a graph of reference-counted items, each pointing back at the
//! items it was built from, and dropping it recurses along those chains: about one level per
//! token of a list (a sequence, alternatives, rules) and a few per group. So earlgrey never
//! sees a whole file: each rule is parsed alone, and a rule has at most [`MAX_RULE_TOKENS`]
//! tokens, a depth the smallest server stack (256 KiB) drops with room to spare.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::lexer::{self, Kind, Token, Value};
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::limits::{Deadline, LimitExceeded, LimitKind, Limits};

/// Most tokens in one template rule (one Earley parse, see the module docs). Measured on a
/// 256 KiB stack, dropping the forest of a sequence of about 2,000 items overflowed it.
pub(crate) const MAX_RULE_TOKENS: usize = 1024;

/// A name with the byte offset where it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Name {
    pub text: String,
    pub at: usize,
}

/// `name(params) ::= body`.
#[derive(Clone, Debug)]
pub(crate) struct RuleDef {
    pub name: Name,
    pub params: Vec<ParamDecl>,
    pub body: Expr,
}

/// `name: kind = default`.
#[derive(Clone, Debug)]
pub(crate) struct ParamDecl {
    pub name: Name,
    pub kind: KindExpr,
    pub default: Option<DefaultExpr>,
}

/// A parameter kind as written: `str`, `section`, `a | b`, `list<section, "\n">`, `oneof<tool>`.
#[derive(Clone, Debug)]
pub(crate) enum KindExpr {
    Names(Vec<Name>),
    Generic {
        ctor: Name,
        elems: Vec<Name>,
        sep: Option<(Vec<u8>, usize)>,
    },
}

#[derive(Clone, Debug)]
pub(crate) enum DefaultExpr {
    Str(Vec<u8>, usize),
    EmptyList(usize),
}

/// An expression of a rule body. Its drop recurses once per level, which the lexer's nesting
/// check bounds (`Limits::nesting`; each group is at most two levels of the tree).
#[derive(Clone, Debug)]
pub(crate) struct Expr {
    pub kind: ExprKind,
    pub at: usize,
}

#[derive(Clone, Debug)]
pub(crate) enum ExprKind {
    Str(Vec<u8>),
    Class(String),
    Regex(String),
    Special(String),
    /// A rule or a parameter.
    Ref(String),
    Call(String, Vec<ArgDecl>),
    Seq(Vec<Expr>),
    Alt(Vec<Expr>),
    Repeat {
        body: Box<Expr>,
        min: u32,
        max: Option<u32>,
    },
}

/// `param: value` in a call inside a template.
#[derive(Clone, Debug)]
pub(crate) struct ArgDecl {
    pub name: Name,
    pub value: ArgValue,
}

#[derive(Clone, Debug)]
pub(crate) enum ArgValue {
    /// Forwards one of the caller's parameters.
    Param(Name),
    /// A string for a `str` parameter.
    Str(Vec<u8>, usize),
}

/// A node while evaluating the parse forest.
#[derive(Clone, Debug)]
enum Node {
    Tok(usize),
    Rules(Vec<RuleDef>),
    Rule(RuleDef),
    Params(Vec<ParamDecl>),
    Param(ParamDecl),
    Default(DefaultExpr),
    Kind(KindExpr),
    Names(Vec<Name>),
    Expr(Expr),
    Args(Vec<ArgDecl>),
    Arg(ArgDecl),
}

/// Builds a rule's node from one node per symbol of its body, of the kinds the body names
/// (earlgrey calls the action of the rule it completed): what the destructuring and the
/// `unreachable!`s of the actions rely on.
type Action = fn(&[Token], Vec<Node>) -> Node;

/// The grammar of template files: (head, body symbols, action building the node).
const RULES: &[(&str, &[&str], Action)] = &[
    ("file", &["rules"], |_, n| first(n)),
    ("rules", &["rules", "rule"], |_, mut n| {
        let rule = rule(n.pop());
        let mut rules = rules(n.pop());
        rules.push(rule);
        Node::Rules(rules)
    }),
    ("rules", &["rule"], |_, mut n| {
        Node::Rules(vec![rule(n.pop())])
    }),
    ("rule", &["name", "::=", "alt"], |t, n| {
        let [name, _, body] = arr(n);
        Node::Rule(RuleDef {
            name: name_of(t, &name),
            params: Vec::new(),
            body: expr(body),
        })
    }),
    (
        "rule",
        &["name", "(", "params", ")", "::=", "alt"],
        |t, n| {
            let [name, _, params, _, _, body] = arr(n);
            let Node::Params(params) = params else {
                unreachable!()
            };
            Node::Rule(RuleDef {
                name: name_of(t, &name),
                params,
                body: expr(body),
            })
        },
    ),
    ("params", &["params", ",", "param"], |_, n| {
        let [params, _, param] = arr(n);
        let (Node::Params(mut params), Node::Param(param)) = (params, param) else {
            unreachable!()
        };
        params.push(param);
        Node::Params(params)
    }),
    ("params", &["param"], |_, n| {
        let [Node::Param(p)] = arr(n) else {
            unreachable!()
        };
        Node::Params(vec![p])
    }),
    ("param", &["name", ":", "kind"], |t, n| {
        let [name, _, Node::Kind(kind)] = arr(n) else {
            unreachable!()
        };
        Node::Param(ParamDecl {
            name: name_of(t, &name),
            kind,
            default: None,
        })
    }),
    ("param", &["name", ":", "kind", "=", "default"], |t, n| {
        let [name, _, Node::Kind(kind), _, Node::Default(d)] = arr(n) else {
            unreachable!()
        };
        Node::Param(ParamDecl {
            name: name_of(t, &name),
            kind,
            default: Some(d),
        })
    }),
    ("default", &["string"], |t, n| {
        let (bytes, at) = string_of(t, &first(n));
        Node::Default(DefaultExpr::Str(bytes, at))
    }),
    ("default", &["[]"], |t, n| {
        Node::Default(DefaultExpr::EmptyList(t[tok(&first(n))].start))
    }),
    ("kind", &["names"], |_, n| {
        let Node::Names(names) = first(n) else {
            unreachable!()
        };
        Node::Kind(KindExpr::Names(names))
    }),
    ("kind", &["name", "<", "names", ">"], |t, n| {
        let [ctor, _, Node::Names(elems), _] = arr(n) else {
            unreachable!()
        };
        Node::Kind(KindExpr::Generic {
            ctor: name_of(t, &ctor),
            elems,
            sep: None,
        })
    }),
    (
        "kind",
        &["name", "<", "names", ",", "string", ">"],
        |t, n| {
            let [ctor, _, Node::Names(elems), _, sep, _] = arr(n) else {
                unreachable!()
            };
            Node::Kind(KindExpr::Generic {
                ctor: name_of(t, &ctor),
                elems,
                sep: Some(string_of(t, &sep)),
            })
        },
    ),
    ("names", &["names", "|", "name"], |t, n| {
        let [Node::Names(mut names), _, name] = arr(n) else {
            unreachable!()
        };
        names.push(name_of(t, &name));
        Node::Names(names)
    }),
    ("names", &["name"], |t, n| {
        Node::Names(vec![name_of(t, &first(n))])
    }),
    ("alt", &["alt", "|", "seq"], |_, n| {
        let [left, _, right] = arr(n);
        let (left, right) = (expr(left), expr(right));
        let at = left.at;
        let branches = match left.kind {
            ExprKind::Alt(mut xs) => {
                xs.push(right);
                xs
            }
            _ => vec![left, right],
        };
        Node::Expr(Expr {
            kind: ExprKind::Alt(branches),
            at,
        })
    }),
    ("alt", &["seq"], |_, n| first(n)),
    ("seq", &["seq", "postfix"], |_, n| {
        let [left, right] = arr(n);
        let (left, right) = (expr(left), expr(right));
        let at = left.at;
        let items = match left.kind {
            ExprKind::Seq(mut xs) => {
                xs.push(right);
                xs
            }
            _ => vec![left, right],
        };
        Node::Expr(Expr {
            kind: ExprKind::Seq(items),
            at,
        })
    }),
    ("seq", &["postfix"], |_, n| first(n)),
    ("postfix", &["atom"], |_, n| first(n)),
    ("postfix", &["postfix", "*"], |_, n| repeat(n, 0, None)),
    ("postfix", &["postfix", "+"], |_, n| repeat(n, 1, None)),
    ("postfix", &["postfix", "?"], |_, n| repeat(n, 0, Some(1))),
    ("postfix", &["postfix", "{", "integer", "}"], |t, n| {
        let m = int_of(t, &n[2]);
        repeat(n, m, Some(m))
    }),
    ("postfix", &["postfix", "{", "integer", ",", "}"], |t, n| {
        let m = int_of(t, &n[2]);
        repeat(n, m, None)
    }),
    (
        "postfix",
        &["postfix", "{", "integer", ",", "integer", "}"],
        |t, n| {
            let (m, x) = (int_of(t, &n[2]), int_of(t, &n[4]));
            repeat(n, m, Some(x))
        },
    ),
    ("atom", &["string"], |t, n| {
        let (bytes, at) = string_of(t, &first(n));
        atom(ExprKind::Str(bytes), at)
    }),
    ("atom", &["class"], |t, n| text_atom(t, n, ExprKind::Class)),
    ("atom", &["regex"], |t, n| text_atom(t, n, ExprKind::Regex)),
    ("atom", &["special-token"], |t, n| {
        text_atom(t, n, ExprKind::Special)
    }),
    ("atom", &["name"], |t, n| text_atom(t, n, ExprKind::Ref)),
    ("atom", &["name", "(", "args", ")"], |t, n| {
        let [name, _, Node::Args(args), _] = arr(n) else {
            unreachable!()
        };
        let name = name_of(t, &name);
        atom(ExprKind::Call(name.text, args), name.at)
    }),
    ("atom", &["(", "alt", ")"], |_, n| {
        let [_, inner, _] = arr(n);
        Node::Expr(expr(inner))
    }),
    ("args", &["args", ",", "arg"], |_, n| {
        let [Node::Args(mut args), _, Node::Arg(arg)] = arr(n) else {
            unreachable!()
        };
        args.push(arg);
        Node::Args(args)
    }),
    ("args", &["arg"], |_, n| {
        let [Node::Arg(arg)] = arr(n) else {
            unreachable!()
        };
        Node::Args(vec![arg])
    }),
    ("arg", &["name", ":", "name"], |t, n| {
        let [name, _, value] = arr(n);
        Node::Arg(ArgDecl {
            name: name_of(t, &name),
            value: ArgValue::Param(name_of(t, &value)),
        })
    }),
    ("arg", &["name", ":", "string"], |t, n| {
        let [name, _, value] = arr(n);
        let (bytes, at) = string_of(t, &value);
        Node::Arg(ArgDecl {
            name: name_of(t, &name),
            value: ArgValue::Str(bytes, at),
        })
    }),
];

fn arr<const N: usize>(nodes: Vec<Node>) -> [Node; N] {
    nodes
        .try_into()
        .expect("a rule's action gets one node per symbol")
}

fn first(nodes: Vec<Node>) -> Node {
    nodes.into_iter().next().expect("a symbol")
}

fn tok(node: &Node) -> usize {
    match node {
        Node::Tok(i) => *i,
        _ => unreachable!("a terminal"),
    }
}

fn name_of(tokens: &[Token], node: &Node) -> Name {
    let t = &tokens[tok(node)];
    Name {
        text: t.text().to_string(),
        at: t.start,
    }
}

fn string_of(tokens: &[Token], node: &Node) -> (Vec<u8>, usize) {
    let t = &tokens[tok(node)];
    match &t.value {
        Value::Bytes(b) => (b.clone(), t.start),
        _ => unreachable!("a string token"),
    }
}

fn int_of(tokens: &[Token], node: &Node) -> u32 {
    match tokens[tok(node)].value {
        Value::Int(n) => n,
        _ => unreachable!("an integer token"),
    }
}

fn rule(node: Option<Node>) -> RuleDef {
    match node {
        Some(Node::Rule(r)) => r,
        _ => unreachable!(),
    }
}

fn rules(node: Option<Node>) -> Vec<RuleDef> {
    match node {
        Some(Node::Rules(r)) => r,
        _ => unreachable!(),
    }
}

fn expr(node: Node) -> Expr {
    match node {
        Node::Expr(e) => e,
        _ => unreachable!("an expression"),
    }
}

fn atom(kind: ExprKind, at: usize) -> Node {
    Node::Expr(Expr { kind, at })
}

fn text_atom(tokens: &[Token], nodes: Vec<Node>, make: fn(String) -> ExprKind) -> Node {
    let t = &tokens[tok(&first(nodes))];
    atom(make(t.text().to_string()), t.start)
}

fn repeat(mut nodes: Vec<Node>, min: u32, max: Option<u32>) -> Node {
    nodes.truncate(1);
    let body = expr(first(nodes));
    let at = body.at;
    Node::Expr(Expr {
        kind: ExprKind::Repeat {
            body: Box::new(body),
            min,
            max,
        },
        at,
    })
}

/// Where the scan stands: which token is being scanned, how many were accepted, and which
/// terminals were tried on the current one.
#[derive(Default)]
struct Tracker {
    current: Cell<usize>,
    accepted: Cell<usize>,
    tried: RefCell<Vec<Kind>>,
    /// Set when the compile deadline passed while feeding tokens.
    late: Cell<Option<LimitExceeded>>,
}

/// Feeds token indices `start..end` to earlgrey; stops after a token nothing accepted (or when
/// the deadline passes), and optionally ends with a sentinel no terminal accepts (to learn what
/// was expected after the last token).
struct Feed<'d> {
    tracker: Rc<Tracker>,
    start: usize,
    next: usize,
    end: usize,
    sentinel: bool,
    deadline: &'d Deadline,
}

impl Iterator for Feed<'_> {
    type Item = String;
    fn next(&mut self) -> Option<String> {
        let i = self.next;
        if i > self.end || (i > self.start && self.tracker.accepted.get() < i) {
            return None;
        }
        if i == self.end && !self.sentinel {
            return None;
        }
        if let Err(late) = self.deadline.tick() {
            self.tracker.late.set(Some(late));
            return None;
        }
        self.next += 1;
        self.tracker.current.set(i);
        self.tracker.tried.borrow_mut().clear();
        Some(i.to_string())
    }
}

/// Parses one template file into its rules, within `limits` and before `deadline`.
pub(crate) fn parse(
    source: &str,
    text: &str,
    limits: &Limits,
    deadline: &Deadline,
) -> Result<Vec<RuleDef>, CompileError> {
    let tokens = lexer::lex(source, text, limits)?;
    let kinds: Rc<[Kind]> = tokens.iter().map(|t| t.kind).collect();
    let heads = rule_heads(&kinds);
    let mut rules = Vec::with_capacity(heads.len());
    for (i, &start) in heads.iter().enumerate() {
        let end = heads.get(i + 1).copied().unwrap_or(tokens.len());
        let max = MAX_RULE_TOKENS.min(limits.get(LimitKind::GrammarSize) as usize);
        if end - start > max {
            let exceeded = LimitExceeded {
                kind: LimitKind::GrammarSize,
                value: (end - start) as u64,
                max: max as u64,
            };
            let at = Location::in_text(source, text, tokens[start].start);
            return Err(CompileError::over_limit(
                exceeded,
                at,
                "template rule (tokens)",
            ));
        }
        match run_earley(&tokens, &kinds, start..end, false, deadline) {
            Parsed::Rules(mut parsed) => rules.append(&mut parsed),
            Parsed::Late(late) => return Err(late_error(source, text, &tokens, start, late)),
            Parsed::Failed { .. } => {
                // A rule may fail alone only for want of the next one's tokens (`a ::=` then
                // `b ::= ...`: joined, `a ::= b` parses and `::=` is the error), so the error
                // is where the two stop parsing together, as if the file were parsed whole.
                let next = heads.get(i + 2).copied().unwrap_or(tokens.len());
                let joined = start..next.min(start + max);
                return Err(syntax_failure(
                    source, text, &tokens, &kinds, joined, end, deadline,
                ));
            }
        }
    }
    Ok(rules)
}

fn late_error(
    source: &str,
    text: &str,
    tokens: &[Token],
    at: usize,
    late: LimitExceeded,
) -> CompileError {
    let at = Location::in_text(source, text, tokens[at].start);
    CompileError::over_limit(late, at, "template")
}

/// Where each rule starts: at `name ::=` or `name ( ... ) ::=` (only a rule head is followed
/// by `::=`). The first rule starts at the first token whatever it is, so that a file not
/// starting with a rule fails there.
fn rule_heads(kinds: &[Kind]) -> Vec<usize> {
    let mut heads = Vec::new();
    // The last `(`: parameter lists hold no parentheses, so it opens the one a `) ::=` closes.
    let mut open = None;
    for (i, &k) in kinds.iter().enumerate() {
        match k {
            Kind::LParen => open = Some(i),
            Kind::Define if i > 0 => {
                let head = match kinds[i - 1] {
                    Kind::Ident => Some(i - 1),
                    Kind::RParen => open
                        .filter(|&o| o > 0 && kinds[o - 1] == Kind::Ident)
                        .map(|o| o - 1),
                    _ => None,
                };
                if let Some(head) = head.filter(|&h| heads.last().is_none_or(|&last| h > last)) {
                    heads.push(head);
                }
            }
            _ => {}
        }
    }
    match heads.first() {
        Some(0) => {}
        _ if kinds.is_empty() => {}
        _ => heads.insert(0, 0),
    }
    heads
}

/// The syntax error of `tokens[joined]`, or of its first rule alone (`tokens[joined.start..
/// alone]`, which does not parse) if the whole parses.
fn syntax_failure(
    source: &str,
    text: &str,
    tokens: &[Token],
    kinds: &Rc<[Kind]>,
    joined: std::ops::Range<usize>,
    alone: usize,
    deadline: &Deadline,
) -> CompileError {
    let mut range = joined.clone();
    let mut parsed = run_earley(tokens, kinds, range.clone(), false, deadline);
    if let Parsed::Rules(_) = parsed {
        range = joined.start..alone;
        parsed = run_earley(tokens, kinds, range.clone(), false, deadline);
    }
    let (failed, tried) = match parsed {
        Parsed::Failed { at, tried } if at < range.end => (at, tried),
        // Every token was accepted: what was expected after the last one.
        Parsed::Failed { .. } | Parsed::Rules(_) => {
            match run_earley(tokens, kinds, range.clone(), true, deadline) {
                Parsed::Failed { tried, .. } => (range.end, tried),
                Parsed::Rules(_) => (range.end, Vec::new()),
                Parsed::Late(late) => return late_error(source, text, tokens, range.start, late),
            }
        }
        Parsed::Late(late) => return late_error(source, text, tokens, range.start, late),
    };
    syntax_error(source, text, tokens, failed, tried)
}

/// What one earlgrey parse gave.
enum Parsed {
    Rules(Vec<RuleDef>),
    /// No parse: the first token no terminal accepted (the end, if all were), and the
    /// terminals tried there.
    Failed {
        at: usize,
        tried: Vec<Kind>,
    },
    /// The compile deadline passed while tokens were fed.
    Late(LimitExceeded),
}

/// One earlgrey parse of `tokens[range]` (the template grammar, start symbol `file`); with
/// `sentinel`, a token past the range that no terminal accepts ends the input, so that the
/// failure says what was expected after the last token.
fn run_earley(
    tokens: &[Token],
    kinds: &Rc<[Kind]>,
    range: std::ops::Range<usize>,
    sentinel: bool,
    deadline: &Deadline,
) -> Parsed {
    let tracker = Rc::new(Tracker::default());
    tracker.accepted.set(range.start);
    let mut g = earlgrey::GrammarBuilder::default();
    for kind in Kind::ALL {
        let (tracker, kinds, end) = (tracker.clone(), kinds.clone(), range.end);
        g.terminal_try(kind.name(), move |_| {
            let i = tracker.current.get();
            let ok = i < end && kinds.get(i) == Some(&kind);
            if ok {
                tracker.accepted.set(i + 1);
            } else {
                tracker.tried.borrow_mut().push(kind);
            }
            ok
        });
    }
    for (head, _, _) in RULES {
        g.nonterm_try(head);
    }
    for (head, body, _) in RULES {
        g.rule_try(head, body);
    }
    let grammar = g
        .into_grammar("file")
        .expect("the template grammar is well-formed");
    let feed = Feed {
        tracker: tracker.clone(),
        start: range.start,
        next: range.start,
        end: range.end,
        sentinel,
        deadline,
    };
    let result = earlgrey::EarleyParser::new(grammar).parse(feed);
    if let Some(late) = tracker.late.take() {
        return Parsed::Late(late);
    }
    let Ok(trees) = result else {
        return Parsed::Failed {
            at: tracker.accepted.get(),
            tried: tracker.tried.take(),
        };
    };
    let mut forest = earlgrey::EarleyForest::new(|_, index: &str| {
        // Lexemes are the token indices `Feed` gave.
        Node::Tok(index.parse().expect("lexemes are token indices"))
    });
    for &(head, body, action) in RULES {
        forest.action(&format!("{head} -> {}", body.join(" ")), move |nodes| {
            action(tokens, nodes)
        });
    }
    match forest.eval(&trees) {
        Ok(Node::Rules(rules)) => Parsed::Rules(rules),
        other => unreachable!("the start symbol evaluates to rules: {other:?}"),
    }
}

fn describe(kind: Kind) -> String {
    match kind {
        Kind::Ident => "a name".into(),
        Kind::Str => "a string".into(),
        Kind::Class => "a character class".into(),
        Kind::Regex => "a /regex/".into(),
        Kind::Special => "a special token".into(),
        Kind::Int => "an integer".into(),
        other => format!("`{}`", other.name()),
    }
}

fn syntax_error(
    source: &str,
    text: &str,
    tokens: &[Token],
    failed: usize,
    mut tried: Vec<Kind>,
) -> CompileError {
    tried.sort_by_key(|k| Kind::ALL.iter().position(|x| x == k));
    tried.dedup();
    let expected: Vec<String> = tried.into_iter().map(describe).collect();
    let expected = match expected.len() {
        0 => "nothing more".to_string(),
        1 => expected[0].clone(),
        _ => format!("one of {}", expected.join(", ")),
    };
    let (at, found) = match tokens.get(failed) {
        Some(t) => {
            let what = match t.kind {
                Kind::Ident => format!("name `{}`", t.text()),
                Kind::Str => "a string".into(),
                Kind::Class => format!("class `{}`", t.text()),
                Kind::Regex => format!("regex `/{}/`", t.text()),
                Kind::Special => format!("special token `{}`", t.text()),
                Kind::Int => "an integer".into(),
                other => format!("`{}`", other.name()),
            };
            (t.start, what)
        }
        None => (text.trim_end().len(), "the end of the file".to_string()),
    };
    CompileError::new(
        CompileErrorKind::Syntax,
        Location::in_text(source, text, at),
        format!("expected {expected}, found {found}"),
    )
}
