//! Pushes a sorted list of tokens through the chart along the trie.

use std::cell::Cell;

use crate::cfg::chart::Chart;
use crate::cfg::program::Program;
use crate::cfg::walk::row_dfa::StateDfa;
use crate::cfg::walk::stepper::Stepper;
use crate::cfg::walk::Position;
use crate::limits::{Budget, LimitExceeded};
use crate::vocab::Vocab;

pub(crate) enum Outcome {
    Accepted,
    /// Some byte was rejected; `ext` if an [`EXT`] completion happened after at least one byte
    /// and before the rejected one, followed by a byte that may follow it
    /// ([`Program::follow`]): only then can the unknown context take the rest.
    Failed {
        ext: bool,
    },
}

/// Pushes the tokens at `positions` (ascending) on top of the chart, along the trie.
pub(crate) fn walk_list(
    prog: &Program,
    vocab: &Vocab,
    chart: &mut Chart,
    dfa: &mut StateDfa,
    positions: &[Position],
    budget: &Budget,
    mut report: impl FnMut(Position, Outcome),
) -> Result<(), LimitExceeded> {
    let mut stepper = Stepper::new(prog, chart, dfa, budget);
    let root = stepper.root();
    // Whether the context may take the rest of the last rejected token: known to the stepper
    // at the rejected byte, read when the run behind it is reported.
    let context_may_continue = Cell::new(false);
    vocab.trie().walk_positions(
        positions,
        root,
        |node, byte| {
            let next = stepper.advance(node, byte)?;
            if next.is_none() {
                context_may_continue.set(stepper.may_leave(node, byte));
            }
            Ok(next)
        },
        |run, taken, _| {
            for &p in run {
                report(
                    p,
                    match taken {
                        true => Outcome::Accepted,
                        false => Outcome::Failed {
                            ext: context_may_continue.get(),
                        },
                    },
                )
            }
        },
    )?;
    stepper.finish()
}
