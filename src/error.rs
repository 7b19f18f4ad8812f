//! Errors of compiling a constraint (regex, template, request, schema, grammar): each names where
//! the problem is and what was expected.

use std::fmt;

use crate::limits::LimitExceeded;

/// What kind of problem a [`CompileError`] reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompileErrorKind {
    /// The text does not parse (regex, template, request, grammar, schema JSON).
    Syntax,
    /// Valid input using something formwork does not support (look-around, backreferences, an
    /// unsupported JSON Schema keyword); never silently ignored.
    Unsupported,
    /// A name is used but never defined (rule, structure, parameter, `$ref`).
    Undefined,
    /// A value has the wrong shape (an argument of the wrong kind, a negative bound, ...).
    Invalid,
    /// The constraint needs a stack (recursion) and the backend asked for is finite-state.
    NotRegular,
    /// The constraint admits no string at all, so no mask could ever be satisfied.
    EmptyLanguage,
    /// A size or time limit was reached.
    Limit,
    /// The constraint names a special token the vocabulary does not have.
    UnknownSpecialToken,
}

/// Where in the input a [`CompileError`] points.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Location {
    /// No particular place.
    None,
    /// A position in a text source (1-based line and column, column counted in characters).
    Text {
        /// File path or a name such as `<request>`.
        source: String,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        col: usize,
    },
    /// A JSON pointer into a schema (`/properties/name/pattern`).
    JsonPointer(String),
    /// A rule of the grammar a backend compiles, by name (the JSON Schema front end names
    /// rules after the pointers and shapes they come from, GBNF after the source's rules).
    Rule(String),
}

impl Location {
    /// The line and column of byte offset `offset` in `text`, in source `source`.
    pub fn in_text(source: &str, text: &str, offset: usize) -> Location {
        let before = &text[..offset.min(text.len())];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        Location::Text {
            source: source.to_string(),
            line,
            col,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::None => Ok(()),
            Location::Text { source, line, col } => write!(f, "{source}:{line}:{col}"),
            Location::JsonPointer(p) => write!(f, "#{p}"),
            Location::Rule(name) => write!(f, "rule `{name}`"),
        }
    }
}

/// A constraint failed to compile.
///
/// # Example
///
/// ```
/// use formwork::{CompileErrorKind, ops::RegexCompiler};
///
/// let err = RegexCompiler::new().compile(r"(?<=a)b").unwrap_err();
/// assert_eq!(err.kind(), CompileErrorKind::Unsupported);
/// assert!(err.to_string().contains("look-around"));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompileError {
    kind: CompileErrorKind,
    location: Location,
    message: String,
    limit: Option<LimitExceeded>,
    /// The error [`within`](CompileError::within) moved here, with its own location.
    cause: Option<Box<CompileError>>,
}

impl CompileError {
    /// An error of `kind` at `location`.
    pub fn new(kind: CompileErrorKind, location: Location, message: impl Into<String>) -> Self {
        CompileError {
            kind,
            location,
            message: message.into(),
            limit: None,
            cause: None,
        }
    }

    /// A `Limit` error: `exceeded` at `location`, `what` naming the part of the input that
    /// reached it.
    ///
    /// ```
    /// use formwork::{CompileError, CompileErrorKind, LimitKind, Limits, Location};
    ///
    /// let exceeded = Limits::new().nesting(2).check(LimitKind::Nesting, 3).unwrap_err();
    /// let e = CompileError::over_limit(exceeded, Location::JsonPointer("/items/items".into()), "schema");
    /// assert_eq!(e.kind(), CompileErrorKind::Limit);
    /// assert_eq!(e.limit().unwrap().kind, LimitKind::Nesting);
    /// assert_eq!(e.to_string(), "#/items/items: schema: nesting limit: 3 > 2");
    /// ```
    pub fn over_limit(exceeded: LimitExceeded, location: Location, what: &str) -> CompileError {
        CompileError {
            limit: Some(exceeded),
            ..CompileError::new(
                CompileErrorKind::Limit,
                location,
                format!("{what}: {exceeded}"),
            )
        }
    }

    /// The limit reached, for a `Limit` error raised by [`Limits`](crate::limits::Limits).
    pub fn limit(&self) -> Option<&LimitExceeded> {
        self.limit.as_ref()
    }

    /// An error with no particular location.
    pub fn unplaced(kind: CompileErrorKind, message: impl Into<String>) -> Self {
        CompileError::new(kind, Location::None, message)
    }

    /// The kind of problem.
    pub fn kind(&self) -> CompileErrorKind {
        self.kind
    }

    /// Where it is.
    pub fn location(&self) -> &Location {
        &self.location
    }

    /// What was wrong, without the location.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The same error moved to `location` (where the failing piece is written, e.g. a regex
    /// inside a template or a request), with `context` before the message and the position
    /// inside the piece, if the error had one, after it.
    ///
    /// ```
    /// use formwork::{CompileError, CompileErrorKind, Location};
    ///
    /// let inner = CompileError::new(
    ///     CompileErrorKind::Syntax,
    ///     Location::Text { source: "regex".into(), line: 1, col: 3 },
    ///     "unclosed group",
    /// );
    /// let outer = inner.within(Location::in_text("t.fw", "a ::= /a(b/", 6), "in regex `a(b`");
    /// assert_eq!(outer.to_string(), "t.fw:1:7: in regex `a(b`: unclosed group (column 3 of it)");
    /// ```
    pub fn within(self, location: Location, context: &str) -> CompileError {
        let inside = match self.location {
            Location::Text { col, .. } => format!(" (column {col} of it)"),
            _ => String::new(),
        };
        let message = format!("{context}: {}{inside}", self.message);
        CompileError {
            kind: self.kind,
            location,
            message,
            limit: self.limit,
            cause: Some(Box::new(self)),
        }
    }

    /// The same error placed at `location` if it had no place yet.
    pub fn or_at(mut self, location: Location) -> Self {
        if self.location == Location::None {
            self.location = location;
        }
        self
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.location {
            Location::None => f.write_str(&self.message),
            _ => write!(f, "{}: {}", self.location, self.message),
        }
    }
}

/// The chain of causes: an error moved by [`within`](CompileError::within) has the original
/// (with its own location) as its source, and a `Limit` error the [`LimitExceeded`].
impl std::error::Error for CompileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match (&self.cause, &self.limit) {
            (Some(cause), _) => Some(cause.as_ref()),
            (None, Some(limit)) => Some(limit),
            (None, None) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error;

    use super::*;
    use crate::limits::{LimitKind, Limits};

    #[test]
    fn causes_are_chained() {
        let exceeded = Limits::new()
            .nesting(2)
            .check(LimitKind::Nesting, 3)
            .unwrap_err();
        let inner = CompileError::over_limit(exceeded, Location::None, "regex");
        let limit = inner
            .source()
            .expect("a limit error has its limit as source");
        assert_eq!(limit.to_string(), exceeded.to_string());
        let outer = inner
            .clone()
            .within(Location::in_text("t.fw", "x", 0), "in `x`");
        let cause = outer.source().expect("the moved error is the source");
        assert_eq!(cause.to_string(), inner.to_string());
        assert_eq!(
            cause.source().map(|l| l.to_string()),
            Some(exceeded.to_string())
        );
        assert!(CompileError::unplaced(CompileErrorKind::Syntax, "x")
            .source()
            .is_none());
    }
}
