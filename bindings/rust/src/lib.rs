//! Rust bindings over gexec's C API (`libgexec_c`): TVM graph-executor models.
//!
//! A thin layer over the versioned function table of `<gexec/c_api.h>`: handles that
//! release themselves on `Drop`, errors as [`Error`] (the C status's code and message),
//! tensors as slices with a shape, their element type checked against the model's dtype.
//!
//! ```no_run
//! let model = gexec::Model::load_files(None, "graph.json", "lib.so", Some("params.bin".as_ref()))?;
//! let mut ex = model.executor()?;
//! let x = ex.input_index("x")?.expect("no input x");
//! ex.set_input(x, &[0.5f32, -1.0, 2.0, 0.25], &[1, 4])?;
//! ex.run()?;
//! let y: Vec<f32> = ex.output(0)?;
//! # Ok::<(), gexec::Error>(())
//! ```
//!
//! Thread safety follows the C API: [`Runtime`] and [`Model`] are `Send + Sync`; an
//! [`Executor`] is `Send` but not `Sync` (one thread at a time; make one per thread).

pub mod ffi;

use std::ffi::{CStr, CString};
use std::fmt;
use std::os::raw::{c_char, c_int, c_void};
use std::path::Path;
use std::ptr::{self, NonNull};

/// The codes of [`Error::code`]: `gexec_errc`'s values.
pub mod errc {
    pub const INVALID_JSON: i32 = 1;
    pub const INVALID_GRAPH: i32 = 2;
    pub const INVALID_DTYPE: i32 = 3;
    pub const INVALID_PARAMS: i32 = 4;
    pub const INVALID_MODULE: i32 = 5;
    pub const INVALID_ARGUMENT: i32 = 6;
    pub const SHAPE_MISMATCH: i32 = 7;
    pub const DTYPE_MISMATCH: i32 = 8;
    pub const DEVICE_MISMATCH: i32 = 9;
    pub const MISALIGNED: i32 = 10;
    pub const NOT_FOUND: i32 = 11;
    pub const SYMBOL_NOT_FOUND: i32 = 12;
    pub const KERNEL_FAILED: i32 = 13;
    pub const IO: i32 = 14;
    pub const UNSUPPORTED: i32 = 15;
    pub const OUT_OF_MEMORY: i32 = 16;
    pub const BUSY: i32 = 17;
    pub const INVALID_NPY: i32 = 18;
    pub const NO_DEVICE: i32 = 19;
    pub const DEVICE_ERROR: i32 = 20;
    /// A failure that is not gexec's own.
    pub const UNKNOWN: i32 = 1000;
}

/// A failed call: the C status's code (one of [`errc`]) and message. Errors found by the
/// binding itself before calling C (a slice that does not fill its shape, an element type
/// that is not the output's dtype, a path with a NUL byte) use the same codes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    code: i32,
    message: String,
}

impl Error {
    fn new(code: i32, message: impl Into<String>) -> Error {
        Error {
            code,
            message: message.into(),
        }
    }
    /// One of [`errc`]'s values.
    pub fn code(&self) -> i32 {
        self.code
    }
    /// What failed, as the C library worded it.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gexec error {}: {}", self.code, self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

type Api = &'static ffi::gexec_api;

/// The table of version 2, or an error when the library is older.
fn api() -> Result<Api> {
    // SAFETY: gexec_get_api_base never returns NULL; the table is static.
    unsafe {
        let base = ffi::gexec_get_api_base();
        let table = ((*base).get_api)(ffi::GEXEC_C_API_VERSION);
        if table.is_null() {
            Err(Error::new(
                errc::UNSUPPORTED,
                format!(
                    "libgexec_c has no table of version {}",
                    ffi::GEXEC_C_API_VERSION
                ),
            ))
        } else {
            Ok(&*table)
        }
    }
}

/// Turns a status into a result, releasing it.
fn check(api: Api, status: *mut ffi::gexec_status) -> Result<()> {
    if status.is_null() {
        return Ok(());
    }
    // SAFETY: a non-NULL status from the table, owned by us until released.
    unsafe {
        let code = (api.status_code)(status);
        let message = CStr::from_ptr((api.status_message)(status))
            .to_string_lossy()
            .into_owned();
        (api.status_release)(status);
        Err(Error::new(code, message))
    }
}

fn invalid(message: impl Into<String>) -> Error {
    Error::new(errc::INVALID_ARGUMENT, message)
}

fn c_string(s: &[u8]) -> Result<CString> {
    CString::new(s).map_err(|_| invalid("a string or path holds a NUL byte"))
}

#[cfg(unix)]
fn c_path(p: &Path) -> Result<CString> {
    use std::os::unix::ffi::OsStrExt;
    c_string(p.as_os_str().as_bytes())
}

#[cfg(not(unix))]
fn c_path(p: &Path) -> Result<CString> {
    match p.to_str() {
        Some(s) => c_string(s.as_bytes()),
        None => Err(invalid(format!("path {:?} is not UTF-8", p))),
    }
}

fn c_index(index: usize) -> Result<c_int> {
    c_int::try_from(index).map_err(|_| invalid(format!("index {} is out of range", index)))
}

/// gexec's version, "major.minor.patch".
pub fn version() -> String {
    // SAFETY: the base is static and its string lives as long as the library.
    unsafe {
        let base = ffi::gexec_get_api_base();
        CStr::from_ptr(((*base).get_version_string)())
            .to_string_lossy()
            .into_owned()
    }
}

/// A DLPack data type (`DLDataType`): code, bits, lanes.
pub use ffi::DLDataType as DataType;

impl DataType {
    pub const INT8: DataType = DataType {
        code: 0,
        bits: 8,
        lanes: 1,
    };
    pub const INT16: DataType = DataType {
        code: 0,
        bits: 16,
        lanes: 1,
    };
    pub const INT32: DataType = DataType {
        code: 0,
        bits: 32,
        lanes: 1,
    };
    pub const INT64: DataType = DataType {
        code: 0,
        bits: 64,
        lanes: 1,
    };
    pub const UINT8: DataType = DataType {
        code: 1,
        bits: 8,
        lanes: 1,
    };
    pub const UINT16: DataType = DataType {
        code: 1,
        bits: 16,
        lanes: 1,
    };
    pub const UINT32: DataType = DataType {
        code: 1,
        bits: 32,
        lanes: 1,
    };
    pub const UINT64: DataType = DataType {
        code: 1,
        bits: 64,
        lanes: 1,
    };
    pub const FLOAT32: DataType = DataType {
        code: 2,
        bits: 32,
        lanes: 1,
    };
    pub const FLOAT64: DataType = DataType {
        code: 2,
        bits: 64,
        lanes: 1,
    };

    /// Bytes of one element (lanes included), rounded up.
    pub fn size(&self) -> usize {
        (self.bits as usize * self.lanes as usize + 7) / 8
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = match self.code {
            0 => "int",
            1 => "uint",
            2 => "float",
            4 => "bfloat",
            5 => "complex",
            6 => "bool",
            _ => "code",
        };
        write!(f, "{}{}", name, self.bits)?;
        if self.lanes != 1 {
            write!(f, "x{}", self.lanes)?;
        }
        Ok(())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// The element types a slice may hold; each knows its DLPack dtype.
pub trait Element: Copy + sealed::Sealed {
    const DTYPE: DataType;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DataType = DataType::$d;
        }
    )*};
}
element!(i8 => INT8, i16 => INT16, i32 => INT32, i64 => INT64, u8 => UINT8, u16 => UINT16,
         u32 => UINT32, u64 => UINT64, f32 => FLOAT32, f64 => FLOAT64);

/// An input's or output's dtype and shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    pub dtype: DataType,
    pub shape: Vec<i64>,
}

impl TensorInfo {
    /// The number of elements (the product of the shape).
    pub fn num_elements(&self) -> usize {
        self.shape.iter().map(|&d| d.max(0) as usize).product()
    }
}

fn elements_of(shape: &[i64]) -> Result<usize> {
    let mut n: usize = 1;
    for &d in shape {
        let d = usize::try_from(d)
            .map_err(|_| invalid(format!("negative dimension in shape {:?}", shape)))?;
        n = n
            .checked_mul(d)
            .ok_or_else(|| invalid(format!("shape {:?} overflows", shape)))?;
    }
    Ok(n)
}

/// A thread pool of its own for the models loaded through it.
pub struct Runtime {
    ptr: NonNull<ffi::gexec_runtime>,
    api: Api,
}

// SAFETY: the C API makes runtimes usable from any number of threads at once.
unsafe impl Send for Runtime {}
unsafe impl Sync for Runtime {}

impl Runtime {
    /// A runtime with `num_threads` threads (0: one per core).
    pub fn new(num_threads: usize) -> Result<Runtime> {
        let api = api()?;
        let n = c_index(num_threads)?;
        let mut out = ptr::null_mut();
        check(api, unsafe { (api.runtime_create)(n, &mut out) })?;
        Ok(Runtime {
            ptr: NonNull::new(out).expect("runtime_create gave NULL"),
            api,
        })
    }

    fn raw(runtime: Option<&Runtime>) -> *mut ffi::gexec_runtime {
        runtime.map_or(ptr::null_mut(), |r| r.ptr.as_ptr())
    }
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gexec::Runtime({:p})", self.ptr.as_ptr())
    }
}

impl Drop for Runtime {
    /// Models loaded through it keep it alive.
    fn drop(&mut self) {
        let _ = check(self.api, unsafe {
            (self.api.runtime_release)(self.ptr.as_ptr())
        });
    }
}

/// A loaded model: graph, kernels and parameters, shared by its executors.
pub struct Model {
    ptr: NonNull<ffi::gexec_model>,
    api: Api,
}

// SAFETY: the C API makes models usable from any number of threads at once.
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

impl Model {
    fn wrap(api: Api, status: *mut ffi::gexec_status, out: *mut ffi::gexec_model) -> Result<Model> {
        check(api, status)?;
        Ok(Model {
            ptr: NonNull::new(out).expect("a model loader gave NULL"),
            api,
        })
    }

    /// TVM's three files: the graph JSON, the kernel library and the parameter blob
    /// (`None`: no parameters). `runtime` `None` is the process default.
    pub fn load_files<G: AsRef<Path>, L: AsRef<Path>>(
        runtime: Option<&Runtime>,
        graph: G,
        library: L,
        params: Option<&Path>,
    ) -> Result<Model> {
        let api = api()?;
        let graph = c_path(graph.as_ref())?;
        let library = c_path(library.as_ref())?;
        let params = match params {
            Some(p) => Some(c_path(p)?),
            None => None,
        };
        let params_ptr = params.as_ref().map_or(ptr::null(), |p| p.as_ptr());
        let mut out = ptr::null_mut();
        let status = unsafe {
            (api.model_load_files)(
                Runtime::raw(runtime),
                graph.as_ptr(),
                library.as_ptr(),
                params_ptr,
                &mut out,
            )
        };
        Model::wrap(api, status, out)
    }

    /// A single-file library made by TVM's `export_library`.
    pub fn load_library<L: AsRef<Path>>(runtime: Option<&Runtime>, library: L) -> Result<Model> {
        let api = api()?;
        let library = c_path(library.as_ref())?;
        let mut out = ptr::null_mut();
        let status =
            unsafe { (api.model_load_library)(Runtime::raw(runtime), library.as_ptr(), &mut out) };
        Model::wrap(api, status, out)
    }

    /// From memory: the graph JSON, the parameter blob (may be empty) and the path of the
    /// kernel library. The bytes are copied or parsed before it returns.
    pub fn load_memory<L: AsRef<Path>>(
        runtime: Option<&Runtime>,
        graph_json: &[u8],
        params: &[u8],
        library: L,
    ) -> Result<Model> {
        let api = api()?;
        let library = c_path(library.as_ref())?;
        let params_ptr = if params.is_empty() {
            ptr::null()
        } else {
            params.as_ptr() as *const c_void
        };
        let mut out = ptr::null_mut();
        let status = unsafe {
            (api.model_load_memory)(
                Runtime::raw(runtime),
                graph_json.as_ptr() as *const c_char,
                graph_json.len(),
                params_ptr,
                params.len(),
                library.as_ptr(),
                &mut out,
            )
        };
        Model::wrap(api, status, out)
    }

    /// Bytes of parameters the model holds, once for all its executors.
    pub fn param_bytes(&self) -> Result<u64> {
        let mut out = 0u64;
        check(self.api, unsafe {
            (self.api.model_param_bytes)(self.ptr.as_ptr(), &mut out)
        })?;
        Ok(out)
    }

    /// A new executor: its own activations, the model's parameters shared. The executor
    /// keeps what it needs of the model alive, so it may outlive this handle.
    pub fn executor(&self) -> Result<Executor> {
        let mut out = ptr::null_mut();
        check(self.api, unsafe {
            (self.api.executor_create)(self.ptr.as_ptr(), &mut out)
        })?;
        Ok(Executor {
            ptr: NonNull::new(out).expect("executor_create gave NULL"),
            api: self.api,
        })
    }
}

impl fmt::Debug for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gexec::Model({:p})", self.ptr.as_ptr())
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        let _ = check(self.api, unsafe {
            (self.api.model_release)(self.ptr.as_ptr())
        });
    }
}

/// Runs a model: inputs in, `run`, outputs out. One thread at a time.
pub struct Executor {
    ptr: NonNull<ffi::gexec_executor>,
    api: Api,
}

// SAFETY: an executor may move between threads; it is not Sync (one thread at a time).
unsafe impl Send for Executor {}

impl Executor {
    fn count(
        &self,
        f: unsafe extern "C" fn(*const ffi::gexec_executor, *mut c_int) -> *mut ffi::gexec_status,
    ) -> Result<usize> {
        let mut n: c_int = 0;
        check(self.api, unsafe { f(self.ptr.as_ptr(), &mut n) })?;
        Ok(n as usize)
    }

    fn name(
        &self,
        f: unsafe extern "C" fn(
            *const ffi::gexec_executor,
            c_int,
            *mut *const c_char,
        ) -> *mut ffi::gexec_status,
        index: usize,
    ) -> Result<String> {
        let mut out: *const c_char = ptr::null();
        check(self.api, unsafe {
            f(self.ptr.as_ptr(), c_index(index)?, &mut out)
        })?;
        Ok(unsafe { CStr::from_ptr(out) }
            .to_string_lossy()
            .into_owned())
    }

    fn index(
        &self,
        f: unsafe extern "C" fn(
            *const ffi::gexec_executor,
            *const c_char,
            *mut c_int,
        ) -> *mut ffi::gexec_status,
        name: &str,
    ) -> Result<Option<usize>> {
        let name = c_string(name.as_bytes())?;
        let mut out: c_int = -1;
        check(self.api, unsafe {
            f(self.ptr.as_ptr(), name.as_ptr(), &mut out)
        })?;
        Ok(if out < 0 { None } else { Some(out as usize) })
    }

    fn info(
        &self,
        f: unsafe extern "C" fn(
            *const ffi::gexec_executor,
            c_int,
            *mut DataType,
            *mut c_int,
            *mut *const i64,
        ) -> *mut ffi::gexec_status,
        index: usize,
    ) -> Result<TensorInfo> {
        let mut dtype = DataType::default();
        let mut ndim: c_int = 0;
        let mut shape: *const i64 = ptr::null();
        check(self.api, unsafe {
            f(
                self.ptr.as_ptr(),
                c_index(index)?,
                &mut dtype,
                &mut ndim,
                &mut shape,
            )
        })?;
        let shape = if ndim > 0 {
            unsafe { std::slice::from_raw_parts(shape, ndim as usize) }.to_vec()
        } else {
            Vec::new()
        };
        Ok(TensorInfo { dtype, shape })
    }

    /// Inputs count parameters too, as in TVM.
    pub fn num_inputs(&self) -> Result<usize> {
        self.count(self.api.executor_num_inputs)
    }
    pub fn num_outputs(&self) -> Result<usize> {
        self.count(self.api.executor_num_outputs)
    }
    pub fn input_name(&self, index: usize) -> Result<String> {
        self.name(self.api.executor_input_name, index)
    }
    /// Outputs are named "<node>:<index>".
    pub fn output_name(&self, index: usize) -> Result<String> {
        self.name(self.api.executor_output_name, index)
    }
    /// The index of an input, or `None` when there is none of that name.
    pub fn input_index(&self, name: &str) -> Result<Option<usize>> {
        self.index(self.api.executor_input_index, name)
    }
    pub fn output_index(&self, name: &str) -> Result<Option<usize>> {
        self.index(self.api.executor_output_index, name)
    }
    pub fn input_info(&self, index: usize) -> Result<TensorInfo> {
        self.info(self.api.executor_input_info, index)
    }
    pub fn output_info(&self, index: usize) -> Result<TensorInfo> {
        self.info(self.api.executor_output_info, index)
    }

    fn tensor<T: Element>(data: &[T], shape: &[i64]) -> Result<ffi::DLTensor> {
        let n = elements_of(shape)?;
        if n != data.len() {
            return Err(invalid(format!(
                "{} values do not fill shape {:?} ({} elements)",
                data.len(),
                shape,
                n
            )));
        }
        Ok(ffi::DLTensor {
            data: data.as_ptr() as *mut c_void,
            device: ffi::DLDevice {
                device_type: ffi::KDL_CPU,
                device_id: 0,
            },
            ndim: c_int::try_from(shape.len()).map_err(|_| invalid("too many dimensions"))?,
            dtype: T::DTYPE,
            shape: shape.as_ptr() as *mut i64,
            strides: ptr::null_mut(),
            byte_offset: 0,
        })
    }

    /// Copies `data`, of shape `shape`, into input `index`. The C library refuses a dtype
    /// (`T`) or shape other than the input's (DTYPE_MISMATCH, SHAPE_MISMATCH); a slice
    /// whose length is not the shape's element count is refused here (INVALID_ARGUMENT).
    pub fn set_input<T: Element>(&mut self, index: usize, data: &[T], shape: &[i64]) -> Result<()> {
        let t = Executor::tensor(data, shape)?;
        check(self.api, unsafe {
            (self.api.executor_set_input)(self.ptr.as_ptr(), c_index(index)?, &t)
        })
    }

    /// Makes input `index` read `data` without a copy until it is set again.
    ///
    /// # Safety
    /// `data` must stay alive and unchanged for every later `run` until the input is set
    /// again or the executor dropped; it must be 64-byte aligned (else MISALIGNED).
    pub unsafe fn set_input_zero_copy<T: Element>(
        &mut self,
        index: usize,
        data: &[T],
        shape: &[i64],
    ) -> Result<()> {
        let t = Executor::tensor(data, shape)?;
        check(
            self.api,
            (self.api.executor_set_input_zero_copy)(self.ptr.as_ptr(), c_index(index)?, &t),
        )
    }

    /// Runs the graph.
    pub fn run(&mut self) -> Result<()> {
        check(self.api, unsafe {
            (self.api.executor_run)(self.ptr.as_ptr())
        })
    }

    fn expect_dtype<T: Element>(what: &str, index: usize, dtype: DataType) -> Result<()> {
        if dtype != T::DTYPE {
            return Err(Error::new(
                errc::DTYPE_MISMATCH,
                format!("{} {} is {}, not {}", what, index, dtype, T::DTYPE),
            ));
        }
        Ok(())
    }

    /// Copies output `index` into `out`: `T` must be the output's dtype (else
    /// DTYPE_MISMATCH) and `out` at least its size (else INVALID_ARGUMENT, "too small").
    pub fn copy_output<T: Element>(&mut self, index: usize, out: &mut [T]) -> Result<()> {
        Executor::expect_dtype::<T>("output", index, self.output_info(index)?.dtype)?;
        let status = unsafe {
            (self.api.executor_copy_output)(
                self.ptr.as_ptr(),
                c_index(index)?,
                out.as_mut_ptr() as *mut c_void,
                std::mem::size_of_val(out),
            )
        };
        check(self.api, status)
    }

    /// Output `index` copied into a new vector.
    pub fn output<T: Element>(&mut self, index: usize) -> Result<Vec<T>> {
        let info = self.output_info(index)?;
        Executor::expect_dtype::<T>("output", index, info.dtype)?;
        let n = info.num_elements();
        let mut out: Vec<T> = Vec::with_capacity(n);
        let status = unsafe {
            (self.api.executor_copy_output)(
                self.ptr.as_ptr(),
                c_index(index)?,
                out.as_mut_ptr() as *mut c_void,
                n * std::mem::size_of::<T>(),
            )
        };
        check(self.api, status)?;
        // SAFETY: the library wrote all n elements.
        unsafe { out.set_len(n) };
        Ok(out)
    }

    /// Output `index` without a copy, with its shape; the borrow ends before the next
    /// `run` or the next view of the executor, as the C API requires.
    pub fn output_view<T: Element>(&mut self, index: usize) -> Result<(&[T], Vec<i64>)> {
        let mut view: *const ffi::DLTensor = ptr::null();
        check(self.api, unsafe {
            (self.api.executor_get_output)(self.ptr.as_ptr(), c_index(index)?, &mut view)
        })?;
        let t = unsafe { &*view };
        Executor::expect_dtype::<T>("output", index, t.dtype)?;
        if t.device.device_type != ffi::KDL_CPU {
            return Err(Error::new(
                errc::DEVICE_MISMATCH,
                format!("output {} is not in host memory", index),
            ));
        }
        let shape = if t.ndim > 0 {
            unsafe { std::slice::from_raw_parts(t.shape, t.ndim as usize) }.to_vec()
        } else {
            Vec::new()
        };
        if !t.strides.is_null() {
            let mut expected = 1i64;
            let strides = unsafe { std::slice::from_raw_parts(t.strides, t.ndim as usize) };
            for (d, s) in shape.iter().zip(strides).rev() {
                if *d != 1 && *s != expected {
                    return Err(Error::new(
                        errc::UNSUPPORTED,
                        format!("output {} is not compact", index),
                    ));
                }
                expected *= *d;
            }
        }
        let n = elements_of(&shape)?;
        let data = unsafe { (t.data as *const u8).add(t.byte_offset as usize) as *const T };
        let slice = if n == 0 {
            &[][..]
        } else {
            unsafe { std::slice::from_raw_parts(data, n) }
        };
        Ok((slice, shape))
    }

    /// Parameters into this executor's own memory: a blob of `tvm.runtime.save_param_dict`.
    /// A failed load leaves the old parameters.
    pub fn load_params(&mut self, bytes: &[u8]) -> Result<()> {
        check(self.api, unsafe {
            (self.api.executor_load_params)(
                self.ptr.as_ptr(),
                bytes.as_ptr() as *const c_void,
                bytes.len(),
            )
        })
    }

    /// Parameters from a file (blob, .safetensors, .npz).
    pub fn load_params_file<P: AsRef<Path>>(&mut self, path: P) -> Result<()> {
        let path = c_path(path.as_ref())?;
        check(self.api, unsafe {
            (self.api.executor_load_params_file)(self.ptr.as_ptr(), path.as_ptr())
        })
    }
}

impl fmt::Debug for Executor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "gexec::Executor({:p})", self.ptr.as_ptr())
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        let _ = check(self.api, unsafe {
            (self.api.executor_release)(self.ptr.as_ptr())
        });
    }
}
