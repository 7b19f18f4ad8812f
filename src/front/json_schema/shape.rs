//! What a schema means, reduced to the parts formwork compiles: one [`Shape`] per schema after
//! keywords, `allOf`, `oneOf` and type lists are resolved, before any grammar is built.

use std::collections::BTreeSet;
use std::hash::{Hash, Hasher};
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;

use super::ecma::Regex;
use super::multiples::Step;
use super::numbers::Bound;
use super::schema::Compiler;
use crate::error::{CompileError, Location};
use crate::front::chars::{Budget, CharDfa};
use crate::front::guard::guarded;

/// Index of a `$ref` target (or of the intersection of two) in the compiler's table.
pub(crate) type RefId = usize;

/// The set of JSON values a (sub)schema admits.
///
/// Shapes nest as deeply as their schemas, and deeper where intersections inline resolved
/// references, so copying and dropping one recurses that deep: both go through the stack
/// guard one level at a time (see the `Clone` and `Drop` impls), whatever the nesting limit.
pub(crate) enum Shape {
    /// Every value.
    Any,
    /// No value.
    Never,
    Null,
    Boolean,
    /// Exactly these values (`enum`, `const`).
    Values(Vec<Value>),
    Number(NumberShape),
    String(StringShape),
    Array(ArrayShape),
    /// Shared: intersections copy objects into every branch they meet (an `allOf` with a
    /// union, complements), and a copy of a property's object is the same object; the
    /// lowering writes each shared object once.
    Object(Rc<ObjectShape>),
    /// Values of at least one branch.
    AnyOf(Vec<Shape>),
    /// The shape of a `$ref` target.
    Ref(RefId),
}

#[derive(Clone, Default)]
pub(crate) struct NumberShape {
    pub integer: bool,
    pub lo: Option<Bound>,
    pub hi: Option<Bound>,
    /// Values are multiples of this step (`multipleOf`; of several, their least common
    /// multiple). Such shapes are written in plain notation (see `multiples.rs`).
    pub multiple: Option<Step>,
    /// Values are multiples of none of these (`not` with `multipleOf`; with `type: integer`,
    /// the step one). Plain notation too.
    pub not_multiples: Vec<Step>,
    /// Where the steps came from, for errors.
    pub steps_pointer: Option<Arc<str>>,
}

/// A regex constraint and the JSON pointer of the keyword it came from.
#[derive(Clone)]
pub(crate) struct RegexConstraint {
    pub regex: Regex,
    /// A pattern's text, or `format "name"` for a format (also the name of its rule).
    pub source: String,
    /// Whether `source` names a format: a pattern may be spelled `format "date"` too.
    pub is_format: bool,
    pub pointer: String,
}

impl RegexConstraint {
    /// What decides the constraint's language: two constraints with equal identities are one.
    pub fn identity(&self) -> (bool, &str) {
        (self.is_format, &self.source)
    }
}

/// The names one entry of an object's `patternProperties` applies to.
#[derive(Clone)]
pub(crate) enum NamePattern {
    /// The names a regex matches (searched for, as `patternProperties` keys are).
    Regex(RegexConstraint),
    /// The names none of these match: where an intersection of two objects with patterns
    /// gives one side's `additionalProperties` (see `Compiler::merge_objects`). Nested as
    /// deep as such intersections are, each level one more pattern of the object, so within
    /// [`MAX_NAME_PATTERNS`].
    NoneOf {
        parts: Arc<[NamePattern]>,
        /// The object whose `additionalProperties` this is, for errors.
        pointer: Arc<str>,
    },
    /// The names a shape of strings admits (`admitted`) or refuses: a pattern with a leading
    /// look-ahead (two regexes, see `ecma::LeadingLookahead`), or the names an object's
    /// `propertyNames` refuses, where the complement of that object (`not`, `if`,
    /// overlapping `oneOf`) has a property of such a name (a witness among them).
    Strings {
        /// A string shape, or a union of them.
        names: Rc<Shape>,
        admitted: bool,
        /// The pattern or the `propertyNames`, for errors.
        pointer: Arc<str>,
    },
}

/// Most patterns of one object, those intersections of objects make included (each side's,
/// and the names matching none of a side's, see [`NamePattern::NoneOf`]).
pub(crate) const MAX_NAME_PATTERNS: usize = 16;

impl NamePattern {
    /// Where the pattern is, for errors.
    pub fn pointer(&self) -> &str {
        match self {
            NamePattern::Regex(c) => &c.pointer,
            NamePattern::NoneOf { pointer, .. } | NamePattern::Strings { pointer, .. } => pointer,
        }
    }

    /// Do both stand for the same names, as written (regexes by their source)?
    /// Recursion: as deep as `NoneOf`s nest, each level guarded.
    pub fn same_names(&self, other: &NamePattern) -> bool {
        guarded(|| match (self, other) {
            (NamePattern::Regex(a), NamePattern::Regex(b)) => a.identity() == b.identity(),
            (NamePattern::NoneOf { parts: a, .. }, NamePattern::NoneOf { parts: b, .. }) => {
                a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.same_names(y))
            }
            (
                NamePattern::Strings {
                    names: a,
                    admitted: x,
                    ..
                },
                NamePattern::Strings {
                    names: b,
                    admitted: y,
                    ..
                },
            ) => Rc::ptr_eq(a, b) && x == y,
            _ => false,
        })
    }

    /// Does the name match? (Exact, within `c`'s limits and deadline: see
    /// [`Compiler::matches`].) Recursion: as deep as `NoneOf`s nest, each level guarded.
    pub fn matches(&self, c: &mut Compiler, name: &str) -> Result<bool, CompileError> {
        guarded(|| match self {
            NamePattern::Regex(r) => c.matches(r, name),
            NamePattern::NoneOf { parts, .. } => {
                for p in parts.iter() {
                    if p.matches(c, name)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            NamePattern::Strings {
                names,
                admitted,
                pointer,
            } => Ok(c.accepts(names, &Value::String(name.to_string()), pointer)? == *admitted),
        })
    }

    /// The names as an automaton (errors placed at the pattern). Recursion: as deep as
    /// `NoneOf`s nest, each level guarded.
    pub fn automaton(&self, budget: &Budget) -> Result<CharDfa, CompileError> {
        guarded(|| match self {
            NamePattern::Regex(c) => c
                .regex
                .automaton(budget)
                .map_err(|e| e.or_at(Location::JsonPointer(c.pointer.clone()))),
            NamePattern::NoneOf { parts, .. } => {
                // Every name, then those outside each part.
                let mut none = CharDfa::strings(&[], budget)?.complement(budget.deadline)?;
                for p in parts.iter() {
                    let outside = p.automaton(budget)?.complement(budget.deadline)?;
                    none = none.intersect(&outside, budget)?;
                }
                Ok(none)
            }
            NamePattern::Strings {
                names,
                admitted,
                pointer,
            } => {
                let inside = super::lower::strings_automaton(names, pointer, budget)?;
                match admitted {
                    true => Ok(inside),
                    false => inside.complement(budget.deadline),
                }
            }
        })
    }

    /// Recursion: as deep as `NoneOf`s nest, each level guarded.
    fn hash_into(&self, h: &mut std::hash::DefaultHasher) {
        guarded(|| match self {
            NamePattern::Regex(c) => c.identity().hash(h),
            NamePattern::NoneOf { parts, .. } => {
                ("none of", parts.len()).hash(h);
                parts.iter().for_each(|p| p.hash_into(h));
            }
            NamePattern::Strings {
                names, admitted, ..
            } => {
                ("strings", admitted).hash(h);
                names.hash_into(h);
            }
        })
    }
}

#[derive(Clone, Default)]
pub(crate) struct StringShape {
    pub min: u64,
    pub max: Option<u64>,
    /// Every regex must match (`pattern`, `format`).
    pub regexes: Vec<RegexConstraint>,
    /// No regex may match (`not` with `pattern` or `format`).
    pub forbidden: Vec<RegexConstraint>,
    /// Where `minLength`/`maxLength` were, for errors.
    pub length_pointer: Option<String>,
    /// Values excluded (`not` with `enum`/`const`), with the pointer of the `not`.
    pub exclude: BTreeSet<String>,
    pub exclude_pointer: Option<String>,
}

#[derive(Clone)]
pub(crate) struct ArrayShape {
    pub prefix: Vec<Shape>,
    /// Items after the prefix.
    pub items: Box<Shape>,
    pub min: u64,
    pub max: Option<u64>,
    /// For each of these shapes, at least one item after the prefix has a value of it (as
    /// well as `items`'s): what complements of `items` need (see `complement.rs`). At most
    /// [`MAX_WITNESSES`].
    pub witnesses: Vec<Shape>,
    /// The pointer of a `uniqueItems: true` the array is held to: no two items equal.
    pub unique: Option<Arc<str>>,
}

#[derive(Clone)]
pub(crate) struct ObjectShape {
    /// Declared properties in schema order.
    pub properties: Vec<(String, Shape)>,
    /// `patternProperties` (none matching every name): an undeclared name takes the shapes of
    /// the patterns it matches, all of them; declared names already carry them.
    pub patterns: Vec<(NamePattern, Shape)>,
    pub required: Vec<String>,
    /// Values of properties neither declared nor matching a pattern.
    pub additional: Box<Shape>,
    pub min: u64,
    pub max: Option<u64>,
    /// For each of these, at least one undeclared property among the names has a value of
    /// the shape (as well as the one its name gives it): what complements of
    /// `additionalProperties` and `patternProperties` need (see `complement.rs`). At most
    /// [`MAX_WITNESSES`].
    pub witnesses: Vec<(Names, Shape)>,
    /// The names every property must have (`propertyNames`): a shape of strings (`String`,
    /// `Values` of strings, unions of them); `None` for any name. A declared name it refuses
    /// is a property that can only be absent, whatever `properties` says (see
    /// `Compiler::schema_in`).
    pub names: Option<Box<Shape>>,
    /// Where the object's keywords are, for errors (shared by the copies of the shape).
    pub pointer: Arc<str>,
}

/// Most witnesses of one array or object: its grammar has a rule per set of them satisfied.
pub(crate) const MAX_WITNESSES: usize = 4;

/// The undeclared properties an object's witness is among.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Names {
    /// Those matching none of the object's patterns (their values are `additional`'s).
    Unmatched,
    /// Those matching the object's pattern at this index (perhaps others too).
    Matching(usize),
}

impl ArrayShape {
    /// Every array.
    pub fn any() -> ArrayShape {
        ArrayShape {
            prefix: Vec::new(),
            items: Box::new(Shape::Any),
            min: 0,
            max: None,
            witnesses: Vec::new(),
            unique: None,
        }
    }

    /// The pointer of `uniqueItems` where it refuses something: arrays that may have two
    /// items or more.
    pub fn distinct(&self) -> Option<&str> {
        self.unique
            .as_deref()
            .filter(|_| self.max.is_none_or(|m| m > 1))
    }

    /// The shape of the item at `index`.
    pub fn item(&self, index: usize) -> &Shape {
        self.prefix.get(index).unwrap_or(&self.items)
    }

    fn children(&self) -> Vec<&Shape> {
        let items = std::iter::once(&*self.items);
        self.prefix
            .iter()
            .chain(items)
            .chain(&self.witnesses)
            .collect()
    }

    /// What copying the array shape costs, as [`Shape::size`].
    pub fn size(&self) -> u64 {
        1 + size_of_all(self.children())
    }
}

impl ObjectShape {
    /// Every object (its keywords at `pointer`).
    pub fn any(pointer: &str) -> ObjectShape {
        ObjectShape {
            properties: Vec::new(),
            patterns: Vec::new(),
            required: Vec::new(),
            additional: Box::new(Shape::Any),
            min: 0,
            max: None,
            witnesses: Vec::new(),
            names: None,
            pointer: pointer.into(),
        }
    }

    fn children(&self) -> Vec<&Shape> {
        let properties = self.properties.iter().map(|(_, s)| s);
        let patterns = self.patterns.iter().map(|(_, s)| s);
        let witnesses = self.witnesses.iter().map(|(_, w)| w);
        (properties
            .chain(patterns)
            .chain([&*self.additional])
            .chain(witnesses))
        .chain(self.names.as_deref())
        .collect()
    }

    /// What copying the object shape costs, as [`Shape::size`].
    pub fn size(&self) -> u64 {
        1 + size_of_all(self.children())
    }
}

/// The kinds of JSON values: a shape other than `Any`, `AnyOf` and `Ref` admits values of
/// one kind (`Values` of several are split by kind where it matters).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Null,
    Boolean,
    Number,
    String,
    Array,
    Object,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Null,
        Kind::Boolean,
        Kind::Number,
        Kind::String,
        Kind::Array,
        Kind::Object,
    ];

    pub fn of_value(v: &Value) -> Kind {
        match v {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Boolean,
            Value::Number(_) => Kind::Number,
            Value::String(_) => Kind::String,
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        }
    }
}

/// [`Shape::size`] summed over `shapes`.
fn size_of_all(mut stack: Vec<&Shape>) -> u64 {
    let mut n = 0u64;
    while let Some(s) = stack.pop() {
        n += 1 + match s {
            Shape::Values(vs) => vs.len() as u64,
            _ => 0,
        };
        stack.extend(s.children());
    }
    n
}

impl Clone for Shape {
    /// Recursion: one guarded level per level of nesting.
    fn clone(&self) -> Shape {
        guarded(|| match self {
            Shape::Any => Shape::Any,
            Shape::Never => Shape::Never,
            Shape::Null => Shape::Null,
            Shape::Boolean => Shape::Boolean,
            Shape::Values(vs) => Shape::Values(vs.clone()),
            Shape::Number(n) => Shape::Number(n.clone()),
            Shape::String(s) => Shape::String(s.clone()),
            Shape::Array(a) => Shape::Array(a.clone()),
            Shape::Object(o) => Shape::Object(o.clone()),
            Shape::AnyOf(xs) => Shape::AnyOf(xs.clone()),
            Shape::Ref(r) => Shape::Ref(*r),
        })
    }
}

impl Drop for Shape {
    /// The sub-shapes are moved out and dropped inside the guard, so each level of nesting
    /// drops on a stack with room for the next.
    fn drop(&mut self) {
        let subs: Vec<Shape> = match self {
            Shape::Array(a) => {
                let mut subs = std::mem::take(&mut a.prefix);
                subs.push(std::mem::replace(&mut *a.items, Shape::Never));
                subs.append(&mut a.witnesses);
                subs
            }
            Shape::Object(shared) => {
                // Another holder keeps it whole; the last one takes it apart.
                let Some(o) = Rc::get_mut(shared) else {
                    return;
                };
                let mut subs: Vec<Shape> = std::mem::take(&mut o.properties)
                    .into_iter()
                    .map(|(_, s)| s)
                    .collect();
                subs.extend(std::mem::take(&mut o.patterns).into_iter().map(|(_, s)| s));
                subs.push(std::mem::replace(&mut *o.additional, Shape::Never));
                subs.extend(std::mem::take(&mut o.witnesses).into_iter().map(|(_, w)| w));
                subs.extend(o.names.take().map(|n| *n));
                subs
            }
            Shape::AnyOf(xs) => std::mem::take(xs),
            _ => return,
        };
        guarded(|| drop(subs));
    }
}

impl Shape {
    /// The shapes directly inside this one.
    fn children(&self) -> Vec<&Shape> {
        match self {
            Shape::Array(a) => a.children(),
            Shape::Object(o) => o.children(),
            Shape::AnyOf(xs) => xs.iter().collect(),
            _ => Vec::new(),
        }
    }

    /// How many shapes and literal values this one holds, itself included: what copying it
    /// costs. Iterative, whatever the nesting.
    pub fn size(&self) -> u64 {
        size_of_all(vec![self])
    }

    /// Every value of the kind (an object's keywords at `pointer`).
    pub fn of_kind(kind: Kind, pointer: &str) -> Shape {
        match kind {
            Kind::Null => Shape::Null,
            Kind::Boolean => Shape::Boolean,
            Kind::Number => Shape::Number(NumberShape::default()),
            Kind::String => Shape::String(StringShape::default()),
            Kind::Array => Shape::Array(ArrayShape::any()),
            Kind::Object => Shape::object(ObjectShape::any(pointer)),
        }
    }

    /// The kind of every value of the shape, if they share one.
    pub fn kind(&self) -> Option<Kind> {
        match self {
            Shape::Null => Some(Kind::Null),
            Shape::Boolean => Some(Kind::Boolean),
            Shape::Number(_) => Some(Kind::Number),
            Shape::String(_) => Some(Kind::String),
            Shape::Array(_) => Some(Kind::Array),
            Shape::Object(_) => Some(Kind::Object),
            Shape::Values(vs) => {
                let kind = Kind::of_value(vs.first()?);
                vs.iter().all(|v| Kind::of_value(v) == kind).then_some(kind)
            }
            Shape::Any | Shape::Never | Shape::AnyOf(_) | Shape::Ref(_) => None,
        }
    }

    /// How many branches the shape is a union of.
    pub fn branches(&self) -> usize {
        match self {
            Shape::AnyOf(xs) => xs.len(),
            Shape::Never => 0,
            _ => 1,
        }
    }

    /// `Never` for the shapes of one kind whose own constraints leave no value (counts that
    /// cross, a required property that can only be absent), the shape itself otherwise.
    pub fn normalized(self) -> Shape {
        let empty = match &self {
            Shape::Number(n) => n.clone().normalized().is_none(),
            Shape::String(s) => s.max.is_some_and(|m| m < s.min),
            Shape::Array(a) => {
                // A witness is an item past the prefix: the array has at least one.
                let min = match a.witnesses.is_empty() {
                    false => a.min.max(a.prefix.len() as u64 + 1),
                    true => a.min,
                };
                a.max.is_some_and(|m| m < min)
                    || a.prefix
                        .iter()
                        .take(min.min(a.prefix.len() as u64) as usize)
                        .any(|p| matches!(p, Shape::Never))
                    || (min > a.prefix.len() as u64 && matches!(*a.items, Shape::Never))
                    || a.witnesses.iter().any(|w| matches!(w, Shape::Never))
            }
            Shape::Object(o) => {
                let forbidden = |r: &String| {
                    o.properties
                        .iter()
                        .find(|(k, _)| k == r)
                        .is_some_and(|(_, s)| matches!(s, Shape::Never))
                };
                let hopeless = |(names, w): &(Names, Shape)| {
                    let among = match names {
                        Names::Unmatched => Some(&*o.additional),
                        Names::Matching(i) => o.patterns.get(*i).map(|(_, s)| s),
                    };
                    matches!(w, Shape::Never) || among.is_none_or(|s| matches!(s, Shape::Never))
                };
                o.max
                    .is_some_and(|m| m < o.min || (m as usize) < o.required.len())
                    || o.required.iter().any(forbidden)
                    || o.witnesses.iter().any(hopeless)
            }
            _ => false,
        };
        match empty {
            true => Shape::Never,
            false => self,
        }
    }

    /// The objects of `o`.
    pub fn object(o: ObjectShape) -> Shape {
        Shape::Object(Rc::new(o))
    }

    /// The numbers of `n`, [normalized](NumberShape::normalized): `Never` if there are none.
    pub fn number(n: NumberShape) -> Shape {
        n.normalized().map_or(Shape::Never, Shape::Number)
    }

    /// `AnyOf` without empty branches, flattened; one branch is itself.
    pub fn any_of(branches: Vec<Shape>) -> Shape {
        let mut flat = Vec::new();
        for mut b in branches {
            match &mut b {
                Shape::Never => {}
                Shape::AnyOf(inner) => flat.append(inner),
                Shape::Any => return Shape::Any,
                _ => flat.push(b),
            }
        }
        match flat.len() {
            0 => Shape::Never,
            1 => flat.pop().unwrap(),
            _ => Shape::AnyOf(flat),
        }
    }
}

impl Shape {
    /// A structural fingerprint: shapes with equal fingerprints admit the same values (up to
    /// hash collisions; the converse does not hold). Regexes count by their source,
    /// references by their entry, objects with their names in order. Recursion: as deep as
    /// the shape, each level guarded.
    pub fn fingerprint(&self) -> u64 {
        let mut h = std::hash::DefaultHasher::new();
        self.hash_into(&mut h);
        h.finish()
    }

    fn hash_into(&self, h: &mut std::hash::DefaultHasher) {
        guarded(|| {
            std::mem::discriminant(self).hash(h);
            match self {
                Shape::Any | Shape::Never | Shape::Null | Shape::Boolean => {}
                Shape::Values(vs) => vs.iter().for_each(|v| v.to_string().hash(h)),
                Shape::Number(n) => (n.integer, &n.lo, &n.hi, n.multiple, &n.not_multiples).hash(h),
                Shape::String(st) => {
                    (st.min, st.max, &st.exclude).hash(h);
                    for c in st.regexes.iter().chain(&st.forbidden) {
                        c.identity().hash(h);
                    }
                    st.forbidden.len().hash(h);
                }
                Shape::Array(a) => {
                    (a.min, a.max, a.prefix.len(), a.witnesses.len()).hash(h);
                    a.unique.is_some().hash(h);
                    a.prefix.iter().for_each(|p| p.hash_into(h));
                    a.items.hash_into(h);
                    a.witnesses.iter().for_each(|w| w.hash_into(h));
                }
                Shape::Object(o) => {
                    o.hash_head(h);
                    for (k, s) in &o.properties {
                        k.hash(h);
                        s.hash_into(h);
                    }
                    o.hash_undeclared(h);
                }
                Shape::AnyOf(xs) => xs.iter().for_each(|x| x.hash_into(h)),
                Shape::Ref(r) => r.hash(h),
            }
        })
    }
}

impl ObjectShape {
    /// The object's constraints, each as a fingerprint: an object whose atoms include all of
    /// another's admits only values that other admits too. The undeclared properties are one
    /// atom with the declared names and patterns, which say which properties they are.
    pub fn atoms(&self) -> Vec<u64> {
        let atom = |f: &dyn Fn(&mut std::hash::DefaultHasher)| {
            let mut h = std::hash::DefaultHasher::new();
            f(&mut h);
            h.finish()
        };
        let mut out: Vec<u64> = Vec::new();
        for (k, s) in self
            .properties
            .iter()
            .filter(|(_, s)| !matches!(s, Shape::Any))
        {
            out.push(atom(&|h| {
                ("property", k).hash(h);
                s.hash_into(h);
            }));
        }
        for r in &self.required {
            out.push(atom(&|h| ("required", r).hash(h)));
        }
        if self.min > 0 {
            out.push(atom(&|h| ("min", self.min).hash(h)));
        }
        if let Some(m) = self.max {
            out.push(atom(&|h| ("max", m).hash(h)));
        }
        out.push(atom(&|h| {
            ("undeclared", self.properties.len()).hash(h);
            self.properties.iter().for_each(|(k, _)| k.hash(h));
            self.hash_undeclared(h);
        }));
        if let Some(names) = &self.names {
            out.push(atom(&|h| {
                "names".hash(h);
                names.hash_into(h);
            }));
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    fn hash_head(&self, h: &mut std::hash::DefaultHasher) {
        let counts = (self.properties.len(), self.names.is_some());
        (self.min, self.max, &self.required, counts).hash(h);
        if let Some(names) = &self.names {
            names.hash_into(h);
        }
    }

    /// Counted, so that no other part of a hash reads alike (a declared property `k` valued
    /// `s` and the undeclared ones of an object declaring `k`, valued `s`, were one atom).
    fn hash_undeclared(&self, h: &mut std::hash::DefaultHasher) {
        (self.patterns.len(), self.witnesses.len()).hash(h);
        for (p, s) in &self.patterns {
            p.hash_into(h);
            s.hash_into(h);
        }
        self.additional.hash_into(h);
        for (names, w) in &self.witnesses {
            format!("{names:?}").hash(h);
            w.hash_into(h);
        }
    }
}

/// The JSON type of a value, as JSON Schema names it (`integer` for integral numbers).
pub(crate) fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if super::numbers::Decimal::from_json(n).is_integer() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
