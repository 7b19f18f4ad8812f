//! The template states no argument decides, as programs to warm at registration (see
//! `ops::warm`).
//!
//! Instantiation emits a recipe's literals and prebuilt fragments as they are and fills its
//! holes with the request's arguments. A *fixed stretch* is a run of literals and fragments
//! between two holes, as the request's program will hold it: consecutive literals merged into
//! one `Write`, each fragment shared. Every state inside it keys its mask the same way in any
//! request — a fragment's states by the leaf, a `Write`'s by its remaining units, the part of a
//! token that runs past a leaf by what follows within the stretch — so its masks can be
//! computed once, before any request. A mask whose token can run past the stretch's end keys on
//! what the hole holds: the stretch ends its program there, which is exact for a request that
//! ends there too and never wrong for another (its key differs).
//!
//! A literal right before a hole that may continue it (text of a `str` argument, an inlined
//! structure, the rest of the caller's sequence) is left out up to its last special unit: the
//! request's `Write` will carry the argument after it, so its remaining units are not known
//! yet, but a state's key reads them only up to the first special unit.

use rustc_hash::FxHashSet;

use super::recipe::{Fragment, Piece};
use super::{ParamKind, StructureFactory};
use crate::ops::{OpId, Program, ProgramBuilder, Unit};

/// Where a run of literals and fragments stops.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Hole {
    /// Something that may extend the last literal's `Write`: a `str` argument, an inlined
    /// structure or list, the end of a structure (its caller's sequence goes on).
    Open,
    /// Something that starts an operator of its own: a leaf argument (`choice`, `regex`,
    /// `int`), a `oneof`, an alternation or repetition, the end of a branch or body.
    Closed,
}

/// What a recipe emits into a sequence: a literal or a fragment...
#[derive(Clone, Copy)]
enum Atom<'f> {
    Lit(&'f [Unit]),
    Frag(u32),
}

/// ...or a hole between runs of them.
enum Item<'f> {
    Atom(Atom<'f>),
    Hole(Hole),
}

/// The distinct fixed stretches of every structure of `factory`, each as a program.
pub(crate) fn fixed_stretches(factory: &StructureFactory) -> Vec<Program> {
    let mut programs = Vec::new();
    let mut seen = FxHashSet::default();
    for structure in factory.structures() {
        let hole_of = |i: u16| match structure.params()[usize::from(i)].kind() {
            ParamKind::Choice | ParamKind::Regex | ParamKind::Int | ParamKind::OneOf(_) => {
                Hole::Closed
            }
            ParamKind::Str | ParamKind::Structure(_) | ParamKind::List { .. } => Hole::Open,
        };
        // Each emitted sequence: the structure's own, and each branch or body, which closes
        // its `Write` at its end. Recipes nest as deep as the templates do: explicit stacks.
        let mut sequences = vec![(&structure.recipe, Hole::Open)];
        while let Some((root, end)) = sequences.pop() {
            let mut items = Vec::new();
            let mut stack = vec![root];
            while let Some(piece) = stack.pop() {
                match piece {
                    Piece::Lit { units, .. } => items.push(Item::Atom(Atom::Lit(units))),
                    Piece::Frag { index, .. } => items.push(Item::Atom(Atom::Frag(*index))),
                    Piece::Seq(parts) => stack.extend(parts.iter().rev()),
                    Piece::Param(i) => items.push(Item::Hole(hole_of(*i))),
                    Piece::Alt(branches) => {
                        items.push(Item::Hole(Hole::Closed));
                        sequences.extend(branches.iter().map(|b| (b, Hole::Closed)));
                    }
                    Piece::Repeat { body, .. } => {
                        items.push(Item::Hole(Hole::Closed));
                        sequences.push((body, Hole::Closed));
                    }
                }
            }
            items.push(Item::Hole(end));
            let mut run: Vec<Atom> = Vec::new();
            for item in &items {
                let hole = match item {
                    Item::Atom(atom) => {
                        run.push(*atom);
                        continue;
                    }
                    Item::Hole(hole) => *hole,
                };
                if hole == Hole::Open {
                    trim_open_end(&mut run);
                }
                if let Some(program) = stretch_program(factory, &run) {
                    if seen.insert(program.hash()) {
                        programs.push(program);
                    }
                }
                run.clear();
            }
        }
    }
    programs
}

/// Drops the literals at the end of `run` that the argument after it may continue, save their
/// units up to the last special one: no token reaches past a special unit, so the `Write`'s
/// states up to it are keyed by those units alone, whatever the argument appends (an outline
/// record's `<|vision_start|>` before its id, `<|vision_end|>` before its children).
fn trim_open_end(run: &mut Vec<Atom>) {
    while let Some(&Atom::Lit(units)) = run.last() {
        match units.iter().rposition(|u| matches!(u, Unit::Special(_))) {
            Some(last) => {
                run.pop();
                run.push(Atom::Lit(&units[..=last]));
                return;
            }
            None => {
                run.pop();
            }
        }
    }
}

/// `run` as instantiation builds it: consecutive literals one `Write`, fragments shared.
fn stretch_program(factory: &StructureFactory, run: &[Atom]) -> Option<Program> {
    let mut b = ProgramBuilder::new();
    let mut ops: Vec<OpId> = Vec::new();
    let mut pending: Vec<Unit> = Vec::new();
    for item in run {
        match item {
            Atom::Lit(units) => pending.extend_from_slice(units),
            Atom::Frag(index) => {
                if !pending.is_empty() {
                    ops.push(b.write(&std::mem::take(&mut pending)));
                }
                ops.push(match &factory.fragments[*index as usize] {
                    Fragment::Leaf(leaf) => b.leaf_op(leaf.clone()),
                    Fragment::Program(program) => b.splice(program),
                });
            }
        }
    }
    if !pending.is_empty() {
        ops.push(b.write(&pending));
    }
    if ops.is_empty() {
        return None;
    }
    let root = b.seq(&ops);
    b.finish(root).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::Vocab;

    fn stretches(template: &str) -> Vec<String> {
        let tokens = ["a", "y", "z", "<|end|>", "</s>"];
        let vocab = Vocab::from_token_bytes(
            tokens.iter().map(|t| t.as_bytes().to_vec()).collect(),
            &[3, 4],
            &[4],
        )
        .unwrap();
        let factory = StructureFactory::builder(&vocab)
            .source("t.fw", template)
            .build()
            .unwrap();
        fixed_stretches(&factory)
            .iter()
            .map(|p| p.describe())
            .collect()
    }

    #[test]
    fn stretches_stop_at_holes_and_drop_literals_an_argument_may_continue() {
        // "x" may be followed by the text of `a` in the same Write: left out. " y", the class
        // and "z" end before a choice, which starts a leaf of its own: one stretch. "w" and
        // the Wait end the structure, whose caller's literal may not continue a Wait.
        let template = r#"s(a: str, c: choice) ::= "x" a " y" [a-z]+ "z" c "w" [0-9]* <|end|>"#;
        assert_eq!(
            stretches(template),
            ["Seq(Write, Dfa, Write)", "Seq(Write, Dfa)"]
        );
        // A literal before `a` is kept up to its last special unit, which no token passes:
        // the request's states up to it are keyed alike whatever `a` holds.
        assert_eq!(stretches(r#"v(a: str) ::= "p" <|end|> "q" a"#), ["Write"]);
        // A literal ending the structure may run into its caller's next literal.
        assert_eq!(
            stretches(r#"t(c: choice) ::= c "tail""#),
            Vec::<String>::new()
        );
        // Branches and bodies end their own Writes (bodies first: a stack of sequences);
        // the second "r" stretch is the first one again.
        let template = r#"u(c: choice) ::= ("p" [a-z] c | "r" c) ("r" c [a-z])*"#;
        assert_eq!(stretches(template), ["Write", "Dfa", "Seq(Write, Dfa)"]);
    }
}
