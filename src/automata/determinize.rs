//! The engine-independent parts of the subset (powerset) construction, as regex-automata's
//! `util/determinize` keeps them: the [`Worklist`] that numbers the states found in
//! discovery order and expands them in that order, within a state cap, a work budget and the
//! compilation's deadline; and the [`Closure`] that extends a set of NFA states along their
//! epsilon edges with visit marks cleared in O(1).
//!
//! Each engine keeps what depends on its automaton:
//! - its transitions: the Earley lowering (`cfg::lower::determinize`) groups targets by byte
//!   class, special token and called unit; the character automata (`front::chars::nfa`) by
//!   runs of atoms between the edges of their character spans;
//! - its epsilon edges, handed to [`Closure::close`] as a successor function. The character
//!   NFA's anchors make its states pairs (node, whether `$` has passed) and only some of the
//!   states a closure reaches belong in the key of a subset, so it closes over the pairs and
//!   filters the result;
//! - what the limits mean: past its cap or work budget the Earley lowering falls back to
//!   epsilon removal, where the character automata fail with a `Limit` error.

use super::interner::Numbering;
use crate::limits::{Deadline, LimitExceeded};

/// Why a construction stopped before it expanded every state.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// More states were found than the cap allows.
    States,
    /// The work budget is spent.
    Work,
    /// The deadline passed.
    Time(LimitExceeded),
}

impl From<LimitExceeded> for Stop {
    fn from(exceeded: LimitExceeded) -> Stop {
        Stop::Time(exceeded)
    }
}

/// The states of a construction, numbered in the order they are found; the numbering is the
/// worklist, expanded in id order, so state 0 is the start and ids are breadth-first.
pub(crate) struct Worklist<'w, N> {
    states: N,
    /// States handed out by [`Worklist::next`] so far.
    expanded: usize,
    max_states: usize,
    /// What is left of the work budget, if there is one; written back as it is spent.
    work: Option<&'w mut usize>,
}

impl<'w, N: Numbering> Worklist<'w, N> {
    /// An empty worklist numbering its states in `states`, of which more than `max_states`
    /// stops the construction.
    pub fn new(states: N, max_states: usize) -> Self {
        Worklist {
            states,
            expanded: 0,
            max_states,
            work: None,
        }
    }

    /// The same, spending from the budget `left` in [`Worklist::spend`].
    pub fn with_work(self, left: &'w mut usize) -> Self {
        Worklist {
            work: Some(left),
            ..self
        }
    }

    /// The id of the state `key`, numbered (and so queued) if it is new.
    #[inline]
    pub fn add(&mut self, key: &N::Key) -> u32 {
        self.states.intern(key).0
    }

    /// The key of state `id`.
    #[inline]
    pub fn key(&self, id: u32) -> &N::Key {
        self.states.get(id)
    }

    /// How many states are numbered.
    pub fn len(&self) -> usize {
        self.states.len()
    }

    /// The next state to expand, `None` once all are. One deadline tick per state; the cap is
    /// checked here rather than as states are found, so a construction that stops has
    /// expanded `max_states` states at most and found at least one more.
    #[inline]
    pub fn next(&mut self, deadline: &Deadline) -> Result<Option<u32>, Stop> {
        if self.expanded >= self.states.len() {
            return Ok(None);
        }
        deadline.tick()?;
        if self.states.len() > self.max_states {
            return Err(Stop::States);
        }
        self.expanded += 1;
        Ok(Some(self.expanded as u32 - 1))
    }

    /// Spends `amount` of the work budget (nothing without one); [`Stop::Work`] if less is
    /// left, which is then left as it was.
    #[inline]
    pub fn spend(&mut self, amount: usize) -> Result<(), Stop> {
        if let Some(left) = self.work.as_deref_mut() {
            *left = left.checked_sub(amount).ok_or(Stop::Work)?;
        }
        Ok(())
    }
}

/// Epsilon closures over the states `0..n` of an NFA, with visit marks reused across
/// closures (a round number per closure: clearing the marks each time was quadratic).
pub(crate) struct Closure {
    marks: Vec<u32>,
    round: u32,
}

impl Closure {
    /// Closures over `states` states.
    pub fn new(states: usize) -> Closure {
        Closure {
            marks: vec![0; states],
            round: 0,
        }
    }

    /// Extends `set` with every state reachable from its members through `successors` (a
    /// state's epsilon targets), then sorts it. Members given twice stay twice: the caller
    /// removes them, after charging the set's size as given if it counts work that way.
    #[inline]
    pub fn close<I: IntoIterator<Item = u32>>(
        &mut self,
        set: &mut Vec<u32>,
        mut successors: impl FnMut(u32) -> I,
    ) {
        self.round = match self.round.checked_add(1) {
            Some(round) => round,
            None => {
                self.marks.fill(0);
                1
            }
        };
        let round = self.round;
        set.iter().for_each(|&s| self.marks[s as usize] = round);
        let mut i = 0;
        while i < set.len() {
            let s = set[i];
            i += 1;
            for t in successors(s) {
                let mark = &mut self.marks[t as usize];
                if *mark != round {
                    *mark = round;
                    set.push(t);
                }
            }
        }
        set.sort_unstable();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeSet, HashSet};

    use formwork_testkit::rng::Rng;

    use super::*;
    use crate::automata::interner::SliceInterner;

    /// Uniform in `0..n`, as a state or label number.
    fn below(rng: &mut Rng, n: u32) -> u32 {
        rng.below(n as usize) as u32
    }

    /// A small NFA: `edges[s]` are `(label, target)`, `eps[s]` epsilon targets; start 0.
    struct Nfa {
        labels: u32,
        edges: Vec<Vec<(u32, u32)>>,
        eps: Vec<Vec<u32>>,
        accept: Vec<bool>,
    }

    fn random_nfa(rng: &mut Rng) -> Nfa {
        let (n, labels) = (1 + below(rng, 7), 1 + below(rng, 3));
        let mut nfa = Nfa {
            labels,
            edges: vec![Vec::new(); n as usize],
            eps: vec![Vec::new(); n as usize],
            accept: (0..n).map(|_| below(rng, 4) == 0).collect(),
        };
        for s in 0..n as usize {
            for _ in 0..below(rng, 4) {
                nfa.edges[s].push((below(rng, labels), below(rng, n)));
            }
            for _ in 0..below(rng, 3) {
                nfa.eps[s].push(below(rng, n));
            }
        }
        nfa
    }

    /// The DFA by the shared pieces: `next[state][label]` (`None`: no move) and acceptance.
    type Dfa = (Vec<Vec<Option<u32>>>, Vec<bool>);

    fn determinize(nfa: &Nfa, max_states: usize, work: &mut usize) -> Result<Dfa, Stop> {
        let deadline = Deadline::never();
        let mut closure = Closure::new(nfa.accept.len());
        let eps = |s: u32| nfa.eps[s as usize].iter().copied();
        let mut sets = Worklist::new(SliceInterner::default(), max_states).with_work(work);
        let mut set = vec![0];
        closure.close(&mut set, eps);
        sets.add(&set);
        let mut next = Vec::new();
        while let Some(id) = sets.next(&deadline)? {
            let members = sets.key(id).to_vec();
            sets.spend(members.len())?;
            let mut row = Vec::new();
            for label in 0..nfa.labels {
                set.clear();
                for &s in &members {
                    let edges = nfa.edges[s as usize].iter();
                    set.extend(edges.filter(|e| e.0 == label).map(|e| e.1));
                }
                closure.close(&mut set, eps);
                set.dedup();
                row.push((!set.is_empty()).then(|| sets.add(&set)));
            }
            next.push(row);
        }
        let accept = (0..sets.len() as u32)
            .map(|id| sets.key(id).iter().any(|&s| nfa.accept[s as usize]))
            .collect();
        Ok((next, accept))
    }

    /// Whether the NFA accepts `word`, by plain set simulation (closures by a fixpoint).
    fn nfa_accepts(nfa: &Nfa, word: &[u32]) -> bool {
        let close = |mut set: HashSet<u32>| loop {
            let more: HashSet<u32> = set
                .iter()
                .flat_map(|&s| nfa.eps[s as usize].iter().copied())
                .collect();
            if more.is_subset(&set) {
                return set;
            }
            set.extend(more);
        };
        let mut at = close(HashSet::from([0]));
        for &label in word {
            let moved = at.iter().flat_map(|&s| &nfa.edges[s as usize]);
            at = close(moved.filter(|e| e.0 == label).map(|e| e.1).collect());
        }
        at.iter().any(|&s| nfa.accept[s as usize])
    }

    fn dfa_accepts((next, accept): &Dfa, word: &[u32]) -> bool {
        let mut at = 0;
        for &label in word {
            match next[at][label as usize] {
                Some(t) => at = t as usize,
                None => return false,
            }
        }
        accept[at]
    }

    /// Every word over `labels` of at most `len` letters.
    fn words(labels: u32, len: usize) -> Vec<Vec<u32>> {
        let mut all = vec![Vec::new()];
        let mut last = vec![Vec::new()];
        for _ in 0..len {
            last = last
                .iter()
                .flat_map(|w: &Vec<u32>| (0..labels).map(move |l| [w.clone(), vec![l]].concat()))
                .collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    #[test]
    fn subsets_accept_what_the_nfa_accepts() {
        let mut rng = Rng::new(19);
        for _ in 0..400 {
            let nfa = random_nfa(&mut rng);
            let dfa = determinize(&nfa, usize::MAX, &mut { usize::MAX }).unwrap();
            // Distinct subsets, numbered breadth first from the start: each state is reached
            // first from a state of a lower id.
            assert!(dfa.0.len() <= 1 << nfa.accept.len());
            for (id, row) in dfa.0.iter().enumerate().skip(1) {
                let first = dfa.0.iter().position(|r| r.contains(&Some(id as u32)));
                assert!(first.is_some_and(|f| f < id), "state {id} found late");
                assert_eq!(row.len(), nfa.labels as usize);
            }
            for word in words(nfa.labels, 5) {
                assert_eq!(
                    dfa_accepts(&dfa, &word),
                    nfa_accepts(&nfa, &word),
                    "{word:?} on {:?} {:?} {:?}",
                    nfa.edges,
                    nfa.eps,
                    nfa.accept
                );
            }
        }
    }

    #[test]
    fn subsets_stop_past_the_cap_and_the_work_budget() {
        // `(a|b)*a(a|b)(a|b)`: eight subsets, each of the states 0..=3 in one.
        let nfa = Nfa {
            labels: 2,
            edges: vec![
                vec![(0, 0), (1, 0), (0, 1)],
                vec![(0, 2), (1, 2)],
                vec![(0, 3), (1, 3)],
                vec![],
            ],
            eps: vec![Vec::new(); 4],
            accept: vec![false, false, false, true],
        };
        assert_eq!(
            determinize(&nfa, 8, &mut { usize::MAX }).unwrap().0.len(),
            8
        );
        assert_eq!(
            determinize(&nfa, 7, &mut { usize::MAX }).unwrap_err(),
            Stop::States
        );
        // The work is the members of each expanded subset: 20 for all eight.
        let mut left = 20;
        assert!(determinize(&nfa, 8, &mut left).is_ok());
        assert_eq!(left, 0);
        let mut left = 19;
        assert_eq!(determinize(&nfa, 8, &mut left).unwrap_err(), Stop::Work);
        assert!(left < 19, "what was spent before stopping is written back");
    }

    #[test]
    fn closure_reaches_exactly_the_epsilon_successors() {
        let mut rng = Rng::new(7);
        let mut closure = Closure::new(9);
        for _ in 0..500 {
            let eps: Vec<Vec<u32>> = (0..9)
                .map(|_| {
                    (0..below(&mut rng, 3))
                        .map(|_| below(&mut rng, 9))
                        .collect()
                })
                .collect();
            let seeds: Vec<u32> = (0..below(&mut rng, 4))
                .map(|_| below(&mut rng, 9))
                .collect();
            let mut set = seeds.clone();
            closure.close(&mut set, |s| eps[s as usize].iter().copied());
            let mut want: BTreeSet<u32> = seeds.iter().copied().collect();
            let mut stack = seeds.clone();
            while let Some(s) = stack.pop() {
                stack.extend(eps[s as usize].iter().filter(|&&t| want.insert(t)));
            }
            assert!(set.is_sorted(), "{set:?}");
            let seen_twice = seeds.len() - seeds.iter().collect::<HashSet<_>>().len();
            assert_eq!(set.len(), want.len() + seen_twice, "{seeds:?} {eps:?}");
            set.dedup();
            assert_eq!(set, want.into_iter().collect::<Vec<_>>());
        }
    }
}
