//! The C declarations of `<gexec/c_api.h>` (table version 2) and of the part of
//! `<dlpack/dlpack.h>` that crosses the border, declared by hand.
#![allow(non_camel_case_types, dead_code)]

use std::os::raw::{c_char, c_int, c_void};

/// The table version these declarations describe (`GEXEC_C_API_VERSION`).
pub const GEXEC_C_API_VERSION: u32 = 2;

pub const KDL_CPU: i32 = 1;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DLDevice {
    pub device_type: i32,
    pub device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DLDataType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

#[repr(C)]
pub struct DLTensor {
    pub data: *mut c_void,
    pub device: DLDevice,
    pub ndim: i32,
    pub dtype: DLDataType,
    pub shape: *mut i64,
    pub strides: *mut i64,
    pub byte_offset: u64,
}

#[repr(C)]
pub struct gexec_status {
    _private: [u8; 0],
}
#[repr(C)]
pub struct gexec_runtime {
    _private: [u8; 0],
}
#[repr(C)]
pub struct gexec_model {
    _private: [u8; 0],
}
#[repr(C)]
pub struct gexec_executor {
    _private: [u8; 0],
}

type St = *mut gexec_status;

/// `gexec_api`: members in the header's order; never reorder.
#[repr(C)]
pub struct gexec_api {
    // ---- version 1 ----
    pub status_code: unsafe extern "C" fn(*const gexec_status) -> c_int,
    pub status_message: unsafe extern "C" fn(*const gexec_status) -> *const c_char,
    pub status_release: unsafe extern "C" fn(*mut gexec_status),

    pub runtime_create: unsafe extern "C" fn(c_int, *mut *mut gexec_runtime) -> St,
    pub runtime_release: unsafe extern "C" fn(*mut gexec_runtime) -> St,

    pub model_load_files: unsafe extern "C" fn(
        *mut gexec_runtime,
        *const c_char,
        *const c_char,
        *const c_char,
        *mut *mut gexec_model,
    ) -> St,
    pub model_load_library:
        unsafe extern "C" fn(*mut gexec_runtime, *const c_char, *mut *mut gexec_model) -> St,
    pub model_load_memory: unsafe extern "C" fn(
        *mut gexec_runtime,
        *const c_char,
        usize,
        *const c_void,
        usize,
        *const c_char,
        *mut *mut gexec_model,
    ) -> St,
    pub model_release: unsafe extern "C" fn(*mut gexec_model) -> St,

    pub executor_create: unsafe extern "C" fn(*const gexec_model, *mut *mut gexec_executor) -> St,
    pub executor_release: unsafe extern "C" fn(*mut gexec_executor) -> St,

    pub executor_num_inputs: unsafe extern "C" fn(*const gexec_executor, *mut c_int) -> St,
    pub executor_num_outputs: unsafe extern "C" fn(*const gexec_executor, *mut c_int) -> St,
    pub executor_input_name:
        unsafe extern "C" fn(*const gexec_executor, c_int, *mut *const c_char) -> St,
    pub executor_output_name:
        unsafe extern "C" fn(*const gexec_executor, c_int, *mut *const c_char) -> St,
    pub executor_input_index:
        unsafe extern "C" fn(*const gexec_executor, *const c_char, *mut c_int) -> St,
    pub executor_output_index:
        unsafe extern "C" fn(*const gexec_executor, *const c_char, *mut c_int) -> St,
    pub executor_input_info: unsafe extern "C" fn(
        *const gexec_executor,
        c_int,
        *mut DLDataType,
        *mut c_int,
        *mut *const i64,
    ) -> St,
    pub executor_output_info: unsafe extern "C" fn(
        *const gexec_executor,
        c_int,
        *mut DLDataType,
        *mut c_int,
        *mut *const i64,
    ) -> St,

    pub executor_set_input: unsafe extern "C" fn(*mut gexec_executor, c_int, *const DLTensor) -> St,
    pub executor_set_input_zero_copy:
        unsafe extern "C" fn(*mut gexec_executor, c_int, *const DLTensor) -> St,
    pub executor_run: unsafe extern "C" fn(*mut gexec_executor) -> St,
    pub executor_get_output:
        unsafe extern "C" fn(*mut gexec_executor, c_int, *mut *const DLTensor) -> St,
    pub executor_copy_output:
        unsafe extern "C" fn(*mut gexec_executor, c_int, *mut c_void, usize) -> St,
    pub executor_load_params: unsafe extern "C" fn(*mut gexec_executor, *const c_void, usize) -> St,
    pub executor_load_params_file: unsafe extern "C" fn(*mut gexec_executor, *const c_char) -> St,

    // ---- version 2 ----
    pub model_param_bytes: unsafe extern "C" fn(*const gexec_model, *mut u64) -> St,
}

#[repr(C)]
pub struct gexec_api_base {
    pub get_api: unsafe extern "C" fn(u32) -> *const gexec_api,
    pub get_version_string: unsafe extern "C" fn() -> *const c_char,
}

extern "C" {
    pub fn gexec_get_api_base() -> *const gexec_api_base;
}
