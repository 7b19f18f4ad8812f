//! formwork's Rust errors as the typed Python exceptions of `formwork.errors`, each carrying
//! its kind and place as attributes (`location`, `pointer`, `line`, `col`, `step`, ...).

use formwork::gpu::{ApplyError, FillError};
use formwork::{CompileError, CompileErrorKind, Location, MatchError, MatchErrorKind, VocabError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// An instance of `formwork.errors.<class>` built from `message` and keyword attributes.
fn raise(py: Python<'_>, class: &str, message: String, attrs: &Bound<'_, PyDict>) -> PyErr {
    let made = py
        .import("formwork.errors")
        .and_then(|m| m.getattr(class))
        .and_then(|c| c.call((message,), Some(attrs)));
    match made {
        Ok(exc) => PyErr::from_value(exc),
        Err(e) => e,
    }
}

fn compile_class(kind: CompileErrorKind) -> &'static str {
    match kind {
        CompileErrorKind::Syntax => "GrammarSyntaxError",
        CompileErrorKind::Unsupported => "UnsupportedError",
        CompileErrorKind::Undefined => "UndefinedError",
        CompileErrorKind::Invalid => "InvalidError",
        CompileErrorKind::NotRegular => "NotRegularError",
        CompileErrorKind::EmptyLanguage => "EmptyLanguageError",
        CompileErrorKind::Limit => "LimitError",
        CompileErrorKind::UnknownSpecialToken => "UnknownSpecialTokenError",
        _ => "CompileError",
    }
}

/// The keyword attributes of a compile error's place.
fn location_attrs<'py>(py: Python<'py>, location: &Location) -> PyResult<Bound<'py, PyDict>> {
    let attrs = PyDict::new(py);
    match location {
        Location::Text { source, line, col } => {
            attrs.set_item("source", source)?;
            attrs.set_item("line", line)?;
            attrs.set_item("col", col)?;
        }
        Location::JsonPointer(pointer) => attrs.set_item("pointer", pointer)?,
        _ => {}
    }
    let place = location.to_string();
    if !place.is_empty() {
        attrs.set_item("location", place)?;
    }
    Ok(attrs)
}

/// A [`CompileError`] as `formwork.errors.CompileError` (the subclass of its kind).
pub fn compile_error(py: Python<'_>, e: &CompileError) -> PyErr {
    let attrs = match location_attrs(py, e.location()) {
        Ok(a) => a,
        Err(err) => return err,
    };
    let kind = format!("{:?}", e.kind());
    let filled = attrs
        .set_item("kind", kind)
        .and_then(|()| attrs.set_item("detail", e.message()))
        .and_then(|()| match e.limit() {
            Some(l) => attrs.set_item("limit", (l.kind.name(), l.value, l.max)),
            None => Ok(()),
        });
    match filled {
        Ok(()) => raise(py, compile_class(e.kind()), e.to_string(), &attrs),
        Err(err) => err,
    }
}

/// A [`MatchError`] as `formwork.errors.MatchError` (`MatchLimitError` for a limit).
pub fn match_error(py: Python<'_>, e: &MatchError) -> PyErr {
    match_error_in_row(py, e, None)
}

/// As [`match_error`], with the batch row whose matcher failed.
fn match_error_in_row(py: Python<'_>, e: &MatchError, row: Option<usize>) -> PyErr {
    let attrs = PyDict::new(py);
    let filled = (|| -> PyResult<&'static str> {
        if let Some(row) = row {
            attrs.set_item("row", row)?;
        }
        let (kind, class) = match e.kind() {
            MatchErrorKind::Rejected {
                token,
                step,
                at_byte,
            } => {
                attrs.set_item("token", token)?;
                attrs.set_item("step", step)?;
                attrs.set_item("at_byte", at_byte)?;
                ("Rejected", "MatchError")
            }
            MatchErrorKind::TextRejected { step, at_byte } => {
                attrs.set_item("step", step)?;
                attrs.set_item("at_byte", at_byte)?;
                ("TextRejected", "MatchError")
            }
            MatchErrorKind::UnknownToken { token, .. } => {
                attrs.set_item("token", token)?;
                ("UnknownToken", "MatchError")
            }
            MatchErrorKind::Limit(l) => {
                attrs.set_item("limit", (l.kind.name(), l.value, l.max))?;
                ("Limit", "MatchLimitError")
            }
            MatchErrorKind::Terminated => ("Terminated", "MatchError"),
            MatchErrorKind::RollbackTooFar { .. } => ("RollbackTooFar", "MatchError"),
            MatchErrorKind::MaskSize { .. } => ("MaskSize", "MatchError"),
            _ => ("Other", "MatchError"),
        };
        attrs.set_item("kind", kind)?;
        Ok(class)
    })();
    match filled {
        Ok(class) => raise(py, class, e.to_string(), &attrs),
        Err(err) => err,
    }
}

/// A [`VocabError`] as `formwork.errors.TokenizerError`.
pub fn vocab_error(py: Python<'_>, e: &VocabError) -> PyErr {
    let attrs = PyDict::new(py);
    match attrs.set_item("kind", format!("{:?}", e.kind())) {
        Ok(()) => raise(py, "TokenizerError", e.to_string(), &attrs),
        Err(err) => err,
    }
}

/// A bad logits or bitmask shape, as `ValueError`.
pub fn apply_error(e: &ApplyError) -> PyErr {
    pyo3::exceptions::PyValueError::new_err(e.to_string())
}

/// A failed batch fill: a bad shape is a `ValueError`, a matcher's failure its `MatchError`
/// (with `row`).
pub fn fill_error(py: Python<'_>, e: &FillError) -> PyErr {
    match e {
        FillError::Matcher { row, error } => match_error_in_row(py, error, Some(*row)),
        other => pyo3::exceptions::PyValueError::new_err(other.to_string()),
    }
}
