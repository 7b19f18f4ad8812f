//! Getting masks to the logits every decoding step: batched mask filling on CPU threads
//! overlapped with the forward pass, and applying a batch of bitmasks to logits (CPU reference
//! here, CUDA kernel behind the `cuda` feature).
//!
//! A step of an inference engine with a batch of constrained requests:
//!
//! ```
//! use formwork::gpu::{apply_bitmask, ApplyConfig, BatchFiller, FillConfig};
//! # use formwork::{Matcher, MatchError};
//! # struct Digits; // allows tokens 0..10 only
//! # impl Matcher for Digits {
//! #     fn fill_mask(&mut self, out: &mut [u32]) -> Result<(), MatchError> {
//! #         out.fill(0); out[0] = 0x3ff; Ok(())
//! #     }
//! #     fn consume(&mut self, _: u32) -> Result<(), MatchError> { Ok(()) }
//! #     fn rollback(&mut self, _: usize) -> Result<(), MatchError> { Ok(()) }
//! #     fn is_accepting(&self) -> bool { false }
//! #     fn is_terminated(&self) -> bool { false }
//! #     fn forced_bytes(&self) -> Vec<u8> { vec![] }
//! #     fn forced_tokens(&self) -> Vec<u32> { vec![] }
//! #     fn num_consumed(&self) -> usize { 0 }
//! #     fn reset(&mut self) {}
//! #     fn consume_bytes(&mut self, _: &[u8]) -> Result<(), MatchError> { Ok(()) }
//! # }
//! let (vocab, words) = (100, 4);
//! let mut matchers = vec![Digits, Digits];
//! let mut filler = BatchFiller::new(FillConfig::new().threads(1));
//! let mut masks = vec![0u32; matchers.len() * words];
//! // Masks are filled on the worker threads while this thread runs the forward pass.
//! let (mut logits, filled) =
//!     filler.fill_during(&mut matchers, &mut masks, || vec![0.5f32; 2 * vocab]);
//! filled.unwrap();
//! apply_bitmask(&mut logits, &masks, &ApplyConfig::new(vocab, words)).unwrap();
//! assert_eq!(logits.iter().filter(|x| x.is_finite()).count(), 2 * 10);
//! ```

mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
mod fill;
mod plan;

pub use cpu::{apply_bitmask, Logit};
pub use fill::{BatchFiller, FillConfig, FillError};
pub use plan::{ApplyConfig, ApplyError, ApplyPlan};
