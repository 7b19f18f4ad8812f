//! Automaton algorithms shared by the JSON Schema character automata (`front::chars`) and the
//! Earley backend's unit automata (`cfg`), each on its own representation: the algorithms
//! take states as numbers and edges as `(label, source, target)` triples or successor
//! functions, never an engine's types. `interner` numbers keys (state sets, signatures) in
//! the order they are first seen, `determinize` holds the subset construction's worklist and
//! epsilon closure, `minimize` Hopcroft's refinement.

pub(crate) mod determinize;
pub(crate) mod interner;
pub(crate) mod minimize;
