//! The keywords of each JSON type (number bounds, string lengths, patterns and formats, array
//! items and counts, object properties and their patterns) and `not`, read into [`Shape`]s.

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::formats;
use super::multiples::{step_too_large, Step};
use super::numbers::{Bound, Decimal};
use super::schema::{error, pointer_escape, Compiler, MAX_KEY_PATTERNS};
use super::shape::{ArrayShape, NumberShape, ObjectShape, RegexConstraint, Shape, StringShape};
use super::strings::Regex;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::limits::LimitKind;

impl Compiler<'_> {
    /// The values `not` keeps, for the forms formwork can complement exactly: `true`/`false`/`{}`,
    /// `type`, `required`, and `enum`/`const` of null, booleans and strings (several keywords:
    /// the union of their complements). `None` when unsupported and lenient (nothing kept out).
    // Long: one match over the keywords `not` can complement exactly, each a small case of
    // the same union.
    pub(super) fn complement(
        &mut self,
        n: &Value,
        pointer: &str,
    ) -> Result<Option<Shape>, CompileError> {
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

    pub(super) fn number(
        &mut self,
        map: &Map<String, Value>,
        pointer: &str,
        integer: bool,
    ) -> Result<Shape, CompileError> {
        let mut shape = NumberShape {
            integer,
            ..NumberShape::default()
        };
        if let Some(v) = map.get("multipleOf") {
            let at = format!("{pointer}/multipleOf");
            let step = match v {
                Value::Number(n) => Decimal::from_json(n),
                _ => Decimal::zero(),
            };
            if step <= Decimal::zero() {
                return Err(error(
                    CompileErrorKind::Invalid,
                    &at,
                    "`multipleOf` must be a number greater than 0",
                ));
            }
            let max = self.limits.get(LimitKind::AutomatonStates);
            shape.multiple = Some(Step::of(&step).ok_or_else(|| step_too_large(&at, max))?);
            shape.steps_pointer = Some(at.into());
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
        Ok(Shape::number(shape))
    }

    pub(super) fn count(
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

    pub(super) fn string(
        &mut self,
        map: &Map<String, Value>,
        pointer: &str,
    ) -> Result<Shape, CompileError> {
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
                Ok(regex) => shape.regexes.push(RegexConstraint {
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
                shape.regexes.push(RegexConstraint {
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

    pub(super) fn array(
        &mut self,
        map: &Map<String, Value>,
        pointer: &str,
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

    pub(super) fn object(
        &mut self,
        map: &Map<String, Value>,
        pointer: &str,
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
    pub(super) fn pattern_properties(
        &mut self,
        patterns: &Map<String, Value>,
        pointer: &str,
        properties: &mut [(String, Shape)],
        additional: &mut Shape,
    ) -> Result<Vec<(RegexConstraint, Shape)>, CompileError> {
        let here = format!("{pointer}/patternProperties");
        self.within(
            LimitKind::Alternatives,
            patterns.len(),
            &here,
            "patternProperties",
        )?;
        let mut every_name: Option<Shape> = None;
        let mut out: Vec<(RegexConstraint, Shape)> = Vec::new();
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
            let constraint = RegexConstraint {
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
}
