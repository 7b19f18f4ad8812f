//! Reading a schema document into [`Shape`]s: the compilation's state, type lists, `enum` and
//! `const`, `anyOf`, `oneOf` and `allOf`. The keywords of each type are read in `keywords.rs`,
//! references resolved in `refs.rs`.

use foldhash::{HashMap, HashMapExt};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::lower::ContentKey;
use super::numbers::Decimal;
use super::refs::index_ids;
use super::shape::{Kind, ObjectShape, RefId, Shape};
use super::tracked::{Discriminator, KeyedObject};
use super::JsonSchemaOptions;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::guard::{guarded, tick};
use crate::ir::recognizer::Recognizer;
use crate::ir::{ExprId, GrammarBuilder};
use crate::limits::{Deadline, LimitExceeded, LimitKind, Limits};
use crate::matcher::json_state::{is_scalar_byte, KeySet, LengthBound};
use crate::ops::leaf::DEAD;
use crate::ops::{expr_leaf, Leaf};

/// Validation keywords formwork cannot express; anything not listed here or handled is an
/// unknown keyword, which JSON Schema defines as an annotation.
pub(super) const UNSUPPORTED: &[&str] = &[
    "unevaluatedItems",
    "unevaluatedProperties",
    "$dynamicRef",
    "$recursiveRef",
];

pub(super) const TYPES: [&str; 7] = [
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

/// The draft a document is written in (its root's `$schema`), for the keywords drafts
/// disagree on: `if`/`then`/`else` from draft 7, `propertyNames` and `contains` from draft 6,
/// `dependentRequired`/`dependentSchemas`/`minContains`/`maxContains` from 2019-09 (earlier,
/// unknown keywords: annotations), and the keywords beside a `$ref` from 2019-09 (earlier,
/// unread).
/// Without `$schema`, or with one naming no draft, the latest, as validators read it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Draft {
    Draft4,
    Draft6,
    Draft7,
    Draft2019,
    Draft2020,
}

impl Draft {
    /// The draft `root` declares.
    pub fn of(root: &Value) -> Draft {
        let uri = root
            .get("$schema")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let uri = uri.trim_end_matches('#');
        let path = uri
            .strip_prefix("https://")
            .or_else(|| uri.strip_prefix("http://"))
            .unwrap_or_default();
        match path {
            "json-schema.org/draft-04/schema" => Draft::Draft4,
            "json-schema.org/draft-06/schema" => Draft::Draft6,
            "json-schema.org/draft-07/schema" => Draft::Draft7,
            "json-schema.org/draft/2019-09/schema" => Draft::Draft2019,
            _ => Draft::Draft2020,
        }
    }
}

/// How a `$ref` table entry is defined.
pub(crate) enum Recipe {
    /// The schema at this JSON pointer.
    Pointer(String),
    /// The intersection of two entries (`allOf` of two references, kept lazy for recursion).
    Both(RefId, RefId),
    /// The complement of an entry (`not` of a reference, kept lazy for recursion).
    Not(RefId),
    /// A shape met with a reference still being built (its entry made as it is).
    Fixed(Rc<Shape>),
}

pub(crate) struct RefDef {
    /// How error messages and grammar rules name the entry: an intersection's joins its
    /// parts' names.
    pub name: String,
    /// Where in the document the entry was made: the place its errors, and those of the
    /// intersection or complement it is built by, are reported at. Never a name, which would
    /// nest: a shape met with an intersection being built is an entry named after this
    /// place, and the next intersection's name holds that name, so names taken for places
    /// doubled at each level of a recursion.
    pub pointer: String,
    /// The plain references this entry intersects (itself for a plain one), sorted: `A & A`
    /// is `A` and `(A & B) & C` is `A & (B & C)`, so recursion closes over finitely many sets.
    pub(super) bases: Vec<RefId>,
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
    /// The document's draft.
    pub draft: Draft,
    pub warnings: Vec<CompileError>,
    pub refs: Vec<RefDef>,
    pub(super) ref_ids: HashMap<String, RefId>,
    pub(super) both_ids: HashMap<Vec<RefId>, RefId>,
    /// How many constraints `lenient` dropped so far (each with a warning).
    pub(super) dropped: usize,
    /// The entry of the complement of each entry complemented so far.
    pub(super) not_ids: HashMap<RefId, RefId>,
    /// Entries being built, read again for a question about them ([`Compiler::probe`]), and
    /// what those readings gave.
    pub(super) probing: Vec<RefId>,
    pub(super) probes: HashMap<RefId, Rc<Shape>>,
    /// `$anchor`s and `$id`s: the pointer of the schema each names.
    pub(super) ids: HashMap<String, String>,
    /// Nesting of `build` calls, references built while building another included (so a
    /// chain of references each resolved inside the last counts every link), within
    /// [`Limits::nesting`].
    pub(super) depth: usize,
    /// Nesting of `intersect` calls (bounded).
    pub intersect_depth: usize,
    /// Shapes intersections have made or copied so far, within [`Limits::grammar_size`]:
    /// products of branches can grow far beyond the schema before anything is lowered.
    pub(super) shapes_made: u64,
    /// The (reference, value) pairs `accepts` is checking, innermost last: meeting one again
    /// is a derivation that made no progress.
    pub accepting: Vec<(RefId, *const Value)>,
    /// While [`accepts_if_known`](Self::accepts_if_known) asks: the first reference
    /// `accepts` met and could not read (being built, and no second reading of it), which
    /// leaves the answer unknown. Taken away while an entry or a probe is built: what they
    /// hold is kept, so it must not rest on an unknown.
    pub(super) undecided: Option<Option<RefId>>,
    /// Where each chain of plain references ends (see [`deref`](Self::deref)): the first
    /// entry whose shape is not a reference, `None` for a chain that loops.
    pub(super) chain_end: HashMap<RefId, Option<RefId>>,
    /// The recognizer of each regex [`matches`](Self::matches) tried, by its identity: the
    /// names and values of a schema meet the same few patterns many times (each property of
    /// each copy of an object an intersection makes), and each test built the regex's
    /// grammar and recognizer again. Patterns first, formats second.
    pub(super) recognizers: RefCell<[HashMap<String, Rc<Recognizer>>; 2]>,
    /// Whether the matcher keeps the strings of arrays of distinct free strings (the engine's
    /// matchers do; a grammar alone cannot), and whether some array relies on it.
    pub(super) state_by_matcher: bool,
    pub(super) relies_on_matcher: bool,
    /// Strings whose length the matcher counts (with `state_by_matcher`, where a pattern
    /// times its length bounds is too big an automaton): each one's bound and where its
    /// length was given, by its contents.
    pub(super) counted_strings: HashMap<ContentKey, (u32, Arc<str>)>,
    pub(super) length_bounds: Vec<LengthBound>,
    /// Bits of their tables together.
    pub(super) counted_bits: u64,
    /// States of a product of a pattern and its lengths past which `maxLength` is counted
    /// (`usize::MAX`: only past the automaton budget), and whether a string so counted met
    /// other strings at its place, where a product would have held it.
    pub(super) count_past: usize,
    pub(super) recount: bool,
    /// See [`MatcherState::list_all`](super::MatcherState) and `SchemaExpr::relist`.
    pub(super) list_all: bool,
    pub(super) relist: bool,
    /// Key sets of objects in any order, by number (each with the pointer of the first
    /// object held to it), and the number of each.
    pub(super) key_sets: Vec<(KeySet, Arc<str>)>,
    pub(super) key_set_ids: HashMap<KeySet, u32>,
    /// The key set of each object lowered with one, and its values, by address (the
    /// lowering holds the shapes, so the addresses stay theirs).
    pub(super) keyed_objects: HashMap<*const ObjectShape, KeyedObject>,
    /// The key sets at each place several may be, as groups (by their numbers, sorted, with
    /// the discriminators that tell them apart), and the number of each group.
    pub(super) key_groups: Vec<(Vec<u32>, Vec<Discriminator>)>,
    pub(super) key_group_ids: HashMap<(Vec<u32>, Vec<Discriminator>), u32>,
    /// The automaton of each value expression a discriminator tests (`None`: it has none),
    /// built once (see [`Compiler::value_automaton`]).
    pub(super) value_automata: HashMap<ExprId, Option<Arc<Leaf>>>,
    /// The bounds of values of strings their automata cannot hold, by expression (see
    /// `Compiler::value_lengths`).
    pub(super) value_lengths: HashMap<ExprId, Option<Arc<LengthBound>>>,
    /// Key sets an earlier pass found at places shared with other objects (lowered as
    /// `2^n` grammars now), and those this pass finds, each with why the matcher cannot hold
    /// it; with `last_pass`, finding one is an error.
    pub(super) unkeyed: HashMap<KeySet, &'static str>,
    pub(super) newly_unkeyed: Vec<(KeySet, &'static str)>,
    pub(super) last_pass: bool,
    /// What the value described by the schema object built next is known to be from outside
    /// it: the schema around an `allOf` part or `anyOf` branch (with the parts met before
    /// it), the object a dependency applies to (see [`Compiler::build_knowing`]). Taken by
    /// the next `build_step`, so it never reaches the subschemas of other values.
    pub(super) outside: Vec<Shape>,
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
            draft: Draft::of(root),
            warnings: Vec::new(),
            refs: Vec::new(),
            ref_ids: HashMap::new(),
            both_ids: HashMap::new(),
            not_ids: HashMap::new(),
            dropped: 0,
            probing: Vec::new(),
            probes: HashMap::new(),
            ids: index_ids(root, deadline)?,
            depth: 0,
            intersect_depth: 0,
            shapes_made: 0,
            accepting: Vec::new(),
            undecided: None,
            chain_end: HashMap::new(),
            recognizers: RefCell::default(),
            state_by_matcher: false,
            relies_on_matcher: false,
            counted_strings: HashMap::new(),
            length_bounds: Vec::new(),
            counted_bits: 0,
            count_past: usize::MAX,
            recount: false,
            list_all: false,
            relist: false,
            key_sets: Vec::new(),
            key_set_ids: HashMap::new(),
            keyed_objects: HashMap::new(),
            key_groups: Vec::new(),
            key_group_ids: HashMap::new(),
            value_automata: HashMap::new(),
            value_lengths: HashMap::new(),
            unkeyed: HashMap::new(),
            newly_unkeyed: Vec::new(),
            last_pass: true,
            outside: Vec::new(),
        })
    }

    /// The automaton of value expression `e` of `arena`, read by the matcher over a value's
    /// bytes as written (`discriminator`s' tests), if it has at most [`MAX_VALUE_STATES`]
    /// states and its strings start with a value's first byte (a quote, `{`, `[` or a
    /// scalar's byte): the matcher reads a value from there to its end.
    pub fn value_automaton(
        &mut self,
        arena: &GrammarBuilder,
        e: ExprId,
    ) -> Result<Option<&Arc<Leaf>>, CompileError> {
        if !self.value_automata.contains_key(&e) {
            let leaf = expr_leaf(arena, e, MAX_VALUE_SIZE, MAX_VALUE_STATES, self.deadline)?
                .filter(|leaf| {
                    (0..=255u8).all(|b| {
                        leaf.step(leaf.start(), u32::from(b)) == DEAD
                            || matches!(b, b'"' | b'{' | b'[')
                            || is_scalar_byte(b)
                    })
                });
            self.value_automata.insert(e, leaf.map(Arc::new));
        }
        Ok(self.value_automata[&e].as_ref())
    }

    /// The number of key set `set` (of an object at `pointer`), or why an earlier pass found
    /// that the matcher cannot hold it.
    pub fn key_set_id(&mut self, set: KeySet, pointer: &str) -> Result<u32, &'static str> {
        if let Some(&why) = self.unkeyed.get(&set) {
            return Err(why);
        }
        let next = self.key_sets.len() as u32;
        Ok(*self.key_set_ids.entry(set.clone()).or_insert_with(|| {
            self.key_sets.push((set, pointer.into()));
            next
        }))
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
                self.dropped += 1;
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

    /// [`build`](Self::build) where the value is known to be of every shape of `outside` as
    /// well: a `oneOf` of the schema proves its branches apart within them. The result is
    /// only right within `outside`, so the caller may only use it there (or beside a branch
    /// that already admits every value outside it: a dependency's objects without the
    /// trigger).
    pub(super) fn build_knowing(
        &mut self,
        schema: &Value,
        pointer: &str,
        outside: Vec<Shape>,
    ) -> Result<Shape, CompileError> {
        self.outside = outside;
        let shape = self.build(schema, pointer);
        self.outside.clear();
        shape
    }

    // Long: one `if let` per applicator keyword of a schema object (not, enum/const, $ref,
    // allOf, anyOf, oneOf, if), each meeting its result with the same shape in turn; then the
    // dependencies (`dependencies.rs`).
    pub(super) fn build_step(
        &mut self,
        schema: &Value,
        pointer: &str,
    ) -> Result<Shape, CompileError> {
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
        if let Some(r) = self.ref_alone(map) {
            let alone = Map::from_iter([("$ref".to_string(), r.clone())]);
            return self.build_step(&Value::Object(alone), pointer);
        }
        for key in map.keys() {
            if UNSUPPORTED.contains(&key.as_str()) && !self.harmless(key, map) {
                self.unsupported(
                    &format!("{pointer}/{}", pointer_escape(key)),
                    format!("keyword `{key}` is not supported"),
                )?;
            }
        }
        let outside = std::mem::take(&mut self.outside);
        let mut shape = self.typed(map, pointer)?;
        if let Some(n) = map.get("not") {
            let at = format!("{pointer}/not");
            if let Some(inner) = self.exact(n, &at)? {
                if let Some(complement) = self.tolerate_complement(&inner, &at)? {
                    shape = self.intersect(&shape, &complement, &at)?;
                }
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
                let s = self.build_knowing(sub, &at, known(&outside, &shape, sub))?;
                shape = self.intersect(&shape, &s, &at)?;
            }
        }
        if let Some(any) = map.get("anyOf") {
            let at = format!("{pointer}/anyOf");
            let mut branches = Vec::new();
            for (i, sub) in self.schema_list(any, &at)?.iter().enumerate() {
                let knowing = known(&outside, &shape, sub);
                branches.push(self.build_knowing(sub, &format!("{at}/{i}"), knowing)?);
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
                    let dropped = self.dropped;
                    let mut branches = Vec::new();
                    for (i, sub) in list.iter().enumerate() {
                        branches.push(self.build(sub, &format!("{at}/{i}"))?);
                    }
                    let lossy = self.dropped > dropped;
                    self.one_of(branches, &shape, &outside, lossy, &at)?
                }
            };
            shape = self.intersect(&shape, &one_of, &at)?;
        }
        if let Some(condition) = map.get("if").filter(|_| self.draft >= Draft::Draft7) {
            if let Some(conditional) = self.conditional(condition, map, pointer)? {
                shape = self.intersect(&shape, &conditional, &format!("{pointer}/if"))?;
            }
        }
        self.dependencies(shape, &outside, map, pointer)
    }

    /// `if`/`then`/`else`: `(if ∧ then) ∨ (¬if ∧ else)`, which is `if ∨ else` without `then`
    /// and `(if ∧ then) ∨ ¬if` without `else` (nothing without either). `None` when `if`
    /// cannot be complemented and lenient (the three keywords dropped).
    ///
    /// Without `else`, `¬if ∨ then` is the same language, but its branches overlap: an
    /// `allOf` of `n` such conditionals (a discriminated union: `if` a `const` tag, `then` the
    /// variant) multiplies out to a branch per subset of the `then`s, `2^n` objects to lower
    /// and compile (v4-config: 1,024 for ten tags, 0.9 s). With `if` in its branch, the
    /// branches of two conditionals whose `if`s exclude each other meet in nothing, and the
    /// product keeps `n + 1`.
    fn conditional(
        &mut self,
        condition: &Value,
        map: &Map<String, Value>,
        pointer: &str,
    ) -> Result<Option<Shape>, CompileError> {
        let at = format!("{pointer}/if");
        let branch = |c: &mut Self, key: &str| match map.get(key) {
            Some(s) => c.build(s, &format!("{pointer}/{key}")).map(Some),
            None => Ok(None),
        };
        let (then, otherwise) = (branch(self, "then")?, branch(self, "else")?);
        if then.is_none() && otherwise.is_none() {
            return Ok(None);
        }
        let Some(condition) = self.exact(condition, &at)? else {
            return Ok(None);
        };
        let Some(then) = then else {
            return Ok(otherwise.map(|e| Shape::any_of(vec![condition, e])));
        };
        let Some(not_condition) = self.tolerate_complement(&condition, &at)? else {
            return Ok(None);
        };
        Ok(Some(match otherwise {
            Some(e) => {
                let yes = self.meet(&condition, &then, &at)?;
                let no = self.meet(&not_condition, &e, &at)?;
                Shape::any_of(vec![yes, no])
            }
            None => match self.meet(&condition, &then, &at) {
                Ok(yes) => Shape::any_of(vec![yes, not_condition]),
                // Past the branch budget, the overlapping form: as exact, with no product.
                Err(e) if e.limit().is_some_and(|l| l.kind == LimitKind::Alternatives) => {
                    Shape::any_of(vec![not_condition, then])
                }
                Err(e) => return Err(e),
            },
        }))
    }

    /// The shape of a schema to be complemented, or `None` with a warning when `lenient`
    /// dropped some of its keywords: the complement of what is left would refuse values the
    /// schema's complement admits, and lenient compilation only ever loosens.
    pub(super) fn exact(
        &mut self,
        schema: &Value,
        pointer: &str,
    ) -> Result<Option<Shape>, CompileError> {
        let dropped = self.dropped;
        let shape = self.build(schema, pointer)?;
        if self.dropped == dropped {
            return Ok(Some(shape));
        }
        self.tolerate(error(
            CompileErrorKind::Unsupported,
            pointer,
            "dropped with the keywords of its schema that formwork cannot express (its complement would refuse too much)",
        ))?;
        Ok(None)
    }

    /// The complement of `s` ([`Compiler::complement`]), or with `lenient` and a shape it
    /// cannot complement, `None` and a warning (the caller drops what needed it).
    pub(super) fn tolerate_complement(
        &mut self,
        s: &Shape,
        pointer: &str,
    ) -> Result<Option<Shape>, CompileError> {
        match self.complement(s, pointer) {
            Ok(c) => Ok(Some(c)),
            Err(e) if e.kind() == CompileErrorKind::Unsupported => {
                self.tolerate(e)?;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Unsupported keywords whose value makes them no-ops.
    pub(super) fn harmless(&self, key: &str, map: &Map<String, Value>) -> bool {
        let v = &map[key];
        match key {
            "unevaluatedItems" | "unevaluatedProperties" => {
                v == &Value::Bool(true) || v.as_object().is_some_and(Map::is_empty)
            }
            _ => false,
        }
    }

    pub(super) fn schema_list<'v>(
        &self,
        v: &'v Value,
        pointer: &str,
    ) -> Result<&'v Vec<Value>, CompileError> {
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
    pub(super) fn values(
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
    pub(super) fn check_values(&self, values: &[Value], pointer: &str) -> Result<(), CompileError> {
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

    /// The `$ref` of a schema whose other keywords are unread: before 2019-09 a `$ref` stands
    /// for its target alone (validators of those drafts ignore the keywords beside it).
    pub(super) fn ref_alone<'m>(&self, map: &'m Map<String, Value>) -> Option<&'m Value> {
        map.get("$ref")
            .filter(|_| self.draft <= Draft::Draft7 && map.len() > 1)
    }

    /// The union over the schema's types (all types without `type`) of each type's keywords.
    pub(super) fn typed(
        &mut self,
        map: &Map<String, Value>,
        pointer: &str,
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
}

/// What the value of `part`, a subschema of the same value met with `shape` (an `allOf` part,
/// an `anyOf` branch, a dependency's schema), is known to be from outside it: `outside` and
/// `shape`; nothing where nothing in `part` reads it (only a `oneOf` does, at its top or in
/// such parts of its own), to spare the copies.
pub(super) fn known(outside: &[Shape], shape: &Shape, part: &Value) -> Vec<Shape> {
    let reads = ["oneOf", "allOf", "anyOf"]
        .iter()
        .any(|k| part.get(k).is_some());
    match reads {
        true => outside.iter().chain([shape]).cloned().collect(),
        false => Vec::new(),
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
        Shape::object(ObjectShape {
            properties: absent
                .iter()
                .map(|n| ((*n).clone(), Shape::Never))
                .collect(),
            required: present.to_vec(),
            ..ObjectShape::any(pointer)
        })
    };
    if sets.len() == 1 {
        let mut kinds: Vec<Shape> = Kind::ALL[..5]
            .iter()
            .map(|&k| Shape::of_kind(k, pointer))
            .collect();
        kinds.push(object(&sets[0], &[]));
        return Some(Shape::any_of(kinds));
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

/// Most patterns of one object's `patternProperties` (besides those matching every name), as
/// many as an object may hold at all. What costs is not the patterns but the sets of them the
/// undeclared names actually match (a key automaton and a member each), bounded by
/// [`MAX_KEY_CLASSES`] when the object is lowered: patterns that exclude each other (`^x-`,
/// `^[0-9]+$`, one per fixed name) make one set each, not `2^n`.
pub(crate) const MAX_KEY_PATTERNS: usize = super::shape::MAX_NAME_PATTERNS;

/// Most sets of patterns the undeclared names of one object may match (each a key automaton
/// and a member in the grammar), also for the objects intersections make, whose patterns are
/// both sides' (see `merge_objects`): every set five overlapping patterns can make.
pub(crate) const MAX_KEY_CLASSES: usize = 32;

/// Most branches "exactly one of these sets present" may expand to.
const MAX_ONE_OF_COMBINATIONS: usize = 256;

/// Most states of a value's automaton a discriminator tests, and most nodes of its
/// expression expanded (the subset construction's time grows with both; see
/// [`Compiler::value_automaton`]). On MaskBench in any order, 2,048 states cost no schema
/// compile time that 1,024 did not; 4,096 passed two more schemas but doubled two others'
/// compile (28 → 55 ms, one value's automaton taking 23 ms).
const MAX_VALUE_STATES: usize = 2_048;
const MAX_VALUE_SIZE: u64 = 8_192;

/// Which type a type-specific keyword constrains.
pub(super) fn type_of_keyword(key: &str) -> Option<&'static str> {
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
