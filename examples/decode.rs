//! End-to-end constrained decoding of a mixed batch on the Qwen3 vocabulary, with a stand-in
//! model: template requests (outline, reference lookup, tool call) and a regex on the operator
//! backend, a recursive JSON schema and a GBNF grammar on the Earley backend, all in one batch.
//!
//! Every step fills all masks on worker threads while the stand-in forward pass runs, applies
//! them (CPU, or upload + kernel on a GPU with `--features cuda`), samples, consumes, and jumps
//! forward over forced tokens. The outputs are checked by validators independent of formwork
//! (the `regex` crate, `serde_json` + `jsonschema`, a hand-written parser); the exit status is 1
//! if any fails or does not finish.
//!
//! The decode loop and the mixed batch live in `formwork-testkit` (`testkit/src/decode.rs`,
//! `testkit/src/mixed.rs`), shared with `tests/decode.rs`, `tests/gpu_fill.rs` and
//! `benches/batch.rs`.
//!
//! `cargo run --release --example decode [-- --rows 24 --temperature 0 --dtype bf16 --sync]`

use std::error::Error;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, ValueEnum};
use formwork::gpu::{BatchFiller, FillConfig};
use formwork::vocab::Vocab;
use half::{bf16, f16};

use formwork_testkit::decode::{
    decode, percentiles, Applier, CpuApplier, DecodeConfig, Float, StandIn,
};
use formwork_testkit::mixed::{self, Mixed};

#[derive(Parser, Debug)]
#[command(about = "Constrained decoding of a mixed batch with a stand-in model")]
struct Args {
    /// Sequences in the batch; they cycle through the six constraints.
    #[arg(long, default_value_t = 12)]
    rows: usize,
    /// Seed of the stand-in's logits and of sampling.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Sampling temperature; 0 decodes greedily.
    #[arg(long, default_value_t = 1.0)]
    temperature: f32,
    /// Tokens after which the stand-in model wants to close what is open (per row 0.5-1.5×).
    #[arg(long, default_value_t = 40)]
    patience: usize,
    /// Forward passes at most.
    #[arg(long, default_value_t = 400)]
    max_steps: usize,
    /// Logits element type.
    #[arg(long, value_enum, default_value_t = Dtype::F32)]
    dtype: Dtype,
    /// Fill the masks before the forward pass instead of during it.
    #[arg(long)]
    sync: bool,
    /// Mask-filling worker threads (default: one per core but one).
    #[arg(long)]
    threads: Option<usize>,
    /// Apply on the CPU even when built with the `cuda` feature.
    #[arg(long)]
    cpu: bool,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum Dtype {
    F32,
    F16,
    Bf16,
}

fn main() -> Result<ExitCode, Box<dyn Error>> {
    let args = Args::parse();
    let started = Instant::now();
    let mixed = Mixed::new()?;
    println!(
        "start-up: Qwen3 vocabulary, shipped templates, 6 constraints compiled in {:.0} ms",
        started.elapsed().as_secs_f64() * 1e3
    );
    match args.dtype {
        Dtype::F32 => run::<f32>(&args, &mixed),
        Dtype::F16 => run::<f16>(&args, &mixed),
        Dtype::Bf16 => run::<bf16>(&args, &mixed),
    }
}

fn run<T: Float + GpuFloat>(args: &Args, mixed: &Mixed) -> Result<ExitCode, Box<dyn Error>> {
    let vocab = mixed.vocab();
    let mut applier = applier::<T>(args, vocab)?;
    let model = StandIn::new(vocab, args.seed, args.patience);
    let threads = args
        .threads
        .map_or(FillConfig::new(), |n| FillConfig::new().threads(n));
    let mut filler = BatchFiller::new(threads);
    let config = DecodeConfig {
        seed: args.seed,
        temperature: args.temperature,
        max_steps: args.max_steps,
        overlap: !args.sync,
    };
    println!(
        "batch of {} rows, {} logits, temperature {}, {} fill worker(s), masks filled {} the forward pass",
        args.rows,
        std::any::type_name::<T>().rsplit("::").next().unwrap_or("?"),
        args.temperature,
        filler.threads(),
        if args.sync { "before" } else { "during" },
    );
    let mut matchers = mixed.matchers(args.rows);
    let started = Instant::now();
    let (rows, times) = decode(
        &mut matchers,
        vocab,
        &model,
        &mut filler,
        applier.as_mut(),
        &config,
    )?;
    let elapsed = started.elapsed();

    let mut failed = 0;
    for (i, row) in rows.iter().enumerate() {
        let spec = mixed.spec(i);
        let (valid, verdict) = match (row.finished, spec.validate(vocab, &row.tokens)) {
            (false, _) => (false, format!("UNFINISHED after {} steps", args.max_steps)),
            (true, Ok(())) => (true, "valid".to_string()),
            (true, Err(e)) => (false, format!("INVALID: {e}")),
        };
        println!(
            "\n[{i}] {} ({} on {}): {} tokens, {} sampled + {} by jump-forward: {verdict}",
            spec.name,
            spec.front,
            spec.backend(),
            row.tokens.len(),
            row.sampled,
            row.jumped,
        );
        let text: String = mixed::display(vocab, &row.tokens)
            .chars()
            .flat_map(|c| match c.is_control() {
                true => c.escape_default().collect::<Vec<_>>(),
                false => vec![c],
            })
            .collect();
        println!("    {text}");
        failed += usize::from(!valid);
    }

    println!(
        "\n{} steps in {:.2} s; per step (p50 / p99 over steps):",
        times.sample.len(),
        elapsed.as_secs_f64()
    );
    let fill = match args.sync {
        true => "fill (all rows, before the forward pass)",
        false => "fill (wait after the forward pass)",
    };
    for (what, d) in [
        ("forward pass (stand-in)", &times.forward),
        (fill, &times.fill),
        ("upload (bitmask to device)", &times.upload),
        ("apply", &times.apply),
        ("sample + consume", &times.sample),
    ] {
        let figures = match d.is_empty() {
            true => "- (nothing to upload on the CPU path)".to_string(),
            false => percentiles(d),
        };
        println!("  {what:<42} {figures}");
    }
    println!("\n{} of {} outputs valid", rows.len() - failed, rows.len());
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

#[cfg(not(feature = "cuda"))]
mod gpu_path {
    use super::Float;

    /// Without the `cuda` feature any logits type goes (CPU only).
    pub trait GpuFloat: Float {}
    impl<T: Float> GpuFloat for T {}
}

#[cfg(not(feature = "cuda"))]
use gpu_path::GpuFloat;

#[cfg(not(feature = "cuda"))]
fn applier<T: Float>(_: &Args, vocab: &Vocab) -> Result<Box<dyn Applier<T>>, Box<dyn Error>> {
    println!("built without the `cuda` feature: masks are applied on the CPU");
    Ok(Box::new(CpuApplier::new(vocab)))
}

#[cfg(feature = "cuda")]
use gpu_path::GpuFloat;

/// The GPU path, or the CPU one (saying why) when there is no driver, NVRTC or device.
#[cfg(feature = "cuda")]
fn applier<T: GpuFloat>(args: &Args, vocab: &Vocab) -> Result<Box<dyn Applier<T>>, Box<dyn Error>> {
    use formwork::gpu::cuda::CudaError;
    if args.cpu {
        println!("--cpu: masks are applied on the CPU");
        return Ok(Box::new(CpuApplier::new(vocab)));
    }
    match gpu_path::CudaApplier::<T>::new(args.rows, vocab) {
        Ok(gpu) => {
            println!("GPU path: bitmask upload from pinned memory + apply kernel on device 0");
            Ok(Box::new(gpu))
        }
        Err(e @ (CudaError::NoDriver | CudaError::NoNvrtc | CudaError::NoDevice { .. })) => {
            println!("no GPU path ({e}): masks are applied on the CPU instead");
            Ok(Box::new(CpuApplier::new(vocab)))
        }
        Err(e) => Err(e.into()),
    }
}

#[cfg(feature = "cuda")]
mod gpu_path {
    use std::error::Error;
    use std::sync::Arc;
    use std::time::Instant;

    use cudarc::driver::{CudaSlice, CudaStream, DeviceRepr, ValidAsZeroBits};
    use formwork::gpu::cuda::{open_device, ApplyKernel, CudaError, DeviceBitmask, DeviceLogit};
    use formwork::gpu::ApplyConfig;
    use formwork::vocab::Vocab;
    use half::{bf16, f16};

    use formwork_testkit::decode::{Applier, Float, Times};

    /// A logits type the stand-in and the kernel handle, moved to and from the device as the
    /// integer type of its bits (cudarc copies `f16`/`bf16` only with its `f16` feature).
    pub trait GpuFloat: Float + DeviceLogit {
        type Raw: DeviceRepr + ValidAsZeroBits + Copy + Default + Unpin;
        fn to_raw(self) -> Self::Raw;
        fn from_raw(raw: Self::Raw) -> Self;
    }

    macro_rules! gpu_float {
        ($($t:ty => $raw:ty),*) => {$(
            impl GpuFloat for $t {
                type Raw = $raw;
                fn to_raw(self) -> $raw {
                    self.to_bits()
                }
                fn from_raw(raw: $raw) -> $t {
                    <$t>::from_bits(raw)
                }
            }
        )*};
    }

    gpu_float!(f32 => u32, f16 => u16, bf16 => u16);

    /// Device bitmask and logits on device 0's default stream.
    pub struct CudaApplier<T: GpuFloat> {
        stream: Arc<CudaStream>,
        kernel: ApplyKernel,
        masks: DeviceBitmask,
        logits: CudaSlice<T::Raw>,
        staging: Vec<T::Raw>,
        rows: usize,
    }

    impl<T: GpuFloat> CudaApplier<T> {
        pub fn new(rows: usize, vocab: &Vocab) -> Result<CudaApplier<T>, CudaError> {
            let ctx = open_device(0)?;
            let stream = ctx.default_stream();
            let kernel = ApplyKernel::new(&ctx)?;
            let masks = DeviceBitmask::new(&stream, rows, vocab.mask_words())?;
            let len = rows * vocab.mask_width();
            let logits = stream.alloc_zeros::<T::Raw>(len.max(1))?;
            Ok(CudaApplier {
                stream,
                kernel,
                masks,
                logits,
                staging: Vec::with_capacity(len),
                rows,
            })
        }
    }

    impl<T: GpuFloat> Applier<T> for CudaApplier<T> {
        fn masks(&mut self, rows: usize) -> Result<&mut [u32], Box<dyn Error>> {
            self.rows = rows;
            Ok(self.masks.host_mut(rows)?)
        }

        fn apply(
            &mut self,
            logits: &mut [T],
            config: &ApplyConfig<'_>,
            times: &mut Times,
        ) -> Result<(), Box<dyn Error>> {
            let started = Instant::now();
            self.masks.upload(&self.stream, self.rows)?;
            self.stream.synchronize()?;
            times.upload.push(started.elapsed());
            // The stand-in's logits are on the host; a real model's are on the device already,
            // so their copies are not timed.
            self.staging.clear();
            self.staging.extend(logits.iter().map(|&x| x.to_raw()));
            self.stream.memcpy_htod(&self.staging, &mut self.logits)?;
            self.stream.synchronize()?;
            let started = Instant::now();
            // SAFETY: `T` and `T::Raw` have the same size, and every bit pattern is a valid `T`.
            let mut view = unsafe { self.logits.transmute_mut::<T>(logits.len()) }
                .ok_or("the device logits buffer is too small")?;
            self.kernel
                .apply(&self.stream, &mut view, &mut self.masks, config)?;
            self.stream.synchronize()?;
            times.apply.push(started.elapsed());
            self.stream.memcpy_dtoh(&self.logits, &mut self.staging)?;
            self.stream.synchronize()?;
            for (x, &raw) in logits.iter_mut().zip(&self.staging) {
                *x = T::from_raw(raw);
            }
            Ok(())
        }
    }
}
