//! Recursion over nested input on any thread stack, and the deadline inside long loops.
//!
//! The front ends walk schemas, shapes, regex syntax trees and JSON values recursively, and
//! those nest as deeply as the input does (up to [`Limits::nesting`](crate::Limits), which a
//! server may raise). A server thread may have as little as 256 KiB of stack, less than a few
//! hundred levels of such a walk take. Each recursive step therefore goes through [`guarded`],
//! which runs it on a fresh heap-allocated stack segment when the current one is nearly used
//! up (the `stacker` crate, as rustc does for its own recursive passes). Depth stays bounded
//! by the limits; the guard only makes every bounded depth safe.

use crate::error::{CompileError, Location};
use crate::limits::{Deadline, LimitExceeded};

/// Stack a recursive step may need before its next guarded call. Generous: steps call into
/// the grammar builder, the regex translator and the allocator between guards.
const RED_ZONE: usize = 128 * 1024;

/// Size of each stack segment allocated when the red zone is reached.
const SEGMENT: usize = 2 * 1024 * 1024;

/// Runs `step` with at least [`RED_ZONE`] bytes of stack, on a new segment if needed.
#[inline]
pub(crate) fn guarded<R>(step: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, step)
}

/// One unit of front-end work against the compilation's deadline: a `Limit` error
/// ([`LimitKind::CompileTime`](crate::LimitKind)) once it has passed, placed by the caller.
#[inline]
pub(crate) fn tick(deadline: &Deadline) -> Result<(), CompileError> {
    deadline.tick().map_err(over_time)
}

/// The error of a deadline that passed.
pub(crate) fn over_time(exceeded: LimitExceeded) -> CompileError {
    CompileError::over_limit(exceeded, Location::None, "compilation")
}
