//! Running a check on the smallest stack a server worker thread may have.

/// Stack size of the threads the hostile-input checks run on.
pub const SMALL_STACK: usize = 256 << 10;

/// Runs `f` on a fresh thread with a [`SMALL_STACK`] stack and returns its result (a stack
/// overflow aborts the test process).
pub fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::Builder::new()
        .stack_size(SMALL_STACK)
        .spawn(f)
        .expect("spawn a thread")
        .join()
        .expect("the check does not panic")
}
