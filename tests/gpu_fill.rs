//! Batch filling: the parallel fill and the overlapped fill write, bit for bit, what each
//! matcher writes alone, over a batch of 64 real matchers of both backends on Qwen3 (the three
//! shipped templates and a regex on operators, a recursive JSON schema and a GBNF grammar on
//! Earley), stepped along valid texts; every row is written once per step by its own matcher;
//! failures, bad shapes and panics are reported without losing the pool.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use formwork::gpu::{BatchFiller, FillConfig, FillError};
use formwork::{LimitExceeded, LimitKind, MatchError, MatchErrorKind, Matcher, TokenId};
use formwork_testkit::mask_only::{FillOnly, MaskOnly};
use formwork_testkit::mixed::Mixed;
use formwork_testkit::tokenizers;

fn mixed() -> &'static Mixed {
    static M: OnceLock<Mixed> = OnceLock::new();
    M.get_or_init(|| Mixed::new().expect("the mixed batch compiles"))
}

/// 64 matchers, row `i` on constraint `i % 6`, each a different number of tokens into its
/// sample text, with the tokens of the sample (then EOS) it has left.
fn mixed_batch() -> (Vec<Box<dyn Matcher>>, Vec<Vec<TokenId>>) {
    mixed()
        .matchers_along_samples(64)
        .expect("the samples are valid")
        .into_iter()
        .unzip()
}

/// Every row consumes its next sample token, if it has one left.
fn advance(matchers: &mut [Box<dyn Matcher>], rest: &mut [Vec<TokenId>]) {
    for (m, rest) in matchers.iter_mut().zip(rest) {
        if !rest.is_empty() {
            m.consume(rest.remove(0)).unwrap();
        }
    }
}

fn sequential<M: Matcher>(matchers: &mut [M], words: usize) -> Vec<u32> {
    let mut out = vec![0; matchers.len() * words];
    for (m, row) in matchers.iter_mut().zip(out.chunks_mut(words)) {
        m.fill_mask(row).unwrap();
    }
    out
}

/// Sanity of a step's masks: every row allows something, and the rows are not all alike.
fn assert_varied(masks: &[u32], words: usize) {
    let rows: Vec<&[u32]> = masks.chunks(words).collect();
    assert!(rows.iter().all(|r| r.iter().any(|&w| w != 0)));
    let mut distinct = rows.clone();
    distinct.sort();
    distinct.dedup();
    assert!(
        distinct.len() >= 12,
        "only {} distinct masks",
        distinct.len()
    );
}

#[test]
fn batch_fill_equals_sequential_fill_on_64_mixed_matchers() {
    let words = tokenizers::qwen3().mask_words();
    let (mut matchers, mut rest) = mixed_batch();
    let mut filler = BatchFiller::new(FillConfig::new().threads(3));
    let mut out = vec![u32::MAX; matchers.len() * words];
    for round in 0..4 {
        let want = sequential(&mut matchers, words);
        assert_varied(&want, words);
        out.fill(0xdead_beef);
        filler.fill(&mut matchers, &mut out).unwrap();
        assert!(
            out == want,
            "round {round}: parallel fill differs from sequential fill"
        );
        // Through `&mut dyn Matcher`, the shape an engine borrowing its matchers uses.
        let mut dyns: Vec<&mut dyn Matcher> = matchers
            .iter_mut()
            .map(|m| &mut **m as &mut dyn Matcher)
            .collect();
        out.fill(0);
        filler.fill(&mut dyns, &mut out).unwrap();
        assert!(out == want, "round {round}: dyn batch differs");
        advance(&mut matchers, &mut rest);
    }
}

#[test]
fn overlapped_fill_gives_the_synchronous_result_and_returns_the_forward_pass() {
    let words = tokenizers::qwen3().mask_words();
    let (mut matchers, mut rest) = mixed_batch();
    let (mut twins, mut twin_rest) = mixed_batch();
    let mut filler = BatchFiller::new(FillConfig::new().threads(2));
    let (mut sync, mut overlapped) = (vec![0; 64 * words], vec![0; 64 * words]);
    for round in 0..3u64 {
        filler.fill(&mut matchers, &mut sync).unwrap();
        assert_varied(&sync, words);
        // The "forward pass" is real work on this thread while the workers fill.
        let (forward, filled) = filler.fill_during(&mut twins, &mut overlapped, || {
            (0..200_000u64).fold(round, |acc, x| acc.wrapping_mul(31).wrapping_add(x))
        });
        filled.unwrap();
        let want = (0..200_000u64).fold(round, |acc, x| acc.wrapping_mul(31).wrapping_add(x));
        assert_eq!(forward, want);
        assert!(overlapped == sync, "round {round}: overlapped fill differs");
        advance(&mut matchers, &mut rest);
        advance(&mut twins, &mut twin_rest);
    }
}

/// Writes its id into every word of its row and counts its calls.
struct Tagged {
    id: u32,
    calls: AtomicUsize,
    fail: bool,
}

impl FillOnly for Tagged {
    fn fill(&mut self, out: &mut [u32]) -> Result<(), MatchError> {
        self.calls.fetch_add(1, Ordering::Relaxed);
        out.fill(self.id);
        if self.fail {
            return Err(MatchError::new(MatchErrorKind::Limit(LimitExceeded {
                kind: LimitKind::MaskWork,
                value: self.id as u64,
                max: 0,
            })));
        }
        Ok(())
    }
}

fn tagged(n: u32) -> Vec<MaskOnly<Tagged>> {
    (0..n)
        .map(|id| {
            MaskOnly(Tagged {
                id: id + 1,
                calls: AtomicUsize::new(0),
                fail: false,
            })
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
                .all(|m| m.0.calls.load(Ordering::Relaxed) == 50));
        }
    }
}

#[test]
fn failing_matchers_report_the_lowest_row_and_leave_their_rows_empty() {
    let mut filler = BatchFiller::new(FillConfig::new().threads(2));
    let mut matchers = tagged(40);
    matchers[9].0.fail = true;
    matchers[31].0.fail = true;
    let mut out = vec![0; 40 * 3];
    match filler.fill(&mut matchers, &mut out) {
        Err(FillError::Matcher { row: 9, error }) => {
            assert!(matches!(error.kind(), MatchErrorKind::Limit(e) if e.value == 10))
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
    let mut none: Vec<MaskOnly<Tagged>> = Vec::new();
    assert_eq!(
        filler.fill(&mut none, &mut out),
        Err(FillError::Shape { len: 10, rows: 0 })
    );
    assert_eq!(filler.fill(&mut none, &mut []), Ok(()));
}

/// Panics when asked for a mask.
struct Panicky;

impl FillOnly for Panicky {
    fn fill(&mut self, _: &mut [u32]) -> Result<(), MatchError> {
        panic!("matcher bug")
    }
}

#[test]
fn a_panic_in_a_matcher_or_the_forward_pass_reaches_the_caller_and_the_pool_survives() {
    let mut filler = BatchFiller::new(FillConfig::new().threads(2));
    let mut out = vec![0; 8];
    let mut bad: Vec<Box<dyn Matcher>> = (0..8)
        .map(|i| {
            if i == 5 {
                Box::new(MaskOnly(Panicky)) as Box<dyn Matcher>
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
