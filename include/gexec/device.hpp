#pragma once
// Devices are DLPack's DLDevice; these helpers name and compare them.

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <string>

GEXEC_NAMESPACE_BEGIN

constexpr DLDevice cpu(int id = 0) noexcept { return {kDLCPU, id}; }
constexpr DLDevice cuda(int id = 0) noexcept { return {kDLCUDA, id}; }

constexpr bool same_device(DLDevice a, DLDevice b) noexcept {
  return a.device_type == b.device_type && a.device_id == b.device_id;
}

/// "cpu", "cuda", ... as TVM names device types; "device_type(N)" for others.
inline std::string device_type_name(int device_type) {
  switch (device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLCUDAHost: return "cuda_host";
    case kDLOpenCL: return "opencl";
    case kDLVulkan: return "vulkan";
    case kDLMetal: return "metal";
    case kDLROCM: return "rocm";
    case kDLCUDAManaged: return "cuda_managed";
    case kDLExtDev: return "ext_dev";
    default: return "device_type(" + std::to_string(device_type) + ")";
  }
}

/// "cpu:0", "cuda:1", ...
inline std::string to_string(DLDevice d) {
  return device_type_name(d.device_type) + ":" + std::to_string(d.device_id);
}

GEXEC_NAMESPACE_END
