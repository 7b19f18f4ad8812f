//! JSON Schema to grammar IR.
//!
//! The language of a compiled schema is the set of JSON texts whose value the schema accepts,
//! written with the chosen whitespace and property order. Every keyword that changes that set
//! is either compiled exactly or refused with a typed [`CompileError`] naming its JSON pointer
//! (with [`JsonSchemaOptions::lenient`], dropped and reported in [`SchemaGrammar::warnings`]):
//! the grammar is never silently looser than the schema. Annotations (`title`, `description`,
//! `default`, `examples`, `$comment`, unknown keywords, ...) are ignored.
//!
//! Supported: `type` (and lists of types), `enum`, `const`, `properties`, `required`,
//! `additionalProperties`, `patternProperties` (up to four patterns besides those matching
//! every name; objects with patterns on both sides of an intersection take both sides', up
//! to sixteen kinds of undeclared names), `minProperties`/`maxProperties`, `items`, `prefixItems`,
//! `additionalItems` (draft 4–2019 tuples), `minItems`/`maxItems`, `minLength`/`maxLength`,
//! `pattern`, `format` (date, time, date-time, duration, email, hostname, ipv4, ipv6, uuid, uri,
//! uri-reference, json-pointer, relative-json-pointer), `minimum`/`maximum`/
//! `exclusiveMinimum`/`exclusiveMaximum` (draft 4 booleans too), `anyOf`, `oneOf`, `allOf`,
//! `$ref` to `#/...` pointers, `$anchor`s and `$id`s inside the document (recursion becomes
//! recursive rules), `$defs`/`definitions`, `not`, `if`/`then`/`else` and overlapping `oneOf`
//! through complements of shapes (`complement.rs`), `multipleOf`, `dependencies`/
//! `dependentRequired`/`dependentSchemas` (`dependencies.rs`), `propertyNames`
//! (`property_names.rs`), `contains` (a witness item; `minContains` 0 or 1), `uniqueItems`
//! where the items admit finitely many values (a rule per subset of them written, see
//! `SchemaLowering::distinct_items`) or are free strings (kept apart by the engine's matchers,
//! see `tracked.rs`; a grammar alone refuses them). Keywords a draft does not have are annotations in documents of that
//! draft (its root's `$schema`): `if` before draft 7, `propertyNames` before draft 6,
//! `dependentRequired`/`dependentSchemas`/`minContains`/`maxContains` before 2019-09,
//! `contains` before draft 6. Several constraints on one string (patterns,
//! formats, lengths, excluded values) are intersected, and the names of undeclared properties
//! split by the patterns they match, on automata over characters (`front::chars`), within a
//! budget of states (a `Limit` error past it).
//!
//! Semantic choices (each keeps the grammar exact for what it admits):
//! - **Property order**: [`PropertyOrder::Schema`] writes declared properties in schema order
//!   and additional properties after them; [`PropertyOrder::Any`] accepts every order. The
//!   engine's matcher holds such objects in linear size (any run of members in the grammar,
//!   the names written kept beside it: `matcher::json_state::keys`); a grammar alone
//!   ([`compile_schema`], tag dispatch), and objects the matcher cannot tell apart from others
//!   at their place, get one rule per set of names written (2^n, hence
//!   [`JsonSchemaOptions::max_any_order_properties`], and for wider objects
//!   [`JsonSchemaOptions::wide_any_order_rules`] in all). [`PropertyOrder::AnyOrSchema`]
//!   keeps the schema's order, with a warning, for each object past those limits instead of
//!   refusing it.
//! - **Strings**: string values may use every JSON escape; fixed strings (`enum`, `const`) and
//!   every object key, declared or not, are canonical (a serializer's spelling: only `"`, `\`
//!   and controls escaped). See the `strings` and `ecma` notes in the source: patterns are
//!   ECMA-262 with search semantics and apply to the decoded text.
//! - **Numbers**: integers (and integral `enum`/`const` values) are written
//!   `-?(0|[1-9][0-9]*)`: draft 6+ also counts `1.0` and `1e2` as integers, draft 4 does not,
//!   and the safe common ground is plain digits. Bounded numbers accept plain decimals and
//!   normalised exponent forms (`1.5e-3`); a bound at zero accepts all forms.
//! - **`oneOf`**: branches provably disjoint (different types, disjoint ranges or lengths, a
//!   required property with disjoint values such as a `const` tag) are an `anyOf`; the others
//!   each lose the values of those they overlap, through complements.
//! - **`dependencies`** apply in every draft, as validators read them (2019-09 split them into
//!   `dependentRequired` and `dependentSchemas`).
//! - **`$ref` with siblings** is an intersection (2019-09 and later semantics).
//!
//! Unsupported (typed error): complements out of reach (of `propertyNames`, past the branch
//! budget), objects meeting whose patterns tell apart more than sixteen kinds of undeclared
//! names, `minContains` over 1 and
//! `maxContains`, `uniqueItems: true` over items of infinitely many values other than free
//! strings (or past an
//! automaton of 65,536 states, with tuple items, complemented), `unevaluated*`, `$dynamicRef`, references
//! to other documents, and
//! patterns with assertions other than `^`/`$` where they must be intersected.
//!
//! # Limits
//!
//! Schemas come from strangers, so every compilation works within a [`Limits`]
//! ([`compile_schema_with`]; [`compile_schema`] takes the defaults, and the engine passes its
//! own): subschemas nest at most [`Limits::nesting`] deep, and so do `enum`/`const` values and
//! the groups of a `pattern`; `enum`, `anyOf`, `oneOf`, `allOf` and the other lists hold at
//! most [`Limits::alternatives`] entries; the grammar stays within [`Limits::grammar_size`]
//! expressions, each character automaton within [`Limits::automaton_states`] states (and
//! 4,096, see the crate's README), and the whole compilation within the compile-time budget.
//! Past any of them the error is a `Limit` error naming the limit and the JSON pointer. A
//! chain of `$ref`s costs one rule per link and no nesting: references are lowered from a
//! worklist, never inside one another.
//!
//! # Example
//!
//! ```
//! use formwork::json_schema::{compile_schema, JsonSchemaOptions};
//! use formwork::ir::recognizer::{Recognizer, Terminal};
//!
//! let schema = serde_json::json!({
//!     "type": "object",
//!     "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer", "minimum": 0}},
//!     "required": ["name"],
//!     "additionalProperties": false
//! });
//! let compiled = compile_schema(&schema, &JsonSchemaOptions::new()).unwrap();
//! let rec = Recognizer::new(&compiled.grammar);
//! let accepts = |text: &str| {
//!     let mut chart = rec.start();
//!     text.bytes().all(|b| chart.push(&rec, Terminal::Byte(b))) && chart.is_accepting(&rec)
//! };
//! assert!(accepts(r#"{"name":"Ada","age":36}"#));
//! assert!(!accepts(r#"{"name":"Ada","age":-1}"#));
//! assert!(!accepts(r#"{"age":36}"#));
//! ```

mod complement;
mod dependencies;
mod ecma;
mod formats;
mod intersect;
mod keywords;
mod lower;
mod membership;
mod multiples;
mod numbers;
mod property_names;
mod refs;
mod schema;
mod shape;
mod strings;
mod tracked;

use serde_json::Value;

use crate::error::{CompileError, CompileErrorKind, Location};
use crate::ir::{ExprId, Grammar, GrammarBuilder};
use crate::limits::{Deadline, Limits};
use crate::matcher::json_state::{KeySet, TrackedPaths};
use foldhash::{HashMap, HashSet};
use lower::MAX_PRODUCT_STATES_BEFORE_COUNTING;

/// Whitespace between JSON tokens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Whitespace {
    /// None at all, like `json.dumps(separators=(",", ":"))` and `serde_json::to_string`.
    Compact,
    /// Runs of space, tab, CR and LF between tokens, each run at most `max_run` long
    /// (`None`: unbounded). Never before or after the whole value.
    Flexible {
        /// Longest run.
        max_run: Option<u32>,
    },
}

/// The order of an object's properties.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PropertyOrder {
    /// Declared properties in the order of `properties`, additional ones after them.
    Schema,
    /// Any order (JSON Schema itself does not order properties; use it when the model may
    /// write them in another order than the schema's). Duplicate names are refused.
    Any,
    /// [`Any`](Self::Any) for every object whose any-order language formwork can hold
    /// exactly, [`Schema`](Self::Schema) for the others: those that would need a `2^n`
    /// grammar past [`JsonSchemaOptions::max_any_order_properties`] and
    /// [`JsonSchemaOptions::wide_any_order_rules`] (or past the grammar's size), which `Any`
    /// refuses. Each such object keeps its schema's order, and a warning
    /// in [`SchemaGrammar::warnings`] names it and says why. The mask stays exact for that
    /// language, which holds every text `Schema` admits. What fails once every object is
    /// lowered (the matcher's automaton of the places it keeps state at past its states, a
    /// key set found unheld only on the last compile pass, or half the compile-time budget
    /// spent) keeps the whole schema in its order, with a warning saying why: a schema
    /// `Schema` compiles within half the budget is never lost, so a server can turn it on.
    ///
    /// ```
    /// use formwork::json_schema::{compile_schema, JsonSchemaOptions, PropertyOrder};
    ///
    /// // Twenty properties, and a grammar alone (no matcher to keep the names written).
    /// let properties: serde_json::Map<_, _> =
    ///     (0..20).map(|i| (format!("p{i}"), serde_json::json!({"type": "integer"}))).collect();
    /// let schema = serde_json::json!({"type": "object", "properties": properties});
    /// let any = JsonSchemaOptions::new().property_order(PropertyOrder::Any);
    /// assert!(compile_schema(&schema, &any).is_err());
    /// let fallback = JsonSchemaOptions::new().property_order(PropertyOrder::AnyOrSchema);
    /// let compiled = compile_schema(&schema, &fallback).unwrap();
    /// assert!(compiled.warnings[0].to_string().contains("kept in the schema's order"));
    /// ```
    AnyOrSchema,
}

impl PropertyOrder {
    /// Are properties accepted in any order, at least where formwork can hold it?
    pub fn is_any(self) -> bool {
        matches!(self, PropertyOrder::Any | PropertyOrder::AnyOrSchema)
    }
}

/// How a schema is compiled, i.e. which JSON texts its grammar admits; builder style. How much
/// work a compilation may take is not an option of the schema but the engine's [`Limits`]
/// (see [`compile_schema_with`]), the same for every front end.
///
/// ```
/// use formwork::json_schema::{JsonSchemaOptions, PropertyOrder, Whitespace};
///
/// let opts = JsonSchemaOptions::new()
///     .whitespace(Whitespace::Flexible { max_run: Some(4) })
///     .property_order(PropertyOrder::Any)
///     .additional_properties(false)
///     .lenient(true);
/// assert!(opts.is_lenient());
/// ```
#[derive(Clone, Debug)]
pub struct JsonSchemaOptions {
    whitespace: Whitespace,
    property_order: PropertyOrder,
    additional_properties: bool,
    lenient: bool,
    max_any_order_properties: usize,
    wide_any_order_rules: u64,
}

impl Default for JsonSchemaOptions {
    fn default() -> Self {
        JsonSchemaOptions {
            whitespace: Whitespace::Compact,
            property_order: PropertyOrder::Schema,
            additional_properties: true,
            lenient: false,
            max_any_order_properties: 8,
            wide_any_order_rules: 8_192,
        }
    }
}

impl JsonSchemaOptions {
    /// Compact whitespace, schema order, additional properties as the schema says, strict.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whitespace between tokens.
    pub fn whitespace(mut self, ws: Whitespace) -> Self {
        self.whitespace = ws;
        self
    }

    /// Property order.
    pub fn property_order(mut self, order: PropertyOrder) -> Self {
        self.property_order = order;
        self
    }

    /// What an object without `additionalProperties` allows: `true` (JSON Schema's default)
    /// any further property, `false` none. An explicit `additionalProperties` always wins.
    pub fn additional_properties(mut self, allowed: bool) -> Self {
        self.additional_properties = allowed;
        self
    }

    /// Drop unsupported keywords (and compile non-disjoint `oneOf` as `anyOf`), reporting each
    /// as a warning, instead of failing.
    pub fn lenient(mut self, lenient: bool) -> Self {
        self.lenient = lenient;
        self
    }

    /// Is [`lenient`](Self::lenient) set?
    pub fn is_lenient(&self) -> bool {
        self.lenient
    }

    /// Most properties of one object whose [`PropertyOrder::Any`] grammar has a rule per set
    /// of names written (2^n rules), however many such objects a schema has: objects without
    /// a matcher to hold their names, or that share their place with objects it cannot tell
    /// them from. Wider ones take their rules from
    /// [`wide_any_order_rules`](Self::wide_any_order_rules).
    pub fn max_any_order_properties(mut self, n: usize) -> Self {
        self.max_any_order_properties = n.min(20);
        self
    }

    /// Rules the `2^n` grammars of objects wider than
    /// [`max_any_order_properties`](Self::max_any_order_properties) may take together in one
    /// schema (default 8,192: one object of 13 properties, or sixteen of 9). What a grammar
    /// costs to compile grows with its rules, not with one object's properties: a schema
    /// with one object of 12 properties costs less than one with forty of 8, which the
    /// per-object limit takes. Past the budget such an object is refused, or, with
    /// [`PropertyOrder::AnyOrSchema`], kept in the schema's order.
    ///
    /// ```
    /// use formwork::json_schema::{compile_schema, JsonSchemaOptions, PropertyOrder};
    ///
    /// let properties: serde_json::Map<_, _> =
    ///     (0..10).map(|i| (format!("p{i}"), serde_json::json!({"type": "integer"}))).collect();
    /// let schema = serde_json::json!({"type": "object", "properties": properties});
    /// let any = JsonSchemaOptions::new().property_order(PropertyOrder::Any);
    /// // 2^10 rules: within the budget, then past it.
    /// assert!(compile_schema(&schema, &any).is_ok());
    /// assert!(compile_schema(&schema, &any.wide_any_order_rules(1_000)).is_err());
    /// ```
    pub fn wide_any_order_rules(mut self, rules: u64) -> Self {
        self.wide_any_order_rules = rules.min(1 << 20);
        self
    }
}

/// A compiled schema.
#[derive(Clone, Debug)]
pub struct SchemaGrammar {
    /// The grammar; its language is the compact (or flexible) JSON texts the schema accepts.
    pub grammar: Grammar,
    /// Constraints dropped under `lenient`, unknown formats ignored, approximations made; each
    /// with its JSON pointer.
    pub warnings: Vec<CompileError>,
}

/// Compiles a JSON Schema into a grammar, within the default [`Limits`].
///
/// Errors: `Unsupported` (a keyword formwork cannot express, unless lenient), `Undefined` (a
/// `$ref` that does not resolve), `Invalid` (a malformed schema), `Limit` (see the module's
/// notes on limits), `EmptyLanguage` (no value satisfies the schema); each with the JSON
/// pointer of the culprit.
pub fn compile_schema(
    schema: &Value,
    options: &JsonSchemaOptions,
) -> Result<SchemaGrammar, CompileError> {
    compile_schema_with(schema, options, &Limits::new())
}

/// [`compile_schema`] within `limits` (its compile-time budget starting now).
///
/// ```
/// use formwork::json_schema::{compile_schema_with, JsonSchemaOptions};
/// use formwork::{LimitKind, Limits, Location};
///
/// let schema = serde_json::json!({"type": "array", "items": {"type": "array", "items": {}}});
/// let options = JsonSchemaOptions::new();
/// assert!(compile_schema_with(&schema, &options, &Limits::new().nesting(3)).is_ok());
/// let err = compile_schema_with(&schema, &options, &Limits::new().nesting(2)).unwrap_err();
/// assert_eq!(err.limit().unwrap().kind, LimitKind::Nesting);
/// assert_eq!(err.location(), &Location::JsonPointer("/items/items".into()));
/// ```
pub fn compile_schema_with(
    schema: &Value,
    options: &JsonSchemaOptions,
    limits: &Limits,
) -> Result<SchemaGrammar, CompileError> {
    compile_schema_within(schema, options, limits, &limits.deadline())
}

/// [`compile_schema_with`] against a deadline that spans more than the front end (the
/// engine's, for the whole compilation).
pub(crate) fn compile_schema_within(
    schema: &Value,
    options: &JsonSchemaOptions,
    limits: &Limits,
    deadline: &Deadline,
) -> Result<SchemaGrammar, CompileError> {
    Ok(compile(schema, options, limits, deadline, false)?.0)
}

/// [`compile_schema_within`] for a matcher that keeps state beside the grammar
/// (`matcher::json_state`): the items of arrays of distinct free strings apart, and counted
/// `maxLength`s. The automaton says where (`None` when nothing relies on it).
pub(crate) fn compile_schema_keeping_state(
    schema: &Value,
    options: &JsonSchemaOptions,
    limits: &Limits,
    deadline: &Deadline,
) -> Result<(SchemaGrammar, Option<TrackedPaths>), CompileError> {
    compile(schema, options, limits, deadline, true)
}

fn compile(
    schema: &Value,
    options: &JsonSchemaOptions,
    limits: &Limits,
    deadline: &Deadline,
    state_by_matcher: bool,
) -> Result<(SchemaGrammar, Option<TrackedPaths>), CompileError> {
    if options.property_order != PropertyOrder::AnyOrSchema {
        return compile_in_order(schema, options, limits, deadline, state_by_matcher);
    }
    // Objects that cannot be held in any order keep their own order as they are lowered;
    // what fails later (the matcher's automaton of places, a key set found unheld on the last
    // pass, half the time budget) keeps the whole schema in its order.
    let first = compile_in_order(schema, options, limits, &deadline.halfway(), state_by_matcher);
    match first {
        Err(e) if matches!(e.kind(), CompileErrorKind::Limit | CompileErrorKind::Unsupported) => {
            let ordered = options.clone().property_order(PropertyOrder::Schema);
            let (mut compiled, tracked) =
                compile_in_order(schema, &ordered, limits, deadline, state_by_matcher)?;
            let why = format!("{}: the whole schema kept in its order", e.message());
            let warning = CompileError::new(e.kind(), e.location().clone(), why);
            compiled.warnings.insert(0, warning);
            Ok((compiled, tracked))
        }
        first => first,
    }
}

/// [`compile`] in the order `options` asks (falling back per object for
/// [`PropertyOrder::AnyOrSchema`]).
fn compile_in_order(
    schema: &Value,
    options: &JsonSchemaOptions,
    limits: &Limits,
    deadline: &Deadline,
    state_by_matcher: bool,
) -> Result<(SchemaGrammar, Option<TrackedPaths>), CompileError> {
    let mut state = MatcherState {
        count_past: MAX_PRODUCT_STATES_BEFORE_COUNTING,
        list_all: true,
        unkeyed: HashMap::default(),
        last_pass: false,
    };
    let mut passes = 0;
    let (grammar, expr) = loop {
        passes += 1;
        state.last_pass = passes >= MAX_PASSES;
        let mut g = GrammarBuilder::with_limits(limits);
        let expr = schema_expr(
            schema,
            "",
            options,
            &mut g,
            "",
            limits,
            deadline,
            state_by_matcher.then_some(&state),
        )?;
        if expr.recount || expr.relist || !expr.unkeyed.is_empty() {
            // Counted where another string shares its place: again, counting only the
            // strings no product automaton can hold. Likewise distinct items from a list.
            // Names kept where other objects share the place: again, those objects as `2^n`
            // grammars (which may leave other key sets sharing a place with them, hence more
            // passes).
            if expr.recount {
                state.count_past = usize::MAX;
            }
            if expr.relist {
                state.list_all = false;
            }
            state.unkeyed.extend(expr.unkeyed);
            continue;
        }
        let start = g.rule("json schema");
        g.define(start, expr.body)?;
        break (g.finish(start)?, expr);
    };
    if !lower::has_strings(&grammar, deadline)? {
        return Err(schema::error(
            crate::CompileErrorKind::EmptyLanguage,
            "",
            "no JSON value satisfies this schema",
        ));
    }
    let warnings = expr.warnings;
    Ok((SchemaGrammar { grammar, warnings }, expr.tracked))
}

/// Most compilations of one schema: a pass finding a key set at a place other objects share
/// compiles again without it, and the last one refuses it.
const MAX_PASSES: usize = 4;

/// What the engine's matcher keeps beside the grammar, as [`schema_expr`] uses it.
pub(crate) struct MatcherState {
    /// States of a product of a pattern and its lengths past which `maxLength` is counted.
    pub count_past: usize,
    /// Distinct items from every list of strings are kept apart by the matcher; else only
    /// from those whose subsets the grammar cannot hold.
    pub list_all: bool,
    /// Key sets earlier passes found at places other objects share, and why.
    pub unkeyed: HashMap<KeySet, &'static str>,
    /// Finding another such key set is an error.
    pub last_pass: bool,
}

/// The language of a schema added to a builder ([`schema_expr`]).
pub(crate) struct SchemaExpr {
    pub body: ExprId,
    pub warnings: Vec<CompileError>,
    /// Where the matcher keeps state beside the grammar (`None`: nowhere).
    pub tracked: Option<TrackedPaths>,
    /// A string whose `maxLength` was counted to spare a product automaton shares its place
    /// with other strings: the caller compiles again counting only past the full budget.
    pub recount: bool,
    /// Likewise distinct items from a list kept by the matcher, where other arrays share
    /// their place: the caller compiles again listing only what the grammar cannot hold.
    pub relist: bool,
    /// Key sets found at places other objects share, and why: the caller compiles again
    /// without them.
    pub unkeyed: Vec<(KeySet, &'static str)>,
}

/// Adds the language of the subschema at `entry` (a JSON pointer, `""` for the root) of the
/// document `schema` to `g` (rule names start with `prefix`), for front ends that embed JSON
/// values in a larger grammar (tag dispatch). Its references resolve in the whole document,
/// so a schema embedded in a wrapper keeps its own `#/...` references when the wrapper is
/// put inside it rather than around it. With `state`, the engine's matcher keeps what the
/// grammar does not (`matcher::json_state`): arrays of distinct free strings and of distinct
/// values of a list of strings, `maxLength` where the product of a pattern and its lengths
/// would pass `count_past` states, and the names of objects in any order; without it, the
/// first two are refused and objects in any order are `2^n` grammars.
#[allow(clippy::too_many_arguments)]
pub(crate) fn schema_expr(
    schema: &Value,
    entry: &str,
    options: &JsonSchemaOptions,
    g: &mut GrammarBuilder,
    prefix: &str,
    limits: &Limits,
    deadline: &Deadline,
    state: Option<&MatcherState>,
) -> Result<SchemaExpr, CompileError> {
    let start = schema.pointer(entry).ok_or_else(|| {
        CompileError::new(
            CompileErrorKind::Undefined,
            Location::JsonPointer(entry.to_string()),
            "the entry of the schema is not in its document",
        )
    })?;
    let mut c = schema::Compiler::new(schema, options, limits, deadline)?;
    if let Some(state) = state {
        c.state_by_matcher = true;
        c.count_past = state.count_past;
        c.list_all = state.list_all;
        c.unkeyed.clone_from(&state.unkeyed);
        c.last_pass = state.last_pass;
    }
    let shape = c.build(start, entry)?;
    let mut lw = lower::SchemaLowering::new(&mut c, g, prefix);
    let body = lw.root(&shape)?;
    let tracked = match c.relies_on_matcher {
        true => c.tracked_paths(&shape, g)?,
        false => None,
    };
    // A shape lowered at several places (branches, intersections) warns once.
    let mut seen = HashSet::default();
    let warnings = c
        .warnings
        .into_iter()
        .filter(|w| seen.insert(w.to_string()))
        .collect();
    Ok(SchemaExpr {
        body,
        warnings,
        tracked,
        recount: c.recount,
        relist: c.relist,
        unkeyed: c.newly_unkeyed,
    })
}
