//! Arrays whose items must be distinct strings (`uniqueItems` over items of infinitely many
//! values): a state beside the grammar's, decided at mask time.
//!
//! A context-free grammar cannot say "no string twice", but the tokens that can break the rule
//! are few and easy to find: a repeat happens only when an item's closing quote is written.
//! Items that admit infinitely many strings from every prefix (free strings: their automaton
//! reaches a loop from every state, see `front::json_schema::distinct`) can always be
//! completed to a new one, so an output is a prefix of a valid one
//! iff the grammar accepts it as a prefix and no item closed so far repeats one of its array.
//! The mask is therefore the grammar's mask less the tokens that close an item (hold `"`)
//! equal to an earlier one; [`DistinctPaths`] says where such arrays are, and the tracker
//! keeps their strings, restored on rollback.

mod paths;
mod tracker;

use std::sync::Arc;

pub(crate) use paths::{DistinctPaths, PathNode, PathState, UNTRACKED};
use tracker::DistinctTracker;

use super::{MatchError, MatchErrorKind, Matcher};
use crate::base::bitmask::{clear_bit, iter_ones};
use crate::base::token::TokenId;
use crate::vocab::{TokenKind, Vocab};

/// The distinct-items state of one matcher, applied around the grammar's matcher.
#[derive(Clone, Debug)]
pub(crate) struct DistinctItems {
    tracker: DistinctTracker,
    vocab: Vocab,
    /// Mask words of the tokens a mask reads one by one (reused).
    read: Vec<u32>,
}

impl DistinctItems {
    /// At the start of the document, keeping `history` steps for rollback (the grammar
    /// matcher's limit).
    pub fn new(paths: Arc<DistinctPaths>, vocab: Vocab, history: usize) -> DistinctItems {
        DistinctItems {
            tracker: DistinctTracker::new(paths, history),
            vocab,
            read: Vec::new(),
        }
    }

    /// `inner`'s mask less the tokens that would repeat an item.
    pub fn fill_mask(
        &mut self,
        inner: &mut dyn Matcher,
        out: &mut [u32],
    ) -> Result<(), MatchError> {
        inner.fill_mask(out)?;
        if inner.is_terminated() {
            return Ok(());
        }
        let vocab = &self.vocab;
        let quote = &vocab.holding(b'"').words;
        // The tokens read one by one: those the cases below do not settle.
        let also: [&[u32]; 2] = match self.tracker.open_item() {
            Some((first, prefix)) => {
                // A token closes the item at its first `"`. Written without an escape, the
                // item is then the prefix and the token's bytes before the quote, so the
                // tokens closing a repeat are those that start with the rest of a value
                // written and `"`. Other repeats need an escape before the closing quote,
                // or a second item closed in the token (three quotes).
                for value in self.tracker.written(first) {
                    let Some(rest) = value.strip_prefix(prefix.as_slice()) else {
                        continue;
                    };
                    if rest.contains(&b'"') || rest.contains(&b'\\') {
                        continue;
                    }
                    let closing = [rest, b"\""].concat();
                    for &t in vocab.trie().starting_with(&closing) {
                        clear_bit(out, t);
                    }
                }
                [&vocab.holding(b'\\').words, vocab.holding_three_quotes()]
            }
            // Between items, or inside an escape: every token that may close one.
            None if self.tracker.in_distinct_array() => [quote, quote],
            // Elsewhere a repeat needs a distinct array opened first.
            None => {
                let bracket = &vocab.holding(b'[').words;
                [bracket, bracket]
            }
        };
        self.read.clear();
        self.read
            .extend((0..out.len()).map(|w| out[w] & quote[w] & (also[0][w] | also[1][w])));
        for t in iter_ones(&self.read) {
            if self.tracker.check(vocab.token_bytes(t)).is_err() {
                clear_bit(out, t);
            }
        }
        Ok(())
    }

    /// Consumes `token` on `inner` unless it repeats an item.
    pub fn consume(&mut self, inner: &mut dyn Matcher, token: TokenId) -> Result<(), MatchError> {
        if inner.is_terminated() || self.vocab.kind(token) != Some(TokenKind::Text) {
            inner.consume(token)?;
            self.tracker.step_without_text();
            return Ok(());
        }
        let bytes = self.vocab.token_bytes(token);
        if let Err(repeat) = self.tracker.check(bytes) {
            return Err(MatchError::new(MatchErrorKind::Rejected {
                token,
                step: inner.num_consumed(),
                at_byte: repeat.at_byte,
            }));
        }
        inner.consume(token)?;
        self.tracker.commit(bytes);
        Ok(())
    }

    /// Consumes text on `inner` unless it repeats an item.
    pub fn consume_bytes(
        &mut self,
        inner: &mut dyn Matcher,
        bytes: &[u8],
    ) -> Result<(), MatchError> {
        if let Err(repeat) = self.tracker.check(bytes) {
            // A terminated matcher refuses any text, with its own error.
            if !inner.is_terminated() {
                return Err(MatchError::new(MatchErrorKind::TextRejected {
                    step: inner.num_consumed(),
                    at_byte: repeat.at_byte,
                }));
            }
        }
        inner.consume_bytes(bytes)?;
        self.tracker.commit(bytes);
        Ok(())
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
