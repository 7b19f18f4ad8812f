//! Reading a schema document: keywords to [`Shape`]s, `$ref` resolution, type lists, `anyOf`,
//! `oneOf` and `allOf`.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use serde_json::{Map, Value};

use super::formats;
use super::numbers::{Bound, Decimal};
use super::shape::{ArrayShape, Constraint, NumberShape, ObjectShape, RefId, Shape, StringShape};
use super::strings::Regex;
use super::JsonSchemaOptions;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::guard::{guarded, tick};
use crate::limits::{Deadline, LimitExceeded, LimitKind, Limits};

/// Validation keywords formwork cannot express; anything not listed here or handled is an
/// unknown keyword, which JSON Schema defines as an annotation.
const UNSUPPORTED: &[&str] = &[
    "if",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "propertyNames",
    "contains",
    "minContains",
    "maxContains",
    "unevaluatedItems",
    "unevaluatedProperties",
    "$dynamicRef",
    "$recursiveRef",
    "multipleOf",
    "uniqueItems",
];

const TYPES: [&str; 7] = [
    "null", "boolean", "integer", "number", "string", "array", "object",
];

/// Escapes a key for a JSON pointer (RFC 6901).
pub(crate) fn pointer_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

pub(crate) fn error(
    kind: CompileErrorKind,
    pointer: &str,
    message: impl Into<String>,
) -> CompileError {
    CompileError::new(kind, Location::JsonPointer(pointer.to_string()), message)
}

/// The `Limit` error of `exceeded` at `pointer`, `what` naming what reached it.
pub(crate) fn over(exceeded: LimitExceeded, pointer: &str, what: &str) -> CompileError {
    CompileError::over_limit(exceeded, Location::JsonPointer(pointer.to_string()), what)
}

/// How a `$ref` table entry is defined.
pub(crate) enum Recipe {
    /// The schema at this JSON pointer.
    Pointer(String),
    /// The intersection of two entries (`allOf` of two references, kept lazy for recursion).
    Both(RefId, RefId),
}

pub(crate) struct RefDef {
    pub name: String,
    /// The plain references this entry intersects (itself for a plain one), sorted: `A & A`
    /// is `A` and `(A & B) & C` is `A & (B & C)`, so recursion closes over finitely many sets.
    bases: Vec<RefId>,
    pub recipe: Recipe,
    /// Shared: every use of the reference reads it, and a copy of a shape is as deep as it.
    pub shape: Option<Rc<Shape>>,
    pub building: bool,
}

/// One compilation: the document, options, limits, warnings and the `$ref` table.
pub(crate) struct Compiler<'a> {
    pub root: &'a Value,
    pub opts: &'a JsonSchemaOptions,
    pub limits: &'a Limits,
    pub deadline: &'a Deadline,
    pub warnings: Vec<CompileError>,
    pub refs: Vec<RefDef>,
    ref_ids: HashMap<String, RefId>,
    both_ids: HashMap<Vec<RefId>, RefId>,
    /// `$anchor`s and `$id`s: the pointer of the schema each names.
    ids: HashMap<String, String>,
    /// Nesting of `build` calls, references built while building another included (so a
    /// chain of references each resolved inside the last counts every link), within
    /// [`Limits::nesting`].
    depth: usize,
    /// Nesting of `intersect` calls (bounded).
    pub intersect_depth: usize,
    /// The (reference, value) pairs `accepts` is checking, innermost last: meeting one again
    /// is a derivation that made no progress.
    pub accepting: Vec<(RefId, *const Value)>,
    /// Where each chain of plain references ends (see [`deref`](Self::deref)): the first
    /// entry whose shape is not a reference, `None` for a chain that loops.
    chain_end: HashMap<RefId, Option<RefId>>,
}

impl<'a> Compiler<'a> {
    pub fn new(
        root: &'a Value,
        opts: &'a JsonSchemaOptions,
        limits: &'a Limits,
        deadline: &'a Deadline,
    ) -> Result<Compiler<'a>, CompileError> {
        Ok(Compiler {
            root,
            opts,
            limits,
            deadline,
            warnings: Vec::new(),
            refs: Vec::new(),
            ref_ids: HashMap::new(),
            both_ids: HashMap::new(),
            ids: index_ids(root, deadline)?,
            depth: 0,
            intersect_depth: 0,
            accepting: Vec::new(),
            chain_end: HashMap::new(),
        })
    }

    /// One unit of work against the deadline, the error placed at `pointer`.
    pub fn tick(&self, pointer: &str) -> Result<(), CompileError> {
        tick(self.deadline).map_err(|e| e.or_at(Location::JsonPointer(pointer.to_string())))
    }

    /// `Ok` if `n` is within `kind`'s limit, else its error at `pointer` about `what`.
    pub fn within(
        &self,
        kind: LimitKind,
        n: usize,
        pointer: &str,
        what: &str,
    ) -> Result<(), CompileError> {
        self.limits
            .check(kind, n as u64)
            .map_err(|e| over(e, pointer, what))
    }

    /// Reports something formwork cannot express: an error, or with `lenient` a warning (the
    /// constraint is then dropped).
    pub fn unsupported(
        &mut self,
        pointer: &str,
        message: impl Into<String>,
    ) -> Result<(), CompileError> {
        self.tolerate(error(CompileErrorKind::Unsupported, pointer, message))
    }

    /// `e`, or with `lenient` a warning and the caller goes on without what failed.
    pub fn tolerate(&mut self, e: CompileError) -> Result<(), CompileError> {
        match self.opts.lenient {
            true => {
                self.warnings.push(e);
                Ok(())
            }
            false => Err(e),
        }
    }

    /// The shape of the schema at `pointer`, one level of nesting deeper than the schema being
    /// built (a `Limit` error past [`Limits::nesting`]). Recursion: through the subschemas and
    /// the references resolved on the way, as deep as the nesting limit, each level guarded.
    pub fn build(&mut self, schema: &Value, pointer: &str) -> Result<Shape, CompileError> {
        self.within(LimitKind::Nesting, self.depth + 1, pointer, "schema")?;
        self.tick(pointer)?;
        self.depth += 1;
        let shape = guarded(|| self.build_step(schema, pointer));
        self.depth -= 1;
        shape
    }

    fn build_step(&mut self, schema: &Value, pointer: &str) -> Result<Shape, CompileError> {
        let map = match schema {
            Value::Bool(true) => return Ok(Shape::Any),
            Value::Bool(false) => return Ok(Shape::Never),
            Value::Object(map) => map,
            _ => {
                return Err(error(
                    CompileErrorKind::Invalid,
                    pointer,
                    "a schema must be an object or a boolean",
                ))
            }
        };
        for key in map.keys() {
            if UNSUPPORTED.contains(&key.as_str()) && !self.harmless(key, map) {
                self.unsupported(
                    &format!("{pointer}/{}", pointer_escape(key)),
                    format!("keyword `{key}` is not supported"),
                )?;
            }
        }
        let mut shape = self.typed(map, pointer)?;
        if let Some(n) = map.get("not") {
            let at = format!("{pointer}/not");
            if let Some(complement) = self.complement(n, &at)? {
                shape = self.intersect(&shape, &complement, &at)?;
            }
        }
        if let Some(values) = self.values(map, pointer)? {
            shape = self.intersect(&shape, &Shape::Values(values), pointer)?;
        }
        if let Some(r) = map.get("$ref") {
            let at = format!("{pointer}/$ref");
            let Value::String(r) = r else {
                return Err(error(
                    CompileErrorKind::Invalid,
                    &at,
                    "`$ref` must be a string",
                ));
            };
            let id = self.ref_id(r, &at)?;
            shape = self.intersect(&shape, &Shape::Ref(id), &at)?;
        }
        if let Some(all) = map.get("allOf") {
            for (i, sub) in self
                .schema_list(all, &format!("{pointer}/allOf"))?
                .iter()
                .enumerate()
            {
                let at = format!("{pointer}/allOf/{i}");
                let s = self.build(sub, &at)?;
                shape = self.intersect(&shape, &s, &at)?;
            }
        }
        if let Some(any) = map.get("anyOf") {
            let at = format!("{pointer}/anyOf");
            let mut branches = Vec::new();
            for (i, sub) in self.schema_list(any, &at)?.iter().enumerate() {
                branches.push(self.build(sub, &format!("{at}/{i}"))?);
            }
            shape = self.intersect(&shape, &Shape::any_of(branches), &at)?;
        }
        if let Some(one) = map.get("oneOf") {
            let at = format!("{pointer}/oneOf");
            let list = self.schema_list(one, &at)?;
            let one_of = match required_sets(list).and_then(|sets| exactly_one_present(&sets, &at))
            {
                Some(shape) => shape,
                None => {
                    let mut branches = Vec::new();
                    for (i, sub) in list.iter().enumerate() {
                        branches.push(self.build(sub, &format!("{at}/{i}"))?);
                    }
                    self.one_of(branches, &at)?
                }
            };
            shape = self.intersect(&shape, &one_of, &at)?;
        }
        Ok(shape)
    }

    /// The values `not` keeps, for the forms formwork can complement exactly: `true`/`false`/`{}`,
    /// `type`, `required`, and `enum`/`const` of null, booleans and strings (several keywords:
    /// the union of their complements). `None` when unsupported and lenient (nothing kept out).
    fn complement(&mut self, n: &Value, pointer: &str) -> Result<Option<Shape>, CompileError> {
        let map = match n {
            Value::Bool(b) => return Ok(Some(if *b { Shape::Never } else { Shape::Any })),
            Value::Object(map) => map,
            _ => {
                return Err(error(
                    CompileErrorKind::Invalid,
                    pointer,
                    "`not` must be a schema",
                ))
            }
        };
        let unsupported = |c: &mut Self, what: &str| -> Result<Option<Shape>, CompileError> {
            c.unsupported(pointer, format!("`not` with {what} is not supported"))?;
            Ok(None)
        };
        let mut parts = Vec::new();
        let all_types = || {
            vec![
                Shape::Null,
                Shape::Boolean,
                Shape::Number(Default::default()),
                Shape::String(Default::default()),
                Shape::Array(ArrayShape {
                    prefix: vec![],
                    items: Box::new(Shape::Any),
                    min: 0,
                    max: None,
                }),
                Shape::Object(ObjectShape {
                    properties: vec![],
                    patterns: Vec::new(),
                    required: vec![],
                    additional: Box::new(Shape::Any),
                    min: 0,
                    max: None,
                    pointer: pointer.into(),
                }),
            ]
        };
        for (k, v) in map {
            match k.as_str() {
                "type" => {
                    let names: Vec<&str> = match v {
                        Value::Array(xs) => xs.iter().filter_map(Value::as_str).collect(),
                        other => other.as_str().into_iter().collect(),
                    };
                    if names.contains(&"integer") && !names.contains(&"number") {
                        return unsupported(self, "`type: integer` (the non-integral numbers)");
                    }
                    let kept = all_types().into_iter().filter(|s| {
                        let name = match s {
                            Shape::Null => "null",
                            Shape::Boolean => "boolean",
                            Shape::Number(_) => "number",
                            Shape::String(_) => "string",
                            Shape::Array(_) => "array",
                            _ => "object",
                        };
                        !names.contains(&name)
                    });
                    parts.push(Shape::any_of(kept.collect()));
                }
                "required" => {
                    let names: Vec<&str> = v
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    let mut kept: Vec<Shape> = all_types()
                        .into_iter()
                        .filter(|s| !matches!(s, Shape::Object(_)))
                        .collect();
                    for name in names {
                        // An object without this property.
                        if let Some(mut object) = all_types().pop() {
                            if let Shape::Object(o) = &mut object {
                                o.properties.push((name.to_string(), Shape::Never));
                                kept.push(object);
                            }
                        }
                    }
                    parts.push(Shape::any_of(kept));
                }
                "enum" | "const" => {
                    let values: Vec<&Value> = match (k.as_str(), v) {
                        ("enum", Value::Array(xs)) => xs.iter().collect(),
                        _ => vec![v],
                    };
                    self.within(LimitKind::Alternatives, values.len(), pointer, "enum")?;
                    let mut kept = Vec::new();
                    if !values.iter().any(|x| x.is_null()) {
                        kept.push(Shape::Null);
                    }
                    let bools: Vec<Value> = [true, false]
                        .into_iter()
                        .filter(|b| !values.contains(&&Value::Bool(*b)))
                        .map(Value::Bool)
                        .collect();
                    if !bools.is_empty() {
                        kept.push(Shape::Values(bools));
                    }
                    let strings: Vec<String> = values
                        .iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect();
                    if values
                        .iter()
                        .any(|x| !(x.is_null() || x.is_boolean() || x.is_string()))
                    {
                        return unsupported(self, "numbers, arrays or objects in `enum`/`const`");
                    }
                    kept.push(Shape::String(StringShape {
                        exclude: strings.into_iter().collect(),
                        exclude_pointer: Some(pointer.to_string()),
                        ..StringShape::default()
                    }));
                    kept.extend(all_types().into_iter().filter(|s| {
                        matches!(s, Shape::Number(_) | Shape::Array(_) | Shape::Object(_))
                    }));
                    parts.push(Shape::any_of(kept));
                }
                "title" | "description" | "$comment" | "default" | "examples" => {}
                other => return unsupported(self, &format!("`{other}`")),
            }
        }
        // `not: {}` keeps nothing; otherwise a value escapes `not` by failing any one keyword.
        Ok(Some(if parts.is_empty() {
            Shape::Never
        } else {
            Shape::any_of(parts)
        }))
    }

    /// Unsupported keywords whose value makes them no-ops.
    fn harmless(&self, key: &str, map: &Map<String, Value>) -> bool {
        let v = &map[key];
        match key {
            "if" => !map.contains_key("then") && !map.contains_key("else"),
            "uniqueItems" => {
                v == &Value::Bool(false)
                    || map
                        .get("maxItems")
                        .and_then(Value::as_u64)
                        .is_some_and(|m| m <= 1)
            }
            "dependentRequired" | "dependentSchemas" | "dependencies" => {
                v.as_object().is_some_and(Map::is_empty)
            }
            "propertyNames" | "unevaluatedItems" | "unevaluatedProperties" => {
                v == &Value::Bool(true) || v.as_object().is_some_and(Map::is_empty)
            }
            "multipleOf" => is_one(v) && (map.get("type") == Some(&Value::from("integer"))),
            _ => false,
        }
    }

    fn schema_list<'v>(&self, v: &'v Value, pointer: &str) -> Result<&'v Vec<Value>, CompileError> {
        match v {
            Value::Array(xs) if !xs.is_empty() => {
                self.within(LimitKind::Alternatives, xs.len(), pointer, "schema list")?;
                Ok(xs)
            }
            _ => Err(error(
                CompileErrorKind::Invalid,
                pointer,
                "expected a non-empty array of schemas",
            )),
        }
    }

    /// `enum` and `const` together.
    fn values(
        &self,
        map: &Map<String, Value>,
        pointer: &str,
    ) -> Result<Option<Vec<Value>>, CompileError> {
        let mut out: Option<Vec<Value>> = None;
        if let Some(e) = map.get("enum") {
            let at = format!("{pointer}/enum");
            match e {
                Value::Array(xs) => {
                    self.within(LimitKind::Alternatives, xs.len(), &at, "enum")?;
                    self.check_values(xs, &at)?;
                    out = Some(xs.clone());
                }
                _ => {
                    return Err(error(
                        CompileErrorKind::Invalid,
                        &format!("{pointer}/enum"),
                        "`enum` must be an array",
                    ))
                }
            }
        }
        if let Some(c) = map.get("const") {
            self.check_values(std::slice::from_ref(c), &format!("{pointer}/const"))?;
            out = Some(match out {
                Some(xs) => xs.into_iter().filter(|x| json_equal(x, c)).collect(),
                None => vec![c.clone()],
            });
        }
        Ok(out)
    }

    /// `Ok` if no value of `values` nests deeper than [`Limits::nesting`] (they are lowered and
    /// compared recursively); counted with an explicit stack.
    fn check_values(&self, values: &[Value], pointer: &str) -> Result<(), CompileError> {
        let mut stack: Vec<(&Value, usize)> = values.iter().map(|v| (v, 1)).collect();
        while let Some((v, depth)) = stack.pop() {
            self.tick(pointer)?;
            let children: Box<dyn Iterator<Item = &Value>> = match v {
                Value::Array(xs) => Box::new(xs.iter()),
                Value::Object(map) => Box::new(map.values()),
                _ => continue,
            };
            self.within(LimitKind::Nesting, depth + 1, pointer, "value")?;
            stack.extend(children.map(|c| (c, depth + 1)));
        }
        Ok(())
    }

    /// The union over the schema's types (all types without `type`) of each type's keywords.
    fn typed(&mut self, map: &Map<String, Value>, pointer: &str) -> Result<Shape, CompileError> {
        let types: Vec<&str> = match map.get("type") {
            None => {
                let specific = map.keys().any(|k| type_of_keyword(k).is_some());
                if !specific {
                    return Ok(Shape::Any);
                }
                vec!["null", "boolean", "number", "string", "array", "object"]
            }
            Some(t) => {
                let at = format!("{pointer}/type");
                let names: Vec<&Value> = match t {
                    Value::Array(xs) => xs.iter().collect(),
                    other => vec![other],
                };
                let mut out = Vec::new();
                for n in names {
                    match n.as_str().and_then(|s| TYPES.iter().find(|t| **t == s)) {
                        Some(t) if out.contains(t) => {}
                        Some(t) => out.push(*t),
                        None => {
                            return Err(error(
                                CompileErrorKind::Invalid,
                                &at,
                                format!("unknown type {n}"),
                            ))
                        }
                    }
                }
                if out.contains(&"number") {
                    out.retain(|t| *t != "integer");
                }
                out
            }
        };
        let mut branches = Vec::new();
        for t in types {
            branches.push(match t {
                "null" => Shape::Null,
                "boolean" => Shape::Boolean,
                "integer" | "number" => self.number(map, pointer, t == "integer")?,
                "string" => self.string(map, pointer)?,
                "array" => self.array(map, pointer)?,
                _ => self.object(map, pointer)?,
            });
        }
        Ok(Shape::any_of(branches))
    }

    fn number(
        &mut self,
        map: &Map<String, Value>,
        pointer: &str,
        integer: bool,
    ) -> Result<Shape, CompileError> {
        let mut shape = NumberShape {
            integer,
            ..NumberShape::default()
        };
        if map.get("multipleOf").is_some_and(is_one) {
            shape.integer = true;
        }
        let num = |key: &str| -> Result<Option<Decimal>, CompileError> {
            match map.get(key) {
                None => Ok(None),
                Some(Value::Number(n)) => Ok(Some(Decimal::from_json(n))),
                Some(_) => Err(error(
                    CompileErrorKind::Invalid,
                    &format!("{pointer}/{key}"),
                    format!("`{key}` must be a number"),
                )),
            }
        };
        let tighter_lo = |a: Option<Bound>, b: Bound| match a {
            Some(a) if a.value > b.value || (a.value == b.value && a.strict) => Some(a),
            _ => Some(b),
        };
        let tighter_hi = |a: Option<Bound>, b: Bound| match a {
            Some(a) if a.value < b.value || (a.value == b.value && a.strict) => Some(a),
            _ => Some(b),
        };
        // Draft 4 writes exclusiveMinimum: true next to minimum; later drafts a number.
        let bool_flag = |key: &str| map.get(key) == Some(&Value::Bool(true));
        if let Some(v) = num("minimum")? {
            shape.lo = tighter_lo(
                shape.lo,
                Bound {
                    value: v,
                    strict: bool_flag("exclusiveMinimum"),
                },
            );
        }
        if let Some(v) = num("maximum")? {
            shape.hi = tighter_hi(
                shape.hi,
                Bound {
                    value: v,
                    strict: bool_flag("exclusiveMaximum"),
                },
            );
        }
        if !matches!(map.get("exclusiveMinimum"), Some(Value::Bool(_))) {
            if let Some(v) = num("exclusiveMinimum")? {
                shape.lo = tighter_lo(
                    shape.lo,
                    Bound {
                        value: v,
                        strict: true,
                    },
                );
            }
        }
        if !matches!(map.get("exclusiveMaximum"), Some(Value::Bool(_))) {
            if let Some(v) = num("exclusiveMaximum")? {
                shape.hi = tighter_hi(
                    shape.hi,
                    Bound {
                        value: v,
                        strict: true,
                    },
                );
            }
        }
        Ok(Shape::Number(shape))
    }

    fn count(
        &self,
        map: &Map<String, Value>,
        pointer: &str,
        key: &str,
    ) -> Result<Option<u64>, CompileError> {
        match map.get(key) {
            None => Ok(None),
            Some(v) => match v.as_u64().or_else(|| {
                v.as_f64()
                    .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                    .map(|f| f as u64)
            }) {
                Some(n) => Ok(Some(n)),
                None => Err(error(
                    CompileErrorKind::Invalid,
                    &format!("{pointer}/{key}"),
                    format!("`{key}` must be a non-negative integer"),
                )),
            },
        }
    }

    fn string(&mut self, map: &Map<String, Value>, pointer: &str) -> Result<Shape, CompileError> {
        let mut shape = StringShape {
            min: self.count(map, pointer, "minLength")?.unwrap_or(0),
            max: self.count(map, pointer, "maxLength")?,
            ..StringShape::default()
        };
        if map.contains_key("minLength") || map.contains_key("maxLength") {
            let key = if map.contains_key("maxLength") {
                "maxLength"
            } else {
                "minLength"
            };
            shape.length_pointer = Some(format!("{pointer}/{key}"));
        }
        if let Some(p) = map.get("pattern") {
            let at = format!("{pointer}/pattern");
            let Value::String(p) = p else {
                return Err(error(
                    CompileErrorKind::Invalid,
                    &at,
                    "`pattern` must be a string",
                ));
            };
            match Regex::pattern(p, self.limits.get(LimitKind::Nesting) as usize) {
                Ok(regex) => shape.regexes.push(Constraint {
                    regex,
                    source: p.clone(),
                    pointer: at,
                }),
                Err(e) if e.kind() == CompileErrorKind::Unsupported => {
                    self.unsupported(&at, e.message().to_string())?
                }
                Err(e) => return Err(e.or_at(Location::JsonPointer(at))),
            }
        }
        if let Some(f) = map.get("format") {
            let at = format!("{pointer}/format");
            let name = f.as_str().unwrap_or_default();
            if let Some(regex) = formats::format_regex(name) {
                shape.regexes.push(Constraint {
                    regex: regex.clone(),
                    source: format!("format {name:?}"),
                    pointer: at.clone(),
                });
                if let Some(w) = formats::approximation(name) {
                    self.warnings
                        .push(error(CompileErrorKind::Unsupported, &at, w));
                }
            } else if formats::is_spec_format(name) {
                self.unsupported(&at, format!("format {name:?} is not supported"))?;
            } else {
                self.warnings.push(error(
                    CompileErrorKind::Unsupported,
                    &at,
                    format!("unknown format {f} ignored (an annotation)"),
                ));
            }
        }
        Ok(Shape::String(shape))
    }

    fn array(&mut self, map: &Map<String, Value>, pointer: &str) -> Result<Shape, CompileError> {
        let mut prefix = Vec::new();
        let (tuple_key, rest_key) = match map.get("items") {
            Some(Value::Array(_)) => ("items", "additionalItems"),
            _ => ("prefixItems", "items"),
        };
        if let Some(t) = map.get(tuple_key) {
            let at = format!("{pointer}/{tuple_key}");
            let Value::Array(xs) = t else {
                return Err(error(
                    CompileErrorKind::Invalid,
                    &at,
                    format!("`{tuple_key}` must be an array"),
                ));
            };
            for (i, x) in xs.iter().enumerate() {
                prefix.push(self.build(x, &format!("{at}/{i}"))?);
            }
        }
        let items = match map.get(rest_key) {
            Some(s) => self.build(s, &format!("{pointer}/{rest_key}"))?,
            None => Shape::Any,
        };
        Ok(Shape::Array(ArrayShape {
            prefix,
            items: Box::new(items),
            min: self.count(map, pointer, "minItems")?.unwrap_or(0),
            max: self.count(map, pointer, "maxItems")?,
        }))
    }

    fn object(&mut self, map: &Map<String, Value>, pointer: &str) -> Result<Shape, CompileError> {
        let mut properties = Vec::new();
        if let Some(p) = map.get("properties") {
            let at = format!("{pointer}/properties");
            let Value::Object(props) = p else {
                return Err(error(
                    CompileErrorKind::Invalid,
                    &at,
                    "`properties` must be an object",
                ));
            };
            for (k, s) in props {
                properties.push((
                    k.clone(),
                    self.build(s, &format!("{at}/{}", pointer_escape(k)))?,
                ));
            }
        }
        let mut required = Vec::new();
        if let Some(r) = map.get("required") {
            let at = format!("{pointer}/required");
            match r {
                Value::Array(xs) if xs.iter().all(Value::is_string) => {
                    let mut seen = HashSet::new();
                    for name in xs.iter().filter_map(Value::as_str) {
                        if seen.insert(name) {
                            required.push(name.to_string());
                        }
                    }
                }
                // Draft 3 put `required: true` on the property itself; not part of later drafts.
                _ => {
                    return Err(error(
                        CompileErrorKind::Invalid,
                        &at,
                        "`required` must be an array of strings",
                    ))
                }
            }
        }
        let mut additional = match map.get("additionalProperties") {
            Some(s) => self.build(s, &format!("{pointer}/additionalProperties"))?,
            None if self.opts.additional_properties => Shape::Any,
            None => Shape::Never,
        };
        let patterns = match map.get("patternProperties") {
            Some(Value::Object(patterns)) => {
                self.pattern_properties(patterns, pointer, &mut properties, &mut additional)?
            }
            _ => Vec::new(),
        };
        Ok(Shape::Object(ObjectShape {
            properties,
            patterns,
            required,
            additional: Box::new(additional),
            min: self.count(map, pointer, "minProperties")?.unwrap_or(0),
            max: self.count(map, pointer, "maxProperties")?,
            pointer: pointer.into(),
        }))
    }

    /// `patternProperties`: each declared name takes the shapes of the patterns it matches,
    /// and the patterns that match every name (`.*`, `""`) become the shape of every undeclared
    /// name. The other patterns are returned with those shapes folded in: where they match,
    /// their shapes apply instead of `additional` (the lowering splits the undeclared names
    /// by which patterns they match, see [`MAX_KEY_PATTERNS`]).
    fn pattern_properties(
        &mut self,
        patterns: &Map<String, Value>,
        pointer: &str,
        properties: &mut [(String, Shape)],
        additional: &mut Shape,
    ) -> Result<Vec<(Constraint, Shape)>, CompileError> {
        let here = format!("{pointer}/patternProperties");
        self.within(
            LimitKind::Alternatives,
            patterns.len(),
            &here,
            "patternProperties",
        )?;
        let mut every_name: Option<Shape> = None;
        let mut out: Vec<(Constraint, Shape)> = Vec::new();
        for (source, sub) in patterns {
            let at = format!("{here}/{}", pointer_escape(source));
            let value = self.build(sub, &at)?;
            let regex = match Regex::pattern(source, self.limits.get(LimitKind::Nesting) as usize) {
                Ok(r) => r,
                Err(e) if e.kind() == CompileErrorKind::Unsupported => {
                    self.unsupported(&at, e.message().to_string())?;
                    continue;
                }
                Err(e) => return Err(e.or_at(Location::JsonPointer(at))),
            };
            let constraint = Constraint {
                regex,
                source: source.clone(),
                pointer: at.clone(),
            };
            for (name, s) in properties.iter_mut() {
                self.tick(&at)?;
                if constraint.regex.is_universal() || super::algebra::matches(&constraint, name)? {
                    *s = self.intersect(s, &value, &at)?;
                }
            }
            if constraint.regex.is_universal() {
                every_name = Some(match every_name {
                    Some(shape) => self.intersect(&shape, &value, &at)?,
                    None => value,
                });
            } else if !matches!(value, Shape::Any) || !matches!(additional, Shape::Any) {
                // With any value and any additional property, the pattern changes nothing.
                out.push((constraint, value));
            }
        }
        if let Some(every) = every_name {
            for (c, s) in out.iter_mut() {
                *s = self.intersect(s, &every, &c.pointer)?;
            }
            *additional = every;
        }
        if out.len() > MAX_KEY_PATTERNS {
            self.unsupported(
                &here,
                format!("more than {MAX_KEY_PATTERNS} patterns in `patternProperties`"),
            )?;
            out.truncate(MAX_KEY_PATTERNS);
        }
        Ok(out)
    }

    /// The table entry of a `$ref` string written at `pointer`.
    fn ref_id(&mut self, reference: &str, pointer: &str) -> Result<RefId, CompileError> {
        let undefined = || {
            error(
                CompileErrorKind::Undefined,
                pointer,
                format!("`$ref` {reference:?} does not resolve in this document"),
            )
        };
        let (base, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let base_pointer = match base {
            "" => String::new(),
            b => self.ids.get(b).cloned().ok_or_else(undefined)?,
        };
        let fragment = percent_decode(fragment);
        let target = if fragment.is_empty() || fragment.starts_with('/') {
            format!("{base_pointer}{fragment}")
        } else {
            self.ids
                .get(&format!("#{fragment}"))
                .cloned()
                .ok_or_else(undefined)?
        };
        if self.root.pointer(&target).is_none() {
            return Err(undefined());
        }
        if let Some(&id) = self.ref_ids.get(&target) {
            return Ok(id);
        }
        let id = self.refs.len();
        self.refs.push(RefDef {
            name: format!("#{target}"),
            bases: vec![id],
            recipe: Recipe::Pointer(target.clone()),
            shape: None,
            building: false,
        });
        self.ref_ids.insert(target, id);
        Ok(id)
    }

    /// The table entry for the intersection of two entries. Intersecting `n` references makes
    /// entries of every size up to `n` (each holds its sorted references and a name), so `n`
    /// is held to the nesting limit: the intersection is resolved as that many nested ones.
    pub fn both_id(&mut self, a: RefId, b: RefId, pointer: &str) -> Result<RefId, CompileError> {
        let mut bases = self.refs[a].bases.clone();
        bases.extend(&self.refs[b].bases);
        bases.sort_unstable();
        bases.dedup();
        if bases == self.refs[a].bases {
            return Ok(a);
        }
        if bases == self.refs[b].bases {
            return Ok(b);
        }
        if let Some(&id) = self.both_ids.get(&bases) {
            return Ok(id);
        }
        let what = "intersection of `$ref`s";
        self.within(LimitKind::Nesting, bases.len(), pointer, what)?;
        let id = self.refs.len();
        let name = bases
            .iter()
            .map(|&r| self.refs[r].name.as_str())
            .collect::<Vec<_>>()
            .join(" & ");
        self.refs.push(RefDef {
            name,
            bases: bases.clone(),
            recipe: Recipe::Both(a, b),
            shape: None,
            building: false,
        });
        self.both_ids.insert(bases, id);
        Ok(id)
    }

    /// Is the entry's shape being built right now (a reference to it is recursion)?
    pub fn is_building(&self, id: RefId) -> bool {
        self.refs[id].building
    }

    /// The error of a reference whose shape is needed while it is being built.
    pub fn cycle_error(&self, id: RefId) -> CompileError {
        error(
            CompileErrorKind::Invalid,
            self.refs[id].name.trim_start_matches('#'),
            "`$ref` cycle with no object or array in between (the schema has no finite instance)",
        )
    }

    /// The shape of a table entry, built on first use. An intersection's parts are resolved
    /// first, from an explicit stack (they were made before it, so they form no cycle); a
    /// pointer's schema is built one nesting level below the schema being built, if any.
    pub fn resolve(&mut self, id: RefId) -> Result<Rc<Shape>, CompileError> {
        let mut pending = vec![id];
        while let Some(&top) = pending.last() {
            if self.refs[top].shape.is_some() {
                pending.pop();
                continue;
            }
            if let Recipe::Both(a, b) = self.refs[top].recipe {
                let parts: Vec<RefId> = [a, b]
                    .into_iter()
                    .filter(|&r| self.refs[r].shape.is_none())
                    .collect();
                if !parts.is_empty() && !self.refs[top].building {
                    // Marked, so that the parts' own building cannot ask for it as if done.
                    self.refs[top].building = true;
                    pending.extend(parts);
                    continue;
                }
                self.refs[top].building = false;
            }
            let shape = self.build_entry(top)?;
            self.refs[top].shape = Some(Rc::new(shape));
            pending.pop();
        }
        match &self.refs[id].shape {
            Some(s) => Ok(s.clone()),
            None => Err(self.cycle_error(id)),
        }
    }

    /// The shape of entry `id`, whose intersection parts (if any) are resolved.
    fn build_entry(&mut self, id: RefId) -> Result<Shape, CompileError> {
        if std::mem::replace(&mut self.refs[id].building, true) {
            return Err(self.cycle_error(id));
        }
        let name = self.refs[id].name.clone();
        let shape = match &self.refs[id].recipe {
            Recipe::Pointer(p) => {
                let p = p.clone();
                match self.root.pointer(&p) {
                    Some(node) => self.build(node, &p)?,
                    // Checked when the reference was made; a missing target is no value.
                    None => Shape::Never,
                }
            }
            &Recipe::Both(a, b) => {
                let sa = self.refs[a]
                    .shape
                    .clone()
                    .ok_or_else(|| self.cycle_error(a))?;
                let sb = self.refs[b]
                    .shape
                    .clone()
                    .ok_or_else(|| self.cycle_error(b))?;
                self.intersect(&sa, &sb, name.trim_start_matches('#'))?
            }
        };
        self.refs[id].building = false;
        Ok(shape)
    }

    /// The shape `r` stands for, following chains of plain references (`a` is `{"$ref": b}`)
    /// in a loop rather than a recursion: the first shape that is not a reference, `Never`
    /// for a chain that comes back to itself (no value), or the reference where the chain
    /// meets one still being built.
    /// Each chain is walked once: its links remember where it ends.
    pub fn deref(&mut self, r: RefId) -> Result<Rc<Shape>, CompileError> {
        let mut walked = HashSet::new();
        let mut at = r;
        let end = loop {
            if self.is_building(at) {
                return Ok(Rc::new(Shape::Ref(at)));
            }
            if let Some(&end) = self.chain_end.get(&at) {
                break end;
            }
            if !walked.insert(at) {
                break None;
            }
            let name = self.refs[at].name.clone();
            self.tick(name.trim_start_matches('#'))?;
            match *self.resolve(at)? {
                Shape::Ref(next) => at = next,
                _ => break Some(at),
            }
        };
        for link in walked {
            self.chain_end.insert(link, end);
        }
        match end {
            Some(end) => self.resolve(end),
            None => Ok(Rc::new(Shape::Never)),
        }
    }
}

/// The `required` lists of a `oneOf` whose branches say nothing else (`oneOf: [{required:
/// [a]}, {required: [b]}]`, "exactly one of a and b").
fn required_sets(branches: &[Value]) -> Option<Vec<Vec<String>>> {
    let annotation = |k: &str| matches!(k, "title" | "description" | "$comment");
    branches
        .iter()
        .map(|b| {
            let map = b.as_object()?;
            if !map.keys().all(|k| k == "required" || annotation(k)) {
                return None;
            }
            let req = map.get("required")?.as_array()?;
            req.iter().map(|r| r.as_str().map(str::to_string)).collect()
        })
        .collect()
}

/// Objects in which exactly one of the sets is wholly present: set i present and, for every
/// other set, one of its names outside set i absent. Every other value matches all branches,
/// so none of them passes a `oneOf` of two or more.
fn exactly_one_present(sets: &[Vec<String>], pointer: &str) -> Option<Shape> {
    let object = |present: &[String], absent: &[&String]| {
        Shape::Object(ObjectShape {
            properties: absent
                .iter()
                .map(|n| ((*n).clone(), Shape::Never))
                .collect(),
            patterns: Vec::new(),
            required: present.to_vec(),
            additional: Box::new(Shape::Any),
            min: 0,
            max: None,
            pointer: pointer.into(),
        })
    };
    if sets.len() == 1 {
        return Some(Shape::any_of(vec![
            Shape::Null,
            Shape::Boolean,
            Shape::Number(NumberShape::default()),
            Shape::String(StringShape::default()),
            Shape::Array(ArrayShape {
                prefix: vec![],
                items: Box::new(Shape::Any),
                min: 0,
                max: None,
            }),
            object(&sets[0], &[]),
        ]));
    }
    let mut branches = Vec::new();
    for (i, set) in sets.iter().enumerate() {
        // One absent name from each other set: all combinations.
        let mut combos: Vec<Vec<&String>> = vec![vec![]];
        for (j, other) in sets.iter().enumerate() {
            if j == i {
                continue;
            }
            let outside: Vec<&String> = other.iter().filter(|n| !set.contains(n)).collect();
            combos = combos
                .iter()
                .flat_map(|c| outside.iter().map(move |n| [c.clone(), vec![*n]].concat()))
                .collect();
            if combos.len() > MAX_ONE_OF_COMBINATIONS {
                return None;
            }
        }
        branches.extend(combos.iter().map(|absent| object(set, absent)));
    }
    Some(Shape::any_of(branches))
}

/// Most patterns of one object's `patternProperties` (besides those matching every name): the
/// lowering writes a key automaton for each set of them a name may match, `2^n` sets.
pub(crate) const MAX_KEY_PATTERNS: usize = 4;

/// Most branches "exactly one of these sets present" may expand to.
const MAX_ONE_OF_COMBINATIONS: usize = 256;

/// Which type a type-specific keyword constrains.
fn type_of_keyword(key: &str) -> Option<&'static str> {
    Some(match key {
        "minimum" | "maximum" | "exclusiveMinimum" | "exclusiveMaximum" | "multipleOf" => "number",
        "minLength" | "maxLength" | "pattern" | "format" => "string",
        "items" | "prefixItems" | "additionalItems" | "minItems" | "maxItems" | "uniqueItems"
        | "contains" => "array",
        "properties"
        | "required"
        | "additionalProperties"
        | "minProperties"
        | "maxProperties"
        | "patternProperties"
        | "propertyNames"
        | "dependentRequired" => "object",
        _ => return None,
    })
}

fn is_one(v: &Value) -> bool {
    v.as_f64() == Some(1.0)
}

/// JSON Schema equality: numbers by value, objects regardless of key order. Recursion: as
/// deep as the values nest (`enum`/`const` values are held to the nesting limit), guarded.
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
    guarded(|| json_equal_step(a, b))
}

fn json_equal_step(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => Decimal::from_json(x) == Decimal::from_json(y),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_equal(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The pointer of every `$anchor` (as `#name`) and `$id` of the document, walked with an
/// explicit stack (the document may nest as deeply as its caller could build it).
fn index_ids(root: &Value, deadline: &Deadline) -> Result<HashMap<String, String>, CompileError> {
    let mut out = HashMap::new();
    let mut stack = vec![(root, String::new())];
    while let Some((v, pointer)) = stack.pop() {
        tick(deadline)?;
        match v {
            Value::Object(map) => {
                for key in ["$id", "id"] {
                    if let Some(Value::String(id)) = map.get(key) {
                        out.entry(id.clone()).or_insert_with(|| pointer.clone());
                        // The document's own base URI with an empty fragment.
                        if let Some(base) = id.strip_suffix('#') {
                            out.entry(base.to_string())
                                .or_insert_with(|| pointer.clone());
                        }
                    }
                }
                if let Some(Value::String(a)) = map.get("$anchor") {
                    out.entry(format!("#{a}"))
                        .or_insert_with(|| pointer.clone());
                }
                // Reversed, so the first of equal ids, in document order, is recorded.
                for (k, x) in map.iter().rev() {
                    stack.push((x, format!("{pointer}/{}", pointer_escape(k))));
                }
            }
            Value::Array(xs) => {
                for (i, x) in xs.iter().enumerate().rev() {
                    stack.push((x, format!("{pointer}/{i}")));
                }
            }
            _ => {}
        }
    }
    Ok(out)
}
