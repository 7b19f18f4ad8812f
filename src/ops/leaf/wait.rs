//! The leaf of a `Wait`: content up to the first of its terminators, as the product of the
//! content's automaton and an Aho–Corasick automaton over the text terminators.

use std::collections::{HashMap, VecDeque};

use super::{leaf_limit, Leaf, RawDfa, DEAD, SPECIAL_BASE};
use crate::base::token::TokenId;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::limits::{Deadline, LimitExceeded, LimitKind};

/// What ends a `Wait`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Terminator {
    /// A text literal.
    Text(Vec<u8>),
    /// A special token.
    Special(TokenId),
}

/// Builds the leaf of a `Wait`: content (strings of `content`, a leaf whose exit states mark
/// where content may stop) up to the *first* occurrence of any terminator; exit index `i` =
/// terminator `i` matched. When two text terminators end at the same byte, the earlier one in
/// the list wins.
///
/// The product of the content DFA and an Aho–Corasick automaton over the text terminators:
/// the content DFA is fed only *committed* bytes — bytes that can no longer be the start of a
/// terminator — so the terminator itself is never content.
// Long: two breadth-first passes that belong together: the terminator prefix pending in
// each Aho–Corasick state, then the product of content and AC states, which reads those tables.
pub(crate) fn wait_leaf(
    content: &Leaf,
    terminators: &[Terminator],
    max_states: usize,
    deadline: &Deadline,
) -> Result<Leaf, CompileError> {
    use aho_corasick::automaton::Automaton as _;
    let texts: Vec<(usize, &[u8])> = terminators
        .iter()
        .enumerate()
        .filter_map(|(i, t)| match t {
            Terminator::Text(b) if !b.is_empty() => Some((i, b.as_slice())),
            Terminator::Text(_) => None,
            Terminator::Special(_) => None,
        })
        .collect();
    if terminators
        .iter()
        .any(|t| matches!(t, Terminator::Text(b) if b.is_empty()))
    {
        return Err(CompileError::unplaced(
            CompileErrorKind::Invalid,
            "a Wait terminator is empty",
        ));
    }
    if terminators.is_empty() {
        return Err(CompileError::unplaced(
            CompileErrorKind::Invalid,
            "a Wait needs a terminator",
        ));
    }
    let ac = aho_corasick::dfa::DFA::builder()
        .match_kind(aho_corasick::MatchKind::Standard)
        .start_kind(aho_corasick::StartKind::Unanchored)
        .build(texts.iter().map(|t| t.1))
        .map_err(|e| {
            CompileError::unplaced(CompileErrorKind::Limit, format!("terminators: {e}"))
        })?;
    let ac_start = ac.start_state(aho_corasick::Anchored::No).map_err(|e| {
        CompileError::unplaced(CompileErrorKind::Limit, format!("terminators: {e}"))
    })?;
    // Pending bytes of an AC state: the shortest path to it is the terminator prefix it stands for.
    let mut pending: HashMap<aho_corasick::automaton::StateID, Vec<u8>> = HashMap::new();
    pending.insert(ac_start, Vec::new());
    let mut queue = VecDeque::from([ac_start]);
    while let Some(a) = queue.pop_front() {
        deadline.tick().map_err(leaf_limit)?;
        for b in 0..=255u8 {
            let t = ac.next_state(aho_corasick::Anchored::No, a, b);
            if !ac.is_match(t) && !pending.contains_key(&t) {
                // `a` was given its pending bytes before it was queued.
                let mut p = pending[&a].clone();
                p.push(b);
                pending.insert(t, p);
                queue.push_back(t);
            }
        }
    }
    let feed = |mut c: u32, bytes: &[u8]| {
        for &b in bytes {
            if c == DEAD {
                break;
            }
            c = content.step(c, b as u32);
        }
        c
    };
    let content_accepts = |c: u32| c != DEAD && content.exit(c).is_some();

    let mut raw = RawDfa::default();
    let finals: Vec<u32> = (0..terminators.len())
        .map(|i| raw.add_state(Some(i as u32)))
        .collect();
    let mut ids: HashMap<(u32, aho_corasick::automaton::StateID), u32> = HashMap::new();
    let mut queue = VecDeque::new();
    let start = (content.start(), ac_start);
    raw.start = raw.add_state(None);
    ids.insert(start, raw.start);
    queue.push_back(start);
    while let Some((c, a)) = queue.pop_front() {
        deadline.tick().map_err(leaf_limit)?;
        // Queued pairs were numbered when queued, and every non-matching AC state has its
        // pending bytes (the first pass visited them all).
        let from = ids[&(c, a)];
        let pend = &pending[&a];
        for b in 0..=255u8 {
            let t = ac.next_state(aho_corasick::Anchored::No, a, b);
            let target = if ac.is_match(t) {
                // A match state matches at least one pattern.
                let pattern = (0..ac.match_len(t))
                    .map(|i| ac.match_pattern(t, i).as_usize())
                    .min()
                    .unwrap_or_default();
                let (index, term) = texts[pattern];
                // Content is everything before the terminator.
                let mut all = pend.clone();
                all.push(b);
                let before = &all[..all.len() - term.len()];
                if !content_accepts(feed(c, before)) {
                    continue;
                }
                finals[index]
            } else {
                let next_pend = &pending[&t];
                let committed = pend.len() + 1 - next_pend.len();
                let mut all = pend.clone();
                all.push(b);
                let c2 = feed(c, &all[..committed]);
                if c2 == DEAD {
                    continue;
                }
                match ids.get(&(c2, t)) {
                    Some(&s) => s,
                    None => {
                        let s = raw.add_state(None);
                        ids.insert((c2, t), s);
                        queue.push_back((c2, t));
                        s
                    }
                }
            };
            raw.rows[from as usize][b as usize] = target;
        }
        for (i, term) in terminators.iter().enumerate() {
            if let Terminator::Special(id) = term {
                if content_accepts(feed(c, pend)) {
                    raw.specials[from as usize].push((SPECIAL_BASE + id, finals[i]));
                }
            }
        }
        if raw.rows.len() > max_states {
            let exceeded = LimitExceeded {
                kind: LimitKind::AutomatonStates,
                value: raw.rows.len() as u64,
                max: max_states as u64,
            };
            return Err(CompileError::over_limit(
                exceeded,
                Location::None,
                "Wait automaton",
            ));
        }
    }
    raw.finish().map(Leaf::Dfa).ok_or_else(|| {
        CompileError::unplaced(CompileErrorKind::EmptyLanguage, "Wait can never end")
    })
}
