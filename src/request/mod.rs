//! Requests: which factory structure to generate, with which arguments.
//!
//! The text form is parsed by an LALR(1) parser generated with lalrpop from
//! `grammar/request.lalrpop` (linear time, built once, reused):
//!
//! ```text
//! outline(sections: [section(id: "1", children: [section(id: "1.1")]), section(id: "2")])
//! reference_lookup(topics: 1..20, ids: {"1", "1.1", "2"})
//! tool_call(tools: [tool(name: "search", params: [param(name: "q", value: string)])])
//! ```
//!
//! Values: `"string"`, `42`, `1..20` (an integer range), `/regex/`, `{"a", "b"}` (a choice
//! set), `[v, ...]` (a list) and `name(arg: v, ...)` or a bare `name` (a structure instance).
//!
//! The JSON form, for HTTP APIs, is the same tree: a structure instance is an object with one
//! key, the structure's name, whose value is the object of arguments; strings, integers and
//! arrays are themselves; `{"$choice": [...]}`, `{"$regex": "..."}` and `{"$range": [lo, hi]}`
//! are the other literals.
//!
//! ```
//! use formwork::request::Request;
//!
//! let text = Request::parse(r#"lookup(topics: 1..3, ids: {"1", "2"})"#).unwrap();
//! let json = Request::parse_json(
//!     r#"{"lookup": {"topics": {"$range": [1, 3]}, "ids": {"$choice": ["1", "2"]}}}"#,
//! ).unwrap();
//! assert_eq!(text.to_json(), json.to_json());
//! assert_eq!(text.structure(), "lookup");
//! let err = Request::parse("lookup(topics: 1..)").unwrap_err();
//! assert_eq!(err.to_string(), "<request>:1:19: expected an integer, found `)`");
//! ```
//!
//! Binding a request against a [`StructureFactory`] type-checks every argument against its
//! parameter's kind and assembles the operator program ([`Request::instantiate`]) or the
//! grammar IR ([`Request::instantiate_ir`]).
//!
//! Requests are untrusted: [`Request::parse_with`] and [`Request::parse_json_with`] bound their
//! size (`Limits::input_bytes`) and how deeply their brackets nest (`Limits::nesting`; the
//! JSON form's arrays and objects too), with a `Limit` error at the place; the plain `parse`
//! functions apply the default [`Limits`]. Neither parsing nor binding recurses over the
//! request's nesting.

mod ast;
mod bind;
mod lexer;
mod range;
mod target;

use std::sync::OnceLock;

use serde_json::{json, Map, Value as Json};

use crate::error::{CompileError, CompileErrorKind, Location};
use crate::ir::Grammar;
use crate::limits::{Deadline, LimitExceeded, LimitKind, Limits};
use crate::ops::Program;
use crate::template::StructureFactory;
use ast::{NodeId, NodeKind, Tree};

pub use range::int_range_regex;

lalrpop_util::lalrpop_mod!(
    #[allow(clippy::all, unused_qualifications, missing_docs)]
    grammar,
    "/request.rs"
);

/// Name of the text source in error locations.
const SOURCE: &str = "<request>";

/// Where a request came from, to place errors.
#[derive(Clone, Debug)]
enum Origin<'a> {
    Text(&'a str),
    /// JSON pointers, indexed by the tree's positions.
    Json(Vec<String>),
}

impl Origin<'_> {
    fn locate(&self, at: u32) -> Location {
        match self {
            Origin::Text(text) => Location::in_text(SOURCE, text, at as usize),
            Origin::Json(pointers) => Location::JsonPointer(pointers[at as usize].clone()),
        }
    }
}

/// A parsed request.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    tree: Tree<'a>,
    origin: Origin<'a>,
}

fn parser() -> &'static grammar::RequestParser {
    static PARSER: OnceLock<grammar::RequestParser> = OnceLock::new();
    PARSER.get_or_init(grammar::RequestParser::new)
}

impl<'a> Request<'a> {
    /// Parses the text form within the default [`Limits`]. Names and strings without escapes
    /// borrow from `text`.
    pub fn parse(text: &'a str) -> Result<Request<'a>, CompileError> {
        Request::parse_with(text, &Limits::default())
    }

    /// Parses the text form within `limits` (`input_bytes`, `nesting`).
    ///
    /// ```
    /// use formwork::request::Request;
    /// use formwork::{LimitKind, Limits};
    ///
    /// let limits = Limits::new().nesting(4);
    /// assert!(Request::parse_with("a(b: [c(d: [])])", &limits).is_ok());
    /// let err = Request::parse_with("a(b: [c(d: [e(f: 1)])])", &limits).unwrap_err();
    /// assert_eq!(err.limit().unwrap().kind, LimitKind::Nesting);
    /// assert_eq!(err.to_string(), "<request>:1:14: request: brackets: nesting limit: 5 > 4");
    /// ```
    pub fn parse_with(text: &'a str, limits: &Limits) -> Result<Request<'a>, CompileError> {
        check_length(text, limits)?;
        // Requests have about one node per 6 bytes.
        let mut tree = Tree::with_capacity(text, text.len() / 6 + 4);
        let lexer = lexer::Lexer::new(text, limits.get(LimitKind::Nesting));
        tree.root = parser()
            .parse(&mut tree, lexer)
            .map_err(|e| parse_error(text, e))?;
        Ok(Request {
            tree,
            origin: Origin::Text(text),
        })
    }

    /// The structure the request asks for.
    pub fn structure(&self) -> &str {
        self.tree.call_parts(self.tree.root).0
    }

    /// The request in its JSON form.
    pub fn to_json(&self) -> Json {
        node_json(&self.tree, self.tree.root)
    }

    /// Binds the request against `factory`: the operator program of the requested structure
    /// with these arguments (the fast path: prebuilt fragments are spliced, only choice sets
    /// build a leaf, regexes come from the compiler's cache).
    pub fn instantiate(&self, factory: &StructureFactory) -> Result<Program, CompileError> {
        let limits = Limits::default();
        self.instantiate_within(factory, &limits.deadline())
    }

    /// [`instantiate`](Self::instantiate), spending the compile time left before `deadline`.
    pub(crate) fn instantiate_within(
        &self,
        factory: &StructureFactory,
        deadline: &Deadline,
    ) -> Result<Program, CompileError> {
        bind::instantiate(factory, &self.tree, &|at| self.origin.locate(at), deadline)
    }

    /// Binds the request against `factory` into grammar IR: the same language as
    /// [`instantiate`](Self::instantiate), for the reference recognizer and the CFG backend.
    pub fn instantiate_ir(&self, factory: &StructureFactory) -> Result<Grammar, CompileError> {
        let limits = Limits::default();
        self.instantiate_ir_within(factory, &limits, &limits.deadline())
    }

    /// [`instantiate_ir`](Self::instantiate_ir) within `limits` (the grammar's size) and
    /// `deadline`.
    pub(crate) fn instantiate_ir_within(
        &self,
        factory: &StructureFactory,
        limits: &Limits,
        deadline: &Deadline,
    ) -> Result<Grammar, CompileError> {
        let locate = |at| self.origin.locate(at);
        bind::instantiate_ir(factory, &self.tree, &locate, limits, deadline)
    }

    /// The error reported for a request naming a structure that neither the factory nor the
    /// built-ins know (kind `Unsupported`).
    pub fn unsupported(&self) -> CompileError {
        CompileError::new(
            CompileErrorKind::Unsupported,
            self.origin.locate(self.tree.node(self.tree.root).at),
            format!(
                "no template structure `{}` (built-ins without templates: {})",
                self.structure(),
                BUILTINS.join(", ")
            ),
        )
    }

    /// The request as a [`Builtin`], if it names one (`None` for any other structure; an error
    /// if it names one with the wrong arguments). The engine asks only when the factory has no
    /// structure of that name, so a template may shadow a built-in.
    ///
    /// ```
    /// use formwork::request::{Builtin, Request};
    ///
    /// let r = Request::parse(r#"gbnf(grammar: "root ::= [a-z]+")"#).unwrap();
    /// assert!(matches!(r.builtin(), Some(Ok(Builtin::Gbnf("root ::= [a-z]+")))));
    /// let r = Request::parse(r#"regex(pattern: /[0-9]+/)"#).unwrap();
    /// assert!(matches!(r.builtin(), Some(Ok(Builtin::Regex("[0-9]+")))));
    /// let bad = Request::parse(r#"json_schema(schema: 3)"#).unwrap();
    /// assert_eq!(bad.builtin().unwrap().unwrap_err().to_string(),
    ///     "<request>:1:21: json_schema: argument `schema` must be a string, found an integer");
    /// assert!(Request::parse("outline(sections: [])").unwrap().builtin().is_none());
    /// ```
    pub fn builtin(&self) -> Option<Result<Builtin<'_>, CompileError>> {
        let (name, args) = self.tree.call_parts(self.tree.root);
        let (param, make): (&str, for<'s> fn(&'s str) -> Builtin<'s>) = match name {
            "json_schema" => ("schema", |s| Builtin::JsonSchema(s)),
            "gbnf" => ("grammar", |s| Builtin::Gbnf(s)),
            "regex" => ("pattern", |s| Builtin::Regex(s)),
            _ => return None,
        };
        let error = |at: u32, message: String| {
            CompileError::new(
                CompileErrorKind::Invalid,
                self.origin.locate(at),
                format!("{name}: {message}"),
            )
        };
        let root_at = self.tree.node(self.tree.root).at;
        let [arg] = args else {
            return Some(Err(error(
                root_at,
                format!("takes exactly one argument, `{param}`"),
            )));
        };
        let (arg_name, value) = self.tree.arg_parts(*arg);
        if arg_name != param {
            return Some(Err(error(
                self.tree.node(*arg).at,
                format!("unknown argument `{arg_name}`; expected `{param}`"),
            )));
        }
        let node = self.tree.node(value);
        Some(match (node.kind, name) {
            (NodeKind::Str(s), _) | (NodeKind::Regex(s), "regex") => Ok(make(self.tree.str(s))),
            (other, _) => Err(error(
                node.at,
                format!(
                    "argument `{param}` must be a string, found {}",
                    other.describe()
                ),
            )),
        })
    }
}

/// Names of the [`Builtin`] structures.
pub const BUILTINS: [&str; 3] = [
    "json_schema(schema: \"...\")",
    "gbnf(grammar: \"...\")",
    "regex(pattern: /.../)",
];

/// A structure every engine knows without templates: its argument goes to the matching front
/// end and the router (operator backend if regular, Earley otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Builtin<'r> {
    /// `json_schema(schema: "...")`: a JSON Schema document, compact output.
    JsonSchema(&'r str),
    /// `gbnf(grammar: "...")`: a llama.cpp GBNF grammar starting at `root`.
    Gbnf(&'r str),
    /// `regex(pattern: /.../)` (or a string): a regex over the whole output.
    Regex(&'r str),
}

impl Request<'static> {
    /// Parses the JSON form within the default [`Limits`]. Syntax errors carry line:col,
    /// shape errors a JSON pointer.
    pub fn parse_json(text: &str) -> Result<Request<'static>, CompileError> {
        Request::parse_json_with(text, &Limits::default())
    }

    /// Parses the JSON form within `limits` (`input_bytes`, and `nesting` for its arrays and
    /// objects, checked on the text before it is parsed).
    pub fn parse_json_with(text: &str, limits: &Limits) -> Result<Request<'static>, CompileError> {
        check_length(text, limits)?;
        check_json_nesting(text, limits)?;
        let json: Json = serde_json::from_str(text).map_err(|e| {
            CompileError::new(
                CompileErrorKind::Syntax,
                Location::Text {
                    source: SOURCE.into(),
                    line: e.line(),
                    col: e.column(),
                },
                format!("invalid JSON: {e}"),
            )
        })?;
        let mut pointers = Vec::new();
        let mut tree = Tree::default();
        tree.root = json_call(&json, String::new(), &mut tree, &mut pointers)?;
        Ok(Request {
            tree,
            origin: Origin::Json(pointers),
        })
    }
}

/// `Limits::input_bytes`, and at most 2 GiB: positions and string spans of a request tree are
/// 32-bit, and spans address the text and the decoded strings (at most as long as the text)
/// one after the other.
fn check_length(text: &str, limits: &Limits) -> Result<(), CompileError> {
    let max = limits.get(LimitKind::InputBytes).min(u32::MAX as u64 / 2);
    if text.len() as u64 > max {
        let exceeded = LimitExceeded {
            kind: LimitKind::InputBytes,
            value: text.len() as u64,
            max,
        };
        return Err(CompileError::over_limit(
            exceeded,
            Location::in_text(SOURCE, text, 0),
            "request",
        ));
    }
    Ok(())
}

/// Rejects JSON arrays and objects nested deeper than `limits.nesting`, before serde builds
/// (and `json_call` walks) the value. The scan knows JSON's strings and escapes: a bracket
/// inside a string is text.
fn check_json_nesting(text: &str, limits: &Limits) -> Result<(), CompileError> {
    let max = limits.get(LimitKind::Nesting);
    let bytes = text.as_bytes();
    let mut depth = 0u64;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        i += 1;
        match b {
            b'"' => {
                while let Some(&c) = bytes.get(i) {
                    i += if c == b'\\' { 2 } else { 1 };
                    if c == b'"' {
                        break;
                    }
                }
            }
            b'[' | b'{' => {
                depth += 1;
                if depth > max {
                    let exceeded = LimitExceeded {
                        kind: LimitKind::Nesting,
                        value: depth,
                        max,
                    };
                    let at = Location::in_text(SOURCE, text, i - 1);
                    return Err(CompileError::over_limit(exceeded, at, "request: JSON"));
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    Ok(())
}

fn parse_error(
    text: &str,
    e: lalrpop_util::ParseError<u32, lexer::Tok, lexer::LexError>,
) -> CompileError {
    use lalrpop_util::ParseError as P;
    let expected = |list: &[String]| {
        let items: Vec<String> = list
            .iter()
            .map(|t| match t.trim_matches('"') {
                "name" => "a name".to_string(),
                "string" => "a string".to_string(),
                "integer" => "an integer".to_string(),
                "regex" => "a /regex/".to_string(),
                punct => format!("`{punct}`"),
            })
            .collect();
        match items.len() {
            0 => "the end of the request".to_string(),
            1 => items[0].clone(),
            _ => format!("one of {}", items.join(", ")),
        }
    };
    let found = |at: u32, tok: lexer::Tok, end: u32| tok.describe(&text[at as usize..end as usize]);
    let (at, message) = match e {
        P::InvalidToken { location } => (location as usize, "invalid token".to_string()),
        P::UnrecognizedEof {
            location,
            expected: list,
        } => (
            location as usize,
            format!("expected {}, found the end of the request", expected(&list)),
        ),
        P::UnrecognizedToken {
            token: (at, tok, end),
            expected: list,
        } => (
            at as usize,
            format!(
                "expected {}, found {}",
                expected(&list),
                found(at, tok, end)
            ),
        ),
        P::ExtraToken {
            token: (at, tok, end),
        } => (
            at as usize,
            format!(
                "expected the end of the request, found {}",
                found(at, tok, end)
            ),
        ),
        P::User { error } => match error.limit {
            Some(limit) => {
                let at = Location::in_text(SOURCE, text, error.at);
                return CompileError::over_limit(limit, at, &error.message);
            }
            None => (error.at, error.message),
        },
    };
    CompileError::new(
        CompileErrorKind::Syntax,
        Location::in_text(SOURCE, text, at),
        message,
    )
}

/// Recurses once per level of the tree, which parsing bounded by `Limits::nesting` (the
/// `Json` it builds drops recursively as deep).
fn node_json(tree: &Tree, id: NodeId) -> Json {
    let all = |ids: &[NodeId]| Json::Array(ids.iter().map(|&i| node_json(tree, i)).collect());
    match tree.node(id).kind {
        NodeKind::Str(s) => json!(tree.str(s)),
        NodeKind::Int(n) => json!(n),
        NodeKind::Range(lo, hi) => json!({"$range": [lo, hi]}),
        NodeKind::Regex(r) => json!({"$regex": tree.str(r)}),
        NodeKind::Choice(set) => json!({ "$choice": all(tree.children(set)) }),
        NodeKind::List(items) => all(tree.children(items)),
        NodeKind::Call { name, args } => {
            let args: Map<String, Json> = tree
                .children(args)
                .iter()
                .map(|&a| {
                    let (name, value) = tree.arg_parts(a);
                    (name.to_string(), node_json(tree, value))
                })
                .collect();
            json!({ tree.str(name).to_string(): args })
        }
        NodeKind::Arg { .. } => unreachable!("arguments are converted with their call"),
    }
}

fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// Registers `pointer` and returns its position index.
fn place(pointer: &str, pointers: &mut Vec<String>) -> u32 {
    pointers.push(pointer.to_string());
    (pointers.len() - 1) as u32
}

fn shape_error(pointer: &str, message: impl Into<String>) -> CompileError {
    CompileError::new(
        CompileErrorKind::Syntax,
        Location::JsonPointer(pointer.to_string()),
        message,
    )
}

/// `json_call` and `json_value` recurse once per level of the value, which
/// `check_json_nesting` bounded by `Limits::nesting`, and serde_json by 128.
fn json_call(
    json: &Json,
    pointer: String,
    tree: &mut Tree<'static>,
    pointers: &mut Vec<String>,
) -> Result<NodeId, CompileError> {
    let object = match json {
        Json::Object(o) if o.len() == 1 => o,
        _ => {
            return Err(shape_error(
                &pointer,
                "expected a structure instance: an object with one key, the structure's name",
            ))
        }
    };
    // The match above let only one-key objects through.
    let (name, args_json) = object.iter().next().unwrap();
    if name.starts_with('$') {
        return Err(shape_error(
            &pointer,
            format!("expected a structure instance, found the literal `{name}`"),
        ));
    }
    let args_pointer = format!("{pointer}/{}", pointer_token(name));
    let Json::Object(fields) = args_json else {
        return Err(shape_error(
            &args_pointer,
            "expected the object of the structure's arguments",
        ));
    };
    for (key, value) in fields {
        let p = format!("{args_pointer}/{}", pointer_token(key));
        let value = json_value(value, p.clone(), tree, pointers)?;
        let at = place(&p, pointers);
        let name = tree.owned(key);
        let arg = tree.add(NodeKind::Arg { name, value }, at);
        tree.push_element(arg);
    }
    let at = place(&pointer, pointers);
    let name = tree.owned(name);
    Ok(tree.call(name, at, fields.len() as u32))
}

fn json_value(
    json: &Json,
    pointer: String,
    tree: &mut Tree<'static>,
    pointers: &mut Vec<String>,
) -> Result<NodeId, CompileError> {
    let int = |v: &Json, p: &str| {
        v.as_i64()
            .ok_or_else(|| shape_error(p, "expected an integer (64-bit signed)"))
    };
    let kind = match json {
        Json::String(s) => NodeKind::Str(tree.owned(s)),
        Json::Number(_) => NodeKind::Int(int(json, &pointer)?),
        Json::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let id = json_value(item, format!("{pointer}/{i}"), tree, pointers)?;
                tree.push_element(id);
            }
            NodeKind::List(tree.close(items.len() as u32))
        }
        // One key, checked before it is read.
        Json::Object(o) if o.len() == 1 && o.keys().next().unwrap().starts_with('$') => {
            let (key, v) = o.iter().next().unwrap();
            let p = format!("{pointer}/{}", pointer_token(key));
            match key.as_str() {
                "$choice" => {
                    let Json::Array(items) = v else {
                        return Err(shape_error(&p, "expected an array of strings"));
                    };
                    for (i, s) in items.iter().enumerate() {
                        let item = format!("{p}/{i}");
                        let s = s
                            .as_str()
                            .ok_or_else(|| shape_error(&item, "expected a string"))?;
                        let at = place(&item, pointers);
                        let s = tree.owned(s);
                        let id = tree.add(NodeKind::Str(s), at);
                        tree.push_element(id);
                    }
                    NodeKind::Choice(tree.close(items.len() as u32))
                }
                "$regex" => NodeKind::Regex(
                    tree.owned(
                        v.as_str()
                            .ok_or_else(|| shape_error(&p, "expected the pattern as a string"))?,
                    ),
                ),
                "$range" => match v {
                    Json::Array(b) if b.len() == 2 => NodeKind::Range(
                        int(&b[0], &format!("{p}/0"))?,
                        int(&b[1], &format!("{p}/1"))?,
                    ),
                    _ => return Err(shape_error(&p, "expected [lo, hi]")),
                },
                other => {
                    return Err(shape_error(
                        &pointer,
                        format!("unknown literal `{other}`: expected $choice, $regex or $range"),
                    ))
                }
            }
        }
        Json::Object(_) => return json_call(json, pointer, tree, pointers),
        Json::Bool(_) | Json::Null => {
            return Err(shape_error(
                &pointer,
                "expected a string, an integer, an array, a literal object or a structure instance",
            ))
        }
    };
    let at = place(&pointer, pointers);
    Ok(tree.add(kind, at))
}
