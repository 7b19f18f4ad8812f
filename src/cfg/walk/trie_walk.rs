//! The whole token trie pushed through the chart, with slice proofs.

use crate::base::bitmask::set_bit;
use crate::base::byteset::ByteSet;
use crate::base::token::TokenId;
use crate::cfg::chart::{Chart, Halt};
use crate::cfg::program::{Program, COUNTED, DEAD, MULTI};
use crate::cfg::walk::row_dfa::StateDfa;
use crate::cfg::walk::stepper::{Node, Stepper};
use crate::limits::Budget;
use crate::vocab::{walk_sliced, SliceProbe, SliceState, Subtree, TrieStep, TrieVisitor, Vocab};

/// A token-trie walk. With `uncertain`, also collects tokens whose bytes run past an [`EXT`]
/// completion (after the first byte).
pub(crate) struct TrieWalk<'a> {
    pub(super) stepper: Stepper<'a>,
    vocab: &'a Vocab,
    accepted: &'a mut [u32],
    /// The accepted tokens and the longest one's length, while they are few and all came
    /// from the walk itself (not from a slice taken whole): then the cached entry is built
    /// from the list, without passes over the mask words.
    pub(crate) listed: Option<(Vec<TokenId>, u32)>,
    uncertain: Option<&'a mut Vec<TokenId>>,
    error: Option<Halt>,
    /// Units the walk found missing. A halt restarts the whole mask once they are built, so
    /// the walk reports them at its end, with every other one it meets: a walk over an
    /// object's names used to meet the rules of its members one restart at a time, one per
    /// first byte its proofs tried (MaskBench o39532: 23 builds for one mask, 4.2 ms). Their
    /// subtrees are skipped.
    unbuilt: Vec<u32>,
    /// A slice proof met a missing unit: the other proofs go on, to find theirs, but the trie
    /// is not walked, since without the proof it would be walked in full (and reach units a
    /// proof spares).
    stalled: bool,
    /// States whose horizon met a missing unit in this walk.
    halted_horizons: Vec<u32>,
    /// The state of the one uncounted item the walk starts from, if so (steps replace the
    /// chart's rows, so it is read before the first).
    alone: Option<u32>,
}

/// Most accepted tokens a walk lists (see [`TrieWalk::listed`]); more are stored as a bitset.
const MAX_LISTED: usize = 256;

impl<'a> TrieWalk<'a> {
    pub(crate) fn new(
        prog: &'a Program,
        vocab: &'a Vocab,
        chart: &'a mut Chart,
        dfa: &'a mut StateDfa,
        accepted: &'a mut [u32],
        uncertain: Option<&'a mut Vec<TokenId>>,
        budget: &'a Budget,
    ) -> Self {
        TrieWalk {
            stepper: Stepper::new(prog, chart, dfa, budget),
            vocab,
            accepted,
            listed: Some((Vec::new(), 0)),
            uncertain,
            error: None,
            unbuilt: Vec::new(),
            stalled: false,
            halted_horizons: Vec::new(),
            alone: None,
        }
    }

    pub(crate) fn walk(&mut self) -> Result<(), Halt> {
        self.alone = self.alone_item();
        let root = self.stepper.root();
        // The proofs are about this DFA's states: they live and go with it.
        let mut proofs = std::mem::take(&mut self.stepper.dfa.slice_proofs);
        let sliced = walk_sliced(self.vocab, root, self, &mut proofs);
        self.stepper.dfa.slice_proofs = proofs;
        sliced?;
        self.stepper.finish()?;
        if let Some(e) = self.error.take() {
            return Err(e);
        }
        match std::mem::take(&mut self.unbuilt) {
            unbuilt if unbuilt.is_empty() => Ok(()),
            mut unbuilt => {
                unbuilt.sort_unstable();
                unbuilt.dedup();
                Err(Halt::Unbuilt(unbuilt))
            }
        }
    }
}

impl SliceProbe for TrieWalk<'_> {
    type Error = Halt;

    fn advance(&mut self, s: &Node, byte: u8) -> Result<Option<Node>, Halt> {
        self.stepper.advance(s, byte)
    }

    /// A missing unit is reported when the walk ends, with every other one it meets.
    fn set_aside(&mut self, e: Halt) -> Result<(), Halt> {
        self.stalled = true;
        self.missing(e)
    }

    /// The DFA state: it fixes every later row. A structure too large for the DFA has none.
    fn identity(&self, s: &Node) -> Option<u32> {
        s.dfa()
    }

    fn accepted(&mut self) -> &mut [u32] {
        self.listed = None;
        self.accepted
    }

    fn byte_classes(&self) -> Option<&[u8; 256]> {
        Some(&self.stepper.prog.alphabet.class_of)
    }

    fn tries_slice(&self, k: usize) -> bool {
        self.stepper.prog.slices & 1 << k != 0
    }

    /// Known where the walk starts from one item alone (the item level's walks): how far its
    /// unit's own transitions carry the slice (see [`Horizons`](super::horizon::Horizons)).
    fn horizon(
        &mut self,
        first: u8,
        k: usize,
        at: SliceState,
        classes: &[(u8, ByteSet)],
    ) -> Result<usize, Halt> {
        let Some(state) = self.alone_after(first) else {
            return Ok(0);
        };
        // A state whose exploration met a missing unit meets it again until the walk is
        // taken again (every first byte of every slice leading to it asks).
        if self.halted_horizons.contains(&state) {
            return Ok(0);
        }
        let slice = &self.vocab.slices()[k];
        let Stepper {
            prog, dfa, budget, ..
        } = &mut self.stepper;
        let horizon = dfa
            .horizons
            .horizon(prog, k, slice, classes, state, at, budget);
        if horizon.is_err() {
            self.halted_horizons.push(state);
        }
        horizon
    }
}

impl TrieWalk<'_> {
    /// Keeps the units of an [`Halt::Unbuilt`] for the end of the walk; another error is
    /// returned.
    fn missing(&mut self, e: Halt) -> Result<(), Halt> {
        match e {
            Halt::Unbuilt(units) => {
                self.unbuilt.extend(units);
                Ok(())
            }
            e => Err(e),
        }
    }

    /// The state of the chart's only item, when it is the walk's whole base and uncounted.
    fn alone_item(&self) -> Option<u32> {
        let (prog, chart) = (self.stepper.prog, &*self.stepper.chart);
        match chart.row(0) {
            [item] if chart.num_rows() == 1 && prog.state(item.state).flags & COUNTED == 0 => {
                Some(item.state)
            }
            _ => None,
        }
    }

    /// The unit state `first` leads to, when the walk starts from a single uncounted item and
    /// its unit has one transition on `first`.
    fn alone_after(&self, first: u8) -> Option<u32> {
        let prog = self.stepper.prog;
        let entry = prog.entry(self.alone?, prog.alphabet.class_of[first as usize] as usize);
        (entry != DEAD && entry & MULTI == 0).then_some(entry)
    }
}

impl TrieVisitor for TrieWalk<'_> {
    type State = Node;

    #[inline(always)]
    fn step(&mut self, parent: &Node, byte: u8, _: usize, subtree: Subtree) -> TrieStep<Node> {
        if self.error.is_some() || self.stalled {
            return TrieStep::Skip;
        }
        match self.stepper.advance(parent, byte) {
            Ok(Some(next)) => TrieStep::Enter(next),
            Ok(None) => {
                if let Some(u) = self.uncertain.as_mut() {
                    if self.stepper.may_leave(parent, byte) {
                        // Ids, not positions: a walk may run over a slice's own trie.
                        u.extend_from_slice(subtree.tokens());
                    }
                }
                TrieStep::Skip
            }
            Err(e) => {
                if let Err(e) = self.missing(e) {
                    self.error = Some(e);
                }
                TrieStep::Skip
            }
        }
    }

    #[inline(always)]
    fn tokens(&mut self, _: &Node, tokens: &[TokenId]) {
        tokens.iter().for_each(|&t| set_bit(self.accepted, t));
        if let Some((ids, longest)) = &mut self.listed {
            if ids.len() + tokens.len() > MAX_LISTED {
                self.listed = None;
            } else {
                ids.extend_from_slice(tokens);
                *longest = (*longest).max(self.vocab.token_bytes(tokens[0]).len() as u32);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::bitmask::get_bit;
    use crate::cfg::testing::*;
    use crate::cfg::CfgCompiler;

    /// The walk on a live chart allows exactly the tokens the recognizer takes one by one, the
    /// second time through the same row DFA (transitions known, slice proofs remembered) too,
    /// and leaves the chart as it found it.
    #[test]
    fn trie_walk_allows_what_each_token_alone_does() {
        let vocab = small_vocab();
        each_case(&CfgCompiler::new(&vocab, built_up_front()), |case| {
            let rows = case.chart.num_rows();
            let mut dfa = StateDfa::new(rows, case.g.prog().n_classes());
            for pass in 0..2 {
                let mut words = vec![0u32; vocab.mask_words()];
                let budget = budget();
                let (prog, chart) = (&case.g.prog(), &mut case.chart);
                let mut walk =
                    TrieWalk::new(prog, &vocab, chart, &mut dfa, &mut words, None, &budget);
                walk.walk().unwrap();
                let listed = walk.listed.take();
                drop(walk);
                if let Some((mut listed, _)) = listed {
                    listed.sort_unstable();
                    assert_eq!(listed, case.allowed, "{}: the listed tokens", case.at());
                }
                assert_eq!(ones(&words), case.allowed, "{}, pass {pass}", case.at());
                assert_eq!(case.chart.num_rows(), rows);
            }
        });
    }

    /// On an item alone (its unit entered from an unknown context), the tokens collected as
    /// uncertain are exactly those that run past the unit's end into a byte that may follow
    /// it: the item's accepted tokens and the uncertain ones never meet, and every token the
    /// live chart allows through this item is one or the other.
    #[test]
    fn trie_walk_collects_the_tokens_that_run_past_the_unit() {
        let vocab = small_vocab();
        each_case(&CfgCompiler::new(&vocab, built_up_front()), |case| {
            let mut covered = vec![0u32; vocab.mask_words()];
            for k in scannable(case.g, &case.chart) {
                let (words, uncertain) = walk_rows(case.g, &item_rows(k));
                for &t in &uncertain {
                    assert!(!get_bit(&words, t), "{}: token {t} both", case.at());
                    set_bit(&mut covered, t);
                }
                for t in ones(&words) {
                    assert!(
                        case.allowed.contains(&t),
                        "{}: {t} accepted alone",
                        case.at()
                    );
                    set_bit(&mut covered, t);
                }
            }
            for &t in &case.allowed {
                assert!(get_bit(&covered, t), "{}: token {t} lost", case.at());
            }
        });
    }
}
