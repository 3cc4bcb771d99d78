#pragma once
// An instance of a served model: a gexec executor of the model built for its device (its
// own activations and, on a CUDA device, its own stream), made in
// TRITONBACKEND_ModelInstanceInitialize. Triton calls execute on the instance's own thread
// with a batch of requests: each is read (requests.hpp), their rows are run through the
// executor rows_per_run at a time (batcher.hpp; on a CUDA device the bytes are moved by
// device_io.hpp), and every request is answered, with Triton's statistics reported, and
// released. A sticky device error leaves the instance answering every later request with it.

#include <gexec/all_backends.hpp>
#include <gexec/executor.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "batcher.hpp"
#include "device_io.hpp"
#include "model_config.hpp"
#include "model_state.hpp"
#include "requests.hpp"
#include "server.hpp"
#include "triton_api.hpp"

namespace gexec_triton {

/// One instance of `model` on `device` (-1: the host), used by one thread at a time.
class instance_state {
 public:
  instance_state(TRITONBACKEND_ModelInstance* instance, model_state& model, int device)
      : instance_(instance), model_(model), device_(device), m_(model.model_on(device)), ex_(m_.instantiate()) {
    const serving_layout& L = model_.layout();
    layout_.rows_per_run = L.rows_per_run;
    for (const served_tensor& t : L.inputs) layout_.input_row_bytes.push_back(t.row_bytes);
    for (const served_tensor& t : L.outputs) layout_.output_row_bytes.push_back(t.row_bytes);
    if (device_ < 0) {
      for (const served_tensor& t : L.inputs) {  // the executor's own inputs, which every run writes whole
        gexec::ndarray zeros = gexec::ndarray::empty(t.shape, t.dtype);
        if (zeros.byte_size()) std::memset(zeros.data(), 0, static_cast<std::size_t>(zeros.byte_size()));
        ex_.set_input(t.index, zeros);
      }
    } else {
      io_.emplace(ex_, m_, L, device_);
    }
    activation_bytes_ = ex_.storage_bytes() + (io_ ? io_->own_bytes() : 0);
    model_.count_instance(device_, 1, static_cast<double>(activation_bytes_));
    log(TRITONSERVER_LOG_INFO, __FILE__, __LINE__,
        "gexec: model '" + model_.name() + "': an instance on " + device_label(device_) + " (" + megabytes(activation_bytes_) + " of activations)");
  }
  instance_state(const instance_state&) = delete;
  instance_state& operator=(const instance_state&) = delete;
  ~instance_state() { model_.count_instance(device_, -1, -static_cast<double>(activation_bytes_), unusable_.empty() ? 0 : -1); }

  void execute(TRITONBACKEND_Request** requests, std::uint32_t count) {
    const std::uint64_t exec_start = now_ns();
    std::vector<pending> work(count);
    std::vector<batch_request> rows;
    rows.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) {
      work[i].request = requests[i];
      if (is_cancelled(requests[i])) {  // not prepared, so it takes no rows of any run
        work[i].cancelled = true;
        work[i].rows.error = "the request was cancelled";
        continue;
      }
      if (!unusable_.empty()) {
        work[i].rows.error = unusable_;
        continue;
      }
      try {
        prepare(work[i], model_.layout(), model_.name(), device_);
      } catch (const std::exception& e) {
        work[i].rows.error = e.what();
      } catch (...) {
        work[i].rows.error = "unknown error";
      }
    }
    std::size_t cancelled = 0;
    std::vector<bool> refused(count);  // before running: the request's own fault, or the instance's
    for (std::uint32_t i = 0; i < count; ++i) {
      cancelled += work[i].cancelled;
      refused[i] = !work[i].rows.error.empty();
      rows.push_back(std::move(work[i].rows));
    }
    if (cancelled)
      log(TRITONSERVER_LOG_VERBOSE, __FILE__, __LINE__,
          "gexec: model '" + model_.name() + "': " + std::to_string(cancelled) + " of " + std::to_string(count) + " request(s) cancelled, answered without running");

    std::uint64_t compute_start = now_ns(), compute_end = compute_start;
    auto run_model = [&](std::int64_t filled) {
      const std::uint64_t start = now_ns();
      model_.run(ex_);
      const std::uint64_t end = now_ns();
      compute_end = end;
      if (TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceReportBatchStatistics(instance_, static_cast<std::uint64_t>(filled), start, start, end, end))
        TRITONSERVER_ErrorDelete(e);
    };
    if (device_ < 0)
      run_host(rows, run_model);
    else
      run_device(rows, run_model);
    compute_end = std::max(compute_end, device_ < 0 ? compute_end : now_ns());
    const std::uint64_t exec_end = now_ns();

    for (std::uint32_t i = 0; i < count; ++i) {
      pending& p = work[i];
      const std::string& error = rows[i].error;
      const TRITONSERVER_Error_Code code = p.cancelled           ? TRITONSERVER_ERROR_CANCELLED
                                           : !refused[i]         ? TRITONSERVER_ERROR_INTERNAL  // the run failed
                                           : error == unusable_  ? TRITONSERVER_ERROR_UNAVAILABLE
                                                                 : TRITONSERVER_ERROR_INVALID_ARG;
      TRITONSERVER_Error* e = error.empty() ? nullptr : TRITONSERVER_ErrorNew(code, error.c_str());
      if (!p.response) {
        if (TRITONSERVER_Error* r = TRITONBACKEND_ResponseNew(&p.response, p.request)) {
          log(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, "gexec: model '" + model_.name() + "': cannot create a response: " + TRITONSERVER_ErrorMessage(r));
          TRITONSERVER_ErrorDelete(r);
          p.response = nullptr;
        }
      }
      // The statistics first: a client that reads them after its answer finds its request counted.
      if (TRITONSERVER_Error* s =
              TRITONBACKEND_ModelInstanceReportStatistics(instance_, p.request, error.empty(), exec_start, compute_start, compute_end, exec_end))
        TRITONSERVER_ErrorDelete(s);
      if (p.response) {
        if (TRITONSERVER_Error* s = TRITONBACKEND_ResponseSend(p.response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, e)) {
          log(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, "gexec: model '" + model_.name() + "': cannot send a response: " + TRITONSERVER_ErrorMessage(s));
          TRITONSERVER_ErrorDelete(s);
        }
      }
      if (e) TRITONSERVER_ErrorDelete(e);
      if (TRITONSERVER_Error* r = TRITONBACKEND_RequestRelease(p.request, TRITONSERVER_REQUEST_RELEASE_ALL)) TRITONSERVER_ErrorDelete(r);
    }
  }

 private:
  /// A host instance: rows copied into the executor's own inputs and out of its outputs.
  template <class Run>
  void run_host(std::vector<batch_request>& rows, Run& run_model) {
    const serving_layout& L = model_.layout();
    run_batched(
        rows, layout_,
        [&] {
          std::vector<std::byte*> in;
          for (const served_tensor& t : L.inputs) in.push_back(static_cast<std::byte*>(ex_.get_input(t.index).data()));
          return in;
        },
        run_model,
        [&] {
          std::vector<const std::byte*> out;
          for (const served_tensor& t : L.outputs) out.push_back(static_cast<const std::byte*>(ex_.get_output(t.index).data()));
          return out;
        });
  }

  /// An instance on a CUDA device: every copy on the executor's stream, one wait at the
  /// end of the batch. A failure found by that wait fails every request that ran.
  template <class Run>
  void run_device(std::vector<batch_request>& rows, Run& run_model) {
    struct mover {
      instance_state& s;
      Run& run_model;
      void put(std::size_t k, std::int64_t row, const input_bytes& src, std::uint64_t offset, std::uint64_t n) { s.io_->put(k, row, src, offset, n); }
      void pad(std::size_t k, std::int64_t row) { s.io_->pad(k, row); }
      void run(std::int64_t filled) {
        s.io_->bind_inputs();
        run_model(filled);
        if (s.io_->host_outputs()) s.ex_.synchronize();  // host outputs that a device wrote are read next
      }
      void take(std::size_t j, std::int64_t row, std::byte* dst, memory_device where, std::uint64_t n) { s.io_->take(j, row, dst, where, n); }
    } m{*this, run_model};
    std::vector<bool> failed_before(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i) failed_before[i] = !rows[i].error.empty();
    run_batched(rows, layout_, m);
    std::string failure;
    try {
      ex_.synchronize();
    } catch (const std::exception& e) {
      failure = e.what();
      for (std::size_t i = 0; i < rows.size(); ++i)
        if (!failed_before[i] && rows[i].error.empty()) rows[i].error = failure;
    }
    for (std::size_t i = 0; i < rows.size() && failure.empty(); ++i)
      if (!failed_before[i] && !rows[i].error.empty()) failure = rows[i].error;
    if (!failure.empty()) check_device(failure);
    if (model_.config().cuda_graph && !graph_reported_) {
      graph_reported_ = true;
      const std::string why = gexec::cuda_graph::stats(ex_).eager_reason;
      if (!why.empty()) log(TRITONSERVER_LOG_WARN, __FILE__, __LINE__, "gexec: model '" + model_.name() + "': cuda_graph: runs are eager: " + why);
    }
  }

  /// After a failure: a sticky device error leaves the device's context unusable, so the
  /// instance answers every later request with the error (the model's other instances,
  /// on other devices, go on).
  void check_device(const std::string& failure) {
    gexec::cuda_driver& driver = m_.get_backends().get<gexec::cuda_backend>().driver();
    const int code = driver.sticky_error(device_);
    if (code == 0 || !unusable_.empty()) return;
    unusable_ = "gexec: model '" + model_.name() + "': its instance on " + device_label(device_) + " is unusable after " +
                driver.describe(static_cast<gexec::cuda_api::CUresult>(code)) + " (" + failure + ")";
    log(TRITONSERVER_LOG_ERROR, __FILE__, __LINE__, unusable_);
    model_.count_instance(device_, 0, 0, 1);
  }

  TRITONBACKEND_ModelInstance* instance_;
  model_state& model_;
  int device_;  ///< -1: the host
  model_type& m_;
  executor ex_;
  std::optional<device_io> io_;  ///< on a CUDA device
  batch_layout layout_;
  std::uint64_t activation_bytes_ = 0;
  bool graph_reported_ = false;
  std::string unusable_;  ///< set by a sticky device error: every later request gets it
};

}  // namespace gexec_triton
