//! Batch filling: the parallel fill and the overlapped fill write, bit for bit, what each
//! matcher writes alone, over a mixed batch of 64 operator matchers on Qwen3 through
//! several decoding steps; every row is written once per step by its own matcher; failures,
//! bad shapes and panics are reported without losing the pool.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::rng::Rng;
use formwork::gpu::{BatchFiller, FillConfig, FillError};
use formwork::mask::iter_ones;
use formwork::ops::{OpsMatcher, RegexCompiler, Runtime};
use formwork::vocab::TokenId;
use formwork::{MatchError, MatchErrorKind, Matcher};

const PATTERNS: [&str; 8] = [
    r"[0-9]{1,6}",
    r"(yes|no|maybe)",
    r"[a-z]{2,8}@example\.(com|org)",
    r#"\{"id": [0-9]{1,4}, "ok": (true|false)\}"#,
    r"[A-Z][a-z]+( [A-Z][a-z]+){0,2}",
    r"-?(0|[1-9][0-9]*)(\.[0-9]{1,3})?",
    r"(ab|cd)*e",
    r"[\u{4e00}-\u{4e0f}]{1,3}!",
];

/// 64 matchers over 8 constraints, each a few tokens into its output (a different number per
/// row), so the batch holds many different states.
fn mixed_batch(rng: &mut Rng) -> Vec<OpsMatcher> {
    let runtime = Runtime::new(common::qwen3().clone(), 256 << 20);
    let compiler = RegexCompiler::new();
    let programs: Vec<_> = PATTERNS
        .iter()
        .map(|p| compiler.compile(p).unwrap())
        .collect();
    (0..64)
        .map(|i| {
            let mut m = OpsMatcher::new(runtime.clone(), programs[i % programs.len()].clone());
            for _ in 0..(i / 8) % 4 {
                step(&mut m, rng);
            }
            m
        })
        .collect()
}

/// A pseudo-random allowed token (EOS included), unless the matcher has terminated.
fn pick(m: &mut OpsMatcher, rng: &mut Rng) -> Option<TokenId> {
    if m.is_terminated() {
        return None;
    }
    let mut mask = vec![0; common::qwen3().mask_words()];
    m.fill_mask(&mut mask).unwrap();
    let allowed: Vec<TokenId> = iter_ones(&mask).collect();
    assert!(!allowed.is_empty(), "a live matcher allows some token");
    Some(allowed[rng.below(allowed.len())])
}

fn step(m: &mut OpsMatcher, rng: &mut Rng) {
    if let Some(t) = pick(m, rng) {
        m.consume(t).unwrap();
    }
}

fn sequential<M: Matcher>(matchers: &mut [M], words: usize) -> Vec<u32> {
    let mut out = vec![0; matchers.len() * words];
    for (m, row) in matchers.iter_mut().zip(out.chunks_mut(words)) {
        m.fill_mask(row).unwrap();
    }
    out
}

#[test]
fn batch_fill_equals_sequential_fill_on_64_mixed_matchers() {
    let words = common::qwen3().mask_words();
    let mut rng = Rng::new(1);
    let mut matchers = mixed_batch(&mut rng);
    let mut filler = BatchFiller::new(FillConfig::new().threads(3));
    let mut out = vec![u32::MAX; matchers.len() * words];
    for round in 0..3 {
        let want = sequential(&mut matchers, words);
        out.fill(0xdead_beef);
        filler.fill(&mut matchers, &mut out).unwrap();
        assert!(
            out == want,
            "round {round}: parallel fill differs from sequential fill"
        );
        // Through `&mut dyn Matcher`, the shape a mixed-backend engine uses.
        let mut dyns: Vec<&mut dyn Matcher> =
            matchers.iter_mut().map(|m| m as &mut dyn Matcher).collect();
        out.fill(0);
        filler.fill(&mut dyns, &mut out).unwrap();
        assert!(out == want, "round {round}: dyn batch differs");
        matchers.iter_mut().for_each(|m| step(m, &mut rng));
    }
}

#[test]
fn overlapped_fill_gives_the_synchronous_result_and_returns_the_forward_pass() {
    let words = common::qwen3().mask_words();
    let mut rng = Rng::new(2);
    let mut matchers = mixed_batch(&mut rng);
    let mut boxed: Vec<Box<dyn Matcher>> = matchers
        .iter()
        .map(|m| Box::new(m.clone()) as Box<dyn Matcher>)
        .collect();
    let mut filler = BatchFiller::new(FillConfig::new().threads(2));
    let (mut sync, mut overlapped) = (vec![0; 64 * words], vec![0; 64 * words]);
    for round in 0..2u64 {
        filler.fill(&mut matchers, &mut sync).unwrap();
        // The "forward pass" is real work on this thread while the workers fill.
        let (forward, filled) = filler.fill_during(&mut boxed, &mut overlapped, || {
            (0..200_000u64).fold(round, |acc, x| acc.wrapping_mul(31).wrapping_add(x))
        });
        filled.unwrap();
        let want = (0..200_000u64).fold(round, |acc, x| acc.wrapping_mul(31).wrapping_add(x));
        assert_eq!(forward, want);
        assert!(overlapped == sync, "round {round}: overlapped fill differs");
        for (m, b) in matchers.iter_mut().zip(&mut boxed) {
            if let Some(t) = pick(m, &mut rng) {
                m.consume(t).unwrap();
                b.consume(t).unwrap();
            }
        }
    }
}

/// Writes its id into every word of its row and counts its calls.
struct Tagged {
    id: u32,
    calls: AtomicUsize,
    fail: bool,
}

impl Matcher for Tagged {
    fn fill_mask(&mut self, out: &mut [u32]) -> Result<(), MatchError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        out.fill(self.id);
        if self.fail {
            return Err(MatchError::new(MatchErrorKind::Limit(format!(
                "row {}",
                self.id
            ))));
        }
        Ok(())
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
}

fn tagged(n: u32) -> Vec<Tagged> {
    (0..n)
        .map(|id| Tagged {
            id: id + 1,
            calls: AtomicUsize::new(0),
            fail: false,
        })
        .collect()
}

#[test]
fn every_row_is_written_once_per_step_by_its_own_matcher() {
    for threads in [0, 1, 3] {
        let mut filler = BatchFiller::new(FillConfig::new().threads(threads));
        assert_eq!(filler.threads(), threads);
        for rows in [1u32, 2, 7, 256] {
            let mut matchers = tagged(rows);
            let mut out = vec![0; rows as usize * 5];
            for _ in 0..50 {
                out.fill(0);
                filler.fill(&mut matchers, &mut out).unwrap();
                for (r, row) in out.chunks(5).enumerate() {
                    assert!(
                        row.iter().all(|&w| w == r as u32 + 1),
                        "{threads} threads, row {r}"
                    );
                }
            }
            assert!(matchers
                .iter()
                .all(|m| m.calls.load(Ordering::Relaxed) == 50));
        }
    }
}

#[test]
fn failing_matchers_report_the_lowest_row_and_leave_their_rows_empty() {
    let mut filler = BatchFiller::new(FillConfig::new().threads(2));
    let mut matchers = tagged(40);
    matchers[9].fail = true;
    matchers[31].fail = true;
    let mut out = vec![0; 40 * 3];
    match filler.fill(&mut matchers, &mut out) {
        Err(FillError::Matcher { row: 9, error }) => {
            assert_eq!(error.kind(), &MatchErrorKind::Limit("row 10".into()))
        }
        other => panic!("expected row 9's error, got {other:?}"),
    }
    for (r, row) in out.chunks(3).enumerate() {
        let want = if r == 9 || r == 31 { 0 } else { r as u32 + 1 };
        assert!(row.iter().all(|&w| w == want), "row {r}");
    }
}

#[test]
fn a_buffer_that_is_not_one_row_per_matcher_is_an_error_and_the_forward_pass_still_runs() {
    let mut filler = BatchFiller::new(FillConfig::new().threads(1));
    let mut matchers = tagged(3);
    let mut out = vec![7; 10];
    let (ran, filled) = filler.fill_during(&mut matchers, &mut out, || true);
    assert!(ran);
    assert_eq!(filled, Err(FillError::Shape { len: 10, rows: 3 }));
    assert_eq!(out, [7; 10]);
    let mut none: Vec<Tagged> = Vec::new();
    assert_eq!(
        filler.fill(&mut none, &mut out),
        Err(FillError::Shape { len: 10, rows: 0 })
    );
    assert_eq!(filler.fill(&mut none, &mut []), Ok(()));
}

/// Panics when asked for a mask.
struct Panicky;

impl Matcher for Panicky {
    fn fill_mask(&mut self, _: &mut [u32]) -> Result<(), MatchError> {
        panic!("matcher bug")
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
}

#[test]
fn a_panic_in_a_matcher_or_the_forward_pass_reaches_the_caller_and_the_pool_survives() {
    let mut filler = BatchFiller::new(FillConfig::new().threads(2));
    let mut out = vec![0; 8];
    let mut bad: Vec<Box<dyn Matcher>> = (0..8)
        .map(|i| {
            if i == 5 {
                Box::new(Panicky) as Box<dyn Matcher>
            } else {
                Box::new(tagged(1).remove(0))
            }
        })
        .collect();
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        filler.fill(&mut bad, &mut out)
    }));
    assert!(caught.is_err(), "the matcher's panic propagates");

    let mut good = tagged(8);
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        filler.fill_during(&mut good, &mut out, || panic!("forward pass failed"))
    }));
    assert!(caught.is_err(), "the forward pass's panic propagates");

    filler.fill(&mut good, &mut out).unwrap();
    assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8]);
}
