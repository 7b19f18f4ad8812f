//! What a template defines: structures, their parameters and the kinds of those.

use super::recipe::Piece;
use crate::error::Location;

/// Index of a structure in a [`StructureFactory`](super::StructureFactory).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StructId(pub(crate) u32);

impl StructId {
    /// The index as usize.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// What a parameter takes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// `str`: a string written verbatim.
    Str,
    /// `choice`: the output is one of the request's strings.
    Choice,
    /// `regex`: the output matches the request's regex.
    Regex,
    /// `int`: a decimal integer in the request's range.
    Int,
    /// `name` or `a | b`: an instance of one of these structures.
    Structure(Vec<StructId>),
    /// `list<name, "sep">`: the request's instances, in order, separated by `sep`.
    List {
        /// Structures the elements may be instances of.
        elems: Vec<StructId>,
        /// Written between two elements.
        sep: Vec<u8>,
    },
    /// `oneof<name>`: exactly one of the request's instances, chosen by the output.
    OneOf(Vec<StructId>),
}

impl ParamKind {
    /// The kind as written in a template, naming structures with `name`.
    pub fn describe(&self, name: &dyn Fn(StructId) -> String) -> String {
        let names = |ids: &[StructId]| ids.iter().map(|&s| name(s)).collect::<Vec<_>>().join(" | ");
        match self {
            ParamKind::Str => "str".into(),
            ParamKind::Choice => "choice".into(),
            ParamKind::Regex => "regex".into(),
            ParamKind::Int => "int".into(),
            ParamKind::Structure(ids) => names(ids),
            ParamKind::List { elems, sep } if sep.is_empty() => format!("list<{}>", names(elems)),
            ParamKind::List { elems, sep } => {
                format!("list<{}, {:?}>", names(elems), String::from_utf8_lossy(sep))
            }
            ParamKind::OneOf(ids) => format!("oneof<{}>", names(ids)),
        }
    }
}

/// A parameter's default, used when a request leaves it out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParamDefault {
    /// `= []` (lists).
    EmptyList,
    /// `= "text"` (str).
    Str(String),
}

/// A parameter of a structure.
#[derive(Clone, Debug)]
pub struct Param {
    pub(super) name: String,
    pub(super) kind: ParamKind,
    pub(super) default: Option<ParamDefault>,
}

impl Param {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What it takes.
    pub fn kind(&self) -> &ParamKind {
        &self.kind
    }

    /// Its default, if a request may leave it out.
    pub fn default(&self) -> Option<&ParamDefault> {
        self.default.as_ref()
    }
}

/// A named structure of the factory: a template rule, its parameters and its recipe.
#[derive(Debug)]
pub struct Structure {
    pub(super) name: String,
    pub(super) params: Vec<Param>,
    pub(super) location: Location,
    pub(crate) recipe: Piece,
}

impl Structure {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its parameters, in declaration order.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// Where the template defines it.
    pub fn location(&self) -> &Location {
        &self.location
    }
}
