//! Pushes a sorted list of tokens through the chart along the trie.

use std::cell::Cell;

use crate::cfg::chart::{Chart, Halt};
use crate::cfg::program::Program;
use crate::cfg::walk::row_dfa::StateDfa;
use crate::cfg::walk::stepper::Stepper;
use crate::cfg::walk::Position;
use crate::limits::Budget;
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
) -> Result<(), Halt> {
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
            Ok::<_, Halt>(next)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::bitmask::set_bit;
    use crate::base::token::TokenId;
    use crate::cfg::testing::*;
    use crate::cfg::CfgCompiler;

    /// Every text token's trie position, ascending.
    fn all_positions(vocab: &Vocab) -> Vec<Position> {
        (0..text_tokens(vocab).count() as Position).collect()
    }

    /// A list walk reports each listed token once, in order, accepted exactly when the token
    /// alone is: over the whole vocabulary and over every third position.
    #[test]
    fn list_walk_accepts_what_each_token_alone_does() {
        let vocab = small_vocab();
        let trie = vocab.trie();
        each_case(&CfgCompiler::new(&vocab, built_up_front()), |case| {
            let mut dfa = StateDfa::new(case.chart.num_rows(), case.g.prog().n_classes());
            let all = all_positions(&vocab);
            let every_third: Vec<Position> = all.iter().copied().step_by(3).collect();
            for list in [all, every_third] {
                let (mut reported, mut accepted) = (Vec::new(), Vec::new());
                let (prog, chart, budget) = (&case.g.prog(), &mut case.chart, budget());
                walk_list(prog, &vocab, chart, &mut dfa, &list, &budget, |p, o| {
                    reported.push(p);
                    if matches!(o, Outcome::Accepted) {
                        accepted.push(trie.token_at(p));
                    }
                })
                .unwrap();
                assert_eq!(
                    reported,
                    list,
                    "{}: each listed token once, in order",
                    case.at()
                );
                accepted.sort_unstable();
                let listed: Vec<TokenId> = list.iter().map(|&p| trie.token_at(p)).collect();
                let allowed = case.allowed.iter().copied();
                let expected: Vec<TokenId> = allowed.filter(|t| listed.contains(t)).collect();
                assert_eq!(accepted, expected, "{}", case.at());
            }
        });
    }

    /// On an item alone, the list walk over the whole vocabulary accepts what the trie walk
    /// accepts and fails with `ext` exactly on the tokens the trie walk calls uncertain.
    #[test]
    fn list_walk_agrees_with_the_trie_walk_on_an_item_alone() {
        let vocab = small_vocab();
        let trie = vocab.trie();
        each_case(&CfgCompiler::new(&vocab, built_up_front()), |case| {
            let prog = &case.g.prog();
            for k in scannable(case.g, &case.chart) {
                let rows = item_rows(k);
                let (words, uncertain) = walk_rows(case.g, &rows);
                let (mut accepted, mut ext) = (vec![0u32; vocab.mask_words()], Vec::new());
                let mut chart = Chart::from_rows(prog, &rows);
                let mut dfa = StateDfa::new(0, prog.n_classes());
                let (list, budget) = (all_positions(&vocab), budget());
                walk_list(
                    prog,
                    &vocab,
                    &mut chart,
                    &mut dfa,
                    &list,
                    &budget,
                    |p, o| match o {
                        Outcome::Accepted => set_bit(&mut accepted, trie.token_at(p)),
                        Outcome::Failed { ext: true } => ext.push(trie.token_at(p)),
                        Outcome::Failed { ext: false } => {}
                    },
                )
                .unwrap();
                ext.sort_unstable();
                assert_eq!(accepted, words, "{}, item {k:?}", case.at());
                assert_eq!(ext, uncertain, "{}, item {k:?}", case.at());
            }
        });
    }
}
