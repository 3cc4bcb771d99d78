#pragma once
// The backend functions kernels linked into the program call as plain C functions
// (TVMBackendAllocWorkspace, TVMBackendParallelLaunch, ...): system-library objects of
// either ABI import them by name, where a loaded library reaches them through its
// context slots or the entries gexec binds. Defined here once for both system-library
// headers (packed_c/system_lib.hpp, tvm_ffi/system_lib.hpp), so that a program
// including both gets each definition once; served by the backend hooks, which follow
// the running executor's runtime (backend_hooks.hpp).
//
// Weak, so that including this header in several source files, or linking TVM's
// runtime too, leaves one definition. Only those two headers include it.

#include "../config.hpp"

#include <cstdint>

#include "../tvm_abi.hpp"
#include "backend_hooks.hpp"

extern "C" {
__attribute__((weak)) void* TVMBackendAllocWorkspace(int device_type, int device_id, std::uint64_t nbytes, int dtype_code_hint,
                                                     int dtype_bits_hint) {
  return ::gexec::detail::backend_alloc_workspace(device_type, device_id, nbytes, dtype_code_hint, dtype_bits_hint);
}
__attribute__((weak)) int TVMBackendFreeWorkspace(int device_type, int device_id, void* ptr) {
  return ::gexec::detail::backend_free_workspace(device_type, device_id, ptr);
}
__attribute__((weak)) int TVMBackendParallelLaunch(FTVMParallelLambda flambda, void* cdata, int num_task) {
  return ::gexec::detail::backend_parallel_launch(flambda, cdata, num_task);
}
__attribute__((weak)) int TVMBackendParallelBarrier(int task_id, TVMParallelGroupEnv* penv) {
  return ::gexec::detail::backend_parallel_barrier(task_id, penv);
}
}
