//! The request syntax tree, shared by the text and JSON forms: one flat arena of nodes, lists
//! of children as ranges of one index array, strings as spans.
//!
//! Flat and plain (`Copy` nodes, no owned strings) because requests are parsed on every
//! generation's critical path: the LALR parser then moves 4-byte node ids instead of tree
//! values, a node is written once into its vector, and a request costs a handful of vector
//! growths rather than an allocation per node or string. Positions (`at`) are byte offsets
//! into the request text, or indices into the JSON pointer table of a JSON request.

/// Index of a node.
pub(crate) type NodeId = u32;

/// A run of `Tree::children`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Children {
    start: u32,
    len: u32,
}

/// A string of the tree: bytes `start..start + len` of the request text, or, from the text's
/// end on, of the tree's own buffer (strings with escapes decoded, strings of JSON requests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    start: u32,
    len: u32,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Node {
    pub kind: NodeKind,
    pub at: u32,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum NodeKind {
    Str(Span),
    Int(i64),
    Range(i64, i64),
    Regex(Span),
    /// Children: `Str` nodes.
    Choice(Children),
    /// Children: values.
    List(Children),
    /// `name(arg: value, ...)`, a structure instance; children: `Arg` nodes.
    Call {
        name: Span,
        args: Children,
    },
    Arg {
        name: Span,
        value: NodeId,
    },
}

impl NodeKind {
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
    /// The request text spans point into (empty for a JSON request).
    text: &'a str,
    /// The strings that are not slices of `text`, addressed from `text.len()` on.
    owned: String,
    nodes: Vec<Node>,
    children: Vec<NodeId>,
    /// Elements of the lists still open while parsing, innermost last.
    open: Vec<NodeId>,
    pub root: NodeId,
}

impl<'a> Tree<'a> {
    /// An empty tree over `text` with room for about `nodes` nodes.
    pub fn with_capacity(text: &'a str, nodes: usize) -> Tree<'a> {
        Tree {
            text,
            owned: String::new(),
            nodes: Vec::with_capacity(nodes),
            children: Vec::with_capacity(nodes),
            open: Vec::with_capacity(16),
            root: 0,
        }
    }

    /// Nodes so far.
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    pub fn children(&self, c: Children) -> &[NodeId] {
        &self.children[c.start as usize..(c.start + c.len) as usize]
    }

    /// The text of a span.
    pub fn str(&self, s: Span) -> &str {
        let (start, len) = (s.start as usize, s.len as usize);
        match start.checked_sub(self.text.len()) {
            Some(k) => &self.owned[k..k + len],
            None => &self.text[start..start + len],
        }
    }

    /// Bytes `start..end` of the text.
    pub fn slice(&self, start: u32, end: u32) -> Span {
        Span {
            start,
            len: end - start,
        }
    }

    fn raw(&self, start: u32, end: u32) -> &'a str {
        &self.text[start as usize..end as usize]
    }

    /// A string kept by the tree.
    pub fn owned(&mut self, s: &str) -> Span {
        let start = (self.text.len() + self.owned.len()) as u32;
        self.owned.push_str(s);
        Span {
            start,
            len: s.len() as u32,
        }
    }

    /// A string literal whose raw content (escapes checked by the lexer) is bytes `start..end`.
    pub fn string(&mut self, start: u32, end: u32) -> Span {
        let raw = self.raw(start, end);
        if !raw.contains('\\') {
            return self.slice(start, end);
        }
        let from = self.text.len() + self.owned.len();
        unescape(raw, &mut self.owned);
        Span {
            start: from as u32,
            len: (self.text.len() + self.owned.len() - from) as u32,
        }
    }

    /// The integer at bytes `start..end`.
    pub fn int(&self, start: u32, end: u32) -> i64 {
        parse_int(self.raw(start, end))
    }

    /// The bounds of the range `lo..hi` at bytes `start..end`.
    pub fn range(&self, start: u32, end: u32) -> (i64, i64) {
        let (lo, hi) = self
            .raw(start, end)
            .split_once("..")
            .expect("the parser checked the range");
        (parse_int(lo.trim_end()), parse_int(hi.trim_start()))
    }

    /// A regex literal whose raw pattern is bytes `start..end`: `\/` stands for `/`.
    pub fn regex(&mut self, start: u32, end: u32) -> Span {
        let raw = self.raw(start, end);
        if raw.contains("\\/") {
            self.owned(&raw.replace("\\/", "/"))
        } else {
            self.slice(start, end)
        }
    }

    /// Adds a node.
    pub fn add(&mut self, kind: NodeKind, at: u32) -> NodeId {
        self.nodes.push(Node { kind, at });
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
    pub fn call(&mut self, name: Span, at: u32, args: u32) -> NodeId {
        let args = self.close(args);
        self.add(NodeKind::Call { name, args }, at)
    }

    /// The call's name and argument nodes.
    pub fn call_parts(&self, id: NodeId) -> (&str, &[NodeId]) {
        match self.node(id).kind {
            NodeKind::Call { name, args } => (self.str(name), self.children(args)),
            other => unreachable!("not a call: {other:?}"),
        }
    }

    /// An argument's name and value.
    pub fn arg_parts(&self, id: NodeId) -> (&str, NodeId) {
        match self.node(id).kind {
            NodeKind::Arg { name, value } => (self.str(name), value),
            other => unreachable!("not an argument: {other:?}"),
        }
    }
}

/// An integer the lexer checked.
fn parse_int(text: &str) -> i64 {
    text.parse().expect("the lexer checks that integers fit")
}

/// Appends the content of a string literal with escapes (checked by the lexer) to `out`.
fn unescape(raw: &str, out: &mut String) {
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
}
