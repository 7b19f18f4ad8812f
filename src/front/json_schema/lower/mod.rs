//! Shapes to grammar IR: JSON syntax, whitespace, shape dispatch, numbers, arrays, fixed
//! values and `$ref` rules. Strings are in [`strings`], objects (property order, counts,
//! undeclared properties, witnesses) in [`objects`].

mod objects;
mod strings;

use foldhash::{HashMap, HashMapExt};
use std::rc::Rc;

use serde_json::Value;

use super::multiples;
use super::numbers::{self, Bound, Decimal};
use super::schema::Compiler;
use super::shape::{ArrayShape, NumberShape, ObjectShape, RefId, Shape, StringShape};
use super::strings::JsonText;
use super::tracked::MAX_LISTED_VALUES;
use super::Whitespace;
use crate::base::byteset::ByteSet;
use crate::error::{CompileError, Location};
use crate::front::chars::{Budget, CharDfa};
use crate::front::guard::{guarded, over_time, tick};
use crate::front::regex::Utf8;
use crate::ir::{Expr, ExprId, Grammar, GrammarBuilder, RuleId};
use crate::limits::{Deadline, LimitKind};
pub(super) use strings::{
    string_automaton, strings_automaton, ContentKey, MAX_PRODUCT_STATES_BEFORE_COUNTING,
};

/// Most states of the automaton of one string's constraints together (patterns, lengths,
/// excluded values; see [`CharDfa`](crate::front::chars::CharDfa)), and of one key automaton: each state is a rule, and a
/// length far past a pattern's own (`maxLength: 100000`) multiplies its states. Lower still if
/// [`Limits::automaton_states`](crate::Limits) is.
const MAX_STRING_STATES: usize = 4096;

/// Builds the IR of shapes, one rule per `$ref` target.
pub(crate) struct SchemaLowering<'c, 'a, 'g> {
    pub c: &'c mut Compiler<'a>,
    g: &'g mut GrammarBuilder,
    /// Prefix of every rule name, so several schemas can share one builder.
    prefix: String,
    text: JsonText,
    keys: JsonText,
    ws: ExprId,
    ref_rules: HashMap<RefId, RuleId>,
    /// References whose rule is declared but not defined yet: lowered one after another by
    /// [`root`](Self::root), never inside the shape that refers to them, so a chain of
    /// references costs no nesting.
    pending: Vec<(RefId, RuleId)>,
    any_value: Option<RuleId>,
    /// Character automata lowered so far (each one's rules get its number).
    automata: usize,
    /// Groups of rules (objects in any order, runs of members with witnesses) lowered so far:
    /// each one's rules get its number. The grammar's size was that number, but a group can
    /// add no expression (all its choices impossible), so the next group took the same one
    /// and defined its rules again.
    rule_groups: usize,
    /// Rules the `2^n` grammars of objects past `max_any_order_properties` took so far (see
    /// [`JsonSchemaOptions::wide_any_order_rules`](super::JsonSchemaOptions)).
    wide_rules: u64,
    /// The expression of each number shape with steps lowered so far, by its fields.
    numbers: HashMap<String, ExprId>,
    /// The contents of each string shape with patterns, formats or excluded values, built
    /// once: a schema repeats one shape on many properties (a format, `.+`, an id pattern),
    /// and each copy of an automaton was its own set of rules, so its own units, compiled
    /// and walked again by the backend.
    contents: HashMap<ContentKey, ExprId>,
    /// The keys of undeclared properties for each set of declared names (sorted), built once
    /// (see [`keys_not_in`](Self::keys_not_in)).
    undeclared_keys: HashMap<Vec<String>, ExprId>,
    /// The classes of undeclared names of each object by what decides them, each with its
    /// keys lowered, built once: every copy of an object an intersection makes had its
    /// patterns' automata built, intersected and lowered again, its own rules for the
    /// backend to build.
    key_classes: HashMap<objects::ClassesKey, Rc<[objects::KeyClass]>>,
    /// The automaton of each name pattern by its identity (format or regex, and its text):
    /// objects with different names often share patterns (OCDS's `^description_…$` on a
    /// dozen objects), and the subset construction of one was a sixth of such a compile.
    name_automata: HashMap<(bool, String), CharDfa>,
    /// The expression of each object shape lowered so far, by address (the shape held, so
    /// the address stays its own; see [`shared_object`](Self::shared_object)).
    objects: HashMap<*const ObjectShape, (Rc<ObjectShape>, ExprId)>,
    /// The expression of each object lowered so far, by what its grammar is made of (see
    /// [`objects::Chain`]).
    chains: HashMap<objects::Chain, ExprId>,
    /// Lowering an object `enum`/`const` value in any order (no key set: see
    /// [`value`](Self::value)).
    fixed_object: bool,
}

impl<'c, 'a, 'g> SchemaLowering<'c, 'a, 'g> {
    pub fn new(c: &'c mut Compiler<'a>, g: &'g mut GrammarBuilder, prefix: &str) -> Self {
        let ws = match c.opts.whitespace {
            Whitespace::Compact => g.empty(),
            Whitespace::Flexible { max_run } => {
                let mut set = ByteSet::EMPTY;
                for b in [b' ', b'\t', b'\n', b'\r'] {
                    set.insert(b);
                }
                let class = g.class(set);
                g.repeat(class, 0, max_run)
            }
        };
        SchemaLowering {
            c,
            g,
            prefix: prefix.to_string(),
            text: JsonText::values(),
            keys: JsonText::keys(),
            ws,
            ref_rules: HashMap::new(),
            pending: Vec::new(),
            any_value: None,
            automata: 0,
            rule_groups: 0,
            wide_rules: 0,
            numbers: HashMap::new(),
            contents: HashMap::new(),
            undeclared_keys: HashMap::new(),
            key_classes: HashMap::new(),
            name_automata: HashMap::new(),
            objects: HashMap::new(),
            chains: HashMap::new(),
            fixed_object: false,
        }
    }

    /// The budget of one character automaton.
    fn budget(&self) -> Budget<'a> {
        self.c.char_budget()
    }

    /// The expression of the root shape, with the rule of every reference it needs.
    pub fn root(&mut self, s: &Shape) -> Result<ExprId, CompileError> {
        let e = self.shape(s)?;
        while let Some((r, rule)) = self.pending.pop() {
            let shape = self.c.resolve(r)?;
            let body = self.shape(&shape)?;
            self.g.define(rule, body)?;
        }
        Ok(e)
    }

    /// `ws text ws`: a punctuation mark with the whitespace allowed around it.
    fn punct(&mut self, text: &str) -> ExprId {
        let t = self.g.text(text);
        self.g.seq([self.ws, t, self.ws])
    }

    /// `Ok` while the grammar is within [`Limits::grammar_size`](crate::Limits), and the
    /// deadline has not passed.
    fn check_size(&mut self) -> Result<(), CompileError> {
        tick(self.c.deadline)?;
        self.c
            .limits
            .check(LimitKind::GrammarSize, self.g.len() as u64)
            .map_err(|e| CompileError::over_limit(e, Location::None, "the schema's grammar"))
    }

    /// Recursion: as deep as the shape nests (its schema's nesting, plus the references
    /// intersections inlined, all bounded when it was built), each level guarded.
    fn shape(&mut self, s: &Shape) -> Result<ExprId, CompileError> {
        guarded(|| self.shape_step(s))
    }

    fn shape_step(&mut self, s: &Shape) -> Result<ExprId, CompileError> {
        self.check_size()?;
        let e = match s {
            Shape::Any => {
                let r = self.any_value()?;
                self.g.rule_ref(r)
            }
            Shape::Never => self.g.nothing(),
            Shape::Null => self.g.text("null"),
            Shape::Boolean => {
                let t = self.g.text("true");
                let f = self.g.text("false");
                self.g.alt([t, f])
            }
            Shape::Values(vs) => {
                let mut branches = Vec::new();
                for v in vs {
                    tick(self.c.deadline)?;
                    branches.push(self.value(v)?);
                }
                self.g.alt(branches)
            }
            Shape::Number(n) if n.has_steps() => self.divisible(n)?,
            Shape::Number(n) => match n.integer {
                true => numbers::integer(self.g, n.lo.as_ref(), n.hi.as_ref()),
                false => numbers::number(self.g, n.lo.as_ref(), n.hi.as_ref()),
            },
            Shape::String(st) => self.string(st, false)?,
            Shape::Array(a) => self.array(a)?,
            Shape::Object(o) => self.shared_object(o)?,
            Shape::AnyOf(xs) => {
                let mut branches = Vec::new();
                for x in xs {
                    branches.push(self.shape(x)?);
                }
                self.g.alt(branches)
            }
            Shape::Ref(r) => {
                let rule = self.ref_rule(*r);
                self.g.rule_ref(rule)
            }
        };
        self.check_size()?;
        Ok(e)
    }

    /// An object shape, lowered once however many shapes share it: intersections put the same
    /// object in every branch they make (a property's object in every copy of the object
    /// around it), and each copy wrote its grammar again. A shape that warned is lowered at
    /// each use, so each use reports it.
    fn shared_object(&mut self, o: &Rc<ObjectShape>) -> Result<ExprId, CompileError> {
        if let Some(&(_, e)) = self.objects.get(&Rc::as_ptr(o)) {
            return Ok(e);
        }
        let warnings = self.c.warnings.len();
        let e = self.object(o)?;
        if self.c.warnings.len() == warnings {
            self.objects.insert(Rc::as_ptr(o), (o.clone(), e));
        }
        Ok(e)
    }

    /// A number with divisibility constraints: the automaton of its plain literals (see
    /// `multiples.rs`), lowered once per distinct shape.
    fn divisible(&mut self, n: &NumberShape) -> Result<ExprId, CompileError> {
        let key = format!(
            "{} {:?} {:?} {:?} {:?}",
            n.integer, n.lo, n.hi, n.multiple, n.not_multiples
        );
        if let Some(&e) = self.numbers.get(&key) {
            return Ok(e);
        }
        let e = match multiples::automaton(n, &self.budget()) {
            Ok(dfa) => {
                self.automata += 1;
                let name = format!("{}json number automaton {}", self.prefix, self.automata);
                // No state of a number automaton takes every string.
                let never = self.g.nothing();
                dfa.lower(&name, self.g, &mut Utf8, never, self.c.deadline)?
            }
            Err(e) => {
                let at = n.steps_pointer.as_deref().unwrap_or_default();
                self.c
                    .tolerate(e.or_at(Location::JsonPointer(at.to_string())))?;
                // Lenient: the bounds alone.
                match n.integer {
                    true => numbers::integer(self.g, n.lo.as_ref(), n.hi.as_ref()),
                    false => numbers::number(self.g, n.lo.as_ref(), n.hi.as_ref()),
                }
            }
        };
        self.numbers.insert(key, e);
        Ok(e)
    }

    /// The rule of reference `r`, its body left to [`root`](Self::root)'s worklist.
    fn ref_rule(&mut self, r: RefId) -> RuleId {
        if let Some(&rule) = self.ref_rules.get(&r) {
            return rule;
        }
        // Entries may share a name (a shape met twice at one place with a reference being
        // read, and intersections of such): the builder finds rules by name, so a second
        // entry would define the first's rule again.
        let base = format!("{}ref {}", self.prefix, self.c.refs[r].name);
        let mut name = base.clone();
        // Each try is a new name, so this ends within as many tries as there are rules.
        for k in 0.. {
            if self.g.find_rule(&name).is_none() {
                break;
            }
            name = format!("{base} (entry {r}.{k})");
        }
        let rule = self.g.rule(&name);
        self.ref_rules.insert(r, rule);
        self.pending.push((r, rule));
        rule
    }

    /// Any JSON value (recursive rules, built once).
    fn any_value(&mut self) -> Result<RuleId, CompileError> {
        if let Some(r) = self.any_value {
            return Ok(r);
        }
        let value = self.g.rule(&format!("{}json value", self.prefix));
        self.any_value = Some(value);
        let v = self.g.rule_ref(value);
        // A string without patterns, lengths or exclusions needs no automaton; it fails only
        // once the grammar is over a limit.
        let key = self.string(&StringShape::default(), true)?;
        let string = self.string(&StringShape::default(), false)?;
        let colon = self.punct(":");
        let member = self.g.seq([key, colon, v]);
        let object = self.delimited("{", "}", member, 0, None);
        let array = self.delimited("[", "]", v, 0, None);
        let number = numbers::number(self.g, None, None);
        let t = self.g.text("true");
        let f = self.g.text("false");
        let n = self.g.text("null");
        let body = self.g.alt([object, array, string, number, t, f, n]);
        // Declared just above, under the guard of `any_value`: fails only over a limit.
        self.g.define(value, body)?;
        Ok(value)
    }

    /// `open ws (item (, item){min-1,max-1})? ws close` with `min..=max` items.
    fn delimited(
        &mut self,
        open: &str,
        close: &str,
        item: ExprId,
        min: u64,
        max: Option<u64>,
    ) -> ExprId {
        let o = self.g.text(open);
        let c = self.g.text(close);
        let comma = self.punct(",");
        let more = self.g.seq([comma, item]);
        let rest = self.g.repeat(
            more,
            clamp(min.saturating_sub(1)),
            max.map(|m| clamp(m.saturating_sub(1))),
        );
        let items = self.g.seq([self.ws, item, rest, self.ws]);
        let full = self.g.seq([o, items, c]);
        let mut branches = Vec::new();
        if min == 0 {
            branches.push(self.g.seq([o, self.ws, c]));
        }
        if max != Some(0) {
            branches.push(full);
        }
        self.g.alt(branches)
    }

    /// A fixed value: strings in canonical form, numbers in every notation of their value,
    /// an object's members in its own order, or with objects in any order
    /// ([`super::PropertyOrder::is_any`]) in every order (as an object of required
    /// properties, each with its one value: within
    /// [`JsonSchemaOptions::max_any_order_properties`](super::JsonSchemaOptions), like any
    /// object). Recursion: as deep as `v` nests (held to the nesting limit when the schema
    /// was read), each level guarded.
    fn value(&mut self, v: &Value) -> Result<ExprId, CompileError> {
        guarded(|| self.value_step(v))
    }

    fn value_step(&mut self, v: &Value) -> Result<ExprId, CompileError> {
        Ok(match v {
            Value::Number(n) => {
                let b = Bound {
                    value: Decimal::from_json(n),
                    strict: false,
                };
                // An integral value is written as an integer: `1.0` is no integer in draft 4.
                match b.value.is_integer() {
                    true => numbers::integer(self.g, Some(&b), Some(&b)),
                    false => numbers::number(self.g, Some(&b), Some(&b)),
                }
            }
            Value::Array(xs) => {
                // Whitespace as around any array's items, or inside an empty one.
                let mut parts = vec![self.g.text("["), self.ws];
                for (i, x) in xs.iter().enumerate() {
                    if i > 0 {
                        parts.push(self.punct(","));
                    }
                    parts.push(self.value(x)?);
                }
                if !xs.is_empty() {
                    parts.push(self.ws);
                }
                parts.push(self.g.text("]"));
                self.g.seq(parts)
            }
            Value::Object(map) if map.len() > 1 && self.c.opts.property_order.is_any() => {
                let fixed = Rc::new(ObjectShape {
                    properties: map
                        .iter()
                        .map(|(k, x)| (k.clone(), Shape::Values(vec![x.clone()])))
                        .collect(),
                    required: map.keys().cloned().collect(),
                    additional: Box::new(Shape::Never),
                    ..ObjectShape::any("")
                });
                // A shape of its own, at no place the matcher follows: a `2^n` grammar.
                let keyed = std::mem::replace(&mut self.fixed_object, true);
                let e = self.object(&fixed);
                self.fixed_object = keyed;
                e?
            }
            Value::Object(map) => {
                let mut parts = vec![self.g.text("{"), self.ws];
                for (i, (k, x)) in map.iter().enumerate() {
                    if i > 0 {
                        parts.push(self.punct(","));
                    }
                    parts.push(self.g.text(&Value::from(k.as_str()).to_string()));
                    parts.push(self.punct(":"));
                    parts.push(self.value(x)?);
                }
                if !map.is_empty() {
                    parts.push(self.ws);
                }
                parts.push(self.g.text("}"));
                self.g.seq(parts)
            }
            other => self.g.text(&other.to_string()),
        })
    }

    /// A reference to a rule whose body is `body`, named `what` and after the (hash-consed)
    /// expression, so equal bodies share one rule and different ones never do; the empty and
    /// the impossible expression stay as they are.
    fn named(&mut self, what: &str, body: ExprId) -> Result<ExprId, CompileError> {
        if matches!(self.g.expr(body), Expr::Empty | Expr::Nothing) {
            return Ok(body);
        }
        let name = format!("{}{what} {}", self.prefix, body.index());
        let rule = match self.g.find_rule(&name) {
            Some(r) => r,
            None => {
                let r = self.g.rule(&name);
                self.g.define(r, body)?;
                r
            }
        };
        Ok(self.g.rule_ref(rule))
    }

    // Long: an array's parts in order (count bounds, witness marks, the prefix's tail rules
    // built from the end), each reading the bounds and marks computed before it.
    fn array(&mut self, a: &ArrayShape) -> Result<ExprId, CompileError> {
        let max = match *a.items {
            Shape::Never => Some(
                a.max
                    .map_or(a.prefix.len() as u64, |m| m.min(a.prefix.len() as u64)),
            ),
            _ => a.max,
        };
        // Witnesses are items past the prefix: there is one at least.
        let min = match a.witnesses.is_empty() {
            true => a.min,
            false => a.min.max(a.prefix.len() as u64 + 1),
        };
        if max.is_some_and(|m| m < min) {
            return Ok(self.g.nothing());
        }
        if let Some(at) = a.distinct().filter(|_| max.is_none_or(|m| m > 1)) {
            if let Some(e) = self.distinct_items(a, at, min, max)? {
                return Ok(e);
            }
        }
        let items = self.shape(&a.items)?;
        let mut marked = Vec::new();
        for marks in 1..1u64 << a.witnesses.len() {
            let mut value = (*a.items).clone();
            for (j, w) in a.witnesses.iter().enumerate() {
                if marks >> j & 1 == 1 {
                    value = self.c.intersect(&value, w, "")?;
                }
            }
            if !matches!(value, Shape::Never) {
                marked.push((self.shape(&value)?, marks));
            }
        }
        let all = (1u64 << a.witnesses.len()) - 1;
        let n = a.prefix.len() as u64;
        let witnessed = match all {
            0 => None,
            _ => {
                let hi = max.map(|m| m.saturating_sub(n));
                Some(self.witnessed_run(Some(items), &marked, all, 0, min - n, hi)?)
            }
        };
        if a.prefix.is_empty() {
            let Some((_, first)) = witnessed else {
                return Ok(self.delimited("[", "]", items, min, max));
            };
            let open = self.g.text("[");
            let close = self.g.text("]");
            return Ok(self.g.seq([open, self.ws, first, self.ws, close]));
        }
        let mut prefix = Vec::new();
        for p in &a.prefix {
            prefix.push(self.shape(p)?);
        }
        // tail(i): what follows once i items were written; built from the end of the prefix.
        let comma = self.punct(",");
        let more = self.g.seq([comma, items]);
        let after = match (max, witnessed) {
            (_, Some((run, _))) => run,
            (Some(m), None) if m <= n => self.g.empty(),
            _ => self.g.repeat(
                more,
                clamp(min.saturating_sub(n)),
                max.map(|m| clamp(m - n)),
            ),
        };
        let mut tail = after;
        for i in (1..prefix.len()).rev() {
            let i64_ = i as u64;
            if max.is_some_and(|m| i64_ >= m) {
                tail = self.g.empty();
                continue;
            }
            let step = self.g.seq([comma, prefix[i], tail]);
            tail = if i64_ < min {
                step
            } else {
                self.g.optional(step)
            };
        }
        let open = self.g.text("[");
        let close = self.g.text("]");
        // `prefix` is not empty: an array without one returned above.
        let full = self.g.seq([open, self.ws, prefix[0], tail, self.ws, close]);
        let mut branches = Vec::new();
        if min == 0 {
            branches.push(self.g.seq([open, self.ws, close]));
        }
        if max != Some(0) {
            branches.push(full);
        }
        Ok(self.g.alt(branches))
    }
}

impl SchemaLowering<'_, '_, '_> {
    /// An array whose items are pairwise distinct (`uniqueItems` at `at`), `min..=max` of
    /// them: when its items admit finitely many values `V`, a run over the values in which
    /// each is written at most once, one rule per subset of `V` written (and of witnesses
    /// seen), within [`MAX_DISTINCT_SIZE`]. Two spellings of one value (`0`, `-0`) are one
    /// value's, and a spelling belongs to one value only, so arrays whose items are distinct
    /// as spellings are the arrays whose items are distinct as values. `None` when lenient
    /// dropped `uniqueItems`, or when the matcher keeps the items apart (free strings and
    /// lists of strings, see [`Compiler::distinct_by_matcher`]): the array is then lowered
    /// without it.
    fn distinct_items(
        &mut self,
        a: &ArrayShape,
        at: &str,
        min: u64,
        max: Option<u64>,
    ) -> Result<Option<ExprId>, CompileError> {
        if !a.prefix.is_empty() {
            self.c.unsupported(
                at,
                "`uniqueItems` with items given by position (`prefixItems`, an array of `items`)",
            )?;
            return Ok(None);
        }
        if self.c.distinct_by_matcher(a, at)?.is_some() {
            // The matcher keeps the strings written (`matcher::json_state`).
            self.c.relies_on_matcher = true;
            return Ok(None);
        }
        let Some(values) = self.c.finite_values(&a.items, MAX_DISTINCT_VALUES, at)? else {
            self.c.unsupported(
                at,
                format!(
                    "`uniqueItems` whose items admit more than {MAX_DISTINCT_VALUES} values (told apart by the grammar among finitely many: enums, booleans, small integer ranges; by the engine's matchers among free strings and lists of at most {MAX_LISTED_VALUES} strings)"
                ),
            )?;
            return Ok(None);
        };
        let n = values.len() as u64;
        let subsets = DistinctSubsets::of(&values, max, a.witnesses.len());
        if subsets.size > MAX_DISTINCT_SIZE {
            self.c.unsupported(
                at,
                format!(
                    "`uniqueItems` over {n} values, up to {} of them: {} sets of values written, each spelling the values' {} bytes, about {} automaton states (limit: {MAX_DISTINCT_SIZE})",
                    subsets.longest, subsets.rules, subsets.spelled, subsets.size
                ),
            )?;
            return Ok(None);
        }
        // Bit `j` of a member's marks: witness `j`; the bits above: the value itself.
        let w = a.witnesses.len();
        let mut marked = Vec::with_capacity(values.len());
        for (i, v) in values.iter().enumerate() {
            let mut marks = 1u64 << (w + i);
            for (j, witness) in a.witnesses.iter().enumerate() {
                if self.c.accepts(witness, v, at)? {
                    marks |= 1 << j;
                }
            }
            marked.push((self.value(v)?, marks));
        }
        let all = (1u64 << w) - 1;
        let (_, first) = self.witnessed_run(None, &marked, all, !all, min, max)?;
        let open = self.g.text("[");
        let close = self.g.text("]");
        let mut branches = vec![self.g.seq([open, self.ws, first, self.ws, close])];
        if min == 0 {
            branches.push(self.g.seq([open, self.ws, close]));
        }
        Ok(Some(self.g.alt(branches)))
    }
}

/// The grammar of an array of distinct items over finitely many values: one rule per subset
/// of the values an array may hold, times the sets of witnesses.
pub(super) struct DistinctSubsets {
    /// Most values an array holds.
    pub longest: u64,
    /// Rules: subsets of at most `longest` values, times the sets of witnesses (saturating).
    pub rules: u64,
    /// Bytes of the values' spellings, each with a separator.
    pub spelled: u64,
    /// About as many automaton states: each rule spells the values it may still write.
    pub size: u64,
}

impl DistinctSubsets {
    pub fn of(values: &[Value], max: Option<u64>, witnesses: usize) -> DistinctSubsets {
        let n = values.len() as u64;
        let longest = max.map_or(n, |m| m.min(n));
        // At most `MAX_WITNESSES` (4) witnesses.
        let rules = subsets(n, longest).saturating_mul(1 << witnesses);
        let spelled: u64 = values.iter().map(|v| v.to_string().len() as u64 + 1).sum();
        DistinctSubsets {
            longest,
            rules,
            spelled,
            size: rules.saturating_mul(spelled),
        }
    }

    /// Does the grammar hold them (within [`MAX_DISTINCT_SIZE`] and [`MAX_DISTINCT_VALUES`])?
    pub fn fit(values: &[Value], max: Option<u64>, witnesses: usize) -> bool {
        values.len() <= MAX_DISTINCT_VALUES
            && DistinctSubsets::of(values, max, witnesses).size <= MAX_DISTINCT_SIZE
    }
}

impl<'a> Compiler<'a> {
    /// The budget of one character automaton.
    pub fn char_budget(&self) -> Budget<'a> {
        Budget {
            max_states: MAX_STRING_STATES.min(self.limits.get(LimitKind::AutomatonStates) as usize),
            deadline: self.deadline,
        }
    }
}

/// Most values the items of a `uniqueItems` array may admit: each is a mark of its run (see
/// [`SchemaLowering::witnessed_run`]), beside at most
/// [`MAX_WITNESSES`](super::shape::MAX_WITNESSES) witnesses.
const MAX_DISTINCT_VALUES: usize = 32;

/// Most automaton states of one `uniqueItems` array, counted as its rules (one per subset of
/// its values an array may hold, times the sets of witnesses) times the bytes of the values'
/// spellings. Its automaton is inherently that big, and building it costs about 4k
/// instructions a state: eleven enum values without `maxItems` (2,048 subsets of 185 bytes,
/// gradle-enterprise-7) compiled in 1.6G instructions, 0.6 s on a loaded machine, where nine
/// (512 subsets of 71 bytes, proxies) compile in 24 ms.
const MAX_DISTINCT_SIZE: u64 = 65_536;

/// How many subsets of `n` things have at most `k` of them (saturating).
fn subsets(n: u64, k: u64) -> u64 {
    let mut choose = 1u64;
    let mut total = 1u64;
    for i in 1..=k.min(n) {
        // C(n, i) = C(n, i - 1) * (n - i + 1) / i, exact at each step.
        choose = choose.saturating_mul(n - i + 1) / i;
        total = total.saturating_add(choose);
    }
    total
}

fn clamp(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Does the start rule derive at least one string? (A required property that recurses into its
/// own object, or `$ref`s that only point at each other, leave no finite instance.)
pub(crate) fn has_strings(g: &Grammar, deadline: &Deadline) -> Result<bool, CompileError> {
    let derivations = g.derivations(deadline).map_err(over_time)?;
    Ok(derivations.productive[g.rule(g.start()).body.index()])
}
