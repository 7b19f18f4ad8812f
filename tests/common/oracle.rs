//! A `Matcher` over the reference recognizer (`ir::reference`), for tests that need real
//! matchers of several constraints before the backends exist: slow, and exact by construction.

use std::sync::Arc;

use formwork::front::regex::regex_to_ir;
use formwork::ir::reference::{token_units, Chart, Recognizer, Unit};
use formwork::ir::GrammarBuilder;
use formwork::vocab::{TokenId, Vocab};
use formwork::{MatchError, MatchErrorKind, Matcher};

/// The reference recognizer of a whole-text regex.
pub fn regex_recognizer(pattern: &str) -> Arc<Recognizer> {
    let mut g = GrammarBuilder::new();
    let e = regex_to_ir(pattern, &mut g).expect("test regex compiles");
    let start = g.rule("start");
    g.define(start, e).unwrap();
    Arc::new(Recognizer::new(&g.finish(start).unwrap()))
}

/// A matcher that answers every question with the reference chart.
#[derive(Clone)]
pub struct OracleMatcher {
    rec: Arc<Recognizer>,
    vocab: &'static Vocab,
    chart: Chart,
    /// Units pushed per consumed token (EOS pushes none).
    history: Vec<usize>,
    terminated: bool,
}

impl OracleMatcher {
    pub fn new(rec: Arc<Recognizer>, vocab: &'static Vocab) -> OracleMatcher {
        let chart = rec.start();
        OracleMatcher {
            rec,
            vocab,
            chart,
            history: Vec::new(),
            terminated: false,
        }
    }

    fn rejected(&self, token: TokenId) -> MatchError {
        MatchError::new(MatchErrorKind::Rejected {
            token,
            step: self.history.len(),
            at_byte: 0,
        })
    }
}

impl Matcher for OracleMatcher {
    fn fill_mask(&mut self, out: &mut [u32]) -> Result<(), MatchError> {
        let expected = self.vocab.mask_words();
        if out.len() != expected {
            return Err(MatchError::new(MatchErrorKind::MaskSize {
                expected,
                got: out.len(),
            }));
        }
        if self.terminated {
            out.fill(0);
            self.vocab
                .eos_tokens()
                .iter()
                .for_each(|&t| formwork::mask::set_bit(out, t));
        } else {
            out.copy_from_slice(self.chart.mask(&self.rec, self.vocab).words());
        }
        Ok(())
    }

    fn consume(&mut self, token: TokenId) -> Result<(), MatchError> {
        let mask_width = self.vocab.mask_width();
        if token as usize >= mask_width {
            return Err(MatchError::new(MatchErrorKind::UnknownToken {
                token,
                mask_width,
            }));
        }
        if self.terminated {
            return Err(MatchError::new(MatchErrorKind::Terminated));
        }
        if self.vocab.is_eos(token) {
            if !self.chart.is_accepting(&self.rec) {
                return Err(self.rejected(token));
            }
            self.terminated = true;
            self.history.push(0);
            return Ok(());
        }
        if !self.chart.push_token(&self.rec, self.vocab, token) {
            return Err(self.rejected(token));
        }
        self.history.push(token_units(self.vocab, token).len());
        Ok(())
    }

    fn rollback(&mut self, n: usize) -> Result<(), MatchError> {
        if n > self.history.len() {
            let available = self.history.len();
            return Err(MatchError::new(MatchErrorKind::RollbackTooFar {
                requested: n,
                available,
            }));
        }
        for _ in 0..n {
            let units = self.history.pop().unwrap();
            if self.terminated {
                self.terminated = false;
            } else {
                (0..units).for_each(|_| self.chart.pop());
            }
        }
        Ok(())
    }

    fn is_accepting(&self) -> bool {
        !self.terminated && self.chart.is_accepting(&self.rec)
    }

    fn is_terminated(&self) -> bool {
        self.terminated
    }

    fn forced_bytes(&self) -> Vec<u8> {
        let mut chart = self.chart.clone();
        let mut forced = Vec::new();
        while !self.terminated && !chart.is_accepting(&self.rec) {
            let special = self.vocab.specials().any(|(s, _)| {
                let ok = chart.push(&self.rec, Unit::Special(s));
                if ok {
                    chart.pop();
                }
                ok
            });
            let mut next = (0..=255u8).filter(|&b| {
                let ok = chart.push(&self.rec, Unit::Byte(b));
                if ok {
                    chart.pop();
                }
                ok
            });
            match (special, next.next(), next.next()) {
                (false, Some(b), None) => {
                    chart.push(&self.rec, Unit::Byte(b));
                    forced.push(b);
                }
                _ => break,
            }
        }
        forced
    }

    /// Jump-forward is not what these tests exercise; offering no token is always allowed.
    fn forced_tokens(&self) -> Vec<TokenId> {
        Vec::new()
    }

    fn num_consumed(&self) -> usize {
        self.history.len()
    }

    fn reset(&mut self) {
        self.chart = self.rec.start();
        self.history.clear();
        self.terminated = false;
    }
}
