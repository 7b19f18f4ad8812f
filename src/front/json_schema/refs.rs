//! `$ref`: resolving references (JSON pointers, `$id`s and `$anchor`s) to table entries,
//! building each entry once, intersections of references, and where chains of plain
//! references end.

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use std::rc::Rc;

use serde_json::Value;
use smallvec::{smallvec, SmallVec};

use super::schema::{error, pointer_escape, Compiler, Recipe, RefDef};
use super::shape::{RefId, Shape};
use crate::error::{CompileError, CompileErrorKind};
use crate::front::guard::tick;
use crate::limits::{Deadline, LimitKind};

impl Compiler<'_> {
    /// The table entry of a `$ref` string written at `pointer`.
    pub(super) fn ref_id(&mut self, reference: &str, pointer: &str) -> Result<RefId, CompileError> {
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
            pointer: target.clone(),
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
        let name = entry_name(name);
        self.refs.push(RefDef {
            name,
            pointer: pointer.to_string(),
            bases: bases.clone(),
            recipe: Recipe::Both(a, b),
            shape: None,
            building: false,
        });
        self.both_ids.insert(bases, id);
        Ok(id)
    }

    /// The table entry of a shape met with a reference still being built, so that the meeting
    /// can wait for it ([`Compiler::both_id`]); named after `pointer`. The entry holds a copy
    /// of the shape, counted as any copy: a recursion through `not` makes one at each level.
    pub fn fixed_id(&mut self, shape: &Shape, pointer: &str) -> Result<RefId, CompileError> {
        let id = self.refs.len();
        let shape = Rc::new(self.copy(shape, pointer)?);
        self.refs.push(RefDef {
            name: entry_name(format!("#{pointer} (met with a reference being read)")),
            pointer: pointer.to_string(),
            bases: vec![id],
            recipe: Recipe::Fixed(shape.clone()),
            shape: Some(shape),
            building: false,
        });
        Ok(id)
    }

    /// Is the entry's shape being built right now (a reference to it is recursion)? A
    /// complement is while its entry is, an intersection while one of its parts is: each
    /// needs its parts whole. Entries of entries (the complement of an intersection of
    /// complements) nest as deeply as the schema's `not`s and `allOf`s, so they are walked
    /// from a stack.
    pub fn is_building(&self, id: RefId) -> bool {
        // Nearly always one entry, done or not: no allocation for it.
        let mut todo: SmallVec<[RefId; 4]> = smallvec![id];
        let mut seen = HashSet::new();
        while let Some(r) = todo.pop() {
            let def = &self.refs[r];
            if def.building {
                return true;
            }
            if def.shape.is_some() || !seen.insert(r) {
                continue;
            }
            match def.recipe {
                Recipe::Not(inner) => todo.push(inner),
                Recipe::Both(a, b) => todo.extend([a, b]),
                Recipe::Pointer(_) | Recipe::Fixed(_) => {}
            }
        }
        false
    }

    /// The error of a reference whose shape is needed while it is being built.
    pub fn cycle_error(&self, id: RefId) -> CompileError {
        error(
            CompileErrorKind::Invalid,
            self.refs[id].name.trim_start_matches('#'),
            "`$ref` cycle with no object or array in between (the schema has no finite instance)",
        )
    }

    /// The shape of a table entry, built on first use. An intersection's parts (a
    /// complement's entry) are resolved first, from an explicit stack (they were made before
    /// it, so they form no cycle); a
    /// pointer's schema is built one nesting level below the schema being built, if any.
    pub fn resolve(&mut self, id: RefId) -> Result<Rc<Shape>, CompileError> {
        let mut pending = vec![id];
        while let Some(&top) = pending.last() {
            if self.refs[top].shape.is_some() {
                pending.pop();
                continue;
            }
            let parts: Option<Vec<RefId>> = match self.refs[top].recipe {
                Recipe::Both(a, b) => Some(vec![a, b]),
                Recipe::Not(a) => Some(vec![a]),
                Recipe::Pointer(_) | Recipe::Fixed(_) => None,
            };
            if let Some(parts) = parts {
                let parts: Vec<RefId> = parts
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
            let shape = match self.build_entry(top) {
                Ok(shape) => shape,
                Err(e) => {
                    // Nothing waits for them now: a later reading (the error swallowed by a
                    // question such as `oneOf` disjointness) must not take them for
                    // recursion.
                    for &r in &pending {
                        self.refs[r].building = false;
                    }
                    return Err(e);
                }
            };
            self.refs[top].shape = Some(Rc::new(shape));
            pending.pop();
        }
        match &self.refs[id].shape {
            Some(s) => Ok(s.clone()),
            None => Err(self.cycle_error(id)),
        }
    }

    /// The shape of entry `id`, whose intersection parts (if any) are resolved.
    pub(super) fn build_entry(&mut self, id: RefId) -> Result<Shape, CompileError> {
        if std::mem::replace(&mut self.refs[id].building, true) {
            return Err(self.cycle_error(id));
        }
        let asking = self.undecided.take();
        let shape = self.build_recipe(id);
        self.undecided = asking;
        self.refs[id].building = false;
        shape
    }

    /// The shape of entry `id` by its recipe ([`Compiler::build_entry`]).
    fn build_recipe(&mut self, id: RefId) -> Result<Shape, CompileError> {
        let pointer = self.refs[id].pointer.clone();
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
                self.intersect(&sa, &sb, &pointer)?
            }
            Recipe::Fixed(shape) => (**shape).clone(),
            &Recipe::Not(a) => {
                let sa = self.refs[a]
                    .shape
                    .clone()
                    .ok_or_else(|| self.cycle_error(a))?;
                self.complement(&sa, &pointer)?
            }
        };
        Ok(shape)
    }

    /// The shape of entry `r`, a schema being built (a reference to it is recursion), built
    /// once more for a question about it (is a `oneOf` branch disjoint from another?): its own
    /// references stay references, so the second reading does not recurse. `None` for an
    /// entry that is not a schema of the document, one being probed already, or one whose
    /// reading fails (the real reading reports that); the probe's warnings are dropped, the
    /// real reading gives them.
    pub fn probe(&mut self, r: RefId) -> Result<Option<Rc<Shape>>, CompileError> {
        if let Some(shape) = self.probes.get(&r) {
            return Ok(Some(shape.clone()));
        }
        let Recipe::Pointer(p) = &self.refs[r].recipe else {
            return Ok(None);
        };
        let p = p.clone();
        let Some(node) = self.root.pointer(&p) else {
            return Ok(None);
        };
        if self.probing.contains(&r) {
            return Ok(None);
        }
        let warnings = self.warnings.len();
        self.probing.push(r);
        let asking = self.undecided.take();
        let built = self.build(node, &p);
        self.undecided = asking;
        self.probing.pop();
        self.warnings.truncate(warnings);
        match built {
            Ok(shape) => {
                let shape = Rc::new(shape);
                self.probes.insert(r, shape.clone());
                Ok(Some(shape))
            }
            Err(e) if e.limit().is_some_and(|l| l.kind == LimitKind::CompileTime) => Err(e),
            Err(_) => Ok(None),
        }
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
            self.tick(&self.refs[at].pointer)?;
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

/// Longest name of a table entry, in bytes, past which [`entry_name`] cuts it.
const MAX_NAME_BYTES: usize = 256;

/// `name` cut to [`MAX_NAME_BYTES`] (the cut marked). A complement's name holds its entry's
/// and an intersection's its parts', and a recursion through `not` or `allOf` makes entries
/// of entries until a limit stops it: uncut, each name was longer than the one before, and
/// all of them together grew with the square of their number (4 GB in 10 s for
/// `{"type": "object", "not": {"$ref": "#"}}`). The names only label messages and rules.
pub(super) fn entry_name(mut name: String) -> String {
    if name.len() > MAX_NAME_BYTES {
        let mut cut = MAX_NAME_BYTES;
        while !name.is_char_boundary(cut) {
            cut -= 1;
        }
        name.truncate(cut);
        name.push('…');
    }
    name
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
/// explicit stack (the document may nest as deeply as its caller could build it). The path
/// to each value is kept as steps and spelled only where an id is: spelling every value's
/// pointer was a string per node of the document (6% of a typical schema's front end).
pub(super) fn index_ids(
    root: &Value,
    deadline: &Deadline,
) -> Result<HashMap<String, String>, CompileError> {
    let mut out = HashMap::new();
    // Each value with its depth and the step from its parent to it; `path` holds the steps
    // to the value being looked at.
    let mut stack: Vec<(&Value, usize, Step)> = vec![(root, 0, Step::Index(0))];
    let mut path: Vec<Step> = Vec::new();
    while let Some((v, depth, step)) = stack.pop() {
        tick(deadline)?;
        if depth > 0 {
            path.truncate(depth - 1);
            path.push(step);
        }
        match v {
            Value::Object(map) => {
                let pointer = || {
                    path.iter()
                        .map(|s| match s {
                            Step::Key(k) => format!("/{}", pointer_escape(k)),
                            Step::Index(i) => format!("/{i}"),
                        })
                        .collect::<String>()
                };
                for key in ["$id", "id"] {
                    if let Some(Value::String(id)) = map.get(key) {
                        out.entry(id.clone()).or_insert_with(pointer);
                        // The document's own base URI with an empty fragment.
                        if let Some(base) = id.strip_suffix('#') {
                            out.entry(base.to_string()).or_insert_with(pointer);
                        }
                    }
                }
                if let Some(Value::String(a)) = map.get("$anchor") {
                    out.entry(format!("#{a}")).or_insert_with(pointer);
                }
                // Reversed, so the first of equal ids, in document order, is recorded.
                for (k, x) in map.iter().rev() {
                    stack.push((x, depth + 1, Step::Key(k)));
                }
            }
            Value::Array(xs) => {
                for (i, x) in xs.iter().enumerate().rev() {
                    stack.push((x, depth + 1, Step::Index(i)));
                }
            }
            _ => {}
        }
    }
    Ok(out)
}

/// One step of a JSON pointer.
#[derive(Clone, Copy)]
enum Step<'v> {
    Key(&'v str),
    Index(usize),
}
