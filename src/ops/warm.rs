//! Masks computed before any request asks for them (WGrammar's offline masks): every cursor
//! state a program can reach is explored breadth first, and its mask computed through the
//! ordinary path ([`Runtime::fill`]), on a scratch runtime. What that leaves in the scratch
//! cache — leaf parts and continuation parts, keyed as any request would key them — is then
//! pinned in the real cache, where no eviction reaches it.
//!
//! The engine warms the fixed stretches of its templates this way at registration (see
//! `template::warm`): their states do not depend on a request's arguments, so the first
//! request that reaches one finds its mask ready.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rustc_hash::FxHashSet;
use smallvec::SmallVec;

use super::leaf::SPECIAL_BASE;
use super::program::{Op, OpId, Program};
use super::runtime::Runtime;
use super::walker::{Threads, Walker};
use crate::ir::StructHasher;
use crate::limits::Deadline;

/// Most cursor states explored per program: a stretch of template is a few dozen states (the
/// shipped templates: 237 over 16 stretches, the largest 42); a long counted repetition is
/// not worth precomputing state by state.
pub(crate) const MAX_WARM_STATES: usize = 4096;

/// What warming precomputed (see [`Engine::template_warmth`](crate::Engine::template_warmth)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Warmth {
    /// Programs explored (for templates: their distinct fixed stretches).
    pub programs: usize,
    /// Cursor states whose masks were computed.
    pub states: usize,
    /// Cached masks pinned: leaf parts and continuation parts.
    pub masks: usize,
    /// Bytes the pinned masks hold (as the cache counts them).
    pub bytes: usize,
    /// False if the byte budget, the deadline, a mask's work limit or the state ceiling (4,096)
    /// stopped it before every reachable state was computed: those masks are computed on
    /// first use, as without warming.
    pub complete: bool,
    /// Wall-clock time it took.
    pub elapsed: Duration,
    /// Threads that shared the work.
    pub workers: usize,
}

/// Computes the masks of every state of `programs` on up to `workers` threads and pins them in
/// `runtime`'s cache, in place of those pinned before, within `budget_bytes` and `deadline`.
pub(crate) fn warm(
    runtime: &Runtime,
    programs: &[Program],
    budget_bytes: usize,
    workers: usize,
    deadline: &Deadline,
) -> Warmth {
    let started = Instant::now();
    // Never evicts: the budget is enforced by stopping, and again when pinning.
    let scratch = Runtime::with_limits(
        runtime.vocab.clone(),
        usize::MAX / 2,
        runtime.limits.clone(),
    );
    let workers = workers.clamp(1, programs.len().max(1));
    let next = AtomicUsize::new(0);
    let states = AtomicUsize::new(0);
    let complete = AtomicBool::new(true);
    let explore_all = |deadline: Deadline| loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(program) = programs.get(i) else {
            break;
        };
        if !complete.load(Ordering::Relaxed) {
            break;
        }
        let (explored, all) = explore(&scratch, program, budget_bytes, &deadline);
        states.fetch_add(explored, Ordering::Relaxed);
        if !all {
            complete.store(false, Ordering::Relaxed);
        }
    };
    if budget_bytes > 0 {
        std::thread::scope(|s| {
            for _ in 1..workers {
                let deadline = deadline.clone();
                s.spawn(|| explore_all(deadline));
            }
            explore_all(deadline.clone());
        });
    }
    let mut entries = scratch.cache.entries();
    // Which entries fit the budget must not depend on thread timing.
    entries.sort_unstable_by_key(|(key, _, _)| *key);
    let (mut kept, mut bytes) = (Vec::with_capacity(entries.len()), 0);
    for (key, value, weight) in entries {
        match bytes + weight <= budget_bytes {
            true => {
                bytes += weight;
                kept.push((key, value));
            }
            false => complete.store(false, Ordering::Relaxed),
        }
    }
    let masks = kept.len();
    let bytes = runtime.cache.pin(kept);
    Warmth {
        programs: programs.len(),
        states: states.into_inner(),
        masks,
        bytes,
        complete: complete.into_inner() && budget_bytes > 0,
        elapsed: started.elapsed(),
        workers,
    }
}

/// Breadth first over the cursor states of `program`, filling each one's mask into
/// `runtime`'s cache. Returns the states filled and whether that was all of them.
fn explore(
    runtime: &Runtime,
    program: &Program,
    budget_bytes: usize,
    deadline: &Deadline,
) -> (usize, bool) {
    let walker = Walker::new(program);
    let Ok(start) = walker.initial(&runtime.limits.budget()) else {
        return (0, false);
    };
    let units = alphabet(program);
    let mut seen: FxHashSet<u128> = FxHashSet::default();
    seen.insert(state_key(program, &start));
    let mut queue = VecDeque::from([start]);
    let mut mask = vec![0u32; runtime.vocab.mask_words()];
    let mut scratch = Threads::new();
    let (mut filled, mut all) = (0, true);
    while let Some(threads) = queue.pop_front() {
        if deadline.check().is_err() || runtime.cache.stats().bytes >= budget_bytes {
            return (filled, false);
        }
        // A state past the mask's work limit stays cold: a request reaching it meets the
        // same limit.
        all &= runtime
            .fill(&walker, &threads, &mut mask, &runtime.limits.budget())
            .is_ok();
        filled += 1;
        for &unit in &units {
            let mut next = threads.clone();
            let stepped = walker.step(&mut next, unit, &mut scratch, &runtime.limits.budget());
            if stepped != Ok(true) || !seen.insert(state_key(program, &next)) {
                continue;
            }
            match seen.len() <= MAX_WARM_STATES {
                true => queue.push_back(next),
                false => all = false,
            }
        }
    }
    (filled, all)
}

/// The units that can move `program`'s cursor: every byte, and the special tokens its leaves
/// name.
fn alphabet(program: &Program) -> Vec<u32> {
    let mut units: Vec<u32> = (0..SPECIAL_BASE).collect();
    for op in &program.ops {
        let Op::Leaf { leaf, .. } = op else { continue };
        let specials = (0..leaf.num_states() as u32).flat_map(|s| leaf.specials(s));
        units.extend(specials.map(|t| SPECIAL_BASE + t));
    }
    units.sort_unstable();
    units.dedup();
    units
}

/// A name for a cursor state that leaves out where in the input it is: two states with the
/// same name go on alike (the cursor compares positions only to tell whether a `DoWhile`
/// round has consumed anything yet).
fn state_key(program: &Program, threads: &Threads) -> u128 {
    let mut keys: SmallVec<[u128; 4]> = threads
        .iter()
        .map(|t| {
            let mut h = StructHasher::new(STATE_DOMAIN);
            for f in &t.frames {
                let state = match program.op(OpId(f.op)) {
                    Op::DoWhile { .. } => u64::from(f.state == t.pos),
                    _ => u64::from(f.state),
                };
                h.word(u64::from(f.op)).word(state).word(u64::from(f.count));
            }
            h.finish()
        })
        .collect();
    keys.sort_unstable();
    let mut h = StructHasher::new(STATE_DOMAIN);
    keys.iter().for_each(|&k| {
        h.hash(k);
    });
    h.finish()
}

const STATE_DOMAIN: u64 = 0x7761_726d;
