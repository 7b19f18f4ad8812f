//! The operator backend: regular constraints as `Write` / `Wait` / `IfElse` / `DoWhile` / `Seq`
//! programs over small leaf automata, stepped in O(depth) per byte, with masks from the global
//! cache.
//!
//! - [`program`]: the operators and [`ProgramBuilder`];
//! - [`leaf`]: leaf automata (`Write` literals, DFAs, `Wait` content-until-terminator);
//! - `walker`: the threads that follow a program through the input;
//! - `runtime`: the two-level cached mask (leaf part + continuation part);
//! - [`lower`]: IR → operators with DFA fusion;
//! - `regex`: the [`RegexCompiler`], patterns to cached programs or single leaves;
//! - [`OpsMatcher`]: the [`Matcher`](crate::Matcher);
//! - `warm`: masks precomputed for every state a program can reach ([`Warmth`]).

pub mod leaf;
mod lower;
mod matcher;
pub mod program;
mod regex;
mod runtime;
mod walker;
mod warm;

pub use leaf::{Leaf, Unit};
pub(crate) use lower::{expr_leaf, lower_within};
pub use lower::{fits_operators, lower, LowerConfig};
pub use matcher::OpsMatcher;
pub(crate) use program::LeafOp;
pub use program::{OpId, Program, ProgramBuilder};
pub(crate) use regex::regex_grammar;
pub use regex::RegexCompiler;
pub use runtime::Runtime;
pub(crate) use warm::warm;
pub use warm::Warmth;
