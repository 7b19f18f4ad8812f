//! What a structure compiles to: a recipe of prebuilt operator fragments and literal units
//! around the holes its parameters leave, which a request fills.

use std::sync::Arc;

use crate::ir::ExprId;
use crate::ops::{LeafOp, Program, Unit};

/// A structure's recipe: what instantiation assembles, given the request's arguments. Its
/// drop recurses once per level, which `check::annotate` bounds: a recipe is no deeper than
/// its structure with the rules it uses inlined (`Limits::nesting`).
#[derive(Clone, Debug)]
pub(crate) enum Piece {
    /// Literal units; `expr` is their IR in the factory's grammar.
    Lit {
        units: Box<[Unit]>,
        expr: ExprId,
    },
    /// A prebuilt fragment: `StructureFactory::fragments[index]`, IR `expr`.
    Frag {
        index: u32,
        expr: ExprId,
    },
    /// The structure's parameter.
    Param(u16),
    Seq(Box<[Piece]>),
    Alt(Box<[Piece]>),
    Repeat {
        body: Box<Piece>,
        min: u32,
        max: Option<u32>,
    },
}

/// A prebuilt fragment of a recipe.
#[derive(Debug)]
pub(crate) enum Fragment {
    /// One leaf: added to a request's program by `Arc`, no copy.
    Leaf(LeafOp),
    /// Anything else: spliced.
    Program(Arc<Program>),
}
