//! The sliced trie walk: a mask walk that first proves which [`TokenSlice`]s keep its client
//! alive, accepts their tokens at once and walks only the rest (see the `slice` module).

use rustc_hash::FxHashSet;

use std::ops::Range;

use super::slice::{SliceState, TokenSlice, PATTERNS};
use super::{Subtree, TrieStep, TrieVisitor, Vocab};
use crate::base::bitmask::clear_bit;
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
    /// Takes an error [`SliceProbe::advance`] or [`SliceProbe::horizon`] returned while
    /// slices were decided: `Ok` if the walk may go on without that decision (the client keeps
    /// what it needs to report the error when the walk ends), else the error, which ends it.
    fn set_aside(&mut self, e: Self::Error) -> Result<(), Self::Error> {
        Err(e)
    }
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
    /// How many bytes of every string of slice `k` from slice state `at` the state after
    /// `first` from the root is known, without exploring pairs, to survive (`usize::MAX`:
    /// strings of every length; 0: nothing known). A token has at most
    /// [`Vocab::max_token_len`] bytes, so that many take the slice's tokens that start with
    /// `first`, where a pair proof asks for survival of every length and fails in a state that
    /// has only so many characters left (a string's `maxLength`); fewer take its tokens of
    /// that length. `classes` are the bytes the slice and the client treat alike, by least
    /// byte.
    fn horizon(
        &mut self,
        _first: u8,
        _k: usize,
        _at: SliceState,
        _classes: &[(u8, ByteSet)],
    ) -> Result<usize, Self::Error> {
        Ok(0)
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

/// Most bytes a proof may leave out of a slice ([`Decided::excluded`]): `[^/]+`, `[^@\s]`
/// leave out one to a few, each held by a few thousand tokens at most; a client that refuses
/// more is better served by a narrower slice.
const MAX_EXCLUDED: usize = 8;

/// What the proofs of one slice found, by first byte.
#[derive(Default)]
struct Decided {
    /// After these the client survives every string of the slice (with `excluded` bytes,
    /// every string holding none of them): their tokens in the slice are accepted at once.
    taken: ByteSet,
    /// After these it survives every string of the slice that makes a token of at most
    /// `bound` bytes: those tokens are accepted, the longer ones walked.
    bounded: ByteSet,
    bound: usize,
    /// Bytes the proof of `taken` left out: the tokens holding one are walked.
    excluded: ByteSet,
    /// First bytes no token of the slice starts with, or that the client refuses at once:
    /// only the slice's rest is walked under them.
    settled: ByteSet,
    /// Some proof failed because a byte killed the client (not for lack of budget): leaving
    /// such bytes out may make a proof.
    killed: bool,
}

impl Decided {
    fn takes_any(&self) -> bool {
        !self.taken.is_empty() || !self.bounded.is_empty()
    }
}

/// Walks `vocab`'s trie from `root` like [`TokenTrie::walk`], but first looks for a slice whose
/// every string keeps the client alive after some first bytes: the slice's tokens starting
/// with those are accepted at once, and only the slice's rest is walked under them. Inside a
/// JSON string this visits ~5k tokens of Qwen3's 151k.
///
/// A slice may also be taken in part: up to a length (a string with a few characters left
/// survives only that many bytes), or without a few bytes its proof left out (`[^/]+` dies on
/// `/` only). Then its other tokens are walked: under each such first byte, the subtrees
/// holding a token longer than the length or with a left-out byte, besides the slice's rest.
/// A text slice is taken so before a narrower one (an ASCII slice leaves ~110k tokens).
///
/// `proofs` holds what earlier walks of the same client states proved; it must be used with
/// one meaning of [`SliceProbe::identity`] only.
pub(crate) fn walk_sliced<V: SliceProbe>(
    vocab: &Vocab,
    root: V::State,
    v: &mut V,
    proofs: &mut SliceProofs,
) -> Result<(), V::Error> {
    let longest = vocab.max_token_len();
    // The shortest length bound worth taking: past it, a quarter of the tokens at most are
    // longer and walked.
    let by_length = vocab.by_length();
    let min_bound = by_length
        .get(by_length.len() / 4)
        .map_or(0, |&t| vocab.token_bytes(t).len());
    let limits = Limits {
        longest,
        min_bound,
        exclude: false,
    };
    // The narrowest text slice whose proof failed on bytes that killed the client.
    let mut killed_in = None;
    for (k, slice) in vocab.slices().iter().enumerate() {
        if !v.tries_slice(k) {
            continue;
        }
        let d = decide_first_bytes(k, slice, &mut proofs.slices[k], &root, v, limits)?;
        let broad = is_broad(vocab, slice);
        if !d.takes_any() {
            if d.killed && broad {
                killed_in = Some(k);
            }
            continue;
        }
        if !broad {
            if let Some(text) = killed_in.take() {
                if take_excluding(vocab, text, &root, v, proofs, limits)? {
                    return Ok(());
                }
            }
        }
        walk_decided(vocab, slice, &d, root, v);
        return Ok(());
    }
    if let Some(text) = killed_in {
        if take_excluding(vocab, text, &root, v, proofs, limits)? {
            return Ok(());
        }
    }
    vocab.trie().walk(root, v);
    Ok(())
}

/// A slice whose rest is a small part of the vocabulary (the text slices, not the ASCII ones).
fn is_broad(vocab: &Vocab, slice: &TokenSlice) -> bool {
    slice.rest().num_tokens() * 8 < vocab.trie().num_tokens()
}

/// Proves text slice `k` again, leaving out the bytes that kill the client, and walks with it
/// if that takes some first byte.
fn take_excluding<V: SliceProbe>(
    vocab: &Vocab,
    k: usize,
    root: &V::State,
    v: &mut V,
    proofs: &mut SliceProofs,
    limits: Limits,
) -> Result<bool, V::Error> {
    let slice = &vocab.slices()[k];
    let exclude = Limits {
        exclude: true,
        ..limits
    };
    let d = decide_first_bytes(k, slice, &mut proofs.slices[k], root, v, exclude)?;
    if d.takes_any() {
        walk_decided(vocab, slice, &d, root.clone(), v);
    }
    Ok(d.takes_any())
}

/// Accepts the slice's tokens the proofs took and walks the others.
fn walk_decided<V: SliceProbe>(
    vocab: &Vocab,
    slice: &TokenSlice,
    d: &Decided,
    root: V::State,
    v: &mut V,
) {
    let accepted = v.accepted();
    if !d.taken.is_empty() {
        let members = slice.members_starting_with(vocab, &d.taken);
        match d.excluded.is_empty() {
            true => or_into(accepted, &members),
            false => {
                let mut kept = members.to_vec();
                for b in d.excluded.iter() {
                    let holding = &vocab.holding(b).words;
                    kept.iter_mut()
                        .zip(holding.iter())
                        .for_each(|(k, h)| *k &= !h);
                }
                or_into(accepted, &kept);
            }
        }
    }
    if !d.bounded.is_empty() {
        let mut kept = slice.members_starting_with(vocab, &d.bounded).to_vec();
        vocab
            .longer_than(d.bound)
            .iter()
            .for_each(|&t| clear_bit(&mut kept, t));
        or_into(accepted, &kept);
    }
    // Taken whole: only the slice's rest is walked under these.
    let exact = match d.excluded.is_empty() {
        true => d.taken,
        false => ByteSet::EMPTY,
    };
    let in_rest = exact.union(&d.settled);
    let partial = d.bounded.union(&d.taken.intersection(&exact.complement()));
    let excluded: Vec<Cursor> = d
        .excluded
        .iter()
        .map(|b| Cursor::new(&vocab.holding(b).positions))
        .collect();
    let mut remainder = Remainder {
        inner: v,
        full: in_rest.union(&partial).complement(),
        partial,
        bounded: d.bounded,
        bound: d.bound,
        rest: Cursor::new(slice.rest_positions()),
        excluded,
        mode: Mode::Full,
    };
    vocab.trie().walk(root.clone(), &mut remainder);
    // The slice's rest under the first bytes taken whole: those alone, each walked in full.
    remainder.full = in_rest;
    remainder.partial = ByteSet::EMPTY;
    slice.rest().walk(root, &mut remainder);
}

fn or_into(words: &mut [u32], set: &[u32]) {
    words.iter_mut().zip(set).for_each(|(a, m)| *a |= m);
}

/// How far [`decide_first_bytes`] may go.
#[derive(Clone, Copy)]
struct Limits {
    /// Bytes of the longest token.
    longest: usize,
    /// The shortest length bound worth taking a slice up to.
    min_bound: usize,
    /// Leave out the bytes that kill the client (at most [`MAX_EXCLUDED`]) instead of failing.
    exclude: bool,
}

/// The first bytes after which `v` survives every continuation in the slice's language
/// (*taken*: the slice's tokens starting with them are all accepted), or every one up to a
/// length (*bounded*), and those no slice token starts with or the root rejects (*settled*).
/// Explores pairs of slice and client states per first byte, with a budget: inside a string or
/// free text both loop back after a character, so a few pairs settle it; a byte that leads
/// into a property name stays undecided. With `limits.exclude`, a byte that kills the client
/// is left out of the slice (all of its class) instead, and what is proven is not kept.
// Long: one budgeted exploration of (slice state, client state) pairs per first byte; its
// worklist, budget and per-byte verdicts are shared by every step.
fn decide_first_bytes<V: SliceProbe>(
    k: usize,
    slice: &TokenSlice,
    pairs: &mut Pairs,
    root: &V::State,
    v: &mut V,
    limits: Limits,
) -> Result<Decided, V::Error> {
    let mut d = Decided {
        bound: usize::MAX,
        ..Decided::default()
    };
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
    // With bytes left out, the pairs proven so (the excluded set only grows, and a pair proven
    // without some bytes is proven without more): not kept past this walk.
    let mut proven_here: FxHashSet<(SliceState, u32)> = FxHashSet::default();
    let mut visits = 0;
    // Client states met so far. The first byte taken explores the shared structure (a string's
    // character loop and its UTF-8 states); a later one that needs many new states leads into
    // a property name, and walking its subtree costs less than proving every state of the name
    // against every byte.
    let mut known: FxHashSet<u32> = FxHashSet::default();
    for &(first, alike) in classes.iter() {
        let mut new_states = 0;
        let max_new_states = MAX_NEW_STATES[usize::from(!d.taken.is_empty())];
        let Some(s) = slice.next(slice.start(), first) else {
            d.settled = d.settled.union(&alike);
            continue;
        };
        let state = match v.advance(root, first) {
            Ok(Some(state)) => state,
            Ok(None) => {
                d.settled = d.settled.union(&alike);
                continue;
            }
            // Left to the walk, which meets it again.
            Err(e) => {
                v.set_aside(e)?;
                continue;
            }
        };
        let horizon = match v.horizon(first, k, s, classes) {
            Ok(horizon) => horizon,
            Err(e) => {
                v.set_aside(e)?;
                0
            }
        };
        if horizon >= limits.longest.saturating_sub(1) {
            d.taken = d.taken.union(&alike);
            continue;
        }
        // A horizon bounds what the unit alone carries; the pair proof, through the rows
        // around it, may still show survival of every length (a searched pattern's start
        // state, which the unit leaves for the text after a match), so it is tried first.
        let by_horizon = !limits.exclude && horizon > 0 && horizon + 1 >= limits.min_bound;
        let proof = 'proof: {
            let Some(id) = v.identity(&state) else {
                break 'proof false;
            };
            trail.clear();
            met.clear();
            stack.clear();
            let is_proven = |pair| proven.contains(&pair) || proven_here.contains(&pair);
            if !is_proven((s, id)) {
                met.insert((s, id));
                stack.push((s, id, state));
            }
            while let Some((s, id, state)) = stack.pop() {
                let pair = (s, id);
                let was_killed = !limits.exclude && failed.contains(&pair);
                if was_killed || trail.len() == MAX_PAIRS || visits == MAX_VISITS {
                    d.killed |= was_killed;
                    break 'proof false;
                }
                if known.insert(id) {
                    new_states += 1;
                    if new_states > max_new_states {
                        break 'proof false;
                    }
                }
                visits += 1;
                trail.push(pair);
                // Runs of classes lead to the same pair (a string's characters): each pair is
                // looked up once per run, and stacked once per first byte.
                let mut previous = None;
                for &(byte, class) in classes.iter() {
                    let Some(next_s) = slice.next(s, byte) else {
                        continue;
                    };
                    if d.excluded.contains(byte) {
                        continue;
                    }
                    let next = match v.advance(&state, byte) {
                        Ok(next) => next,
                        // Neither proven nor failed: left to the walk.
                        Err(e) => {
                            v.set_aside(e)?;
                            break 'proof false;
                        }
                    };
                    let Some(next) = next else {
                        if !limits.exclude {
                            failed.insert(pair);
                            d.killed = true;
                            break 'proof false;
                        }
                        d.excluded = d.excluded.union(&class);
                        if d.excluded.len() > MAX_EXCLUDED {
                            return Ok(Decided::default());
                        }
                        continue;
                    };
                    // A state without an identity is never proven: this first byte is walked.
                    let Some(next_id) = v.identity(&next) else {
                        break 'proof false;
                    };
                    let next_pair = (next_s, next_id);
                    if previous != Some(next_pair) {
                        previous = Some(next_pair);
                        if !is_proven(next_pair) && met.insert(next_pair) {
                            stack.push((next_s, next_id, next));
                        }
                    }
                }
            }
            // Pairs proven with bytes left out hold only without them.
            match limits.exclude {
                false => proven.extend(trail.drain(..)),
                true => proven_here.extend(trail.drain(..)),
            }
            true
        };
        if !proof {
            if by_horizon {
                d.bounded = d.bounded.union(&alike);
                d.bound = d.bound.min(horizon + 1);
            }
            continue;
        }
        d.taken = d.taken.union(&alike);
    }
    if d.bounded.is_empty() {
        d.bound = 0;
    }
    Ok(d)
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

/// Ascending trie positions, read by nodes met in position order (a walk's): the cursor only
/// moves forward, galloping over the positions under skipped subtrees.
struct Cursor<'a> {
    positions: &'a [u32],
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(positions: &'a [u32]) -> Cursor<'a> {
        Cursor { positions, at: 0 }
    }

    /// Is some position in `range`? Successive ranges must not start lower.
    fn any_in(&mut self, range: &Range<u32>) -> bool {
        let p = self.positions;
        if self.at < p.len() && p[self.at] < range.start {
            let (mut below, mut step) = (self.at, 1);
            let mut probe = below + 1;
            while probe < p.len() && p[probe] < range.start {
                below = probe;
                step *= 2;
                probe = below + step;
            }
            let probe = probe.min(p.len());
            self.at = below + 1 + p[below + 1..probe].partition_point(|&x| x < range.start);
        }
        self.at < p.len() && p[self.at] < range.end
    }
}

/// How [`Remainder`] walks the subtree of the current first byte.
#[derive(Clone, Copy)]
enum Mode {
    Full,
    /// Only the subtrees holding a token the slice's rest has or longer than the bound.
    Bounded,
    /// Only the subtrees holding a token the slice's rest has or with an excluded byte.
    Excluding,
}

/// The walk of the vocabulary's trie after a slice was taken: whole under the first bytes no
/// proof took, and where one took the slice in part, only the subtrees holding a token it did
/// not accept (the slice's rest, tokens past the length bound or with a left-out byte). With
/// nothing partial, a walk restricted to some first bytes (of the slice's rest trie).
struct Remainder<'v, 'a, V> {
    inner: &'v mut V,
    /// First bytes walked whole.
    full: ByteSet,
    /// First bytes under which only the subtrees holding a token not accepted are walked.
    partial: ByteSet,
    /// Those of `partial` taken up to `bound` bytes (the others: without the excluded bytes).
    bounded: ByteSet,
    bound: usize,
    rest: Cursor<'a>,
    excluded: Vec<Cursor<'a>>,
    mode: Mode,
}

impl<V: TrieVisitor> TrieVisitor for Remainder<'_, '_, V> {
    type State = V::State;

    #[inline]
    fn step(
        &mut self,
        parent: &V::State,
        byte: u8,
        depth: usize,
        subtree: Subtree,
    ) -> TrieStep<V::State> {
        if depth == 1 {
            self.mode = match (self.full.contains(byte), self.partial.contains(byte)) {
                (true, _) => Mode::Full,
                (false, false) => return TrieStep::Skip,
                _ if self.bounded.contains(byte) => Mode::Bounded,
                _ => Mode::Excluding,
            };
        }
        let walked = match self.mode {
            Mode::Full => true,
            Mode::Bounded => {
                subtree.deepest() > self.bound || self.rest.any_in(&subtree.positions())
            }
            Mode::Excluding => {
                let range = subtree.positions();
                self.rest.any_in(&range) || self.excluded.iter_mut().any(|c| c.any_in(&range))
            }
        };
        match walked {
            true => self.inner.step(parent, byte, depth, subtree),
            false => TrieStep::Skip,
        }
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
    /// its walks enter; `horizon` answers [`SliceProbe::horizon`] for the walk's root.
    struct ByteClient<S> {
        next: fn(S, u8) -> Option<S>,
        horizon: fn(usize) -> usize,
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
        fn horizon(
            &mut self,
            _: u8,
            k: usize,
            _: SliceState,
            _: &[(u8, ByteSet)],
        ) -> Result<usize, ()> {
            Ok((self.horizon)(k))
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
        assert_walk_within(vocab, next, |_| 0, root, proofs, 10);
    }

    /// [`assert_sliced_walk`], with a horizon by slice, entering under `1 / fraction` of the
    /// nodes.
    fn assert_walk_within<S: Copy + Into<u32>>(
        vocab: &Vocab,
        next: fn(S, u8) -> Option<S>,
        horizon: fn(usize) -> usize,
        root: S,
        proofs: &mut SliceProofs,
        fraction: usize,
    ) {
        let mut walk = ByteClient {
            next,
            horizon,
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
            walk.steps * fraction < vocab.trie().num_nodes(),
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

    /// A raw JSON string character (the string slice's bytes).
    fn string_byte(b: u8) -> bool {
        !matches!(b, b'"' | b'\\' | 0..=0x1F)
    }

    /// A client inside a JSON string with a number of bytes left: the pair proof fails at
    /// every state (each survives only so far), the horizon knows how far, and the tokens up to
    /// that length are taken whole; only the longer ones are walked.
    #[test]
    fn a_string_with_bytes_left_takes_the_slice_up_to_that_length() {
        let vocab = Vocab::embedded_qwen3().unwrap();
        fn left(s: u16, b: u8) -> Option<u16> {
            (s > 0 && string_byte(b)).then(|| s - 1)
        }
        // The free-text slice holds bytes a string refuses; the others do not.
        let horizon = |k| if k == 0 { 0 } else { 23 };
        assert_walk_within(&vocab, left, horizon, 24, &mut SliceProofs::default(), 4);
    }

    /// A client inside a JSON string that survives every string of the slice, though its
    /// horizon is short (a searched pattern's start state: its unit alone dies where the rows
    /// around it go on to the text after a match). The pair proof takes the slice whole, where
    /// the horizon alone would walk every token longer than it.
    #[test]
    fn a_short_horizon_leaves_the_pair_proof_its_chance() {
        let vocab = Vocab::embedded_qwen3().unwrap();
        fn searching(s: u8, b: u8) -> Option<u8> {
            string_byte(b).then_some(s)
        }
        let horizon = |k| if k == 0 { 0 } else { 7 };
        assert_walk_within(
            &vocab,
            searching,
            horizon,
            0,
            &mut SliceProofs::default(),
            10,
        );
    }

    /// A client that refuses `/` inside a JSON string (a `[^/]+` name): the string slice is
    /// taken without the tokens holding `/`, which are walked, where the URI slice it would
    /// fit left ~110k tokens to walk.
    #[test]
    fn a_string_without_slashes_takes_the_string_slice_without_them() {
        let vocab = Vocab::embedded_qwen3().unwrap();
        fn no_slash(s: u8, b: u8) -> Option<u8> {
            (string_byte(b) && b != b'/').then_some(s)
        }
        assert_sliced_walk(&vocab, no_slash, 0, &mut SliceProofs::default());
    }

    /// A cursor finds whether a range holds a position, whatever the jumps between ranges.
    #[test]
    fn cursors_find_positions_in_ranges_met_in_order() {
        let positions: Vec<u32> = (0..2000).filter(|p| p % 7 == 3 || p % 97 == 0).collect();
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut cursor = Cursor::new(&positions);
        let mut start = 0;
        while start < 2100 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 9) as u32;
            let range = start..start + len;
            let want = positions.iter().any(|p| range.contains(p));
            assert_eq!(cursor.any_in(&range), want, "{range:?}");
            start += (seed >> 8) as u32 % 40;
        }
    }
}
