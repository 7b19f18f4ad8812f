//! String contents in the grammar: one regex as it reads, or the automaton of a string's
//! constraints together (patterns, formats, lengths, excluded values), built once per shape.

use std::sync::Arc;

use serde_json::Value;

use super::super::ecma::Regex;
use super::super::schema::{error, Compiler};
use super::super::shape::{NamePattern, RegexConstraint, Shape, StringShape};
use super::super::strings::{any_text, text_not_in, JsonText};
use super::{clamp, SchemaLowering};
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::chars::{Budget, CharDfa};
use crate::front::guard::guarded;
use crate::ir::ExprId;
use crate::limits::LimitKind;
use crate::matcher::json_state::LengthBound;

/// Most states of the automaton of a single ambiguous pattern (see [`Regex::is_ambiguous`]):
/// past it the pattern is lowered as it reads, so the time spent on a construction that
/// fails is lost (a searched URI regex of RFC 3986 passed 4,096 states after 64 ms).
const MAX_AMBIGUOUS_PATTERN_STATES: usize = 1024;

/// States of a string's automaton with its lengths past which the matcher counts `maxLength`
/// instead, where it can (see [`SchemaLowering::counted_string`]); the first try of
/// `json_schema::compile`. At 512, a searched class within 3–255 characters (o45481) stayed a
/// product of about 500 states, each a rule spelling JSON string characters: a 28k-state unit
/// built at compile time, 9 ms. At 256, 40 MaskBench schemas compile in under half the time,
/// none slower; at 128, some products that count and then fall back cost twice (allany13:
/// 7 → 25 ms).
pub(in crate::front::json_schema) const MAX_PRODUCT_STATES_BEFORE_COUNTING: usize = 256;

/// Longest `maxLength` the matcher counts: a bound's table has a row of this many bits per
/// state of its pattern.
const MAX_COUNTED_LENGTH: u64 = 1 << 20;

/// Most bits of one counted string's table (states of its pattern times `maxLength`): 2 MiB.
/// Building it costs about as many steps as the pattern has edges, times `maxLength`.
const MAX_COUNTED_BITS: u64 = 1 << 24;

/// Most bits of the tables of all counted strings of one schema: 8 MiB (a hundred strings
/// with `maxLength` near a million took 585 MB and 8 s before it).
const MAX_COUNTED_BITS_PER_SCHEMA: u64 = 1 << 26;

/// Is `e` an automaton past its state budget?
fn is_too_big(e: &CompileError) -> bool {
    e.limit()
        .is_some_and(|l| l.kind == LimitKind::AutomatonStates)
}

/// The spelling of string contents: object keys' or values'.
fn encoding<'e>(text: &'e mut JsonText, keys: &'e mut JsonText, key: bool) -> &'e mut JsonText {
    match key {
        true => keys,
        false => text,
    }
}

/// The strings every regex, no forbidden regex, the lengths and the exclusions of `s` admit,
/// as one automaton;
/// on failure (a construct automata do not take, too many states), where and why.
pub(in crate::front::json_schema) fn string_automaton(
    s: &StringShape,
    budget: &Budget,
) -> Result<CharDfa, (String, CompileError)> {
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

/// What fixes a string's contents: key or value spelling, lengths, the regexes by source
/// (a pattern's text, a format's name, told apart), the forbidden ones (complements), excluded values.
#[derive(PartialEq, Eq, Hash)]
pub(in crate::front::json_schema) struct ContentKey {
    key: bool,
    min: u64,
    max: Option<u64>,
    regexes: Vec<(bool, String)>,
    forbidden: Vec<(bool, String)>,
    exclude: Vec<String>,
}

impl ContentKey {
    /// The key of the contents of `s` (spelled as a key or a value).
    pub(in crate::front::json_schema) fn of(s: &StringShape, key: bool) -> ContentKey {
        let sources =
            |cs: &[RegexConstraint]| cs.iter().map(|c| (c.is_format, c.source.clone())).collect();
        ContentKey {
            key,
            min: s.min,
            max: s.max,
            regexes: sources(&s.regexes),
            forbidden: sources(&s.forbidden),
            exclude: s.exclude.iter().cloned().collect(),
        }
    }
}

/// What fixes a set of names (a pattern of `patternProperties`, a `propertyNames`) as an
/// automaton: regexes by source, shapes of strings by their branches' contents. Two sets with
/// equal keys are one.
#[derive(PartialEq, Eq, Hash)]
pub(super) enum NamesKey {
    Regex(bool, String),
    NoneOf(Vec<NamesKey>),
    /// A shape of strings, each branch by its contents or its values, and whether it stands
    /// for the names it admits or those it refuses.
    Strings(Vec<ContentKey>, Vec<Vec<String>>, bool),
}

impl NamesKey {
    /// The key of a pattern. Recursion: as deep as `NoneOf`s nest, each level guarded.
    pub(super) fn of_pattern(p: &NamePattern) -> Option<NamesKey> {
        guarded(|| match p {
            NamePattern::Regex(c) => Some(NamesKey::Regex(c.is_format, c.source.clone())),
            NamePattern::NoneOf { parts, .. } => parts
                .iter()
                .map(NamesKey::of_pattern)
                .collect::<Option<_>>()
                .map(NamesKey::NoneOf),
            NamePattern::Strings {
                names, admitted, ..
            } => NamesKey::of_strings(names, *admitted),
        })
    }

    /// The key of a shape of strings as [`strings_automaton`] reads it; `None` for a shape it
    /// refuses.
    pub(super) fn of_strings(s: &Shape, admitted: bool) -> Option<NamesKey> {
        let branches = match s {
            Shape::AnyOf(xs) => xs.as_slice(),
            one => std::slice::from_ref(one),
        };
        let (mut contents, mut values) = (Vec::new(), Vec::new());
        for b in branches {
            match b {
                Shape::String(st) => contents.push(ContentKey::of(st, false)),
                Shape::Values(vs) => values.push(
                    vs.iter()
                        .filter_map(Value::as_str)
                        .map(String::from)
                        .collect(),
                ),
                Shape::Never => {}
                _ => return None,
            }
        }
        Some(NamesKey::Strings(contents, values, admitted))
    }
}

/// The automaton of the strings a shape of strings admits (`String`, `Values`, unions of
/// them: `propertyNames`), errors at `pointer` unless a part says where.
pub(in crate::front::json_schema) fn strings_automaton(
    s: &Shape,
    pointer: &str,
    budget: &Budget,
) -> Result<CharDfa, CompileError> {
    let at = |e: CompileError| e.or_at(Location::JsonPointer(pointer.to_string()));
    let branches = match s {
        Shape::AnyOf(xs) => xs.as_slice(),
        one => std::slice::from_ref(one),
    };
    let mut automata = Vec::with_capacity(branches.len());
    for b in branches {
        automata.push(match b {
            Shape::String(st) => {
                string_automaton(st, budget).map_err(|(p, e)| e.or_at(Location::JsonPointer(p)))?
            }
            Shape::Values(vs) => {
                let strings: Vec<&str> = vs.iter().filter_map(Value::as_str).collect();
                CharDfa::strings(&strings, budget).map_err(at)?
            }
            Shape::Never => continue,
            _ => {
                return Err(error(
                    CompileErrorKind::Unsupported,
                    pointer,
                    "names of a shape other than strings",
                ))
            }
        });
    }
    if automata.len() == 1 {
        return Ok(automata.remove(0));
    }
    // The union: outside every branch, complemented.
    let mut outside: Option<CharDfa> = None;
    for a in &automata {
        let not = a.complement(budget.deadline).map_err(at)?;
        outside = Some(match outside {
            Some(o) => o.intersect(&not, budget).map_err(at)?,
            None => not,
        });
    }
    match outside {
        Some(o) => o.complement(budget.deadline).map_err(at),
        None => CharDfa::strings(&[], budget).map_err(at),
    }
}

impl SchemaLowering<'_, '_, '_> {
    /// A string value (`key`: an object key, spelled canonically; see `json_schema/strings.rs`).
    ///
    /// A string with a pattern or format is a rule of its own, named after its expression, so
    /// every use of one pattern is one rule: the CFG backend then builds it as one unit that
    /// its uses call (a UUID pattern on a dozen properties), whose states hash alike in every
    /// grammar, instead of a copy inside each enclosing object whose states hash apart, each
    /// position of each copy walking the vocabulary anew (MaskBench o61612: ~450 µs a step).
    pub(super) fn string(&mut self, s: &StringShape, key: bool) -> Result<ExprId, CompileError> {
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
        let memo = ContentKey::of(s, key);
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
                    Err(e) if is_too_big(&e) => {}
                    Err(e) => return Err(e.or_at(Location::JsonPointer(c.pointer.clone()))),
                }
            }
            return self.lower_regex(c, &regex, s, key);
        }
        // Where the matcher can count `maxLength`, a product past a few hundred states is
        // counted instead: the backend builds and walks each of its states, spelled in bytes
        // (`(?:\S+\s+){0,9}\S+` with `maxLength: 120`, 2.4k states: 0.4 s to compile, first
        // masks of 50-100 ms), where the count costs a table.
        let countable = !key && self.c.state_by_matcher && s.max.is_some();
        let full = self.budget();
        let first = match countable {
            true => Budget {
                max_states: full.max_states.min(self.c.count_past),
                ..full
            },
            false => full,
        };
        let product = match string_automaton(s, &first) {
            Err((_, e)) if countable && is_too_big(&e) => match self.counted_string(s)? {
                Some(counted) => return Ok(counted),
                None => string_automaton(s, &full),
            },
            product => product,
        };
        match product {
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

    /// A string whose `maxLength` the matcher counts (`matcher::json_state`): the grammar is
    /// the rest (`minLength` included), the bound the automaton without lengths. `None` if an
    /// automaton is still too big, or the bound's table ([`MAX_COUNTED_BITS`], and the
    /// schema's [`MAX_COUNTED_BITS_PER_SCHEMA`]).
    fn counted_string(&mut self, s: &StringShape) -> Result<Option<ExprId>, CompileError> {
        let Some(max) = s.max.filter(|&m| m <= MAX_COUNTED_LENGTH) else {
            return Ok(None);
        };
        let at = s.length_pointer.clone().unwrap_or_default();
        let unbounded = |min| StringShape {
            min,
            max: None,
            ..s.clone()
        };
        let budget = self.budget();
        // Too big still: the caller's error stands. Any other error (the deadline) is this
        // string's own.
        let automaton = |s: &StringShape| match string_automaton(s, &budget) {
            Ok(dfa) => Ok(Some(dfa)),
            Err((_, e)) if is_too_big(&e) => Ok(None),
            Err((at, e)) => Err(e.or_at(Location::JsonPointer(at))),
        };
        let Some(pattern) = automaton(&unbounded(0))? else {
            return Ok(None);
        };
        // One pattern whose strings are all long enough reads as it is written: its
        // repetitions stay counted loops for the backend, where the automaton spells each
        // state's classes out (`(?:\S+\s+){0,19}\S+`: 600 ms to build against 20).
        let single = match s.regexes.as_slice() {
            [only]
                if s.forbidden.is_empty()
                    && s.exclude.is_empty()
                    && only.regex.char_len().0 >= s.min =>
            {
                Some(only)
            }
            _ => None,
        };
        // Otherwise the grammar is the pattern's automaton, with `minLength` its own.
        let with_min = match (single, s.min) {
            (None, 1..) => match automaton(&unbounded(s.min))? {
                Some(dfa) => Some(dfa),
                None => return Ok(None),
            },
            _ => None,
        };
        if !self.c.charge_counted(pattern.states(), max) {
            return Ok(None);
        }
        let bound = pattern
            .length_bound(s.min.min(max) as u32, max as u32, self.c.deadline)
            .map_err(|e| e.or_at(Location::JsonPointer(at.clone())))?;
        // No string within the bounds: the grammar must not open one (a dead end the count
        // would only find after the quote), as the intersected automaton would be empty.
        if bound.admits_none() {
            return Ok(Some(self.g.nothing()));
        }
        let number = self.c.length_bounds.len() as u32;
        self.c.length_bounds.push(bound);
        self.c
            .counted_strings
            .insert(ContentKey::of(s, false), (number, at.into()));
        self.c.relies_on_matcher = true;
        match single {
            Some(only) => self.lower_regex(only, &only.regex, s, false).map(Some),
            None => self
                .lower_automaton(with_min.as_ref().unwrap_or(&pattern), false)
                .map(Some),
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
}

impl Compiler<'_> {
    /// Charges the table of a bound of `max` characters over a pattern of `states` states to
    /// the schema's budget of counted strings: `false`, nothing charged, past
    /// [`MAX_COUNTED_LENGTH`], [`MAX_COUNTED_BITS`] or what the schema has left of
    /// [`MAX_COUNTED_BITS_PER_SCHEMA`].
    pub(in crate::front::json_schema) fn charge_counted(&mut self, states: usize, max: u64) -> bool {
        let bits = LengthBound::table_bits(states, max);
        let fits = max <= MAX_COUNTED_LENGTH
            && bits <= MAX_COUNTED_BITS
            && self.counted_bits + bits <= MAX_COUNTED_BITS_PER_SCHEMA;
        if fits {
            self.counted_bits += bits;
        }
        fits
    }

    /// The bound of the strings of any characters within `min..=max` that value expression
    /// `e` holds, counted by the matcher to tell a discriminator's variants apart where no
    /// automaton of the value holds them (`"maxLength": 512` is 512 times a JSON
    /// character's states). `None` past the budget of counted strings.
    pub(in crate::front::json_schema) fn value_lengths(
        &mut self,
        e: ExprId,
        min: u64,
        max: u64,
    ) -> Result<Option<&Arc<LengthBound>>, CompileError> {
        if !self.value_lengths.contains_key(&e) {
            let any = CharDfa::length(0, None, &self.char_budget())?;
            let bound = match min <= max && self.charge_counted(any.states(), max) {
                true => Some(Arc::new(any.length_bound(
                    min as u32,
                    max as u32,
                    self.deadline,
                )?)),
                false => None,
            };
            self.value_lengths.insert(e, bound);
        }
        Ok(self.value_lengths[&e].as_ref())
    }
}
