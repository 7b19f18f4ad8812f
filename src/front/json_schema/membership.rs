//! Membership and disjointness of shapes: whether a shape admits a JSON value (`enum`
//! filtered by the other keywords, `not` of a value) and whether `oneOf` branches exclude
//! each other, so `oneOf` can be lowered as `anyOf`.

use serde_json::Value;

use super::intersect::{meet, property_index};
use super::lower::string_automaton;
use super::numbers::{in_range, integers_between, Decimal};
use super::schema::{error, json_equal, Compiler, Recipe, TYPES};
use super::shape::{kind_of, Names, RefId, Shape, StringShape};
use crate::error::{CompileError, CompileErrorKind};
use crate::front::chars::Budget;
use crate::front::guard::guarded;
use crate::limits::LimitKind;

/// How many shape pairs one `disjoint` question may look at before answering "maybe not"
/// (recursive schemas and wide unions would otherwise make it exponential).
const DISJOINT_BUDGET: usize = 2_000;

/// Most states of each string automaton a `disjoint` question builds: the patterns that tell
/// `oneOf` branches apart are short (`^pkg:npm/.+@.+`); past it the answer is "maybe not".
const DISJOINT_STRING_STATES: usize = 256;

/// Do `[a_lo, a_hi]` and `[b_lo, b_hi]` fail to overlap?
fn counts_disjoint(a: (u64, Option<u64>), b: (u64, Option<u64>)) -> bool {
    a.1.is_some_and(|h| h < b.0) || b.1.is_some_and(|h| h < a.0)
}

impl Compiler<'_> {
    /// Does `shape` admit the value `v`? Exact for every constraint a shape holds (errors at
    /// `pointer`). Recursion: each level reads one level of `v` (held to the nesting limit
    /// when the schema was read), a branch, or one reference (at most
    /// [`Limits::nesting`](crate::Limits) of those nested), each guarded; a reference met
    /// again for the same value made no progress and admits nothing there.
    pub fn accepts(
        &mut self,
        shape: &Shape,
        v: &Value,
        pointer: &str,
    ) -> Result<bool, CompileError> {
        self.tick(pointer)?;
        guarded(|| self.accepts_step(shape, v, pointer))
    }

    /// [`accepts`](Self::accepts), or `Err` with the reference the answer depends on where
    /// that one is still being built and cannot be read again for the question (a recursion
    /// through the `oneOf` asking it, met again inside that reading).
    pub(super) fn accepts_if_known(
        &mut self,
        shape: &Shape,
        v: &Value,
        pointer: &str,
    ) -> Result<Result<bool, RefId>, CompileError> {
        let outer = self.undecided.replace(None);
        let out = self.accepts(shape, v, pointer);
        let undecided = std::mem::replace(&mut self.undecided, outer).flatten();
        // An answer resting on an unknown is unknown either way: `accepts` negates some of
        // its parts (a name a shape must not admit).
        Ok(match undecided {
            Some(r) => Err(r),
            None => Ok(out?),
        })
    }

    /// Does the `type` of the schema at `pointer` rule out `v`, whatever else it says? Read
    /// off the document for a schema still being built: a recursion through a `oneOf` asks
    /// whether an `enum` of strings meets an object's schema before that schema can be read
    /// again. A `type` its draft leaves unread (beside a `$ref`) rules nothing out.
    fn type_refuses(&self, pointer: &str, v: &Value) -> bool {
        let Some(map) = self.root.pointer(pointer).and_then(Value::as_object) else {
            return false;
        };
        let Some(types) = map.get("type").filter(|_| self.ref_alone(map).is_none()) else {
            return false;
        };
        let kind = kind_of(v);
        let admits = |t: &Value| match t.as_str() {
            Some("number") => kind == "integer" || kind == "number",
            Some(t) => t == kind || !TYPES.contains(&t),
            None => true,
        };
        match types {
            Value::Array(xs) => !xs.iter().any(admits),
            t => !admits(t),
        }
    }

    /// Does entry `r` admit `v`? A target still being built is read again (a recursive
    /// `enum`, see [`probe`](Self::probe)); a complement or an intersection waiting for one
    /// is answered from its parts.
    fn accepts_reference(
        &mut self,
        r: RefId,
        v: &Value,
        pointer: &str,
    ) -> Result<bool, CompileError> {
        let target = self.deref(r)?;
        let Shape::Ref(building) = *target else {
            return self.accepts(&target, v, pointer);
        };
        match self.refs[building].recipe {
            Recipe::Not(inner) => Ok(!self.accepts(&Shape::Ref(inner), v, pointer)?),
            Recipe::Both(a, b) => Ok(self.accepts(&Shape::Ref(a), v, pointer)?
                && self.accepts(&Shape::Ref(b), v, pointer)?),
            Recipe::Pointer(ref p) if self.type_refuses(p, v) => Ok(false),
            Recipe::Pointer(_) | Recipe::Fixed(_) => match self.probe(building)? {
                Some(probe) => self.accepts(&probe, v, pointer),
                None => match &mut self.undecided {
                    Some(undecided) => {
                        undecided.get_or_insert(building);
                        Ok(false)
                    }
                    None => Err(self.cycle_error(building)),
                },
            },
        }
    }

    // Long: one match over the shape kinds, each checking one JSON value against its keywords.
    fn accepts_step(
        &mut self,
        shape: &Shape,
        v: &Value,
        pointer: &str,
    ) -> Result<bool, CompileError> {
        Ok(match shape {
            Shape::Any => true,
            Shape::Never => false,
            Shape::Null => v.is_null(),
            Shape::Boolean => v.is_boolean(),
            Shape::Values(xs) => xs.iter().any(|x| json_equal(x, v)),
            Shape::Ref(r) => {
                let key = (*r, v as *const Value);
                if self.accepting.contains(&key) {
                    return Ok(false);
                }
                let what = "references checked against one value";
                self.within(LimitKind::Nesting, self.accepting.len() + 1, pointer, what)?;
                self.accepting.push(key);
                let out = self.accepts_reference(*r, v, pointer);
                self.accepting.pop();
                out?
            }
            Shape::AnyOf(xs) => {
                for x in xs {
                    if self.accepts(x, v, pointer)? {
                        return Ok(true);
                    }
                }
                false
            }
            Shape::Number(n) => match v {
                Value::Number(x) => {
                    let d = Decimal::from_json(x);
                    (!n.integer || d.is_integer())
                        && in_range(&d, n.lo.as_ref(), n.hi.as_ref())
                        && n.multiple.is_none_or(|s| s.divides(&d))
                        && !n.not_multiples.iter().any(|s| s.divides(&d))
                }
                _ => false,
            },
            Shape::String(s) => match v {
                Value::String(text) => {
                    let len = text.chars().count() as u64;
                    if len < s.min || s.max.is_some_and(|m| len > m) || s.exclude.contains(text) {
                        return Ok(false);
                    }
                    for c in &s.regexes {
                        self.tick(pointer)?;
                        if !self.matches(c, text)? {
                            return Ok(false);
                        }
                    }
                    for c in &s.forbidden {
                        self.tick(pointer)?;
                        if self.matches(c, text)? {
                            return Ok(false);
                        }
                    }
                    true
                }
                _ => false,
            },
            Shape::Array(a) => match v {
                Value::Array(xs) => {
                    let n = xs.len() as u64;
                    if n < a.min || a.max.is_some_and(|m| n > m) {
                        return Ok(false);
                    }
                    let mut witnessed = vec![false; a.witnesses.len()];
                    for (i, x) in xs.iter().enumerate() {
                        if !self.accepts(a.item(i), x, pointer)? {
                            return Ok(false);
                        }
                        for (seen, w) in witnessed.iter_mut().zip(&a.witnesses) {
                            if !*seen && i >= a.prefix.len() {
                                *seen = self.accepts(w, x, pointer)?;
                            }
                        }
                    }
                    if a.distinct().is_some() {
                        for (j, x) in xs.iter().enumerate() {
                            self.tick(pointer)?;
                            if xs[..j].iter().any(|y| json_equal(x, y)) {
                                return Ok(false);
                            }
                        }
                    }
                    witnessed.iter().all(|&seen| seen)
                }
                _ => false,
            },
            Shape::Object(o) => match v {
                Value::Object(map) => {
                    let n = map.len() as u64;
                    if n < o.min
                        || o.max.is_some_and(|m| n > m)
                        || !o.required.iter().all(|r| map.contains_key(r))
                    {
                        return Ok(false);
                    }
                    let index = property_index(o);
                    let mut witnessed = vec![false; o.witnesses.len()];
                    for (k, x) in map {
                        let sk = self.schema_in(o, &index, k)?;
                        if !self.accepts(&sk, x, pointer)? {
                            return Ok(false);
                        }
                        if o.witnesses.is_empty() || index.contains_key(k.as_str()) {
                            continue;
                        }
                        let mut matching = Vec::with_capacity(o.patterns.len());
                        for (p, _) in &o.patterns {
                            matching.push(p.matches(self, k)?);
                        }
                        for (seen, (names, w)) in witnessed.iter_mut().zip(&o.witnesses) {
                            let among = match names {
                                Names::Unmatched => !matching.contains(&true),
                                Names::Matching(i) => matching[*i],
                            };
                            if !*seen && among {
                                *seen = self.accepts(w, x, pointer)?;
                            }
                        }
                    }
                    witnessed.iter().all(|&seen| seen)
                }
                _ => false,
            },
        })
    }

    /// `oneOf` beside `siblings` (the shape of the schema's other keywords, which the result
    /// is met with) and within `outside` (what the value is known to be from outside the
    /// schema, see [`Compiler::build_knowing`]): each branch without the values of the
    /// branches it may overlap among the values all of them admit (those not proven
    /// [disjoint](Self::disjoint) from it),
    /// through their complements; when a complement is out of reach, an error, or with
    /// `lenient` the branches' union (`anyOf`) and a warning.
    ///
    /// Branches often leave to their siblings what tells them apart: `"required":
    /// ["kind"]` and `"type": "object"` beside `oneOf` branches that only give `kind` a
    /// `const` each. Alone, such branches overlap (`{}`, any string), and their complements
    /// made a grammar past two million expressions for four of them (o65414). Or they leave it
    /// to the object a dependency applies to, another part of an `allOf` or the schema around
    /// an `anyOf`: `outside`.
    pub fn one_of(
        &mut self,
        branches: Vec<Shape>,
        siblings: &Shape,
        outside: &[Shape],
        lossy: bool,
        pointer: &str,
    ) -> Result<Shape, CompileError> {
        let n = branches.len();
        let mut overlapping: Vec<Vec<usize>> = vec![Vec::new(); n];
        // Each branch met with the siblings, on first need (`None` where that fails).
        let mut within: Vec<Option<Option<Shape>>> = vec![None; n];
        for i in 0..n {
            for j in i + 1..n {
                let mut budget = DISJOINT_BUDGET;
                if self.disjoint(&branches[i], &branches[j], &mut budget, pointer)? {
                    continue;
                }
                let mut budget = DISJOINT_BUDGET;
                for k in [i, j] {
                    self.meet_siblings(&branches, k, siblings, outside, &mut within, pointer)?;
                }
                let apart = match (&within[i], &within[j]) {
                    (Some(Some(a)), Some(Some(b))) => {
                        untimed(self.disjoint(a, b, &mut budget, pointer))?.unwrap_or(false)
                    }
                    _ => false,
                };
                if !apart {
                    overlapping[i].push(j);
                    overlapping[j].push(i);
                }
            }
        }
        if lossy && overlapping.iter().any(|o| !o.is_empty()) {
            // Lenient dropped keywords of the branches: complements of what is left would
            // refuse too much.
            let message =
                "oneOf branches whose keywords were dropped may overlap; compiled as anyOf";
            self.tolerate(error(CompileErrorKind::Unsupported, pointer, message))?;
            return Ok(Shape::any_of(branches));
        }
        match self.exclusive(&branches, &overlapping, pointer) {
            Ok(shape) => Ok(shape),
            // Out of reach: a complement formwork cannot express, or too many branches.
            Err(e)
                if self.opts.lenient
                    && (e.kind() == CompileErrorKind::Unsupported
                        || e.limit().is_some_and(|l| l.kind == LimitKind::Alternatives)) =>
            {
                let message = format!("{}; compiled as anyOf", e.message());
                self.tolerate(error(CompileErrorKind::Unsupported, pointer, message))?;
                Ok(Shape::any_of(branches))
            }
            Err(e) => Err(e),
        }
    }

    /// Meets branch `i` with `siblings` and `outside` into `within[i]` unless done:
    /// `Some(None)` if they admit anything (the branch alone already decided) or a meeting
    /// fails for a reason other than time (an intersection out of reach, a limit); the branch
    /// is then not told apart this way.
    fn meet_siblings(
        &mut self,
        branches: &[Shape],
        i: usize,
        siblings: &Shape,
        outside: &[Shape],
        within: &mut [Option<Option<Shape>>],
        pointer: &str,
    ) -> Result<(), CompileError> {
        if within[i].is_some() {
            return Ok(());
        }
        let mut known = std::iter::once(siblings)
            .chain(outside)
            .filter(|s| !matches!(s, Shape::Any))
            .peekable();
        if known.peek().is_none() {
            within[i] = Some(None);
            return Ok(());
        }
        let mut met = branches[i].clone();
        for s in known {
            match untimed(self.meet(s, &met, pointer))? {
                Some(m) => met = m,
                None => {
                    within[i] = Some(None);
                    return Ok(());
                }
            }
        }
        within[i] = Some(Some(met));
        Ok(())
    }

    /// The union of `branches`, each without those it may overlap.
    fn exclusive(
        &mut self,
        branches: &[Shape],
        overlapping: &[Vec<usize>],
        pointer: &str,
    ) -> Result<Shape, CompileError> {
        let mut complements: Vec<Option<Shape>> = branches.iter().map(|_| None).collect();
        let mut out = Vec::with_capacity(branches.len());
        for (i, branch) in branches.iter().enumerate() {
            let mut only = branch.clone();
            for &j in &overlapping[i] {
                let complement = match complements[j].take() {
                    Some(c) => c,
                    None => self.complement(&branches[j], pointer).map_err(|e| {
                        let (a, b) = (i.min(j), i.max(j));
                        match e.kind() {
                            CompileErrorKind::Unsupported => error(
                                CompileErrorKind::Unsupported,
                                pointer,
                                format!(
                                    "oneOf branches {a} and {b} may both match a value, and {}",
                                    e.message()
                                ),
                            ),
                            _ => e,
                        }
                    })?,
                };
                only = self.meet(&only, &complement, pointer)?;
                complements[j] = Some(complement);
            }
            out.push(only);
        }
        Ok(Shape::any_of(out))
    }

    /// The values `s` admits, JSON-equal ones once, if there are at most `cap` of them; `None`
    /// if there are more or infinitely many (strings, arrays, objects, numbers other than
    /// integers between two bounds). For `uniqueItems`, whose items are told apart by value.
    pub fn finite_values(
        &mut self,
        s: &Shape,
        cap: usize,
        pointer: &str,
    ) -> Result<Option<Vec<Value>>, CompileError> {
        let mut out = Vec::new();
        let mut followed = Vec::new();
        let all = self.collect_values(s, cap, pointer, &mut out, &mut followed)?;
        Ok(all.then_some(out))
    }

    /// Adds the values of `s` to `out` (false if they are more than `cap` together, or not
    /// finitely many). Recursion: one guarded level per branch or reference followed, each
    /// reference once (met again, its values are already being collected).
    fn collect_values(
        &mut self,
        s: &Shape,
        cap: usize,
        pointer: &str,
        out: &mut Vec<Value>,
        followed: &mut Vec<RefId>,
    ) -> Result<bool, CompileError> {
        self.tick(pointer)?;
        guarded(|| {
            let found = match s {
                Shape::Never => Vec::new(),
                Shape::Null => vec![Value::Null],
                Shape::Boolean => vec![Value::Bool(false), Value::Bool(true)],
                Shape::Values(vs) => vs.clone(),
                Shape::Number(n) if n.integer => {
                    let Some(ints) = integers_between(n.lo.as_ref(), n.hi.as_ref(), cap as u64)
                    else {
                        return Ok(false);
                    };
                    let mut kept = Vec::new();
                    for i in ints {
                        // Steps (`multipleOf`) leave some out.
                        if self.accepts(s, &Value::from(i), pointer)? {
                            kept.push(Value::from(i));
                        }
                    }
                    kept
                }
                Shape::Ref(r) if followed.contains(r) => Vec::new(),
                Shape::Ref(r) => {
                    followed.push(*r);
                    let target = self.deref(*r)?;
                    if let Shape::Ref(_) = *target {
                        // Still being built: its values are not known yet.
                        return Ok(false);
                    }
                    return self.collect_values(&target, cap, pointer, out, followed);
                }
                Shape::AnyOf(xs) => {
                    for x in xs {
                        if !self.collect_values(x, cap, pointer, out, followed)? {
                            return Ok(false);
                        }
                    }
                    Vec::new()
                }
                Shape::Any
                | Shape::Number(_)
                | Shape::String(_)
                | Shape::Array(_)
                | Shape::Object(_) => return Ok(false),
            };
            for v in found {
                if out.iter().any(|x| json_equal(x, &v)) {
                    continue;
                }
                if out.len() == cap {
                    return Ok(false);
                }
                out.push(v);
            }
            Ok(true)
        })
    }

    /// True only if no value matches both (false when unsure). Recursion: one level per unit
    /// of `budget` (a few thousand), each guarded.
    fn disjoint(
        &mut self,
        a: &Shape,
        b: &Shape,
        budget: &mut usize,
        pointer: &str,
    ) -> Result<bool, CompileError> {
        if *budget == 0 {
            return Ok(false);
        }
        *budget -= 1;
        self.tick(pointer)?;
        guarded(|| self.disjoint_step(a, b, budget, pointer))
    }

    // Long: one match over pairs of shape kinds; each arm decides one pair.
    fn disjoint_step(
        &mut self,
        a: &Shape,
        b: &Shape,
        budget: &mut usize,
        pointer: &str,
    ) -> Result<bool, CompileError> {
        Ok(match (a, b) {
            (Shape::Never, _) | (_, Shape::Never) => true,
            (Shape::Values(xs), other) | (other, Shape::Values(xs)) => {
                for x in xs {
                    if self.accepts_if_known(other, x, pointer)? != Ok(false) {
                        return Ok(false);
                    }
                }
                true
            }
            (Shape::Any, _) | (_, Shape::Any) => false,
            (Shape::Ref(r), other) | (other, Shape::Ref(r)) => {
                let target = self.deref(*r)?;
                match *target {
                    // A reference still being read (recursion through the `oneOf` itself):
                    // its schema read again for the question, or unknown.
                    Shape::Ref(building) => match self.probe(building)? {
                        Some(probe) => self.disjoint(&probe, other, budget, pointer)?,
                        None => false,
                    },
                    _ => self.disjoint(&target, other, budget, pointer)?,
                }
            }
            (Shape::AnyOf(xs), other) | (other, Shape::AnyOf(xs)) => {
                for x in xs {
                    if !self.disjoint(x, other, budget, pointer)? {
                        return Ok(false);
                    }
                }
                true
            }
            (Shape::Null, Shape::Null) | (Shape::Boolean, Shape::Boolean) => false,
            // Empty intervals, and steps whose multiples the other side excludes.
            (Shape::Number(x), Shape::Number(y)) => {
                meet(x, y).is_some_and(|both| both.normalized().is_none())
            }
            (Shape::String(x), Shape::String(y)) => {
                counts_disjoint((x.min, x.max), (y.min, y.max)) || self.patterns_disjoint(x, y)
            }
            (Shape::Array(x), Shape::Array(y)) => {
                if counts_disjoint((x.min, x.max), (y.min, y.max)) {
                    return Ok(true);
                }
                // An item both must have, at a position where the item shapes cannot meet.
                let both = x
                    .min
                    .max(y.min)
                    .min(x.prefix.len().max(y.prefix.len()) as u64 + 1);
                for i in 0..both as usize {
                    if self.disjoint(x.item(i), y.item(i), budget, pointer)? {
                        return Ok(true);
                    }
                }
                false
            }
            (Shape::Object(x), Shape::Object(y)) => {
                if counts_disjoint((x.min, x.max), (y.min, y.max)) {
                    return Ok(true);
                }
                // A property one side requires whose value the other side cannot accept there
                // (a discriminator such as `"kind": {"const": "circle"}`).
                let (xi, yi) = (property_index(x), property_index(y));
                for ((p, pi), (q, qi)) in [((x, &xi), (y, &yi)), ((y, &yi), (x, &xi))] {
                    for r in &p.required {
                        let (sp, sq) = (self.schema_in(p, pi, r)?, self.schema_in(q, qi, r)?);
                        if self.disjoint(&sp, &sq, budget, pointer)? {
                            return Ok(true);
                        }
                    }
                }
                false
            }
            (x, y) => kind_name(x) != kind_name(y),
        })
    }

    /// True only if the strings of `x` and `y` have no string in common by their regexes
    /// (`pattern`, `format`): `oneOf` branches told apart by an id's prefix (`^pkg:cargo/`,
    /// `^pkg:npm/`) were each intersected with the complements of the others, a grammar
    /// ~100 times the size of their union. False when either automaton is out of budget
    /// (a deadline that passed meanwhile is caught at the next tick).
    fn patterns_disjoint(&self, x: &StringShape, y: &StringShape) -> bool {
        if x.regexes.is_empty() && y.regexes.is_empty() {
            return false;
        }
        let budget = Budget {
            max_states: DISJOINT_STRING_STATES,
            deadline: self.deadline,
        };
        let both = string_automaton(x, &budget).and_then(|a| {
            let b = string_automaton(y, &budget)?;
            a.intersect(&b, &budget).map_err(|e| (String::new(), e))
        });
        both.is_ok_and(|d| d.is_empty())
    }
}

/// `result`, or `None` if it failed for a reason other than time (a question that may go
/// unanswered: the shapes met for it are not kept).
fn untimed<T>(result: Result<T, CompileError>) -> Result<Option<T>, CompileError> {
    match result {
        Ok(x) => Ok(Some(x)),
        Err(e) if e.limit().is_some_and(|l| l.kind == LimitKind::CompileTime) => Err(e),
        Err(_) => Ok(None),
    }
}

/// The JSON type a single-type shape describes.
fn kind_name(s: &Shape) -> &'static str {
    match s {
        Shape::Null => "null",
        Shape::Boolean => "boolean",
        Shape::Number(_) => "number",
        Shape::String(_) => "string",
        Shape::Array(_) => "array",
        Shape::Object(_) => "object",
        Shape::Values(v) => v.first().map_or("", kind_of),
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::front::json_schema::{compile_schema_within, JsonSchemaOptions};
    use crate::limits::{Deadline, Limits};

    /// Expressions and rules of the grammar of `schema`.
    fn grammar_size(schema: &Value) -> usize {
        let (deadline, limits) = (Deadline::never(), Limits::new());
        let g = compile_schema_within(schema, &JsonSchemaOptions::new(), &limits, &deadline)
            .unwrap()
            .grammar;
        g.exprs().len() + g.rules().len()
    }

    /// `kind` of objects, one per id pattern, in `kind` of union (`oneOf` or `anyOf`).
    fn packages(kind: &str, patterns: &[&str]) -> Value {
        let branches: Vec<Value> = patterns
            .iter()
            .map(|p| {
                json!({"type": "object", "additionalProperties": false, "required": ["id"],
                    "properties": {"id": {"type": "string", "pattern": p}}})
            })
            .collect();
        json!({ kind: branches })
    }

    /// Branches that leave to their siblings what tells them apart (`required` and `type`
    /// beside `oneOf`, each branch giving the tag one `const`) are disjoint among the values
    /// the siblings admit: the `oneOf` is their union, the grammar of the `anyOf`.
    #[test]
    fn branches_told_apart_by_their_siblings_are_a_union() {
        let tagged = |kind: &str, required: Value| {
            let branches: Vec<Value> = ["a", "b", "c", "d"]
                .iter()
                .map(|tag| {
                    json!({"properties": {"tag": {"const": tag},
                        "body": {"type": "object", "properties": {*tag: {"type": "string"}}}}})
                })
                .collect();
            json!({"type": "object", "required": required, kind: branches})
        };
        let union = grammar_size(&tagged("anyOf", json!(["tag"])));
        assert_eq!(grammar_size(&tagged("oneOf", json!(["tag"]))), union);
    }

    /// Branches told apart by their id patterns only are disjoint: the `oneOf` is their
    /// union, the grammar of the `anyOf`. Patterns that overlap (`^pkg:` takes every id of
    /// `^pkg:npm/`) keep the complements, a larger grammar.
    #[test]
    fn branches_with_disjoint_patterns_are_a_union() {
        let ids = [
            "^pkg:cargo/.+@.+",
            "^pkg:npm/.+@.+",
            "^pkg:pypi/.+@.+",
            "^pkg:gem/.+",
        ];
        let union = grammar_size(&packages("anyOf", &ids));
        assert_eq!(grammar_size(&packages("oneOf", &ids)), union);
        let overlapping = ["^pkg:", "^pkg:npm/.+@.+", "^pkg:pypi/.+@.+", "^pkg:gem/.+"];
        let overlapping_union = grammar_size(&packages("anyOf", &overlapping));
        assert!(
            grammar_size(&packages("oneOf", &overlapping)) > overlapping_union,
            "overlapping branches need their complements"
        );
    }
}
