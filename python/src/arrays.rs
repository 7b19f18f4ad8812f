//! Host memory of numpy arrays and CPU torch tensors, without a numpy or torch build
//! dependency: numpy through `__array_interface__`, torch through `data_ptr()`, `dtype`,
//! `shape` and `is_contiguous()`. Only C-contiguous, writable arrays are accepted, so an
//! address and an element count describe the whole buffer; the caller keeps the Python object
//! (and so the memory) alive while the view is used.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

/// Element types the bindings read or write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DType {
    I32,
    U32,
    F32,
    F16,
    BF16,
    /// Anything else (its name, for messages and for the Python-side fallbacks).
    Other,
}

impl DType {
    fn name(self) -> &'static str {
        match self {
            DType::I32 => "int32",
            DType::U32 => "uint32",
            DType::F32 => "float32",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::Other => "other",
        }
    }
}

/// A C-contiguous, writable host buffer.
#[derive(Debug)]
pub struct HostArray {
    pub addr: usize,
    pub shape: Vec<usize>,
    pub dtype: DType,
    pub dtype_name: String,
}

impl HostArray {
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// Rows and row length of a 1-D (one row) or 2-D array.
    pub fn rows_and_width(&self, what: &str) -> PyResult<(usize, usize)> {
        match self.shape[..] {
            [w] => Ok((1, w)),
            [r, w] => Ok((r, w)),
            _ => Err(PyValueError::new_err(format!(
                "{what} must be 1-D or 2-D, got shape {:?}",
                self.shape
            ))),
        }
    }

    /// The buffer as u32 words (int32 or uint32 elements).
    ///
    /// # Safety
    /// The Python object this view came from is alive and not resized for `'a`, and nothing
    /// else accesses the buffer meanwhile.
    pub unsafe fn words_mut<'a>(&self, what: &str) -> PyResult<&'a mut [u32]> {
        if !matches!(self.dtype, DType::I32 | DType::U32) {
            return Err(PyTypeError::new_err(format!(
                "{what} must be int32 (as allocate_token_bitmask makes it), got {}",
                self.dtype_name
            )));
        }
        Ok(unsafe { std::slice::from_raw_parts_mut(self.addr as *mut u32, self.len()) })
    }

    /// The buffer as elements of `T`, whose dtype the caller has checked.
    ///
    /// # Safety
    /// As [`words_mut`](Self::words_mut), and `T` is the array's element type.
    pub unsafe fn elements_mut<'a, T>(&self) -> &'a mut [T] {
        unsafe { std::slice::from_raw_parts_mut(self.addr as *mut T, self.len()) }
    }
}

fn dtype_of(name: &str) -> DType {
    match name {
        "<i4" | "=i4" => DType::I32,
        "<u4" | "=u4" => DType::U32,
        "<f4" | "=f4" => DType::F32,
        "<f2" | "=f2" => DType::F16,
        _ => DType::Other,
    }
}

/// Why an array is not a plain host buffer: the caller raises, or falls back to array
/// operations (a CUDA tensor, a strided view).
pub enum NotHost {
    Device(String),
    Strided,
    Error(PyErr),
}

impl From<PyErr> for NotHost {
    fn from(e: PyErr) -> NotHost {
        NotHost::Error(e)
    }
}

impl NotHost {
    fn into_err(self, what: &str) -> PyErr {
        match self {
            NotHost::Device(device) => {
                PyValueError::new_err(format!("{what} must be on the CPU, it is on {device}"))
            }
            NotHost::Strided => PyValueError::new_err(format!(
                "{what} must be C-contiguous (np.ascontiguousarray / .contiguous())"
            )),
            NotHost::Error(e) => e,
        }
    }
}

/// The host buffer of `obj` (a numpy array or a CPU torch tensor), or an error.
pub fn host_array(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<HostArray> {
    view(obj, what).map_err(|e| e.into_err(what))
}

/// The host buffer of `obj`, or `None` for a tensor on another device or a strided view.
pub fn host_array_or_none(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<Option<HostArray>> {
    match view(obj, what) {
        Ok(a) => Ok(Some(a)),
        Err(NotHost::Device(_) | NotHost::Strided) => Ok(None),
        Err(NotHost::Error(e)) => Err(e),
    }
}

fn view(obj: &Bound<'_, PyAny>, what: &str) -> Result<HostArray, NotHost> {
    let py = obj.py();
    if let Some(interface) = obj.getattr_opt(intern!(py, "__array_interface__"))? {
        return numpy_array(&interface.cast_into::<PyDict>().map_err(PyErr::from)?, what);
    }
    if obj.getattr_opt(intern!(py, "data_ptr"))?.is_some() {
        return torch_tensor(obj);
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be a numpy array or a torch tensor, got {}",
        obj.get_type().name()?
    ))
    .into())
}

fn numpy_array(interface: &Bound<'_, PyDict>, what: &str) -> Result<HostArray, NotHost> {
    let item = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        interface
            .get_item(key)?
            .ok_or_else(|| PyTypeError::new_err(format!("{what}: __array_interface__ lacks {key}")))
    };
    let (addr, readonly): (usize, bool) = item("data")?.extract()?;
    if readonly {
        return Err(PyValueError::new_err(format!("{what} is read-only")).into());
    }
    let shape: Vec<usize> = item("shape")?.extract()?;
    let dtype_name: String = item("typestr")?.extract()?;
    // numpy reports `strides: None` exactly for C-contiguous arrays.
    if let Some(strides) = interface.get_item("strides")?.filter(|s| !s.is_none()) {
        let itemsize = dtype_name[2..].parse::<usize>().unwrap_or(0);
        let strides: Vec<usize> = strides.extract()?;
        if strides != contiguous_strides(&shape, itemsize) {
            return Err(NotHost::Strided);
        }
    }
    Ok(HostArray {
        addr,
        shape,
        dtype: dtype_of(&dtype_name),
        dtype_name,
    })
}

fn contiguous_strides(shape: &[usize], itemsize: usize) -> Vec<usize> {
    let mut strides = vec![0; shape.len()];
    let mut step = itemsize;
    for (s, &n) in strides.iter_mut().zip(shape).rev() {
        *s = step;
        step *= n;
    }
    strides
}

/// torch's dtype objects, compared by identity (formatting a dtype's name costs more than
/// the rest of a small call).
fn torch_dtype(dtype: &Bound<'_, PyAny>) -> PyResult<DType> {
    static DTYPES: PyOnceLock<Vec<(Py<PyAny>, DType)>> = PyOnceLock::new();
    let py = dtype.py();
    let known = DTYPES.get_or_try_init(py, || -> PyResult<_> {
        let torch = py.import("torch")?;
        [
            ("int32", DType::I32),
            ("uint32", DType::U32),
            ("float32", DType::F32),
            ("float16", DType::F16),
            ("bfloat16", DType::BF16),
        ]
        .into_iter()
        .filter_map(|(name, d)| torch.getattr(name).ok().map(|t| Ok((t.unbind(), d))))
        .collect()
    })?;
    Ok(known
        .iter()
        .find(|(t, _)| dtype.is(t))
        .map_or(DType::Other, |&(_, d)| d))
}

fn torch_tensor(obj: &Bound<'_, PyAny>) -> Result<HostArray, NotHost> {
    let py = obj.py();
    let device = obj
        .getattr(intern!(py, "device"))?
        .getattr(intern!(py, "type"))?;
    let device: String = device.extract()?;
    if device != "cpu" {
        return Err(NotHost::Device(device));
    }
    if !obj
        .call_method0(intern!(py, "is_contiguous"))?
        .extract::<bool>()?
    {
        return Err(NotHost::Strided);
    }
    let dtype_obj = obj.getattr(intern!(py, "dtype"))?;
    let dtype = torch_dtype(&dtype_obj)?;
    let dtype_name = match dtype {
        DType::Other => dtype_obj.str()?.to_string(),
        known => format!("torch.{}", known.name()),
    };
    let shape: Vec<usize> = obj.getattr(intern!(py, "shape"))?.extract()?;
    let addr: usize = obj.call_method0(intern!(py, "data_ptr"))?.extract()?;
    Ok(HostArray {
        addr,
        shape,
        dtype,
        dtype_name,
    })
}
