//! Token slices (llguidance's "slicer"): fixed byte languages, each with the text tokens it
//! contains and a trie of the others.
//!
//! Inside a JSON string or free text almost every token is allowed, so a mask walk enters
//! nearly the whole trie (~1.8 ms on Qwen3's 151k tokens). When a walk can show that its state
//! survives every byte string of a slice's language, the slice's tokens are allowed at once and
//! only its small remainder trie is walked. This file builds the slices; the walk that uses
//! them is [`walk_sliced`](super::walk_sliced).

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
pub(super) const PATTERNS: [&str; 5] = [
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
    pub(super) classes: [u8; 256],
    /// Every byte alone, as the classes of a client that tells all bytes apart.
    pub(super) singletons: Box<[(u8, ByteSet)]>,
    /// Mask words: the text tokens inside the language.
    members: Arc<[u32]>,
    /// Text tokens per first byte: what rebasing a first-byte set costs.
    tokens_by_first: [u32; 256],
    /// The members starting with an ASCII byte, and those starting with another: the sets a
    /// first walk asks for are near one of them (a string's characters, a UTF-8 lead byte).
    halves: [(ByteSet, Arc<[u32]>); 2],
    /// The other text tokens.
    rest: TokenTrie,
    /// Their positions in the vocabulary's trie, ascending: a walk of that trie that takes
    /// the slice only in part finds them under a node by its position range.
    rest_positions: Box<[u32]>,
    /// Bytes this slice refuses after a prefix the slice before it also takes, where that one
    /// goes on ([`TokenSlice::narrowed`]).
    narrowed: ByteSet,
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
        let mut slices: Vec<TokenSlice> =
            PATTERNS.iter().map(|p| TokenSlice::new(vocab, p)).collect();
        for k in 1..slices.len() {
            slices[k].narrowed = slices[k].refused_where_goes_on(&slices[k - 1]);
        }
        slices
    }

    /// The bytes this slice refuses after some prefix that it and `broader` both take, where
    /// `broader` goes on: breadth first over pairs of their (small) automata's states.
    fn refused_where_goes_on(&self, broader: &TokenSlice) -> ByteSet {
        let mut refused = ByteSet::EMPTY;
        let mut seen: FxHashSet<(SliceState, SliceState)> = FxHashSet::default();
        let mut queue = vec![(self.start(), broader.start())];
        while let Some((own, other)) = queue.pop() {
            if !seen.insert((own, other)) {
                continue;
            }
            for b in 0..=u8::MAX {
                match (self.next(own, b), broader.next(other, b)) {
                    (Some(own), Some(other)) => queue.push((own, other)),
                    (None, Some(_)) => refused.insert(b),
                    _ => {}
                }
            }
        }
        refused
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
        let trie = vocab.trie();
        let rest_positions = (0..trie.num_tokens() as u32)
            .filter(|&p| !get_bit(&words, trie.token_at(p)))
            .collect();
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
            rest_positions,
            narrowed: ByteSet::EMPTY,
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
    pub(super) fn members_starting_with(&self, vocab: &Vocab, first: &ByteSet) -> Arc<[u32]> {
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

    /// The positions of the text tokens outside the slice in the vocabulary's trie, ascending.
    pub(super) fn rest_positions(&self) -> &[u32] {
        &self.rest_positions
    }

    /// The bytes this slice refuses after a prefix the slice before it in [`PATTERNS`] also
    /// takes, where that one goes on (none for the first): for the no-line-terminator slice,
    /// the last bytes of U+2028 and U+2029. A client whose every class holding one of them
    /// holds a byte this slice takes there treats the two slices alike.
    pub fn narrowed(&self) -> ByteSet {
        self.narrowed
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
