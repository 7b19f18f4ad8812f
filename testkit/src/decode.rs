//! The decode loop of `examples/decode` (shared with `tests/decode.rs`): a stand-in model, mask
//! filling overlapped with its forward pass, apply, sampling, jump-forward.
//!
//! A step, for the sequences still running:
//! 1. jump forward: append each sequence's forced tokens (no model call for them);
//! 2. the forward pass (the stand-in writes pseudo-random logits) runs on this thread while the
//!    `BatchFiller` workers fill every row's mask (`fill_during`), or fill then forward;
//! 3. apply the masks to the logits (CPU `apply_bitmask`, or upload + kernel on a GPU), touching
//!    only the running rows (an index list);
//! 4. sample from the masked logits (greedy or seeded temperature sampling), consume.

use std::error::Error;
use std::time::{Duration, Instant};

use formwork::gpu::{apply_bitmask, ApplyConfig, BatchFiller, Logit};
use formwork::vocab::{TokenKind, Vocab};
use formwork::{Matcher, TokenId};
use half::{bf16, f16};

/// A logits element type the stand-in writes and the sampler reads.
pub trait Float: Logit {
    /// Converts (rounding) from f32.
    fn from_f32(x: f32) -> Self;
    /// Widens to f32.
    fn to_f32(self) -> f32;
}

impl Float for f32 {
    fn from_f32(x: f32) -> f32 {
        x
    }
    fn to_f32(self) -> f32 {
        self
    }
}

macro_rules! half_float {
    ($($t:ty),*) => {$(
        impl Float for $t {
            fn from_f32(x: f32) -> $t {
                <$t>::from_f32(x)
            }
            fn to_f32(self) -> f32 {
                <$t>::to_f32(self)
            }
        }
    )*};
}

half_float!(f16, bf16);

/// Options of [`decode`].
#[derive(Clone, Debug)]
pub struct DecodeConfig {
    /// Seeds the stand-in's logits and the sampler.
    pub seed: u64,
    /// Sampling temperature; 0 or less samples greedily.
    pub temperature: f32,
    /// Forward passes at most; sequences still running then are reported unfinished.
    pub max_steps: usize,
    /// Fill the masks during the forward pass (`fill_during`) rather than before it (`fill`).
    pub overlap: bool,
}

/// A deterministic stand-in for the model: logit `t` of a row is a pseudo-random value in
/// [0, 1) (seeded by step and row) plus a pull toward ending that grows with the row's length,
/// from -4 at the start to +4 at the row's patience and on: EOS and special tokens get 1.5 ×
/// the pull, text tokens made only of closing characters (`"`, `)`, `]`, `}`) 1 ×, other
/// tokens none. So sequences write free text for a while, then close what is open and stop,
/// as a model trained on the format would.
pub struct StandIn {
    weight: Vec<f32>,
    seed: u64,
    patience: usize,
}

impl StandIn {
    /// A stand-in for `vocab`'s model whose rows close after about `patience` tokens (each row
    /// has its own patience, from half to one and a half times this).
    pub fn new(vocab: &Vocab, seed: u64, patience: usize) -> StandIn {
        let weight = (0..vocab.mask_width() as TokenId)
            .map(|t| match vocab.kind(t) {
                _ if vocab.is_eos(t) => 1.5,
                Some(TokenKind::Special) => 1.5,
                Some(TokenKind::Text)
                    if vocab
                        .token_bytes(t)
                        .iter()
                        .all(|b| matches!(b, b'"' | b')' | b']' | b'}')) =>
                {
                    1.0
                }
                _ => 0.0,
            })
            .collect();
        StandIn {
            weight,
            seed,
            patience: patience.max(2),
        }
    }

    /// Row `row`'s logits at `step`, after `len` tokens of output.
    pub fn forward<T: Float>(&self, step: usize, row: usize, len: usize, logits: &mut [T]) {
        let patience = self.patience / 2 + (mix(&[self.seed, row as u64]) as usize % self.patience);
        // Greedy decoding closes what it can once the pull passes 1 (at 5/8 of the patience);
        // at temperature 1, EOS outweighs ~10^5 free tokens together from a pull of ~8 on.
        let pull = 8.0 * len as f32 / patience as f32 - 4.0;
        let mut rng = Rng::new(mix(&[self.seed, 1, step as u64, row as u64]));
        for (x, &w) in logits.iter_mut().zip(&self.weight) {
            *x = T::from_f32(rng.unit() + pull * w);
        }
    }
}

/// What one sequence produced.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Row {
    /// Every token, forced ones included, EOS last if it finished.
    pub tokens: Vec<TokenId>,
    /// Tokens sampled from the model.
    pub sampled: usize,
    /// Tokens appended by jump-forward.
    pub jumped: usize,
    /// Ended with EOS (false: hit the step limit).
    pub finished: bool,
}

/// Per-step timings.
#[derive(Clone, Debug, Default)]
pub struct Times {
    /// The stand-in forward pass (not overhead: a real model's is far longer).
    pub forward: Vec<Duration>,
    /// Mask filling: overlapped, the wait after the forward pass; otherwise the whole fill.
    pub fill: Vec<Duration>,
    /// Bitmask upload to the device (GPU path only).
    pub upload: Vec<Duration>,
    /// Applying the masks to the logits.
    pub apply: Vec<Duration>,
    /// Sampling and consuming.
    pub sample: Vec<Duration>,
}

/// The p50 and p99 of some durations, in µs ("-" for none).
pub fn percentiles(d: &[Duration]) -> String {
    if d.is_empty() {
        return "-".into();
    }
    let mut us: Vec<f64> = d.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    us.sort_by(f64::total_cmp);
    let at = |q: f64| us[((us.len() - 1) as f64 * q).round() as usize];
    format!("p50 {:>9.1} µs   p99 {:>9.1} µs", at(0.5), at(0.99))
}

/// Where the masks are filled and how they reach the logits.
pub trait Applier<T: Float> {
    /// The host buffer for `rows` masks of the vocabulary's width, to fill.
    fn masks(&mut self, rows: usize) -> Result<&mut [u32], Box<dyn Error>>;
    /// Applies the masks last filled to `logits` by `config`, recording its timings.
    fn apply(
        &mut self,
        logits: &mut [T],
        config: &ApplyConfig<'_>,
        times: &mut Times,
    ) -> Result<(), Box<dyn Error>>;
}

/// Applies on the CPU with [`apply_bitmask`].
#[derive(Debug, Default)]
pub struct CpuApplier {
    masks: Vec<u32>,
    words: usize,
}

impl CpuApplier {
    /// Masks of `vocab`'s width.
    pub fn new(vocab: &Vocab) -> CpuApplier {
        CpuApplier {
            masks: Vec::new(),
            words: vocab.mask_words(),
        }
    }
}

impl<T: Float> Applier<T> for CpuApplier {
    fn masks(&mut self, rows: usize) -> Result<&mut [u32], Box<dyn Error>> {
        self.masks.resize(rows * self.words, 0);
        Ok(&mut self.masks)
    }

    fn apply(
        &mut self,
        logits: &mut [T],
        config: &ApplyConfig<'_>,
        times: &mut Times,
    ) -> Result<(), Box<dyn Error>> {
        let started = Instant::now();
        apply_bitmask(logits, &self.masks, config)?;
        times.apply.push(started.elapsed());
        Ok(())
    }
}

/// Decodes every matcher's sequence until EOS or `config.max_steps` forward passes.
pub fn decode<T: Float>(
    matchers: &mut [Box<dyn Matcher>],
    vocab: &Vocab,
    model: &StandIn,
    filler: &mut BatchFiller,
    applier: &mut dyn Applier<T>,
    config: &DecodeConfig,
) -> Result<(Vec<Row>, Times), Box<dyn Error>> {
    let (rows, width) = (matchers.len(), vocab.mask_width());
    let mut out = vec![Row::default(); rows];
    let mut logits = vec![T::NEG_INFINITY; rows * width];
    let mut live: Vec<u32> = (0..rows as u32).collect();
    let mut times = Times::default();
    let mut scratch = Vec::new();
    for step in 0..config.max_steps {
        for &r in &live {
            let (m, row) = (&mut matchers[r as usize], &mut out[r as usize]);
            let forced = m.forced_tokens();
            m.consume_all(&forced)
                .map_err(|e| format!("row {r}: jump-forward: {e}"))?;
            row.tokens.extend_from_slice(&forced);
            row.jumped += forced.len();
            row.finished = m.is_terminated();
        }
        live.retain(|&r| !out[r as usize].finished);
        if live.is_empty() {
            break;
        }

        // Finished rows are filled too (their mask is EOS alone, cheap) and left alone by
        // the forward pass and the apply: the index list names the running rows.
        let forward = |logits: &mut [T]| {
            for &r in &live {
                let r = r as usize;
                model.forward(
                    step,
                    r,
                    out[r].tokens.len(),
                    &mut logits[r * width..][..width],
                );
            }
            Instant::now()
        };
        let masks = applier.masks(rows)?;
        let started = Instant::now();
        if config.overlap {
            let (forward_end, filled) =
                filler.fill_during(matchers, masks, || forward(&mut logits));
            filled?;
            times.forward.push(forward_end - started);
            times.fill.push(forward_end.elapsed());
        } else {
            filler.fill(matchers, masks)?;
            let fill_end = Instant::now();
            let forward_end = forward(&mut logits);
            times.fill.push(fill_end - started);
            times.forward.push(forward_end - fill_end);
        }
        let apply = ApplyConfig::new(width, vocab.mask_words()).indices(&live);
        applier.apply(&mut logits, &apply, &mut times)?;

        let started = Instant::now();
        for &r in &live {
            let r = r as usize;
            let mut rng = Rng::new(mix(&[config.seed, 2, step as u64, r as u64]));
            let row = &logits[r * width..][..width];
            let t = sample(row, config.temperature, &mut rng, &mut scratch)
                .ok_or_else(|| format!("row {r}: the mask allows no token"))?;
            matchers[r]
                .consume(t)
                .map_err(|e| format!("row {r}: sampled token {t}: {e}"))?;
            out[r].tokens.push(t);
            out[r].sampled += 1;
            out[r].finished = matchers[r].is_terminated();
        }
        times.sample.push(started.elapsed());
        live.retain(|&r| !out[r as usize].finished);
    }
    Ok((out, times))
}

/// Draws a token from the finite logits of a row: the largest (lowest id on ties) when
/// `temperature <= 0`, else from their softmax at that temperature (`cumulative` is scratch).
/// `None` if all are `-inf`.
pub fn sample<T: Float>(
    row: &[T],
    temperature: f32,
    rng: &mut Rng,
    cumulative: &mut Vec<(TokenId, f64)>,
) -> Option<TokenId> {
    let finite = || {
        row.iter()
            .enumerate()
            .map(|(t, x)| (t as TokenId, x.to_f32()))
            .filter(|(_, x)| x.is_finite())
    };
    let (best, max) = finite().fold(None, |best: Option<(TokenId, f32)>, (t, x)| match best {
        Some((_, m)) if m >= x => best,
        _ => Some((t, x)),
    })?;
    if temperature <= 0.0 {
        return Some(best);
    }
    cumulative.clear();
    let mut total = 0.0;
    for (t, x) in finite() {
        total += f64::from(((x - max) / temperature).exp());
        cumulative.push((t, total));
    }
    let at = f64::from(rng.unit()) * total;
    let i = cumulative.partition_point(|&(_, c)| c <= at);
    Some(cumulative[i.min(cumulative.len() - 1)].0)
}

/// SplitMix64 over several words: independent seeds for (step, row) streams.
fn mix(words: &[u64]) -> u64 {
    words.iter().fold(0x853c_49e6_748f_ea9b, |h, &w| {
        let mut z = (h ^ w).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

/// xorshift64*: fast enough to write ~150k logits per row per step.
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed | 1)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32
    }
}
