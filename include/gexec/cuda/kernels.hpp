#pragma once
// TVM's CUDA modules: the "cuda" entries of a kernel library's __tvm_dev_mblob (v0.19
// src/runtime/cuda/cuda_module.cc). Each holds a binary (PTX, cubin or fatbin) and a
// function table: per kernel its argument types and launch-parameter tags.
//
// The library's host code finds a kernel with TVMBackendGetFuncFromEnv and launches it
// with TVMFuncCall. The handle it gets is a launcher made here, one per (library file,
// kernel name) for the life of the process (the library caches it in a global). A call
// through it:
//   - takes the kernel's arguments, narrowed by the table's types (int64 to int32 or
//     uint32, double to float; handles as they are), then the launch dimensions in tag
//     order (blockIdx.* -> grid, threadIdx.* -> block; a value <= 0 means 1), then the
//     dynamic shared memory in bytes when the last tag is tir.use_dyn_shared_memory;
//   - loads the binary into the current device's context on first use there, and raises
//     the kernel's shared memory limit when 48 KiB or more is asked for, as TVM does;
//   - launches on the current device, on the running executor's stream there (the
//     default stream outside a run).
// Failures return -1 with a message naming the kernel, the launch and the CUDA error.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "../detail/last_error.hpp"
#include "../error.hpp"
#include "../packed_c/hooks.hpp"
#include "../packed_c/module_blob.hpp"
#include "module_payload.hpp"
#include "../runtime/env_registry.hpp"
#include "../runtime/run_context.hpp"
#include "../tvm_abi.hpp"
#include "driver.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// How one kernel argument is passed (TVM's ArgConvertCode).
enum class cuda_arg : std::uint8_t { i64, i32, u32, f32, f64, handle };

/// One "cuda" module: its binary, loaded into each context that launches from it.
struct cuda_image {
  std::string name;    ///< "the cuda module (ptx) of kernel library /path", for messages
  std::string binary;  ///< NUL-terminated, as cuModuleLoadData reads PTX
  std::mutex mu;
  struct loaded {
    const cuda_driver* driver;
    cuda_api::CUcontext context;
    cuda_api::CUmodule module;
  };
  std::vector<loaded> modules;  ///< kept for the life of the process, like the launchers

  cuda_api::CUmodule module_for(cuda_driver& drv, int device) {
    const cuda_api::CUcontext context = drv.context(device);
    std::lock_guard g(mu);
    for (const loaded& l : modules)
      if (l.driver == &drv && l.context == context) return l.module;
    cuda_api::CUmodule m = nullptr;
    drv.check(drv.cuModuleLoadData(&m, binary.c_str()), "loading " + name + " (cuModuleLoadData)", device);
    modules.push_back({&drv, context, m});
    return m;
  }
};

/// One kernel of a cuda module, as its function table describes it.
struct cuda_kernel {
  std::string name;
  std::shared_ptr<cuda_image> image;
  std::vector<cuda_arg> args;
  std::vector<std::uint8_t> dims;  ///< per launch tag: 0-2 grid x/y/z, 3-5 block x/y/z
  bool dynamic_shared = false;

  /// The CUfunction in one context, with the dynamic shared memory it was allowed.
  struct cached {
    std::atomic<cuda_api::CUcontext> context{nullptr};
    const cuda_driver* driver = nullptr;
    cuda_api::CUfunction function = nullptr;
    std::atomic<unsigned> shared_limit{48u << 10};
  };
  std::array<cached, 16> cache;
  std::mutex mu;

  cached& function_for(cuda_driver& drv, int device) {
    const cuda_api::CUcontext context = drv.context(device);
    for (cached& c : cache)
      if (c.context.load(std::memory_order_acquire) == context && c.driver == &drv) return c;
    std::lock_guard g(mu);
    for (cached& c : cache) {
      const cuda_api::CUcontext held = c.context.load(std::memory_order_relaxed);
      if (held == context && c.driver == &drv) return c;
      if (held) continue;
      cuda_api::CUmodule m = image->module_for(drv, device);
      cuda_api::CUfunction f = nullptr;
      drv.check(drv.cuModuleGetFunction(&f, m, name.c_str()), "finding kernel " + name + " in " + image->name + " (cuModuleGetFunction)", device);
      c.driver = &drv;
      c.function = f;
      c.context.store(context, std::memory_order_release);
      return c;
    }
    throw error(errc::unsupported, "kernel " + name + " launched in more than " + std::to_string(cache.size()) + " CUDA contexts");
  }
};

/// What a launcher handle's target points at: the kernel of the library file's latest load.
struct cuda_kernel_slot {
  std::atomic<cuda_kernel*> kernel{nullptr};
};

inline const char* cuda_arg_name(cuda_arg a) noexcept {
  switch (a) {
    case cuda_arg::i64: return "int64";
    case cuda_arg::i32: return "int32";
    case cuda_arg::u32: return "uint32";
    case cuda_arg::f32: return "float32";
    case cuda_arg::f64: return "float64";
    case cuda_arg::handle: return "handle";
  }
  return "?";
}

/// "CUDA kernel NAME (grid 4x1x1, block 256x1x1, 0 bytes of dynamic shared memory)", for errors.
inline std::string describe_launch(const cuda_kernel& k, const unsigned (&work)[6], unsigned shared) {
  return "CUDA kernel " + k.name + " (grid " + std::to_string(work[0]) + "x" + std::to_string(work[1]) + "x" + std::to_string(work[2]) +
         ", block " + std::to_string(work[3]) + "x" + std::to_string(work[4]) + "x" + std::to_string(work[5]) + ", " + std::to_string(shared) +
         " bytes of dynamic shared memory)";
}

/// TVMFuncCall through a launcher: see the top of this file.
inline int launch_cuda_kernel(const func_handle* self, TVMValue* values, int* codes, int n, TVMValue*, int* ret_code) noexcept {
  const cuda_kernel* k = static_cast<const cuda_kernel_slot*>(self->target)->kernel.load(std::memory_order_acquire);
  if (ret_code) *ret_code = tc_null;
  unsigned work[6] = {1, 1, 1, 1, 1, 1};  // grid x/y/z, block x/y/z
  unsigned shared = 0;
  bool dims_known = false;
  auto describe = [&] { return describe_launch(*k, work, shared); };
  try {
    const std::size_t nargs = k->args.size();
    const std::size_t expected = nargs + k->dims.size() + (k->dynamic_shared ? 1 : 0);
    if (n < 0 || static_cast<std::size_t>(n) != expected)
      throw error(errc::invalid_argument, "CUDA kernel " + k->name + " takes " + std::to_string(nargs) + " arguments and " +
                                              std::to_string(expected - nargs) + " launch values, " + std::to_string(n) + " were passed");
    union slot {
      std::int64_t i64;
      std::int32_t i32;
      std::uint32_t u32;
      float f32;
      double f64;
      void* handle;
    };
    constexpr std::size_t kInline = 32;
    slot inline_slots[kInline];
    void* inline_pointers[kInline];
    std::unique_ptr<slot[]> heap_slots;
    std::unique_ptr<void*[]> heap_pointers;
    slot* slots = inline_slots;
    void** pointers = inline_pointers;
    if (nargs > kInline) {
      heap_slots = std::make_unique<slot[]>(nargs);
      heap_pointers = std::make_unique<void*[]>(nargs);
      slots = heap_slots.get();
      pointers = heap_pointers.get();
    }
    auto refuse = [&](std::size_t i, const char* wanted) {
      throw error(errc::invalid_argument, "CUDA kernel " + k->name + ": argument " + std::to_string(i) + " has type code " +
                                              std::to_string(codes[i]) + ", expected " + wanted);
    };
    for (std::size_t i = 0; i < nargs; ++i) {
      const int c = codes[i];
      switch (k->args[i]) {
        case cuda_arg::i64:
        case cuda_arg::i32:
        case cuda_arg::u32:
          if (c != tc_int && c != tc_uint) refuse(i, "an integer");
          if (k->args[i] == cuda_arg::i64) slots[i].i64 = values[i].v_int64;
          else if (k->args[i] == cuda_arg::i32) slots[i].i32 = static_cast<std::int32_t>(values[i].v_int64);
          else slots[i].u32 = static_cast<std::uint32_t>(values[i].v_int64);
          break;
        case cuda_arg::f32:
        case cuda_arg::f64:
          if (c != tc_float) refuse(i, "a float");
          if (k->args[i] == cuda_arg::f32) slots[i].f32 = static_cast<float>(values[i].v_float64);
          else slots[i].f64 = values[i].v_float64;
          break;
        case cuda_arg::handle:
          if (c != tc_handle && c != tc_null) refuse(i, "a handle (a device pointer)");
          slots[i].handle = c == tc_null ? nullptr : values[i].v_handle;
          break;
      }
      pointers[i] = &slots[i];
    }
    for (std::size_t t = 0; t < k->dims.size(); ++t) {
      const std::size_t i = nargs + t;
      if (codes[i] != tc_int && codes[i] != tc_uint) refuse(i, "an integer launch dimension");
      const std::int64_t v = values[i].v_int64;
      if (v > 0xffffffffLL)
        throw error(errc::invalid_argument, "CUDA kernel " + k->name + ": launch dimension " + std::to_string(v) + " does not fit 32 bits");
      if (v > 0) work[k->dims[t]] = static_cast<unsigned>(v);
    }
    if (k->dynamic_shared) {
      const std::size_t i = nargs + k->dims.size();
      if (codes[i] != tc_int && codes[i] != tc_uint) refuse(i, "an integer (dynamic shared memory bytes)");
      const std::int64_t v = values[i].v_int64;
      if (v < 0 || v > 0xffffffffLL)
        throw error(errc::invalid_argument, "CUDA kernel " + k->name + ": dynamic shared memory of " + std::to_string(v) + " bytes");
      shared = static_cast<unsigned>(v);
    }
    dims_known = true;

    // The current device and stream: the running executor's, else this thread's.
    const run_context* c = current_context();
    cuda_driver* drv = nullptr;
    cuda_api::CUstream stream = nullptr;
    bool synchronize = false;
    int device = -1;
    if (c && c->device.device_type == kDLCUDA && c->launch_services) {
      const auto* services = static_cast<const cuda_launch_services*>(c->launch_services);
      drv = services->driver;
      synchronize = services->synchronize_each_launch;
      device = drv->current_device();
      if (device < 0) device = c->device.device_id;
      if (device == c->device.device_id) stream = static_cast<cuda_api::CUstream>(c->native_stream);
    } else {
      static cuda_driver* fallback = cuda_driver::process_default().get();  // kept alive by process_default
      drv = fallback;
      device = drv->current_device() < 0 ? 0 : drv->current_device();
    }
    drv->make_current(device);
    cuda_kernel::cached& f = const_cast<cuda_kernel*>(k)->function_for(*drv, device);
    if (shared >= (48u << 10) && shared > f.shared_limit.load(std::memory_order_relaxed)) {
      const cuda_api::CUresult r = drv->cuFuncSetAttribute(f.function, cuda_api::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(shared));
      if (r != cuda_api::CUDA_SUCCESS) drv->fail(r, describe() + ": allowing the dynamic shared memory (cuFuncSetAttribute)", device);
      f.shared_limit.store(shared, std::memory_order_relaxed);
    }
    const cuda_api::CUresult r = drv->cuLaunchKernel(f.function, work[0], work[1], work[2], work[3], work[4], work[5], shared, stream, pointers, nullptr);
    if (r != cuda_api::CUDA_SUCCESS) drv->fail(r, describe() + ": cuLaunchKernel", device);
    if (synchronize) {
      const cuda_api::CUresult done = drv->cuStreamSynchronize(stream);
      if (done != cuda_api::CUDA_SUCCESS) drv->fail(done, describe() + ": the kernel", device);
    }
    return 0;
  } catch (const error& e) {
    set_last_error(std::string(e.message()));
  } catch (const std::exception& e) {
    set_last_error((dims_known ? describe() : "CUDA kernel " + k->name) + ": " + e.what());
  } catch (...) {
    set_last_error("CUDA kernel launch failed");
  }
  return -1;
}

/// TVM's __tvm_set_device(device_type, device_id), which CUDA host code calls first:
/// makes the device current through the running executor's backend serving it.
inline int tvm_set_device(TVMValue* values, int* codes, int n, TVMValue*, int* ret_code, void*) noexcept {
  try {
    if (ret_code) *ret_code = tc_null;
    if (n != 2 || (codes[0] != tc_int && codes[0] != tc_uint) || (codes[1] != tc_int && codes[1] != tc_uint))
      throw error(errc::invalid_argument, "__tvm_set_device takes (device_type, device_id) as integers");
    const DLDevice d{static_cast<DLDeviceType>(values[0].v_int64), static_cast<std::int32_t>(values[1].v_int64)};
    const run_context* c = current_context();
    if (c && c->devices) {
      if (!c->devices->set_device(c->backends, d))
        throw error(errc::device_mismatch, "__tvm_set_device: no backend of the running executor serves " + to_string(d));
    } else if (d.device_type == kDLCUDA) {
      cuda_driver::process_default()->make_current(d.device_id);
    } else if (d.device_type != kDLCPU) {
      throw error(errc::device_mismatch, "__tvm_set_device: no backend serves " + to_string(d) + " outside an executor's run()");
    }
    return 0;
  } catch (const error& e) {
    set_last_error(std::string(e.message()));
  } catch (const std::exception& e) {
    set_last_error(std::string("__tvm_set_device: ") + e.what());
  }
  return -1;
}

/// A handle calling tvm_set_device, for libraries with CUDA modules.
inline func_handle* set_device_handle() {
  static func_handle* h = [] {
    auto* made = new func_handle;  // never freed: libraries cache it
    made->call = [](const func_handle*, TVMValue* v, int* c, int n, TVMValue* r, int* rc) noexcept { return tvm_set_device(v, c, n, r, rc, nullptr); };
    return made;
  }();
  return h;
}

/// Makes the kernels of the cuda modules in `blobs` what `handles` hands out by name
/// (creating handles for new names; handles of an earlier load of the library point at
/// the new kernels unless they are the same). `kept` owns the kernels made, for the
/// life of the process. The caller holds process_mutex(). Throws errc::invalid_module
/// for a function table gexec cannot launch from.
inline void load_cuda_kernels(const std::vector<const cuda_module_blob*>& blobs, const std::string& library,
                              std::unordered_map<std::string, func_handle*>& handles, std::vector<std::shared_ptr<const void>>& kept) {
  std::vector<std::unique_ptr<cuda_kernel>> made;
  for (const cuda_module_blob* blob : blobs) {
    const cuda_module_blob& b = *blob;
    if (b.format != "ptx" && b.format != "cubin" && b.format != "fatbin")
      throw error(errc::invalid_module, "the cuda module of " + library + " has format \"" + b.format + "\" (gexec loads ptx, cubin and fatbin)");
    auto image = std::make_shared<cuda_image>();
    image->name = "the cuda module (" + b.format + ") of " + library;
    image->binary = b.binary;  // std::string keeps a NUL after the bytes
    for (const cuda_function_info& info : b.functions) {
      auto k = std::make_unique<cuda_kernel>();
      k->name = info.name;
      k->image = image;
      const std::string where = "kernel " + info.name + " of " + image->name;
      for (const DLDataType t : info.arg_types) {
        cuda_arg a;
        if (t.lanes != 1) throw error(errc::invalid_module, where + ": a vector argument type (" + std::to_string(t.lanes) + " lanes)");
        if (t.code == kDLInt && t.bits == 64) a = cuda_arg::i64;
        else if (t.code == kDLInt && t.bits == 32) a = cuda_arg::i32;
        else if (t.code == kDLUInt && t.bits == 32) a = cuda_arg::u32;
        else if (t.code == kDLFloat && t.bits == 64) a = cuda_arg::f64;
        else if (t.code == kDLFloat && t.bits == 32) a = cuda_arg::f32;
        else if (t.code == kDLOpaqueHandle) a = cuda_arg::handle;
        else throw error(errc::invalid_module, where + ": argument type (code " + std::to_string(t.code) + ", " + std::to_string(t.bits) +
                                                       " bits) cannot be passed to a CUDA kernel (int32, int64, uint32, float32, float64 and handles can)");
        k->args.push_back(a);
      }
      for (std::size_t i = 0; i < info.launch_param_tags.size(); ++i) {
        const std::string& tag = info.launch_param_tags[i];
        if (tag == "tir.use_dyn_shared_memory") {
          if (i + 1 != info.launch_param_tags.size()) throw error(errc::invalid_module, where + ": tir.use_dyn_shared_memory is not the last launch tag");
          k->dynamic_shared = true;
          continue;
        }
        const bool grid = tag.starts_with("blockIdx."), block = tag.starts_with("threadIdx.");
        const std::size_t prefix = grid ? 9 : 10;
        if ((!grid && !block) || tag.size() != prefix + 1 || tag[prefix] < 'x' || tag[prefix] > 'z')
          throw error(errc::invalid_module, where + ": unknown launch tag \"" + tag + "\"");
        k->dims.push_back(static_cast<std::uint8_t>((block ? 3 : 0) + (tag[prefix] - 'x')));
      }
      made.push_back(std::move(k));
    }
  }
  for (auto& k : made) {
    func_handle*& h = handles[k->name];
    if (!h) {
      h = new func_handle;  // never freed: the library caches it
      h->call = &launch_cuda_kernel;
      h->target = new cuda_kernel_slot;
    }
    auto& slot = *static_cast<cuda_kernel_slot*>(const_cast<void*>(h->target));
    const cuda_kernel* current = slot.kernel.load(std::memory_order_acquire);
    if (current && current->name == k->name && current->args == k->args && current->dims == k->dims &&
        current->dynamic_shared == k->dynamic_shared && current->image->binary == k->image->binary)
      continue;  // the same kernel as the library's earlier load: keep it, and the modules it loaded
    // A kernel an earlier load made stays: a launch through it may be in flight.
    slot.kernel.store(k.get(), std::memory_order_release);
    kept.push_back(std::shared_ptr<const void>(std::move(k)));
  }
}

/// The packed C loader's "cuda" device-module loader (registered by <gexec/cuda.hpp>):
/// the library's launchers and its __tvm_set_device.
inline void load_cuda_modules(const module_blob& blob, module_context& ctx) {
  load_cuda_kernels(cuda_modules_of(blob), ctx.name, ctx.device_functions, ctx.device_kernels);
  ctx.set_device = set_device_handle();
}

}  // namespace detail
GEXEC_NAMESPACE_END
