//! The request syntax tree, shared by the text and JSON forms: one flat arena of nodes, lists
//! of children as ranges of one index array.
//!
//! Flat because requests are parsed on every generation's critical path: the LALR parser then
//! moves 4-byte node ids instead of tree values, and a request costs a handful of vector
//! growths rather than an allocation per node. Positions (`at`) are byte offsets into the
//! request text, or indices into the JSON pointer table of a JSON request.

use std::borrow::Cow;

/// Index of a node.
pub(crate) type NodeId = u32;

/// A run of `Tree::children`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Children {
    start: u32,
    len: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Node<'a> {
    pub kind: NodeKind<'a>,
    pub at: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum NodeKind<'a> {
    Str(Cow<'a, str>),
    Int(i64),
    Range(i64, i64),
    Regex(Cow<'a, str>),
    /// Children: `Str` nodes.
    Choice(Children),
    /// Children: values.
    List(Children),
    /// `name(arg: value, ...)`, a structure instance; children: `Arg` nodes.
    Call {
        name: Cow<'a, str>,
        args: Children,
    },
    Arg {
        name: Cow<'a, str>,
        value: NodeId,
    },
}

impl NodeKind<'_> {
    /// What the value is, for errors ("a string", "a list", ...).
    pub fn describe(&self) -> &'static str {
        match self {
            NodeKind::Str(_) => "a string",
            NodeKind::Int(_) => "an integer",
            NodeKind::Range(..) => "an integer range",
            NodeKind::Regex(_) => "a regex",
            NodeKind::Choice(_) => "a choice set",
            NodeKind::List(_) => "a list",
            NodeKind::Call { .. } => "a structure instance",
            NodeKind::Arg { .. } => "an argument",
        }
    }
}

/// A request tree under construction (by the parser) or complete (root set).
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Tree<'a> {
    nodes: Vec<Node<'a>>,
    children: Vec<NodeId>,
    /// Elements of the lists still open while parsing, innermost last.
    open: Vec<NodeId>,
    pub root: NodeId,
}

impl<'a> Tree<'a> {
    /// An empty tree with room for about `nodes` nodes.
    pub fn with_capacity(nodes: usize) -> Tree<'a> {
        Tree {
            nodes: Vec::with_capacity(nodes),
            children: Vec::with_capacity(nodes),
            open: Vec::with_capacity(16),
            root: 0,
        }
    }

    pub fn node(&self, id: NodeId) -> &Node<'a> {
        &self.nodes[id as usize]
    }

    pub fn children(&self, c: Children) -> &[NodeId] {
        &self.children[c.start as usize..(c.start + c.len) as usize]
    }

    /// Adds a node.
    pub fn add(&mut self, kind: NodeKind<'a>, at: usize) -> NodeId {
        self.nodes.push(Node {
            kind,
            at: at as u32,
        });
        (self.nodes.len() - 1) as NodeId
    }

    /// Appends an element to the innermost open list.
    pub fn push_element(&mut self, id: NodeId) {
        self.open.push(id);
    }

    /// Closes the innermost open list of `len` elements.
    pub fn close(&mut self, len: u32) -> Children {
        let start = self.children.len() as u32;
        let from = self.open.len() - len as usize;
        self.children.extend_from_slice(&self.open[from..]);
        self.open.truncate(from);
        Children { start, len }
    }

    /// A call whose `args` argument nodes were pushed as elements.
    pub fn call(&mut self, name: Cow<'a, str>, at: usize, args: u32) -> NodeId {
        let args = self.close(args);
        self.add(NodeKind::Call { name, args }, at)
    }

    /// The call's name and argument nodes.
    pub fn call_parts(&self, id: NodeId) -> (&str, &[NodeId]) {
        match &self.node(id).kind {
            NodeKind::Call { name, args } => (name, self.children(*args)),
            other => unreachable!("not a call: {other:?}"),
        }
    }

    /// An argument's name and value.
    pub fn arg_parts(&self, id: NodeId) -> (&str, NodeId) {
        match &self.node(id).kind {
            NodeKind::Arg { name, value } => (name, *value),
            other => unreachable!("not an argument: {other:?}"),
        }
    }
}

/// A string literal's content from its raw text (escapes already checked by the lexer).
pub(crate) fn unescape(raw: &str) -> Cow<'_, str> {
    if !raw.contains('\\') {
        return Cow::Borrowed(raw);
    }
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('0') => out.push('\0'),
            Some('u') => {
                let rest = chars.as_str();
                let close = rest.find('}').expect("checked by the lexer");
                let code = u32::from_str_radix(&rest[1..close], 16).expect("checked");
                out.push(char::from_u32(code).expect("checked"));
                chars = rest[close + 1..].chars();
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Cow::Owned(out)
}

/// A regex literal's pattern from its raw text: `\/` stands for `/`.
pub(crate) fn regex_pattern(raw: &str) -> Cow<'_, str> {
    if raw.contains("\\/") {
        Cow::Owned(raw.replace("\\/", "/"))
    } else {
        Cow::Borrowed(raw)
    }
}
