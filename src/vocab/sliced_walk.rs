//! The sliced trie walk: a mask walk that first proves which [`TokenSlice`]s keep its client
//! alive, accepts their tokens at once and walks only the rest (see the `slice` module).

use rustc_hash::FxHashSet;

use super::slice::{SliceState, TokenSlice, PATTERNS};
use super::{Subtree, TrieStep, TrieVisitor, Vocab};
use crate::base::byteset::ByteSet;
use crate::base::token::TokenId;

/// What [`walk_sliced`] learnt about a client's states, kept across walks by a client whose
/// state identities last (the Earley engine's row DFA of one grammar): each key-trie node of a
/// JSON object is its own walk, and every one of them leaves the trie into the same free-text
/// states, which were proven again at each node.
#[derive(Debug)]
pub(crate) struct SliceProofs {
    slices: [Pairs; PATTERNS.len()],
}

impl Default for SliceProofs {
    fn default() -> SliceProofs {
        SliceProofs {
            slices: std::array::from_fn(|_| Pairs::default()),
        }
    }
}

impl SliceProofs {
    /// Bytes held.
    pub fn heap_bytes(&self) -> usize {
        let pair = std::mem::size_of::<(SliceState, u32)>() + 1;
        self.slices
            .iter()
            .map(|p| {
                (p.proven.capacity() + p.failed.capacity()) * pair
                    + p.classes.capacity() * std::mem::size_of::<(u8, ByteSet)>()
            })
            .sum()
    }
}

/// (slice state, client identity) pairs: proven to survive every string of the slice from
/// there (each reaches only proven pairs), or to die on some.
#[derive(Debug, Default)]
struct Pairs {
    proven: FxHashSet<(SliceState, u32)>,
    failed: FxHashSet<(SliceState, u32)>,
    /// Bytes alike to the slice and to a client with byte classes, each class with its least
    /// byte (computed on first use): exploring that byte stands for the class.
    classes: Vec<(u8, ByteSet)>,
}

/// A trie-walk client that can also be stepped outside the walk, so [`walk_sliced`] can
/// decide whole slices of tokens before walking.
pub(crate) trait SliceProbe: TrieVisitor {
    type Error;
    /// The state after `byte`, or `None` if the byte is rejected.
    fn advance(&mut self, s: &Self::State, byte: u8) -> Result<Option<Self::State>, Self::Error>;
    /// A number two states share only if every byte string keeps both alive or neither;
    /// `None` for a state without one (no slice is taken through it).
    fn identity(&self, s: &Self::State) -> Option<u32>;
    /// The mask words of the tokens accepted so far.
    fn accepted(&mut self) -> &mut [u32];
    /// A number per byte, shared only by bytes that every state treats alike (`None`: each
    /// byte its own).
    fn byte_classes(&self) -> Option<&[u8; 256]> {
        None
    }
    /// Is slice `k` of the vocabulary worth a proof for this client (`false`: no state of
    /// it could take the slice where a broader one fails, so the proof would only fail)?
    fn tries_slice(&self, _k: usize) -> bool {
        true
    }
    /// Is the state after `first` from the root known, without exploring pairs, to survive
    /// every string of slice `k` from slice state `at` of at most `len` bytes? A token has at
    /// most [`Vocab::max_token_len`] bytes, so that is enough to take the slice's tokens that
    /// start with `first`, where a pair proof asks for survival of every length and fails in a
    /// state that has only so many characters left (a string's `maxLength`). `classes` are the
    /// bytes the slice and the client treat alike, by least byte.
    fn survives_slice(
        &mut self,
        _first: u8,
        _k: usize,
        _at: SliceState,
        _len: usize,
        _classes: &[(u8, ByteSet)],
    ) -> Result<bool, Self::Error> {
        Ok(false)
    }
}

/// Most (slice state, walk state) pairs explored per first byte before leaving it to the walk,
/// and in all: a state that dies deep inside the slice (a pattern, a property name) must not
/// cost more than the walk it would save. A pair costs a step per byte class (~60), a whole
/// walk ~300k trie nodes, so a few hundred pairs are cheap next to it; the proof must cover
/// the automaton a searched pattern counts with (`[0-9a-f]{64}` anywhere in the string: 65
/// states, all alive on every character) or each of its states walks the whole trie (64 pairs
/// per byte were too few: 6 ms a state).
const MAX_PAIRS: usize = 256;
const MAX_VISITS: usize = 1024;
/// Most client states new to a proof that the first byte taken may meet ([`MAX_PAIRS`]), and
/// a later one.
const MAX_NEW_STATES: [usize; 2] = [128, 4];

/// Walks `vocab`'s trie from `root` like [`TokenTrie::walk`], but first looks for a slice whose
/// every string keeps the client alive after some first bytes: the slice's tokens starting
/// with those are accepted at once, and only the slice's rest is walked under them. Inside a
/// JSON string this visits ~5k tokens of Qwen3's 151k.
///
/// `proofs` holds what earlier walks of the same client states proved; it must be used with
/// one meaning of [`SliceProbe::identity`] only.
pub(crate) fn walk_sliced<V: SliceProbe>(
    vocab: &Vocab,
    root: V::State,
    v: &mut V,
    proofs: &mut SliceProofs,
) -> Result<(), V::Error> {
    for (k, slice) in vocab.slices().iter().enumerate() {
        if !v.tries_slice(k) {
            continue;
        }
        let longest = vocab.max_token_len();
        let (taken, decided) =
            decide_first_bytes(k, slice, &mut proofs.slices[k], &root, v, longest)?;
        if taken.is_empty() {
            continue;
        }
        let members = slice.members_starting_with(vocab, &taken);
        v.accepted()
            .iter_mut()
            .zip(members.iter())
            .for_each(|(a, m)| *a |= m);
        // Other first bytes in the whole trie, decided ones in the slice's rest.
        let mut filtered = FirstBytes {
            inner: v,
            first: decided.complement(),
        };
        vocab.trie().walk(root.clone(), &mut filtered);
        filtered.first = decided;
        slice.rest().walk(root, &mut filtered);
        return Ok(());
    }
    vocab.trie().walk(root, v);
    Ok(())
}

/// The first bytes after which `v` survives every continuation in the slice's language
/// (*taken*: the slice's tokens starting with them are all accepted), and those plus the ones
/// the root rejects (*decided*: the slice's tokens starting with them need no walk). Explores
/// pairs of slice and client states per first byte, with a budget: inside a string or free text
/// both loop back after a character, so a few pairs settle it; a byte that leads into a
/// property name stays undecided.
// Long: one budgeted exploration of (slice state, client state) pairs per first byte; its
// worklist, budget and per-byte verdicts are shared by every step.
fn decide_first_bytes<V: SliceProbe>(
    k: usize,
    slice: &TokenSlice,
    pairs: &mut Pairs,
    root: &V::State,
    v: &mut V,
    longest: usize,
) -> Result<(ByteSet, ByteSet), V::Error> {
    let (mut taken, mut decided) = (ByteSet::EMPTY, ByteSet::EMPTY);
    let Pairs {
        proven,
        failed,
        classes,
    } = pairs;
    let classes: &[(u8, ByteSet)] = match v.byte_classes() {
        None => &slice.singletons,
        Some(client) => {
            if classes.is_empty() {
                *classes = joint_classes(slice, client);
            }
            classes
        }
    };
    // The pairs of the current first byte: explored, and met (explored or waiting).
    let mut trail: Vec<(SliceState, u32)> = Vec::new();
    let mut met: FxHashSet<(SliceState, u32)> = FxHashSet::default();
    let mut stack: Vec<(SliceState, u32, V::State)> = Vec::new();
    let mut visits = 0;
    // Client states met so far. The first byte taken explores the shared structure (a string's
    // character loop and its UTF-8 states); a later one that needs many new states leads into
    // a property name, and walking its subtree costs less than proving every state of the name
    // against every byte.
    let mut known: FxHashSet<u32> = FxHashSet::default();
    'first: for &(first, alike) in classes.iter() {
        let mut new_states = 0;
        let max_new_states = MAX_NEW_STATES[usize::from(!taken.is_empty())];
        let Some(s) = slice.next(slice.start(), first) else {
            decided = decided.union(&alike);
            continue;
        };
        let Some(state) = v.advance(root, first)? else {
            decided = decided.union(&alike);
            continue;
        };
        if v.survives_slice(first, k, s, longest.saturating_sub(1), classes)? {
            taken = taken.union(&alike);
            decided = decided.union(&alike);
            continue;
        }
        let Some(id) = v.identity(&state) else {
            continue;
        };
        trail.clear();
        met.clear();
        stack.clear();
        if !proven.contains(&(s, id)) {
            met.insert((s, id));
            stack.push((s, id, state));
        }
        while let Some((s, id, state)) = stack.pop() {
            let pair = (s, id);
            if failed.contains(&pair) || trail.len() == MAX_PAIRS || visits == MAX_VISITS {
                continue 'first;
            }
            if known.insert(id) {
                new_states += 1;
                if new_states > max_new_states {
                    continue 'first;
                }
            }
            visits += 1;
            trail.push(pair);
            // Runs of classes lead to the same pair (a string's characters): each pair is
            // looked up once per run, and stacked once per first byte.
            let mut previous = None;
            for &(byte, _) in classes.iter() {
                let Some(next_s) = slice.next(s, byte) else {
                    continue;
                };
                let Some(next) = v.advance(&state, byte)? else {
                    failed.insert(pair);
                    continue 'first;
                };
                // A state without an identity is never proven: this first byte is walked.
                let Some(next_id) = v.identity(&next) else {
                    continue 'first;
                };
                let next_pair = (next_s, next_id);
                if previous != Some(next_pair) {
                    previous = Some(next_pair);
                    if !proven.contains(&next_pair) && met.insert(next_pair) {
                        stack.push((next_s, next_id, next));
                    }
                }
            }
        }
        proven.extend(trail.drain(..));
        taken = taken.union(&alike);
        decided = decided.union(&alike);
    }
    Ok((taken, decided))
}

/// The classes of bytes that both the slice and the client treat alike, by least byte.
fn joint_classes(slice: &TokenSlice, client: &[u8; 256]) -> Vec<(u8, ByteSet)> {
    let slice_classes = slice.classes.iter().max().map_or(1, |&c| c as usize + 1);
    let mut index = vec![u16::MAX; 256 * slice_classes];
    let mut classes: Vec<(u8, ByteSet)> = Vec::new();
    for b in 0..=u8::MAX {
        let key = client[b as usize] as usize * slice_classes + slice.classes[b as usize] as usize;
        if index[key] == u16::MAX {
            index[key] = classes.len() as u16;
            classes.push((b, ByteSet::EMPTY));
        }
        classes[index[key] as usize].1.insert(b);
    }
    classes
}

/// A walk restricted to some first bytes.
struct FirstBytes<'v, V> {
    inner: &'v mut V,
    first: ByteSet,
}

impl<V: TrieVisitor> TrieVisitor for FirstBytes<'_, V> {
    type State = V::State;

    #[inline]
    fn step(
        &mut self,
        parent: &V::State,
        byte: u8,
        depth: usize,
        subtree: Subtree,
    ) -> TrieStep<V::State> {
        if depth == 1 && !self.first.contains(byte) {
            return TrieStep::Skip;
        }
        self.inner.step(parent, byte, depth, subtree)
    }

    #[inline]
    fn tokens(&mut self, state: &V::State, tokens: &[TokenId]) {
        self.inner.tokens(state, tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::base::bitmask::{get_bit, set_bit};

    /// A client given by its transition function over small states, counting the trie nodes
    /// its walks enter.
    struct ByteClient<S> {
        next: fn(S, u8) -> Option<S>,
        accepted: Vec<u32>,
        steps: usize,
    }

    impl<S: Copy + Into<u32>> TrieVisitor for ByteClient<S> {
        type State = S;
        fn step(&mut self, s: &S, byte: u8, _: usize, _: Subtree) -> TrieStep<S> {
            self.steps += 1;
            (self.next)(*s, byte).map_or(TrieStep::Skip, TrieStep::Enter)
        }
        fn tokens(&mut self, _: &S, tokens: &[TokenId]) {
            tokens.iter().for_each(|&t| set_bit(&mut self.accepted, t));
        }
    }

    impl<S: Copy + Into<u32>> SliceProbe for ByteClient<S> {
        type Error = ();
        fn advance(&mut self, s: &S, byte: u8) -> Result<Option<S>, ()> {
            Ok((self.next)(*s, byte))
        }
        fn identity(&self, s: &S) -> Option<u32> {
            Some((*s).into())
        }
        fn accepted(&mut self) -> &mut [u32] {
            &mut self.accepted
        }
    }

    /// Walks `next` from `root` with slices over the Qwen3 vocabulary: the accepted tokens are
    /// exactly the text tokens whose bytes `next` reads through, and a slice's members were
    /// taken whole (the walk entered under a tenth of the trie's nodes).
    fn assert_sliced_walk<S: Copy + Into<u32>>(
        vocab: &Vocab,
        next: fn(S, u8) -> Option<S>,
        root: S,
        proofs: &mut SliceProofs,
    ) {
        let mut walk = ByteClient {
            next,
            accepted: vec![0; vocab.mask_words()],
            steps: 0,
        };
        walk_sliced(vocab, root, &mut walk, proofs).unwrap();
        let from = root.into();
        for t in 0..vocab.len() as TokenId {
            let text = get_bit(vocab.text_mask(), t);
            let expected = text
                && vocab
                    .token_bytes(t)
                    .iter()
                    .try_fold(root, |s, &b| next(s, b))
                    .is_some();
            assert_eq!(
                get_bit(&walk.accepted, t),
                expected,
                "token {t} from {from}"
            );
        }
        assert!(
            walk.steps * 10 < vocab.trie().num_nodes(),
            "{} of {} trie nodes from state {from}",
            walk.steps,
            vocab.trie().num_nodes()
        );
    }

    const RUN: u16 = 64;
    const CLOSED: u16 = 65;

    /// A client that counts the hex digits in a row inside a JSON string, as the minimal
    /// automaton of a searched `[0-9A-Fa-f]{64}` does, and may close the string once it has
    /// seen 64 (then any character goes). Every state survives every string of the JSON
    /// slice, but a proof must visit all 65 of them.
    fn hex_run(s: u16, b: u8) -> Option<u16> {
        match (s, b) {
            (CLOSED, _) => None,
            (RUN, b'"') => Some(CLOSED),
            (_, b'"' | b'\\' | 0..=0x1F) => None,
            (RUN, _) => Some(RUN),
            (s, b) if b.is_ascii_hexdigit() => Some(s + 1),
            _ => Some(0),
        }
    }

    /// The slice's members are taken whole from every state: the walk enters only the
    /// slice's rest and the subtrees of the bytes the slice leaves out (`"`, `\`).
    #[test]
    fn a_counting_automaton_takes_the_string_slice_in_every_state() {
        let vocab = Vocab::embedded_qwen3().unwrap();
        let mut proofs = SliceProofs::default();
        for root in [0, 17, RUN - 1, RUN] {
            assert_sliced_walk(&vocab, hex_run, root, &mut proofs);
        }
    }

    /// A client that reads a JSON string's raw characters but ECMA-262's line terminators
    /// (U+2028 and U+2029, `E2 80 A8`/`A9`), as a pattern's `.` does: states 1 and 2 are
    /// inside an `E2` character.
    fn no_line_terminator(s: u8, b: u8) -> Option<u8> {
        match (s, b) {
            (0, b'"' | b'\\' | 0..=0x1F) => None,
            (0, 0xE2) => Some(1),
            (1, 0x80) => Some(2),
            (2, 0xA8 | 0xA9) => None,
            _ => Some(0),
        }
    }

    /// Without a slice of its own the string slice fails and the URI one leaves ~110k tokens
    /// to walk.
    #[test]
    fn a_string_without_line_terminators_takes_its_own_slice() {
        let vocab = Vocab::embedded_qwen3().unwrap();
        assert_sliced_walk(&vocab, no_line_terminator, 0, &mut SliceProofs::default());
    }
}
