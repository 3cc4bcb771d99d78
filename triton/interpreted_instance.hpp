#pragma once
// An instance of a Relax function gexec interprets (interpreted.hpp): its own virtual
// machine over the model's executable, which the weights and kernels are shared through.
// Each request runs alone, with its own sizes: its inputs are checked against the
// configuration (names, data types, ranks, the fixed dimensions; a dim -1 takes any
// size), copied into tensors and run; its outputs are answered with the shapes the run
// gave them. What is wrong with a request, or fails its run, is answered to it only.

#include <gexec/relax.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "model_config.hpp"
#include "model_state.hpp"
#include "requests.hpp"
#include "server.hpp"
#include "triton_api.hpp"

namespace gexec_triton {

/// One host instance of an interpreted model, used by one thread at a time.
class interpreted_instance {
 public:
  interpreted_instance(TRITONBACKEND_ModelInstance* instance, model_state& model)
      : instance_(instance), model_(model), f_(*model.interpreted()), vm_(f_.exe) {
    log(TRITONSERVER_LOG_INFO, __FILE__, __LINE__,
        "gexec: model '" + model_.name() + "': an instance on the host interpreting Relax function \"" + f_.function + "\"");
  }

  void execute(TRITONBACKEND_Request** requests, std::uint32_t count) {
    for (std::uint32_t i = 0; i < count; ++i) answer(requests[i]);
  }

 private:
  /// The tensors a request's inputs give, checked against the served inputs.
  std::vector<gexec::ndarray> read_inputs(TRITONBACKEND_Request* request) const {
    const serving_layout& L = model_.layout();
    check_input_names(request, L, model_.name());
    std::vector<gexec::ndarray> args;
    for (const served_tensor& t : L.inputs) {
      const request_input ri = find_input(request, t);
      const std::vector<std::int64_t>& got = ri.shape;
      const std::string& what = ri.what;
      const std::uint64_t bytes = ri.bytes;
      const std::vector<std::int64_t> want = t.dims(false);
      bool fits = got.size() == want.size();
      for (std::size_t i = 0; fits && i < got.size(); ++i) fits = got[i] >= 0 && (want[i] == -1 || got[i] == want[i]);
      if (!fits)
        throw gexec::error(gexec::errc::shape_mismatch, what + ": shape " + shape_text(got) + ", the model's is " + shape_text(want) +
                                                            " (rank " + std::to_string(want.size()) + "; -1: any size)");
      const std::vector<std::int64_t> model_shape = t.shape.empty() ? std::vector<std::int64_t>{} : got;  // a scalar is served as [1]
      gexec::ndarray a = gexec::ndarray::empty(model_shape, t.dtype);
      if (bytes != static_cast<std::uint64_t>(a.byte_size()))
        throw gexec::error(gexec::errc::shape_mismatch,
                           what + ": " + std::to_string(bytes) + " bytes of data, its shape needs " + std::to_string(a.byte_size()));
      auto* at = static_cast<std::byte*>(a.data());
      std::uint64_t copied = 0;
      for_each_buffer(ri, -1, [&](const std::byte* data, std::uint64_t size, memory_device) {
        if (copied + size > bytes) throw gexec::error(gexec::errc::shape_mismatch, what + ": its buffers hold more than its " + std::to_string(bytes) + " bytes");
        if (size) std::memcpy(at + copied, data, static_cast<std::size_t>(size));
        copied += size;
      });
      if (copied != bytes)
        throw gexec::error(gexec::errc::shape_mismatch, what + ": its buffers hold " + std::to_string(copied) + " bytes, not " + std::to_string(bytes));
      args.push_back(std::move(a));
    }
    return args;
  }

  /// Writes the outputs the request asks for into its response, with their run-time shapes.
  void write_outputs(TRITONBACKEND_Request* request, TRITONBACKEND_Response* response, const std::vector<gexec::ndarray>& out) const {
    const serving_layout& L = model_.layout();
    if (out.size() != L.outputs.size())
      throw gexec::error(gexec::errc::unsupported, "Relax function \"" + f_.function + "\" returned " + std::to_string(out.size()) + " tensors, served as " +
                                                    std::to_string(L.outputs.size()));
    std::uint32_t asked = 0;
    check(TRITONBACKEND_RequestOutputCount(request, &asked), "TRITONBACKEND_RequestOutputCount");
    for (std::uint32_t k = 0; k < asked; ++k) {
      const char* name = nullptr;
      check(TRITONBACKEND_RequestOutputName(request, k, &name), "TRITONBACKEND_RequestOutputName");
      std::size_t j = 0;
      while (j < L.outputs.size() && L.outputs[j].name != name) ++j;
      if (j == L.outputs.size()) throw gexec::error(gexec::errc::not_found, "model '" + model_.name() + "' has no output \"" + name + "\"");
      const served_tensor& t = L.outputs[j];
      const gexec::ndarray& a = out[j];
      std::vector<std::int64_t> shape(a.shape().begin(), a.shape().end());
      if (!gexec::same_dtype(a.dtype(), t.dtype) || shape.size() != t.shape.size() || !a.is_contiguous())
        throw gexec::error(gexec::errc::unsupported, "output \"" + t.name + "\": the run gave " + gexec::to_string(a.dtype()) + shape_text(shape) +
                                                      ", served as " + gexec::to_string(t.dtype) + shape_text(t.shape));
      if (shape.empty()) shape.push_back(1);
      TRITONBACKEND_Output* output = nullptr;
      check(TRITONBACKEND_ResponseOutput(response, &output, t.name.c_str(), t.type, shape.data(), static_cast<std::uint32_t>(shape.size())),
            "TRITONBACKEND_ResponseOutput");
      void* buffer = nullptr;
      TRITONSERVER_MemoryType memory = TRITONSERVER_MEMORY_CPU;
      std::int64_t memory_id = 0;
      const auto bytes = static_cast<std::uint64_t>(a.byte_size());
      check(TRITONBACKEND_OutputBuffer(output, &buffer, bytes, &memory, &memory_id), "TRITONBACKEND_OutputBuffer");
      if (memory == TRITONSERVER_MEMORY_GPU)
        throw gexec::error(gexec::errc::device_mismatch, "output \"" + t.name + "\": the server gave GPU memory to an instance on the host");
      if (bytes) std::memcpy(buffer, a.data(), static_cast<std::size_t>(bytes));
    }
  }

  /// Runs one request and answers it: INVALID_ARG for what is wrong with it, INTERNAL for
  /// a failed run (a check of the function's own, such as two inputs' sizes that differ).
  void answer(TRITONBACKEND_Request* request) {
    const std::uint64_t exec_start = now_ns();
    std::uint64_t compute_start = exec_start, compute_end = exec_start;
    std::string error;
    TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INVALID_ARG;
    TRITONBACKEND_Response* response = nullptr;
    if (is_cancelled(request)) {
      error = "the request was cancelled";
      code = TRITONSERVER_ERROR_CANCELLED;
    } else {
      try {
        const std::vector<gexec::ndarray> args = read_inputs(request);
        check(TRITONBACKEND_ResponseNew(&response, request), "TRITONBACKEND_ResponseNew");
        code = TRITONSERVER_ERROR_INTERNAL;
        compute_start = now_ns();
        const std::vector<gexec::ndarray> out = vm_.run(f_.function, args);
        compute_end = now_ns();
        if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceReportBatchStatistics(instance_, 1, compute_start, compute_start, compute_end, compute_end))
          TRITONSERVER_ErrorDelete(e);
        write_outputs(request, response, out);
      } catch (const std::exception& e) {
        error = e.what();
      } catch (...) {
        error = "unknown error";
      }
    }
    if (!response) {
      if (TRITONSERVER_Error* r = TRITONBACKEND_ResponseNew(&response, request)) {
        log(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, "gexec: model '" + model_.name() + "': cannot create a response: " + TRITONSERVER_ErrorMessage(r));
        TRITONSERVER_ErrorDelete(r);
        response = nullptr;
      }
    }
    const std::uint64_t exec_end = now_ns();
    if (TRITONSERVER_Error* s = TRITONBACKEND_ModelInstanceReportStatistics(instance_, request, error.empty(), exec_start, compute_start,
                                                                            std::max(compute_start, compute_end), exec_end))
      TRITONSERVER_ErrorDelete(s);
    TRITONSERVER_Error* e = error.empty() ? nullptr : TRITONSERVER_ErrorNew(code, error.c_str());
    if (response) {
      if (TRITONSERVER_Error* s = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, e)) {
        log(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, "gexec: model '" + model_.name() + "': cannot send a response: " + TRITONSERVER_ErrorMessage(s));
        TRITONSERVER_ErrorDelete(s);
      }
    }
    if (e) TRITONSERVER_ErrorDelete(e);
    if (TRITONSERVER_Error* r = TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL)) TRITONSERVER_ErrorDelete(r);
  }

  TRITONBACKEND_ModelInstance* instance_;
  model_state& model_;
  const relax_interpreted& f_;
  gexec::relax::virtual_machine vm_;
};

}  // namespace gexec_triton
