//! The process allocator of the programs this package builds (the CLI, the benches, the
//! Python extension): mimalloc, behind the default feature `mimalloc`. A program that links
//! the library chooses its own allocator.

use libmimalloc_sys::{mi_option_get, mi_option_set, mi_option_t};

/// mimalloc's `mi_option_purge_delay` (`mi_option_e` in mimalloc 3's `mimalloc.h`;
/// libmimalloc-sys names only the first few options). Its default, 1,000 ms, is checked by a
/// test, so a version that renumbers the options fails there rather than setting another one.
const PURGE_DELAY: mi_option_t = 15;

/// Keeps the memory mimalloc frees for reuse instead of returning it to the system, unless
/// the environment sets `MIMALLOC_PURGE_DELAY`. mimalloc purges a second after a free, in
/// whatever allocation comes due: an `madvise` of megabytes and the page faults that refill
/// them, inside the mask that happened to allocate. Over MaskBench (thread CPU, one core) it
/// made the slowest masks 9–17 ms, masks that take under 1 ms alone; without purging, none
/// is over 5 ms, for a peak RSS 7% higher (the mask caches are bounded anyway). Call it
/// first thing in `main`.
///
/// ```
/// formwork::allocator::keep_freed_memory();
/// ```
pub fn keep_freed_memory() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: mimalloc's options are plain integers it reads when it purges; setting one
        // is its documented way of configuring a process.
        unsafe { mi_option_set(PURGE_DELAY, -1) };
    }
}

/// The purge delay in force, in milliseconds (-1: never).
pub fn purge_delay_ms() -> i64 {
    // SAFETY: reading an option has no precondition.
    unsafe { mi_option_get(PURGE_DELAY) as i64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_option_set_is_the_purge_delay() {
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_some() {
            return;
        }
        assert_eq!(purge_delay_ms(), 1_000, "mimalloc's default purge delay");
        keep_freed_memory();
        assert_eq!(purge_delay_ms(), -1);
    }
}
