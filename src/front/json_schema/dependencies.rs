//! `dependencies` (every draft), `dependentRequired` and `dependentSchemas` (2019-09 and
//! later): "an object with property K also has R1, R2…" (or "is also valid against S").
//!
//! Each entry is `if {required: [K]} then C`, `C` being `{required: [R1, R2…]}` or `S`: a
//! value passes when it is no object, when it is an object without K, or when it is valid
//! against C. So the schema's shape `X` becomes `(X ∧ K absent) ∨ (X ∧ C)` on its object
//! branches and stays as it is on the others; several entries apply one after another, and
//! entries with the same K are one whose C is both.
//!
//! Lowered naively, N entries make 2^N branches, each an object grammar of its own; most fall
//! away against the object they apply to, and this is where they do:
//! - an object that cannot have K (declared `false`, or undeclared where undeclared names
//!   matching no pattern are refused) keeps its shape;
//! - an object that requires K becomes `X ∧ C` alone;
//! - an object that `C` adds nothing to (`X ∧ C` is `X`: the names of C already required)
//!   keeps its shape;
//! - an object `C` leaves no value (`X ∧ C` empty: a name that must be absent) becomes
//!   `X ∧ K absent` alone;
//! - branches another branch implies are dropped (`(¬K1 ∨ R) ∧ (¬K2 ∨ R)` is
//!   `(¬K1 ∧ ¬K2) ∨ R`, the pruning of complement products).
//!
//! What stays over [`MAX_COMPLEMENT_BRANCHES`] branches is a `Limit` error at the entry that
//! passed it.

use serde_json::{Map, Value};

use super::complement::{pruned, MAX_COMPLEMENT_BRANCHES};
use super::intersect::property_index;
use super::schema::{error, known, over, pointer_escape, Compiler, Draft};
use super::shape::{Kind, ObjectShape, Shape};
use crate::error::{CompileError, CompileErrorKind};
use crate::limits::{LimitExceeded, LimitKind};

/// One entry: objects with `trigger` must have a value of `then`.
struct Dependency {
    trigger: String,
    then: Shape,
    /// The entry's JSON pointer (the first one, when several name the same property).
    pointer: String,
}

/// Objects without property `name` (their keywords at `pointer`).
fn absent(name: &str, pointer: &str) -> Shape {
    Shape::object(ObjectShape {
        properties: vec![(name.to_string(), Shape::Never)],
        ..ObjectShape::any(pointer)
    })
}

/// The names an array-form entry requires, or an `Invalid` error at `pointer`.
fn names(v: &[Value], pointer: &str) -> Result<Vec<String>, CompileError> {
    let mut out: Vec<String> = Vec::with_capacity(v.len());
    for name in v {
        let Value::String(name) = name else {
            return Err(error(
                CompileErrorKind::Invalid,
                pointer,
                "a dependency's list of names must hold strings",
            ));
        };
        if !out.contains(name) {
            out.push(name.clone());
        }
    }
    Ok(out)
}

impl Compiler<'_> {
    /// `shape` with the dependencies of the schema `map` (at `pointer`) applied; the value is
    /// known to be of every shape of `outside` as well (see [`Compiler::build_knowing`]).
    pub(super) fn dependencies(
        &mut self,
        mut shape: Shape,
        outside: &[Shape],
        map: &Map<String, Value>,
        pointer: &str,
    ) -> Result<Shape, CompileError> {
        let entries = self.read_dependencies(&shape, outside, map, pointer)?;
        for d in &entries {
            shape = self.depend(shape, d)?;
        }
        Ok(shape)
    }

    /// The entries of `dependencies`, `dependentRequired` and `dependentSchemas` (the last two
    /// from draft 2019-09 on), those of one property merged. A schema entry is built knowing
    /// its value is an object of `shape` and `outside` with the trigger: it is only ever met
    /// with such objects, or beside the branch of those without the trigger.
    fn read_dependencies(
        &mut self,
        shape: &Shape,
        outside: &[Shape],
        map: &Map<String, Value>,
        pointer: &str,
    ) -> Result<Vec<Dependency>, CompileError> {
        let modern = self.draft >= Draft::Draft2019;
        let keywords = [
            ("dependencies", true),
            ("dependentRequired", modern),
            ("dependentSchemas", modern),
        ];
        let mut out: Vec<Dependency> = Vec::new();
        for (keyword, applies) in keywords {
            let Some(v) = map.get(keyword).filter(|_| applies) else {
                continue;
            };
            let here = format!("{pointer}/{keyword}");
            let Value::Object(entries) = v else {
                return Err(error(
                    CompileErrorKind::Invalid,
                    &here,
                    format!("`{keyword}` must be an object"),
                ));
            };
            self.within(LimitKind::Alternatives, entries.len(), &here, keyword)?;
            for (trigger, v) in entries {
                let at = format!("{here}/{}", pointer_escape(trigger));
                let then = match (keyword, v) {
                    ("dependencies" | "dependentRequired", Value::Array(xs)) => {
                        let required = names(xs, &at)?;
                        match required.is_empty() {
                            true => Shape::Any,
                            false => Shape::object(ObjectShape {
                                required,
                                ..ObjectShape::any(&at)
                            }),
                        }
                    }
                    // Only met with objects of `shape` that have the trigger: what tells a
                    // `oneOf` of it apart is often there (the trigger's own value).
                    ("dependencies" | "dependentSchemas", _) => {
                        let mut knowing = known(outside, shape, v);
                        if !knowing.is_empty() {
                            knowing.push(Shape::object(ObjectShape {
                                required: vec![trigger.clone()],
                                ..ObjectShape::any(&at)
                            }));
                        }
                        self.build_knowing(v, &at, knowing)?
                    }
                    _ => {
                        return Err(error(
                            CompileErrorKind::Invalid,
                            &at,
                            "a `dependentRequired` entry must be an array of names",
                        ))
                    }
                };
                if matches!(then, Shape::Any) {
                    continue;
                }
                match out.iter().position(|d| d.trigger == *trigger) {
                    Some(i) => out[i].then = self.intersect(&out[i].then, &then, &at)?,
                    None => out.push(Dependency {
                        trigger: trigger.clone(),
                        then,
                        pointer: at,
                    }),
                }
            }
        }
        Ok(out)
    }

    /// `shape` with one dependency applied, branch by branch (see the module notes).
    fn depend(&mut self, mut shape: Shape, d: &Dependency) -> Result<Shape, CompileError> {
        let max = MAX_COMPLEMENT_BRANCHES.min(self.limits.get(LimitKind::Alternatives) as usize);
        let mut pending = match &mut shape {
            Shape::AnyOf(xs) => std::mem::take(xs),
            _ => vec![std::mem::replace(&mut shape, Shape::Never)],
        };
        pending.reverse();
        let mut out: Vec<Shape> = Vec::new();
        let mut branches = 0usize;
        while let Some(mut leaf) = pending.pop() {
            self.tick(&d.pointer)?;
            let made = match &mut leaf {
                Shape::AnyOf(xs) => {
                    pending.extend(std::mem::take(xs).into_iter().rev());
                    continue;
                }
                Shape::Any => {
                    let kinds = Kind::ALL.iter().rev();
                    pending.extend(kinds.map(|&k| Shape::of_kind(k, &d.pointer)));
                    continue;
                }
                Shape::Object(_) => self.object_dependency(leaf, d)?,
                other if other.kind().is_some_and(|k| k != Kind::Object) => leaf,
                // References and objects given by value: against the whole dependency.
                _ => {
                    let whole = self.dependency_shape(d)?;
                    self.intersect(&leaf, &whole, &d.pointer)?
                }
            };
            branches += made.branches();
            if branches > max {
                let exceeded = LimitExceeded {
                    kind: LimitKind::Alternatives,
                    value: branches as u64,
                    max: max as u64,
                };
                return Err(over(exceeded, &d.pointer, "the branches of dependencies"));
            }
            out.push(made);
        }
        Ok(pruned(Shape::any_of(out)))
    }

    /// The object shape `leaf` with dependency `d` applied: one or two branches.
    fn object_dependency(&mut self, leaf: Shape, d: &Dependency) -> Result<Shape, CompileError> {
        let Shape::Object(o) = &leaf else {
            unreachable!("called on objects")
        };
        let can_have_trigger = {
            let index = property_index(o);
            !matches!(*self.schema_in(o, &index, &d.trigger)?, Shape::Never)
        };
        if !can_have_trigger {
            return Ok(leaf);
        }
        let yes = self.intersect(&leaf, &d.then, &d.pointer)?;
        if o.required.contains(&d.trigger) {
            return Ok(yes);
        }
        if yes.fingerprint() == leaf.fingerprint() {
            return Ok(leaf);
        }
        let no = self.intersect(&leaf, &absent(&d.trigger, &o.pointer), &d.pointer)?;
        Ok(Shape::any_of(vec![no, yes]))
    }

    /// Every value `d` admits: non-objects, objects without the trigger, objects of `then`.
    fn dependency_shape(&mut self, d: &Dependency) -> Result<Shape, CompileError> {
        let mut branches: Vec<Shape> = Kind::ALL[..5]
            .iter()
            .map(|&k| Shape::of_kind(k, &d.pointer))
            .collect();
        branches.push(absent(&d.trigger, &d.pointer));
        let objects = Shape::of_kind(Kind::Object, &d.pointer);
        branches.push(self.intersect(&objects, &d.then, &d.pointer)?);
        Ok(Shape::any_of(branches))
    }
}
