//! The CPU reference of the apply kernel: same rules ([`ApplyPlan::keep_bits`]), for engines
//! that sample on the CPU and for tests of everything the kernel does.

use half::{bf16, f16};

use super::plan::{ApplyConfig, ApplyError, ApplyPlan};

mod sealed {
    pub trait Sealed {}
    impl Sealed for f32 {}
    impl Sealed for half::f16 {}
    impl Sealed for half::bf16 {}
}

/// A logits element type: `f32`, [`half::f16`] or [`half::bf16`].
pub trait Logit: Copy + Send + Sync + 'static + sealed::Sealed {
    /// What a masked logit becomes.
    const NEG_INFINITY: Self;
}

impl Logit for f32 {
    const NEG_INFINITY: f32 = f32::NEG_INFINITY;
}

impl Logit for f16 {
    const NEG_INFINITY: f16 = f16::NEG_INFINITY;
}

impl Logit for bf16 {
    const NEG_INFINITY: bf16 = bf16::NEG_INFINITY;
}

/// Sets masked logits to `-inf` in place, by the rules of [`ApplyConfig`]. On error nothing is
/// written.
///
/// # Example
///
/// ```
/// use formwork::gpu::{apply_bitmask, ApplyConfig};
/// use half::bf16;
///
/// let mut logits = vec![bf16::from_f32(1.0); 3];
/// apply_bitmask(&mut logits, &[0b101], &ApplyConfig::new(3, 1)).unwrap();
/// assert_eq!(logits, [bf16::from_f32(1.0), bf16::NEG_INFINITY, bf16::from_f32(1.0)]);
/// ```
pub fn apply_bitmask<T: Logit>(
    logits: &mut [T],
    bitmask: &[u32],
    config: &ApplyConfig<'_>,
) -> Result<(), ApplyError> {
    let plan = config.plan(logits.len(), bitmask.len())?;
    for i in 0..plan.touched() {
        let r = plan.row(i);
        let row = &mut logits[r * plan.row_len()..][..plan.row_len()];
        let mask_row = &bitmask[r * plan.row_words()..][..plan.row_words()];
        apply_row(&plan, row, mask_row);
    }
    Ok(())
}

fn apply_row<T: Logit>(plan: &ApplyPlan<'_>, row: &mut [T], mask_row: &[u32]) {
    // Words wholly inside the vocabulary keep exactly their mask bits, so they are read
    // straight from the mask; the rest (the word the vocabulary ends in, columns past it) go
    // through `keep_bits`.
    let inside = (plan.vocab_size() / 32).min(row.len() / 32);
    let (body, tail) = row.split_at_mut(inside * 32);
    for (chunk, &keep) in body.chunks_exact_mut(32).zip(mask_row) {
        mask_chunk(chunk, keep);
    }
    for (w, chunk) in tail.chunks_mut(32).enumerate() {
        mask_chunk(chunk, plan.keep_bits(mask_row, inside + w));
    }
}

/// Masks up to 32 logits: bit `j` of `keep` clear sets `chunk[j]` to `-inf`.
#[inline]
fn mask_chunk<T: Logit>(chunk: &mut [T], keep: u32) {
    // Most words of a constrained step are all-masked and stored without reading, and mixed
    // words take a select per element rather than a branch (it vectorizes).
    match keep {
        u32::MAX => {}
        0 => chunk.fill(T::NEG_INFINITY),
        _ => {
            for (j, x) in chunk.iter_mut().enumerate() {
                *x = if keep >> j & 1 != 0 {
                    *x
                } else {
                    T::NEG_INFINITY
                };
            }
        }
    }
}
