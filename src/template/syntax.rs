//! The template syntax tree and its parser: tokens from the lexer, an `earlgrey` Earley parser
//! over them, and the parse forest evaluated into the tree.
//!
//! earlgrey reports a failed parse without a place, so the terminal predicates keep score:
//! the first token no terminal accepted is where the text stops being a viable prefix (Earley
//! sets hold every viable item), and the terminals that were tried there are what was
//! expected.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::lexer::{self, Kind, Token, Value};
use crate::error::{CompileError, CompileErrorKind, Location};

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
}

/// Feeds token indices to earlgrey; stops after a token nothing accepted, and optionally ends
/// with a sentinel no terminal accepts (to learn what was expected at the end of the file).
struct Feed {
    tracker: Rc<Tracker>,
    next: usize,
    len: usize,
    sentinel: bool,
}

impl Iterator for Feed {
    type Item = String;
    fn next(&mut self) -> Option<String> {
        let i = self.next;
        if i > self.len || (i > 0 && self.tracker.accepted.get() < i) {
            return None;
        }
        if i == self.len && !self.sentinel {
            return None;
        }
        self.next += 1;
        self.tracker.current.set(i);
        self.tracker.tried.borrow_mut().clear();
        Some(i.to_string())
    }
}

/// Parses one template file into its rules.
pub(crate) fn parse(source: &str, text: &str) -> Result<Vec<RuleDef>, CompileError> {
    let tokens = lexer::lex(source, text)?;
    if tokens.is_empty() {
        return Ok(Vec::new());
    }
    let kinds: Rc<[Kind]> = tokens.iter().map(|t| t.kind).collect();
    let run = |sentinel: bool| {
        let tracker = Rc::new(Tracker::default());
        let mut g = earlgrey::GrammarBuilder::default();
        for kind in Kind::ALL {
            let (tracker, kinds) = (tracker.clone(), kinds.clone());
            g.terminal_try(kind.name(), move |_| {
                let i = tracker.current.get();
                let ok = kinds.get(i) == Some(&kind);
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
            next: 0,
            len: kinds.len(),
            sentinel,
        };
        let result = earlgrey::EarleyParser::new(grammar).parse(feed);
        (result, tracker)
    };
    let (result, tracker) = run(false);
    let trees = match result {
        Ok(trees) => trees,
        Err(_) => {
            let failed = tracker.accepted.get();
            let tried = if failed < tokens.len() {
                tracker.tried.take()
            } else {
                run(true).1.tried.take()
            };
            return Err(syntax_error(source, text, &tokens, failed, tried));
        }
    };
    let mut forest = earlgrey::EarleyForest::new(|_, index: &str| {
        Node::Tok(index.parse().expect("lexemes are token indices"))
    });
    for &(head, body, action) in RULES {
        let tokens = &tokens;
        forest.action(&format!("{head} -> {}", body.join(" ")), move |nodes| {
            action(tokens, nodes)
        });
    }
    match forest.eval(&trees) {
        Ok(Node::Rules(rules)) => Ok(rules),
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
