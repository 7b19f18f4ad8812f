//! Iterations each token starts in a counted loop's body: one walk per body, read near the
//! loop's bounds by the item level.

use rustc_hash::FxHashSet;

use crate::base::bitmask::iter_ones;
use crate::base::token::TokenId;
use crate::cfg::cache::context_level::with_shared;
use crate::cfg::cache::entry::{CacheEntry, UNKNOWN_STARTS};
use crate::cfg::cache::item_level::Subject;
use crate::cfg::cache::view::GrammarView;
use crate::cfg::chart::{Halt, EXT};
use crate::cfg::program::{CALLS, RELAXED, SCANS};
use crate::cfg::walk::stepper::{Node, Stepper};
use crate::limits::Budget;
use crate::vocab::{SliceState, Subtree, TokenSlice, TrieStep, TrieVisitor};

/// Bits of the tokens of a 32-token chunk that start fewer than `below` iterations, and of
/// those the table does not know.
#[inline]
pub(super) fn starts_below(chunk: &[u16], below: u16) -> (u32, u32) {
    let mut lanes = [UNKNOWN_STARTS; 32];
    lanes[..chunk.len()].copy_from_slice(chunk);
    let (mut takes, mut unknowns) = (0u32, 0u32);
    for (j, &n) in lanes.iter().enumerate() {
        takes |= ((n < below) as u32) << j;
        unknowns |= ((n == UNKNOWN_STARTS) as u32) << j;
    }
    (takes, unknowns)
}

/// The iteration starts table of a lifted subject: a walk of the whole trie with the loop
/// relaxed, counting along each path the bytes read at an iteration boundary (where the only
/// way on is a new iteration). Where a row both continues an iteration and could start one,
/// the tokens below it get [`UNKNOWN_STARTS`].
pub(super) fn iteration_starts(
    g: &GrammarView<'_>,
    subject: &Subject,
    budget: &Budget,
) -> Result<CacheEntry, Halt> {
    let vocab = &g.vocab;
    let mut starts = vec![UNKNOWN_STARTS; vocab.len()];
    with_starts_walk(g, subject, budget, &mut starts, |walk, root| {
        let mut counted = None;
        for slice in vocab.slices() {
            if let Some(shape) = walk.slice_shape(slice, root)? {
                counted = Some((slice, shape));
                break;
            }
        }
        match counted {
            Some((slice, shape)) => {
                for t in iter_ones(slice.members()) {
                    walk.starts[t as usize] = match shape {
                        SliceShape::Characters { root_starts } => {
                            let first = vocab.token_bytes(t).first();
                            let first_continues =
                                !root_starts && !first.is_some_and(|&b| is_continuation(b));
                            g.index.characters[t as usize] - u16::from(first_continues)
                        }
                        SliceShape::Inside { root_starts } => u16::from(root_starts),
                    };
                }
                slice.rest().walk((root, 0), walk);
            }
            None => vocab.trie().walk((root, 0), walk),
        }
        Ok(())
    })?;
    Ok(CacheEntry::Starts(starts.into()))
}

/// Runs `walk` from the root of a [`StartsWalk`] of the subject's relaxed loop that fills
/// `starts`, then finishes its stepper.
fn with_starts_walk<R>(
    g: &GrammarView<'_>,
    subject: &Subject,
    budget: &Budget,
    starts: &mut [u16],
    walk: impl FnOnce(&mut StartsWalk<'_>, Node) -> Result<R, Halt>,
) -> Result<R, Halt> {
    let lifted = subject.lifted.expect("only loop bodies have bounds");
    with_shared(g, &subject.rows(&[RELAXED]), |chart, dfa| {
        let mut w = StartsWalk {
            stepper: Stepper::new(g.prog, chart, dfa, budget),
            lifted,
            boundaries: Vec::new(),
            starts,
            error: None,
        };
        let root = w.stepper.root();
        let out = walk(&mut w, root)?;
        w.stepper.finish()?;
        w.error.map_or(Ok(out), Err)
    })
}

/// Where a row stands in the lifted loop's iterations.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Boundary {
    /// Inside an iteration: the next byte continues it.
    Inside,
    /// Between iterations: the next byte starts one.
    Between,
    /// Both (or a structure the row DFA does not hold).
    Unknown,
}

/// The walk of [`iteration_starts`]; its state is the row DFA's and the starts so far.
struct StartsWalk<'a> {
    stepper: Stepper<'a>,
    lifted: u32,
    /// Per row-DFA state, where it stands (`None`: not looked at yet).
    boundaries: Vec<Option<Boundary>>,
    starts: &'a mut [u16],
    error: Option<Halt>,
}

impl StartsWalk<'_> {
    fn boundary(&mut self, node: &Node) -> Boundary {
        let Some(id) = node.dfa() else {
            return Boundary::Unknown;
        };
        let id = id as usize;
        if id >= self.boundaries.len() {
            self.boundaries.resize(id + 1, None);
        }
        if let Some(b) = self.boundaries[id] {
            return b;
        }
        // The loop's item in the last row means an iteration just ended; any other item from
        // an earlier row that can still read or call continues one.
        let prog = self.stepper.prog;
        let (here, last) = self.stepper.dfa.last_row(id as u32);
        let (mut ended, mut continues) = (false, false);
        for it in last {
            if it.state == self.lifted && it.origin == EXT {
                ended = true;
            } else if it.origin != here && prog.state(it.state).flags & (SCANS | CALLS) != 0 {
                continues = true;
            }
        }
        let b = match (ended, continues) {
            (false, _) => Boundary::Inside,
            (true, false) => Boundary::Between,
            (true, true) => Boundary::Unknown,
        };
        self.boundaries[id] = Some(b);
        b
    }

    /// How the strings of `slice` that the relaxed loop takes from `root` start iterations,
    /// if alike for all of them, so the table reads the slice's tokens without a walk and
    /// only the slice's rest is walked:
    ///
    /// - [`SliceShape::Characters`]: an iteration starts exactly at each byte after the first
    ///   that starts a UTF-8 character (a loop over single characters, as a string's);
    /// - [`SliceShape::Inside`]: no byte after the first starts one (a loop over a long body,
    ///   an array's objects, whose free-text parts take whole slices: walked token by token,
    ///   each of their positions near a bound cost a walk of the whole trie).
    ///
    /// Explores the pairs of slice and row states those strings reach: every byte the slice
    /// allows from a pair is rejected by the loop (no token the loop takes passes there), or
    /// starts an iteration as the shape says, from a known boundary, without leaving the
    /// loop. At the root only the boundary matters: between iterations any first byte starts
    /// one (a continuation byte cannot come first), inside one none does.
    fn slice_shape(&mut self, slice: &TokenSlice, root: Node) -> Result<Option<SliceShape>, Halt> {
        let mut met: FxHashSet<(SliceState, u32)> = FxHashSet::default();
        let mut stack = vec![(slice.start(), root, true)];
        let (mut root_starts, mut characters, mut inside) = (false, true, true);
        while let Some((s, node, at_root)) = stack.pop() {
            let between = match self.boundary(&node) {
                Boundary::Between => true,
                Boundary::Inside => false,
                Boundary::Unknown => return Ok(None),
            };
            if at_root {
                root_starts = between;
            }
            for byte in 0..=u8::MAX {
                let Some(next_s) = slice.next(s, byte) else {
                    continue;
                };
                let Some(next) = self.stepper.advance(&node, byte)? else {
                    continue;
                };
                let Some(id) = next.dfa() else {
                    return Ok(None);
                };
                if next.ext() {
                    return Ok(None);
                }
                if !at_root {
                    characters &= between != is_continuation(byte);
                    inside &= !between;
                    if !characters && !inside {
                        return Ok(None);
                    }
                }
                if met.insert((next_s, id)) {
                    if met.len() > MAX_SLICE_PAIRS {
                        return Ok(None);
                    }
                    stack.push((next_s, next, false));
                }
            }
        }
        Ok(Some(match characters {
            true => SliceShape::Characters { root_starts },
            false => SliceShape::Inside { root_starts },
        }))
    }
}

/// How every token of a slice starts iterations ([`StartsWalk::slice_shape`]); `root_starts`:
/// its first byte starts one (the walk begins between iterations).
#[derive(Clone, Copy)]
enum SliceShape {
    /// One per character, the first only if `root_starts`.
    Characters { root_starts: bool },
    /// Only the first byte's, if `root_starts`.
    Inside { root_starts: bool },
}

/// Most (slice state, row state) pairs [`StartsWalk::slice_shape`] explores.
const MAX_SLICE_PAIRS: usize = 256;

/// Is `byte` a UTF-8 continuation byte (one that starts no character)?
pub(super) fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

impl TrieVisitor for StartsWalk<'_> {
    type State = (Node, u16);

    fn step(
        &mut self,
        (parent, n): &(Node, u16),
        byte: u8,
        _: usize,
        _: Subtree,
    ) -> TrieStep<(Node, u16)> {
        if self.error.is_some() {
            return TrieStep::Skip;
        }
        let n = match (self.boundary(parent), *n) {
            (_, UNKNOWN_STARTS) | (Boundary::Unknown, _) => UNKNOWN_STARTS,
            (Boundary::Between, n) => (n + 1).min(UNKNOWN_STARTS - 1),
            (Boundary::Inside, n) => n,
        };
        match self.stepper.advance(parent, byte) {
            Ok(Some(next)) => TrieStep::Enter((next, n)),
            Ok(None) => TrieStep::Skip,
            Err(e) => {
                self.error = Some(e);
                TrieStep::Skip
            }
        }
    }

    fn tokens(&mut self, &(node, n): &(Node, u16), tokens: &[TokenId]) {
        // A token that may also leave the loop after an iteration and go on in the context
        // is not decided by the iterations it starts inside it.
        let n = if node.ext() { UNKNOWN_STARTS } else { n };
        tokens.iter().for_each(|&t| self.starts[t as usize] = n);
    }
}

#[cfg(test)]
mod tests {
    use formwork_testkit::rng::Rng;

    use super::*;
    use crate::cfg::testing::*;
    use crate::cfg::CfgCompiler;

    /// The bit form agrees with reading each count, short chunks (the vocabulary's last
    /// words) included: a missing lane is unknown.
    #[test]
    fn starts_below_reads_each_lane() {
        let mut rng = Rng::new(5);
        for _ in 0..500 {
            let len = 1 + rng.below(32);
            let chunk: Vec<u16> = (0..len)
                .map(|_| match rng.below(5) {
                    0 => UNKNOWN_STARTS,
                    n => n as u16 - 1,
                })
                .collect();
            let below = rng.below(6) as u16;
            let (takes, unknowns) = starts_below(&chunk, below);
            for j in 0..32 {
                let n = chunk.get(j).copied().unwrap_or(UNKNOWN_STARTS);
                assert_eq!(takes >> j & 1 == 1, n < below, "{chunk:?} below {below}");
                assert_eq!(unknowns >> j & 1 == 1, n == UNKNOWN_STARTS, "{chunk:?}");
            }
        }
    }

    /// In a loop over long bodies (an array's objects), a token inside the iteration in
    /// progress starts none: the table reads the free-text slice whole (it walked the whole
    /// trie, at every position of the body near the loop's bound) and says what a walk of
    /// every token says.
    #[test]
    fn iteration_starts_of_a_long_body_read_free_text_slices_whole() {
        let vocab = small_vocab();
        let compiler = CfgCompiler::new(&vocab, built_up_front());
        let (g, _) = compile(&compiler, CASES[4].0);
        let prog = g.prog();
        let view = g.view(&prog);
        // Inside the text of the second and third objects, and after the second's.
        let after_text = CASES[4].1[2];
        for prefix in [CASES[4].1[1], after_text, CASES[4].1[3]] {
            let chart = chart_after(&g, prefix.as_bytes());
            let subject = scannable(&g, &chart)
                .iter()
                .map(|k| Subject::of(&view, &chart, k))
                .find(|s| s.lifted.is_some())
                .expect("a loop body");
            let budget = budget();
            let mut unused = vec![UNKNOWN_STARTS; vocab.len()];
            let shapes = with_starts_walk(&view, &subject, &budget, &mut unused, |walk, root| {
                let slices = vocab.slices().iter();
                slices
                    .map(|s| walk.slice_shape(s, root))
                    .collect::<Result<Vec<_>, _>>()
            })
            .unwrap();
            let inside = |s: &Option<SliceShape>| {
                matches!(s, Some(SliceShape::Inside { root_starts: false }))
            };
            let read_whole = shapes.iter().any(inside);
            assert!(
                read_whole || prefix == after_text,
                "after {prefix:?}: no slice read whole"
            );
            let CacheEntry::Starts(starts) = iteration_starts(&view, &subject, &budget).unwrap()
            else {
                panic!("a starts entry")
            };
            let mut walked = vec![UNKNOWN_STARTS; vocab.len()];
            with_starts_walk(&view, &subject, &budget, &mut walked, |walk, root| {
                vocab.trie().walk((root, 0), walk);
                Ok(())
            })
            .unwrap();
            for t in text_tokens(&vocab).filter(|&t| walked[t as usize] != UNKNOWN_STARTS) {
                let bytes = String::from_utf8_lossy(vocab.token_bytes(t));
                assert_eq!(
                    starts[t as usize], walked[t as usize],
                    "after {prefix:?}: {bytes:?}"
                );
            }
            let token = |bytes: &[u8]| text_tokens(&vocab).find(|&t| vocab.token_bytes(t) == bytes);
            let (ab, next) = (token(b"ab").unwrap(), token(b"},").unwrap());
            match prefix == after_text {
                false => assert_eq!(starts[ab as usize], 0, "after {prefix:?}"),
                true => assert_eq!(starts[next as usize], 1, "the next object starts"),
            }
        }
    }

    /// In a loop over single characters, a token the loop takes starts an iteration at each
    /// character after its first (the first continues the one in progress), whether the table
    /// reads it from a slice or from the walk.
    #[test]
    fn iteration_starts_count_the_characters_after_the_first() {
        let vocab = small_vocab();
        let compiler = CfgCompiler::new(&vocab, built_up_front());
        let cases: [(&str, &[u8]); 3] = [
            (CASES[2].0, b"\"a"),
            (r#"root ::= "\"" [^"\\]{2,60} "\"""#, b"\"a"),
            (r#"root ::= ([a-zA-Z]{1,5} "-")+"#, b"a"),
        ];
        for (gbnf, prefix) in cases {
            let (g, _) = compile(&compiler, gbnf);
            let prog = g.prog();
            let view = g.view(&prog);
            let chart = chart_after(&g, prefix);
            let subject = scannable(&g, &chart)
                .iter()
                .map(|k| Subject::of(&view, &chart, k))
                .find(|s| s.lifted.is_some())
                .expect("a loop body");
            let CacheEntry::Starts(starts) = iteration_starts(&view, &subject, &budget()).unwrap()
            else {
                panic!("a starts entry")
            };
            assert_eq!(starts.len(), vocab.len());
            let mut letters = 0;
            for t in text_tokens(&vocab) {
                let bytes = vocab.token_bytes(t);
                if bytes.iter().all(u8::is_ascii_alphabetic) {
                    letters += 1;
                    assert_eq!(
                        starts[t as usize] as usize,
                        bytes.len() - 1,
                        "{gbnf}: {bytes:?}"
                    );
                }
            }
            assert!(letters > 10);
            if gbnf.contains("^") {
                let two = text_tokens(&vocab).find(|&t| vocab.token_bytes(t) == "éa".as_bytes());
                assert_eq!(
                    two.map(|t| starts[t as usize]),
                    Some(1),
                    "two characters, three bytes"
                );
            }
        }
    }
}
