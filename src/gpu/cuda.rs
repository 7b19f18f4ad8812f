//! Masks on an NVIDIA GPU with cudarc: a device bitmask buffer `[rows, row_words]` u32 filled
//! from pinned host memory by an async copy, and the apply kernel, compiled once by NVRTC from
//! the CUDA C source embedded here and launched on the caller's stream.
//!
//! The driver and NVRTC are loaded at run time. Without them, or without a device, every entry
//! point returns a [`CudaError`]; nothing panics (cudarc panics when a library is missing, so
//! presence is checked first, and any panic cudarc still raises is contained).
//!
//! A decoding step (sketch; needs a GPU):
//!
//! ```no_run
//! use formwork::gpu::cuda::{open_device, ApplyKernel, DeviceBitmask};
//! use formwork::gpu::{ApplyConfig, BatchFiller, FillConfig};
//! # fn step(matchers: &mut [Box<dyn formwork::Matcher>]) -> Result<(), Box<dyn std::error::Error>> {
//! let ctx = open_device(0)?;
//! let stream = ctx.default_stream();
//! let kernel = ApplyKernel::new(&ctx)?; // NVRTC, once at start-up
//! let (vocab, words, batch) = (151_936, 4748, matchers.len());
//! let mut masks = DeviceBitmask::new(&stream, 256, words)?;
//! let mut logits = stream.alloc_zeros::<f32>(batch * vocab)?;
//! let mut filler = BatchFiller::new(FillConfig::new());
//!
//! let host = masks.host_mut(batch)?;
//! let ((), filled) = filler.fill_during(matchers, host, || { /* launch the forward pass */ });
//! filled?;
//! masks.upload(&stream, batch)?;
//! kernel.apply(&stream, &mut logits.as_view_mut(), &mut masks, &ApplyConfig::new(vocab, words))?;
//! # Ok(()) }
//! ```

use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use cudarc::driver::sys::{cudaError_enum, CUevent_flags, CU_MEMHOSTALLOC_PORTABLE};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaSlice, CudaStream, CudaViewMut, DevicePtrMut,
    DriverError, LaunchArgs, LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use cudarc::nvrtc::{CompileOptions, Ptx};
use half::{bf16, f16};

use super::cpu::Logit;
use super::plan::{ApplyConfig, ApplyError};

/// Why a CUDA operation failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum CudaError {
    /// The CUDA driver library (`libcuda`) could not be loaded.
    NoDriver,
    /// The NVRTC library (`libnvrtc`) could not be loaded.
    NoNvrtc,
    /// There is no device of this ordinal.
    NoDevice {
        /// The ordinal asked for.
        ordinal: usize,
        /// Devices present.
        count: usize,
    },
    /// A driver call failed.
    Driver(DriverError),
    /// NVRTC rejected the kernel source (its log).
    Compile(String),
    /// The shapes of an apply call are wrong.
    Apply(ApplyError),
    /// More rows than the device bitmask holds.
    Capacity {
        /// Rows asked for.
        rows: usize,
        /// Rows the buffer holds.
        capacity: usize,
    },
    /// The apply config's bitmask row width differs from the device bitmask's.
    RowWords {
        /// Words per row in the config.
        config: usize,
        /// Words per row of the buffer.
        buffer: usize,
    },
    /// cudarc panicked (for example a symbol missing from an old driver); the message.
    Panicked(String),
}

impl fmt::Display for CudaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CudaError::NoDriver => {
                f.write_str("the CUDA driver library (libcuda) is not installed")
            }
            CudaError::NoNvrtc => f.write_str("the NVRTC library (libnvrtc) is not installed"),
            CudaError::NoDevice { ordinal, count } => {
                write!(f, "no CUDA device {ordinal} ({count} present)")
            }
            CudaError::Driver(e) => write!(f, "CUDA driver: {e}"),
            CudaError::Compile(log) => write!(f, "NVRTC could not compile the apply kernel: {log}"),
            CudaError::Apply(e) => write!(f, "{e}"),
            CudaError::Capacity { rows, capacity } => {
                write!(
                    f,
                    "{rows} rows asked for, the device bitmask holds {capacity}"
                )
            }
            CudaError::RowWords { config, buffer } => write!(
                f,
                "the apply config has {config} words per bitmask row, the device bitmask {buffer}"
            ),
            CudaError::Panicked(msg) => write!(f, "cudarc panicked: {msg}"),
        }
    }
}

/// A driver or apply failure has the underlying error as its source.
impl std::error::Error for CudaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CudaError::Driver(e) => Some(e),
            CudaError::Apply(e) => Some(e),
            _ => None,
        }
    }
}

impl From<DriverError> for CudaError {
    fn from(e: DriverError) -> CudaError {
        CudaError::Driver(e)
    }
}

impl From<ApplyError> for CudaError {
    fn from(e: ApplyError) -> CudaError {
        CudaError::Apply(e)
    }
}

/// Runs cudarc code, turning a panic into [`CudaError::Panicked`].
fn contained<R>(f: impl FnOnce() -> Result<R, CudaError>) -> Result<R, CudaError> {
    panic::catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|payload| {
        let msg = payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        Err(CudaError::Panicked(msg))
    })
}

/// Opens device `ordinal` (its primary context).
///
/// # Errors
///
/// [`CudaError::NoDriver`] without a driver library, [`CudaError::NoDevice`] without such a
/// device.
pub fn open_device(ordinal: usize) -> Result<Arc<CudaContext>, CudaError> {
    // SAFETY: only tries to load the library.
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(CudaError::NoDriver);
    }
    contained(|| {
        let count = match CudaContext::device_count() {
            Ok(n) => n.max(0) as usize,
            Err(DriverError(cudaError_enum::CUDA_ERROR_NO_DEVICE)) => 0,
            Err(e) => return Err(e.into()),
        };
        if ordinal >= count {
            return Err(CudaError::NoDevice { ordinal, count });
        }
        Ok(CudaContext::new(ordinal)?)
    })
}

/// The apply kernel's CUDA C source. It implements [`ApplyPlan`](super::ApplyPlan)'s rules:
/// `keep_bits` here is `ApplyPlan::keep_bits`, and the launch covers
/// [`ApplyPlan::touched`](super::ApplyPlan::touched) rows mapped by
/// [`ApplyPlan::row`](super::ApplyPlan::row). Logits are handled as raw bits (f16 and bf16 alike
/// as 16-bit words), so no CUDA header is needed.
pub const APPLY_KERNEL_SOURCE: &str = r#"
typedef unsigned int u32;
typedef unsigned short u16;
typedef unsigned long long u64;

// Which of logits 32w .. 32w+32 of a row survive (bit j = logit 32w+j): the row's mask word,
// with bits at or past the vocabulary cleared; 0 past the vocabulary.
__device__ __forceinline__ u32 keep_bits(const u32* mask_row, u64 w, u64 vocab) {
    u64 start = 32ull * w;
    if (start >= vocab) return 0u;
    u64 valid = vocab - start;
    u32 word = mask_row[w];
    return valid < 32ull ? (word & ((1u << valid) - 1u)) : word;
}

// One thread per logit, so a warp covers one mask word: the word load is a broadcast and the
// stores are coalesced. blockIdx.y is the position in the list of touched rows.
template <typename T>
__device__ __forceinline__ void apply(T* logits, const u32* mask, const u32* indices,
                                      u32 use_indices, u64 row_len, u64 row_words, u64 vocab,
                                      T neg_inf) {
    u64 t = (u64)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= row_len) return;
    u64 row = use_indices ? (u64)indices[blockIdx.y] : (u64)blockIdx.y;
    u32 keep = keep_bits(mask + row * row_words, t >> 5, vocab);
    if (!((keep >> (u32)(t & 31ull)) & 1u)) logits[row * row_len + t] = neg_inf;
}

extern "C" __global__ void formwork_apply_bitmask_b32(
    u32* logits, const u32* mask, const u32* indices, u32 use_indices, u64 row_len,
    u64 row_words, u64 vocab, u32 neg_inf) {
    apply<u32>(logits, mask, indices, use_indices, row_len, row_words, vocab, neg_inf);
}

extern "C" __global__ void formwork_apply_bitmask_b16(
    u16* logits, const u32* mask, const u32* indices, u32 use_indices, u64 row_len,
    u64 row_words, u64 vocab, u16 neg_inf) {
    apply<u16>(logits, mask, indices, use_indices, row_len, row_words, vocab, neg_inf);
}
"#;

const KERNEL_B32: &str = "formwork_apply_bitmask_b32";
const KERNEL_B16: &str = "formwork_apply_bitmask_b16";
const THREADS_PER_BLOCK: u32 = 256;
/// The grid's y dimension, one block row per touched logits row.
const MAX_ROWS: usize = 65_535;

/// Compiles [`APPLY_KERNEL_SOURCE`] to PTX with NVRTC (no device needed).
///
/// # Errors
///
/// [`CudaError::NoNvrtc`] without the NVRTC library.
pub fn compile_apply_kernel() -> Result<Ptx, CudaError> {
    // SAFETY: only tries to load the library.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(CudaError::NoNvrtc);
    }
    contained(|| {
        let opts = CompileOptions {
            name: Some("formwork_apply.cu".into()),
            ..Default::default()
        };
        cudarc::nvrtc::compile_ptx_with_opts(APPLY_KERNEL_SOURCE, opts)
            .map_err(|e| CudaError::Compile(e.to_string()))
    })
}

/// A logits element type the kernel handles: `f32`, [`half::f16`], [`half::bf16`].
pub trait DeviceLogit: Logit {
    /// Pushes the kernel's `neg_inf` argument: the bits of `-inf`, as wide as `Self`.
    #[doc(hidden)]
    fn push_neg_inf(args: &mut LaunchArgs<'_>);
}

/// The apply kernel loaded into one context.
#[derive(Debug)]
pub struct ApplyKernel {
    b32: CudaFunction,
    b16: CudaFunction,
}

impl ApplyKernel {
    /// Compiles the kernel with NVRTC and loads it into `ctx`; do it once at start-up.
    pub fn new(ctx: &Arc<CudaContext>) -> Result<ApplyKernel, CudaError> {
        let ptx = compile_apply_kernel()?;
        contained(|| {
            let module = ctx.load_module(ptx)?;
            Ok(ApplyKernel {
                b32: module.load_function(KERNEL_B32)?,
                b16: module.load_function(KERNEL_B16)?,
            })
        })
    }

    /// Enqueues, on `stream`, setting masked logits to `-inf` by the rules of
    /// [`ApplyConfig`], reading the rows last [uploaded](DeviceBitmask::upload) to `mask`.
    /// An index list is copied to the device first (through `mask`'s pinned buffer). Returns
    /// once the work is enqueued; shapes are checked before anything is.
    pub fn apply<T: DeviceLogit>(
        &self,
        stream: &Arc<CudaStream>,
        logits: &mut CudaViewMut<'_, T>,
        mask: &mut DeviceBitmask,
        config: &ApplyConfig<'_>,
    ) -> Result<(), CudaError> {
        let plan = config.plan(logits.len(), mask.uploaded_rows * mask.row_words)?;
        if plan.row_words() != mask.row_words {
            return Err(CudaError::RowWords {
                config: plan.row_words(),
                buffer: mask.row_words,
            });
        }
        let rows = plan.touched();
        if rows > MAX_ROWS {
            return Err(ApplyError::TooManyRows {
                rows,
                max: MAX_ROWS,
            }
            .into());
        }
        if plan.indices().is_some() && rows > mask.capacity {
            // The index buffer holds one entry per row; only repeated indices get here.
            return Err(CudaError::Capacity {
                rows,
                capacity: mask.capacity,
            });
        }
        if rows == 0 || plan.row_len() == 0 {
            return Ok(());
        }
        contained(|| {
            let use_indices = u32::from(plan.indices().is_some());
            if let Some(indices) = plan.indices() {
                mask.stage_indices(stream, indices)?;
            }
            let (row_len, row_words, vocab) = (
                plan.row_len() as u64,
                plan.row_words() as u64,
                plan.vocab_size() as u64,
            );
            let blocks = plan.row_len().div_ceil(THREADS_PER_BLOCK as usize);
            let cfg = LaunchConfig {
                grid_dim: (blocks as u32, rows as u32, 1),
                block_dim: (THREADS_PER_BLOCK, 1, 1),
                shared_mem_bytes: 0,
            };
            let func = if size_of::<T>() == 4 {
                &self.b32
            } else {
                &self.b16
            };
            let mut args = stream.launch_builder(func);
            args.arg(logits)
                .arg(&mask.device)
                .arg(&mask.index_device)
                .arg(&use_indices)
                .arg(&row_len)
                .arg(&row_words)
                .arg(&vocab);
            T::push_neg_inf(&mut args);
            // SAFETY: the arguments match the kernel's parameters, and the plan checked that
            // every row and word the launch reaches exists.
            unsafe { args.launch(cfg) }?;
            Ok(())
        })
    }
}

macro_rules! device_logit {
    ($($t:ty => $bits:ty),*) => {$(
        impl DeviceLogit for $t {
            fn push_neg_inf(args: &mut LaunchArgs<'_>) {
                static NEG_INF: $bits = <$t>::NEG_INFINITY.to_bits();
                args.arg(&NEG_INF);
            }
        }
    )*};
}

device_logit!(f32 => u32, f16 => u16, bf16 => u16);

/// A device bitmask `[rows, row_words]` u32 with its pinned host staging buffer.
///
/// Fill [`host_mut`](DeviceBitmask::host_mut) (e.g. with
/// [`BatchFiller::fill_during`](super::BatchFiller::fill_during)), then
/// [`upload`](DeviceBitmask::upload) enqueues the copy on a stream and returns at once.
pub struct DeviceBitmask {
    host: PinnedHostSlice<u32>,
    device: CudaSlice<u32>,
    index_host: PinnedHostSlice<u32>,
    index_device: CudaSlice<u32>,
    /// Recorded after the last copy out of `host` (resp. `index_host`): the buffer may be
    /// rewritten once it has completed. Two events, so staging the indices of a step does not
    /// wait for that step's bitmask upload.
    host_copied: CudaEvent,
    index_copied: CudaEvent,
    capacity: usize,
    row_words: usize,
    uploaded_rows: usize,
}

impl fmt::Debug for DeviceBitmask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBitmask")
            .field("capacity", &self.capacity)
            .field("row_words", &self.row_words)
            .field("uploaded_rows", &self.uploaded_rows)
            .finish()
    }
}

impl DeviceBitmask {
    /// Buffers for up to `capacity` rows of `row_words` words, on `stream`'s device.
    pub fn new(
        stream: &Arc<CudaStream>,
        capacity: usize,
        row_words: usize,
    ) -> Result<DeviceBitmask, CudaError> {
        contained(|| {
            let ctx = stream.context();
            let len = capacity * row_words;
            Ok(DeviceBitmask {
                host: pinned_zeros(ctx, len)?,
                device: stream.alloc_zeros(len.max(1))?,
                index_host: pinned_zeros(ctx, capacity.max(1))?,
                index_device: stream.alloc_zeros(capacity.max(1))?,
                host_copied: ctx.new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))?,
                index_copied: ctx.new_event(Some(CUevent_flags::CU_EVENT_DISABLE_TIMING))?,
                capacity,
                row_words,
                uploaded_rows: 0,
            })
        })
    }

    /// Rows the buffers hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Words per row.
    pub fn row_words(&self) -> usize {
        self.row_words
    }

    /// The first `rows` rows of the pinned host buffer, to fill; waits until the previous
    /// upload has finished reading them.
    pub fn host_mut(&mut self, rows: usize) -> Result<&mut [u32], CudaError> {
        if rows > self.capacity {
            return Err(CudaError::Capacity {
                rows,
                capacity: self.capacity,
            });
        }
        contained(|| {
            self.host_copied.synchronize()?;
            Ok(&mut self.host.as_mut_slice()?[..rows * self.row_words])
        })
    }

    /// Enqueues the copy of the first `rows` host rows to the device on `stream` (async: the
    /// host buffer is pinned); these are the rows [`ApplyKernel::apply`] reads next.
    pub fn upload(&mut self, stream: &Arc<CudaStream>, rows: usize) -> Result<(), CudaError> {
        if rows > self.capacity {
            return Err(CudaError::Capacity {
                rows,
                capacity: self.capacity,
            });
        }
        contained(|| {
            let len = rows * self.row_words;
            copy_pinned(stream, &self.host, len, &mut self.device, &self.host_copied)?;
            self.uploaded_rows = rows;
            Ok(())
        })
    }

    /// The device rows, as last uploaded.
    pub fn device(&self) -> &CudaSlice<u32> {
        &self.device
    }

    fn stage_indices(
        &mut self,
        stream: &Arc<CudaStream>,
        indices: &[u32],
    ) -> Result<(), CudaError> {
        self.index_copied.synchronize()?;
        self.index_host.as_mut_slice()?[..indices.len()].copy_from_slice(indices);
        let len = indices.len();
        copy_pinned(
            stream,
            &self.index_host,
            len,
            &mut self.index_device,
            &self.index_copied,
        )
    }
}

/// Pinned host memory, zeroed. Not write-combined: matchers read the words they build.
fn pinned_zeros(ctx: &Arc<CudaContext>, len: usize) -> Result<PinnedHostSlice<u32>, CudaError> {
    // SAFETY: the memory is zeroed through the raw pointer before any slice is made of it.
    let mut host =
        unsafe { ctx.alloc_pinned_with_flags::<u32>(len.max(1), CU_MEMHOSTALLOC_PORTABLE) }?;
    let ptr = host.as_mut_ptr()?;
    // SAFETY: `ptr` is valid for `len.max(1)` u32s.
    unsafe { std::ptr::write_bytes(ptr, 0, len.max(1)) };
    Ok(host)
}

/// Enqueues the copy of `host[..len]` into `device` on `stream`, then records `copied`.
fn copy_pinned(
    stream: &Arc<CudaStream>,
    host: &PinnedHostSlice<u32>,
    len: usize,
    device: &mut CudaSlice<u32>,
    copied: &CudaEvent,
) -> Result<(), CudaError> {
    if len == 0 {
        return Ok(());
    }
    let src = &host.as_slice()?[..len];
    let (dst, _written) = device.device_ptr_mut(stream);
    // SAFETY: `dst` holds at least `len` words (buffers are sized for the capacity); the host
    // side is pinned and not rewritten until `copied` has completed (`host_mut`,
    // `stage_indices` and `drop` wait for it).
    unsafe { cudarc::driver::result::memcpy_htod_async(dst, src, stream.cu_stream()) }?;
    copied.record(stream)?;
    Ok(())
}

impl Drop for DeviceBitmask {
    fn drop(&mut self) {
        // The pinned buffers must outlive the copies out of them; an error here has nowhere to go.
        let _ = self.host_copied.synchronize();
        let _ = self.index_copied.synchronize();
    }
}
