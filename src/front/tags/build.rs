//! Building a [`TagDispatch`]'s grammar: the free text from an Aho–Corasick automaton over
//! the triggers, stops and forbidden sequences (one right-linear rule per automaton state and
//! UTF-8 decoding state), the bodies, and the checks of counts, names and triggers.

use std::collections::HashMap;

use aho_corasick::automaton::{Automaton, StateID};
use aho_corasick::dfa::DFA;
use aho_corasick::{Anchored, MatchKind};
use rustc_hash::FxHashMap;

use super::{Piece, TagDispatch};
use crate::base::byteset::ByteSet;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::guard::tick;
use crate::front::json_schema::schema_expr;
use crate::ir::{ExprId, Grammar, GrammarBuilder, RuleId};
use crate::limits::{Deadline, LimitExceeded, LimitKind, Limits};

/// Marks a special token inside the byte alphabet the automaton reads: 0xFF never occurs in
/// UTF-8 text. Two continuation bytes follow with the special's index ([`encode_special`]):
/// no sequence starts with a continuation byte, so after a special the automaton never takes
/// its index for the start of some text sequence.
const SPECIAL_MARK: u8 = 0xFF;

/// Most special tokens one dispatch can name: two continuation bytes of six bits each.
const MAX_SPECIALS: usize = 1 << 12;

/// The bytes the automaton reads for the special token of index `i` (below [`MAX_SPECIALS`]).
fn encode_special(i: usize) -> [u8; 3] {
    [
        SPECIAL_MARK,
        0x80 | (i >> 6 & 0x3F) as u8,
        0x80 | (i & 0x3F) as u8,
    ]
}

/// UTF-8 decoding states: 0 at a character boundary, 1..=3 continuation bytes still due, 4..=7
/// after the lead bytes E0, ED, F0 and F4, which narrow the next byte.
fn utf8_step(state: usize, b: u8) -> Option<usize> {
    Some(match (state, b) {
        (0, 0x00..=0x7F) => 0,
        (0, 0xC2..=0xDF) => 1,
        (0, 0xE0) => 4,
        (0, 0xE1..=0xEC | 0xEE..=0xEF) => 2,
        (0, 0xED) => 5,
        (0, 0xF0) => 6,
        (0, 0xF1..=0xF3) => 3,
        (0, 0xF4) => 7,
        (1, 0x80..=0xBF) => 0,
        (2, 0x80..=0xBF) | (4, 0xA0..=0xBF) | (5, 0x80..=0x9F) => 1,
        (3, 0x80..=0xBF) | (6, 0x90..=0xBF) | (7, 0x80..=0x8F) => 2,
        _ => return None,
    })
}

pub(super) struct Builder<'d> {
    d: &'d TagDispatch,
    limits: &'d Limits,
    deadline: &'d Deadline,
    g: GrammarBuilder,
    dfa: DFA,
    /// Encoded triggers and stops (forbidden sequences never begin or end anything).
    triggers: Vec<Vec<u8>>,
    stops: Vec<Vec<u8>>,
    /// The special tokens free text may hold, each with its encoding.
    free: Vec<(String, Vec<u8>)>,
}

/// The `Limit` error of `exceeded` at `pointer` (of the `formwork check --tags` spec).
fn over(exceeded: LimitExceeded, pointer: &str, what: &str) -> CompileError {
    CompileError::over_limit(exceeded, Location::JsonPointer(pointer.to_string()), what)
}

impl<'d> Builder<'d> {
    pub(super) fn new(
        d: &'d TagDispatch,
        limits: &'d Limits,
        deadline: &'d Deadline,
    ) -> Result<Builder<'d>, CompileError> {
        check_counts_and_names(d, limits)?;
        let index = index_specials(d)?;
        // Every special was indexed above.
        let encode = |seq: &[Piece]| -> Vec<u8> {
            let mut out = Vec::new();
            for p in seq {
                match p {
                    Piece::Text(t) => out.extend_from_slice(t.as_bytes()),
                    Piece::Special(s) => out.extend(encode_special(index[s])),
                }
            }
            out
        };
        let triggers: Vec<Vec<u8>> = d.tags.iter().map(|t| encode(&t.begin)).collect();
        let stops: Vec<Vec<u8>> = d.stops.iter().map(|s| encode(s)).collect();
        let forbidden: Vec<Vec<u8>> = d.forbidden.iter().map(|s| encode(s)).collect();
        let free = d
            .free_specials
            .iter()
            .map(|s| (s.clone(), encode_special(index[s]).to_vec()))
            .collect();
        // The automaton has a state per byte of the sequences at most, and one to start.
        let mut states = 1u64;
        for (list, at) in [
            (&triggers, "/tags"),
            (&stops, "/stops"),
            (&forbidden, "/forbid"),
        ] {
            states += list.iter().map(|p| p.len() as u64).sum::<u64>();
            limits
                .check(LimitKind::AutomatonStates, states)
                .map_err(|e| over(e, at, "the automaton of the tag dispatch's sequences"))?;
        }
        let patterns: Vec<&Vec<u8>> = triggers.iter().chain(&stops).chain(&forbidden).collect();
        if patterns.iter().any(|p| p.is_empty()) {
            if let Some(i) = triggers.iter().position(Vec::is_empty) {
                return Err(invalid_trigger(i, "a trigger cannot be empty".into()));
            }
            return Err(CompileError::unplaced(
                CompileErrorKind::Invalid,
                "stop and forbidden sequences cannot be empty",
            ));
        }
        tick(deadline)?;
        let dfa = DFA::builder()
            .match_kind(MatchKind::Standard)
            .build(&patterns)
            .map_err(|e| {
                CompileError::unplaced(CompileErrorKind::Limit, format!("tag automaton: {e}"))
            })?;
        tick(deadline)?;
        check_triggers(&dfa, &triggers, deadline)?;
        Ok(Builder {
            d,
            limits,
            deadline,
            g: GrammarBuilder::with_limits(limits),
            dfa,
            triggers,
            stops,
            free,
        })
    }

    /// Walks `seq` from `sid`; the end state if no sequence completes before its last byte.
    fn walk(&self, sid: StateID, seq: &[u8]) -> Option<StateID> {
        let mut s = sid;
        for (k, &b) in seq.iter().enumerate() {
            s = self.dfa.next_state(Anchored::No, s, b);
            if self.dfa.is_match(s) && k + 1 < seq.len() {
                return None;
            }
        }
        Some(s)
    }

    fn pieces(&mut self, seq: &[Piece]) -> ExprId {
        let parts: Vec<ExprId> = seq
            .iter()
            .map(|p| match p {
                Piece::Text(t) => self.g.text(t),
                Piece::Special(s) => self.g.special(s),
            })
            .collect();
        self.g.seq(parts)
    }

    /// `Ok` while the grammar is within its size limit and the deadline has not passed.
    fn check(&self) -> Result<(), CompileError> {
        tick(self.deadline)?;
        self.limits
            .check(LimitKind::GrammarSize, self.g.len() as u64)
            .map_err(|e| CompileError::over_limit(e, Location::None, "the tag dispatch's grammar"))
    }

    // Long: the bodies, compiled once per tag, then the free-text rules from one worklist (a
    // rule per call-seen flag, automaton state and UTF-8 state), any of which may end in a
    // trigger and its body; the worklist's tables stay local to it.
    pub(super) fn build(mut self) -> Result<Grammar, CompileError> {
        let d = self.d;
        // Bodies, compiled once per tag.
        let mut bodies = Vec::new();
        for (i, tag) in d.tags.iter().enumerate() {
            let mut alts = Vec::new();
            for (j, body) in tag.bodies.iter().enumerate() {
                let at = format!("/tags/{i}/bodies/{j}/schema");
                let value = schema_expr(
                    &body.schema,
                    d.entry(i, j),
                    &d.options,
                    &mut self.g,
                    &format!("tag {i} body {j}: "),
                    self.limits,
                    self.deadline,
                    None,
                )
                .map_err(|e| match e.location() {
                    Location::JsonPointer(p) => {
                        let place = Location::JsonPointer(format!("{at}{p}"));
                        e.within(place, &format!("tag {i} body {j}"))
                    }
                    _ => e,
                })?
                .body;
                let prefix = self.pieces(&body.prefix);
                let suffix = self.pieces(&body.suffix);
                alts.push(self.g.seq([prefix, value, suffix]));
            }
            bodies.push(self.g.alt(alts));
        }
        // Free text: a rule per (called yet?, automaton state, UTF-8 state) reached from the
        // start, made as it is first referred to and defined from a worklist.
        let copies = if d.require_call { 2 } else { 1 };
        let after_call = copies - 1;
        let start = start_state(&self.dfa);
        let mut text = TextRules::default();
        let first = text.rule(&mut self.g, (0, start, 0));
        let again = text.rule(&mut self.g, (after_call, start, 0));
        let mut targets: Vec<((StateID, usize), ByteSet)> = Vec::new();
        let mut target_of: FxHashMap<(StateID, usize), usize> = FxHashMap::default();
        while let Some(((c, sid, u), rule)) = text.pending.pop() {
            self.check()?;
            let mut branches = Vec::new();
            // Bytes of free text, grouped by the state they lead to.
            targets.clear();
            target_of.clear();
            for b in 0..=255u8 {
                let Some(next_u) = utf8_step(u, b) else {
                    continue;
                };
                let next = self.dfa.next_state(Anchored::No, sid, b);
                if self.dfa.is_match(next) {
                    continue;
                }
                match target_of.get(&(next, next_u)) {
                    Some(&k) => targets[k].1.insert(b),
                    None => {
                        target_of.insert((next, next_u), targets.len());
                        targets.push(((next, next_u), ByteSet::byte(b)));
                    }
                }
            }
            for &((next, next_u), set) in &targets {
                let class = self.g.class(set);
                let then = text.rule(&mut self.g, (c, next, next_u));
                let then = self.g.rule_ref(then);
                branches.push(self.g.seq([class, then]));
            }
            if u == 0 {
                // Special tokens allowed in free text.
                for (name, bytes) in &self.free {
                    if let Some(next) = self.walk(sid, bytes) {
                        if !self.dfa.is_match(next) {
                            let sp = self.g.special(name);
                            let then = text.rule(&mut self.g, (c, next, 0));
                            let then = self.g.rule_ref(then);
                            branches.push(self.g.seq([sp, then]));
                        }
                    }
                }
                // A trigger, its body, then free text again.
                for (i, tag) in d.tags.iter().enumerate() {
                    tick(self.deadline)?;
                    if self.walk(sid, &self.triggers[i]).is_some() {
                        let begin = self.pieces(&tag.begin);
                        let rest = self.g.rule_ref(again);
                        branches.push(self.g.seq([begin, bodies[i], rest]));
                    }
                }
                if c == after_call {
                    branches.push(self.g.empty());
                    for (k, stop) in d.stops.iter().enumerate() {
                        tick(self.deadline)?;
                        if self.walk(sid, &self.stops[k]).is_some() {
                            branches.push(self.pieces(stop));
                        }
                    }
                }
            }
            let body = self.g.alt(branches);
            self.g.define(rule, body)?;
        }
        let root = self.g.rule("tag dispatch");
        let first = self.g.rule_ref(first);
        self.g.define(root, first)?;
        self.g.finish(root)
    }
}

/// The dispatch's lists within [`LimitKind::Alternatives`], and no two tools of one name (a
/// call could not say which it calls).
fn check_counts_and_names(d: &TagDispatch, limits: &Limits) -> Result<(), CompileError> {
    let count = |n: usize, at: &str, what: &str| {
        limits
            .check(LimitKind::Alternatives, n as u64)
            .map_err(|e| over(e, at, what))
    };
    count(d.tool_names.len(), "/tools", "tools")?;
    count(d.tags.len(), "/tags", "tags")?;
    count(d.stops.len(), "/stops", "stop sequences")?;
    count(d.forbidden.len(), "/forbid", "forbidden sequences")?;
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (j, name) in d.tool_names.iter().enumerate() {
        if let Some(i) = names.insert(name, j) {
            return Err(CompileError::new(
                CompileErrorKind::Invalid,
                Location::JsonPointer(format!("/tools/{j}")),
                format!("tool {j} is named {name:?} like tool {i}: a call could not say which tool it calls"),
            ));
        }
    }
    Ok(())
}

/// Numbers every special token the dispatch names (free text's first, then the sequences'),
/// at most [`MAX_SPECIALS`], each encoded as three bytes inside the sequences' automaton.
fn index_specials(d: &TagDispatch) -> Result<HashMap<String, usize>, CompileError> {
    let mut index: HashMap<String, usize> = HashMap::new();
    let all_pieces = d
        .tags
        .iter()
        .flat_map(|t| {
            t.begin.iter().chain(
                t.bodies
                    .iter()
                    .flat_map(|b| b.prefix.iter().chain(&b.suffix)),
            )
        })
        .chain(d.stops.iter().flatten())
        .chain(d.forbidden.iter().flatten());
    let specials_in = d
        .free_specials
        .iter()
        .chain(all_pieces.filter_map(|p| match p {
            Piece::Special(s) => Some(s),
            Piece::Text(_) => None,
        }));
    for s in specials_in {
        if !index.contains_key(s) {
            index.insert(s.clone(), index.len());
        }
    }
    if index.len() > MAX_SPECIALS {
        let exceeded = LimitExceeded {
            kind: LimitKind::Alternatives,
            value: index.len() as u64,
            max: MAX_SPECIALS as u64,
        };
        return Err(CompileError::over_limit(
            exceeded,
            Location::None,
            "special tokens of one tag dispatch",
        ));
    }
    Ok(index)
}

/// A trigger must not contain another sequence: read through the automaton, no sequence may
/// end before its last byte, and none but itself at it.
fn check_triggers(
    dfa: &DFA,
    triggers: &[Vec<u8>],
    deadline: &Deadline,
) -> Result<(), CompileError> {
    for (i, t) in triggers.iter().enumerate() {
        let mut sid = start_state(dfa);
        for (k, &b) in t.iter().enumerate() {
            tick(deadline)?;
            sid = dfa.next_state(Anchored::No, sid, b);
            let others = match k + 1 == t.len() {
                true => (0..dfa.match_len(sid))
                    .map(|m| dfa.match_pattern(sid, m).as_usize())
                    .find(|&j| j != i),
                false if dfa.is_match(sid) => Some(dfa.match_pattern(sid, 0).as_usize()),
                false => None,
            };
            if let Some(j) = others {
                return Err(invalid_trigger(i, format!("trigger {i} contains another trigger, stop or forbidden sequence ({j}), so it could never be written")));
            }
        }
    }
    Ok(())
}

/// The start of the automaton. Cannot fail: the DFA's builder makes unanchored searches by
/// default.
fn start_state(dfa: &DFA) -> StateID {
    dfa.start_state(Anchored::No).expect("unanchored start")
}

/// The `Invalid` error of trigger `i`.
fn invalid_trigger(i: usize, what: String) -> CompileError {
    CompileError::new(
        CompileErrorKind::Invalid,
        Location::JsonPointer(format!("/tags/{i}/begin")),
        what,
    )
}

/// The free-text rules made so far, by (copy, automaton state, UTF-8 state), and those not
/// defined yet.
#[derive(Default)]
struct TextRules {
    rules: FxHashMap<(usize, StateID, usize), RuleId>,
    pending: Vec<((usize, StateID, usize), RuleId)>,
}

impl TextRules {
    /// The rule of `key`, declared (and queued for its definition) if new.
    fn rule(&mut self, g: &mut GrammarBuilder, key: (usize, StateID, usize)) -> RuleId {
        if let Some(&r) = self.rules.get(&key) {
            return r;
        }
        let (c, sid, u) = key;
        let r = g.rule(&format!("text {c} {} {u}", sid.as_usize()));
        self.rules.insert(key, r);
        self.pending.push((key, r));
        r
    }
}
