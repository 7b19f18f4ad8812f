//! The request syntax tree, shared by the text and JSON forms.
//!
//! Positions (`at`) are byte offsets into the request text, or indices into the JSON pointer
//! table for a JSON request; [`super::Origin`] turns them into locations.

use std::borrow::Cow;

/// `name(arg: value, ...)`: a structure instance.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Call<'a> {
    pub name: Cow<'a, str>,
    pub at: u32,
    pub args: Vec<Arg<'a>>,
}

/// `name: value`.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Arg<'a> {
    pub name: Cow<'a, str>,
    pub at: u32,
    pub value: Value<'a>,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Value<'a> {
    pub kind: ValueKind<'a>,
    pub at: u32,
}

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum ValueKind<'a> {
    Str(Cow<'a, str>),
    Int(i64),
    Range(i64, i64),
    Regex(Cow<'a, str>),
    Choice(Vec<Cow<'a, str>>),
    List(Vec<Value<'a>>),
    Call(Call<'a>),
}

impl ValueKind<'_> {
    /// What the value is, for errors ("a string", "a list", ...).
    pub fn describe(&self) -> &'static str {
        match self {
            ValueKind::Str(_) => "a string",
            ValueKind::Int(_) => "an integer",
            ValueKind::Range(..) => "an integer range",
            ValueKind::Regex(_) => "a regex",
            ValueKind::Choice(_) => "a choice set",
            ValueKind::List(_) => "a list",
            ValueKind::Call(_) => "a structure instance",
        }
    }
}
