//! The CUDA path (feature `cuda`). Without a driver or a device every entry point is a typed
//! error, never a panic; the kernel source compiles wherever NVRTC is installed; on a device,
//! the kernel's output equals the CPU reference bit for bit on every case of the apply rules.
//! Tests that need a library or a device print that they skipped and why.
#![cfg(feature = "cuda")]

use std::sync::Arc;

use cudarc::driver::{CudaStream, DeviceRepr, ValidAsZeroBits};
use formwork::gpu::cuda::{
    compile_apply_kernel, open_device, ApplyKernel, CudaError, DeviceBitmask, DeviceLogit,
};
use formwork::gpu::{apply_bitmask, ApplyConfig, ApplyError};
use formwork_testkit::rng::Rng;
use half::{bf16, f16};

/// Says why a test did not run its device part, on the real stderr (the test harness captures
/// only the print macros), so a run without a GPU shows it.
fn skipped(why: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: {why}");
}

#[test]
fn no_driver_or_no_device_is_a_typed_error() {
    // No machine has a millionth device: this is an error everywhere, and never a panic.
    match open_device(1_000_000) {
        Err(CudaError::NoDriver) => eprintln!("no CUDA driver library: checked the NoDriver path"),
        Err(CudaError::NoDevice { ordinal, count }) => {
            assert_eq!(ordinal, 1_000_000);
            eprintln!("CUDA driver present with {count} devices: checked the NoDevice path");
        }
        Err(e) => panic!("expected NoDriver or NoDevice, got {e}"),
        Ok(_) => panic!("device 1,000,000 opened"),
    }
    match open_device(0) {
        Ok(ctx) => eprintln!("device 0 is present ({:?})", ctx.name()),
        Err(e @ (CudaError::NoDriver | CudaError::NoDevice { .. })) => {
            assert!(!e.to_string().is_empty());
            eprintln!("device 0 unavailable: {e}");
        }
        Err(e) => panic!("unexpected error opening device 0: {e}"),
    }
}

#[test]
fn the_kernel_source_compiles_with_nvrtc() {
    match compile_apply_kernel() {
        Ok(ptx) => {
            let text = ptx.to_src();
            for entry in ["formwork_apply_bitmask_b32", "formwork_apply_bitmask_b16"] {
                assert!(text.contains(&format!(".entry {entry}")), "PTX has {entry}");
            }
        }
        Err(CudaError::NoNvrtc) => skipped(format_args!(
            "the_kernel_source_compiles_with_nvrtc: no NVRTC library, the kernel was not compiled"
        )),
        Err(e) => panic!("the kernel does not compile: {e}"),
    }
}

/// Device 0 with the kernel loaded, or why not (then the test skips).
fn device(test: &str) -> Option<(Arc<CudaStream>, ApplyKernel)> {
    let ctx = match open_device(0) {
        Ok(ctx) => ctx,
        Err(e) => {
            skipped(format_args!("{test}: needs a CUDA device ({e})"));
            return None;
        }
    };
    let kernel = ApplyKernel::new(&ctx).expect("kernel loads on a device");
    Some((ctx.default_stream(), kernel))
}

/// A logit type with the integer type of its bits, which cudarc can copy without its `f16`
/// feature.
trait Bits: DeviceLogit {
    type Raw: DeviceRepr + ValidAsZeroBits + Copy + PartialEq + std::fmt::Debug + Default + Unpin;
    fn from_f32(x: f32) -> Self;
    fn raw(self) -> Self::Raw;
}

impl Bits for f32 {
    type Raw = u32;
    fn from_f32(x: f32) -> f32 {
        x
    }
    fn raw(self) -> u32 {
        self.to_bits()
    }
}

impl Bits for f16 {
    type Raw = u16;
    fn from_f32(x: f32) -> f16 {
        f16::from_f32(x)
    }
    fn raw(self) -> u16 {
        self.to_bits()
    }
}

impl Bits for bf16 {
    type Raw = u16;
    fn from_f32(x: f32) -> bf16 {
        bf16::from_f32(x)
    }
    fn raw(self) -> u16 {
        self.to_bits()
    }
}

/// One apply case: `(row_len, row_words, logits_rows, mask_rows)`, vocabulary, index list.
type Case<'a> = (
    (usize, usize, usize, usize),
    Option<usize>,
    Option<&'a [u32]>,
);

/// Runs one apply case on the device and on the CPU and compares every logit's bits.
fn compare<T: Bits>(stream: &Arc<CudaStream>, kernel: &ApplyKernel, case: Case<'_>, seed: u64) {
    let ((row_len, row_words, logits_rows, mask_rows), vocab_size, indices) = case;
    let mut rng = Rng::new(seed);
    let logits: Vec<T> = (0..logits_rows * row_len)
        .map(|_| T::from_f32(rng.below(1000) as f32 / 7.0 - 70.0))
        .collect();
    let mask: Vec<u32> = (0..mask_rows * row_words)
        .map(|_| match rng.below(3) {
            0 => u32::MAX,
            1 => 0,
            _ => rng.next_u32(),
        })
        .collect();
    let mut config = ApplyConfig::new(row_len, row_words);
    if let Some(v) = vocab_size {
        config = config.vocab_size(v);
    }
    if let Some(idx) = indices {
        config = config.indices(idx);
    }
    let mut want = logits.clone();
    apply_bitmask(&mut want, &mask, &config).unwrap();
    let want: Vec<T::Raw> = want.into_iter().map(T::raw).collect();

    let mut bitmask = DeviceBitmask::new(stream, mask_rows + 3, row_words).unwrap();
    bitmask.host_mut(mask_rows).unwrap().copy_from_slice(&mask);
    bitmask.upload(stream, mask_rows).unwrap();
    let raw: Vec<T::Raw> = logits.into_iter().map(T::raw).collect();
    let mut dev = stream.clone_htod(&raw).unwrap();
    // SAFETY: T and T::Raw have the same size and every bit pattern is a valid T.
    let mut view = unsafe { dev.transmute_mut::<T>(raw.len()) }.unwrap();
    kernel
        .apply(stream, &mut view, &mut bitmask, &config)
        .unwrap();
    let got = stream.clone_dtoh(&dev).unwrap();
    assert!(got == want, "device differs from CPU on {case:?}");
}

#[test]
fn the_kernel_equals_the_cpu_reference() {
    let Some((stream, kernel)) = device("the_kernel_equals_the_cpu_reference") else {
        return;
    };
    let cases: [Case<'_>; 7] = [
        ((96, 3, 4, 4), None, None),
        ((100, 3, 3, 3), None, None),
        ((70, 3, 2, 2), None, None),
        ((128, 4, 2, 2), Some(70), None),
        ((151_936, 4748, 3, 3), None, None),
        ((300, 10, 5, 3), None, Some(&[2, 0])),
        ((300, 10, 3, 3), None, Some(&[1, 1])),
    ];
    for (i, case) in cases.into_iter().enumerate() {
        compare::<f32>(&stream, &kernel, case, i as u64);
        compare::<f16>(&stream, &kernel, case, 10 + i as u64);
        compare::<bf16>(&stream, &kernel, case, 20 + i as u64);
    }
}

#[test]
fn device_shape_errors_are_typed() {
    let Some((stream, kernel)) = device("device_shape_errors_are_typed") else {
        return;
    };
    let mut bitmask = DeviceBitmask::new(&stream, 4, 2).unwrap();
    assert!(matches!(
        bitmask.host_mut(5),
        Err(CudaError::Capacity {
            rows: 5,
            capacity: 4
        })
    ));
    assert!(matches!(
        bitmask.upload(&stream, 5),
        Err(CudaError::Capacity { .. })
    ));
    bitmask.upload(&stream, 4).unwrap();
    let mut logits = stream.alloc_zeros::<f32>(3 * 64).unwrap();
    let err = kernel
        .apply(
            &stream,
            &mut logits.as_view_mut(),
            &mut bitmask,
            &ApplyConfig::new(64, 2),
        )
        .unwrap_err();
    assert!(matches!(
        err,
        CudaError::Apply(ApplyError::BatchMismatch {
            logits_rows: 3,
            mask_rows: 4
        })
    ));
    let err = kernel
        .apply(
            &stream,
            &mut logits.as_view_mut(),
            &mut bitmask,
            &ApplyConfig::new(64, 1).indices(&[0]),
        )
        .unwrap_err();
    assert!(matches!(
        err,
        CudaError::RowWords {
            config: 1,
            buffer: 2
        }
    ));
    let repeated = ApplyConfig::new(64, 2).indices(&[0; 5]);
    let err = kernel
        .apply(&stream, &mut logits.as_view_mut(), &mut bitmask, &repeated)
        .unwrap_err();
    assert!(matches!(
        err,
        CudaError::Capacity {
            rows: 5,
            capacity: 4
        }
    ));
}
