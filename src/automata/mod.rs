//! Automaton algorithms shared by the JSON Schema character automata (`front::chars`) and the
//! Earley backend's unit automata (`cfg`), each on its own representation: the algorithms
//! take states as numbers and edges as `(label, source, target)` triples.

pub(crate) mod interner;
pub(crate) mod minimize;
