//! `uniqueItems` over free strings and strings whose length is counted, kept by the matcher:
//! where such arrays and strings are in a document, as an automaton over JSON paths
//! ([`TrackedPaths`]).
//!
//! The grammar of such an array is the array without `uniqueItems`; the matcher keeps the
//! strings written in it and refuses a repeat (`matcher::json_state`). That is exact when every
//! value that may be an array at some path is held to the same rule there, so each state of
//! the automaton is the set of shapes a value at its paths may have (the union of the
//! branches reaching it), and a state where one branch holds an array to distinct free
//! strings while another allows repeated items is refused. Its states are within
//! [`Limits::automaton_states`] (a `Limit` error past it) and the compile-time budget. The sets over-approximate (the names matching a
//! `patternProperties` entry, the items of a tuple, all share one step), which can only make
//! a state refused, never a rule wrong: every array shape of the true set is in the
//! over-approximated one.
//!
//! Strings whose `maxLength` the matcher counts (`lower::strings`, where a pattern times its
//! length is too big an automaton) are held the same way: a state where one branch's string
//! is counted and another branch allows other strings is refused.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::sync::Arc;

use foldhash::{HashMap, HashMapExt, HashSet, HashSetExt};
use serde_json::Value;

use super::lower::{string_automaton, ContentKey, DistinctSubsets};
use super::schema::{over, Compiler};
use super::shape::{ArrayShape, ObjectShape, RefId, Shape};
use crate::error::{CompileError, Location};
use crate::front::chars::CharDfa;
use crate::front::guard::guarded;
use crate::ir::{ExprId, GrammarBuilder};
use crate::limits::{LimitKind, Limits};
use crate::matcher::json_state::{
    spelled, unspelled, KeyGroup, KeySet, ListedStrings, NameClasses, PathNode, PathState,
    TrackedPaths, VariantTest, MAX_GROUP_NAMES, MAX_VARIANTS, UNTRACKED,
};

type NodeId = usize;

/// Most values of a list of strings whose distinct items the matcher keeps (an `enum`): a
/// mask looks each prefix up in it by bisection.
pub(super) const MAX_LISTED_VALUES: usize = 4_096;

/// A name that tells the key sets of a group apart by its value: per key set, the tests of
/// its objects' values there (a value keeps the key sets whose tests it passes one of).
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) struct Discriminator {
    name: Box<[u8]>,
    tests: Vec<(u32, ValueTest)>,
}

impl Discriminator {
    /// Are some of its values objects of key sets of their own?
    fn is_nested(&self) -> bool {
        self.tests
            .iter()
            .any(|(_, t)| matches!(t, ValueTest::Nested(_)))
    }
}

/// How the matcher tells whether a value written is one of an object's values for a name.
#[derive(Clone, PartialEq, Eq, Hash)]
pub(super) enum ValueTest {
    /// Scalars of a list, as [`listed`] gives them.
    Listed(Listed),
    /// Every value.
    Every,
    /// The values of this expression: read whole, from their first byte to their last, by
    /// its automaton (see [`Compiler::value_automaton`]).
    Automaton(ExprId),
    /// The strings of any characters of this expression, their characters counted against
    /// its bound (see [`Compiler::value_lengths`]).
    Lengths(ExprId),
    /// Objects of these key sets (ascending), held by the group of the place of the value:
    /// the variant is left if the object closes as one of them.
    Nested(Vec<u32>),
}

/// The key sets (and the objects holding them) a value of a name in an object may be, if
/// every value it may be is an object with a key set (see [`Paths::nested`]).
type Nested<'n> = &'n dyn Fn(usize, &[u8]) -> Option<Vec<(u32, NodeId)>>;

/// Scalars of a list, as [`listed`] gives them.
type Listed = Box<[Box<[u8]>]>;

/// An object lowered in any order with a key set: the set's number, and its values.
#[derive(Clone)]
pub(super) struct KeyedObject {
    pub set: u32,
    pub values: Rc<KeyValues>,
}

/// The values of an object's members: by declared name as spelled (those with a value), and
/// of undeclared names if admitted. Objects of different key sets at one place may share it
/// if they agree on the value of every name two of them admit, or give it values the matcher
/// can test (a discriminator, see `matcher::json_state::keys` and [`MemberValue::test`]).
pub(super) struct KeyValues {
    named: HashMap<Box<[u8]>, MemberValue>,
    others: Option<MemberValue>,
}

/// A member's value: its expression (`None`: every value), and its values if it is a list
/// of scalars (`enum`, `const`), each as the matcher reads it (see [`listed`]), or its
/// lengths if it is strings of any characters within a `minLength` and a `maxLength`
/// (whose grammar is exactly that, a counted loop of characters). The expression of an
/// opaque value is the whole member, name included: compared, never read.
#[derive(Clone)]
pub(super) struct MemberValue {
    expr: Option<ExprId>,
    listed: Option<Rc<[Box<[u8]>]>>,
    lengths: Option<(u64, u64)>,
    opaque: bool,
}

impl MemberValue {
    pub fn of(expr: ExprId, shape: &Shape) -> MemberValue {
        let listed = match shape {
            Shape::Values(vs) => vs.iter().map(listed).collect::<Option<Rc<[_]>>>(),
            _ => None,
        };
        let lengths = match shape {
            Shape::String(s)
                if s.regexes.is_empty() && s.forbidden.is_empty() && s.exclude.is_empty() =>
            {
                s.max.map(|max| (s.min, max))
            }
            _ => None,
        };
        let expr = (!matches!(shape, Shape::Any)).then_some(expr);
        MemberValue {
            expr,
            listed,
            lengths,
            opaque: false,
        }
    }

    /// Every value.
    fn every() -> MemberValue {
        MemberValue {
            expr: None,
            listed: None,
            lengths: None,
            opaque: false,
        }
    }

    /// Values known only by `member`, the expression of the members that hold them (the
    /// undeclared names of an object with patterns: which value a name takes depends on it).
    pub fn opaque(member: ExprId) -> MemberValue {
        MemberValue {
            expr: Some(member),
            listed: None,
            lengths: None,
            opaque: true,
        }
    }

    /// The test the matcher tells it by (`None`: none can).
    fn test(
        &self,
        c: &mut Compiler,
        arena: &GrammarBuilder,
    ) -> Result<Option<ValueTest>, CompileError> {
        Ok(match (&self.listed, self.expr) {
            (Some(listed), _) => Some(ValueTest::Listed(listed.iter().cloned().collect())),
            (None, None) => Some(ValueTest::Every),
            (None, Some(_)) if self.opaque => None,
            (None, Some(e)) => match (c.value_automaton(arena, e)?, self.lengths) {
                (Some(_), _) => Some(ValueTest::Automaton(e)),
                (None, Some((min, max))) => c
                    .value_lengths(e, min, max)?
                    .map(|_| ValueTest::Lengths(e)),
                (None, None) => None,
            },
        })
    }
}

/// A scalar of a list as the matcher reads a discriminator's value: as the grammar writes
/// it, a string quoted and escaped, an integer, `true`, `false` or `null` (each one way, but
/// zero also as `-0`, which the matcher reads as `0`); `None` for other values. Compared as
/// written, not decoded: where another variant's strings take escapes, `"\u0061"` is no
/// spelling of the listed `"a"`.
fn listed(v: &Value) -> Option<Box<[u8]>> {
    Some(match v {
        Value::String(_) | Value::Bool(_) | Value::Null => v.to_string().into_bytes().into(),
        Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string().into_bytes().into(),
        _ => return None,
    })
}

impl KeyValues {
    pub fn new(named: Vec<(String, MemberValue)>, others: Option<MemberValue>) -> KeyValues {
        KeyValues {
            named: named.into_iter().map(|(n, v)| (spelled(&n), v)).collect(),
            others,
        }
    }

    /// The value of the name spelled `name` (`None`: an undeclared one).
    fn value(&self, name: Option<&[u8]>) -> Option<&MemberValue> {
        name.and_then(|n| self.named.get(n))
            .or(self.others.as_ref())
    }
}

/// A shape reduced to the steps of a path.
enum Node {
    /// No array, object or string below.
    Leaf,
    /// Strings the matcher does not count.
    Strings,
    /// Strings whose length the matcher counts: the bound's number, where it was given.
    Counted(u32, Arc<str>),
    /// Every value: arrays with repeated items included.
    Any,
    /// An array of distinct strings (its `uniqueItems` at this pointer), free or listed.
    Distinct(Arc<str>, DistinctStrings),
    /// An array of these items; `repeats` if it may hold two equal strings (a matcher
    /// keeping its strings apart would refuse it); `strings`, a constant's items if all are
    /// strings (a matcher keeping a list's values apart refuses other items).
    Array {
        items: Vec<NodeId>,
        repeats: bool,
        strings: Option<Box<[Box<[u8]>]>>,
    },
    Object(ObjectNode),
    /// Values of any of these (`anyOf`, a reference).
    Union(Vec<NodeId>),
}

/// An object's steps: by declared name; undeclared names by the patterns they match (each
/// pattern's automaton, `None` past its budget), else `additional`; and `witnesses`, which
/// any undeclared name may be. `keys` the key set its names are held to, if in any order.
struct ObjectNode {
    named: Vec<(String, NodeId)>,
    additional: Option<NodeId>,
    patterns: Vec<(Option<Rc<CharDfa>>, NodeId)>,
    witnesses: Vec<NodeId>,
    keys: Option<KeyedObject>,
}

impl ObjectNode {
    /// What an undeclared name may be, whatever patterns it matches.
    fn rest(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.additional
            .iter()
            .copied()
            .chain(self.patterns.iter().map(|&(_, x)| x))
            .chain(self.witnesses.iter().copied())
    }

    /// What an undeclared name matching the patterns `matching` says (by index) may be.
    fn undeclared(&self, matching: impl Fn(usize) -> bool) -> Vec<NodeId> {
        let mut ids: Vec<NodeId> = (0..self.patterns.len())
            .filter(|&i| matching(i))
            .map(|i| self.patterns[i].1)
            .collect();
        if ids.is_empty() {
            ids.extend(self.additional);
        }
        ids.extend(self.witnesses.iter().copied());
        ids
    }

    /// What a value of the name `name` may be.
    fn property(&self, name: &str, exact: bool) -> Vec<NodeId> {
        match self.named.iter().find(|(n, _)| n == name) {
            Some(&(_, x)) => vec![x],
            None if exact => self.undeclared(|i| {
                self.patterns[i]
                    .0
                    .as_ref()
                    .is_some_and(|dfa| dfa.matches(name))
            }),
            None => self.rest().collect(),
        }
    }
}

/// The strings of an array whose items the matcher keeps apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum DistinctStrings {
    /// Infinitely many from every prefix.
    Free,
    /// Values of a list of strings (an `enum`).
    Listed(Arc<ListedStrings>),
}

impl Compiler<'_> {
    /// How the matcher keeps apart the items of `a`, an array of distinct items
    /// (`uniqueItems` at `at`), if it does: free strings, or a list of at least `minItems`
    /// plain strings (an `enum`): any such list while `list_all` holds (the first pass),
    /// then only those whose subsets the grammar cannot hold (see `lower::DistinctSubsets`).
    /// The lowering and the path automaton both ask, so both agree.
    pub fn distinct_by_matcher(
        &mut self,
        a: &ArrayShape,
        at: &str,
    ) -> Result<Option<DistinctStrings>, CompileError> {
        if !self.state_by_matcher || !a.prefix.is_empty() || !a.witnesses.is_empty() {
            return Ok(None);
        }
        let Some(values) = self.finite_values(&a.items, MAX_LISTED_VALUES, at)? else {
            return Ok(self
                .free_strings(&a.items)?
                .then_some(DistinctStrings::Free));
        };
        let fit = !self.list_all && DistinctSubsets::fit(&values, a.max, 0);
        if fit || (values.len() as u64) < a.min {
            return Ok(None);
        }
        let strings: Option<Vec<Box<[u8]>>> = values
            .iter()
            .map(|v| v.as_str().map(|s| s.as_bytes().into()))
            .collect();
        Ok(strings
            .and_then(ListedStrings::new)
            .map(|l| DistinctStrings::Listed(Arc::new(l))))
    }

    /// Are `items` free strings (infinitely many values from every prefix, see the module)?
    /// Strings whose automaton reaches a loop from every state (no `maxLength`; patterns and
    /// formats that never run out), through references and unions.
    pub fn free_strings(&mut self, items: &Shape) -> Result<bool, CompileError> {
        let mut strings = false;
        Ok(self.only_free_strings(items, &mut HashSet::new(), &mut strings)? && strings)
    }

    /// Recursion: as deep as unions and references nest, each level guarded (a reference is
    /// followed once).
    fn only_free_strings(
        &mut self,
        shape: &Shape,
        followed: &mut HashSet<RefId>,
        strings: &mut bool,
    ) -> Result<bool, CompileError> {
        guarded(|| match shape {
            Shape::Never => Ok(true),
            Shape::String(s) => {
                *strings = true;
                if s.max.is_none() && s.regexes.is_empty() && s.forbidden.is_empty() {
                    return Ok(true);
                }
                let dfa = string_automaton(s, &self.char_budget())
                    .map_err(|(at, e)| e.or_at(Location::JsonPointer(at)))?;
                Ok(dfa.infinite_from_every_state())
            }
            Shape::AnyOf(xs) => {
                for x in xs {
                    if !self.only_free_strings(x, followed, strings)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Shape::Ref(r) if !followed.insert(*r) => Ok(true),
            Shape::Ref(r) => {
                let target = self.deref(*r)?;
                self.only_free_strings(&target, followed, strings)
            }
            _ => Ok(false),
        })
    }

    /// The path automaton of a document of shape `root`, whose distinct arrays, counted
    /// strings and objects in any order the matcher keeps (`None` where there are none to
    /// keep); `arena` holds the grammar `root` was lowered into (the discriminators' value
    /// automata read it).
    pub fn tracked_paths(
        &mut self,
        root: &Shape,
        arena: &GrammarBuilder,
    ) -> Result<Option<TrackedPaths>, CompileError> {
        let mut nodes = Nodes::default();
        let start = nodes.add(self, root)?;
        while let Some((id, r)) = nodes.refs_todo.pop() {
            let target = self.deref(r)?;
            let inner = nodes.add(self, &target)?;
            nodes.nodes[id] = Node::Union(vec![inner]);
        }
        let reaches = nodes.reaching_tracked();
        Paths {
            nodes: &nodes,
            reaches: &reaches,
            arena,
            limits: self.limits,
            states: HashMap::new(),
            built: Vec::new(),
            todo: Vec::new(),
            classes: HashMap::new(),
            unions: RefCell::default(),
        }
        .build(self, start)
    }
}

#[derive(Default)]
struct Nodes {
    nodes: Vec<Node>,
    refs: HashMap<RefId, NodeId>,
    refs_todo: Vec<(NodeId, RefId)>,
    objects: HashMap<*const ObjectShape, NodeId>,
}

impl Nodes {
    fn push(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    /// The node of `shape`; references are left for the worklist. Recursion: as deep as the
    /// shape nests, each level guarded.
    fn add(&mut self, c: &mut Compiler, shape: &Shape) -> Result<NodeId, CompileError> {
        guarded(|| {
            c.tick("")?;
            Ok(match shape {
                Shape::Null | Shape::Boolean | Shape::Number(_) | Shape::Never => {
                    self.push(Node::Leaf)
                }
                Shape::String(s) => match c.counted_strings.get(&ContentKey::of(s, false)) {
                    Some((bound, at)) => self.push(Node::Counted(*bound, at.clone())),
                    None => self.push(Node::Strings),
                },
                Shape::Values(vs) => {
                    let mut ids = Vec::with_capacity(vs.len());
                    for v in vs {
                        ids.push(self.add_value(c, v)?);
                    }
                    self.push(Node::Union(ids))
                }
                Shape::Any => self.push(Node::Any),
                Shape::Ref(r) => match self.refs.get(r) {
                    Some(&id) => id,
                    None => {
                        let id = self.push(Node::Union(Vec::new()));
                        self.refs.insert(*r, id);
                        self.refs_todo.push((id, *r));
                        id
                    }
                },
                Shape::AnyOf(xs) => {
                    let mut ids = Vec::with_capacity(xs.len());
                    for x in xs {
                        ids.push(self.add(c, x)?);
                    }
                    self.push(Node::Union(ids))
                }
                Shape::Array(a) => self.add_array(c, a)?,
                Shape::Object(o) => match self.objects.get(&Rc::as_ptr(o)) {
                    Some(&id) => id,
                    None => {
                        let keys = c.keyed_objects.get(&Rc::as_ptr(o)).cloned();
                        let id = self.add_object(c, o, keys)?;
                        self.objects.insert(Rc::as_ptr(o), id);
                        id
                    }
                },
            })
        })
    }

    fn add_array(&mut self, c: &mut Compiler, a: &ArrayShape) -> Result<NodeId, CompileError> {
        if let Some(at) = a.distinct() {
            if let Some(strings) = c.distinct_by_matcher(a, at)? {
                let at = a.unique.clone().unwrap_or_default();
                return Ok(self.push(Node::Distinct(at, strings)));
            }
        }
        let mut items = Vec::new();
        for s in a.prefix.iter().chain([&*a.items]).chain(&a.witnesses) {
            items.push(self.add(c, s)?);
        }
        Ok(self.push(Node::Array {
            items,
            repeats: true,
            strings: None,
        }))
    }

    /// The node of a constant (`enum`, `const`): its arrays and objects are steps like those
    /// of any other shape, since a constant array with two equal strings is a valid value
    /// where another branch wants distinct ones. Recursion: as deep as the value nests, each
    /// level guarded.
    fn add_value(&mut self, c: &mut Compiler, value: &Value) -> Result<NodeId, CompileError> {
        guarded(|| {
            c.tick("")?;
            Ok(match value {
                Value::Array(xs) => {
                    let mut items = Vec::with_capacity(xs.len());
                    for x in xs {
                        items.push(self.add_value(c, x)?);
                    }
                    let strings: Vec<&str> = xs.iter().filter_map(Value::as_str).collect();
                    let distinct: HashSet<&str> = strings.iter().copied().collect();
                    let repeats = distinct.len() < strings.len();
                    let strings = (strings.len() == xs.len())
                        .then(|| strings.iter().map(|s| s.as_bytes().into()).collect());
                    self.push(Node::Array {
                        items,
                        repeats,
                        strings,
                    })
                }
                Value::Object(map) => {
                    let mut named = Vec::with_capacity(map.len());
                    for (name, x) in map {
                        named.push((name.clone(), self.add_value(c, x)?));
                    }
                    self.push(Node::Object(ObjectNode {
                        named,
                        additional: None,
                        patterns: Vec::new(),
                        witnesses: Vec::new(),
                        keys: None,
                    }))
                }
                Value::String(_) => self.push(Node::Strings),
                _ => self.push(Node::Leaf),
            })
        })
    }

    fn add_object(
        &mut self,
        c: &mut Compiler,
        o: &ObjectShape,
        keys: Option<KeyedObject>,
    ) -> Result<NodeId, CompileError> {
        let mut named = Vec::with_capacity(o.properties.len());
        for (name, s) in &o.properties {
            named.push((name.clone(), self.add(c, s)?));
        }
        let additional = Some(self.add(c, &o.additional)?);
        let mut patterns = Vec::with_capacity(o.patterns.len());
        for (p, s) in &o.patterns {
            // Past its budget, names are not told apart by it (every pattern's values, as
            // for any name).
            let dfa = p.automaton(&c.char_budget()).ok().map(Rc::new);
            c.tick(&o.pointer)?;
            patterns.push((dfa, self.add(c, s)?));
        }
        let mut witnesses = Vec::with_capacity(o.witnesses.len());
        for (_, s) in &o.witnesses {
            witnesses.push(self.add(c, s)?);
        }
        Ok(self.push(Node::Object(ObjectNode {
            named,
            additional,
            patterns,
            witnesses,
            keys,
        })))
    }

    fn children(&self, id: NodeId) -> Vec<NodeId> {
        match &self.nodes[id] {
            Node::Leaf | Node::Strings | Node::Counted(..) | Node::Any | Node::Distinct(..) => {
                Vec::new()
            }
            Node::Array { items: xs, .. } | Node::Union(xs) => xs.clone(),
            Node::Object(o) => o.named.iter().map(|(_, x)| *x).chain(o.rest()).collect(),
        }
    }

    /// Which nodes have a distinct array, a counted string or an object with a key set at or
    /// below them (a fixpoint over the parents).
    fn reaching_tracked(&self) -> Vec<bool> {
        let mut parents = vec![Vec::new(); self.nodes.len()];
        for id in 0..self.nodes.len() {
            for child in self.children(id) {
                parents[child].push(id);
            }
        }
        let mut reaches = vec![false; self.nodes.len()];
        let mut todo: Vec<NodeId> = (0..self.nodes.len())
            .filter(|&id| {
                matches!(
                    self.nodes[id],
                    Node::Distinct(..)
                        | Node::Counted(..)
                        | Node::Object(ObjectNode { keys: Some(_), .. })
                )
            })
            .collect();
        todo.iter().for_each(|&id| reaches[id] = true);
        while let Some(id) = todo.pop() {
            for &p in &parents[id] {
                if !reaches[p] {
                    reaches[p] = true;
                    todo.push(p);
                }
            }
        }
        reaches
    }
}

/// The key group of a place where objects `keyed` may be (`None` for an object without a key
/// set), and any value if `any`. Objects of several key sets are its variants if they agree
/// on the value of every name two key sets admit, or tell each other apart by it (see
/// [`discriminators`]); otherwise, or beside an object without a key set or any value, the
/// key sets are unkeyed (see [`unkey`]). Any value there is never a variant admitting every
/// name: it comes from a branch chosen before the place (an open object's undeclared name
/// beside another object's declared one), which the names written in the object cannot tell.
fn key_group(
    c: &mut Compiler,
    arena: &GrammarBuilder,
    keyed: &[Option<&KeyedObject>],
    nested: Nested,
    any: bool,
) -> Result<Option<u32>, CompileError> {
    let mut sets: Vec<u32> = keyed.iter().flatten().map(|k| k.set).collect();
    if sets.is_empty() {
        return Ok(None);
    }
    sets.sort_unstable();
    sets.dedup();
    let names: BTreeSet<&[u8]> = sets
        .iter()
        .flat_map(|&k| c.key_sets[k as usize].0.names())
        .collect();
    // Undeclared names read by an automaton: one for the group, taking none of its declared
    // names (a prefix it can take must be one of a name not written yet, see `Others`).
    let mut matching = sets
        .iter()
        .filter_map(|&k| c.key_sets[k as usize].0.others_matching());
    let one_automaton = match matching.next() {
        None => true,
        Some(first) => {
            matching.all(|m| m == first)
                && !names
                    .iter()
                    .any(|n| unspelled(n).is_some_and(|n| first.matches(&n)))
        }
    };
    let discriminators = match one_automaton
        && !any
        && keyed.iter().all(Option::is_some)
        && sets.len() <= MAX_VARIANTS
        && names.len() <= MAX_GROUP_NAMES
    {
        true => discriminators(c, arena, keyed, nested)?,
        false => None,
    };
    // `maxProperties` drops a variant when its count is reached (or only its required
    // names have room) while the grammar, which counts nothing, still takes that variant's
    // values: a discriminator's value is only checked once whole, so a mask would take the
    // first bytes of a value only a dropped variant admits.
    let bounded = sets.iter().any(|&k| c.key_sets[k as usize].0.is_bounded());
    let discriminators = discriminators
        .filter(|d| d.is_empty() || !bounded)
        .filter(|d| drops_in_step(d));
    let Some(discriminators) = discriminators else {
        for k in sets {
            unkey(
                c,
                k,
                "an object in any order at a place other objects share",
            )?;
        }
        return Ok(None);
    };
    let group = (sets, discriminators);
    let next = c.key_groups.len() as u32;
    Ok(Some(*c.key_group_ids.entry(group.clone()).or_insert_with(
        || {
            c.key_groups.push(group);
            next
        },
    )))
}

/// Does the tracker drop no variant of a group told apart by `discriminators` whose run the
/// grammar holds, where a later discriminator's value could begin with bytes only that
/// variant admits? An inner object's `}` keeps the outer variants bringing a key set it may
/// close as, which its required names decide: the grammar, which checks none, still holds the
/// others' runs, and a value is checked only once whole. So beside a discriminator of objects
/// another is held only if one variant alone brings objects of its own key sets (the one such
/// a `}` may drop) and every other variant admits every value of every discriminator (so
/// whatever is left admits what the dropped one did, objects included).
fn drops_in_step(discriminators: &[Discriminator]) -> bool {
    let droppable: BTreeSet<u32> = discriminators
        .iter()
        .flat_map(|d| &d.tests)
        .filter(|(_, t)| matches!(t, ValueTest::Nested(_)))
        .map(|&(set, _)| set)
        .collect();
    droppable.is_empty()
        || discriminators.len() <= 1
        || droppable.len() == 1
            && discriminators
                .iter()
                .flat_map(|d| &d.tests)
                .all(|(set, t)| droppable.contains(set) || matches!(t, ValueTest::Every))
}

/// The discriminators of the objects `keyed` (all with key sets): names two key sets admit
/// with other values, each value one the matcher can test (see [`MemberValue::test`]);
/// `None` if some name two key sets admit has other values, one of them not so tested, if
/// the objects of one key set have other values for two such names, or if undeclared names
/// have other values.
fn discriminators(
    c: &mut Compiler,
    arena: &GrammarBuilder,
    keyed: &[Option<&KeyedObject>],
    nested: Nested,
) -> Result<Option<Vec<Discriminator>>, CompileError> {
    // With the index of each object among those of the place.
    let keyed: Vec<(usize, &KeyedObject)> = keyed
        .iter()
        .enumerate()
        .filter_map(|(i, k)| Some((i, (*k)?)))
        .collect();
    let names: BTreeSet<Box<[u8]>> = keyed
        .iter()
        .flat_map(|(_, k)| c.key_sets[k.set as usize].0.names())
        .map(Box::from)
        .collect();
    let mut out = Vec::new();
    // The key sets whose objects have different tests for a name.
    let mut split: HashSet<u32> = HashSet::new();
    for name in names.iter().map(|n| Some(&**n)).chain([None]) {
        let admitting: Vec<(usize, u32, &MemberValue)> = keyed
            .iter()
            .filter(|(_, k)| c.key_sets[k.set as usize].0.admits(name))
            .filter_map(|&(i, k)| Some((i, k.set, k.values.value(name)?)))
            .collect();
        let sets: BTreeSet<u32> = admitting.iter().map(|&(_, s, _)| s).collect();
        if sets.len() < 2 || admitting.windows(2).all(|w| w[0].2.expr == w[1].2.expr) {
            continue;
        }
        let Some(name) = name else {
            return Ok(None);
        };
        let mut tests = Vec::with_capacity(admitting.len());
        // Per key set of a nested value: the first object of it and the key set holding that,
        // and whether every other is that object, and whether every other is held by that
        // key set. A value closing as a key set keeps every variant bringing it, which is
        // exact if they all bring one object (one language), or if one variant brings them
        // all (the objects of a `dependencies` split, say).
        struct Held {
            object: NodeId,
            holder: u32,
            one_object: bool,
            one_holder: bool,
        }
        let mut held: HashMap<u32, Held> = HashMap::new();
        for (i, s, v) in admitting {
            // Objects of key sets are told apart by their own group, however small their
            // automaton: as one value read whole, the objects inside would be unkeyed where
            // the variants bring different ones.
            let test = match nested(i, name) {
                Some(objects) => {
                    for &(set, object) in &objects {
                        let h = held.entry(set).or_insert(Held {
                            object,
                            holder: s,
                            one_object: true,
                            one_holder: true,
                        });
                        h.one_object &= h.object == object;
                        h.one_holder &= h.holder == s;
                    }
                    let mut sets: Vec<u32> = objects.into_iter().map(|(set, _)| set).collect();
                    sets.sort_unstable();
                    sets.dedup();
                    ValueTest::Nested(sets)
                }
                None => match v.test(c, arena)? {
                    Some(test) => test,
                    None => return Ok(None),
                },
            };
            tests.push((s, test));
        }
        if held.values().any(|h| !h.one_object && !h.one_holder) {
            return Ok(None);
        }
        tests.sort_unstable_by_key(|&(s, _)| s);
        tests.dedup();
        for w in tests.windows(2).filter(|w| w[0].0 == w[1].0) {
            if !split.insert(w[0].0) {
                // Objects of one key set are one variant, kept while the value passes one of
                // their tests: that is one of them, unless they differ on another name too
                // (one passing this name's test and another the other's would keep it).
                return Ok(None);
            }
        }
        out.push(Discriminator {
            name: name.into(),
            tests,
        });
    }
    Ok(Some(out))
}

/// Most patterns of the objects at one place whose names are told apart by the patterns they
/// match, and most classes of names they make; past either, an undeclared name may be any
/// pattern's value or the additional one (an over-approximation: a place may be refused, no
/// rule lost).
const MAX_CLASS_PATTERNS: usize = 8;
const MAX_NAME_CLASSES: usize = 16;

/// The classes of undeclared names at a place where `objects` may be, by the patterns they
/// match (bit `i`: the `i`-th pattern of the objects in turn), each class nonempty; `None`
/// without patterns, or where they cannot all be told apart (an automaton past its budget,
/// too many patterns or classes).
fn name_classes(c: &Compiler, objects: &[&ObjectNode]) -> Result<Option<Vec<u64>>, CompileError> {
    let patterns: Vec<&Option<Rc<CharDfa>>> = objects
        .iter()
        .flat_map(|o| o.patterns.iter().map(|(dfa, _)| dfa))
        .collect();
    if patterns.is_empty() || patterns.len() > MAX_CLASS_PATTERNS {
        return Ok(None);
    }
    let budget = c.char_budget();
    let split = || -> Result<Option<Vec<u64>>, CompileError> {
        let mut classes = vec![(
            0u64,
            CharDfa::strings(&[], &budget)?.complement(budget.deadline)?,
        )];
        for (i, dfa) in patterns.iter().enumerate() {
            let Some(inside) = dfa else {
                return Ok(None);
            };
            let outside = inside.complement(budget.deadline)?;
            let mut next = Vec::with_capacity(classes.len() * 2);
            for (bits, names) in classes {
                for (part, bit) in [(&**inside, 1 << i), (&outside, 0)] {
                    let names = names.intersect(part, &budget)?;
                    if !names.is_empty() {
                        next.push((bits | bit, names));
                    }
                }
            }
            if next.len() > MAX_NAME_CLASSES {
                return Ok(None);
            }
            classes = next;
        }
        Ok(Some(classes.into_iter().map(|(bits, _)| bits).collect()))
    };
    match split() {
        Ok(classes) => Ok(classes),
        // Past the deadline: the compilation's error; past an automaton's budget: no classes.
        Err(e) if c.deadline.check().is_err() => Err(e),
        Err(_) => Ok(None),
    }
}

/// Key set `k` cannot be held where its objects are (`why`): the next pass lowers them as
/// `2^n` grammars, and the last one refuses them.
fn unkey(c: &mut Compiler, k: u32, why: &'static str) -> Result<(), CompileError> {
    let (set, at) = c.key_sets[k as usize].clone();
    if c.last_pass {
        // Every object is no object of the schema: the others of its group say where.
        return match set == KeySet::every_object() {
            true => Ok(()),
            false => c.unsupported(&at, why),
        };
    }
    if !c.newly_unkeyed.iter().any(|(s, _)| *s == set) {
        c.newly_unkeyed.push((set, why));
    }
    Ok(())
}

/// The subset construction over nodes.
struct Paths<'n> {
    nodes: &'n Nodes,
    reaches: &'n [bool],
    /// The grammar the shapes were lowered into (for the automata of discriminators' values).
    arena: &'n GrammarBuilder,
    /// Its states are within [`Limits::automaton_states`].
    limits: &'n Limits,
    /// Each set built so far, by its nodes (`Union`s expanded) and whether any value there
    /// is every object a nested discriminator tells apart (see [`Self::state_of`]).
    states: HashMap<(BTreeSet<NodeId>, bool), PathState>,
    built: Vec<PathNode>,
    todo: Vec<(PathState, BTreeSet<NodeId>, bool)>,
    /// [`name_classes`] of each list of objects met so far: states of one place in many
    /// contexts share their objects, and splitting the patterns' automata is most of a
    /// state's cost.
    classes: HashMap<Vec<NodeId>, Option<Vec<u64>>>,
    /// What [`Self::through_unions`] found, by node.
    unions: RefCell<HashMap<NodeId, Rc<BTreeSet<NodeId>>>>,
}

impl Paths<'_> {
    fn build(
        mut self,
        c: &mut Compiler,
        start: NodeId,
    ) -> Result<Option<TrackedPaths>, CompileError> {
        // The first state built is `ROOT`.
        let tracked = self.state(c, [start])? != UNTRACKED;
        while let Some((state, set, every_object)) = self.todo.pop() {
            c.tick("")?;
            let node = self.steps(c, &set, every_object)?;
            self.built[state as usize - 1] = node;
        }
        // A bound no state holds would leave its strings' length unchecked: refused like a
        // place another branch shares (the grammar does not bound them).
        let mut unheld: Vec<(u32, Arc<str>)> = c
            .counted_strings
            .values()
            .filter(|(bound, _)| !self.built.iter().any(|n| n.string == Some(*bound)))
            .cloned()
            .collect();
        unheld.sort_unstable();
        for (_, at) in unheld {
            if c.count_past < usize::MAX {
                c.recount = true;
                continue;
            }
            c.unsupported(
                &at,
                "`maxLength` counted by the matcher at a place it cannot follow",
            )?;
        }
        // An object lowered with a key set that no place holds (a copy the lowering made,
        // below the shapes walked here) would have its names unchecked.
        let mut unheld: Vec<u32> = c
            .keyed_objects
            .iter()
            .filter(|(o, _)| !self.nodes.objects.contains_key(*o))
            .map(|(_, k)| k.set)
            .collect();
        unheld.sort_unstable();
        unheld.dedup();
        for k in unheld {
            unkey(
                c,
                k,
                "an object in any order at a place the matcher cannot follow",
            )?;
        }
        // A nested discriminator's value is read by the group of its place: one holding the
        // key sets it names, at every place its group is.
        let mut unheld: Vec<u32> = Vec::new();
        for node in &self.built {
            let Some(g) = node.keys else { continue };
            let (sets, discriminators) = &c.key_groups[g as usize];
            for d in discriminators {
                let named: Vec<&u32> = d
                    .tests
                    .iter()
                    .filter_map(|(_, t)| match t {
                        ValueTest::Nested(inner) => Some(inner),
                        _ => None,
                    })
                    .flatten()
                    .collect();
                if named.is_empty() {
                    continue;
                }
                // A variant admitting every value brings every object there.
                let every = d.tests.iter().any(|(_, t)| matches!(t, ValueTest::Every));
                let every_object = c.key_set_ids.get(&KeySet::every_object());
                if every && every_object.is_none() {
                    unheld.extend(sets);
                    continue;
                }
                let named: Vec<&u32> = named
                    .into_iter()
                    .chain(every_object.filter(|_| every))
                    .collect();
                let decoded: Box<[u8]> =
                    unspelled(&d.name).map_or_else(|| d.name.clone(), |n| n.into_bytes().into());
                let at = node.named.get(&decoded).copied().unwrap_or(node.other);
                let held = at != UNTRACKED
                    && self.built[at as usize - 1].keys.is_some_and(|h| {
                        let inner = &c.key_groups[h as usize].0;
                        named.iter().all(|set| inner.binary_search(set).is_ok())
                    });
                if !held {
                    unheld.extend(sets);
                }
            }
        }
        unheld.sort_unstable();
        unheld.dedup();
        for k in unheld {
            unkey(
                c,
                k,
                "an object in any order whose value of a name is an object the matcher cannot follow",
            )?;
        }
        let groups = c
            .key_groups
            .iter()
            .map(|(sets, discriminators)| {
                let variants: Vec<&KeySet> =
                    sets.iter().map(|&k| &c.key_sets[k as usize].0).collect();
                let discriminators = discriminators.iter().map(|d| {
                    let tests = d.tests.iter().map(|(set, test)| {
                        let variant = sets.binary_search(set).expect("a set of the group");
                        let test = match test {
                            ValueTest::Listed(xs) => VariantTest::Listed(xs),
                            ValueTest::Every => VariantTest::Every,
                            ValueTest::Automaton(e) => VariantTest::Automaton(
                                c.value_automata[e].clone().expect("a value's automaton"),
                            ),
                            ValueTest::Lengths(e) => VariantTest::Lengths(
                                c.value_lengths[e].clone().expect("a value's bound"),
                            ),
                            ValueTest::Nested(inner) => VariantTest::Nested(inner),
                        };
                        (variant, test)
                    });
                    (&*d.name, tests.collect())
                });
                KeyGroup::new(&variants, discriminators.collect()).numbered(sets)
            })
            .collect();
        Ok(tracked
            .then(|| TrackedPaths::new(self.built, std::mem::take(&mut c.length_bounds), groups)))
    }

    /// The nodes other than unions that a value of `id` may be (through unions), found once
    /// per node: the states of one place in many contexts ask for the same nodes.
    fn through_unions(&self, id: NodeId) -> Rc<BTreeSet<NodeId>> {
        if let Some(found) = self.unions.borrow().get(&id) {
            return found.clone();
        }
        let start = id;
        let mut out = BTreeSet::new();
        let mut todo = vec![id];
        let mut seen = HashSet::new();
        while let Some(id) = todo.pop() {
            if !seen.insert(id) {
                continue;
            }
            match &self.nodes.nodes[id] {
                Node::Union(xs) => todo.extend(xs),
                _ => {
                    out.insert(id);
                }
            }
        }
        let out = Rc::new(out);
        self.unions.borrow_mut().insert(start, out.clone());
        out
    }

    /// The key sets a value of the name spelled `name` in object `o` may be, with the object
    /// of each, if every value it may be is an object with a key set (`None` otherwise, or
    /// for a name `o` does not declare).
    fn nested(&self, o: &ObjectNode, name: &[u8]) -> Option<Vec<(u32, NodeId)>> {
        let &(_, value) = o.named.iter().find(|(n, _)| *spelled(n) == *name)?;
        let objects: Option<Vec<(u32, NodeId)>> = self
            .through_unions(value)
            .iter()
            .map(|&id| match &self.nodes.nodes[id] {
                Node::Object(ObjectNode { keys: Some(k), .. }) => Some((k.set, id)),
                _ => None,
            })
            .collect();
        objects.filter(|o| !o.is_empty())
    }

    /// The key sets of the objects among `nodes`.
    fn key_sets_in(&self, nodes: &BTreeSet<NodeId>) -> BTreeSet<u32> {
        nodes
            .iter()
            .filter_map(|&x| match &self.nodes.nodes[x] {
                Node::Object(ObjectNode { keys: Some(k), .. }) => Some(k.set),
                _ => None,
            })
            .collect()
    }

    /// The state of the values of any of `ids`.
    ///
    /// Objects of other key sets brought by two of `ids` (items of two arrays or of one
    /// tuple, one name's values in two objects of a union) are not the choice of the object
    /// written there but of a branch taken before (the grammar keeps each array's items, each
    /// object's values, to its branch), which the names written cannot tell: as variants of
    /// one group, a name one branch requires would be taken for the other's. Their key sets
    /// are unkeyed.
    fn state(
        &mut self,
        c: &mut Compiler,
        ids: impl IntoIterator<Item = NodeId>,
    ) -> Result<PathState, CompileError> {
        self.state_of(c, ids, false)
    }

    /// [`Self::state`], where a nested discriminator tells apart the objects that branches
    /// chosen before bring (`told_apart`: the value of such a discriminator's name).
    fn state_of(
        &mut self,
        c: &mut Compiler,
        ids: impl IntoIterator<Item = NodeId>,
        told_apart: bool,
    ) -> Result<PathState, CompileError> {
        // What each id reaches through unions, walked once for the key sets it brings and the
        // state's set.
        let reached: Vec<Rc<BTreeSet<NodeId>>> =
            ids.into_iter().map(|id| self.through_unions(id)).collect();
        let brought: Vec<BTreeSet<u32>> = reached
            .iter()
            .map(|nodes| self.key_sets_in(nodes))
            .filter(|sets| !sets.is_empty())
            .collect();
        if !told_apart && brought.windows(2).any(|w| w[0] != w[1]) {
            let sets: BTreeSet<u32> = brought.into_iter().flatten().collect();
            for k in sets {
                unkey(
                    c,
                    k,
                    "an object in any order at a place objects of other branches share",
                )?;
            }
        }
        let mut set: BTreeSet<NodeId> = reached.iter().flat_map(|r| r.iter().copied()).collect();
        set.retain(|&id| !matches!(self.nodes.nodes[id], Node::Leaf));
        if !set.iter().any(|&id| self.reaches[id]) {
            return Ok(UNTRACKED);
        }
        // Any value there comes from the variants whose value of the name is any: with
        // the discriminator's provenance, it is every object, a variant of the place's group.
        let every_object = told_apart
            && set
                .iter()
                .any(|&id| matches!(self.nodes.nodes[id], Node::Any));
        let key = (set, every_object);
        if let Some(&s) = self.states.get(&key) {
            return Ok(s);
        }
        self.limits
            .check(LimitKind::AutomatonStates, self.built.len() as u64 + 1)
            .map_err(|e| {
                over(
                    e,
                    "",
                    "the automaton of the places where the matcher keeps state",
                )
            })?;
        self.built.push(PathNode::default());
        let s = self.built.len() as PathState;
        self.states.insert(key.clone(), s);
        self.todo.push((s, key.0, key.1));
        Ok(s)
    }

    /// The steps of the state of `set` (`every_object`: any value there is every object, a
    /// variant of the place's group, see [`Self::state_of`]).
    fn steps(
        &mut self,
        c: &mut Compiler,
        set: &BTreeSet<NodeId>,
        every_object: bool,
    ) -> Result<PathNode, CompileError> {
        let nodes = self.nodes;
        // Every value includes those of every step below it.
        let any = set
            .iter()
            .copied()
            .find(|&id| matches!(nodes.nodes[id], Node::Any));
        let mut distinct: Option<(&Arc<str>, &DistinctStrings)> = None;
        // Distinct arrays of different strings.
        let mut mixed = false;
        let mut repeating = any.is_some();
        // Other arrays: constants' strings if all are (a list's values or not).
        let mut arrays: Vec<Option<&[Box<[u8]>]>> = Vec::new();
        let mut counted: Option<(u32, &Arc<str>)> = None;
        let mut other_strings = any.is_some();
        let mut items = Vec::new();
        let mut names: BTreeSet<&str> = BTreeSet::new();
        let mut objects = Vec::new();
        let mut object_ids = Vec::new();
        let mut keyed: Vec<Option<&KeyedObject>> = Vec::new();
        for &id in set {
            match &nodes.nodes[id] {
                Node::Distinct(at, strings) => {
                    if distinct.is_some_and(|(_, other)| other != strings) {
                        mixed = true;
                    }
                    distinct = Some((at, strings));
                }
                Node::Array {
                    items: xs,
                    repeats,
                    strings,
                } => {
                    repeating |= *repeats;
                    arrays.push(strings.as_deref());
                    items.extend(xs);
                }
                Node::Object(o) => {
                    names.extend(o.named.iter().map(|(n, _)| n.as_str()));
                    objects.push(o);
                    object_ids.push(id);
                    keyed.push(o.keys.as_ref());
                }
                Node::Counted(bound, at) => match counted {
                    Some((b, _)) if b != *bound => other_strings = true,
                    _ => counted = Some((*bound, at)),
                },
                Node::Strings => other_strings = true,
                Node::Leaf | Node::Any | Node::Union(_) => {}
            }
        }
        if let Some((_, at)) = counted.filter(|_| other_strings) {
            match c.count_past < usize::MAX {
                true => c.recount = true,
                false => c.unsupported(
                    at,
                    "`maxLength` of a pattern too big to count in the grammar, where another branch allows other strings at the same place",
                )?,
            }
            counted = None;
        }
        // Items a list's values kept apart refuse: strings not in it (their prefixes are
        // refused as dead), or items that are not strings (a `,` is refused past the list's
        // length). A constant array of distinct values of the list is one of its arrays.
        let foreign = match distinct {
            Some((_, DistinctStrings::Listed(list))) => arrays
                .iter()
                .any(|strings| !strings.is_some_and(|vs| vs.iter().all(|v| list.contains(v)))),
            _ => false,
        };
        let listed = matches!(distinct, Some((_, DistinctStrings::Listed(_))));
        if (mixed || repeating || foreign) && listed && c.list_all {
            // Lists the grammar holds, lowered as `2^n` grammars in the next pass.
            c.relist = true;
            distinct = None;
        }
        let conflict = [
            (foreign, "`uniqueItems` over a list of strings where another branch allows arrays of other items at the same place"),
            (mixed, "`uniqueItems` over strings where another branch holds other strings distinct at the same place"),
            (repeating, "`uniqueItems` over strings where another branch allows arrays with repeated items at the same place"),
        ]
        .into_iter()
        .find_map(|(found, why)| found.then_some(why));
        if let (Some((at, _)), Some(why)) = (distinct, conflict) {
            c.unsupported(at, why)?;
            distinct = None;
        }
        let every = match every_object {
            true => c
                .key_set_id(KeySet::every_object(), "")
                .ok()
                .map(|set| KeyedObject {
                    set,
                    values: Rc::new(KeyValues::new(Vec::new(), Some(MemberValue::every()))),
                }),
            false => None,
        };
        keyed.extend(every.as_ref().map(Some));
        let nested = |i: usize, name: &[u8]| self.nested(objects.get(i)?, name);
        let keys = key_group(
            c,
            self.arena,
            &keyed,
            &nested,
            any.is_some() && every.is_none(),
        )?;
        // The names whose values are objects a nested discriminator tells apart: objects of
        // other key sets brought there by the variants are its own to tell.
        let told_apart: HashSet<Box<[u8]>> = keys.map_or_else(HashSet::new, |g| {
            c.key_groups[g as usize]
                .1
                .iter()
                .filter(|d| d.is_nested())
                .map(|d| d.name.clone())
                .collect()
        });
        items.extend(any);
        let item = self.state(c, items)?;
        let classes = match self.classes.get(&object_ids) {
            Some(classes) => classes.clone(),
            None => {
                let classes = name_classes(c, &objects)?;
                self.classes.insert(object_ids, classes.clone());
                classes
            }
        };
        let (other, classes) = match classes {
            Some(classes) => {
                // The matcher's own maps, std's.
                let mut states = std::collections::HashMap::new();
                for bits in classes {
                    let mut ids: Vec<NodeId> = any.into_iter().collect();
                    let mut first = 0;
                    for o in &objects {
                        ids.extend(o.undeclared(|i| bits >> (first + i) & 1 == 1));
                        first += o.patterns.len();
                    }
                    states.insert(bits, self.state(c, ids)?);
                }
                let patterns = objects
                    .iter()
                    .flat_map(|o| o.patterns.iter())
                    .map(|(dfa, _)| dfa.as_deref().expect("every pattern's automaton").clone())
                    .collect();
                let other = states.get(&0).copied().unwrap_or(UNTRACKED);
                (other, Some(Arc::new(NameClasses::new(patterns, states))))
            }
            None => {
                let mut others: Vec<NodeId> = objects.iter().flat_map(|o| o.rest()).collect();
                others.extend(any);
                (self.state(c, others)?, None)
            }
        };
        let mut named = std::collections::HashMap::new();
        for name in names {
            let mut ids: Vec<NodeId> = any.into_iter().collect();
            for o in &objects {
                ids.extend(o.property(name, classes.is_some()));
            }
            let s = self.state_of(c, ids, told_apart.contains(&spelled(name)))?;
            // Without classes, a name not listed is any other name.
            if s != other || classes.is_some() {
                named.insert(name.as_bytes().into(), s);
            }
        }
        Ok(PathNode {
            named,
            other,
            classes,
            item,
            distinct: distinct.is_some(),
            listed: distinct.and_then(|(_, strings)| match strings {
                DistinctStrings::Listed(list) => Some(list.clone()),
                DistinctStrings::Free => None,
            }),
            string: counted.map(|(bound, _)| bound),
            keys,
        })
    }
}
