//! Filling a batch of masks on CPU threads, overlapped with the forward pass (XGrammar §3.5).
//!
//! The workers are persistent: waking a parked thread costs less than spawning one per step
//! (see `benches/batch.rs`, which measures both). Rows are claimed one at a time from an atomic
//! counter, so a slow matcher (an Earley step) does not hold up a chunk of cheap ones, and each
//! row is written by exactly one thread. A step allocates nothing.

use std::any::Any;
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::{self, JoinHandle};

use crate::matcher::{MatchError, Matcher};

/// Why a batch fill failed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FillError {
    /// The output is not one row per matcher.
    Shape {
        /// Words given.
        len: usize,
        /// Matchers given.
        rows: usize,
    },
    /// A matcher's `fill_mask` failed (the lowest such row is reported). Every failed row is
    /// left all zero (nothing allowed); the other rows are filled.
    Matcher {
        /// The row (index into the matchers).
        row: usize,
        /// The matcher's error.
        error: MatchError,
    },
}

impl fmt::Display for FillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FillError::Shape { len, rows } => {
                write!(
                    f,
                    "{len} mask words are not one whole row for each of {rows} matchers"
                )
            }
            FillError::Matcher { row, error } => write!(f, "matcher of row {row}: {error}"),
        }
    }
}

/// A matcher's failure has the [`MatchError`] as its source.
impl std::error::Error for FillError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FillError::Matcher { error, .. } => Some(error),
            FillError::Shape { .. } => None,
        }
    }
}

/// Options of a [`BatchFiller`].
#[derive(Clone, Debug)]
pub struct FillConfig {
    threads: usize,
}

impl Default for FillConfig {
    fn default() -> FillConfig {
        FillConfig::new()
    }
}

impl FillConfig {
    /// One worker per core but one (the calling thread is busy with the forward pass, then
    /// helps), at least one.
    pub fn new() -> FillConfig {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        FillConfig {
            threads: cores.saturating_sub(1).max(1),
        }
    }

    /// Number of worker threads. With 0 the calling thread fills every row itself, after the
    /// forward pass in [`BatchFiller::fill_during`].
    pub fn threads(mut self, threads: usize) -> FillConfig {
        self.threads = threads;
        self
    }
}

/// A pool of worker threads that fill a batch's masks, row `i` from matcher `i`.
///
/// # Example
///
/// ```
/// use formwork::gpu::{BatchFiller, FillConfig};
/// # use formwork::{Matcher, MatchError};
/// # struct Only(u32);
/// # impl Matcher for Only {
/// #     fn fill_mask(&mut self, out: &mut [u32]) -> Result<(), MatchError> {
/// #         out.fill(0); out[self.0 as usize / 32] = 1 << (self.0 % 32); Ok(())
/// #     }
/// #     fn consume(&mut self, _: u32) -> Result<(), MatchError> { Ok(()) }
/// #     fn rollback(&mut self, _: usize) -> Result<(), MatchError> { Ok(()) }
/// #     fn is_accepting(&self) -> bool { false }
/// #     fn is_terminated(&self) -> bool { false }
/// #     fn forced_bytes(&self) -> Vec<u8> { vec![] }
/// #     fn forced_tokens(&self) -> Vec<u32> { vec![] }
/// #     fn num_consumed(&self) -> usize { 0 }
/// #     fn reset(&mut self) {}
/// #     fn consume_bytes(&mut self, _: &[u8]) -> Result<(), MatchError> { Ok(()) }
/// # }
///
/// let mut filler = BatchFiller::new(FillConfig::new().threads(2));
/// let (mut a, mut b) = (Only(3), Only(40));
/// // Mixed backends: a slice of `&mut dyn Matcher`.
/// let mut batch: Vec<&mut dyn Matcher> = vec![&mut a, &mut b];
/// let mut masks = vec![0u32; 2 * 2];
/// filler.fill(&mut batch, &mut masks).unwrap();
/// assert_eq!(masks, [1 << 3, 0, 0, 1 << 8]);
/// ```
pub struct BatchFiller {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
}

impl fmt::Debug for BatchFiller {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchFiller")
            .field("threads", &self.workers.len())
            .finish()
    }
}

impl BatchFiller {
    /// Starts the worker threads; they sleep between steps.
    ///
    /// # Panics
    ///
    /// If the operating system refuses to start a thread: the count is the server's
    /// configuration, started once, never a request's ([`BatchFiller::try_new`] returns the
    /// error instead).
    pub fn new(config: FillConfig) -> BatchFiller {
        BatchFiller::try_new(config).expect("spawning a mask-filling thread")
    }

    /// [`BatchFiller::new`], or the error of the first thread the operating system refused
    /// to start, the threads started before it stopped and joined: left asleep, they would
    /// hold the process's threads, and a count past what it allows (a binding's argument)
    /// left it unable to start any.
    pub fn try_new(config: FillConfig) -> std::io::Result<BatchFiller> {
        let shared = Arc::new(Shared {
            slot: Mutex::new(Slot {
                job: None,
                epoch: 0,
                active: 0,
                shutdown: false,
            }),
            wake: Condvar::new(),
            idle: Condvar::new(),
        });
        // Dropped on an error, which stops and joins the workers it holds.
        let mut filler = BatchFiller {
            shared,
            workers: Vec::new(),
        };
        for i in 0..config.threads {
            let shared = Arc::clone(&filler.shared);
            let worker = thread::Builder::new()
                .name(format!("formwork-fill-{i}"))
                .spawn(move || shared.serve())?;
            filler.workers.push(worker);
        }
        Ok(filler)
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.workers.len()
    }

    /// Fills row `i` of `out` (`matchers.len()` rows of equal width, row-major) from
    /// `matchers[i]`, on the workers and this thread.
    pub fn fill<M: Matcher>(
        &mut self,
        matchers: &mut [M],
        out: &mut [u32],
    ) -> Result<(), FillError> {
        // A single row is filled here: waking a worker would cost more than the row.
        self.run(matchers, out, 2, || ()).1
    }

    /// Starts filling the masks on the workers, runs `during` (the forward pass) on this
    /// thread, then helps fill what is left and waits for the workers: every row is written
    /// when this returns. Returns what `during` returned and how the fill went.
    ///
    /// The matchers and the buffer stay borrowed for the whole call, which is what makes
    /// handing them to other threads sound; a begin/wait pair of methods could not guarantee
    /// the wait (a handle can be leaked), the reason `std::thread::scope` takes a closure too.
    /// A panic in `during` or in a matcher is propagated after the workers have let go.
    pub fn fill_during<M: Matcher, R>(
        &mut self,
        matchers: &mut [M],
        out: &mut [u32],
        during: impl FnOnce() -> R,
    ) -> (R, Result<(), FillError>) {
        self.run(matchers, out, 1, during)
    }

    /// Fills the rows, waking the workers if there are at least `share_from` of them.
    fn run<M: Matcher, R>(
        &mut self,
        matchers: &mut [M],
        out: &mut [u32],
        share_from: usize,
        during: impl FnOnce() -> R,
    ) -> (R, Result<(), FillError>) {
        let rows = matchers.len();
        let words = match (rows, out.len()) {
            (0, 0) => 0,
            (0, len) => return (during(), Err(FillError::Shape { len, rows })),
            (_, len) if len % rows == 0 => len / rows,
            (_, len) => return (during(), Err(FillError::Shape { len, rows })),
        };
        let batch = Batch {
            matchers: matchers.as_mut_ptr(),
            out: out.as_mut_ptr(),
            rows,
            words,
            next: AtomicUsize::new(0),
            failure: Mutex::new(None),
            panic: Mutex::new(None),
        };
        let result = {
            // Declared after `batch`, so dropped before it even when `during` unwinds: the
            // workers have let go of the batch before it is gone.
            let _retire = (rows >= share_from && !self.workers.is_empty())
                .then(|| self.shared.publish(Job::new(&batch)));
            let r = during();
            // SAFETY: `batch` points into `matchers` and `out`, borrowed mutably for this call.
            unsafe { fill_rows::<M>(&batch as *const Batch<M> as *const ()) };
            r
        };
        if let Some(payload) = lock(&batch.panic).take() {
            panic::resume_unwind(payload);
        }
        let failed = lock(&batch.failure).take();
        (
            result,
            failed.map_or(Ok(()), |(row, error)| {
                Err(FillError::Matcher { row, error })
            }),
        )
    }
}

impl Drop for BatchFiller {
    fn drop(&mut self) {
        lock(&self.shared.slot).shutdown = true;
        self.shared.wake.notify_all();
        for w in self.workers.drain(..) {
            // A worker never panics (fill_rows catches matcher panics), so join cannot fail.
            let _ = w.join();
        }
    }
}

/// One step's work, shared by reference with the workers for the duration of a fill.
struct Batch<M> {
    matchers: *mut M,
    out: *mut u32,
    rows: usize,
    words: usize,
    next: AtomicUsize,
    failure: Mutex<Option<(usize, MatchError)>>,
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

/// A type-erased `&Batch<M>` with the filling loop for that `M`.
#[derive(Clone, Copy)]
struct Job {
    batch: *const (),
    run: unsafe fn(*const ()),
}

// SAFETY: a Job is only run while the `fill_during` call that published it waits for it, and
// each matcher it reaches (M: Send) is used by the one thread that claimed its row.
unsafe impl Send for Job {}

impl Job {
    fn new<M: Matcher>(batch: &Batch<M>) -> Job {
        Job {
            batch: batch as *const Batch<M> as *const (),
            run: fill_rows::<M>,
        }
    }
}

/// Claims rows until none is left and fills them.
///
/// # Safety
///
/// `batch` is a live `Batch<M>` whose pointers are valid for `rows` matchers and
/// `rows × words` words, not otherwise accessed until every thread running this has returned.
unsafe fn fill_rows<M: Matcher>(batch: *const ()) {
    let batch = unsafe { &*(batch as *const Batch<M>) };
    let claimed = panic::catch_unwind(AssertUnwindSafe(|| loop {
        let i = batch.next.fetch_add(1, Ordering::Relaxed);
        if i >= batch.rows {
            break;
        }
        // SAFETY: row i was claimed by this thread alone.
        let (matcher, row) = unsafe {
            (
                &mut *batch.matchers.add(i),
                std::slice::from_raw_parts_mut(batch.out.add(i * batch.words), batch.words),
            )
        };
        if let Err(error) = matcher.fill_mask(row) {
            row.fill(0);
            let mut failure = lock(&batch.failure);
            if failure.as_ref().is_none_or(|&(r, _)| i < r) {
                *failure = Some((i, error));
            }
        }
    }));
    if let Err(payload) = claimed {
        lock(&batch.panic).get_or_insert(payload);
    }
}

struct Shared {
    slot: Mutex<Slot>,
    wake: Condvar,
    idle: Condvar,
}

struct Slot {
    job: Option<Job>,
    epoch: u64,
    /// Workers inside the current job.
    active: usize,
    shutdown: bool,
}

impl Shared {
    fn serve(&self) {
        let mut seen = 0;
        let mut slot = lock(&self.slot);
        loop {
            if slot.shutdown {
                return;
            }
            match slot.job {
                Some(job) if slot.epoch != seen => {
                    seen = slot.epoch;
                    slot.active += 1;
                    drop(slot);
                    // SAFETY: the job is live until it is retired, which waits for `active`
                    // to drop back to 0.
                    unsafe { (job.run)(job.batch) };
                    slot = lock(&self.slot);
                    slot.active -= 1;
                    if slot.active == 0 {
                        self.idle.notify_all();
                    }
                }
                _ => slot = self.wake.wait(slot).unwrap_or_else(PoisonError::into_inner),
            }
        }
    }

    fn publish(&self, job: Job) -> Retire<'_> {
        let mut slot = lock(&self.slot);
        slot.job = Some(job);
        slot.epoch += 1;
        drop(slot);
        self.wake.notify_all();
        Retire(self)
    }
}

/// Withdraws the published job when dropped, then waits until no worker is inside it. Workers
/// that wake later find no job and go back to sleep, so the caller never waits for a wake-up.
struct Retire<'a>(&'a Shared);

impl Drop for Retire<'_> {
    fn drop(&mut self) {
        let mut slot = lock(&self.0.slot);
        slot.job = None;
        while slot.active > 0 {
            slot = self
                .0
                .idle
                .wait(slot)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// No code panics while holding these locks; a poisoned lock still holds consistent data.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
