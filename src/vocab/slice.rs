//! Token slices (llguidance's "slicer"): fixed byte languages, each with the text tokens it
//! contains and a trie of the others.
//!
//! Inside a JSON string or free text almost every token is allowed, so a mask walk enters
//! nearly the whole trie (~1.8 ms on Qwen3's 151k tokens). When a walk can show that its state
//! survives every byte string of a slice's language, the slice's tokens are allowed at once and
//! only its small remainder trie is walked.

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, PoisonError};

use lru::LruCache;
use regex_automata::dfa::{dense, Automaton, StartKind};
use regex_automata::util::primitives::StateID;
use regex_automata::util::start;
use regex_automata::Anchored;
use rustc_hash::{FxHashMap, FxHashSet};

use super::{Subtree, TokenTrie, TrieStep, TrieVisitor, Vocab};
use crate::base::bitmask::{clear_bit, get_bit, set_bit};
use crate::base::byteset::ByteSet;
use crate::base::token::TokenId;

/// The byte languages tried, broadest first: free text that cannot start a tag, the raw
/// characters of a JSON string, the same but ECMA-262's line terminators (a pattern's `.`
/// refuses U+2028 and U+2029, so in `^.+$` the string slice fails and the next one that fits
/// leaves ~110k tokens to walk), a URI's unreserved characters (URIs, host names, most
/// identifiers), alphanumerics (names restricted by a pattern). A slice's language is every
/// *prefix* of its pattern's matches (a token may end inside a UTF-8 character).
const PATTERNS: [&str; 5] = [
    r"[^<]*",
    r#"[^\x00-\x1F"\\]*"#,
    r#"[^\x00-\x1F"\\\x{2028}\x{2029}]*"#,
    r"[A-Za-z0-9._~\-]*",
    r"[A-Za-z0-9]*",
];

/// One slice of a vocabulary.
pub struct TokenSlice {
    /// `256` entries per state: the next state, or [`DEAD`] when no prefix continues so.
    table: Box<[u16]>,
    /// Bytes whose columns of `table` agree share a class.
    classes: [u8; 256],
    /// Every byte alone, as the classes of a client that tells all bytes apart.
    singletons: Box<[(u8, ByteSet)]>,
    /// Mask words: the text tokens inside the language.
    members: Arc<[u32]>,
    /// Text tokens per first byte: what rebasing a first-byte set costs.
    tokens_by_first: [u32; 256],
    /// The members starting with an ASCII byte, and those starting with another: the sets a
    /// first walk asks for are near one of them (a string's characters, a UTF-8 lead byte).
    halves: [(ByteSet, Arc<[u32]>); 2],
    /// The other text tokens.
    rest: TokenTrie,
    /// [`TokenSlice::members_starting_with`] for the first-byte sets asked for last: every
    /// string state of every grammar takes the same bytes, and a set costs a pass over the
    /// tokens of the bytes where it differs from the nearest one known (~50k when those are
    /// the non-ASCII ones).
    recent: Mutex<LruCache<ByteSet, Arc<[u32]>>>,
}

/// How many first-byte sets a slice remembers its members for (19 KiB each on Qwen3).
const RECENT_FIRST_BYTES: usize = 8;

const DEAD: u16 = u16::MAX;

impl std::fmt::Debug for TokenSlice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSlice")
            .field("states", &(self.table.len() / 256))
            .field(
                "members",
                &self.members.iter().map(|w| w.count_ones()).sum::<u32>(),
            )
            .field("rest", &self.rest.num_tokens())
            .finish()
    }
}

/// A state of a slice's prefix automaton.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SliceState(u16);

impl TokenSlice {
    /// The slices of `vocab`, one per pattern of [`PATTERNS`].
    pub(super) fn all(vocab: &Vocab) -> Vec<TokenSlice> {
        PATTERNS.iter().map(|p| TokenSlice::new(vocab, p)).collect()
    }

    fn new(vocab: &Vocab, pattern: &str) -> TokenSlice {
        let table = prefix_table(pattern);
        let mut words = vec![0; vocab.mask_words()];
        struct Members<'a>(&'a [u16], &'a mut [u32]);
        impl TrieVisitor for Members<'_> {
            type State = u16;
            fn step(&mut self, s: &u16, byte: u8, _: usize, _: Subtree) -> TrieStep<u16> {
                match self.0[*s as usize * 256 + byte as usize] {
                    DEAD => TrieStep::Skip,
                    next => TrieStep::Enter(next),
                }
            }
            fn tokens(&mut self, _: &u16, tokens: &[TokenId]) {
                tokens.iter().for_each(|&t| set_bit(self.1, t));
            }
        }
        vocab.trie().walk(0, &mut Members(&table, &mut words));
        let rest = TokenTrie::new(
            (0..vocab.len() as TokenId)
                .filter(|&t| get_bit(vocab.text_mask(), t) && !get_bit(&words, t))
                .map(|t| (t, vocab.token_bytes(t))),
        );
        let ascii = ByteSet::range(0, 0x7F);
        let half = |set: ByteSet| {
            let mut half = vec![0; words.len()];
            rebase(vocab, &words, &mut half, &ByteSet::EMPTY, &set);
            (set, half.into())
        };
        let mut tokens_by_first = [0u32; 256];
        for (b, tokens) in vocab.trie().by_first_byte() {
            tokens_by_first[b as usize] = tokens.len() as u32;
        }
        TokenSlice {
            classes: column_classes(&table),
            singletons: (0..=u8::MAX).map(|b| (b, ByteSet::byte(b))).collect(),
            tokens_by_first,
            table: table.into(),
            halves: [half(ascii), half(ascii.complement())],
            members: words.into(),
            rest,
            recent: Mutex::new(LruCache::new(
                NonZeroUsize::new(RECENT_FIRST_BYTES).expect("non-zero"),
            )),
        }
    }

    /// The automaton's start.
    pub fn start(&self) -> SliceState {
        SliceState(0)
    }

    /// The state after `byte`, or `None` when no string of the language continues so.
    pub fn next(&self, s: SliceState, byte: u8) -> Option<SliceState> {
        match self.table[s.0 as usize * 256 + byte as usize] {
            DEAD => None,
            next => Some(SliceState(next)),
        }
    }

    /// Mask words with the slice's tokens that start with a byte of `first` set.
    fn members_starting_with(&self, vocab: &Vocab, first: &ByteSet) -> Arc<[u32]> {
        let recent = || self.recent.lock().unwrap_or_else(PoisonError::into_inner);
        // Starting points: no member, every member, the two halves, and the sets asked for
        // last. Key-trie nodes of one object ask for sets a byte or two apart, so a recent set
        // is usually one group of tokens away, where the others are ~50k.
        let remembered: Vec<(ByteSet, Arc<[u32]>)> = {
            let mut recent = recent();
            if let Some(members) = recent.get(first) {
                return members.clone();
            }
            recent.iter().map(|(set, m)| (*set, m.clone())).collect()
        };
        let mut bases: Vec<(ByteSet, Option<Arc<[u32]>>)> = vec![
            (ByteSet::EMPTY, None),
            (ByteSet::FULL, Some(self.members.clone())),
        ];
        bases.extend(
            self.halves
                .iter()
                .chain(&remembered)
                .map(|(set, m)| (*set, Some(m.clone()))),
        );
        // Computed unlocked: other threads' walks need other sets meanwhile.
        let cost = |base: &ByteSet| -> u32 {
            let differ = base
                .union(first)
                .intersection(&base.intersection(first).complement());
            differ
                .iter()
                .map(|b| self.tokens_by_first[b as usize])
                .sum()
        };
        let (base, words) = bases
            .into_iter()
            .min_by_key(|(set, _)| cost(set))
            .expect("two bases at least");
        let mut words = words.map_or_else(|| vec![0; self.members.len()], |w| w.to_vec());
        rebase(vocab, &self.members, &mut words, &base, first);
        let members: Arc<[u32]> = words.into();
        recent().put(*first, members.clone());
        members
    }

    /// The bytes the language's strings start with.
    pub fn first_bytes(&self) -> ByteSet {
        let mut first = ByteSet::EMPTY;
        (0..=u8::MAX)
            .filter(|&b| self.next(self.start(), b).is_some())
            .for_each(|b| first.insert(b));
        first
    }

    /// Mask words: the text tokens inside the language.
    pub fn members(&self) -> &[u32] {
        &self.members
    }

    /// The trie of the text tokens outside the slice.
    pub fn rest(&self) -> &TokenTrie {
        &self.rest
    }
}

/// The prefix automaton of `pattern`'s matches, state 0 first. regex-automata's DFA reports a
/// match one byte late, so "not dead" is not "a prefix of a match"; a state is kept only if
/// some path from it ends where end-of-input matches.
fn prefix_table(pattern: &str) -> Vec<u16> {
    let dfa = dense::Builder::new()
        .configure(
            dense::Config::new()
                .start_kind(StartKind::Anchored)
                .minimize(true),
        )
        .build(pattern)
        .expect("slice patterns are valid regexes");
    let start = dfa
        .start_state(&start::Config::new().anchored(Anchored::Yes))
        .expect("an anchored start state");
    let mut index: FxHashMap<StateID, usize> = FxHashMap::default();
    let mut states = vec![start];
    index.insert(start, 0);
    let mut next: Vec<[usize; 256]> = Vec::new();
    while next.len() < states.len() {
        let s = states[next.len()];
        let mut row = [0; 256];
        for (b, slot) in row.iter_mut().enumerate() {
            let t = dfa.next_state(s, b as u8);
            *slot = *index.entry(t).or_insert_with(|| {
                states.push(t);
                states.len() - 1
            });
        }
        next.push(row);
    }
    let mut alive: Vec<bool> = states
        .iter()
        .map(|&s| dfa.is_match_state(dfa.next_eoi_state(s)))
        .collect();
    let mut changed = true;
    while changed {
        changed = false;
        for i in 0..states.len() {
            if !alive[i] && next[i].iter().any(|&t| alive[t]) {
                alive[i] = true;
                changed = true;
            }
        }
    }
    assert!(
        alive[0] && states.len() < DEAD as usize,
        "a small, non-empty slice language"
    );
    next.iter()
        .flat_map(|row| row.iter().map(|&t| if alive[t] { t as u16 } else { DEAD }))
        .collect()
}

/// Turns `words`, the `members` starting with a byte of `from`, into those starting with a
/// byte of `to`: a pass over the tokens of the first bytes where the two sets differ.
fn rebase(vocab: &Vocab, members: &[u32], words: &mut [u32], from: &ByteSet, to: &ByteSet) {
    let differ = |b: u8| from.contains(b) != to.contains(b);
    for (b, tokens) in vocab.trie().by_first_byte().filter(|(b, _)| differ(*b)) {
        match to.contains(b) {
            true => tokens
                .iter()
                .filter(|&&t| get_bit(members, t))
                .for_each(|&t| set_bit(words, t)),
            false => tokens.iter().for_each(|&t| clear_bit(words, t)),
        }
    }
}

/// Numbers the distinct columns of a 256-wide table: bytes every state treats alike.
fn column_classes(table: &[u16]) -> [u8; 256] {
    let column = |b: usize| {
        table
            .iter()
            .skip(b)
            .step_by(256)
            .copied()
            .collect::<Vec<u16>>()
    };
    let mut seen: FxHashMap<Vec<u16>, u8> = FxHashMap::default();
    let mut classes = [0u8; 256];
    for (b, class) in classes.iter_mut().enumerate() {
        let next = seen.len() as u8;
        *class = *seen.entry(column(b)).or_insert(next);
    }
    classes
}

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
        let (taken, decided) = decide_first_bytes(slice, &mut proofs.slices[k], &root, v)?;
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
    slice: &TokenSlice,
    pairs: &mut Pairs,
    root: &V::State,
    v: &mut V,
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

    #[test]
    fn members_starting_with_any_set_match_a_filter_of_the_members() {
        let vocab = Vocab::embedded_qwen3().unwrap();
        let slice = &vocab.slices()[1];
        let ascii = ByteSet::range(0x20, 0x7E);
        let without = |bytes: &[u8]| {
            let mut left_out = ByteSet::EMPTY;
            bytes.iter().for_each(|&b| left_out.insert(b));
            ascii.intersection(&left_out.complement())
        };
        // A set, its neighbours a byte or two away (built from it), unrelated ones (UTF-8 lead
        // bytes: near the non-ASCII half), and the set again after more than the remembered
        // number of others.
        let lead = ByteSet::range(0xC2, 0xF4);
        let mut sets = vec![
            ascii,
            without(b"B"),
            without(b"BM"),
            ascii.complement(),
            lead,
        ];
        sets.extend((0..RECENT_FIRST_BYTES as u8).map(|i| without(&[b'a' + i])));
        sets.extend([ByteSet::EMPTY, ByteSet::FULL, without(b"B")]);
        for first in sets {
            let members = slice.members_starting_with(&vocab, &first);
            for t in 0..vocab.len() as TokenId {
                let starts = vocab
                    .token_bytes(t)
                    .first()
                    .is_some_and(|&b| first.contains(b));
                let expected = get_bit(&slice.members, t) && starts;
                assert_eq!(get_bit(&members, t), expected, "token {t} with {first:?}");
            }
        }
    }

    /// A client that counts the hex digits in a row inside a JSON string, as the minimal
    /// automaton of a searched `[0-9A-Fa-f]{64}` does, and may close the string once it has
    /// seen 64 (then any character goes). Every state survives every string of the JSON
    /// slice, but a proof must visit all 65 of them.
    struct HexRun {
        accepted: Vec<u32>,
        steps: usize,
    }

    const RUN: u16 = 64;
    const CLOSED: u16 = 65;

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

    impl TrieVisitor for HexRun {
        type State = u16;
        fn step(&mut self, s: &u16, byte: u8, _: usize, _: Subtree) -> TrieStep<u16> {
            self.steps += 1;
            hex_run(*s, byte).map_or(TrieStep::Skip, TrieStep::Enter)
        }
        fn tokens(&mut self, _: &u16, tokens: &[TokenId]) {
            tokens.iter().for_each(|&t| set_bit(&mut self.accepted, t));
        }
    }

    impl SliceProbe for HexRun {
        type Error = ();
        fn advance(&mut self, s: &u16, byte: u8) -> Result<Option<u16>, ()> {
            Ok(hex_run(*s, byte))
        }
        fn identity(&self, s: &u16) -> Option<u32> {
            Some(u32::from(*s))
        }
        fn accepted(&mut self) -> &mut [u32] {
            &mut self.accepted
        }
    }

    #[test]
    fn a_counting_automaton_takes_the_string_slice_in_every_state() {
        let vocab = Vocab::embedded_qwen3().unwrap();
        let mut proofs = SliceProofs::default();
        for root in [0, 17, RUN - 1, RUN] {
            let mut walk = HexRun {
                accepted: vec![0; vocab.mask_words()],
                steps: 0,
            };
            walk_sliced(&vocab, root, &mut walk, &mut proofs).unwrap();
            for t in 0..vocab.len() as TokenId {
                let text = get_bit(vocab.text_mask(), t);
                let expected = text
                    && vocab
                        .token_bytes(t)
                        .iter()
                        .try_fold(root, |s, &b| hex_run(s, b))
                        .is_some();
                assert_eq!(
                    get_bit(&walk.accepted, t),
                    expected,
                    "token {t} from {root}"
                );
            }
            // The slice's members were taken whole: the walk entered the slice's rest and the
            // subtrees of the bytes the slice leaves out (`"`, `\`), not the whole trie.
            assert!(
                walk.steps * 10 < vocab.trie().num_nodes(),
                "{} of {} trie nodes from state {root}",
                walk.steps,
                vocab.trie().num_nodes()
            );
        }
    }

    /// A client that reads a JSON string's raw characters but ECMA-262's line terminators
    /// (U+2028 and U+2029, `E2 80 A8`/`A9`), as a pattern's `.` does: states 1 and 2 are
    /// inside an `E2` character.
    struct NoLineTerminator {
        accepted: Vec<u32>,
        steps: usize,
    }

    fn no_line_terminator(s: u8, b: u8) -> Option<u8> {
        match (s, b) {
            (0, b'"' | b'\\' | 0..=0x1F) => None,
            (0, 0xE2) => Some(1),
            (1, 0x80) => Some(2),
            (2, 0xA8 | 0xA9) => None,
            _ => Some(0),
        }
    }

    impl TrieVisitor for NoLineTerminator {
        type State = u8;
        fn step(&mut self, s: &u8, byte: u8, _: usize, _: Subtree) -> TrieStep<u8> {
            self.steps += 1;
            no_line_terminator(*s, byte).map_or(TrieStep::Skip, TrieStep::Enter)
        }
        fn tokens(&mut self, _: &u8, tokens: &[TokenId]) {
            tokens.iter().for_each(|&t| set_bit(&mut self.accepted, t));
        }
    }

    impl SliceProbe for NoLineTerminator {
        type Error = ();
        fn advance(&mut self, s: &u8, byte: u8) -> Result<Option<u8>, ()> {
            Ok(no_line_terminator(*s, byte))
        }
        fn identity(&self, s: &u8) -> Option<u32> {
            Some(u32::from(*s))
        }
        fn accepted(&mut self) -> &mut [u32] {
            &mut self.accepted
        }
    }

    #[test]
    fn a_string_without_line_terminators_takes_its_own_slice() {
        let vocab = Vocab::embedded_qwen3().unwrap();
        let mut walk = NoLineTerminator {
            accepted: vec![0; vocab.mask_words()],
            steps: 0,
        };
        walk_sliced(&vocab, 0, &mut walk, &mut SliceProofs::default()).unwrap();
        for t in 0..vocab.len() as TokenId {
            let text = get_bit(vocab.text_mask(), t);
            let expected = text
                && vocab
                    .token_bytes(t)
                    .iter()
                    .try_fold(0, |s, &b| no_line_terminator(s, b))
                    .is_some();
            assert_eq!(get_bit(&walk.accepted, t), expected, "token {t}");
        }
        // Without a slice of its own the string slice fails and the URI one leaves ~110k
        // tokens to walk.
        assert!(
            walk.steps * 10 < vocab.trie().num_nodes(),
            "{} of {} trie nodes",
            walk.steps,
            vocab.trie().num_nodes()
        );
    }

    #[test]
    fn members_and_rest_partition_the_text_tokens() {
        let vocab = Vocab::embedded_qwen3().unwrap();
        for (slice, pattern) in vocab.slices().iter().zip(PATTERNS) {
            let re = regex::bytes::Regex::new(&format!("^(?:{pattern})$")).unwrap();
            let mut rest = vec![0u32; vocab.mask_words()];
            struct All<'a>(&'a mut [u32]);
            impl TrieVisitor for All<'_> {
                type State = ();
                fn step(&mut self, _: &(), _: u8, _: usize, _: Subtree) -> TrieStep<()> {
                    TrieStep::Enter(())
                }
                fn tokens(&mut self, _: &(), tokens: &[TokenId]) {
                    tokens.iter().for_each(|&t| set_bit(self.0, t));
                }
            }
            slice.rest().walk((), &mut All(&mut rest));
            for t in 0..vocab.len() as TokenId {
                let text = get_bit(vocab.text_mask(), t);
                let member = get_bit(&slice.members, t);
                assert_eq!(text, member != get_bit(&rest, t), "token {t}");
                if !text {
                    continue;
                }
                // A token ending inside a character is a member iff it does with the
                // character completed (the patterns exclude only ASCII, so any completion
                // decides alike).
                let mut bytes = vocab.token_bytes(t).to_vec();
                loop {
                    match std::str::from_utf8(&bytes) {
                        Ok(_) => break,
                        Err(e) if e.error_len().is_none() => {
                            let next = (0x80..=0xBF).find(|&b| {
                                let mut longer = bytes.clone();
                                longer.push(b);
                                std::str::from_utf8(&longer)
                                    .map_or_else(|e| e.error_len().is_none(), |_| true)
                            });
                            bytes.push(next.expect("a valid prefix continues"));
                        }
                        Err(_) => {
                            assert!(!member, "token {t} {bytes:?} is not UTF-8");
                            break;
                        }
                    }
                }
                assert_eq!(member, re.is_match(&bytes), "token {t} {bytes:?}");
            }
            let members = slice
                .members
                .iter()
                .map(|w| w.count_ones() as usize)
                .sum::<usize>();
            assert!(members * 8 > vocab.len(), "{slice:?}");
            // The text slices leave little to walk; the ASCII ones most of the vocabulary.
            if re.is_match("é".as_bytes()) {
                assert!(slice.rest().num_tokens() * 4 < vocab.len(), "{slice:?}");
            }
        }
    }
}
