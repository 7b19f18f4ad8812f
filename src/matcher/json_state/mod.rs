//! State beside the grammar's, decided at mask time, where a JSON Schema asks what a
//! context-free grammar cannot hold in a reasonable size: arrays whose items must be distinct
//! strings (`uniqueItems` over items of infinitely many values), strings whose length the
//! matcher counts beside their pattern (`lengths`), and objects whose properties may come in
//! any order, their names kept per object (`keys`).
//!
//! A context-free grammar cannot say "no string twice", but the tokens that can break the rule
//! are few and easy to find: a repeat happens only when an item's closing quote is written.
//! Items that admit infinitely many strings from every prefix (free strings: their automaton
//! reaches a loop from every state, see `front::json_schema::tracked`) can always be
//! completed to a new one, so an output is a prefix of a valid one
//! iff the grammar accepts it as a prefix and no item closed so far repeats one of its array.
//! The mask is therefore the grammar's mask less the tokens that close an item (hold `"`)
//! equal to an earlier one; [`TrackedPaths`] says where such arrays are, and the tracker
//! keeps their strings, restored on rollback. Items from a list of strings (a long `enum`)
//! run out: there the mask also refuses the tokens that leave a prefix no value left can
//! complete, and a `,` when no value is left (`listed`).

mod chars;
mod keys;
mod lengths;
mod listed;
mod paths;
mod tracker;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

pub(crate) use chars::{CharTable, DEAD};
pub(crate) use keys::{
    spelled, unspelled, Declared, KeyGroup, KeySet, Others, VariantTest, MAX_GROUP_NAMES,
    MAX_VARIANTS,
};
pub(crate) use lengths::LengthBound;
pub(crate) use listed::ListedStrings;
pub(crate) use paths::{NameClasses, PathNode, PathState, TrackedPaths, UNTRACKED};
pub(crate) use tracker::is_scalar_byte;
use tracker::{JsonTracker, KeyReads};

use super::{MatchError, MatchErrorKind, Matcher};
use crate::base::bitmask::{clear_bit, get_bit, iter_ones};
use crate::base::token::TokenId;
use crate::vocab::{TokenKind, Vocab};
use lengths::LengthWalk;

/// Most values whose closing tokens a mask looks up in the token trie, one lookup each;
/// past it, the mask reads the first bytes of each token that may close the item instead
/// (thousands of tokens, but once).
const MAX_TRIE_LOOKUPS: usize = 64;

/// The state one matcher keeps beside the grammar's matcher (distinct items, counts, names).
#[derive(Clone, Debug)]
pub(crate) struct JsonState {
    tracker: JsonTracker,
    vocab: Vocab,
    reads: Arc<TokenReads>,
    /// Mask words of the tokens a mask reads for distinct items (reused).
    read: Vec<u32>,
    /// The tokens a mask reads one by one (reused).
    candidates: Vec<TokenId>,
}

/// The tokens a mask reads one by one beside those of distinct items, found once per
/// constraint.
#[derive(Debug)]
pub(crate) struct TokenReads {
    /// The tokens holding `"` long enough to open a string whose length is counted and leave
    /// its bound within themselves: every mask reads them whole (what a string inside a
    /// shorter token may hold is the grammar's, `minLength` included). None for most
    /// (Qwen3's longest such token has 34 bytes).
    long_quoted: Box<[TokenId]>,
    /// Where objects have key groups: the tokens each [`KeyReads`] reads.
    keyed: Option<KeyedTokens>,
}

/// The tokens that may reach a name, `,` or `}` of an object held to a key group (see
/// [`KeyReads`]), ascending; a few hundred to a few thousand of them, read only where the
/// mask allows them.
#[derive(Debug)]
struct KeyedTokens {
    /// Holding `{` and `"`: they may open such an object and write in it.
    opening: Box<[TokenId]>,
    /// Holding `"` and `,` or `}`, or opening.
    in_string: Box<[TokenId]>,
    /// Those, by their bytes from their first closing quote (see [`closing_suffix`]).
    in_string_by_suffix: Box<[(Box<[u8]>, Box<[TokenId]>)]>,
    /// Holding `,` or `}`, or opening.
    between: Box<[TokenId]>,
    /// Those, or holding `"`.
    before_name: Box<[TokenId]>,
    /// Holding `"`.
    quoted: Box<[TokenId]>,
}

/// The tokens a [`KeyReads`] reads.
enum KeyedRead<'a> {
    /// These, where the mask allows them.
    Listed(&'a [TokenId]),
    /// These, one read of each group's bytes for all its tokens the mask allows.
    BySuffix(&'a [(Box<[u8]>, Box<[TokenId]>)]),
    /// Every token the mask allows.
    Allowed,
    /// Those holding `"` the mask allows, after a walk of the token trie for the others (see
    /// [`KeyReads::NameWalked`]).
    Walked,
}

impl TokenReads {
    pub fn new(paths: &TrackedPaths, vocab: &Vocab) -> TokenReads {
        let safe = paths.safe_token_len();
        let long_quoted = vocab
            .holding(b'"')
            .positions
            .iter()
            .map(|&p| vocab.trie().token_at(p))
            .filter(|&t| vocab.token_bytes(t).len() > safe)
            .collect();
        let keyed = paths.has_key_groups().then(|| {
            let [quote, comma, close, open] =
                [b'"', b',', b'}', b'{'].map(|b| &vocab.holding(b).words);
            let tokens = |f: &dyn Fn(usize) -> u32| -> Box<[TokenId]> {
                let words: Vec<u32> = (0..quote.len()).map(f).collect();
                iter_ones(&words).collect()
            };
            let in_string = tokens(&|w| quote[w] & (comma[w] | close[w]) | open[w] & quote[w]);
            let mut by_suffix: HashMap<&[u8], Vec<TokenId>> = HashMap::new();
            for &t in in_string.iter() {
                let bytes = vocab.token_bytes(t);
                if let Some(at) = closing_suffix(bytes) {
                    by_suffix.entry(&bytes[at..]).or_default().push(t);
                }
            }
            let mut in_string_by_suffix: Vec<(Box<[u8]>, Box<[TokenId]>)> = by_suffix
                .into_iter()
                .map(|(suffix, ts)| (suffix.into(), ts.into()))
                .collect();
            in_string_by_suffix.sort_unstable();
            KeyedTokens {
                opening: tokens(&|w| open[w] & quote[w]),
                in_string_by_suffix: in_string_by_suffix.into(),
                in_string,
                between: tokens(&|w| comma[w] | close[w] | open[w] & quote[w]),
                before_name: tokens(&|w| comma[w] | close[w] | quote[w]),
                quoted: tokens(&|w| quote[w]),
            }
        });
        TokenReads { long_quoted, keyed }
    }

    /// The tokens `reads` reads (`None`: none).
    fn keyed(&self, reads: KeyReads) -> Option<KeyedRead<'_>> {
        let k = self.keyed.as_ref()?;
        Some(KeyedRead::Listed(match reads {
            KeyReads::None => return None,
            KeyReads::Opening => &k.opening,
            KeyReads::Name { every: true } => return Some(KeyedRead::Allowed),
            KeyReads::Name { every: false } => &k.quoted,
            KeyReads::NameWalked => return Some(KeyedRead::Walked),
            KeyReads::InString { plain: true } => {
                return Some(KeyedRead::BySuffix(&k.in_string_by_suffix))
            }
            KeyReads::InString { plain: false } => &k.in_string,
            KeyReads::Between { name_next: false } => &k.between,
            KeyReads::Between { name_next: true } => &k.before_name,
        }))
    }
}

/// Where a token's bytes leave a string it starts inside (not within an escape): its first
/// quote no backslash of its own escapes. A string's content changes nothing where
/// [`KeyReads::InString`] is plain, so the token does what these bytes do.
fn closing_suffix(bytes: &[u8]) -> Option<usize> {
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

impl JsonState {
    /// At the start of the document, keeping `history` steps for rollback (the grammar
    /// matcher's limit); `reads` those of the constraint.
    pub fn new(
        paths: Arc<TrackedPaths>,
        vocab: Vocab,
        history: usize,
        reads: Arc<TokenReads>,
    ) -> JsonState {
        JsonState {
            tracker: JsonTracker::new(paths, history),
            vocab,
            reads,
            read: Vec::new(),
            candidates: Vec::new(),
        }
    }

    /// `inner`'s mask less the tokens that would repeat an item, leave a string's bounds, or
    /// write a name, `,` or `}` an object's key group refuses.
    pub fn fill_mask(
        &mut self,
        inner: &mut dyn Matcher,
        out: &mut [u32],
    ) -> Result<(), MatchError> {
        inner.fill_mask(out)?;
        if inner.is_terminated() {
            return Ok(());
        }
        // The tokens read one by one: those the cases below do not settle.
        self.candidates.clear();
        if self.tracker.has_distinct_arrays() {
            self.distinct_candidates(out);
        }
        let vocab = &self.vocab;
        let allowed = |t: &&TokenId| get_bit(out, **t);
        self.candidates
            .extend(self.reads.long_quoted.iter().filter(allowed));
        match self.reads.keyed(self.tracker.key_reads()) {
            None => {}
            Some(KeyedRead::Listed(tokens)) => {
                self.candidates.extend(tokens.iter().filter(allowed))
            }
            Some(KeyedRead::Allowed) => self.candidates.extend(iter_ones(out)),
            Some(KeyedRead::Walked) => {
                self.tracker.walk_name(vocab.trie(), out);
                let quote = &vocab.holding(b'"').words;
                self.read.clear();
                self.read.extend(out.iter().zip(quote).map(|(o, q)| o & q));
                self.candidates.extend(iter_ones(&self.read));
            }
            Some(KeyedRead::BySuffix(groups)) => {
                for (suffix, tokens) in groups {
                    if tokens.iter().any(|&t| get_bit(out, t))
                        && self.tracker.check(suffix).is_err()
                    {
                        tokens.iter().for_each(|&t| clear_bit(out, t));
                    }
                }
            }
        }
        self.candidates.sort_unstable();
        self.candidates.dedup();
        for &t in &self.candidates {
            if self.tracker.check(vocab.token_bytes(t)).is_err() {
                clear_bit(out, t);
            }
        }
        // Inside such a string: the tokens that leave its bounds before closing it.
        if let Some((count, bound)) = self.tracker.open_count() {
            if !bound.safe_for(count.n, vocab.max_token_len()) {
                vocab.trie().walk(count, &mut LengthWalk { bound, out });
            }
        }
        Ok(())
    }

    /// Clears the tokens that close a repeat of the open distinct item found by the trie, and
    /// adds to the candidates those that may repeat one otherwise.
    fn distinct_candidates(&mut self, out: &mut [u32]) {
        let vocab = &self.vocab;
        let quote = &vocab.holding(b'"').words;
        // Items from a list: the tokens that leave a dead prefix of the open item, and those
        // that may write a `,`: after it, the next item's prefix may be dead, or no value
        // left for it.
        for dead in self.tracker.dead_continuations(vocab.max_token_len()) {
            for &t in vocab.trie().starting_with(&dead) {
                clear_bit(out, t);
            }
        }
        if let Some((left, open)) = self.tracker.listed_left() {
            let comma = &vocab.holding(b',').words;
            self.read.clear();
            if open {
                self.read.extend(
                    out.iter()
                        .zip(comma.iter().zip(quote))
                        .map(|(o, (c, q))| o & c & q),
                );
            } else if left == 0 {
                self.read.extend(out.iter().zip(comma).map(|(o, c)| o & c));
            }
            self.candidates.extend(iter_ones(&self.read));
        }
        let in_distinct_array = self.tracker.in_distinct_array();
        let also: [&[u32]; 2] = match self.tracker.rests_of_open_item() {
            Some(rests) => {
                // A token closes the item at its first `"`. Written without an escape, the
                // item is then the prefix and the token's bytes before the quote, so the
                // tokens closing a repeat are those that start with the rest of a value
                // written and `"`. Other repeats need an escape before the closing quote,
                // or a second item closed in the token (three quotes).
                let rests: HashSet<&[u8]> = rests
                    .filter(|rest| {
                        rest.len() < vocab.max_token_len()
                            && !rest.contains(&b'"')
                            && !rest.contains(&b'\\')
                    })
                    .collect();
                if rests.len() <= MAX_TRIE_LOOKUPS {
                    for rest in rests {
                        let closing = [rest, b"\""].concat();
                        for &t in vocab.trie().starting_with(&closing) {
                            clear_bit(out, t);
                        }
                    }
                } else {
                    // Many values written: one look at each token that may close the item
                    // costs less than a trie lookup per value.
                    for (w, word) in out.iter_mut().enumerate() {
                        let mut closing = *word & quote[w];
                        while closing != 0 {
                            let bit = closing.trailing_zeros();
                            closing &= closing - 1;
                            let bytes = vocab.token_bytes(w as u32 * 32 + bit);
                            let before = bytes.split(|&b| b == b'"').next().unwrap_or_default();
                            if rests.contains(before) {
                                *word &= !(1 << bit);
                            }
                        }
                    }
                }
                [&vocab.holding(b'\\').words, vocab.holding_three_quotes()]
            }
            // Between items, or inside an escape: every token that may close one.
            None if in_distinct_array => [quote, quote],
            // Elsewhere a repeat needs a distinct array opened first.
            None => {
                let bracket = &vocab.holding(b'[').words;
                [bracket, bracket]
            }
        };
        let n = out.len();
        let (quote, also0, also1) = (&quote[..n], &also[0][..n], &also[1][..n]);
        self.read.clear();
        // A plain loop over slices of one length, which the compiler vectorizes.
        self.read.extend(
            out.iter()
                .zip(quote)
                .zip(also0.iter().zip(also1))
                .map(|((o, q), (a, b))| o & q & (a | b)),
        );
        self.candidates.extend(iter_ones(&self.read));
    }

    /// Consumes `token` on `inner` unless the state refuses it (see [`Self::fill_mask`]).
    pub fn consume(&mut self, inner: &mut dyn Matcher, token: TokenId) -> Result<(), MatchError> {
        if inner.is_terminated() || self.vocab.kind(token) != Some(TokenKind::Text) {
            inner.consume(token)?;
            self.tracker.step_without_text();
            return Ok(());
        }
        let vocab = self.vocab.clone();
        self.step(
            inner,
            vocab.token_bytes(token),
            |m| m.consume(token),
            |step, at_byte| MatchErrorKind::Rejected {
                token,
                step,
                at_byte,
            },
        )
    }

    /// Consumes text on `inner` unless the state refuses it.
    pub fn consume_bytes(
        &mut self,
        inner: &mut dyn Matcher,
        bytes: &[u8],
    ) -> Result<(), MatchError> {
        self.step(
            inner,
            bytes,
            |m| m.consume_bytes(bytes),
            |step, at_byte| MatchErrorKind::TextRejected { step, at_byte },
        )
    }

    /// Takes `bytes` as one step of `inner` (`take`) unless the state refuses them, refused
    /// then as `refused` says (from the step and the byte the state refuses). Before that
    /// refusal: the grammar's own if it has one (an earlier byte, a limit, termination),
    /// which leaves `inner` as it was; otherwise `inner` takes the step and gives it back
    /// (without a history to give it back, the state's refusal stands alone).
    fn step(
        &mut self,
        inner: &mut dyn Matcher,
        bytes: &[u8],
        take: impl Fn(&mut dyn Matcher) -> Result<(), MatchError>,
        refused: impl FnOnce(usize, usize) -> MatchErrorKind,
    ) -> Result<(), MatchError> {
        match self.tracker.check(bytes) {
            Ok(()) => {
                take(inner)?;
                self.tracker.commit(bytes);
                Ok(())
            }
            Err(repeat) => {
                if self.tracker.max_history() > 0 {
                    take(inner)?;
                    inner.rollback(1)?;
                }
                Err(MatchError::new(refused(
                    inner.num_consumed(),
                    repeat.at_byte,
                )))
            }
        }
    }

    /// Undoes `n` steps on `inner` and here.
    pub fn rollback(&mut self, inner: &mut dyn Matcher, n: usize) -> Result<(), MatchError> {
        inner.rollback(n)?;
        self.tracker.rollback(n);
        Ok(())
    }

    /// Back to the start.
    pub fn reset(&mut self) {
        self.tracker.reset();
    }
}
