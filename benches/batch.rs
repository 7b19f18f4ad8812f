//! Batch mask filling and CPU apply on the Qwen3 vocabulary (151,936-wide masks, 4,748 words).
//!
//! `fill_mixed` fills batches of 1, 16, 64 and 256 real matchers: row `i` runs constraint
//! `i % 6` of the decode example's mixed batch (`testkit/src/mixed.rs`: the three shipped
//! templates and a regex on the operator backend, a recursive JSON schema and a GBNF grammar on
//! the Earley backend), a different number of tokens into a valid text. The states do not
//! change between iterations, so this is a warm-cache step; `pool` is the `BatchFiller`,
//! `one_thread` the same rows filled in a loop.
//!
//! The other fill groups isolate the machinery. In `fill` the matcher copies a cached mask, so
//! the figures measure waking workers, claiming rows, joining, plus the memory bandwidth of
//! writing the masks; three ways to fill are compared: the persistent `BatchFiller`, a
//! `std::thread::scope` spawn per step with the same number of threads, and one thread in a
//! loop. `fill_compute` repeats pool against one thread with a matcher whose step is
//! compute-bound, which is where the workers pay off.
//!
//! Run: `cargo bench --bench batch`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use formwork::gpu::{apply_bitmask, ApplyConfig, BatchFiller, FillConfig};
use formwork::vocab::Vocab;
use formwork::{MatchError, Matcher};
use formwork_testkit::mask_only::{FillOnly, MaskOnly};
use formwork_testkit::mixed;
use half::bf16;

/// A matcher whose every step answers a precomputed mask (a warm-cache step at its cheapest).
struct Cached(Arc<[u32]>);

impl FillOnly for Cached {
    fn fill(&mut self, out: &mut [u32]) -> Result<(), MatchError> {
        out.copy_from_slice(&self.0);
        Ok(())
    }
}

/// A matcher that computes its mask word by word (a few ns a word, ~10-20 µs a row), standing in
/// for a backend whose step is compute-bound rather than a copy.
struct Computed(u64);

impl FillOnly for Computed {
    fn fill(&mut self, out: &mut [u32]) -> Result<(), MatchError> {
        let mut h = self.0;
        for w in out.iter_mut() {
            for _ in 0..4 {
                h ^= h >> 12;
                h ^= h << 25;
                h ^= h >> 27;
            }
            *w = (h.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as u32;
        }
        Ok(())
    }
}

/// The baseline: every row filled in a loop on the calling thread.
fn fill_one_thread<M: Matcher>(matchers: &mut [M], out: &mut [u32], words: usize) {
    for (m, row) in matchers.iter_mut().zip(out.chunks_mut(words)) {
        m.fill_mask(row).unwrap();
    }
}

/// The alternative to a persistent pool: spawn `threads` scoped threads per step, each filling
/// a contiguous share of the rows, the calling thread taking the last share.
fn fill_scoped<M: Matcher>(threads: usize, matchers: &mut [M], out: &mut [u32], words: usize) {
    let share = matchers.len().div_ceil(threads + 1).max(1);
    std::thread::scope(|s| {
        let mut shares = matchers
            .chunks_mut(share)
            .zip(out.chunks_mut(share * words))
            .peekable();
        while let Some((ms, os)) = shares.next() {
            let mut fill = move || {
                for (m, row) in ms.iter_mut().zip(os.chunks_mut(words)) {
                    m.fill_mask(row).unwrap();
                }
            };
            if shares.peek().is_some() {
                s.spawn(fill);
            } else {
                fill();
            }
        }
    });
}

fn bench_fill(c: &mut Criterion) {
    let vocab = Vocab::embedded_qwen3().expect("embedded Qwen3");
    let words = vocab.mask_words();
    let cached: Arc<[u32]> = vocab.text_mask().into();
    let threads = FillConfig::new();
    let mut filler = BatchFiller::new(threads);
    let workers = filler.threads();
    let mut group = c.benchmark_group("fill");
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(3));
    for batch in [1usize, 16, 64, 256] {
        let mut matchers: Vec<_> = (0..batch)
            .map(|_| MaskOnly(Cached(cached.clone())))
            .collect();
        let mut out = vec![0u32; batch * words];
        group.throughput(Throughput::Bytes((batch * words * 4) as u64));
        group.bench_with_input(BenchmarkId::new("pool", batch), &batch, |b, _| {
            b.iter(|| filler.fill(&mut matchers, black_box(&mut out)).unwrap())
        });
        group.bench_with_input(BenchmarkId::new("scoped_spawn", batch), &batch, |b, _| {
            b.iter(|| fill_scoped(workers, &mut matchers, black_box(&mut out), words))
        });
        group.bench_with_input(BenchmarkId::new("one_thread", batch), &batch, |b, _| {
            b.iter(|| fill_one_thread(&mut matchers, black_box(&mut out), words))
        });
    }
    group.finish();

    let mut group = c.benchmark_group("fill_compute");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3));
    for batch in [16usize, 64] {
        let mut matchers: Vec<_> = (0..batch as u64)
            .map(|i| MaskOnly(Computed(i + 1)))
            .collect();
        let mut out = vec![0u32; batch * words];
        group.bench_with_input(BenchmarkId::new("pool", batch), &batch, |b, _| {
            b.iter(|| filler.fill(&mut matchers, black_box(&mut out)).unwrap())
        });
        group.bench_with_input(BenchmarkId::new("one_thread", batch), &batch, |b, _| {
            b.iter(|| fill_one_thread(&mut matchers, black_box(&mut out), words))
        });
    }
    group.finish();
}

fn bench_fill_mixed(c: &mut Criterion) {
    let mixed = mixed::Mixed::new().expect("the mixed batch compiles");
    let words = mixed.vocab().mask_words();
    let mut filler = BatchFiller::new(FillConfig::new());
    let mut group = c.benchmark_group("fill_mixed");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(4));
    for batch in [1usize, 16, 64, 256] {
        let mut matchers: Vec<Box<dyn Matcher>> = mixed
            .matchers_along_samples(batch)
            .expect("the samples are valid")
            .into_iter()
            .map(|(m, _)| m)
            .collect();
        let mut out = vec![0u32; batch * words];
        group.throughput(Throughput::Elements(batch as u64));
        group.bench_with_input(BenchmarkId::new("pool", batch), &batch, |b, _| {
            b.iter(|| filler.fill(&mut matchers, black_box(&mut out)).unwrap())
        });
        group.bench_with_input(BenchmarkId::new("one_thread", batch), &batch, |b, _| {
            b.iter(|| fill_one_thread(&mut matchers, black_box(&mut out), words))
        });
    }
    group.finish();
}

fn bench_apply(c: &mut Criterion) {
    const VOCAB: usize = 151_936;
    const BATCH: usize = 64;
    let words = VOCAB.div_ceil(32);
    // A JSON-ish step: a few hundred tokens allowed per row, the rest masked.
    let mut mask = vec![0u32; BATCH * words];
    for (r, row) in mask.chunks_mut(words).enumerate() {
        for t in (r * 7..VOCAB).step_by(509) {
            row[t / 32] |= 1 << (t % 32);
        }
    }
    let config = ApplyConfig::new(VOCAB, words);
    let mut group = c.benchmark_group("apply_cpu");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(3));
    group.throughput(Throughput::Elements((BATCH * VOCAB) as u64));
    let mut f32_logits = vec![0.25f32; BATCH * VOCAB];
    group.bench_function("f32/151936x64", |b| {
        b.iter(|| apply_bitmask(black_box(&mut f32_logits), &mask, &config).unwrap())
    });
    let mut bf16_logits = vec![bf16::from_f32(0.25); BATCH * VOCAB];
    group.bench_function("bf16/151936x64", |b| {
        b.iter(|| apply_bitmask(black_box(&mut bf16_logits), &mask, &config).unwrap())
    });
    group.finish();
}

criterion_group!(benches, bench_fill_mixed, bench_fill, bench_apply);
criterion_main!(benches);
