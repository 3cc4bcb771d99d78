#pragma once
// gexec on NVIDIA GPUs: the CUDA backend, the CUDA Graph execution policy, and the
// model and executor types over the host and CUDA devices. Needs no CUDA toolkit to
// compile and no libcuda to link: the driver is loaded when a CUDA device is first used
// (CMake: link gexec::cuda).
//
//   auto m = gexec::cuda_model::load("model.so", {.devices = {gexec::cpu(), gexec::cuda(0)}});
//   auto ex = m.instantiate();
//   ex.set_input("data", host_tensor);   // copied to the device on the executor's stream
//   ex.run();                             // kernels enqueued; CPU nodes run in between
//   ex.copy_output_to(0, host_out);       // waits for the stream, copies back
//   ex.run(gexec::cuda_graph{});          // the same run, replayed as one CUDA Graph
//
// Graphs from TVM place each entry with device_index (a DLDeviceType: 1 host, 2 CUDA);
// the model is given one device per type it names.

#include "config.hpp"

#include "backends/cpu.hpp"
#include "cuda/backend.hpp"
#include "cuda/cuda_graph.hpp"
#include "cuda/driver.hpp"
#include "cuda/kernels.hpp"
#include "cuda/module_payload.hpp"
#include "execution/parallel_streams.hpp"
#include "executor.hpp"

GEXEC_NAMESPACE_BEGIN

using cuda_backends = backends<cpu_backend, cuda_backend>;
/// A model whose graph runs on the host and CUDA devices, over a TVM-compiled library.
using cuda_model = basic_model<cuda_backends>;
using cuda_executor = graph_executor<cuda_backends>;

namespace detail {
/// Kernel libraries loaded by this program launch the kernels of their "cuda" modules
/// (cuda/module_payload.hpp registers their reader).
inline const bool cuda_modules_launch = register_device_module_loader("cuda", &load_cuda_modules);
}  // namespace detail

GEXEC_NAMESPACE_END
