//! Reading a schema document: keywords to [`Shape`]s, `$ref` resolution, type lists, `anyOf`,
//! `oneOf` and `allOf`.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::formats;
use super::numbers::{Bound, Decimal};
use super::shape::{ArrayShape, Constraint, NumberShape, ObjectShape, RefId, Shape, StringShape};
use super::strings::Regex;
use super::JsonSchemaOptions;
use crate::error::{CompileError, CompileErrorKind, Location};

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
    pub shape: Option<Shape>,
    pub building: bool,
}

/// One compilation: the document, options, warnings and the `$ref` table.
pub(crate) struct Compiler<'a> {
    pub root: &'a Value,
    pub opts: &'a JsonSchemaOptions,
    pub warnings: Vec<CompileError>,
    pub refs: Vec<RefDef>,
    ref_ids: HashMap<String, RefId>,
    both_ids: HashMap<Vec<RefId>, RefId>,
    /// `$anchor`s and `$id`s: the pointer of the schema each names.
    ids: HashMap<String, String>,
    /// Nesting of `intersect` calls (bounded).
    pub intersect_depth: usize,
}

impl<'a> Compiler<'a> {
    pub fn new(root: &'a Value, opts: &'a JsonSchemaOptions) -> Compiler<'a> {
        let mut ids = HashMap::new();
        index_ids(root, "", &mut ids);
        Compiler {
            root,
            opts,
            warnings: Vec::new(),
            refs: Vec::new(),
            ref_ids: HashMap::new(),
            both_ids: HashMap::new(),
            ids,
            intersect_depth: 0,
        }
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

    /// The shape of the schema at `pointer`.
    pub fn build(
        &mut self,
        schema: &Value,
        pointer: &str,
        depth: usize,
    ) -> Result<Shape, CompileError> {
        if depth > self.opts.max_depth {
            return Err(error(
                CompileErrorKind::Limit,
                pointer,
                format!("schema nested deeper than {} levels", self.opts.max_depth),
            ));
        }
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
        let mut shape = self.typed(map, pointer, depth)?;
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
                let s = self.build(sub, &at, depth + 1)?;
                shape = self.intersect(&shape, &s, &at)?;
            }
        }
        if let Some(any) = map.get("anyOf") {
            let at = format!("{pointer}/anyOf");
            let mut branches = Vec::new();
            for (i, sub) in self.schema_list(any, &at)?.iter().enumerate() {
                branches.push(self.build(sub, &format!("{at}/{i}"), depth + 1)?);
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
                        branches.push(self.build(sub, &format!("{at}/{i}"), depth + 1)?);
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
                    pointer: pointer.to_string(),
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
                        if let Some(Shape::Object(mut o)) = all_types().pop() {
                            o.properties.push((name.to_string(), Shape::Never));
                            kept.push(Shape::Object(o));
                        }
                    }
                    parts.push(Shape::any_of(kept));
                }
                "enum" | "const" => {
                    let values: Vec<&Value> = match (k.as_str(), v) {
                        ("enum", Value::Array(xs)) => xs.iter().collect(),
                        _ => vec![v],
                    };
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
                        exclude: strings,
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
            Value::Array(xs) if !xs.is_empty() => Ok(xs),
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
            match e {
                Value::Array(xs) => out = Some(xs.clone()),
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
            out = Some(match out {
                Some(xs) => xs.into_iter().filter(|x| json_equal(x, c)).collect(),
                None => vec![c.clone()],
            });
        }
        Ok(out)
    }

    /// The union over the schema's types (all types without `type`) of each type's keywords.
    fn typed(
        &mut self,
        map: &Map<String, Value>,
        pointer: &str,
        depth: usize,
    ) -> Result<Shape, CompileError> {
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
                "array" => self.array(map, pointer, depth)?,
                _ => self.object(map, pointer, depth)?,
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
            match Regex::pattern(p) {
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

    fn array(
        &mut self,
        map: &Map<String, Value>,
        pointer: &str,
        depth: usize,
    ) -> Result<Shape, CompileError> {
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
                prefix.push(self.build(x, &format!("{at}/{i}"), depth + 1)?);
            }
        }
        let items = match map.get(rest_key) {
            Some(s) => self.build(s, &format!("{pointer}/{rest_key}"), depth + 1)?,
            None => Shape::Any,
        };
        Ok(Shape::Array(ArrayShape {
            prefix,
            items: Box::new(items),
            min: self.count(map, pointer, "minItems")?.unwrap_or(0),
            max: self.count(map, pointer, "maxItems")?,
        }))
    }

    fn object(
        &mut self,
        map: &Map<String, Value>,
        pointer: &str,
        depth: usize,
    ) -> Result<Shape, CompileError> {
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
                    self.build(s, &format!("{at}/{}", pointer_escape(k)), depth + 1)?,
                ));
            }
        }
        let mut required = Vec::new();
        if let Some(r) = map.get("required") {
            let at = format!("{pointer}/required");
            match r {
                Value::Array(xs) if xs.iter().all(Value::is_string) => {
                    for x in xs {
                        let name = x.as_str().unwrap().to_string();
                        if !required.contains(&name) {
                            required.push(name);
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
            Some(s) => self.build(s, &format!("{pointer}/additionalProperties"), depth + 1)?,
            None if self.opts.additional_properties => Shape::Any,
            None => Shape::Never,
        };
        let patterns = match map.get("patternProperties") {
            Some(Value::Object(patterns)) => {
                self.pattern_properties(patterns, pointer, depth, &mut properties, &mut additional)?
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
            pointer: pointer.to_string(),
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
        depth: usize,
        properties: &mut [(String, Shape)],
        additional: &mut Shape,
    ) -> Result<Vec<(Constraint, Shape)>, CompileError> {
        let here = format!("{pointer}/patternProperties");
        let mut every_name: Option<Shape> = None;
        let mut out: Vec<(Constraint, Shape)> = Vec::new();
        for (source, sub) in patterns {
            let at = format!("{here}/{}", pointer_escape(source));
            let value = self.build(sub, &at, depth + 1)?;
            let regex = match Regex::pattern(source) {
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

    /// The table entry for the intersection of two entries.
    pub fn both_id(&mut self, a: RefId, b: RefId) -> RefId {
        let mut bases = self.refs[a].bases.clone();
        bases.extend(&self.refs[b].bases);
        bases.sort_unstable();
        bases.dedup();
        if bases == self.refs[a].bases {
            return a;
        }
        if bases == self.refs[b].bases {
            return b;
        }
        if let Some(&id) = self.both_ids.get(&bases) {
            return id;
        }
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
        id
    }

    /// Is the entry's shape being built right now (a reference to it is recursion)?
    pub fn is_building(&self, id: RefId) -> bool {
        self.refs[id].building
    }

    /// The shape of a table entry, built on first use.
    pub fn resolve(&mut self, id: RefId) -> Result<Shape, CompileError> {
        if let Some(s) = &self.refs[id].shape {
            return Ok(s.clone());
        }
        let name = self.refs[id].name.clone();
        if std::mem::replace(&mut self.refs[id].building, true) {
            return Err(error(CompileErrorKind::Invalid, name.trim_start_matches('#'), "`$ref` cycle with no object or array in between (the schema has no finite instance)"));
        }
        let shape = match &self.refs[id].recipe {
            Recipe::Pointer(p) => {
                let p = p.clone();
                let node = self
                    .root
                    .pointer(&p)
                    .expect("checked when the reference was made");
                self.build(node, &p, 0)?
            }
            &Recipe::Both(a, b) => {
                let (sa, sb) = (self.resolve(a)?, self.resolve(b)?);
                self.intersect(&sa, &sb, name.trim_start_matches('#'))?
            }
        };
        self.refs[id].building = false;
        self.refs[id].shape = Some(shape.clone());
        Ok(shape)
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
            pointer: pointer.to_string(),
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

/// JSON Schema equality: numbers by value, objects regardless of key order.
pub(crate) fn json_equal(a: &Value, b: &Value) -> bool {
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

/// Records the pointer of every `$anchor` (as `#name`) and `$id`.
fn index_ids(v: &Value, pointer: &str, out: &mut HashMap<String, String>) {
    match v {
        Value::Object(map) => {
            for key in ["$id", "id"] {
                if let Some(Value::String(id)) = map.get(key) {
                    out.entry(id.clone()).or_insert_with(|| pointer.to_string());
                    // The document's own base URI with an empty fragment.
                    if let Some(base) = id.strip_suffix('#') {
                        out.entry(base.to_string())
                            .or_insert_with(|| pointer.to_string());
                    }
                }
            }
            if let Some(Value::String(a)) = map.get("$anchor") {
                out.entry(format!("#{a}"))
                    .or_insert_with(|| pointer.to_string());
            }
            for (k, x) in map {
                index_ids(x, &format!("{pointer}/{}", pointer_escape(k)), out);
            }
        }
        Value::Array(xs) => {
            for (i, x) in xs.iter().enumerate() {
                index_ids(x, &format!("{pointer}/{i}"), out);
            }
        }
        _ => {}
    }
}
