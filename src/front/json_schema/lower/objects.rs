//! Objects in the grammar: declared properties in schema order or any order, undeclared
//! properties split by the patterns their names match, property counts, and the runs of
//! members that place `contains`-style witnesses (arrays' witnessed items too).

use foldhash::{HashMap, HashMapExt, HashSet};
use std::borrow::Cow;
use std::rc::Rc;
use std::sync::Arc;

use serde_json::Value;

use super::super::intersect::property_index;
use super::super::schema::{error, over, MAX_KEY_CLASSES};
use super::super::shape::{NamePattern, Names, ObjectShape, Shape, MAX_NAME_PATTERNS};
use super::super::strings::{any_text, text_not_in};
use super::super::tracked::{KeyValues, KeyedObject, MemberValue};
use super::super::PropertyOrder;
use super::strings::NamesKey;
use super::{clamp, strings_automaton, SchemaLowering};
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::chars::{Budget, CharDfa};
use crate::front::guard::tick;
use crate::ir::ExprId;
use crate::limits::LimitKind;
use crate::matcher::json_state::{Declared, KeySet, Others, MAX_GROUP_NAMES};

/// An object with more declared properties than this has its chain of members cut into rules
/// of [`MEMBERS_PER_RULE`] (see [`SchemaLowering::ordered`]).
const MEMBERS_IN_ONE_RULE: usize = 32;
const MEMBERS_PER_RULE: usize = 8;

/// The undeclared names of `o` (among `names`, those `propertyNames` admits, if given) split
/// by the set of patterns they match (bit `i`: pattern `i`), each nonempty set with the
/// automaton of its names, in the order of the sets; past [`MAX_KEY_CLASSES`] of them,
/// `Unsupported`. The classes come from one product of the patterns (see
/// [`CharDfa::split`]), which reaches the classes that exist, not `2^n`. The declared names
/// are taken out last, and only from the classes holding one: a pattern seldom matches a
/// declared name (OCDS's language-tagged names: `^title_…$` beside `title`).
fn key_classes(
    o: &ObjectShape,
    patterns: &[CharDfa],
    declared: &[&str],
    names: Option<&CharDfa>,
    budget: &Budget,
) -> Result<Vec<(usize, CharDfa)>, CompileError> {
    debug_assert!(o.patterns.len() <= MAX_NAME_PATTERNS);
    let classes = CharDfa::split(patterns, names, MAX_KEY_CLASSES, budget)
        .map_err(|e| e.or_at(Location::JsonPointer(o.pointer.to_string())))?
        .ok_or_else(|| {
            error(
                CompileErrorKind::Unsupported,
                &o.pointer,
                format!(
                    "undeclared property names of more than {MAX_KEY_CLASSES} kinds (by the `patternProperties` they match)"
                ),
            )
        })?;
    let mut out = Vec::with_capacity(classes.len());
    for (set, keys) in classes {
        let taken: Vec<&str> = declared
            .iter()
            .copied()
            .filter(|d| keys.matches(d))
            .collect();
        let undeclared = match taken.is_empty() {
            true => keys,
            false => {
                let others = CharDfa::strings(&taken, budget)?.complement(budget.deadline)?;
                keys.intersect(&others, budget)?
            }
        };
        if !undeclared.is_empty() {
            out.push((set, undeclared));
        }
    }
    Ok(out)
}

/// What decides an object's classes of undeclared names and their keys (see
/// [`key_classes`]): its declared names (sorted), its patterns and its `propertyNames`.
/// Intersections copy one object into many shapes, each copy with the same names.
#[derive(PartialEq, Eq, Hash)]
pub(super) struct ClassesKey {
    declared: Vec<String>,
    patterns: Vec<NamesKey>,
    names: Option<NamesKey>,
}

impl SchemaLowering<'_, '_, '_> {
    // Long: the order in which an object's parts are settled (witnesses placed, required names
    // given shapes, `false` properties, declared names, undeclared members), each using the last.
    pub(super) fn object(&mut self, o: &Rc<ObjectShape>) -> Result<ExprId, CompileError> {
        if !o.witnesses.is_empty() {
            // The lowering writes required names as members, never as undeclared properties,
            // so a witness that may be one of them is placed first (see `place_witnesses`).
            let index = property_index(o);
            let names: Vec<(String, Shape)> = o
                .required
                .iter()
                .filter(|r| !index.contains_key(r.as_str()))
                .map(|r| (r.clone(), Shape::Any))
                .collect();
            if !names.is_empty() {
                let declaring = Shape::object(ObjectShape {
                    properties: names,
                    ..ObjectShape::any(&o.pointer)
                });
                let placed = self
                    .c
                    .intersect(&Shape::Object(o.clone()), &declaring, &o.pointer)?;
                return self.shape(&placed);
            }
        }
        // Required properties the schema does not declare take the shape their name gets there.
        // Shapes borrowed, not copied: a copy is as deep as the shape, once per enclosing object.
        let required: HashSet<&str> = o.required.iter().map(String::as_str).collect();
        let mut props: Vec<(&str, Cow<Shape>, bool)> = o
            .properties
            .iter()
            .map(|(k, s)| (k.as_str(), Cow::Borrowed(s), required.contains(k.as_str())))
            .collect();
        let index = property_index(o);
        for r in &o.required {
            if !index.contains_key(r.as_str()) {
                let shape = self.c.schema_in(o, &index, r)?;
                props.push((r, shape, true));
            }
        }
        // A property whose schema is `false` can only be absent.
        if props
            .iter()
            .any(|(_, s, req)| *req && matches!(**s, Shape::Never))
        {
            return Ok(self.g.nothing());
        }
        // Declared names are never additional properties, even those that can only be absent.
        let declared: Vec<String> = props.iter().map(|(k, _, _)| k.to_string()).collect();
        props.retain(|(_, s, _)| !matches!(**s, Shape::Never));
        // More required names than `maxProperties` allows, or `minProperties` past it: no
        // object, whatever the order (a parent holding the name in a key set must see it).
        let required = props.iter().filter(|(_, _, req)| *req).count() as u64;
        if o.max.is_some_and(|max| required > max || o.min > max) {
            return Ok(self.g.nothing());
        }
        let nothing = self.g.nothing();
        let mut members = Vec::new();
        let mut values = Vec::new();
        let mut valueless = Vec::new();
        for (k, s, req) in &props {
            let key = self.g.text(&Value::from(*k).to_string());
            let colon = self.punct(":");
            let value = self.shape(s)?;
            // A name with no value can only be absent, like one whose schema is `false`: a
            // key set taking it as optional would let its name be written, where nothing can
            // follow.
            if value == nothing {
                if *req {
                    return Ok(nothing);
                }
                valueless.push(k.to_string());
                continue;
            }
            members.push((self.g.seq([key, colon, value]), *req));
            values.push((k.to_string(), MemberValue::of(value, s)));
        }
        props.retain(|(k, _, _)| !valueless.iter().any(|v| v == k));
        let extra = self.undeclared_members(o, &declared)?;
        let counts = Counts {
            min: o.min,
            max: o.max,
        };
        let (keys, unkeyed) = match self.key_set(o, &declared, &props, values, &extra, counts)? {
            Ok(id) => (Some(id), None),
            Err(why) => (None, why),
        };
        if o.max == Some(0) {
            let needs_one = props.iter().any(|(_, _, req)| *req) || o.min > 0;
            return Ok(match needs_one || extra.all != 0 {
                true => self.g.nothing(),
                false => {
                    let open = self.g.text("{");
                    let close = self.g.text("}");
                    self.g.seq([open, self.ws, close])
                }
            });
        }
        let chain = Chain {
            members,
            extra: extra.clone(),
            counts,
            keys,
        };
        if let Some(&e) = self.chains.get(&chain) {
            return Ok(e);
        }
        let members = &chain.members;
        let e = match self.c.opts.property_order {
            PropertyOrder::Schema => self.ordered(members, extra, counts, &o.pointer)?,
            _ if keys.is_some() => {
                let can_be_empty = !props.iter().any(|(_, _, req)| *req) && counts.min == 0;
                self.any_run(members, &extra, can_be_empty)
            }
            order => {
                let unordered = self.unordered(members, extra.clone(), counts, &o.pointer, unkeyed);
                match unordered {
                    // Past the `2^n` limits or the grammar's size only: time and the other
                    // limits bind the schema's order too.
                    Err(e)
                        if order == PropertyOrder::AnyOrSchema
                            && e.kind() == CompileErrorKind::Limit
                            && e.limit().is_none_or(|l| l.kind == LimitKind::GrammarSize) =>
                    {
                        self.c.warnings.push(error(
                            CompileErrorKind::Limit,
                            &o.pointer,
                            format!("{}: kept in the schema's order", e.message()),
                        ));
                        self.ordered(members, extra, counts, &o.pointer)?
                    }
                    e => e?,
                }
            }
        };
        self.chains.insert(chain, e);
        Ok(e)
    }

    /// The key set the matcher holds `o`'s names to, if its properties may come in any order
    /// and the matcher can tell its names apart: with no witnesses and no `propertyNames`,
    /// and every undeclared name admitted (whatever patterns it matches), those of its
    /// patterns (read by their automaton, see [`Others::Matching`]), or, without patterns,
    /// none. `declared` are all its
    /// declared names, `props` those with a value (and `values` their values' expressions),
    /// `extra` its undeclared members. A key set an earlier pass found sharing its place with
    /// objects it cannot be told from is not used again (`front::json_schema::tracked`): the
    /// error is then why, and `None` for an object that has no key set.
    fn key_set(
        &mut self,
        o: &Rc<ObjectShape>,
        declared: &[String],
        props: &[(&str, Cow<Shape>, bool)],
        values: Vec<(String, MemberValue)>,
        extra: &Undeclared,
        counts: Counts,
    ) -> Result<Result<u32, Option<&'static str>>, CompileError> {
        let keyable = self.c.opts.property_order.is_any()
            && self.c.state_by_matcher
            && !self.fixed_object
            && o.witnesses.is_empty()
            && o.names.is_none()
            && (o.patterns.is_empty() || extra.every_name || extra.matching.is_some());
        if !keyable {
            return Ok(Err(None));
        }
        let role = |name: &str| match props.iter().find(|(k, _, _)| *k == name) {
            Some((_, _, true)) => Declared::Required,
            Some((_, _, false)) => Declared::Optional,
            None => Declared::Absent,
        };
        let set = KeySet::new(
            declared.iter().map(|k| (k.clone(), role(k))),
            counts.min,
            counts.max,
            match (&extra.any, &extra.matching) {
                (None, _) => Others::None,
                (Some(_), None) => Others::Every,
                (Some(_), Some(dfa)) => Others::Matching(dfa.clone()),
            },
        );
        if !set.admits_some_object() || set.len() > MAX_GROUP_NAMES {
            // The 2^n grammar is empty there, as it should be; or it is a `Limit` error.
            return Ok(Err(None));
        }
        let id = match self.c.key_set_id(set, &o.pointer) {
            Ok(id) => id,
            Err(why) => return Ok(Err(Some(why))),
        };
        let others = match extra.any {
            // Values by the patterns a name matches: the undeclared members themselves are
            // what other objects at the place must agree with.
            Some(any) if !o.patterns.is_empty() => Some(MemberValue::opaque(any)),
            Some(_) => {
                let additional = self.c.undeclared_shape(o, &[])?;
                Some(MemberValue::of(self.shape(&additional)?, &additional))
            }
            None => None,
        };
        let values = Rc::new(KeyValues::new(values, others));
        self.c
            .keyed_objects
            .insert(Rc::as_ptr(o), KeyedObject { set: id, values });
        self.c.relies_on_matcher = true;
        Ok(Ok(id))
    }

    /// Members in any order, as many as written: `{` a member, then `,` and a member again
    /// and again, `}`; the matcher holds the names to the object's key set (each declared one
    /// once, the required ones all, the counts).
    fn any_run(
        &mut self,
        members: &[(ExprId, bool)],
        extra: &Undeclared,
        can_be_empty: bool,
    ) -> ExprId {
        let choices: Vec<ExprId> = members.iter().map(|&(m, _)| m).chain(extra.any).collect();
        let member = self.g.alt(choices);
        let comma = self.punct(",");
        let next = self.g.seq([comma, member]);
        let more = self.g.repeat(next, 0, None);
        let open = self.g.text("{");
        let close = self.g.text("}");
        let full = self.g.seq([open, self.ws, member, more, self.ws, close]);
        let mut branches = vec![full];
        if can_be_empty {
            branches.push(self.g.seq([open, self.ws, close]));
        }
        self.g.alt(branches)
    }

    /// The members undeclared properties are written as. Without patterns, any other name
    /// with the additional shape; with them, one branch per set of patterns a name may match,
    /// its key the names matching exactly those and its value their shapes together (the
    /// additional shape for the names matching none). With witnesses, also for each set of
    /// them and each set of names they may share, the member of those names with all their
    /// values, marked with the set.
    // Long: one member per class of undeclared names (and per witness set they may share),
    // built through one closure that every class and the lenient case call.
    fn undeclared_members(
        &mut self,
        o: &ObjectShape,
        declared: &[String],
    ) -> Result<Undeclared, CompileError> {
        let names: Vec<&str> = declared.iter().map(String::as_str).collect();
        let all = (1u64 << o.witnesses.len()) - 1;
        if o.patterns.is_empty() && matches!(*o.additional, Shape::Never) {
            return Ok(Undeclared {
                all,
                ..Undeclared::default()
            });
        }
        let memo = self.classes_key(o, &names);
        let classes = match memo.as_ref().and_then(|k| self.key_classes.get(k)) {
            Some(classes) => Some(classes.clone()),
            None => {
                let warnings = self.c.warnings.len();
                match self.lowered_key_classes(o, &names)? {
                    Err(lenient) => return Ok(lenient),
                    Ok(None) => None,
                    Ok(Some(classes)) => {
                        let classes: Rc<[KeyClass]> = classes.into();
                        if let Some(k) = memo.filter(|_| self.c.warnings.len() == warnings) {
                            self.key_classes.insert(k, classes.clone());
                        }
                        Some(classes)
                    }
                }
            }
        };
        let mut out = Undeclared {
            all,
            ..Undeclared::default()
        };
        let mut members = Vec::new();
        // The automata of the classes with a member.
        let mut admitted: Vec<&CharDfa> = Vec::new();
        let mut each_class = |lw: &mut Self, set: usize, content: ExprId| {
            let matching: Vec<bool> = (0..o.patterns.len()).map(|i| set >> i & 1 == 1).collect();
            let value = lw.c.undeclared_shape(o, &matching)?.into_owned();
            if matches!(value, Shape::Never) {
                return Ok(false);
            }
            members.push(lw.member(content, &value)?);
            for marks in 1..=all {
                let mut both = value.clone();
                for (j, (among, w)) in o.witnesses.iter().enumerate() {
                    if marks >> j & 1 == 0 {
                        continue;
                    }
                    let here = match among {
                        Names::Unmatched => set == 0,
                        Names::Matching(i) => set >> i & 1 == 1,
                    };
                    both = match here {
                        true => lw.c.intersect(&both, w, &o.pointer)?,
                        false => Shape::Never,
                    };
                }
                if !matches!(both, Shape::Never) {
                    out.marked.push((lw.member(content, &both)?, marks));
                }
            }
            Ok::<bool, CompileError>(true)
        };
        let count = match &classes {
            None => {
                let content = self.keys_not_in(&names)?;
                each_class(self, 0, content)?;
                1
            }
            Some(classes) => {
                for (set, content, dfa) in classes.iter() {
                    if each_class(self, *set, *content)? {
                        admitted.push(dfa);
                    }
                }
                classes.len()
            }
        };
        // The classes cover every undeclared name `propertyNames` admits.
        out.every_name = o.names.is_none() && members.len() == count;
        if !out.every_name && o.names.is_none() && !admitted.is_empty() {
            out.matching = match CharDfa::union(&admitted, &self.budget()) {
                Ok(dfa) => Some(Arc::new(dfa)),
                // Past the deadline: the compilation's error; past the budget's states: the
                // names are not held by a key set (the `2^n` grammar holds them).
                Err(e) if self.c.deadline.check().is_err() => return Err(e),
                Err(_) => None,
            };
        }
        out.any = (!members.is_empty()).then(|| self.g.alt(members));
        Ok(out)
    }

    /// What decides the classes of `o`'s undeclared names, if it has patterns or
    /// `propertyNames` and each can be told exactly (see [`NamesKey`]).
    fn classes_key(&self, o: &ObjectShape, declared: &[&str]) -> Option<ClassesKey> {
        if o.patterns.is_empty() && o.names.is_none() {
            return None;
        }
        let patterns = o
            .patterns
            .iter()
            .map(|(p, _)| NamesKey::of_pattern(p))
            .collect::<Option<_>>()?;
        let names = match &o.names {
            Some(shape) => Some(NamesKey::of_strings(shape, true)?),
            None => None,
        };
        let mut declared: Vec<String> = declared.iter().map(|k| k.to_string()).collect();
        declared.sort_unstable();
        Some(ClassesKey {
            declared,
            patterns,
            names,
        })
    }

    /// The automata of `o`'s name patterns, those of regexes and formats built once per
    /// grammar (see `SchemaLowering::name_automata`).
    fn pattern_automata(
        &mut self,
        o: &ObjectShape,
        budget: &Budget,
    ) -> Result<Vec<CharDfa>, CompileError> {
        let mut out = Vec::with_capacity(o.patterns.len());
        for (p, _) in &o.patterns {
            let key = match p {
                NamePattern::Regex(c) => {
                    let (is_format, text) = c.identity();
                    Some((is_format, text.to_string()))
                }
                _ => None,
            };
            if let Some(dfa) = key.as_ref().and_then(|k| self.name_automata.get(k)) {
                out.push(dfa.clone());
                continue;
            }
            let at = |e: CompileError| e.or_at(Location::JsonPointer(p.pointer().to_string()));
            let dfa = p.automaton(budget).map_err(at)?;
            if let Some(k) = key {
                self.name_automata.insert(k, dfa.clone());
            }
            out.push(dfa);
        }
        Ok(out)
    }

    /// The classes of `o`'s undeclared names (see [`key_classes`]), each with the keys of its
    /// names lowered: `None` without patterns or `propertyNames`; `Err` with the members a
    /// lenient compilation writes where the classes are refused (undeclared names not told
    /// apart, with any value, every witness).
    fn lowered_key_classes(
        &mut self,
        o: &ObjectShape,
        names: &[&str],
    ) -> Result<Result<Option<Vec<KeyClass>>, Undeclared>, CompileError> {
        let allowed = match &o.names {
            Some(shape) => match strings_automaton(
                shape,
                &format!("{}/propertyNames", o.pointer),
                &self.budget(),
            ) {
                Ok(dfa) => Some(dfa),
                Err(e) => {
                    // Lenient: the names not narrowed.
                    self.c.tolerate(e)?;
                    None
                }
            },
            None => None,
        };
        if o.patterns.is_empty() && allowed.is_none() {
            return Ok(Ok(None));
        }
        let budget = self.budget();
        let classes = match self
            .pattern_automata(o, &budget)
            .and_then(|patterns| key_classes(o, &patterns, names, allowed.as_ref(), &budget))
        {
            Ok(classes) => classes,
            Err(e) => {
                self.c.tolerate(e)?;
                let all = (1u64 << o.witnesses.len()) - 1;
                let content = self.keys_not_in(names)?;
                let any = self.member(content, &Shape::Any)?;
                return Ok(Err(Undeclared {
                    any: Some(any),
                    marked: (all != 0).then_some((any, all)).into_iter().collect(),
                    all,
                    every_name: true,
                    matching: None,
                }));
            }
        };
        let mut lowered = Vec::with_capacity(classes.len());
        for (set, keys) in classes {
            self.automata += 1;
            let name = format!("{}json key automaton {}", self.prefix, self.automata);
            let any = any_text(self.g, &mut self.keys, 0, None);
            let content = keys.lower(&name, self.g, &mut self.keys, any, self.c.deadline)?;
            lowered.push((set, content, Arc::new(keys)));
        }
        Ok(Ok(Some(lowered)))
    }

    /// Members one after another, `lo..=hi` of them, such that every witness of `all` is among
    /// the marks of a member written, and no mark of `once` is written twice: `plain` members
    /// mark none, `marked` ones the witnesses (and with `once`, the values) they are. One rule
    /// per set of marks seen and count (counted up to the larger bound) that a run reaches.
    /// Returns the run with a separator before each member, and the run whose first member
    /// has none (at least one member long).
    pub(super) fn witnessed_run(
        &mut self,
        plain: Option<ExprId>,
        marked: &[(ExprId, u64)],
        all: u64,
        once: u64,
        lo: u64,
        hi: Option<u64>,
    ) -> Result<(ExprId, ExprId), CompileError> {
        let cap = hi.unwrap_or(lo);
        let members: Vec<(ExprId, u64)> = plain
            .map(|p| (p, 0))
            .into_iter()
            .chain(marked.iter().copied())
            .collect();
        let next_states = |seen: u64, c: u64| {
            let open = hi.is_none_or(|h| c < h);
            members
                .iter()
                .filter(move |&&(_, marks)| open && marks & once & seen == 0)
                .map(move |&(m, marks)| (m, (seen | marks, (c + 1).min(cap))))
        };
        // The states a run reaches, in the order found: the order of definitions decides the
        // expression ids of the bodies, so it must not be a hash map's (seeded per map).
        let mut states = vec![(0u64, 0u64)];
        let mut found: HashSet<(u64, u64)> = [(0u64, 0u64)].into_iter().collect();
        let mut i = 0;
        while let Some(&(seen, c)) = states.get(i) {
            i += 1;
            tick(self.c.deadline)?;
            for (_, next) in next_states(seen, c) {
                if found.insert(next) {
                    states.push(next);
                }
            }
            self.c
                .limits
                .check(LimitKind::GrammarSize, (self.g.len() + states.len()) as u64)
                .map_err(|e| CompileError::over_limit(e, Location::None, "members with marks"))?;
        }
        self.rule_groups += 1;
        let id = self.rule_groups;
        let mut rule_of = HashMap::new();
        for &(seen, c) in &states {
            let name = format!("{}witnessed {id} {seen:b} {c}", self.prefix);
            rule_of.insert((seen, c), self.g.rule(&name));
        }
        let comma = self.punct(",");
        let choices = |lw: &mut Self, seen: u64, c: u64, lead: bool| -> ExprId {
            let mut branches = Vec::new();
            if lead && seen & all == all && c >= lo {
                branches.push(lw.g.empty());
            }
            for (m, next) in next_states(seen, c) {
                let next = lw.g.rule_ref(rule_of[&next]);
                branches.push(match lead {
                    true => lw.g.seq([comma, m, next]),
                    false => lw.g.seq([m, next]),
                });
            }
            lw.g.alt(branches)
        };
        for &(seen, c) in &states {
            let body = choices(self, seen, c, true);
            self.g.define(rule_of[&(seen, c)], body)?;
            self.check_size()?;
        }
        let first = choices(self, 0, 0, false);
        Ok((self.g.rule_ref(rule_of[&(0, 0)]), first))
    }

    /// Keys spelled as objects write them, none of `names`: one trie per set of names, however
    /// many objects declare it. An intersection with a union makes a copy of an object per
    /// branch (`allOf` with a `$ref` to a union, a chain of conditionals), every copy with the
    /// same names, and each built the trie again (prometheus, circleciconfig: 29% and 27% of
    /// the front end's instructions).
    fn keys_not_in(&mut self, names: &[&str]) -> Result<ExprId, CompileError> {
        let mut set: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        set.sort_unstable();
        set.dedup();
        if let Some(&e) = self.undeclared_keys.get(&set) {
            return Ok(e);
        }
        let e = text_not_in(self.g, &mut self.keys, names, self.c.deadline)?;
        self.undeclared_keys.insert(set, e);
        Ok(e)
    }

    /// `"content": value`.
    fn member(&mut self, content: ExprId, value: &Shape) -> Result<ExprId, CompileError> {
        let quote = self.g.text("\"");
        let colon = self.punct(":");
        let value = self.shape(value)?;
        Ok(self.g.seq([quote, content, quote, colon, value]))
    }

    /// Declared properties in schema order, then additional ones: an expression per member and
    /// count written before it, so a `Limit` error (at `pointer`) if that many would not fit.
    ///
    /// In a long object the chain is cut every [`MEMBERS_PER_RULE`] members: the rest of the
    /// chain there (and the choice of the first member written from there on) is a rule of
    /// its own. Whole, the chain was one expression per member holding every later one (the
    /// IR flattens sequences and alternations: quadratic to build), and one unit for the
    /// backend, whose automaton tracks after each member which later names may follow — a
    /// state per (member, later name prefix), quadratic in the properties (eslintrc, 97
    /// optional properties: 3.5 s; 400 properties: over 2M states). Each rule is referred to
    /// from every member of the block before it, so the backend calls it: a unit of a block's
    /// names, the row after a member holding a call per block still ahead.
    // Long: one rule table built from the end (the continuations after each member and count);
    // the cut into blocks and the witness cases all index the same `after` and `rest` tables.
    fn ordered(
        &mut self,
        members: &[(ExprId, bool)],
        extra: Undeclared,
        counts: Counts,
        pointer: &str,
    ) -> Result<ExprId, CompileError> {
        let comma = self.punct(",");
        // rest[c]: the members from k on after c were written (c capped), built from the end.
        let cap = counts.cap(members.len(), false);
        let needed = (members.len() as u64).saturating_mul(cap.saturating_add(1));
        self.c
            .limits
            .check(LimitKind::GrammarSize, self.g.len() as u64 + needed)
            .map_err(|e| over(e, pointer, "properties and their counts"))?;
        // The undeclared properties after c members, `witnessed` if every witness must be
        // among them.
        let extras_tail =
            |lw: &mut Self, c: u64, witnessed: bool| -> Result<ExprId, CompileError> {
                let lo = counts.min.saturating_sub(c);
                let hi = counts.max.map(|m| m.saturating_sub(c));
                Ok(match extra.any {
                    _ if witnessed && extra.all != 0 => {
                        lw.witnessed_run(extra.any, &extra.marked, extra.all, 0, lo, hi)?
                            .0
                    }
                    None if lo == 0 => lw.g.empty(),
                    None => lw.g.nothing(),
                    Some(x) => {
                        let more = lw.g.seq([comma, x]);
                        lw.g.repeat(more, clamp(lo), hi.map(clamp))
                    }
                })
            };
        // Non-empty continuations when nothing was written yet, and continuations after c >= 1.
        let mut after = Vec::with_capacity(cap as usize + 1);
        for c in 0..=cap {
            after.push(extras_tail(self, c.max(1), true)?);
        }
        let mut first = match (extra.any, extra.all) {
            (None, 0) => self.g.nothing(),
            (Some(x), 0) => self.g.seq([x, after[1]]),
            // Every witness among the undeclared properties, which start the object.
            _ => {
                let hi = counts.max;
                let run =
                    self.witnessed_run(extra.any, &extra.marked, extra.all, 0, counts.min, hi);
                run?.1
            }
        };
        for (k, &(m, req)) in members.iter().enumerate().rev() {
            self.check_size()?;
            let cut = members.len() > MEMBERS_IN_ONE_RULE
                && k > 0
                && (members.len() - k) % MEMBERS_PER_RULE == 0;
            if cut {
                for a in after.iter_mut() {
                    *a = self.named("json members", *a)?;
                }
                first = self.named("json first member", first)?;
            }
            let mut next_after = Vec::with_capacity(after.len());
            for c in 0..=cap {
                let c1 = (c + 1).min(cap);
                let full = counts.max.is_some_and(|mx| c >= mx);
                next_after.push(match (req, full) {
                    (_, true) if req => self.g.nothing(),
                    (_, true) => after[c as usize],
                    // Past the cap the count no longer changes: `(, m)? rest` writes the
                    // continuation once, where `, m rest | rest` doubled it at every optional
                    // property (the CFG backend inlines both copies).
                    (false, false) if c1 == c => {
                        let member = self.g.seq([comma, m]);
                        let optional = self.g.repeat(member, 0, Some(1));
                        self.g.seq([optional, after[c as usize]])
                    }
                    (true, false) => self.g.seq([comma, m, after[c1 as usize]]),
                    (false, false) => {
                        let take = self.g.seq([comma, m, after[c1 as usize]]);
                        self.g.alt([take, after[c as usize]])
                    }
                });
            }
            let take_first = self.g.seq([m, after[1.min(cap) as usize]]);
            first = match req {
                true => take_first,
                false => self.g.alt([take_first, first]),
            };
            after = next_after;
        }
        let can_be_empty = members.iter().all(|(_, req)| !req) && counts.min == 0 && extra.all == 0;
        let open = self.g.text("{");
        let close = self.g.text("}");
        let full = self.g.seq([open, self.ws, first, self.ws, close]);
        let mut branches = vec![full];
        if can_be_empty {
            branches.push(self.g.seq([open, self.ws, close]));
        }
        Ok(self.g.alt(branches))
    }

    /// Properties in any order: one rule per set of declared properties written (and count).
    /// Refused past the options' limits (`unkeyed`: why no key set holds the object, if one
    /// could have).
    // Long: one table of rules per set of properties written and count, declared before any is
    // defined (they refer to each other); the bit layout of sets is shared by every step.
    fn unordered(
        &mut self,
        members: &[(ExprId, bool)],
        extra: Undeclared,
        counts: Counts,
        pointer: &str,
        unkeyed: Option<&str>,
    ) -> Result<ExprId, CompileError> {
        // Witnesses count as more required members, written among the undeclared ones: their
        // bits are `n` on.
        let n = members.len();
        let bits = n + extra.all.count_ones() as usize;
        let sets = u32::try_from(bits)
            .ok()
            .and_then(|b| 1u64.checked_shl(b))
            .unwrap_or(u64::MAX);
        let cap = counts.cap(n, extra.any.is_some());
        // A rule per set and count, declared before any is defined: checked first.
        let rules_needed = sets.saturating_mul(cap);
        if n > self.c.opts.max_any_order_properties {
            let wide = self.wide_rules.saturating_add(rules_needed);
            if wide > self.c.opts.wide_any_order_rules {
                let instead = unkeyed.map_or_else(String::new, |why| {
                    format!("; the matcher cannot keep its names instead: {why}")
                });
                return Err(error(
                    CompileErrorKind::Limit,
                    pointer,
                    format!(
                        "{n} properties in any order need {rules_needed} grammar rules (limit: \
                         {} properties, and {} rules for wider objects, {} taken){instead}",
                        self.c.opts.max_any_order_properties,
                        self.c.opts.wide_any_order_rules,
                        self.wide_rules,
                    ),
                ));
            }
            self.wide_rules = wide;
        }
        // Within both limits n is at most 20: the sets fit a word.
        let witness_bits = extra.all << n;
        self.c
            .limits
            .check(LimitKind::GrammarSize, self.g.len() as u64 + rules_needed)
            .map_err(|e| over(e, pointer, "properties in any order"))?;
        let required: u64 = members
            .iter()
            .enumerate()
            .filter(|(_, (_, r))| *r)
            .map(|(i, _)| 1u64 << i)
            .sum::<u64>()
            | witness_bits;
        let comma = self.punct(",");
        // rule (set, c): continuations after writing `set` and c members (c >= 1).
        self.rule_groups += 1;
        let id = self.rule_groups;
        let prefix = self.prefix.clone();
        let name = |set: u64, c: u64| format!("{prefix}props {id} {set:b} {c}");
        // Each rule called: built into the automata that reach them, all `2^n` sets were one
        // automaton built on the object's first use (0.5 s of one mask on JsonSchemaStore's
        // execution-environment); called, only the sets written are built.
        let mut rules = HashMap::new();
        for set in 0..sets {
            for c in 1..=cap {
                let rule = self.g.rule(&name(set, c));
                self.g.keep_called(rule);
                rules.insert((set, c), rule);
            }
        }
        let step = |lw: &mut Self, set: u64, c: u64| -> ExprId {
            // Choices after `set` with c written, the separator in front of each choice given.
            let mut branches = Vec::new();
            if counts.max.is_none_or(|mx| c < mx) {
                let c1 = (c + 1).min(cap).max(1);
                for (i, &(m, _)) in members.iter().enumerate() {
                    if set & (1 << i) == 0 {
                        let next = lw.g.rule_ref(rules[&(set | 1 << i, c1)]);
                        branches.push((m, next));
                    }
                }
                if let Some(x) = extra.any {
                    let next = lw.g.rule_ref(rules[&(set, c1)]);
                    branches.push((x, next));
                }
                for &(w, marks) in &extra.marked {
                    let next = lw.g.rule_ref(rules[&(set | marks << n, c1)]);
                    branches.push((w, next));
                }
            }
            let mut out = Vec::new();
            for (m, next) in branches {
                out.push(lw.g.seq([m, next]));
            }
            lw.g.alt(out)
        };
        for set in 0..sets {
            for c in 1..=cap {
                let choices = step(self, set, c);
                let more = self.g.seq([comma, choices]);
                let done = set & required == required && c >= counts.min.min(cap);
                let body = match done {
                    true => {
                        let e = self.g.empty();
                        self.g.alt([more, e])
                    }
                    false => more,
                };
                self.g.define(rules[&(set, c)], body)?;
            }
            self.check_size()?;
        }
        let first = step(self, 0, 0);
        let open = self.g.text("{");
        let close = self.g.text("}");
        let full = self.g.seq([open, self.ws, first, self.ws, close]);
        let mut branches = vec![full];
        if required == 0 && counts.min == 0 {
            branches.push(self.g.seq([open, self.ws, close]));
        }
        Ok(self.g.alt(branches))
    }
}

/// What the grammar of an object is made of once its members are: the member expressions
/// (required or not), the undeclared ones and the counts. Objects with equal parts have
/// equal grammars, so each is built once: intersections make many copies of an object,
/// equal but for their address (an overlapping `oneOf` of five objects made 1,872 objects
/// of 307 kinds, each chain of members built again expression by expression).
#[derive(PartialEq, Eq, Hash)]
pub(super) struct Chain {
    members: Vec<(ExprId, bool)>,
    extra: Undeclared,
    counts: Counts,
    /// The key set the matcher holds its names to (in any order).
    keys: Option<u32>,
}

/// The members undeclared properties of an object are written as.
#[derive(Clone, Default, PartialEq, Eq, Hash)]
struct Undeclared {
    /// Any of them (`None`: there may be none).
    any: Option<ExprId>,
    /// Those that are witnesses, each with the set of witnesses it is (bit `j`: witness `j`).
    marked: Vec<(ExprId, u64)>,
    /// Every witness of the object: each must be among the marks of a member written.
    all: u64,
    /// Every name not declared is one of them (whatever patterns it matches).
    every_name: bool,
    /// Otherwise, with patterns and no `propertyNames`: the names they are, decoded.
    matching: Option<Arc<CharDfa>>,
}

/// A class of undeclared names (see [`key_classes`]): the set of patterns they match (bit
/// `i`: pattern `i`), their keys lowered, and their automaton.
pub(super) type KeyClass = (usize, ExprId, Arc<CharDfa>);

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct Counts {
    min: u64,
    max: Option<u64>,
}

impl Counts {
    /// The largest count of properties worth telling apart: beyond it only "at least this many"
    /// matters. Without interleaved additional properties the count never passes `declared`.
    fn cap(&self, declared: usize, interleaved: bool) -> u64 {
        let bound = self.max.unwrap_or(0).max(self.min);
        match interleaved {
            true => bound.max(1),
            false => bound.min(declared as u64).max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use crate::cfg::{CfgCompiler, CfgConfig};
    use crate::front::json_schema::{compile_schema_within, JsonSchemaOptions};
    use crate::limits::{Deadline, Limits};
    use crate::vocab::Vocab;

    /// Deadline ticks of the front end on `schema`: its units of work.
    fn work(schema: &Value) -> u32 {
        let deadline = Deadline::never();
        let limits = Limits::new();
        compile_schema_within(schema, &JsonSchemaOptions::new(), &limits, &deadline).unwrap();
        deadline.ticks()
    }

    /// Deadline ticks of the Earley backend compiling the front end's grammar of `schema`:
    /// mostly the NFA fragments it builds, one per expression per continuation.
    fn backend_work(schema: &Value) -> u32 {
        let limits = Limits::new();
        let compiled = compile_schema_within(
            schema,
            &JsonSchemaOptions::new(),
            &limits,
            &Deadline::never(),
        )
        .unwrap();
        let bytes: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        let vocab = Vocab::from_token_bytes(bytes, &[], &[]).unwrap();
        let compiler = CfgCompiler::new(&vocab, CfgConfig::new());
        let deadline = Deadline::never();
        compiler
            .compile_within(&compiled.grammar, &deadline)
            .unwrap();
        deadline.ticks()
    }

    /// Arrays with an item that is not an empty object, twice over (MaskBench's
    /// `Handwritten---allIt4`): every witness of the negations is an object whose keys run
    /// two key automata per object shape, each state's classes holding every control
    /// character. Their escapes spelled one branch each, the units running them in parallel
    /// built ~29,600 NFA states each (2.3M visited by the subset construction of each, 139k
    /// ticks in all); spelled as a trie, ~5,800 each (640k visited, 87k ticks).
    #[test]
    fn key_automata_spell_their_escapes_once() {
        let not_only_empty = |pattern: &str| json!({"not": {"items": {"patternProperties": {pattern: false}, "additionalProperties": false}}});
        let schema = json!({
            "type": "array",
            "allOf": [not_only_empty("ab"), not_only_empty("cd")],
            "maxItems": 2,
        });
        let work = backend_work(&schema);
        assert!(work < 110_000, "{work}");
    }

    /// An object of 30 long property names (any other name allowed), in `allOf` with a
    /// union of `copies` branches: one copy of the object per branch, each with those names.
    fn copies_of_one_object(copies: usize) -> Value {
        let properties: serde_json::Map<String, Value> = (0..30)
            .map(|i| {
                (
                    format!("{i:02}_a_property_name_long_enough_to_weigh"),
                    json!({}),
                )
            })
            .collect();
        let variants: Vec<Value> = (0..copies)
            .map(|i| json!({"properties": {"00_a_property_name_long_enough_to_weigh": {"const": i}}}))
            .collect();
        json!({"type": "object", "properties": properties, "allOf": [{"anyOf": variants}]})
    }

    /// An object whose one property is an object of 100 properties, in `allOf` with a union
    /// of `copies` branches that tag it: one copy of the outer object per branch, each
    /// holding the same inner object.
    fn copies_around_one_object(copies: usize) -> Value {
        let inner: serde_json::Map<String, Value> = (0..100)
            .map(|i| (format!("field_{i}"), json!({"type": "integer"})))
            .collect();
        let variants: Vec<Value> = (0..copies)
            .map(|i| json!({"properties": {"tag": {"const": i}}}))
            .collect();
        json!({
            "type": "object",
            "properties": {"inner": {"type": "object", "properties": inner}, "tag": {}},
            "allOf": [{"anyOf": variants}],
        })
    }

    /// The inner object is one shape in every copy and lowered once: each copy costs ~60
    /// units of work, where lowering the inner object's 100 members again cost ~360 more
    /// (the grammar's size tells nothing here: the builder interns equal expressions).
    #[test]
    fn an_object_shared_by_copies_is_lowered_once() {
        let one = work(&copies_around_one_object(1));
        let sixteen = work(&copies_around_one_object(16));
        assert!(one > 2 * 360, "{one}: the inner object should weigh");
        assert!(sixteen < one + 15 * 150, "{one} -> {sixteen}");
    }

    /// The keys of undeclared properties (a trie of the declared names, a unit of work or two
    /// per character: ~2,300 here) are built once for every copy of an object with the same
    /// names: each copy ~160 units more (~2,500 when each built its trie).
    #[test]
    fn copies_of_an_object_share_the_keys_of_its_undeclared_properties() {
        let one = work(&copies_of_one_object(1));
        let sixteen = work(&copies_of_one_object(16));
        assert!(one > 2_500, "{one}: the trie should weigh");
        assert!(sixteen < one + 15 * 1_000, "{one} -> {sixteen}");
    }

    /// Rules of the grammar of `schema` whose name contains `part`.
    fn rules_named(schema: &Value, part: &str) -> usize {
        let (limits, deadline) = (Limits::new(), Deadline::never());
        let compiled =
            compile_schema_within(schema, &JsonSchemaOptions::new(), &limits, &deadline).unwrap();
        let rules = compiled.grammar.rules();
        rules.iter().filter(|r| r.name.contains(part)).count()
    }

    /// An object with two patterns (undeclared names of three kinds) in `allOf` with a union
    /// of `copies` branches that tag one of its properties: one copy of the object per branch,
    /// each with the same names and patterns.
    fn copies_with_patterns(copies: usize) -> Value {
        let variants: Vec<Value> = (0..copies)
            .map(|i| json!({"properties": {"tag": {"const": i}}}))
            .collect();
        json!({
            "type": "object",
            "properties": {"tag": {}, "name": {"type": "string"}},
            "patternProperties": {"^x_[0-9]+$": {"type": "integer"}, "^y": {"type": "string"}},
            "allOf": [{"anyOf": variants}],
        })
    }

    /// The classes of undeclared names (each pattern's automaton built, intersected with the
    /// others' and lowered to a rule per state) are built once for every copy of an object
    /// with the same names and patterns: the copies' key automata are one set of rules, where
    /// each copy wrote its own.
    #[test]
    fn copies_of_an_object_share_the_keys_of_its_patterns() {
        let one = rules_named(&copies_with_patterns(1), "json key automaton");
        assert!(one > 0, "the patterns' keys should be automata");
        let eight = rules_named(&copies_with_patterns(8), "json key automaton");
        assert_eq!(eight, one);
    }
}
