//! Running a check on the smallest stack a server worker thread may have.

/// Stack size of the threads the hostile-input checks run on.
pub const SMALL_STACK: usize = 256 << 10;

/// Runs `f` on a fresh thread with a [`SMALL_STACK`] stack and returns its result. `f` may
/// borrow from the caller (the thread is scoped); a panic in it is the caller's panic, and a
/// stack overflow aborts the test process: the failure these checks exist to catch.
pub fn on_small_stack<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(SMALL_STACK)
            .spawn_scoped(s, f)
            .expect("spawn a thread")
            .join()
            .unwrap_or_else(|p| std::panic::resume_unwind(p))
    })
}
