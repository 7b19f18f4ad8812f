//! Building a [`CharDfa`] from a regex: a Thompson NFA over the regex's character atoms, then
//! subset construction; [`CharDfa::from_hir`] is the entry point.

use foldhash::{HashMap, HashMapExt};
use std::rc::Rc;

use regex_syntax::hir::{Class, ClassUnicode, Hir, HirKind, Look};

use super::{after, atom_of, expand_next, finish, partition, Budget, CharDfa, DEAD};
use crate::automata::determinize::{Closure, Worklist};
use crate::automata::interner::SliceInterner;
use crate::error::{CompileError, CompileErrorKind, Location};
use crate::front::guard::{guarded, tick};
use crate::limits::{Deadline, LimitExceeded, LimitKind};

impl CharDfa {
    /// The strings `hir` matches as a whole string (callers wrap search patterns in `.*`).
    /// Captures are transparent; `^`/`$` (`Look::Start`/`End`) keep their meaning anywhere, so
    /// where they are redundant they cost nothing and elsewhere they prune (`a^b` matches
    /// nothing). Other assertions and byte classes are `Unsupported`; more DFA states than the
    /// budget (or an NFA of more than twenty times that) is a `Limit` error.
    pub fn from_hir(hir: &Hir, budget: &Budget) -> Result<CharDfa, CompileError> {
        let atoms = partition(class_cuts(hir));
        let mut nfa = Nfa {
            atoms: &atoms,
            nodes: vec![NfaNode::Match],
            spans: HashMap::new(),
            work: 0,
            budget: budget.max_states.saturating_mul(20),
            deadline: budget.deadline,
        };
        let start = nfa.compile(hir, 0)?;
        let (next, accept) = nfa.determinize(start, budget)?;
        finish(atoms, next, accept, budget.deadline)
    }
}

/// The error of a regex construct that has no meaning over whole decoded strings here.
fn unsupported(what: &str) -> CompileError {
    CompileError::unplaced(
        CompileErrorKind::Unsupported,
        format!("{what} is not supported"),
    )
}

/// Where each class range and literal character of `hir` begins and ends (an explicit stack:
/// `hir` nests as deeply as its pattern).
fn class_cuts(hir: &Hir) -> Vec<char> {
    let mut cuts = Vec::new();
    let mut range = |lo: char, hi: char| cuts.extend([lo].into_iter().chain(after(hi)));
    let mut stack = vec![hir];
    while let Some(h) = stack.pop() {
        match h.kind() {
            HirKind::Literal(lit) => String::from_utf8_lossy(&lit.0)
                .chars()
                .for_each(|c| range(c, c)),
            HirKind::Class(Class::Unicode(c)) => c.iter().for_each(|r| range(r.start(), r.end())),
            HirKind::Repetition(rep) => stack.push(&rep.sub),
            HirKind::Capture(cap) => stack.push(&cap.sub),
            HirKind::Concat(hs) | HirKind::Alternation(hs) => stack.extend(hs),
            HirKind::Empty | HirKind::Look(_) | HirKind::Class(Class::Bytes(_)) => {}
        }
    }
    cuts
}

/// A Thompson NFA node; nodes are built back to front, each knowing its continuation.
enum NfaNode {
    /// One character of these sorted atom spans (inclusive, shared by the copies of a class
    /// that repetitions make), then the node.
    Char(Rc<[(u32, u32)]>, u32),
    /// Any of these nodes, without input.
    Split(Vec<u32>),
    /// The node, if nothing has been read yet.
    Start(u32),
    /// The node, after which nothing more may be read.
    End(u32),
    /// The whole string matched.
    Match,
}

/// The node that matches the whole string, the first built.
const MATCH: u32 = 0;

/// A Thompson NFA over atoms, built from a `Hir` and then determinized.
struct Nfa<'a> {
    /// The alphabet: every class and literal of the `Hir` is a union of these.
    atoms: &'a [(char, char)],
    /// Node [`MATCH`] is [`NfaNode::Match`].
    nodes: Vec<NfaNode>,
    /// The atom spans of each class of the `Hir` (by address), computed once.
    spans: HashMap<*const ClassUnicode, Rc<[(u32, u32)]>>,
    /// Nodes built and sub-expressions visited: repetition counts multiply both, so this is
    /// what must be bounded, before memory runs out.
    work: usize,
    /// The most `work` allowed.
    budget: usize,
    deadline: &'a Deadline,
}

impl Nfa<'_> {
    /// Adds a node, within the budget.
    fn push(&mut self, node: NfaNode) -> Result<u32, CompileError> {
        self.spend()?;
        self.nodes.push(node);
        Ok(self.nodes.len() as u32 - 1)
    }

    /// Counts one unit of work, failing past the budget.
    fn spend(&mut self) -> Result<(), CompileError> {
        self.work += 1;
        tick(self.deadline)?;
        match self.work > self.budget {
            true => {
                let exceeded = LimitExceeded {
                    kind: LimitKind::AutomatonStates,
                    value: self.work as u64,
                    max: self.budget as u64,
                };
                Err(CompileError::over_limit(
                    exceeded,
                    Location::None,
                    "the regex's automaton nodes",
                ))
            }
            false => Ok(()),
        }
    }

    /// The entry of `hir` followed by node `next`. Recursion: as deep as `hir` nests (bounded
    /// by the regex parser's nesting limit), each level guarded.
    fn compile(&mut self, hir: &Hir, next: u32) -> Result<u32, CompileError> {
        guarded(|| self.compile_step(hir, next))
    }

    fn compile_step(&mut self, hir: &Hir, next: u32) -> Result<u32, CompileError> {
        self.spend()?;
        match hir.kind() {
            HirKind::Empty => Ok(next),
            HirKind::Literal(lit) => {
                let text = std::str::from_utf8(&lit.0)
                    .map_err(|_| unsupported("a literal that is not UTF-8 text"))?;
                text.chars().rev().try_fold(next, |at, c| {
                    let a = atom_of(self.atoms, c) as u32;
                    self.push(NfaNode::Char(Rc::from([(a, a)]), at))
                })
            }
            HirKind::Class(Class::Unicode(class)) => {
                let atoms = self.atoms;
                let atom = |c| atom_of(atoms, c) as u32;
                let spans = self
                    .spans
                    .entry(class as *const ClassUnicode)
                    .or_insert_with(|| {
                        class
                            .iter()
                            .map(|r| (atom(r.start()), atom(r.end())))
                            .collect()
                    })
                    .clone();
                self.push(NfaNode::Char(spans, next))
            }
            HirKind::Class(Class::Bytes(_)) => Err(unsupported("a byte class")),
            HirKind::Look(Look::Start) => self.push(NfaNode::Start(next)),
            HirKind::Look(Look::End) => self.push(NfaNode::End(next)),
            HirKind::Look(look) => Err(unsupported(&format!("the assertion {look:?}"))),
            HirKind::Capture(cap) => self.compile(&cap.sub, next),
            HirKind::Concat(parts) => parts
                .iter()
                .rev()
                .try_fold(next, |at, p| self.compile(p, at)),
            HirKind::Alternation(branches) => {
                let entries = branches
                    .iter()
                    .map(|b| self.compile(b, next))
                    .collect::<Result<_, _>>()?;
                self.push(NfaNode::Split(entries))
            }
            HirKind::Repetition(rep) => {
                let mut at = match rep.max {
                    // `x{0,k}` nested: (x(x(...)?)?)?.
                    Some(max) => {
                        let mut at = next;
                        for _ in rep.min..max {
                            let body = self.compile(&rep.sub, at)?;
                            at = self.push(NfaNode::Split(vec![body, next]))?;
                        }
                        at
                    }
                    None => {
                        let back = self.push(NfaNode::Split(Vec::new()))?;
                        let body = self.compile(&rep.sub, back)?;
                        self.nodes[back as usize] = NfaNode::Split(vec![body, next]);
                        back
                    }
                };
                for _ in 0..rep.min {
                    at = self.compile(&rep.sub, at)?;
                }
                Ok(at)
            }
        }
    }

    /// Into `key`, sorted: the character nodes reachable from `seeds` without input, and
    /// [`MATCH`] if the string may end here. The closure runs over pairs (node, whether an
    /// `End` has passed), numbered `2 * node + ended`: past `$` only the match counts.
    fn closure(&self, marks: &mut Closure, seeds: &[u32], at_start: bool, key: &mut Vec<u32>) {
        key.clear();
        key.extend(seeds.iter().map(|&q| 2 * q));
        marks.close(key, |s| {
            let (q, ended) = (s / 2, s % 2);
            let (split, then): (&[u32], Option<u32>) = match &self.nodes[q as usize] {
                NfaNode::Split(xs) => (xs, None),
                NfaNode::Start(x) if at_start => (&[], Some(2 * x + ended)),
                NfaNode::End(x) => (&[], Some(2 * x + 1)),
                NfaNode::Char(..) | NfaNode::Start(_) | NfaNode::Match => (&[], None),
            };
            split.iter().map(move |&x| 2 * x + ended).chain(then)
        });
        key.retain(|&s| match self.nodes[s as usize / 2] {
            NfaNode::Char(..) => s % 2 == 0,
            NfaNode::Match => true,
            NfaNode::Split(_) | NfaNode::Start(_) | NfaNode::End(_) => false,
        });
        key.iter_mut().for_each(|s| *s /= 2);
        key.dedup();
    }

    /// Subset construction: the transition table and acceptance of the reachable subsets,
    /// each numbered by its key (see [`Nfa::closure`]).
    fn determinize(
        &self,
        start: u32,
        budget: &Budget,
    ) -> Result<(Vec<u32>, Vec<bool>), CompileError> {
        let width = self.atoms.len();
        let max_states = budget.states_for(width);
        let mut states = Worklist::new(SliceInterner::default(), max_states);
        let mut marks = Closure::new(self.nodes.len() * 2);
        let (mut set, mut key) = (Vec::new(), Vec::new());
        self.closure(&mut marks, &[start], true, &mut key);
        states.add(&key);
        let mut next = Vec::new();
        while let Some(id) = expand_next(&mut states, max_states, budget.deadline)? {
            set.clear();
            set.extend_from_slice(states.key(id));
            let mut row = vec![DEAD; width];
            // Between consecutive span edges every atom leads to the same subset.
            let mut cuts = vec![0, width as u32];
            for &q in &set {
                if let NfaNode::Char(spans, _) = &self.nodes[q as usize] {
                    cuts.extend(spans.iter().flat_map(|&(lo, hi)| [lo, hi + 1]));
                }
            }
            cuts.sort_unstable();
            cuts.dedup();
            for w in cuts.windows(2) {
                tick(budget.deadline)?;
                let targets: Vec<u32> = set
                    .iter()
                    .filter_map(|&q| match &self.nodes[q as usize] {
                        NfaNode::Char(spans, to) => {
                            let k = spans.partition_point(|s| s.1 < w[0]);
                            spans.get(k).is_some_and(|s| s.0 <= w[0]).then_some(*to)
                        }
                        _ => None,
                    })
                    .collect();
                self.closure(&mut marks, &targets, false, &mut key);
                if !key.is_empty() {
                    row[w[0] as usize..w[1] as usize].fill(states.add(&key));
                }
            }
            next.extend(row);
        }
        let accept = (0..states.len() as u32)
            .map(|id| states.key(id).first() == Some(&MATCH))
            .collect();
        Ok((next, accept))
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::chars::tests::{alphabet, budget, dfa, samples, Rng};

    /// Patterns of the kind JSON Schemas hold, and some that stress classes and repetition.
    const PATTERNS: &[&str] = &[
        r"^[a-z]+$",
        r"^[A-Z][a-z0-9_-]{2,7}$",
        r"(?s:.)*[0-9a-fA-F]+(?s:.)*",
        r"^(\d+\.\d+\.\d+.*)$",
        r"^x-",
        r"^x-(?s:.)*",
        r"^([a-z0-9-]+):([a-z0-9\.-]+):([a-z0-9-]+)?:([a-z0-9-]+)$",
        r"^\S+$",
        r"é+ü?",
        r"^$",
        r"a|b*c",
        r"^[^\x00-\x1f]*$",
        r"[\x{10000}-\x{10FFFF}]x",
        r"(ab){2,4}",
        r"^\w+@\w+\.\w{2,3}$",
        r"(?i)abk",
        r"[^a]*a[^a]*",
        r"(a|ab)(c|bcd)(d*)",
        r"\d{3}-\d{4}",
        r"(?s:.)*(?:😀|\x{FFFF})(?s:.)*",
        r"[\x{D7FF}\x{E000}]+",
        r"[^\x{E000}]b",
        r"a{0,3}b{2,}",
        r"(?:ab|a)*b?",
    ];

    /// Anchors where they are not redundant keep their meaning rather than being dropped.
    const ANCHORED: &[&str] = &[
        r"a^b",
        r"(?s:.)*(^a|b)c(?s:.)*",
        r"a$|b",
        r"(a|$)b",
        r"x(^|y)z",
        r"(?:^a)?b",
        r"a(?:$)?",
        r"(?:a$)*",
    ];

    #[test]
    fn chars_from_hir_agrees_with_regex() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for &p in PATTERNS.iter().chain(ANCHORED) {
            let d = dfa(p);
            let re = regex::Regex::new(&format!("^(?:{p})$")).unwrap();
            let (mut yes, mut no) = (0, 0);
            for s in samples(&d, &alphabet(p), &mut rng, 3000) {
                assert_eq!(d.matches(&s), re.is_match(&s), "{p} on {s:?}");
                *if re.is_match(&s) { &mut yes } else { &mut no } += 1;
            }
            if PATTERNS.contains(&p) {
                assert!(yes > 0 && no > 0, "{p}: {yes} matches, {no} others");
            }
        }
    }

    #[test]
    fn chars_from_hir_rejects_what_it_cannot_mean() {
        for p in [r"(?m)^a", r"\bword", r"a\B", r"(?-u:[a-z])"] {
            let hir = regex_syntax::Parser::new().parse(p).unwrap();
            let err = CharDfa::from_hir(&hir, &budget(4096)).unwrap_err();
            assert_eq!(err.kind(), CompileErrorKind::Unsupported, "{p}");
        }
    }
}
