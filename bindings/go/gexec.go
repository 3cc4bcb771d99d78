// Package gexec binds gexec's C API (libgexec_c): TVM graph-executor models from Go.
//
// A thin layer over the versioned function table of <gexec/c_api.h>. Handles are closed
// explicitly with Close (no finalizers); errors are *Error values carrying the C status's
// code and message; tensors are slices with a shape, their element type checked against
// the model's dtype.
//
// Build flags come from the environment: CGO_CFLAGS="-I<gexec>/include" (and DLPack's
// include directory when it is not /usr/include) and CGO_LDFLAGS="-L<dir of
// libgexec_c.so> -Wl,-rpath,<same dir>".
//
// Thread safety follows the C API: a Runtime or a Model may be used from many goroutines
// at once; an Executor by one goroutine at a time (make one per goroutine).
package gexec

/*
#cgo LDFLAGS: -lgexec_c
#include <stdlib.h>
#include <gexec/c_api.h>

static const gexec_api* gx_api(void) { return gexec_get_api_base()->get_api(GEXEC_C_API_VERSION); }
static const char* gx_version(void) { return gexec_get_api_base()->get_version_string(); }

static int gx_status_code(const gexec_api* a, gexec_status* s) { return a->status_code(s); }
static const char* gx_status_message(const gexec_api* a, gexec_status* s) { return a->status_message(s); }
static void gx_status_release(const gexec_api* a, gexec_status* s) { a->status_release(s); }

static gexec_status* gx_runtime_create(const gexec_api* a, int n, gexec_runtime** out) { return a->runtime_create(n, out); }
static gexec_status* gx_runtime_release(const gexec_api* a, gexec_runtime* r) { return a->runtime_release(r); }

static gexec_status* gx_model_load_files(const gexec_api* a, gexec_runtime* r, const char* g, const char* l, const char* p,
                                         gexec_model** out) {
  return a->model_load_files(r, g, l, p, out);
}
static gexec_status* gx_model_load_library(const gexec_api* a, gexec_runtime* r, const char* l, gexec_model** out) {
  return a->model_load_library(r, l, out);
}
static gexec_status* gx_model_load_memory(const gexec_api* a, gexec_runtime* r, const void* g, size_t gl, const void* p,
                                          size_t pl, const char* l, gexec_model** out) {
  return a->model_load_memory(r, (const char*)g, gl, p, pl, l, out);
}
static gexec_status* gx_model_release(const gexec_api* a, gexec_model* m) { return a->model_release(m); }
static gexec_status* gx_model_param_bytes(const gexec_api* a, gexec_model* m, uint64_t* out) {
  return a->model_param_bytes(m, out);
}

static gexec_status* gx_executor_create(const gexec_api* a, gexec_model* m, gexec_executor** out) {
  return a->executor_create(m, out);
}
static gexec_status* gx_executor_release(const gexec_api* a, gexec_executor* e) { return a->executor_release(e); }
static gexec_status* gx_num(const gexec_api* a, gexec_executor* e, int outputs, int* out) {
  return outputs ? a->executor_num_outputs(e, out) : a->executor_num_inputs(e, out);
}
static gexec_status* gx_name(const gexec_api* a, gexec_executor* e, int outputs, int i, const char** out) {
  return outputs ? a->executor_output_name(e, i, out) : a->executor_input_name(e, i, out);
}
static gexec_status* gx_index(const gexec_api* a, gexec_executor* e, int outputs, const char* name, int* out) {
  return outputs ? a->executor_output_index(e, name, out) : a->executor_input_index(e, name, out);
}
static gexec_status* gx_info(const gexec_api* a, gexec_executor* e, int outputs, int i, DLDataType* dtype, int* ndim,
                             const int64_t** shape) {
  return outputs ? a->executor_output_info(e, i, dtype, ndim, shape) : a->executor_input_info(e, i, dtype, ndim, shape);
}
// The DLTensor is built here, in C memory, so that no Go memory holds a Go pointer.
static gexec_status* gx_set_input(const gexec_api* a, gexec_executor* e, int i, void* data, int64_t* shape, int ndim,
                                  uint8_t code, uint8_t bits) {
  DLTensor t;
  t.data = data;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype.code = code;
  t.dtype.bits = bits;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = NULL;
  t.byte_offset = 0;
  return a->executor_set_input(e, i, &t);
}
static gexec_status* gx_run(const gexec_api* a, gexec_executor* e) { return a->executor_run(e); }
static gexec_status* gx_get_output(const gexec_api* a, gexec_executor* e, int i, void** data, int* device) {
  const DLTensor* t = NULL;
  gexec_status* s = a->executor_get_output(e, i, &t);
  if (!s) {
    *data = (char*)t->data + t->byte_offset;
    *device = t->device.device_type;
  }
  return s;
}
static gexec_status* gx_copy_output(const gexec_api* a, gexec_executor* e, int i, void* buffer, size_t size) {
  return a->executor_copy_output(e, i, buffer, size);
}
static gexec_status* gx_load_params(const gexec_api* a, gexec_executor* e, const void* bytes, size_t size) {
  return a->executor_load_params(e, bytes, size);
}
static gexec_status* gx_load_params_file(const gexec_api* a, gexec_executor* e, const char* path) {
  return a->executor_load_params_file(e, path);
}
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// The codes of Error.Code: gexec_errc's values.
const (
	ErrInvalidJSON     = 1
	ErrInvalidGraph    = 2
	ErrInvalidDtype    = 3
	ErrInvalidParams   = 4
	ErrInvalidModule   = 5
	ErrInvalidArgument = 6
	ErrShapeMismatch   = 7
	ErrDtypeMismatch   = 8
	ErrDeviceMismatch  = 9
	ErrMisaligned      = 10
	ErrNotFound        = 11
	ErrSymbolNotFound  = 12
	ErrKernelFailed    = 13
	ErrIO              = 14
	ErrUnsupported     = 15
	ErrOutOfMemory     = 16
	ErrBusy            = 17
	ErrInvalidNpy      = 18
	ErrNoDevice        = 19
	ErrDeviceError     = 20
	ErrUnknown         = 1000 // a failure that is not gexec's own
)

// Error is a failed call: the C status's code (one of the Err constants) and message.
// Errors the binding finds before calling C (a slice that does not fill its shape, an
// element type other than the output's dtype) use the same codes.
type Error struct {
	Code    int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("gexec error %d: %s", e.Code, e.Message) }

func newError(code int, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

var api = C.gx_api()

func table() (*C.gexec_api, error) {
	if api == nil {
		return nil, newError(ErrUnsupported, "libgexec_c has no table of version %d", int(C.GEXEC_C_API_VERSION))
	}
	return api, nil
}

// check turns a status into an error, releasing it.
func check(s *C.gexec_status) error {
	if s == nil {
		return nil
	}
	e := &Error{Code: int(C.gx_status_code(api, s)), Message: C.GoString(C.gx_status_message(api, s))}
	C.gx_status_release(api, s)
	return e
}

// Version is gexec's version, "major.minor.patch".
func Version() string { return C.GoString(C.gx_version()) }

// DataType is a DLPack data type: code (0 int, 1 uint, 2 float, ...), bits, lanes.
type DataType struct {
	Code  uint8
	Bits  uint8
	Lanes uint16
}

var (
	Int8    = DataType{0, 8, 1}
	Int16   = DataType{0, 16, 1}
	Int32   = DataType{0, 32, 1}
	Int64   = DataType{0, 64, 1}
	Uint8   = DataType{1, 8, 1}
	Uint16  = DataType{1, 16, 1}
	Uint32  = DataType{1, 32, 1}
	Uint64  = DataType{1, 64, 1}
	Float32 = DataType{2, 32, 1}
	Float64 = DataType{2, 64, 1}
)

func (d DataType) String() string {
	names := map[uint8]string{0: "int", 1: "uint", 2: "float", 4: "bfloat", 5: "complex", 6: "bool"}
	name, ok := names[d.Code]
	if !ok {
		name = fmt.Sprintf("code%d_", d.Code)
	}
	s := fmt.Sprintf("%s%d", name, d.Bits)
	if d.Lanes != 1 {
		s += fmt.Sprintf("x%d", d.Lanes)
	}
	return s
}

// Element is the element types a slice may hold.
type Element interface {
	int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64 | float32 | float64
}

// DTypeOf is the DLPack dtype of T.
func DTypeOf[T Element]() DataType {
	var zero T
	switch any(zero).(type) {
	case int8:
		return Int8
	case int16:
		return Int16
	case int32:
		return Int32
	case int64:
		return Int64
	case uint8:
		return Uint8
	case uint16:
		return Uint16
	case uint32:
		return Uint32
	case uint64:
		return Uint64
	case float32:
		return Float32
	default:
		return Float64
	}
}

// TensorInfo is an input's or output's dtype and shape.
type TensorInfo struct {
	DType DataType
	Shape []int64
}

// NumElements is the product of the shape.
func (t TensorInfo) NumElements() int {
	n := 1
	for _, d := range t.Shape {
		n *= int(d)
	}
	return n
}

// Runtime is a thread pool of its own for the models loaded through it.
type Runtime struct{ p *C.gexec_runtime }

// NewRuntime makes a runtime with numThreads threads (0: one per core).
func NewRuntime(numThreads int) (*Runtime, error) {
	a, err := table()
	if err != nil {
		return nil, err
	}
	var out *C.gexec_runtime
	if err := check(C.gx_runtime_create(a, C.int(numThreads), &out)); err != nil {
		return nil, err
	}
	return &Runtime{out}, nil
}

// Close releases the handle; models loaded through it keep the runtime alive. A second
// Close does nothing.
func (r *Runtime) Close() error {
	if r == nil || r.p == nil {
		return nil
	}
	p := r.p
	r.p = nil
	return check(C.gx_runtime_release(api, p))
}

func (r *Runtime) raw() *C.gexec_runtime {
	if r == nil {
		return nil
	}
	return r.p
}

// Model is a loaded model: graph, kernels and parameters, shared by its executors.
type Model struct{ p *C.gexec_model }

// LoadFiles loads TVM's three files: the graph JSON, the kernel library and the
// parameter blob (params "": none). rt nil is the process default.
func LoadFiles(rt *Runtime, graph, library, params string) (*Model, error) {
	a, err := table()
	if err != nil {
		return nil, err
	}
	g := C.CString(graph)
	defer C.free(unsafe.Pointer(g))
	l := C.CString(library)
	defer C.free(unsafe.Pointer(l))
	var p *C.char
	if params != "" {
		p = C.CString(params)
		defer C.free(unsafe.Pointer(p))
	}
	var out *C.gexec_model
	if err := check(C.gx_model_load_files(a, rt.raw(), g, l, p, &out)); err != nil {
		return nil, err
	}
	return &Model{out}, nil
}

// LoadLibrary loads a single-file library made by TVM's export_library.
func LoadLibrary(rt *Runtime, library string) (*Model, error) {
	a, err := table()
	if err != nil {
		return nil, err
	}
	l := C.CString(library)
	defer C.free(unsafe.Pointer(l))
	var out *C.gexec_model
	if err := check(C.gx_model_load_library(a, rt.raw(), l, &out)); err != nil {
		return nil, err
	}
	return &Model{out}, nil
}

// LoadMemory loads from memory: the graph JSON, the parameter blob (may be empty) and
// the path of the kernel library. The bytes are copied or parsed before it returns.
func LoadMemory(rt *Runtime, graphJSON, params []byte, library string) (*Model, error) {
	a, err := table()
	if err != nil {
		return nil, err
	}
	l := C.CString(library)
	defer C.free(unsafe.Pointer(l))
	var g, p unsafe.Pointer
	if len(graphJSON) > 0 {
		g = unsafe.Pointer(&graphJSON[0])
	}
	if len(params) > 0 {
		p = unsafe.Pointer(&params[0])
	}
	var out *C.gexec_model
	if err := check(C.gx_model_load_memory(a, rt.raw(), g, C.size_t(len(graphJSON)), p, C.size_t(len(params)), l, &out)); err != nil {
		return nil, err
	}
	return &Model{out}, nil
}

// Close releases the handle; executors made from it keep what they need alive.
func (m *Model) Close() error {
	if m == nil || m.p == nil {
		return nil
	}
	p := m.p
	m.p = nil
	return check(C.gx_model_release(api, p))
}

// ParamBytes is the bytes of parameters the model holds, once for all its executors.
func (m *Model) ParamBytes() (uint64, error) {
	var out C.uint64_t
	if err := check(C.gx_model_param_bytes(api, m.p, &out)); err != nil {
		return 0, err
	}
	return uint64(out), nil
}

// NewExecutor makes an executor: its own activations, the model's parameters shared.
func (m *Model) NewExecutor() (*Executor, error) {
	var out *C.gexec_executor
	if err := check(C.gx_executor_create(api, m.p, &out)); err != nil {
		return nil, err
	}
	return &Executor{out}, nil
}

// Executor runs a model: inputs in, Run, outputs out. One goroutine at a time.
type Executor struct{ p *C.gexec_executor }

// Close releases the executor. A second Close does nothing; other methods after Close
// fail with ErrInvalidArgument.
func (e *Executor) Close() error {
	if e == nil || e.p == nil {
		return nil
	}
	p := e.p
	e.p = nil
	return check(C.gx_executor_release(api, p))
}

func (e *Executor) num(outputs C.int) (int, error) {
	var n C.int
	if err := check(C.gx_num(api, e.p, outputs, &n)); err != nil {
		return 0, err
	}
	return int(n), nil
}

func (e *Executor) name(outputs C.int, index int) (string, error) {
	var s *C.char
	if err := check(C.gx_name(api, e.p, outputs, C.int(index), &s)); err != nil {
		return "", err
	}
	return C.GoString(s), nil
}

func (e *Executor) index(outputs C.int, name string) (int, error) {
	s := C.CString(name)
	defer C.free(unsafe.Pointer(s))
	i := C.int(-1)
	if err := check(C.gx_index(api, e.p, outputs, s, &i)); err != nil {
		return -1, err
	}
	return int(i), nil
}

func (e *Executor) info(outputs C.int, index int) (TensorInfo, error) {
	var dtype C.DLDataType
	var ndim C.int
	var shape *C.int64_t
	if err := check(C.gx_info(api, e.p, outputs, C.int(index), &dtype, &ndim, &shape)); err != nil {
		return TensorInfo{}, err
	}
	info := TensorInfo{DType: DataType{uint8(dtype.code), uint8(dtype.bits), uint16(dtype.lanes)}, Shape: []int64{}}
	if ndim > 0 {
		for _, d := range unsafe.Slice((*int64)(unsafe.Pointer(shape)), int(ndim)) {
			info.Shape = append(info.Shape, d)
		}
	}
	return info, nil
}

// NumInputs counts parameters too, as in TVM.
func (e *Executor) NumInputs() (int, error)             { return e.num(0) }
func (e *Executor) NumOutputs() (int, error)            { return e.num(1) }
func (e *Executor) InputName(index int) (string, error) { return e.name(0, index) }

// OutputName: outputs are named "<node>:<index>".
func (e *Executor) OutputName(index int) (string, error) { return e.name(1, index) }

// InputIndex is the index of an input, or -1 when there is none of that name.
func (e *Executor) InputIndex(name string) (int, error)      { return e.index(0, name) }
func (e *Executor) OutputIndex(name string) (int, error)     { return e.index(1, name) }
func (e *Executor) InputInfo(index int) (TensorInfo, error)  { return e.info(0, index) }
func (e *Executor) OutputInfo(index int) (TensorInfo, error) { return e.info(1, index) }

// Run runs the graph.
func (e *Executor) Run() error { return check(C.gx_run(api, e.p)) }

// LoadParams loads parameters into this executor's own memory: a blob of
// tvm.runtime.save_param_dict. A failed load leaves the old parameters.
func (e *Executor) LoadParams(bytes []byte) error {
	var p unsafe.Pointer
	if len(bytes) > 0 {
		p = unsafe.Pointer(&bytes[0])
	}
	return check(C.gx_load_params(api, e.p, p, C.size_t(len(bytes))))
}

// LoadParamsFile loads parameters from a file (blob, .safetensors, .npz).
func (e *Executor) LoadParamsFile(path string) error {
	s := C.CString(path)
	defer C.free(unsafe.Pointer(s))
	return check(C.gx_load_params_file(api, e.p, s))
}

// SetInput copies data, of shape shape, into input index of e. The C library refuses a
// dtype (T) or shape other than the input's (ErrDtypeMismatch, ErrShapeMismatch); a
// slice whose length is not the shape's element count is refused here (ErrInvalidArgument).
func SetInput[T Element](e *Executor, index int, data []T, shape []int64) error {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return newError(ErrInvalidArgument, "negative dimension in shape %v", shape)
		}
		n *= int(d)
	}
	if n != len(data) {
		return newError(ErrInvalidArgument, "%d values do not fill shape %v (%d elements)", len(data), shape, n)
	}
	dt := DTypeOf[T]()
	var d unsafe.Pointer
	if len(data) > 0 {
		d = unsafe.Pointer(&data[0])
	}
	var s *C.int64_t
	if len(shape) > 0 {
		s = (*C.int64_t)(unsafe.Pointer(&shape[0]))
	}
	return check(C.gx_set_input(api, e.p, C.int(index), d, s, C.int(len(shape)), C.uint8_t(dt.Code), C.uint8_t(dt.Bits)))
}

func expectDType[T Element](index int, dtype DataType) error {
	if want := DTypeOf[T](); dtype != want {
		return newError(ErrDtypeMismatch, "output %d is %v, not %v", index, dtype, want)
	}
	return nil
}

// CopyOutput copies output index of e into out: T must be the output's dtype (else
// ErrDtypeMismatch) and out at least its size (else ErrInvalidArgument, "too small").
func CopyOutput[T Element](e *Executor, index int, out []T) error {
	info, err := e.OutputInfo(index)
	if err != nil {
		return err
	}
	if err := expectDType[T](index, info.DType); err != nil {
		return err
	}
	var zero T
	var p unsafe.Pointer
	if len(out) > 0 {
		p = unsafe.Pointer(&out[0])
	}
	return check(C.gx_copy_output(api, e.p, C.int(index), p, C.size_t(len(out))*C.size_t(unsafe.Sizeof(zero))))
}

// Output is output index of e copied into a new slice, with its shape.
func Output[T Element](e *Executor, index int) ([]T, []int64, error) {
	info, err := e.OutputInfo(index)
	if err != nil {
		return nil, nil, err
	}
	out := make([]T, info.NumElements())
	if err := CopyOutput(e, index, out); err != nil {
		return nil, nil, err
	}
	return out, info.Shape, nil
}

// OutputView is output index of e without a copy: a slice over the executor's memory,
// valid only until the next Run, the next view of that index, or Close.
func OutputView[T Element](e *Executor, index int) ([]T, error) {
	info, err := e.OutputInfo(index)
	if err != nil {
		return nil, err
	}
	if err := expectDType[T](index, info.DType); err != nil {
		return nil, err
	}
	var data unsafe.Pointer
	var device C.int
	if err := check(C.gx_get_output(api, e.p, C.int(index), &data, &device)); err != nil {
		return nil, err
	}
	if device != C.kDLCPU {
		return nil, newError(ErrDeviceMismatch, "output %d is not in host memory", index)
	}
	n := info.NumElements()
	if n == 0 {
		return []T{}, nil
	}
	return unsafe.Slice((*T)(data), n), nil
}
