//! `propertyNames` (draft 6 and later): every property name of an object is a string the
//! schema admits.
//!
//! The schema is read as a shape and narrowed to strings (names are strings), which is then
//! the object's [`names`](super::shape::ObjectShape::names):
//! - a declared name it refuses is a property that can only be absent (`schema_in` answers
//!   `Never` for it, so intersections, membership and the lowering all see it so; a required
//!   one leaves the object no value);
//! - the undeclared names are those the key automata already admit (not declared, split by
//!   the patterns they match) intersected with the automaton of the names' shape (see
//!   `lower/objects.rs`), so every undeclared member's key is one it admits;
//! - `false` (no name at all) is `maxProperties: 0`, and a schema every string passes (`{}`,
//!   `{"type": "string"}`) no constraint.
//!
//! The complement of an object with `names` ("some property's name is refused", for `not`,
//! `if` and overlapping `oneOf`) is one more branch of the object's complement: a declared
//! name it refuses present, or an undeclared one, a witness among the names of a pattern
//! standing for those it refuses ([`NamePattern::Strings`](super::shape::NamePattern)). Only
//! an object that already has the most patterns one may have cannot take it: an
//! `Unsupported` error, which lenient compilation turns into dropping the `not`.

use serde_json::Value;

use super::schema::{error, Compiler};
use super::shape::{Kind, ObjectShape, Shape};
use crate::error::{CompileError, CompileErrorKind};

impl Compiler<'_> {
    /// The strings the `propertyNames` schema at `pointer` admits: `None` for every string,
    /// `Some(Never)` for none.
    pub(super) fn property_names(
        &mut self,
        schema: &Value,
        pointer: &str,
    ) -> Result<Option<Shape>, CompileError> {
        let shape = self.build(schema, pointer)?;
        let strings = self.intersect(&shape, &Shape::of_kind(Kind::String, pointer), pointer)?;
        let branches = match &strings {
            Shape::AnyOf(xs) => xs.iter().collect(),
            one => vec![one],
        };
        if branches.iter().any(|b| matches!(b, Shape::Ref(_))) {
            // A reference still being read: the names' own schema recursive, which no string
            // schema needs.
            self.unsupported(pointer, "`propertyNames` whose schema refers to itself")?;
            return Ok(None);
        }
        let every = |b: &&Shape| match b {
            Shape::String(st) => {
                st.min == 0
                    && st.max.is_none()
                    && st.regexes.is_empty()
                    && st.forbidden.is_empty()
                    && st.exclude.is_empty()
            }
            _ => false,
        };
        Ok(match branches.iter().any(every) {
            true => None,
            false => Some(strings),
        })
    }

    /// Does the `propertyNames` of `o` admit `name`?
    pub(super) fn names_admit(
        &mut self,
        o: &ObjectShape,
        name: &str,
    ) -> Result<bool, CompileError> {
        match &o.names {
            None => Ok(true),
            Some(names) => self.accepts(names, &Value::String(name.to_string()), &o.pointer),
        }
    }

    /// `o` with each declared property whose name its `propertyNames` refuses made `Never`.
    pub(super) fn forbid_refused_names(&mut self, o: &mut ObjectShape) -> Result<(), CompileError> {
        if o.names.is_none() {
            return Ok(());
        }
        let mut refused = Vec::new();
        for (i, (k, _)) in o.properties.iter().enumerate() {
            if !self.names_admit(o, k)? {
                refused.push(i);
            }
        }
        for i in refused {
            o.properties[i].1 = Shape::Never;
        }
        Ok(())
    }
}

/// The error for a complement of an object whose names are constrained.
pub(super) fn names_complement(o: &ObjectShape) -> CompileError {
    error(
        CompileErrorKind::Unsupported,
        &format!("{}/propertyNames", o.pointer),
        format!(
            "the complement of `propertyNames` (`not`, `if`, overlapping `oneOf`) on an object with {} `patternProperties` (and the patterns intersections make), at most {} with it",
            o.patterns.len(),
            super::shape::MAX_NAME_PATTERNS - 1
        ),
    )
}
