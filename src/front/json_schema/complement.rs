//! Complements of shapes: the values a shape does not admit, as a shape. `not` is the
//! complement; `if`/`then`/`else` and overlapping `oneOf` branches are built from it.
//!
//! Every JSON value has one kind (null, boolean, number, string, array, object), and a shape
//! of one kind constrains only values of that kind, so the complement of a shape of kind `k`
//! is every other kind together with the values of kind `k` the shape *refuses*. A shape of
//! one kind is a conjunction of constraints, so what it refuses is the union of what each
//! constraint refuses, and each of those is a shape again:
//!
//! | kind | a value of the kind is refused when | as shapes |
//! | --- | --- | --- |
//! | number | below the lower bound, above the upper one, not integral (`integer`), not a multiple of the step, a multiple of an excluded step | the bound turned around; the step one excluded; the step excluded; the excluded step required |
//! | string | shorter than `minLength`, longer than `maxLength`, not matching a pattern or format, matching a forbidden one, one of the excluded values | the length turned around; the pattern forbidden (its automaton complemented when lowered); the forbidden one required; the excluded values as an `enum` |
//! | array | too few items, too many, an item of the prefix its schema refuses, an item past the prefix that `items` refuses, none past the prefix with a value of the shape's witness | the count turned around; the item's complement at its position; a witness (at least one item past the prefix with a value in the complement of `items`); every item past the prefix in the witness's complement |
//! | object | too few properties, too many, a required one missing, a declared one whose schema refuses its value, an undeclared one whose value `additionalProperties` (a pattern's schema) refuses, none of the undeclared ones with a value of one of the shape's *witnesses* | the count turned around; the property forbidden; the property required with its schema's complement; a witness (at least one undeclared property, among those names, with a value in the complement); every undeclared value among the witness's names in the witness's complement |
//! | `enum`/`const` | another value of the kind | numbers: the open intervals between the values; strings: the values excluded; booleans: the other one; an array or object literal: another length or size, or an item or property that differs (each the complement of the literal's part), intersected over the literals |
//!
//! A union's complement is the intersection of its branches' complements, taken kind by
//! kind: branches of different kinds never meet, so only the refusals of branches of the same
//! kind are intersected, and a kind no branch has is kept whole. A reference's complement is a
//! reference to a table entry of its own, built when needed (so recursive schemas complement
//! lazily, and the complement of that entry is the reference again).
//!
//! Witnesses (of objects and arrays) are "there exists" constraints: a complement of
//! `additionalProperties` needs a property among the names matching no pattern, one of a
//! pattern's schema a property among the names it matches, one of `items` an item past the
//! prefix. When two shapes meet, a witness of one may fall on a property (an item) only the
//! other declares, so intersections place it there or leave it undeclared, one branch per
//! choice; an object or array keeps at most [`MAX_WITNESSES`](super::shape::MAX_WITNESSES)
//! (its grammar has a rule per set of them seen).
//!
//! Intersecting complements multiplies their branches; past [`MAX_COMPLEMENT_BRANCHES`] the
//! error is a `Limit`.

use std::rc::Rc;

use serde_json::Value;

use super::multiples::Step;
use super::numbers::{Bound, Decimal};
use super::schema::{error, over, Compiler};
use super::shape::{
    ArrayShape, Kind, NamePattern, Names, NumberShape, ObjectShape, RefId, Shape, StringShape,
    MAX_NAME_PATTERNS,
};
use crate::error::{CompileError, CompileErrorKind};
use crate::front::guard::guarded;
use crate::limits::{LimitExceeded, LimitKind};

/// Most branches a complement (and an intersection with one) may have, below
/// [`Limits::alternatives`](crate::Limits): each branch is lowered to a grammar of its own.
pub(crate) const MAX_COMPLEMENT_BRANCHES: usize = 1024;

/// Objects with these properties and nothing else said about them.
fn object(properties: Vec<(String, Shape)>, required: Vec<String>, at: &ObjectShape) -> Shape {
    Shape::object(ObjectShape {
        properties,
        required,
        pointer: at.pointer.clone(),
        ..ObjectShape::any(&at.pointer)
    })
}

/// Arrays whose item at `index` has the shape, and at least that many items.
fn item_at(index: usize, shape: Shape) -> Shape {
    let mut prefix: Vec<Shape> = (0..index).map(|_| Shape::Any).collect();
    prefix.push(shape);
    Shape::Array(ArrayShape {
        prefix,
        min: index as u64 + 1,
        ..ArrayShape::any()
    })
}

/// Arrays of `min..=max` items.
fn items(min: u64, max: Option<u64>) -> Shape {
    Shape::Array(ArrayShape {
        min,
        max,
        ..ArrayShape::any()
    })
}

impl Compiler<'_> {
    /// The values `s` does not admit (see the module notes). Recursion: one guarded level per
    /// level of the shape (references end it: their complement is built lazily).
    pub fn complement(&mut self, s: &Shape, pointer: &str) -> Result<Shape, CompileError> {
        self.tick(pointer)?;
        guarded(|| match s {
            Shape::Any => Ok(Shape::Never),
            Shape::Never => Ok(Shape::Any),
            Shape::AnyOf(xs) => self.complement_union(xs, pointer),
            other => self.complement_union(std::slice::from_ref(other), pointer),
        })
    }

    /// The complement of a union, kind by kind.
    fn complement_union(&mut self, xs: &[Shape], pointer: &str) -> Result<Shape, CompileError> {
        // Its branches, flattened, and `Values` of several kinds split by kind.
        let mut leaves: Vec<Shape> = Vec::new();
        let mut refs: Vec<RefId> = Vec::new();
        let mut stack: Vec<&Shape> = xs.iter().rev().collect();
        while let Some(x) = stack.pop() {
            match x {
                Shape::Any => return Ok(Shape::Never),
                Shape::Never => {}
                Shape::Ref(r) => refs.push(*r),
                Shape::AnyOf(inner) => stack.extend(inner.iter().rev()),
                Shape::Values(vs) => {
                    for kind in Kind::ALL {
                        let mine: Vec<Value> = vs
                            .iter()
                            .filter(|v| Kind::of_value(v) == kind)
                            .cloned()
                            .collect();
                        if !mine.is_empty() {
                            leaves.push(Shape::Values(mine));
                        }
                    }
                }
                one => leaves.push(one.clone()),
            }
        }
        let mut by_kind: Vec<Vec<&Shape>> = Kind::ALL.iter().map(|_| Vec::new()).collect();
        for leaf in &leaves {
            if let Some(kind) = leaf.kind() {
                by_kind[kind as usize].push(leaf);
            }
        }
        if leaves.is_empty() {
            // References only: their complements, lazily, with nothing inlined.
            let mut out = Shape::Any;
            for r in refs {
                let not = Shape::Ref(self.not_id(r));
                out = self.meet(&out, &not, pointer)?;
            }
            return Ok(out);
        }
        let mut parts = Vec::new();
        for kind in Kind::ALL {
            let mut refused = Shape::of_kind(kind, pointer);
            for x in &by_kind[kind as usize] {
                let r = self.refused(x, kind, pointer)?;
                refused = self.meet(&refused, &r, pointer)?;
            }
            parts.push(refused);
        }
        let mut out = Shape::any_of(parts);
        for r in refs {
            let not = Shape::Ref(self.not_id(r));
            out = self.meet(&out, &not, pointer)?;
        }
        Ok(out)
    }

    /// [`intersect`](Compiler::intersect) within [`MAX_COMPLEMENT_BRANCHES`] (a `Limit` error
    /// at `pointer` past it, checked before the product is made).
    pub fn meet(&mut self, a: &Shape, b: &Shape, pointer: &str) -> Result<Shape, CompileError> {
        let max = MAX_COMPLEMENT_BRANCHES.min(self.limits.get(LimitKind::Alternatives) as usize);
        let product = a.branches().saturating_mul(b.branches());
        if product > max {
            let exceeded = LimitExceeded {
                kind: LimitKind::Alternatives,
                value: product as u64,
                max: max as u64,
            };
            return Err(over(exceeded, pointer, "the branches of a complement"));
        }
        let both = self.intersect(a, b, pointer)?;
        Ok(pruned(both))
    }

    /// The values of `kind` that `s` refuses.
    fn refused(&mut self, s: &Shape, kind: Kind, pointer: &str) -> Result<Shape, CompileError> {
        Ok(match s {
            Shape::Null | Shape::Boolean => Shape::Never,
            Shape::Values(vs) => self.refused_values(vs, pointer)?,
            Shape::Number(n) => Shape::any_of(refused_numbers(n, pointer)),
            Shape::String(st) => Shape::any_of(refused_strings(st)),
            Shape::Array(a) => self.refused_array(a, pointer)?,
            Shape::Object(o) => self.refused_object(o, pointer)?,
            // Of no one kind (the union's split leaves none of these here).
            Shape::Any | Shape::Never | Shape::AnyOf(_) | Shape::Ref(_) => {
                let c = self.complement(s, pointer)?;
                self.meet(&c, &Shape::of_kind(kind, pointer), pointer)?
            }
        })
    }

    /// The values of the kind of `vs` (all of one kind) other than `vs`.
    fn refused_values(&mut self, vs: &[Value], pointer: &str) -> Result<Shape, CompileError> {
        let Some(first) = vs.first() else {
            return Ok(Shape::Any);
        };
        Ok(match first {
            Value::Null => Shape::Never,
            Value::Bool(_) => {
                let others: Vec<Value> = [true, false]
                    .into_iter()
                    .map(Value::Bool)
                    .filter(|b| !vs.contains(b))
                    .collect();
                match others.is_empty() {
                    true => Shape::Never,
                    false => Shape::Values(others),
                }
            }
            Value::Number(_) => {
                let mut points: Vec<Decimal> = vs
                    .iter()
                    .filter_map(|v| match v {
                        Value::Number(n) => Some(Decimal::from_json(n)),
                        _ => None,
                    })
                    .collect();
                points.sort();
                points.dedup();
                let mut intervals = Vec::with_capacity(points.len() + 1);
                let open = |value: &Decimal| {
                    Some(Bound {
                        value: value.clone(),
                        strict: true,
                    })
                };
                let mut lo = None;
                for p in &points {
                    intervals.push(Shape::number(NumberShape {
                        lo: lo.clone(),
                        hi: open(p),
                        ..NumberShape::default()
                    }));
                    lo = open(p);
                }
                intervals.push(Shape::number(NumberShape {
                    lo,
                    ..NumberShape::default()
                }));
                Shape::any_of(intervals)
            }
            Value::String(_) => Shape::String(StringShape {
                exclude: vs
                    .iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect(),
                exclude_pointer: Some(pointer.to_string()),
                ..StringShape::default()
            }),
            Value::Array(_) | Value::Object(_) => {
                let kind = Kind::of_value(first);
                let mut out = Shape::of_kind(kind, pointer);
                for v in vs {
                    let other = self.other_than(v, pointer)?;
                    out = self.meet(&out, &other, pointer)?;
                }
                out
            }
        })
    }

    /// The arrays (objects) other than the literal `v`: another length (size), or an item
    /// (property) that differs. Recursion: as deep as `v` nests, guarded.
    fn other_than(&mut self, v: &Value, pointer: &str) -> Result<Shape, CompileError> {
        self.tick(pointer)?;
        guarded(|| {
            let mut parts = Vec::new();
            match v {
                Value::Array(xs) => {
                    let n = xs.len() as u64;
                    if n > 0 {
                        parts.push(items(0, Some(n - 1)));
                    }
                    parts.push(items(n + 1, None));
                    for (i, x) in xs.iter().enumerate() {
                        let differs = self.complement(&Shape::Values(vec![x.clone()]), pointer)?;
                        parts.push(item_at(i, differs));
                    }
                }
                Value::Object(map) => {
                    let at = ObjectShape::any(pointer);
                    for k in map.keys() {
                        parts.push(object(vec![(k.clone(), Shape::Never)], vec![], &at));
                    }
                    parts.push(Shape::object(ObjectShape {
                        min: map.len() as u64 + 1,
                        ..ObjectShape::any(pointer)
                    }));
                    for (k, x) in map {
                        let differs = self.complement(&Shape::Values(vec![x.clone()]), pointer)?;
                        parts.push(object(vec![(k.clone(), differs)], vec![k.clone()], &at));
                    }
                }
                // Scalars are complemented by kind.
                _ => return self.complement(&Shape::Values(vec![v.clone()]), pointer),
            }
            Ok(Shape::any_of(parts))
        })
    }

    fn refused_array(&mut self, a: &ArrayShape, pointer: &str) -> Result<Shape, CompileError> {
        if let Some(at) = a.distinct() {
            // Arrays with a repeated item: no shape says that.
            return Err(error(
                CompileErrorKind::Unsupported,
                at,
                "the complement of `uniqueItems` (`not`, `if`, overlapping `oneOf`)",
            ));
        }
        let mut parts = Vec::new();
        if a.min > 0 {
            parts.push(items(0, Some(a.min - 1)));
        }
        if let Some(m) = a.max {
            parts.push(items(m.saturating_add(1), None));
        }
        for (i, p) in a.prefix.iter().enumerate() {
            if !matches!(p, Shape::Any) {
                let c = self.complement(p, pointer)?;
                parts.push(item_at(i, c));
            }
        }
        // Past the prefix: an item `items` refuses (a witness), or none of a witness's.
        let past = |items: Shape, witnesses: Vec<Shape>| {
            Shape::Array(ArrayShape {
                prefix: a.prefix.iter().map(|_| Shape::Any).collect(),
                items: Box::new(items),
                witnesses,
                ..ArrayShape::any()
            })
        };
        if !matches!(*a.items, Shape::Any) {
            let c = self.complement(&a.items, pointer)?;
            parts.push(past(Shape::Any, vec![c]));
        }
        for w in &a.witnesses {
            let c = self.complement(w, pointer)?;
            parts.push(past(c, Vec::new()));
        }
        Ok(Shape::any_of(
            parts.into_iter().map(Shape::normalized).collect(),
        ))
    }

    fn refused_object(&mut self, o: &ObjectShape, pointer: &str) -> Result<Shape, CompileError> {
        let mut parts = Vec::new();
        if o.min > 0 {
            parts.push(Shape::object(ObjectShape {
                max: Some(o.min - 1),
                ..ObjectShape::any(&o.pointer)
            }));
        }
        if let Some(m) = o.max {
            parts.push(Shape::object(ObjectShape {
                min: m.saturating_add(1),
                ..ObjectShape::any(&o.pointer)
            }));
        }
        for r in &o.required {
            parts.push(object(vec![(r.clone(), Shape::Never)], vec![], o));
        }
        for (k, s) in &o.properties {
            // A declared name `propertyNames` refuses can only be absent, whatever its schema.
            let s = match self.names_admit(o, k)? {
                true => s,
                false => &Shape::Never,
            };
            if !matches!(s, Shape::Any) {
                let c = self.complement(s, pointer)?;
                parts.push(object(vec![(k.clone(), c)], vec![k.clone()], o));
            }
        }
        // The undeclared properties, told apart from the declared names and by the patterns:
        // values any but where one pattern's (`Some`) or the additional ones (`None`) are
        // given, and witnesses.
        let undeclared = |among: Option<(Names, Shape)>, witnesses: Vec<(Names, Shape)>| {
            let (mut additional, mut patterns) = (Shape::Any, Vec::new());
            for (i, (c, _)) in o.patterns.iter().enumerate() {
                patterns.push((c.clone(), Shape::Any));
                if let Some((Names::Matching(j), s)) = &among {
                    if *j == i {
                        patterns[i].1 = s.clone();
                    }
                }
            }
            if let Some((Names::Unmatched, s)) = among {
                additional = s;
            }
            ObjectShape {
                properties: o
                    .properties
                    .iter()
                    .map(|(k, _)| (k.clone(), Shape::Any))
                    .collect(),
                patterns,
                additional: Box::new(additional),
                witnesses,
                ..ObjectShape::any(&o.pointer)
            }
        };
        let given = o
            .patterns
            .iter()
            .enumerate()
            .map(|(i, (_, s))| (Names::Matching(i), s))
            .chain([(Names::Unmatched, &*o.additional)]);
        for (names, s) in given {
            if !matches!(s, Shape::Any) {
                let c = self.complement(s, pointer)?;
                parts.push(Shape::object(undeclared(None, vec![(names, c)])));
            }
        }
        for (names, w) in &o.witnesses {
            let c = self.complement(w, pointer)?;
            parts.push(Shape::object(undeclared(Some((*names, c)), Vec::new())));
        }
        if let Some(names) = &o.names {
            // An undeclared property whose name `propertyNames` refuses: a witness among the
            // names of one more pattern, those it refuses.
            let at = format!("{}/propertyNames", o.pointer);
            if o.patterns.len() >= MAX_NAME_PATTERNS {
                return Err(super::property_names::names_complement(o));
            }
            let refused = NamePattern::Strings {
                names: Rc::new(self.copy(names, &at)?),
                admitted: false,
                pointer: at.into(),
            };
            let mut part = undeclared(None, Vec::new());
            part.witnesses = vec![(Names::Matching(part.patterns.len()), Shape::Any)];
            part.patterns.push((refused, Shape::Any));
            parts.push(Shape::object(part));
        }
        Ok(Shape::any_of(
            parts.into_iter().map(Shape::normalized).collect(),
        ))
    }

    /// The table entry of the complement of entry `r` (made on first use, built lazily like
    /// any entry); the complement of a complement is the entry itself.
    pub fn not_id(&mut self, r: RefId) -> RefId {
        if let super::schema::Recipe::Not(inner) = self.refs[r].recipe {
            return inner;
        }
        if let Some(&id) = self.not_ids.get(&r) {
            return id;
        }
        let id = self.refs.len();
        self.refs.push(super::schema::RefDef {
            name: super::refs::entry_name(format!("not {}", self.refs[r].name)),
            pointer: self.refs[r].pointer.clone(),
            bases: vec![id],
            recipe: super::schema::Recipe::Not(r),
            shape: None,
            building: false,
        });
        self.not_ids.insert(r, id);
        id
    }
}

/// The numbers `n` refuses.
fn refused_numbers(n: &NumberShape, pointer: &str) -> Vec<Shape> {
    let steps_pointer = n.steps_pointer.clone().or_else(|| Some(pointer.into()));
    let with = |f: &dyn Fn(&mut NumberShape)| {
        let mut s = NumberShape {
            steps_pointer: steps_pointer.clone(),
            ..NumberShape::default()
        };
        f(&mut s);
        Shape::number(s)
    };
    let turned = |b: &Bound| {
        Some(Bound {
            value: b.value.clone(),
            strict: !b.strict,
        })
    };
    let mut parts = Vec::new();
    if let Some(lo) = &n.lo {
        parts.push(with(&|s| s.hi = turned(lo)));
    }
    if let Some(hi) = &n.hi {
        parts.push(with(&|s| s.lo = turned(hi)));
    }
    if n.integer {
        parts.push(with(&|s| s.not_multiples = vec![Step::ONE]));
    }
    if let Some(step) = n.multiple {
        parts.push(with(&|s| s.not_multiples = vec![step]));
    }
    for &step in &n.not_multiples {
        parts.push(with(&|s| s.multiple = Some(step)));
    }
    parts
}

/// The strings `st` refuses.
fn refused_strings(st: &StringShape) -> Vec<Shape> {
    let lengths = |min: u64, max: Option<u64>| {
        Shape::String(StringShape {
            min,
            max,
            length_pointer: st.length_pointer.clone(),
            ..StringShape::default()
        })
    };
    let mut parts = Vec::new();
    if st.min > 0 {
        parts.push(lengths(0, Some(st.min - 1)));
    }
    if let Some(m) = st.max {
        parts.push(lengths(m.saturating_add(1), None));
    }
    for r in &st.regexes {
        parts.push(Shape::String(StringShape {
            forbidden: vec![r.clone()],
            ..StringShape::default()
        }));
    }
    for r in &st.forbidden {
        parts.push(Shape::String(StringShape {
            regexes: vec![r.clone()],
            ..StringShape::default()
        }));
    }
    if !st.exclude.is_empty() {
        parts.push(Shape::Values(
            st.exclude.iter().map(|s| Value::from(s.as_str())).collect(),
        ));
    }
    parts
}

/// A union without branches another one implies: equal fingerprints once, and an object
/// whose constraints include all of another object's (it admits nothing the other does not:
/// `A ∨ (A ∧ B)` is `A`). Products of complements repeat and nest constraints often, and each
/// branch is a grammar of its own.
pub(super) fn pruned(mut s: Shape) -> Shape {
    let branches = match &mut s {
        Shape::AnyOf(xs) => std::mem::take(xs),
        _ => return s,
    };
    let mut seen = foldhash::HashSet::default();
    let mut kept: Vec<(Option<Vec<u64>>, Shape)> = Vec::new();
    let mut objects: Vec<(Vec<u64>, Shape)> = Vec::new();
    for b in branches {
        if !seen.insert(b.fingerprint()) {
            continue;
        }
        match &b {
            Shape::Object(o) => objects.push((o.atoms(), b)),
            _ => kept.push((None, b)),
        }
    }
    // Fewest constraints first: a branch is dropped when a kept one's atoms are a subset of
    // its own.
    objects.sort_by_key(|(atoms, _)| atoms.len());
    let mut kept_objects: Vec<(Vec<u64>, Shape)> = Vec::new();
    for (atoms, b) in objects {
        let implied = kept_objects
            .iter()
            .any(|(k, _)| k.iter().all(|a| atoms.binary_search(a).is_ok()));
        if !implied {
            kept_objects.push((atoms, b));
        }
    }
    kept.extend(kept_objects.into_iter().map(|(a, b)| (Some(a), b)));
    Shape::any_of(kept.into_iter().map(|(_, b)| b).collect())
}
