#pragma once
// parallel_streams: independent branches of a device graph on several streams of each
// device, ordered by events: a step waits only for the steps it depends on (data,
// storage reuse, control_deps), so kernels of independent branches can run at once on
// the GPU. The host enqueues every step, in the plan's order, on one thread.
//
//   ex.run(gexec::parallel_streams{});            // up to 4 streams per device
//   ex.run(gexec::parallel_streams{.max_streams = 2});
//
// Each step continues the stream of one of its predecessors when that one has no other
// successor there yet, and otherwise opens the next stream; an event is recorded after
// a step only when a successor runs on another stream, and at the end the executor's
// own stream waits for the others, so reading the outputs (or synchronize()) waits for
// everything. Host steps run when enqueued, as always. A graph without two independent
// steps runs as the sequential loop.

#include "../config.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "policy.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// The streams a model's steps go on, made once per executor and width.
struct stream_plan {
  unsigned lanes = 0;
  std::uint32_t steps = 0;
  std::vector<unsigned> lane;                  ///< per step
  std::vector<std::uint32_t> preds_begin, preds;  ///< CSR of predecessors, per step
  std::vector<bool> signal;                    ///< per step: a successor is on another lane
  std::vector<std::uint32_t> last;             ///< per lane and device (lane * devices + d): its last step, or UINT32_MAX
};

/// `device_of(k)`: the model device step k runs on; `devices`: how many there are.
template <class DeviceOf>
void make_stream_plan(stream_plan& sp, const step_graph& deps, std::uint32_t n, unsigned lanes, std::size_t devices, DeviceOf&& device_of) {
  constexpr std::uint32_t none = UINT32_MAX;
  sp.lanes = lanes;
  sp.steps = n;
  sp.preds_begin.assign(n + 1, 0);
  for (std::uint32_t i : deps.succ) ++sp.preds_begin[i + 1];
  for (std::uint32_t k = 0; k < n; ++k) sp.preds_begin[k + 1] += sp.preds_begin[k];
  sp.preds.assign(deps.succ.size(), 0);
  std::vector<std::uint32_t> fill(sp.preds_begin.begin(), sp.preds_begin.end() - 1);
  for (std::uint32_t k = 0; k < n; ++k)
    for (std::uint32_t i = deps.succ_begin[k]; i < deps.succ_begin[k + 1]; ++i) sp.preds[fill[deps.succ[i]]++] = k;
  sp.lane.assign(n, 0);
  std::vector<bool> continued(n, false);
  unsigned next = 0;
  for (std::uint32_t k = 0; k < n; ++k) {
    std::uint32_t from = none;
    for (std::uint32_t i = sp.preds_begin[k]; i < sp.preds_begin[k + 1] && from == none; ++i)
      if (!continued[sp.preds[i]]) from = sp.preds[i];
    if (from != none) {
      continued[from] = true;
      sp.lane[k] = sp.lane[from];
    } else {
      sp.lane[k] = next;
      next = (next + 1) % lanes;
    }
  }
  sp.signal.assign(n, false);
  sp.last.assign(lanes * devices, none);
  for (std::uint32_t k = 0; k < n; ++k) {
    for (std::uint32_t i = deps.succ_begin[k]; i < deps.succ_begin[k + 1]; ++i)
      if (sp.lane[deps.succ[i]] != sp.lane[k]) sp.signal[k] = true;
    sp.last[sp.lane[k] * devices + device_of(k)] = k;
  }
  for (std::size_t i = devices; i < sp.last.size(); ++i)
    if (sp.last[i] != none) sp.signal[sp.last[i]] = true;  // lane 0 of its device joins it at the end
}

}  // namespace detail

struct parallel_streams {
  unsigned max_streams = 4;  ///< streams per device, the executor's own included

  template <lane_step_program P>
  auto execute(P& steps) const {
    const std::uint32_t n = steps.size();
    const step_graph& deps = steps.dependencies();
    const unsigned lanes = std::min<unsigned>(std::max(max_streams, 1u), std::min<std::uint32_t>(deps.width, n));
    if (lanes <= 1) {
      steps.run(0, n);
      return;
    }
    auto& sp = steps.template state<detail::stream_plan>();
    const std::size_t devices = steps.devices().size();
    if (sp.lanes != lanes || sp.steps != n)
      detail::make_stream_plan(sp, deps, n, lanes, devices, [&](std::uint32_t k) { return steps.step_device(k); });
    steps.use_lanes(lanes);
    for (std::uint32_t k = 0; k < n; ++k) {
      const unsigned lane = sp.lane[k];
      for (std::uint32_t i = sp.preds_begin[k]; i < sp.preds_begin[k + 1]; ++i) {
        const std::uint32_t p = sp.preds[i];
        if (sp.lane[p] != lane || steps.step_device(p) != steps.step_device(k)) steps.wait_for(p, sp.lane[p], steps.step_device(k), lane);
      }
      steps.run_step_on(k, lane);
      if (sp.signal[k]) steps.signal(k, lane);
    }
    for (std::size_t i = devices; i < sp.last.size(); ++i)
      if (const std::uint32_t k = sp.last[i]; k != UINT32_MAX) steps.wait_for(k, static_cast<unsigned>(i / devices), steps.step_device(k), 0);
  }
};
static_assert(execution_policy<parallel_streams>);

GEXEC_NAMESPACE_END
