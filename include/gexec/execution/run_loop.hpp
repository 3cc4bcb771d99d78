#pragma once
// The loop every run ends in: steps [begin, end) of the run order on this thread, the
// flat loops over the step arrays, with an observer's hooks around each step when there
// is one. Every policy's run(), run_step() and run_step_on() come here.

#include "../config.hpp"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <type_traits>

#include "../detail/last_error.hpp"
#include "../error.hpp"
#include "../executor/instance_plan.hpp"
#include "../executor/messages.hpp"
#include "../runtime/run_context.hpp"
#include "../tvm_abi.hpp"
#include "../tvm_ffi/call.hpp"
#include "../observers/observer.hpp"
#include "../plan.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// Makes model device `d` this thread's current one for the steps that follow.
template <class Instance, class Model>
void switch_device(const Instance& s, const Model& m, run_context& context, std::uint16_t d) {
  context.device = m.devices[d];
  context.stream = s.lane_objects[s.active_lane][d];
  context.native_stream = m.device_table->native_stream(m.backends.get(), context.device, context.stream);
  context.launch_services = m.device_table->launch_services(m.backends.get(), context.device);
  if (context.device.device_type != kDLCPU) m.device_table->set_device(m.backends.get(), context.device);
}

/// Steps [begin, end) of executor instance `s` of model `m`. A function of its own,
/// aligned to 64 bytes, so that where its loops fall against cache-line and fetch
/// boundaries does not move with unrelated code around it (a do-nothing kernel's
/// dispatch cost varied 1.00-1.21x the plain loop by placement alone).
template <class Instance, class Model, class Observer>
[[gnu::noinline, gnu::aligned(64)]] void run_steps(Instance& s, const Model& m, std::uint32_t begin, std::uint32_t end, Observer& observer) {
  if (begin >= end) return;
  run_context* const current = current_context();
  if (!current || current->executor != &s) [[unlikely]]
    throw error(errc::invalid_argument, "steps of a run called on a thread without the run's context (an execution policy "
                                        "must hold steps.thread_context() on each thread it runs steps on)");
  run_context& context = *current;
  const void*& running = running_step();  // clears a kernel's message too (detail/last_error.hpp)
  constexpr bool observed = !std::is_same_v<Observer, no_observer>;
  // The step running, for a C++ exception a kernel or backend lets out of the C ABI.
  const call_step* call = nullptr;
  const ffi_step* ffi = nullptr;
  const copy_step* copy = nullptr;
  int* const codes = const_cast<int*>(m.plan.codes.data());  // packed calls take int*; kernels only read it
  try {
    for (const step_run* r = m.plan.order.data() + m.plan.run_of(begin); begin < end; ++r) {
      const std::uint32_t lo = r->begin + (begin - r->step);
      const std::uint32_t hi = r->begin + std::min(end - r->step, r->end - r->begin);
      begin = r->step + (hi - r->begin);
      if (context.stream != s.lane_objects[s.active_lane][r->device]) [[unlikely]]
        switch_device(s, m, context, r->device);
      if (r->kind == step_kind::call) {
        copy = nullptr;
        ffi = nullptr;
        for (const call_step *c = s.plan.calls.data() + lo, *last = s.plan.calls.data() + hi; c != last; ++c) {
          [[maybe_unused]] const step_event event{r->step + static_cast<std::uint32_t>(c - s.plan.calls.data() - r->begin), c->node_id};
          if constexpr (observed) observer.before(event);
          TVMValue ret;
          int ret_code = tc_null;
          running = c;
          call = c;
          if (c->fn(c->values, codes, c->num_args, &ret, &ret_code, c->resource_handle) != 0) [[unlikely]]
            kernel_failed(m.compact(), c->node_id);
          if constexpr (observed) observer.after(event);
        }
      } else if (r->kind == step_kind::ffi_call) {
        // TVM-FFI kernels, called directly with the arguments the instance keeps as
        // TVMFFIAny (instance_plan::ffi_values), from their ffi_steps alone (a chain
        // longer than the caches hold streams 16 bytes a call beside its arguments);
        // the call_step only names the node where one fails.
        copy = nullptr;
        call = nullptr;
        const ffi_step* const steps = s.plan.ffi_calls.data();
        const TVMFFIAny* const args = s.plan.ffi_values.data();
        for (const ffi_step *f = steps + lo, *last = steps + hi; f != last; ++f) {
          [[maybe_unused]] const step_event event{r->step + static_cast<std::uint32_t>(f - steps - r->begin),
                                                  observed ? s.plan.calls[static_cast<std::size_t>(f - steps)].node_id : 0};
          if constexpr (observed) observer.before(event);
          TVMFFIAny result;
          result.type_index = ffi_none;
          running = f;
          ffi = f;
          if (f->kernel(nullptr, args + f->first_arg, f->num_args, &result) != 0) [[unlikely]]
            kernel_failed(m.compact(), s.plan.calls[static_cast<std::size_t>(f - steps)].node_id);
          if constexpr (observed) observer.after(event);
        }
      } else {
        call = nullptr;
        ffi = nullptr;
        running = nullptr;  // no call step runs: nothing is lent to a copy
        for (const copy_step *c = s.plan.copies.data() + lo, *last = s.plan.copies.data() + hi; c != last; ++c) {
          [[maybe_unused]] const step_event event{r->step + static_cast<std::uint32_t>(c - s.plan.copies.data() - r->begin), c->node_id};
          if constexpr (observed) observer.before(event);
          copy = c;
          c->fn(c->backend, *c->from, *c->to, context.stream, c->to_host);
          if constexpr (observed) observer.after(event);
        }
      }
    }
  } catch (const error&) {
    throw;
  } catch (...) {
    if (!call && !ffi && !copy) throw;
    const std::uint32_t node = call ? call->node_id : ffi ? s.plan.calls[static_cast<std::size_t>(ffi - s.plan.ffi_calls.data())].node_id : copy->node_id;
    kernel_threw(m.compact(), node, std::current_exception());
  }
}

}  // namespace detail
GEXEC_NAMESPACE_END
