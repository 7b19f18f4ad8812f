//! Intersection of shapes (`allOf`, sibling keywords), with the placement of the witnesses
//! `contains` and `minProperties`-style counts require once two objects or arrays meet.

use foldhash::{HashMap, HashMapExt, HashSet};
use std::borrow::Cow;
use std::rc::Rc;

use super::complement::MAX_COMPLEMENT_BRANCHES;
use super::multiples::step_too_large;
use super::numbers::Bound;
use super::schema::{over, Compiler};
use super::shape::{
    ArrayShape, NamePattern, Names, NumberShape, ObjectShape, RefId, RegexConstraint, Shape,
    StringShape, MAX_NAME_PATTERNS, MAX_WITNESSES,
};
use crate::error::CompileError;
use crate::front::guard::guarded;
use crate::front::regex::Utf8;
use crate::ir::recognizer::{Recognizer, Terminal};
use crate::ir::GrammarBuilder;
use crate::limits::LimitKind;

fn max_lo(a: &Option<Bound>, b: &Option<Bound>) -> Option<Bound> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if x.value > y.value || (x.value == y.value && x.strict) {
            x.clone()
        } else {
            y.clone()
        }),
        (x, y) => x.clone().or_else(|| y.clone()),
    }
}

fn min_hi(a: &Option<Bound>, b: &Option<Bound>) -> Option<Bound> {
    match (a, b) {
        (Some(x), Some(y)) => Some(if x.value < y.value || (x.value == y.value && x.strict) {
            x.clone()
        } else {
            y.clone()
        }),
        (x, y) => x.clone().or_else(|| y.clone()),
    }
}

fn min_opt(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// Where a witness of an object or array is once it meets another one.
#[derive(Clone)]
enum WitnessAt {
    /// On this property (item) of the other side's, with a value of this shape.
    Declared(Place, Shape),
    /// Still undeclared (past both prefixes), among these names, with a value of this shape.
    Undeclared(Names, Shape),
}

/// A property by name, or an item by position.
#[derive(Clone)]
enum Place {
    Property(String),
    Item(usize),
}

/// The numbers of both shapes, not normalized; `None` if the least common multiple of their
/// steps outgrows a `u64`.
pub(super) fn meet(x: &NumberShape, y: &NumberShape) -> Option<NumberShape> {
    let multiple = match (x.multiple, y.multiple) {
        (Some(a), Some(b)) => Some(a.lcm(b)?),
        (a, b) => a.or(b),
    };
    Some(NumberShape {
        integer: x.integer || y.integer,
        lo: max_lo(&x.lo, &y.lo),
        hi: min_hi(&x.hi, &y.hi),
        multiple,
        not_multiples: x
            .not_multiples
            .iter()
            .chain(&y.not_multiples)
            .copied()
            .collect(),
        steps_pointer: x.steps_pointer.clone().or_else(|| y.steps_pointer.clone()),
    })
}

/// Where each declared property of `o` is in `o.properties`, for lookups by name that would
/// otherwise scan them all (objects with many properties, intersected or checked against
/// many values).
pub(crate) fn property_index(o: &ObjectShape) -> HashMap<&str, usize> {
    let mut index = HashMap::with_capacity(o.properties.len());
    for (i, (k, _)) in o.properties.iter().enumerate() {
        index.entry(k.as_str()).or_insert(i);
    }
    index
}

impl Compiler<'_> {
    /// Does the decoded string `text` match the constraint's regex? (Exact: the reference
    /// recognizer on the regex's own grammar, built within the compilation's limits.) One byte
    /// costs up to the size of that grammar (45 ms for a 45 KB alternation under a star), so
    /// the deadline is read at every byte rather than ticked.
    pub(crate) fn matches(&self, c: &RegexConstraint, text: &str) -> Result<bool, CompileError> {
        let rec = self.recognizer(c)?;
        let mut chart = rec.start();
        for b in text.bytes() {
            self.deadline
                .check()
                .map_err(|e| over(e, &c.pointer, "matching a value against a pattern"))?;
            if !chart.push(&rec, Terminal::Byte(b)) {
                return Ok(false);
            }
        }
        Ok(chart.is_accepting(&rec))
    }

    /// The recognizer of `c`'s regex, built on its first use.
    fn recognizer(&self, c: &RegexConstraint) -> Result<Rc<Recognizer>, CompileError> {
        let (is_format, source) = c.identity();
        if let Some(rec) = self.recognizers.borrow()[is_format as usize].get(source) {
            return Ok(rec.clone());
        }
        let at = || crate::Location::JsonPointer(c.pointer.clone());
        let mut g = GrammarBuilder::with_limits(self.limits);
        let e = c
            .regex
            .lower(&c.source, &mut g, &mut Utf8)
            .map_err(|e| e.or_at(at()))?;
        let start = g.rule("start");
        g.define(start, e).map_err(|e| e.or_at(at()))?;
        let grammar = g.finish(start).map_err(|e| e.or_at(at()))?;
        let rec = Rc::new(Recognizer::try_new(&grammar, self.limits).map_err(|e| e.or_at(at()))?);
        self.recognizers.borrow_mut()[is_format as usize].insert(source.to_string(), rec.clone());
        Ok(rec)
    }

    /// The shape the property `key` of an object of shape `o` must have, `index` being `o`'s
    /// [`property_index`]: borrowed from `o` unless patterns make a new one (a copy is as
    /// deep as the shape); `Never` for a name `o`'s `propertyNames` refuses.
    pub fn schema_in<'o>(
        &mut self,
        o: &'o ObjectShape,
        index: &HashMap<&str, usize>,
        key: &str,
    ) -> Result<Cow<'o, Shape>, CompileError> {
        if !self.names_admit(o, key)? {
            return Ok(Cow::Owned(Shape::Never));
        }
        if let Some(&i) = index.get(key) {
            return Ok(Cow::Borrowed(&o.properties[i].1));
        }
        let mut matching = vec![false; o.patterns.len()];
        for (m, (p, _)) in matching.iter_mut().zip(&o.patterns) {
            *m = p.matches(self, key)?;
        }
        self.undeclared_shape(o, &matching)
    }

    /// The shape of an undeclared name of `o` matching the patterns marked in `matching`:
    /// all their shapes, or the additional shape if it matches none.
    pub fn undeclared_shape<'o>(
        &mut self,
        o: &'o ObjectShape,
        matching: &[bool],
    ) -> Result<Cow<'o, Shape>, CompileError> {
        let mut shape: Option<Shape> = None;
        for ((p, s), _) in o.patterns.iter().zip(matching).filter(|(_, &m)| m) {
            shape = Some(match shape {
                Some(both) => self.intersect(&both, s, p.pointer())?,
                None => self.copy(s, p.pointer())?,
            });
        }
        Ok(match shape {
            Some(s) => Cow::Owned(s),
            None => Cow::Borrowed(&o.additional),
        })
    }

    /// Counts `shapes` more made by intersecting: a `Limit` error at `pointer` once the
    /// compilation has made more than [`Limits::grammar_size`](crate::Limits) (each would
    /// become at least one expression of the grammar, were it kept).
    fn made(&mut self, shapes: u64, pointer: &str) -> Result<(), CompileError> {
        self.shapes_made = self.shapes_made.saturating_add(shapes);
        let what = "shapes made by intersections (`allOf`, `not`, `if`, overlapping `oneOf`)";
        self.within(
            LimitKind::GrammarSize,
            self.shapes_made as usize,
            pointer,
            what,
        )
    }

    /// A copy of `s`, counted by [`made`](Self::made).
    pub(super) fn copy(&mut self, s: &Shape, pointer: &str) -> Result<Shape, CompileError> {
        self.made(s.size(), pointer)?;
        Ok(s.clone())
    }

    /// The values both shapes admit. Recursion: at most [`Limits::nesting`](crate::Limits)
    /// levels (and the references resolved on the way, see [`Compiler::build`]), each guarded.
    pub fn intersect(
        &mut self,
        a: &Shape,
        b: &Shape,
        pointer: &str,
    ) -> Result<Shape, CompileError> {
        // Inlining a recursive reference into a shape that contains it could go on forever.
        let what = "intersection of schemas (recursive ones inlined)";
        self.within(LimitKind::Nesting, self.intersect_depth + 1, pointer, what)?;
        self.tick(pointer)?;
        self.made(1, pointer)?;
        self.intersect_depth += 1;
        let out = guarded(|| self.intersect_inner(a, b, pointer));
        self.intersect_depth -= 1;
        out.map(Shape::normalized)
    }

    /// `other` and reference `r`: the target inlined, or where the target is still being
    /// built (recursion inside it), a lazy table entry for both (resolved when the target is).
    fn meet_reference(
        &mut self,
        r: RefId,
        other: &Shape,
        pointer: &str,
        reference_first: bool,
    ) -> Result<Shape, CompileError> {
        let target = self.deref(r)?;
        if let Shape::Ref(building) = *target {
            let fixed = self.fixed_id(other, pointer)?;
            return Ok(Shape::Ref(self.both_id(building, fixed, pointer)?));
        }
        match reference_first {
            true => self.intersect(&target, other, pointer),
            false => self.intersect(other, &target, pointer),
        }
    }

    // Long: one match over pairs of shape kinds; each arm is the intersection of one pair.
    fn intersect_inner(
        &mut self,
        a: &Shape,
        b: &Shape,
        pointer: &str,
    ) -> Result<Shape, CompileError> {
        Ok(match (a, b) {
            (Shape::Any, x) | (x, Shape::Any) => self.copy(x, pointer)?,
            (Shape::Never, _) | (_, Shape::Never) => Shape::Never,
            (Shape::Ref(x), Shape::Ref(y)) if x == y => Shape::Ref(*x),
            (Shape::Ref(x), Shape::Ref(y)) => Shape::Ref(self.both_id(*x, *y, pointer)?),
            (Shape::Values(xs), other) | (other, Shape::Values(xs)) => {
                let mut kept = Vec::new();
                for v in xs {
                    match self.accepts_if_known(other, v, pointer)? {
                        Ok(true) => {
                            self.made(1, pointer)?;
                            kept.push(v.clone());
                        }
                        Ok(false) => {}
                        Err(building) => match other {
                            // A reference being built decides: met when it is built.
                            Shape::Ref(r) => {
                                let values = Shape::Values(xs.clone());
                                return self.meet_reference(*r, &values, pointer, true);
                            }
                            _ => return Err(self.cycle_error(building)),
                        },
                    }
                }
                if kept.is_empty() {
                    Shape::Never
                } else {
                    Shape::Values(kept)
                }
            }
            // Operands keep their order, so the first conflicting keyword is reported second.
            (Shape::Ref(r), other) => self.meet_reference(*r, other, pointer, true)?,
            (other, Shape::Ref(r)) => self.meet_reference(*r, other, pointer, false)?,
            (Shape::AnyOf(xs), other) => {
                let mut out = Vec::new();
                for x in xs {
                    out.push(self.intersect(x, other, pointer)?);
                }
                Shape::any_of(out)
            }
            (other, Shape::AnyOf(ys)) => {
                let mut out = Vec::new();
                for y in ys {
                    out.push(self.intersect(other, y, pointer)?);
                }
                Shape::any_of(out)
            }
            (Shape::Null, Shape::Null) => Shape::Null,
            (Shape::Boolean, Shape::Boolean) => Shape::Boolean,
            (Shape::Number(x), Shape::Number(y)) => match meet(x, y) {
                Some(both) => Shape::number(both),
                None => {
                    let at = y.steps_pointer.as_deref().unwrap_or(pointer);
                    let max = self.limits.get(LimitKind::AutomatonStates);
                    return Err(step_too_large(at, max));
                }
            },
            (Shape::String(x), Shape::String(y)) => {
                let mut regexes = x.regexes.clone();
                for r in &y.regexes {
                    if !regexes.iter().any(|q| q.identity() == r.identity()) {
                        regexes.push(r.clone());
                    }
                }
                let mut forbidden = x.forbidden.clone();
                for r in &y.forbidden {
                    if !forbidden.iter().any(|q| q.identity() == r.identity()) {
                        forbidden.push(r.clone());
                    }
                }
                Shape::String(StringShape {
                    min: x.min.max(y.min),
                    max: min_opt(x.max, y.max),
                    regexes,
                    forbidden,
                    length_pointer: x
                        .length_pointer
                        .clone()
                        .or_else(|| y.length_pointer.clone()),
                    exclude: x.exclude.union(&y.exclude).cloned().collect(),
                    exclude_pointer: x
                        .exclude_pointer
                        .clone()
                        .or_else(|| y.exclude_pointer.clone()),
                })
            }
            (Shape::Array(x), Shape::Array(y)) => {
                let n = x.prefix.len().max(y.prefix.len());
                let mut prefix = Vec::with_capacity(n);
                for i in 0..n {
                    prefix.push(self.intersect(x.item(i), y.item(i), pointer)?);
                }
                let both = ArrayShape {
                    prefix,
                    items: Box::new(self.intersect(&x.items, &y.items, pointer)?),
                    min: x.min.max(y.min),
                    max: min_opt(x.max, y.max),
                    witnesses: Vec::new(),
                    unique: x.unique.clone().or_else(|| y.unique.clone()),
                };
                self.place_item_witnesses(both, x, y, pointer)?
            }
            (Shape::Object(x), Shape::Object(y)) => {
                let (both, names) = self.merge_objects(x, y, pointer)?;
                self.place_witnesses(both, x, y, &names, pointer)?
            }
            _ => Shape::Never,
        })
    }

    /// The objects both admit, but for their witnesses (see [`place_witnesses`](Self::place_witnesses)),
    /// and where each side's undeclared names are in the merge.
    fn merge_objects(
        &mut self,
        x: &ObjectShape,
        y: &ObjectShape,
        pointer: &str,
    ) -> Result<(ObjectShape, [SideNames; 2]), CompileError> {
        let mut properties = Vec::new();
        let (xi, yi) = (property_index(x), property_index(y));
        let mut seen = HashSet::default();
        let names = x.properties.iter().chain(&y.properties).map(|(k, _)| k);
        for k in names {
            if !seen.insert(k.as_str()) {
                continue;
            }
            let (sx, sy) = (self.schema_in(x, &xi, k)?, self.schema_in(y, &yi, k)?);
            let s = self.intersect(&sx, &sy, pointer)?;
            properties.push((k.clone(), s));
        }
        let in_x: HashSet<&String> = x.required.iter().collect();
        let mut required = x.required.clone();
        required.extend(y.required.iter().filter(|r| !in_x.contains(r)).cloned());
        let merged = self.merge_patterns(x, y, pointer)?;
        let both = ObjectShape {
            properties,
            patterns: merged.patterns,
            required,
            additional: Box::new(merged.additional),
            min: x.min.max(y.min),
            max: min_opt(x.max, y.max),
            witnesses: Vec::new(),
            names: match (&x.names, &y.names) {
                (Some(a), Some(b)) => Some(Box::new(self.intersect(a, b, pointer)?)),
                (a, b) => a.clone().or_else(|| b.clone()),
            },
            pointer: x.pointer.clone(),
        };
        Ok((both, merged.sides))
    }

    /// The patterns and additional shape of the merge of `x` and `y`, where a name neither
    /// declares takes from each side the shapes of the patterns it matches there, or that
    /// side's additional shape if it matches none; and where each side's undeclared names are
    /// among the merge's.
    ///
    /// With patterns on one side only, they are the merge's, each narrowed to the other side's
    /// additional shape. With patterns on both, the merge has both sides' (a pattern both
    /// have once, with both shapes) and, for a side whose additional shape says something (or
    /// is where a witness of it is), a pattern of the names matching none of that side's
    /// ([`NamePattern::NoneOf`]) with that shape: a name matching patterns of one side only
    /// gets the other side's additional shape through it. Every name then matches some
    /// pattern unless both additional shapes are `Any`, so the merge's additional shape is
    /// `Any`. Past [`MAX_NAME_PATTERNS`], unsupported (lenient: as if `y` had no patterns).
    // Long: the one-sided cases, the shared patterns, then one `NoneOf` per side.
    fn merge_patterns(
        &mut self,
        x: &ObjectShape,
        y: &ObjectShape,
        pointer: &str,
    ) -> Result<MergedPatterns, CompileError> {
        let (nx, ny) = (x.patterns.len(), y.patterns.len());
        if nx == 0 || ny == 0 {
            let additional = self.intersect(&x.additional, &y.additional, pointer)?;
            return Ok(match nx == 0 {
                true => MergedPatterns {
                    patterns: self.patterns_within(&y.patterns, &x.additional)?,
                    additional,
                    sides: [SideNames::dropped(0, ny), SideNames::kept(ny)],
                },
                false => MergedPatterns {
                    patterns: self.patterns_within(&x.patterns, &y.additional)?,
                    additional,
                    sides: [SideNames::kept(nx), SideNames::dropped(0, nx)],
                },
            });
        }
        let mut patterns: Vec<(NamePattern, Shape)> = x.patterns.clone();
        let mut y_at = Vec::with_capacity(ny);
        for (p, s) in &y.patterns {
            match patterns[..nx].iter().position(|(q, _)| q.same_names(p)) {
                Some(i) => {
                    patterns[i].1 = self.intersect(&patterns[i].1, s, p.pointer())?;
                    y_at.push(i);
                }
                None => {
                    y_at.push(patterns.len());
                    patterns.push((p.clone(), s.clone()));
                }
            }
        }
        let mut sides = [
            SideNames::kept(nx),
            SideNames {
                patterns: y_at.iter().map(|&i| vec![Names::Matching(i)]).collect(),
                unmatched: vec![Names::Unmatched],
            },
        ];
        // The same patterns on both sides: the same names match none of them.
        if patterns.len() == nx && (0..nx).all(|i| y_at.contains(&i)) {
            let additional = self.intersect(&x.additional, &y.additional, pointer)?;
            return Ok(MergedPatterns {
                patterns,
                additional,
                sides,
            });
        }
        for (side, o) in sides.iter_mut().zip([x, y]) {
            let witnessed = o.witnesses.iter().any(|(n, _)| *n == Names::Unmatched);
            side.unmatched = Vec::new();
            if matches!(*o.additional, Shape::Any) && !witnessed {
                continue;
            }
            side.unmatched.push(Names::Matching(patterns.len()));
            let none_of = NamePattern::NoneOf {
                parts: o.patterns.iter().map(|(p, _)| p.clone()).collect(),
                pointer: o.pointer.clone(),
            };
            patterns.push((none_of, (*o.additional).clone()));
        }
        if patterns.len() > MAX_NAME_PATTERNS {
            self.unsupported(
                &y.pointer,
                format!("`patternProperties` on both sides of an intersection, more than {MAX_NAME_PATTERNS} patterns together"),
            )?;
            return Ok(MergedPatterns {
                patterns: self.patterns_within(&x.patterns, &y.additional)?,
                additional: self.intersect(&x.additional, &y.additional, pointer)?,
                sides: [SideNames::kept(nx), SideNames::dropped(ny, nx)],
            });
        }
        Ok(MergedPatterns {
            patterns,
            additional: Shape::Any,
            sides,
        })
    }

    /// `both` (the merge of objects `x` and `y`, `sides` where their undeclared names are
    /// in it) with their witnesses placed: a witness of `x` is a property `x` does not
    /// declare, so in `both` it is one of the names only `y` declares (required there, with a
    /// value of the witness too) or still undeclared, among the merge's names that were its
    /// names in `x`. One branch per choice of places.
    fn place_witnesses(
        &mut self,
        both: ObjectShape,
        x: &ObjectShape,
        y: &ObjectShape,
        sides: &[SideNames; 2],
        pointer: &str,
    ) -> Result<Shape, CompileError> {
        if x.witnesses.is_empty() && y.witnesses.is_empty() {
            return Ok(Shape::object(both).normalized());
        }
        let mut choices: Vec<Vec<WitnessAt>> = Vec::new();
        for (owner, other, side) in [(x, y, &sides[0]), (y, x, &sides[1])] {
            for (names, w) in &owner.witnesses {
                choices.push(self.witness_places(owner, other, side, *names, w)?);
            }
        }
        self.each_placement(&choices, pointer, |c, placed| {
            c.made(both.size(), pointer)?;
            let mut o = both.clone();
            for at in placed {
                match at {
                    WitnessAt::Declared(Place::Property(k), w) => {
                        if !o.required.contains(k) {
                            o.required.push(k.clone());
                        }
                        if let Some(i) = o.properties.iter().position(|(n, _)| n == k) {
                            let value = c.intersect(&o.properties[i].1, w, pointer)?;
                            o.properties[i].1 = value;
                        }
                    }
                    WitnessAt::Declared(Place::Item(_), _) => {}
                    WitnessAt::Undeclared(names, w) => o.witnesses.push((*names, w.clone())),
                }
            }
            let all = std::mem::take(&mut o.witnesses);
            o.witnesses = c.fewer_witnesses(all, pointer)?;
            Ok(Shape::object(o).normalized())
        })
    }

    /// `both` (the merge of arrays `x` and `y`) with their witnesses placed: a witness of `x`
    /// is an item past `x`'s prefix, so in `both` it is at one of the positions only `y`'s
    /// prefix has (which then has a value of the witness too, and the array that item), or
    /// past both prefixes. One branch per choice of places, as for objects.
    fn place_item_witnesses(
        &mut self,
        both: ArrayShape,
        x: &ArrayShape,
        y: &ArrayShape,
        pointer: &str,
    ) -> Result<Shape, CompileError> {
        if x.witnesses.is_empty() && y.witnesses.is_empty() {
            return Ok(Shape::Array(both).normalized());
        }
        let width = both.prefix.len();
        let choices: Vec<Vec<WitnessAt>> = [x, y]
            .into_iter()
            .flat_map(|a| {
                a.witnesses.iter().map(move |w| {
                    (a.prefix.len()..width)
                        .map(|i| WitnessAt::Declared(Place::Item(i), w.clone()))
                        .chain([WitnessAt::Undeclared(Names::Unmatched, w.clone())])
                        .collect()
                })
            })
            .collect();
        self.each_placement(&choices, pointer, |c, placed| {
            c.made(both.size(), pointer)?;
            let mut a = both.clone();
            let mut past = Vec::new();
            for at in placed {
                match at {
                    WitnessAt::Declared(Place::Item(i), w) => {
                        a.prefix[*i] = c.intersect(&a.prefix[*i], w, pointer)?;
                        a.min = a.min.max(*i as u64 + 1);
                    }
                    WitnessAt::Declared(Place::Property(_), _) => {}
                    WitnessAt::Undeclared(names, w) => past.push((*names, w.clone())),
                }
            }
            let fewer = c.fewer_witnesses(past, pointer)?;
            a.witnesses = fewer.into_iter().map(|(_, w)| w).collect();
            Ok(Shape::Array(a).normalized())
        })
    }

    /// `witnesses` without those another one implies (a value of any shape among the same
    /// names, beside another witness there); past [`MAX_WITNESSES`] unsupported (lenient: the
    /// first ones, which admits more).
    fn fewer_witnesses(
        &mut self,
        mut witnesses: Vec<(Names, Shape)>,
        pointer: &str,
    ) -> Result<Vec<(Names, Shape)>, CompileError> {
        let mut i = 0;
        while i < witnesses.len() {
            let (names, w) = &witnesses[i];
            let implied = matches!(w, Shape::Any)
                && witnesses
                    .iter()
                    .enumerate()
                    .any(|(j, (n, _))| j != i && n == names);
            match implied {
                true => {
                    witnesses.remove(i);
                }
                false => i += 1,
            }
        }
        if witnesses.len() > MAX_WITNESSES {
            self.unsupported(
                pointer,
                format!("more than {MAX_WITNESSES} witnesses in one object or array (complements of `additionalProperties`, `patternProperties` or `items` meeting)"),
            )?;
            witnesses.truncate(MAX_WITNESSES);
        }
        Ok(witnesses)
    }

    /// The union of `make` over every choice of one place per witness (`choices`: each
    /// witness's places), within [`MAX_COMPLEMENT_BRANCHES`].
    fn each_placement(
        &mut self,
        choices: &[Vec<WitnessAt>],
        pointer: &str,
        mut make: impl FnMut(&mut Self, &[&WitnessAt]) -> Result<Shape, CompileError>,
    ) -> Result<Shape, CompileError> {
        let total = choices
            .iter()
            .try_fold(1usize, |n, c| n.checked_mul(c.len()))
            .unwrap_or(usize::MAX);
        let max = MAX_COMPLEMENT_BRANCHES.min(self.limits.get(LimitKind::Alternatives) as usize);
        if total > max {
            let exceeded = crate::limits::LimitExceeded {
                kind: LimitKind::Alternatives,
                value: total as u64,
                max: max as u64,
            };
            return Err(over(exceeded, pointer, "the places of witnesses"));
        }
        let mut out = Vec::with_capacity(total);
        for mut code in 0..total {
            self.tick(pointer)?;
            let mut placed = Vec::with_capacity(choices.len());
            for c in choices {
                placed.push(&c[code % c.len()]);
                code /= c.len();
            }
            out.push(make(self, &placed)?);
        }
        Ok(Shape::any_of(out))
    }

    /// Where a witness of `owner` among `names` may be once `owner` meets `other` (`side`:
    /// where `owner`'s undeclared names are in the merge).
    fn witness_places(
        &mut self,
        owner: &ObjectShape,
        other: &ObjectShape,
        side: &SideNames,
        names: Names,
        w: &Shape,
    ) -> Result<Vec<WitnessAt>, CompileError> {
        let declared = property_index(owner);
        let mut places = Vec::new();
        for (k, _) in &other.properties {
            if declared.contains_key(k.as_str()) {
                continue;
            }
            let among = match names {
                Names::Unmatched => {
                    let mut none = true;
                    for (p, _) in &owner.patterns {
                        none = none && !p.matches(self, k)?;
                    }
                    none
                }
                Names::Matching(i) => owner.patterns[i].0.matches(self, k)?,
            };
            if among {
                places.push(WitnessAt::Declared(Place::Property(k.clone()), w.clone()));
            }
        }
        for &merged in side.among(names) {
            places.push(WitnessAt::Undeclared(merged, w.clone()));
        }
        Ok(places)
    }

    /// `patterns` with each shape narrowed to `within`.
    fn patterns_within(
        &mut self,
        patterns: &[(NamePattern, Shape)],
        within: &Shape,
    ) -> Result<Vec<(NamePattern, Shape)>, CompileError> {
        patterns
            .iter()
            .map(|(p, s)| Ok((p.clone(), self.intersect(s, within, p.pointer())?)))
            .collect()
    }
}

/// The undeclared properties of an intersection of objects (see
/// [`Compiler::merge_patterns`]).
struct MergedPatterns {
    patterns: Vec<(NamePattern, Shape)>,
    additional: Shape,
    /// Where each side's undeclared names are among the merge's (`x`'s, then `y`'s).
    sides: [SideNames; 2],
}

/// Where the undeclared names of one side of an intersection of objects are among the
/// merge's (see [`Compiler::merge_patterns`]): the merge's name sets that together are them.
struct SideNames {
    /// For each of the side's patterns, the names matching it.
    patterns: Vec<Vec<Names>>,
    /// The names matching none of the side's patterns (none listed where no witness of the
    /// side is among them: the merge then has no pattern of its own for them).
    unmatched: Vec<Names>,
}

impl SideNames {
    /// The side's patterns are the merge's (`n` of them), in order.
    fn kept(n: usize) -> SideNames {
        SideNames {
            patterns: (0..n).map(|i| vec![Names::Matching(i)]).collect(),
            unmatched: vec![Names::Unmatched],
        }
    }

    /// A side without patterns, or whose `own` patterns the merge dropped, meeting one whose
    /// `merged` patterns are the merge's: its undeclared names are any of the merge's.
    fn dropped(own: usize, merged: usize) -> SideNames {
        let any: Vec<Names> = std::iter::once(Names::Unmatched)
            .chain((0..merged).map(Names::Matching))
            .collect();
        SideNames {
            patterns: (0..own).map(|_| any.clone()).collect(),
            unmatched: any,
        }
    }

    /// The merge's name sets whose union is the side's `names`.
    fn among(&self, names: Names) -> &[Names] {
        match names {
            Names::Matching(i) => &self.patterns[i],
            Names::Unmatched => &self.unmatched,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use serde_json::json;

    use super::super::ecma::Regex;
    use super::super::schema::Compiler;
    use super::super::shape::RegexConstraint;
    use super::super::JsonSchemaOptions;
    use crate::limits::{Deadline, Limits};

    /// Every name an object's patterns meet is tested against them, in each copy of the
    /// object an intersection makes: the pattern's recognizer is built at its first test
    /// and read by every later one (each test built its grammar and recognizer again).
    #[test]
    fn a_pattern_is_recognized_by_one_recognizer_however_many_tests() {
        let (root, opts) = (json!({}), JsonSchemaOptions::new());
        let (limits, deadline) = (Limits::new(), Deadline::never());
        let c = Compiler::new(&root, &opts, &limits, &deadline).unwrap();
        let constraint = RegexConstraint {
            regex: Regex::pattern("^a.*z$", 128).unwrap(),
            source: "^a.*z$".to_string(),
            is_format: false,
            pointer: "/patternProperties/^a.*z$".to_string(),
        };
        let first = c.recognizer(&constraint).unwrap();
        for (name, expected) in [("az", true), ("abcz", true), ("za", false), ("a", false)] {
            assert_eq!(c.matches(&constraint, name).unwrap(), expected, "{name}");
        }
        assert!(Rc::ptr_eq(&first, &c.recognizer(&constraint).unwrap()));
        assert_eq!(c.recognizers.borrow()[0].len(), 1);
        assert!(c.recognizers.borrow()[1].is_empty());
    }
}
