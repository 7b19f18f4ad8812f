//! Host memory of numpy arrays and CPU torch tensors, without a numpy or torch build
//! dependency: numpy through `__array_interface__`, torch through `data_ptr()`, `dtype`,
//! `shape` and `is_contiguous()`. Only C-contiguous, writable arrays are accepted, so an
//! address and an element count describe the whole buffer; the caller keeps the Python object
//! (and so the memory) alive while the view is used.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

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
        "<i4" | "=i4" | "torch.int32" => DType::I32,
        "<u4" | "=u4" | "torch.uint32" => DType::U32,
        "<f4" | "=f4" | "torch.float32" => DType::F32,
        "<f2" | "=f2" | "torch.float16" => DType::F16,
        "torch.bfloat16" => DType::BF16,
        _ => DType::Other,
    }
}

/// The host buffer of `obj` (a numpy array or a CPU torch tensor).
pub fn host_array(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<HostArray> {
    let py = obj.py();
    if let Some(interface) = obj.getattr_opt(intern!(py, "__array_interface__"))? {
        return numpy_array(&interface.cast_into::<PyDict>()?, what);
    }
    if obj.getattr_opt(intern!(py, "data_ptr"))?.is_some() {
        return torch_tensor(obj, what);
    }
    Err(PyTypeError::new_err(format!(
        "{what} must be a numpy array or a torch tensor, got {}",
        obj.get_type().name()?
    )))
}

fn numpy_array(interface: &Bound<'_, PyDict>, what: &str) -> PyResult<HostArray> {
    let item = |key: &str| -> PyResult<Bound<'_, PyAny>> {
        interface
            .get_item(key)?
            .ok_or_else(|| PyTypeError::new_err(format!("{what}: __array_interface__ lacks {key}")))
    };
    let (addr, readonly): (usize, bool) = item("data")?.extract()?;
    if readonly {
        return Err(PyValueError::new_err(format!("{what} is read-only")));
    }
    let shape: Vec<usize> = item("shape")?.extract()?;
    let dtype_name: String = item("typestr")?.extract()?;
    let dtype = dtype_of(&dtype_name);
    // numpy reports `strides: None` exactly for C-contiguous arrays.
    if let Some(strides) = interface.get_item("strides")?.filter(|s| !s.is_none()) {
        let itemsize = dtype_name[2..].parse::<usize>().unwrap_or(0);
        let strides: Vec<usize> = strides.extract()?;
        if strides != contiguous_strides(&shape, itemsize) {
            return Err(PyValueError::new_err(format!(
                "{what} must be C-contiguous (np.ascontiguousarray)"
            )));
        }
    }
    Ok(HostArray {
        addr,
        shape,
        dtype,
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

fn torch_tensor(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<HostArray> {
    let py = obj.py();
    let device = obj
        .getattr(intern!(py, "device"))?
        .getattr(intern!(py, "type"))?;
    if device.extract::<String>()? != "cpu" {
        return Err(PyValueError::new_err(format!(
            "{what} must be on the CPU, it is on {device}"
        )));
    }
    if !obj
        .call_method0(intern!(py, "is_contiguous"))?
        .extract::<bool>()?
    {
        return Err(PyValueError::new_err(format!(
            "{what} must be contiguous (.contiguous())"
        )));
    }
    let dtype_name = obj.getattr(intern!(py, "dtype"))?.str()?.to_string();
    let shape: Vec<usize> = obj
        .getattr(intern!(py, "shape"))?
        .cast_into::<PyTuple>()?
        .extract()?;
    let addr: usize = obj.call_method0(intern!(py, "data_ptr"))?.extract()?;
    Ok(HostArray {
        addr,
        shape,
        dtype: dtype_of(&dtype_name),
        dtype_name,
    })
}
