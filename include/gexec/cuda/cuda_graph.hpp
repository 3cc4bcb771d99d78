#pragma once
// cuda_graph: runs a whole run() as one CUDA Graph launch. The first run() on an
// executor runs eagerly (it fills the stream's workspace pool and reports any kernel
// error with its node); the second captures every launch of a run into a graph on the
// executor's stream and launches it; later runs launch the graph again: one driver call
// instead of one per kernel. When a zero-copy binding (or anything else) changes a
// pointer the kernels were given, the next run captures again and updates the
// executable graph in place where CUDA allows it, else instantiates a new one.
//
//   gexec::cuda_graph replay;
//   ex.run(replay);                 // per executor, the graph lives with the executor
//
// A model whose steps all run on one CUDA device is replayed; any other (CPU kernels
// between device ones, several devices) runs eagerly, and describe() says why.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <cstdint>
#include <string>

#include "../device.hpp"
#include "../execution/policy.hpp"
#include "driver.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// What cuda_graph keeps per executor: the executable graph and what it captured.
struct cuda_graph_state {
  cuda_driver* driver = nullptr;
  int device = 0;
  cuda_api::CUgraphExec exec = nullptr;
  std::uint64_t version = 0;  ///< bindings_version() when captured
  bool warmed = false;
  long captures = 0, updates = 0, instantiations = 0, launches = 0;
  std::string eager_reason;   ///< why runs are eager, when they are

  cuda_graph_state() = default;
  cuda_graph_state(const cuda_graph_state&) = delete;
  cuda_graph_state& operator=(const cuda_graph_state&) = delete;
  ~cuda_graph_state() {
    if (exec && driver && !driver->sticky_error(device)) driver->cuGraphExecDestroy(exec);
  }
};

}  // namespace detail

/// Counts of what cuda_graph did on one executor (cuda_graph::stats).
struct cuda_graph_stats {
  long captures = 0;        ///< runs captured
  long updates = 0;         ///< recaptures applied to the executable graph in place
  long instantiations = 0;  ///< executable graphs made
  long launches = 0;        ///< graph launches
  std::string eager_reason; ///< non-empty: runs are eager, and why
};

struct cuda_graph {
  template <capture_step_program P>
  auto execute(P& steps) const {
    auto& st = steps.template state<detail::cuda_graph_state>();
    const std::uint32_t n = steps.size();
    // The one device every step runs on: a model may list the host too (for entries a
    // heterogeneous graph would place there) without a step of this graph on it.
    const auto devices = steps.devices();
    const std::uint16_t d = n ? steps.step_device(0) : 0;
    std::uint32_t elsewhere = 0;
    for (std::uint32_t k = 1; k < n; ++k) elsewhere += steps.step_device(k) != d;
    if (devices.empty() || elsewhere || devices[d].device_type != kDLCUDA) {
      st.eager_reason = devices.empty() || devices[d].device_type != kDLCUDA
                            ? "its steps run on " + (devices.empty() ? std::string("no device") : to_string(devices[d])) +
                                  (elsewhere ? " and others" : "") + "; a CUDA Graph replays steps on one CUDA device only"
                            : "its steps run on " + to_string(devices[d]) + " and " + std::to_string(elsewhere) +
                                  " on other devices (a heterogeneous graph); a CUDA Graph replays steps on one CUDA device only";
      steps.run(0, n);
      return;
    }
    const auto* services = static_cast<const cuda_launch_services*>(steps.launch_services(d));
    if (!services || !services->driver) {
      st.eager_reason = "no CUDA backend serves " + to_string(devices[d]);
      steps.run(0, n);
      return;
    }
    if (!st.warmed) {  // eagerly first: kernel errors name their node, workspace gets pooled
      steps.run(0, n);
      st.warmed = true;
      return;
    }
    cuda_driver& drv = *services->driver;
    const int device = devices[d].device_id;
    auto stream = static_cast<cuda_api::CUstream>(steps.native_stream(d));
    drv.make_current(device);
    if (!st.exec || st.version != steps.bindings_version()) capture(steps, st, drv, device, stream);
    drv.check(drv.cuGraphLaunch(st.exec, stream), "cuGraphLaunch", device);
    ++st.launches;
  }

  /// What this policy did on `ex` so far.
  template <class Executor>
  static cuda_graph_stats stats(Executor& ex) {
    cuda_graph_stats s;
    if (const auto* st = ex.template policy_state<detail::cuda_graph_state>()) {
      s.captures = st->captures;
      s.updates = st->updates;
      s.instantiations = st->instantiations;
      s.launches = st->launches;
      s.eager_reason = st->eager_reason;
    }
    return s;
  }

 private:
  template <capture_step_program P>
  static auto capture(P& steps, detail::cuda_graph_state& st, cuda_driver& drv, int device, cuda_api::CUstream stream) {
    // Relaxed: a kernel asking for more workspace than the pool holds may still allocate.
    drv.check(drv.cuStreamBeginCapture(stream, cuda_api::CU_STREAM_CAPTURE_MODE_RELAXED), "cuStreamBeginCapture", device);
    cuda_api::CUgraph graph = nullptr;
    try {
      steps.run(0, steps.size());
    } catch (...) {
      drv.cuStreamEndCapture(stream, &graph);
      if (graph) drv.cuGraphDestroy(graph);
      throw;
    }
    drv.check(drv.cuStreamEndCapture(stream, &graph), "capturing a run (cuStreamEndCapture)", device);
    struct release {
      cuda_driver& drv;
      cuda_api::CUgraph g;
      ~release() { drv.cuGraphDestroy(g); }
    } r{drv, graph};
    ++st.captures;
    if (st.exec) {
      cuda_api::CUgraphExecUpdateResultInfo info{};
      if (drv.cuGraphExecUpdate(st.exec, graph, &info) == cuda_api::CUDA_SUCCESS) {
        ++st.updates;
        st.version = steps.bindings_version();
        return;
      }
      drv.cuGraphExecDestroy(st.exec);  // the topology changed: instantiate anew
      st.exec = nullptr;
    }
    drv.check(drv.cuGraphInstantiateWithFlags(&st.exec, graph, 0), "cuGraphInstantiateWithFlags", device);
    st.driver = &drv;
    st.device = device;
    ++st.instantiations;
    st.version = steps.bindings_version();
  }
};
static_assert(execution_policy<cuda_graph>);

GEXEC_NAMESPACE_END
