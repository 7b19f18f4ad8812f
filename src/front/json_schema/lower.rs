//! Shapes to grammar IR: JSON syntax, whitespace, property order and counts.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::ecma::Regex;
use super::intersect::property_index;
use super::multiples;
use super::numbers::{self, Bound, Decimal};
use super::schema::{error, over, Compiler, MAX_KEY_PATTERNS};
use super::shape::{
    ArrayShape, Names, NumberShape, ObjectShape, RefId, RegexConstraint, Shape, StringShape,
};
use super::strings::{any_text, text_not_in, JsonText};
use super::{PropertyOrder, Whitespace};
use crate::base::byteset::ByteSet;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::chars::{Budget, CharDfa};
use crate::front::guard::{guarded, tick};
use crate::front::regex::Utf8;
use crate::ir::{Expr, ExprId, Grammar, GrammarBuilder, RuleId};
use crate::limits::{Deadline, LimitKind};

/// An object with more declared properties than this has its chain of members cut into rules
/// of [`MEMBERS_PER_RULE`] (see [`Lowering::ordered`]).
const MEMBERS_IN_ONE_RULE: usize = 32;
const MEMBERS_PER_RULE: usize = 8;

/// Most states of the automaton of a single ambiguous pattern (see [`Regex::is_ambiguous`]):
/// past it the pattern is lowered as it reads, so the time spent on a construction that
/// fails is lost (a searched URI regex of RFC 3986 passed 4,096 states after 64 ms).
const MAX_AMBIGUOUS_PATTERN_STATES: usize = 1024;

/// Most states of the automaton of one string's constraints together (patterns, lengths,
/// excluded values; see [`CharDfa`]), and of one key automaton: each state is a rule, and a
/// length far past a pattern's own (`maxLength: 100000`) multiplies its states. Lower still if
/// [`Limits::automaton_states`](crate::Limits) is.
const MAX_STRING_STATES: usize = 4096;

/// The spelling of string contents: object keys' or values'.
fn encoding<'e>(text: &'e mut JsonText, keys: &'e mut JsonText, key: bool) -> &'e mut JsonText {
    match key {
        true => keys,
        false => text,
    }
}

/// The undeclared names of `o` split by the set of patterns they match (bit `i`: pattern
/// `i`), each nonempty set with the automaton of its names.
fn key_classes(
    o: &ObjectShape,
    declared: &[&str],
    budget: &Budget,
) -> Result<Vec<(usize, CharDfa)>, CompileError> {
    debug_assert!(o.patterns.len() <= MAX_KEY_PATTERNS);
    fn at(c: &RegexConstraint) -> impl Fn(CompileError) -> CompileError + '_ {
        move |e| e.or_at(Location::JsonPointer(c.pointer.clone()))
    }
    let automata = o
        .patterns
        .iter()
        .map(|(c, _)| c.regex.automaton(budget).map_err(at(c)))
        .collect::<Result<Vec<_>, _>>()?;
    let complements = automata
        .iter()
        .map(|a| a.complement(budget.deadline))
        .collect::<Result<Vec<_>, _>>()?;
    let undeclared = CharDfa::strings(declared, budget)?.complement(budget.deadline)?;
    let mut classes = Vec::new();
    for set in 0..1usize << automata.len() {
        let mut keys = undeclared.clone();
        for (i, (c, _)) in o.patterns.iter().enumerate() {
            let dfa = match set >> i & 1 == 1 {
                true => &automata[i],
                false => &complements[i],
            };
            keys = keys.intersect(dfa, budget).map_err(at(c))?;
        }
        if !keys.is_empty() {
            classes.push((set, keys));
        }
    }
    Ok(classes)
}

/// The strings every regex, no forbidden regex, the lengths and the exclusions of `s` admit,
/// as one automaton;
/// on failure (a construct automata do not take, too many states), where and why.
fn string_automaton(s: &StringShape, budget: &Budget) -> Result<CharDfa, (String, CompileError)> {
    let length_at = || {
        s.length_pointer
            .clone()
            .or_else(|| s.regexes.first().map(|c| c.pointer.clone()))
            .unwrap_or_default()
    };
    let mut dfa = CharDfa::length(s.min, s.max, budget).map_err(|e| (length_at(), e))?;
    for c in &s.regexes {
        let at = |e| (c.pointer.clone(), e);
        let regex = c.regex.automaton(budget).map_err(at)?;
        dfa = dfa.intersect(&regex, budget).map_err(at)?;
    }
    for c in &s.forbidden {
        let at = |e| (c.pointer.clone(), e);
        let regex = c.regex.automaton(budget).map_err(at)?;
        let outside = regex.complement(budget.deadline).map_err(at)?;
        dfa = dfa.intersect(&outside, budget).map_err(at)?;
    }
    if !s.exclude.is_empty() {
        let names: Vec<&str> = s.exclude.iter().map(String::as_str).collect();
        let at = |e| (s.exclude_pointer.clone().unwrap_or_default(), e);
        let excluded = CharDfa::strings(&names, budget)
            .and_then(|d| d.complement(budget.deadline))
            .map_err(at)?;
        dfa = dfa.intersect(&excluded, budget).map_err(at)?;
    }
    Ok(dfa)
}

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
    /// The expression of each number shape with steps lowered so far, by its fields.
    numbers: HashMap<String, ExprId>,
    /// The contents of each string shape with patterns, formats or excluded values, built
    /// once: a schema repeats one shape on many properties (a format, `.+`, an id pattern),
    /// and each copy of an automaton was its own set of rules, so its own units, compiled
    /// and walked again by the backend.
    contents: HashMap<ContentKey, ExprId>,
}

/// What fixes a string's contents: key or value spelling, lengths, the regexes by source
/// (a pattern's text, a format's name, told apart), the forbidden ones (complements), excluded values.
#[derive(PartialEq, Eq, Hash)]
struct ContentKey {
    key: bool,
    min: u64,
    max: Option<u64>,
    regexes: Vec<(bool, String)>,
    forbidden: Vec<(bool, String)>,
    exclude: Vec<String>,
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
            numbers: HashMap::new(),
            contents: HashMap::new(),
        }
    }

    /// The budget of one character automaton.
    fn budget(&self) -> Budget<'a> {
        Budget {
            max_states: MAX_STRING_STATES
                .min(self.c.limits.get(LimitKind::AutomatonStates) as usize),
            deadline: self.c.deadline,
        }
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
                let r = self.any_value();
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
            Shape::Object(o) => self.object(o)?,
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
    fn any_value(&mut self) -> RuleId {
        if let Some(r) = self.any_value {
            return r;
        }
        let value = self.g.rule(&format!("{}json value", self.prefix));
        self.any_value = Some(value);
        let v = self.g.rule_ref(value);
        // Cannot fail: a string without patterns, lengths or exclusions is any text, built
        // without automata, rules or limits.
        let [key, string] = [true, false].map(|key| {
            self.string(&StringShape::default(), key)
                .expect("plain strings compile")
        });
        let colon = self.punct(":");
        let member = self.g.seq([key, colon, v]);
        let object = self.delimited("{", "}", member, 0, None);
        let array = self.delimited("[", "]", v, 0, None);
        let number = numbers::number(self.g, None, None);
        let t = self.g.text("true");
        let f = self.g.text("false");
        let n = self.g.text("null");
        let body = self.g.alt([object, array, string, number, t, f, n]);
        // Cannot fail: the rule was declared just above, under the guard of `any_value`.
        self.g.define(value, body).expect("defined once");
        value
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
    /// an object's members in its own order, or with [`PropertyOrder::Any`] in every order
    /// (as an object of required properties, each with its one value: within
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
            Value::Object(map)
                if map.len() > 1 && self.c.opts.property_order == PropertyOrder::Any =>
            {
                let fixed = ObjectShape {
                    properties: map
                        .iter()
                        .map(|(k, x)| (k.clone(), Shape::Values(vec![x.clone()])))
                        .collect(),
                    required: map.keys().cloned().collect(),
                    additional: Box::new(Shape::Never),
                    ..ObjectShape::any("")
                };
                self.object(&fixed)?
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

    /// A string value (`key`: an object key, spelled canonically; see `strings.rs`).
    ///
    /// A string with a pattern or format is a rule of its own, named after its expression, so
    /// every use of one pattern is one rule: the CFG backend then builds it as one unit that
    /// its uses call (a UUID pattern on a dozen properties), whose states hash alike in every
    /// grammar, instead of a copy inside each enclosing object whose states hash apart, each
    /// position of each copy walking the vocabulary anew (MaskBench o61612: ~450 µs a step).
    fn string(&mut self, s: &StringShape, key: bool) -> Result<ExprId, CompileError> {
        let quote = self.g.text("\"");
        let content = self.string_content(s, key)?;
        let body = self.g.seq([quote, content, quote]);
        if s.regexes.is_empty() {
            return Ok(body);
        }
        self.named("json string", body)
    }

    /// [`string_content_uncached`](Self::string_content_uncached), once per shape (see
    /// [`Lowering::contents`]); a shape that warned is built again at each use, so each
    /// place gets its warning.
    fn string_content(&mut self, s: &StringShape, key: bool) -> Result<ExprId, CompileError> {
        if s.regexes.is_empty() && s.forbidden.is_empty() && s.exclude.is_empty() {
            return self.string_content_uncached(s, key);
        }
        let memo = ContentKey {
            key,
            min: s.min,
            max: s.max,
            regexes: s
                .regexes
                .iter()
                .map(|c| (c.is_format, c.source.clone()))
                .collect(),
            forbidden: s
                .forbidden
                .iter()
                .map(|c| (c.is_format, c.source.clone()))
                .collect(),
            exclude: s.exclude.iter().cloned().collect(),
        };
        if let Some(&e) = self.contents.get(&memo) {
            return Ok(e);
        }
        let warnings = self.c.warnings.len();
        let e = self.string_content_uncached(s, key)?;
        if self.c.warnings.len() == warnings {
            self.contents.insert(memo, e);
        }
        Ok(e)
    }

    fn string_content_uncached(
        &mut self,
        s: &StringShape,
        key: bool,
    ) -> Result<ExprId, CompileError> {
        let max = s.max;
        if max.is_some_and(|m| m < s.min) {
            return Ok(self.g.nothing());
        }
        let enc = encoding(&mut self.text, &mut self.keys, key);
        // The shapes with a direct form: a counted loop for lengths, a trie for excluded
        // names, one regex (narrowed to the lengths when they bound its one repetition).
        let unbounded = s.min == 0 && max.is_none();
        if !s.forbidden.is_empty() {
            // Complements are the automata's: no direct form.
        } else if !s.exclude.is_empty() && s.regexes.is_empty() && unbounded {
            let names: Vec<&str> = s.exclude.iter().map(String::as_str).collect();
            return text_not_in(self.g, enc, &names, self.c.deadline);
        }
        let plain = s.exclude.is_empty() && s.forbidden.is_empty();
        let single = match (s.regexes.as_slice(), plain) {
            ([], true) => return Ok(any_text(self.g, enc, clamp(s.min), max.map(clamp))),
            ([only], true) => {
                let (lo, hi) = only.regex.char_len();
                match lo >= s.min && max.is_none_or(|m| hi.is_some_and(|h| h <= m)) {
                    true => Some((only, only.regex.clone())),
                    false => only.regex.with_length(s.min, max).map(|r| (only, r)),
                }
            }
            _ => None,
        };
        if let Some((c, regex)) = single {
            if regex.is_ambiguous() {
                let budget = Budget {
                    max_states: self.budget().max_states.min(MAX_AMBIGUOUS_PATTERN_STATES),
                    ..self.budget()
                };
                match regex.automaton(&budget) {
                    Ok(dfa) => return self.lower_automaton(&dfa, key),
                    // Too big or not expressible as an automaton (a word boundary): the
                    // regex as it reads, exact all the same.
                    Err(e) if e.kind() == CompileErrorKind::Unsupported => {}
                    Err(e)
                        if e.limit()
                            .is_some_and(|l| l.kind == LimitKind::AutomatonStates) => {}
                    Err(e) => return Err(e.or_at(Location::JsonPointer(c.pointer.clone()))),
                }
            }
            return self.lower_regex(c, &regex, s, key);
        }
        match string_automaton(s, &self.budget()) {
            Ok(dfa) => self.lower_automaton(&dfa, key),
            Err((at, e)) => {
                // Lenient: the first regex alone, or the lengths alone.
                self.c.tolerate(e.or_at(Location::JsonPointer(at)))?;
                match s.regexes.first() {
                    Some(c) => self.lower_regex(c, &c.regex, s, key),
                    None => {
                        let enc = encoding(&mut self.text, &mut self.keys, key);
                        Ok(any_text(self.g, enc, clamp(s.min), max.map(clamp)))
                    }
                }
            }
        }
    }

    /// String contents of `dfa`'s language, one rule per state; a state that takes every
    /// string is the shared any-text expression, which the vocabulary's slices know.
    fn lower_automaton(&mut self, dfa: &CharDfa, key: bool) -> Result<ExprId, CompileError> {
        self.automata += 1;
        let name = format!("{}json string automaton {}", self.prefix, self.automata);
        let enc = encoding(&mut self.text, &mut self.keys, key);
        let any = any_text(self.g, enc, 0, None);
        dfa.lower(&name, self.g, enc, any, self.c.deadline)
    }

    /// One regex, already narrowed to the string's lengths where it could be.
    fn lower_regex(
        &mut self,
        c: &RegexConstraint,
        regex: &Regex,
        s: &StringShape,
        key: bool,
    ) -> Result<ExprId, CompileError> {
        let enc = encoding(&mut self.text, &mut self.keys, key);
        match regex.lower(&c.source, self.g, enc) {
            Ok(e) => Ok(e),
            // Constructs found only while lowering (anchors inside, word boundaries).
            Err(e) if e.kind() == CompileErrorKind::Unsupported => {
                self.c.unsupported(&c.pointer, e.message().to_string())?;
                Ok(any_text(self.g, enc, clamp(s.min), s.max.map(clamp)))
            }
            Err(e) => Err(e.or_at(Location::JsonPointer(c.pointer.clone()))),
        }
    }

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
        let items = self.shape(&a.items)?;
        let mut marked = Vec::new();
        for marks in 1..1u32 << a.witnesses.len() {
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
        let all = (1u32 << a.witnesses.len()) - 1;
        let n = a.prefix.len() as u64;
        let witnessed = match all {
            0 => None,
            _ => {
                let hi = max.map(|m| m.saturating_sub(n));
                Some(self.witnessed_run(Some(items), &marked, all, min - n, hi)?)
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

    fn object(&mut self, o: &ObjectShape) -> Result<ExprId, CompileError> {
        if !o.witnesses.is_empty() {
            // The lowering writes required names as members, never as undeclared properties,
            // so a witness that may be one of them is placed first (see `place_witnesses`).
            let index = property_index(o);
            let mut names = Vec::new();
            for r in o
                .required
                .iter()
                .filter(|r| !index.contains_key(r.as_str()))
            {
                let mut matched = false;
                for (c, _) in &o.patterns {
                    matched |= super::intersect::matches(c, r)?;
                }
                if !matched {
                    names.push((r.clone(), Shape::Any));
                }
            }
            if !names.is_empty() {
                let declaring = Shape::Object(ObjectShape {
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
        let mut members = Vec::new();
        for (k, s, req) in &props {
            let key = self.g.text(&Value::from(*k).to_string());
            let colon = self.punct(":");
            let value = self.shape(s)?;
            members.push((self.g.seq([key, colon, value]), *req));
        }
        let extra = self.undeclared_members(o, &declared)?;
        let counts = Counts {
            min: o.min,
            max: o.max,
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
        match self.c.opts.property_order {
            PropertyOrder::Schema => self.ordered(&members, extra, counts, &o.pointer),
            PropertyOrder::Any => {
                if members.len() > self.c.opts.max_any_order_properties {
                    return Err(error(
                        CompileErrorKind::Limit,
                        &o.pointer,
                        format!(
                            "{} properties in any order need {} grammar states (limit: {} properties)",
                            members.len(),
                            1u64 << members.len().min(63),
                            self.c.opts.max_any_order_properties
                        ),
                    ));
                }
                self.unordered(&members, extra, counts, &o.pointer)
            }
        }
    }

    /// The members undeclared properties are written as. Without patterns, any other name
    /// with the additional shape; with them, one branch per set of patterns a name may match,
    /// its key the names matching exactly those and its value their shapes together (the
    /// additional shape for the names matching none). With witnesses, also for each set of
    /// them and each set of names they may share, the member of those names with all their
    /// values, marked with the set.
    fn undeclared_members(
        &mut self,
        o: &ObjectShape,
        declared: &[String],
    ) -> Result<Undeclared, CompileError> {
        let names: Vec<&str> = declared.iter().map(String::as_str).collect();
        let deadline = self.c.deadline;
        let all = (1u32 << o.witnesses.len()) - 1;
        if o.patterns.is_empty() && matches!(*o.additional, Shape::Never) {
            return Ok(Undeclared {
                all,
                ..Undeclared::default()
            });
        }
        let classes = match o.patterns.is_empty() {
            true => None,
            false => match key_classes(o, &names, &self.budget()) {
                Ok(classes) => Some(classes),
                Err(e) => {
                    // Lenient: undeclared names not told apart, with any value, every witness.
                    self.c.tolerate(e)?;
                    let content = text_not_in(self.g, &mut self.keys, &names, deadline)?;
                    let any = self.member(content, &Shape::Any)?;
                    return Ok(Undeclared {
                        any: Some(any),
                        marked: (all != 0).then_some((any, all)).into_iter().collect(),
                        all,
                    });
                }
            },
        };
        let mut out = Undeclared {
            all,
            ..Undeclared::default()
        };
        let mut members = Vec::new();
        let mut each_class = |lw: &mut Self, set: usize, content: ExprId| {
            let matching: Vec<bool> = (0..o.patterns.len()).map(|i| set >> i & 1 == 1).collect();
            let value = lw.c.undeclared_shape(o, &matching)?.into_owned();
            if matches!(value, Shape::Never) {
                return Ok(());
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
            Ok::<(), CompileError>(())
        };
        match classes {
            None => {
                let content = text_not_in(self.g, &mut self.keys, &names, deadline)?;
                each_class(self, 0, content)?;
            }
            Some(classes) => {
                for (set, keys) in classes {
                    self.automata += 1;
                    let name = format!("{}json key automaton {}", self.prefix, self.automata);
                    let any = any_text(self.g, &mut self.keys, 0, None);
                    let content = keys.lower(&name, self.g, &mut self.keys, any, deadline)?;
                    each_class(self, set, content)?;
                }
            }
        }
        out.any = (!members.is_empty()).then(|| self.g.alt(members));
        Ok(out)
    }

    /// Members one after another, `lo..=hi` of them, such that every witness of `all` is among
    /// the marks of a member written: `plain` members mark none, `marked` ones the witnesses
    /// they are. One rule per set of witnesses seen and count (counted up to the larger
    /// bound). Returns the run with a separator before each member, and the run whose first
    /// member has none (at least one member long).
    fn witnessed_run(
        &mut self,
        plain: Option<ExprId>,
        marked: &[(ExprId, u32)],
        all: u32,
        lo: u64,
        hi: Option<u64>,
    ) -> Result<(ExprId, ExprId), CompileError> {
        let cap = hi.unwrap_or(lo);
        let rules_needed = (u64::from(all) + 1).saturating_mul(cap.saturating_add(1));
        self.c
            .limits
            .check(LimitKind::GrammarSize, self.g.len() as u64 + rules_needed)
            .map_err(|e| CompileError::over_limit(e, Location::None, "members with witnesses"))?;
        self.rule_groups += 1;
        let id = self.rule_groups;
        let mut rules = HashMap::new();
        for seen in (0..=all).filter(|s| s & !all == 0) {
            for c in 0..=cap {
                let name = format!("{}witnessed {id} {seen:b} {c}", self.prefix);
                rules.insert((seen, c), self.g.rule(&name));
            }
        }
        let members: Vec<(ExprId, u32)> = plain
            .map(|p| (p, 0))
            .into_iter()
            .chain(marked.iter().copied())
            .collect();
        let comma = self.punct(",");
        let choices = |lw: &mut Self, seen: u32, c: u64, lead: bool| -> ExprId {
            let mut branches = Vec::new();
            if lead && seen == all && c >= lo {
                branches.push(lw.g.empty());
            }
            if hi.is_none_or(|h| c < h) {
                let next_c = (c + 1).min(cap);
                for &(m, marks) in &members {
                    let next = lw.g.rule_ref(rules[&(seen | marks, next_c)]);
                    branches.push(match lead {
                        true => lw.g.seq([comma, m, next]),
                        false => lw.g.seq([m, next]),
                    });
                }
            }
            lw.g.alt(branches)
        };
        for (&(seen, c), &rule) in &rules {
            let body = choices(self, seen, c, true);
            self.g.define(rule, body)?;
        }
        self.check_size()?;
        let first = choices(self, 0, 0, false);
        Ok((self.g.rule_ref(rules[&(0, 0)]), first))
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
                        lw.witnessed_run(extra.any, &extra.marked, extra.all, lo, hi)?
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
                let run = self.witnessed_run(extra.any, &extra.marked, extra.all, counts.min, hi);
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
    fn unordered(
        &mut self,
        members: &[(ExprId, bool)],
        extra: Undeclared,
        counts: Counts,
        pointer: &str,
    ) -> Result<ExprId, CompileError> {
        // Witnesses count as more required members, written among the undeclared ones: their
        // bits are `n` on.
        let n = members.len();
        let witness_bits = u64::from(extra.all) << n;
        let sets = 1u64 << (n + extra.all.count_ones() as usize);
        let cap = counts.cap(n, extra.any.is_some());
        // A rule per set and count, declared before any is defined: checked first.
        let rules_needed = sets.saturating_mul(cap);
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
        let mut rules = HashMap::new();
        for set in 0..sets {
            for c in 1..=cap {
                rules.insert((set, c), self.g.rule(&name(set, c)));
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
                    let next = lw.g.rule_ref(rules[&(set | u64::from(marks) << n, c1)]);
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

/// The members undeclared properties of an object are written as.
#[derive(Clone, Default)]
struct Undeclared {
    /// Any of them (`None`: there may be none).
    any: Option<ExprId>,
    /// Those that are witnesses, each with the set of witnesses it is (bit `j`: witness `j`).
    marked: Vec<(ExprId, u32)>,
    /// Every witness of the object: each must be among the marks of a member written.
    all: u32,
}

#[derive(Clone, Copy)]
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

fn clamp(n: u64) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// Does the start rule derive at least one string? (A required property that recurses into its
/// own object, or `$ref`s that only point at each other, leave no finite instance.)
///
/// The productive expressions and rules, found from the leaves up with a worklist: each
/// becomes productive once, when its last needed part does (a sequence: all parts; an
/// alternation, a rule reference or a repeat: one), so the work is linear in the grammar. (A
/// fixpoint of passes over the whole grammar took a pass per link of a chain of rules.)
pub(crate) fn has_strings(g: &Grammar, deadline: &Deadline) -> Result<bool, CompileError> {
    let exprs = g.exprs();
    let rules = g.rules();
    // Who waits on what: expressions on their parts, reference expressions on their rule,
    // rules on their body.
    let mut users: Vec<Vec<u32>> = vec![Vec::new(); exprs.len()];
    let mut refs_to: Vec<Vec<u32>> = vec![Vec::new(); rules.len()];
    let mut bodies_of: Vec<Vec<u32>> = vec![Vec::new(); exprs.len()];
    // Parts still missing before an expression is productive.
    let mut missing: Vec<u32> = vec![0; exprs.len()];
    let mut ready: Vec<u32> = Vec::new();
    for (i, e) in exprs.iter().enumerate() {
        tick(deadline)?;
        missing[i] = match e {
            Expr::Nothing => u32::MAX,
            Expr::Empty | Expr::Bytes(_) | Expr::Class(_) | Expr::Special(_) => 0,
            Expr::Seq(xs) => {
                xs.iter().for_each(|x| users[x.index()].push(i as u32));
                xs.len() as u32
            }
            Expr::Alt(xs) => {
                xs.iter().for_each(|x| users[x.index()].push(i as u32));
                1
            }
            Expr::Repeat { min: 0, .. } => 0,
            Expr::Repeat { body, .. } => {
                users[body.index()].push(i as u32);
                1
            }
            Expr::Rule(r) => {
                refs_to[r.index()].push(i as u32);
                1
            }
        };
        if missing[i] == 0 {
            ready.push(i as u32);
        }
    }
    for (r, rule) in rules.iter().enumerate() {
        bodies_of[rule.body.index()].push(r as u32);
    }
    let mut productive_rule = vec![false; rules.len()];
    let mut done = vec![false; exprs.len()];
    // Each expression is productive once; its users each lose one missing part per
    // distinct part (a sequence's repeated part counts each time it occurs).
    while let Some(i) = ready.pop() {
        tick(deadline)?;
        let i = i as usize;
        if std::mem::replace(&mut done[i], true) {
            continue;
        }
        for &u in &users[i] {
            let u = u as usize;
            missing[u] = missing[u].saturating_sub(1);
            if missing[u] == 0 && !done[u] {
                ready.push(u as u32);
            }
        }
        for &r in &bodies_of[i] {
            if !std::mem::replace(&mut productive_rule[r as usize], true) {
                for &e in &refs_to[r as usize] {
                    if !done[e as usize] {
                        missing[e as usize] = 0;
                        ready.push(e);
                    }
                }
            }
        }
    }
    Ok(productive_rule[g.start().index()])
}
