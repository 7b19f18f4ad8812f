//! A matcher that only answers masks, for testing and measuring what surrounds matchers (batch
//! filling, worker pools) without a grammar: the state decides the mask, every other step is a
//! no-op. Shared by `tests/gpu_fill.rs` and `benches/batch.rs` through `#[path]`.

use formwork::vocab::TokenId;
use formwork::{MatchError, Matcher};

/// What a [`MaskOnly`] matcher writes each step.
pub trait FillOnly: Send {
    fn fill(&mut self, out: &mut [u32]) -> Result<(), MatchError>;
}

/// `T`'s masks behind the full [`Matcher`] API (never accepting, never forcing).
pub struct MaskOnly<T>(pub T);

impl<T: FillOnly> Matcher for MaskOnly<T> {
    fn fill_mask(&mut self, out: &mut [u32]) -> Result<(), MatchError> {
        self.0.fill(out)
    }
    fn consume(&mut self, _: TokenId) -> Result<(), MatchError> {
        Ok(())
    }
    fn rollback(&mut self, _: usize) -> Result<(), MatchError> {
        Ok(())
    }
    fn is_accepting(&self) -> bool {
        false
    }
    fn is_terminated(&self) -> bool {
        false
    }
    fn forced_bytes(&self) -> Vec<u8> {
        Vec::new()
    }
    fn forced_tokens(&self) -> Vec<TokenId> {
        Vec::new()
    }
    fn num_consumed(&self) -> usize {
        0
    }
    fn reset(&mut self) {}
    fn consume_bytes(&mut self, _: &[u8]) -> Result<(), MatchError> {
        Ok(())
    }
}
