#pragma once
// A request read: its inputs checked against the model's configuration (names, data
// types, shapes, the batch of rows) and the batcher pointed at their bytes where they
// lie, in host or device memory; its response made, with the output buffers its rows are
// copied into. What is wrong with a request is thrown, and answered to that request only.

#include <gexec/error.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "batcher.hpp"
#include "model_config.hpp"
#include "server.hpp"
#include "triton_api.hpp"

namespace gexec_triton {

/// One request being served: its response and what the batcher needs.
struct pending {
  TRITONBACKEND_Request* request = nullptr;
  TRITONBACKEND_Response* response = nullptr;
  batch_request rows;
  bool cancelled = false;  ///< answered CANCELLED without running
};

/// Whether the client gave up on the request (a gRPC call cancelled, a stream whose
/// client is gone). The default scheduler hands such requests on; running them would
/// keep the model busy, and its unload waiting, for answers nobody reads.
inline bool is_cancelled(TRITONBACKEND_Request* request) {
  bool cancelled = false;
  if (TRITONSERVER_Error* e = TRITONBACKEND_RequestIsCancelled(request, &cancelled)) {
    TRITONSERVER_ErrorDelete(e);
    return false;
  }
  return cancelled;
}

/// Refuses a request that names an input model `model` (served as `L`) does not have.
inline void check_input_names(TRITONBACKEND_Request* request, const serving_layout& L, const std::string& model) {
  std::uint32_t given = 0;
  check(TRITONBACKEND_RequestInputCount(request, &given), "TRITONBACKEND_RequestInputCount");
  for (std::uint32_t k = 0; k < given; ++k) {
    const char* name = nullptr;
    check(TRITONBACKEND_RequestInputName(request, k, &name), "TRITONBACKEND_RequestInputName");
    bool known = false;
    for (const served_tensor& t : L.inputs) known = known || t.name == name;
    if (!known) throw gexec::error(gexec::errc::not_found, "model '" + model + "' has no input \"" + name + "\"");
  }
}

/// A request's input of served tensor `t`: its handle and what it says of itself, its
/// data type checked against the model's.
struct request_input {
  TRITONBACKEND_Input* input = nullptr;
  std::vector<std::int64_t> shape;
  std::uint64_t bytes = 0;
  std::uint32_t buffers = 0;
  std::string what;  ///< `input "name"`, for messages
};

inline request_input find_input(TRITONBACKEND_Request* request, const served_tensor& t) {
  request_input in;
  if (TRITONSERVER_Error* e = TRITONBACKEND_RequestInput(request, t.name.c_str(), &in.input)) {
    TRITONSERVER_ErrorDelete(e);
    throw gexec::error(gexec::errc::not_found, "the request has no input \"" + t.name + "\"");
  }
  const char* name = nullptr;
  TRITONSERVER_DataType type{};
  const std::int64_t* shape = nullptr;
  std::uint32_t ndim = 0;
  check(TRITONBACKEND_InputProperties(in.input, &name, &type, &shape, &ndim, &in.bytes, &in.buffers), "TRITONBACKEND_InputProperties");
  in.what = "input \"" + t.name + "\"";
  if (type != t.type)
    throw gexec::error(gexec::errc::dtype_mismatch, in.what + ": data type " + std::string(config_type_name(type)) + ", the model's is " +
                                                        std::string(config_type_name(t.type)));
  in.shape.assign(shape, shape + ndim);
  return in;
}

/// Calls f(data, size, where) for each of `ri`'s buffers in order (where: the GPU memory's
/// device, or host_memory); data in GPU memory is refused for an instance on the host
/// (`device` < 0).
template <class F>
void for_each_buffer(const request_input& ri, int device, F&& f) {
  for (std::uint32_t b = 0; b < ri.buffers; ++b) {
    const void* data = nullptr;
    std::uint64_t size = 0;
    TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
    std::int64_t memory_id = 0;
    check(TRITONBACKEND_InputBuffer(ri.input, b, &data, &size, &memory, &memory_id), "TRITONBACKEND_InputBuffer");
    if (memory == TRITONSERVER_MEMORY_GPU && device < 0)
      throw gexec::error(gexec::errc::device_mismatch, ri.what + ": data in GPU memory, and this instance runs on the host");
    f(static_cast<const std::byte*>(data), size, memory == TRITONSERVER_MEMORY_GPU ? memory_id : host_memory);
  }
}

/// Checks a request's inputs, points the batcher at their bytes and makes its response
/// with the output buffers its rows are copied into, for an instance of model `model`
/// served as `L` on `device` (-1: the host). Throws what is wrong with it.
inline void prepare(pending& p, const serving_layout& L, const std::string& model, int device) {
  batch_request& r = p.rows;
  check_input_names(p.request, L, model);
  r.rows = -1;
  for (const served_tensor& t : L.inputs) {
    const request_input ri = find_input(p.request, t);
    const std::vector<std::int64_t>& got = ri.shape;
    const std::string& what = ri.what;
    const std::uint64_t bytes = ri.bytes;
    const std::vector<std::int64_t> want = t.dims(L.batched());
    const bool shape_ok = L.batched() ? got.size() == want.size() + 1 && got[0] >= 1 && got[0] <= L.max_batch_size && std::equal(want.begin(), want.end(), got.begin() + 1)
                                      : got == want;
    if (!shape_ok)
      throw gexec::error(gexec::errc::shape_mismatch, what + ": shape " + shape_text(got) + ", the model's is " +
                                                          (L.batched() ? "[1.." + std::to_string(L.max_batch_size) + "]+" : "") + shape_text(want));
    const std::int64_t rows = L.batched() ? got[0] : 1;
    if (r.rows != -1 && rows != r.rows)
      throw gexec::error(gexec::errc::shape_mismatch, what + ": batch of " + std::to_string(rows) + ", other inputs have " + std::to_string(r.rows));
    r.rows = rows;
    if (bytes != static_cast<std::uint64_t>(rows) * t.row_bytes)
      throw gexec::error(gexec::errc::shape_mismatch, what + ": " + std::to_string(bytes) + " bytes of data, its shape needs " +
                                                          std::to_string(static_cast<std::uint64_t>(rows) * t.row_bytes));
    input_bytes in;
    for_each_buffer(ri, device, [&](const std::byte* data, std::uint64_t size, memory_device where) {
      in.buffers.emplace_back(data, static_cast<std::size_t>(size));
      in.devices.push_back(where);
    });
    if (in.size() != bytes)
      throw gexec::error(gexec::errc::shape_mismatch, what + ": its buffers hold " + std::to_string(in.size()) + " bytes, not " + std::to_string(bytes));
    r.inputs.push_back(std::move(in));
  }
  if (r.rows < 0) r.rows = 1;  // a model without inputs

  check(TRITONBACKEND_ResponseNew(&p.response, p.request), "TRITONBACKEND_ResponseNew");
  r.outputs.assign(L.outputs.size(), nullptr);
  r.output_devices.assign(L.outputs.size(), host_memory);
  std::uint32_t asked = 0;
  check(TRITONBACKEND_RequestOutputCount(p.request, &asked), "TRITONBACKEND_RequestOutputCount");
  for (std::uint32_t k = 0; k < asked; ++k) {
    const char* name = nullptr;
    check(TRITONBACKEND_RequestOutputName(p.request, k, &name), "TRITONBACKEND_RequestOutputName");
    std::size_t j = 0;
    while (j < L.outputs.size() && L.outputs[j].name != name) ++j;
    if (j == L.outputs.size()) throw gexec::error(gexec::errc::not_found, "model '" + model + "' has no output \"" + name + "\"");
    const served_tensor& t = L.outputs[j];
    std::vector<std::int64_t> shape = t.dims(L.batched());
    if (L.batched()) shape.insert(shape.begin(), r.rows);
    TRITONBACKEND_Output* output = nullptr;
    check(TRITONBACKEND_ResponseOutput(p.response, &output, t.name.c_str(), t.type, shape.data(), static_cast<std::uint32_t>(shape.size())),
          "TRITONBACKEND_ResponseOutput");
    void* buffer = nullptr;
    TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
    std::int64_t memory_id = 0;
    check(TRITONBACKEND_OutputBuffer(output, &buffer, static_cast<std::uint64_t>(r.rows) * t.row_bytes, &memory, &memory_id), "TRITONBACKEND_OutputBuffer");
    if (memory == TRITONSERVER_MEMORY_GPU && device < 0)
      throw gexec::error(gexec::errc::device_mismatch, "output \"" + t.name + "\": the server gave GPU memory to an instance on the host");
    r.outputs[j] = static_cast<std::byte*>(buffer);
    if (memory == TRITONSERVER_MEMORY_GPU) r.output_devices[j] = memory_id;
  }
}

}  // namespace gexec_triton
