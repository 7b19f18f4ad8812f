//! The keywords of each JSON type (number bounds, string lengths, patterns and formats, array
//! items and counts, object properties and their patterns), read into [`Shape`]s.

use foldhash::{HashSet, HashSetExt};
use std::rc::Rc;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::ecma::{leading_lookahead, Regex};
use super::formats;
use super::multiples::{step_too_large, Step};
use super::numbers::{Bound, Decimal};
use super::schema::{error, pointer_escape, Compiler, Draft, MAX_KEY_PATTERNS};
use super::shape::{
    ArrayShape, NamePattern, NumberShape, ObjectShape, RegexConstraint, Shape, StringShape,
};
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::limits::LimitKind;

/// The pointer of `uniqueItems` when it is `true` (items are then told apart when the
/// array is lowered, see `lower::SchemaLowering::distinct_items`).
fn unique_items(map: &Map<String, Value>, pointer: &str) -> Result<Option<Arc<str>>, CompileError> {
    let at = format!("{pointer}/uniqueItems");
    match map.get("uniqueItems") {
        None | Some(Value::Bool(false)) => Ok(None),
        Some(Value::Bool(true)) => Ok(Some(at.into())),
        Some(_) => Err(error(
            CompileErrorKind::Invalid,
            &at,
            "`uniqueItems` must be a boolean",
        )),
    }
}

/// What a pattern asks of a string (see [`Compiler::pattern_parts`]).
#[derive(Default)]
struct PatternParts {
    must: Vec<RegexConstraint>,
    must_not: Vec<RegexConstraint>,
}

impl Compiler<'_> {
    // Long: the number keywords read in one place (multipleOf, bounds in both draft spellings,
    // exclusive flags), sharing the closures that parse and tighten bounds.
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
            if let Some(parts) = self.pattern_parts(p, &at)? {
                shape.regexes.extend(parts.must);
                shape.forbidden.extend(parts.must_not);
            }
        }
        if let Some(f) = map.get("format") {
            let at = format!("{pointer}/format");
            let name = f.as_str().unwrap_or_default();
            if let Some(regex) = formats::format_regex(name) {
                shape.regexes.push(RegexConstraint {
                    regex: regex.clone(),
                    source: format!("format {name:?}"),
                    is_format: true,
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
        let array = Shape::Array(ArrayShape {
            prefix,
            items: Box::new(items),
            min: self.count(map, pointer, "minItems")?.unwrap_or(0),
            max: self.count(map, pointer, "maxItems")?,
            witnesses: Vec::new(),
            unique: unique_items(map, pointer)?,
        });
        match map.get("contains").filter(|_| self.draft >= Draft::Draft6) {
            Some(c) => self.contains(array, c, map, pointer),
            None => Ok(array),
        }
    }

    /// `array` with at least one item of the `contains` schema `c`: a witness, which meeting
    /// the array places on each item of its prefix or past it (see `intersect.rs`).
    /// `minContains` 0 (2019-09 on) makes it nothing, 1 is the plain case; more, and
    /// `maxContains`, count items, which witnesses do not: unsupported.
    fn contains(
        &mut self,
        array: Shape,
        c: &Value,
        map: &Map<String, Value>,
        pointer: &str,
    ) -> Result<Shape, CompileError> {
        let at = format!("{pointer}/contains");
        let counted = self.draft >= Draft::Draft2019;
        let min = match counted {
            true => self.count(map, pointer, "minContains")?,
            false => None,
        };
        if min == Some(0) {
            return Ok(array);
        }
        if counted && (min.is_some_and(|m| m > 1) || map.contains_key("maxContains")) {
            let key = match min.is_some_and(|m| m > 1) {
                true => "minContains",
                false => "maxContains",
            };
            self.unsupported(
                &format!("{pointer}/{key}"),
                format!("`{key}` (a count of the items `contains` matches)"),
            )?;
            return Ok(array);
        }
        let witness = self.build(c, &at)?;
        let witnessing = Shape::Array(ArrayShape {
            witnesses: vec![witness],
            ..ArrayShape::any()
        });
        self.intersect(&array, &witnessing, &at)
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
        let required = required_names(map, pointer)?;
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
        let mut max = self.count(map, pointer, "maxProperties")?;
        let names = match map.get("propertyNames") {
            Some(s) if self.draft >= Draft::Draft6 => {
                self.property_names(s, &format!("{pointer}/propertyNames"))?
            }
            _ => None,
        };
        let names = match names {
            Some(Shape::Never) => {
                max = Some(0);
                None
            }
            names => names.map(Box::new),
        };
        let mut object = ObjectShape {
            properties,
            patterns,
            required,
            additional: Box::new(additional),
            min: self.count(map, pointer, "minProperties")?.unwrap_or(0),
            max,
            witnesses: Vec::new(),
            names,
            pointer: pointer.into(),
        };
        self.forbid_refused_names(&mut object)?;
        Ok(Shape::object(object))
    }

    /// A pattern as the regexes a string must match and those it must not: one regex, and one
    /// more per look-ahead opening it (see [`LeadingLookahead`](super::ecma::LeadingLookahead),
    /// at most [`Limits::nesting`](crate::Limits) of them); a regex every string matches is
    /// left out (kept, it was the grammar `.*(…)*.*` of a search that always succeeds, read in
    /// as many ways as the text has positions: `[A-Za-z0-9_-]*` on MaskBench, masks of
    /// 5–30 ms). `None` for a pattern refused under lenient compilation.
    fn pattern_parts(
        &mut self,
        source: &str,
        at: &str,
    ) -> Result<Option<PatternParts>, CompileError> {
        // Look-aheads in a row (`^(?=.*\d)(?=.*[a-z])…`) each test the first character.
        let mut texts = Vec::new();
        let mut rest = source.to_string();
        while let Some(l) = leading_lookahead(&rest) {
            texts.push((l.look, !l.negative));
            self.within(
                LimitKind::Nesting,
                texts.len(),
                at,
                "look-aheads opening a pattern",
            )?;
            rest = l.rest;
        }
        texts.push((rest, true));
        let mut parts = PatternParts::default();
        for (text, must) in texts {
            let regex = match Regex::pattern(&text, self.limits.get(LimitKind::Nesting) as usize) {
                Ok(r) => r,
                Err(e) if e.kind() == CompileErrorKind::Unsupported => {
                    self.unsupported(at, e.message().to_string())?;
                    return Ok(None);
                }
                Err(e) => return Err(e.or_at(Location::JsonPointer(at.to_string()))),
            };
            let c = RegexConstraint {
                regex,
                source: text,
                is_format: false,
                pointer: at.to_string(),
            };
            match (must, c.regex.is_universal()) {
                (true, true) => {}
                (true, false) => parts.must.push(c),
                (false, _) => parts.must_not.push(c),
            }
        }
        Ok(Some(parts))
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
    ) -> Result<Vec<(NamePattern, Shape)>, CompileError> {
        let here = format!("{pointer}/patternProperties");
        self.within(
            LimitKind::Alternatives,
            patterns.len(),
            &here,
            "patternProperties",
        )?;
        let mut every_name: Option<Shape> = None;
        let mut out: Vec<(NamePattern, Shape)> = Vec::new();
        for (source, sub) in patterns {
            let at = format!("{here}/{}", pointer_escape(source));
            let value = self.build(sub, &at)?;
            let Some(mut parts) = self.pattern_parts(source, &at)? else {
                continue;
            };
            let universal = parts.must.is_empty() && parts.must_not.is_empty();
            let last = parts.must.pop();
            let pattern = match (last, parts.must.is_empty() && parts.must_not.is_empty()) {
                (Some(one), true) => NamePattern::Regex(one),
                (last, _) => NamePattern::Strings {
                    names: Rc::new(Shape::String(StringShape {
                        regexes: parts.must.into_iter().chain(last).collect(),
                        forbidden: parts.must_not,
                        ..StringShape::default()
                    })),
                    admitted: true,
                    pointer: at.as_str().into(),
                },
            };
            for (name, s) in properties.iter_mut() {
                self.tick(&at)?;
                if universal || pattern.matches(self, name)? {
                    *s = self.intersect(s, &value, &at)?;
                }
            }
            if universal {
                every_name = Some(match every_name {
                    Some(shape) => self.intersect(&shape, &value, &at)?,
                    None => value,
                });
            } else if !matches!(value, Shape::Any) || !matches!(additional, Shape::Any) {
                // With any value and any additional property, the pattern changes nothing.
                out.push((pattern, value));
            }
        }
        if let Some(every) = every_name {
            for (p, s) in out.iter_mut() {
                *s = self.intersect(s, &every, p.pointer())?;
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

/// The names `required` lists, each once, in the order first listed.
fn required_names(map: &Map<String, Value>, pointer: &str) -> Result<Vec<String>, CompileError> {
    let Some(r) = map.get("required") else {
        return Ok(Vec::new());
    };
    match r {
        Value::Array(xs) if xs.iter().all(Value::is_string) => {
            let mut seen = HashSet::new();
            Ok(xs
                .iter()
                .filter_map(Value::as_str)
                .filter(|name| seen.insert(*name))
                .map(str::to_string)
                .collect())
        }
        // Draft 3 put `required: true` on the property itself; not part of later drafts.
        _ => Err(error(
            CompileErrorKind::Invalid,
            &format!("{pointer}/required"),
            "`required` must be an array of strings",
        )),
    }
}
