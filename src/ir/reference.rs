//! The oracle every backend is tested against, bit for bit: the [plain Earley
//! recognizer](super::recognizer) stepped token by token, and the exact mask after a chart,
//! token by token through the vocabulary's trie. Compiled for formwork's own tests (feature
//! `internals`), never called by production code.

use super::recognizer::{Chart, Recognizer, Terminal};
use crate::base::token::TokenId;
use crate::mask::TokenMask;
use crate::vocab::{Subtree, TokenKind, TrieStep, TrieVisitor, Vocab};

impl Chart {
    /// Pushes every unit of a token; false (chart unchanged) if some byte is rejected.
    pub fn push_token(&mut self, rec: &Recognizer, vocab: &Vocab, token: TokenId) -> bool {
        let units = token_units(vocab, token);
        for (i, u) in units.iter().enumerate() {
            if !self.push(rec, *u) {
                (0..i).for_each(|_| self.pop());
                return false;
            }
        }
        !units.is_empty()
    }

    /// The exact mask after the units consumed so far, token by token through the trie (text)
    /// and one by one (specials); EOS iff accepting.
    pub fn mask(&self, rec: &Recognizer, vocab: &Vocab) -> TokenMask {
        let mut mask = TokenMask::new(vocab.mask_width());
        struct Walk<'a> {
            rec: &'a Recognizer,
            chart: Chart,
            depth: usize,
            mask: &'a mut TokenMask,
        }
        impl TrieVisitor for Walk<'_> {
            type State = ();
            fn step(&mut self, _: &(), byte: u8, depth: usize, _: Subtree) -> TrieStep<()> {
                while self.depth >= depth {
                    self.chart.pop();
                    self.depth -= 1;
                }
                if self.chart.push(self.rec, Terminal::Byte(byte)) {
                    self.depth += 1;
                    TrieStep::Enter(())
                } else {
                    TrieStep::Skip
                }
            }
            fn tokens(&mut self, _: &(), tokens: &[TokenId]) {
                tokens.iter().for_each(|&t| self.mask.insert(t));
            }
        }
        let mut walk = Walk {
            rec,
            chart: self.clone(),
            depth: 0,
            mask: &mut mask,
        };
        vocab.trie().walk((), &mut walk);
        let mut chart = walk.chart;
        (0..walk.depth).for_each(|_| chart.pop());
        for (content, id) in vocab.specials() {
            if chart.push(rec, Terminal::Special(content)) {
                mask.insert(id);
                chart.pop();
            }
        }
        if self.is_accepting(rec) {
            vocab.eos_tokens().iter().for_each(|&t| mask.insert(t));
        }
        mask
    }
}

/// The units of a token: its bytes, or the special symbol.
pub fn token_units(vocab: &Vocab, token: TokenId) -> Vec<Terminal<'_>> {
    match vocab.kind(token) {
        Some(TokenKind::Text) => vocab
            .token_bytes(token)
            .iter()
            .map(|&b| Terminal::Byte(b))
            .collect(),
        Some(TokenKind::Special) => {
            vec![Terminal::Special(
                std::str::from_utf8(vocab.token_bytes(token)).unwrap_or(""),
            )]
        }
        _ => vec![],
    }
}
