#pragma once
// The backend's metrics: gauges (Triton's custom metrics API) of each model on each
// device, labelled model, version and device: its instances, the bytes of weights they
// share there, the bytes of activations they hold, and how many a sticky device error
// left unusable. With metrics turned off in the server, every gauge is a no-op.

#include <cstdint>
#include <string>

#include "server.hpp"
#include "triton_api.hpp"

namespace gexec_triton {

/// The backend's gauge families (Triton's custom metrics API), made once when the backend
/// is initialized; all null when the server has metrics turned off.
struct metric_families {
  TRITONSERVER_MetricFamily* instances = nullptr;
  TRITONSERVER_MetricFamily* weight_bytes = nullptr;
  TRITONSERVER_MetricFamily* activation_bytes = nullptr;
  TRITONSERVER_MetricFamily* unusable = nullptr;

  void create() {
    const struct {
      TRITONSERVER_MetricFamily** family;
      const char *name, *description;
    } all[] = {
        {&instances, "gexec_instances", "Instances of the model (gexec executors) on the device"},
        {&weight_bytes, "gexec_weight_bytes", "Bytes of the model's weights held on the device, once for all its instances there"},
        {&activation_bytes, "gexec_activation_bytes", "Bytes of activations the model's instances on the device hold together"},
        {&unusable, "gexec_unusable_instances", "Instances on the device that a sticky device error left unusable"},
    };
    for (const auto& f : all) {
      if (TRITONSERVER_Error* e = TRITONSERVER_MetricFamilyNew(f.family, TRITONSERVER_METRIC_KIND_GAUGE, f.name, f.description)) {
        log(TRITONSERVER_LOG_VERBOSE, __FILE__, __LINE__, std::string("gexec: no custom metrics (") + TRITONSERVER_ErrorMessage(e) + ")");
        TRITONSERVER_ErrorDelete(e);
        destroy();
        return;
      }
    }
  }
  void destroy() noexcept {
    for (TRITONSERVER_MetricFamily** f : {&instances, &weight_bytes, &activation_bytes, &unusable}) {
      if (*f)
        if (TRITONSERVER_Error* e = TRITONSERVER_MetricFamilyDelete(*f)) TRITONSERVER_ErrorDelete(e);
      *f = nullptr;
    }
  }
};
/// The families, made by TRITONBACKEND_Initialize and deleted by TRITONBACKEND_Finalize.
inline metric_families families;

/// One gauge of a model on a device, labelled model, version and device.
class gauge {
 public:
  gauge(TRITONSERVER_MetricFamily* family, const std::string& model, std::uint64_t version, int device) {
    if (!family) return;
    const std::string v = std::to_string(version), d = device_label(device);
    const TRITONSERVER_Parameter* labels[] = {TRITONSERVER_ParameterNew("model", TRITONSERVER_PARAMETER_STRING, model.c_str()),
                                              TRITONSERVER_ParameterNew("version", TRITONSERVER_PARAMETER_STRING, v.c_str()),
                                              TRITONSERVER_ParameterNew("device", TRITONSERVER_PARAMETER_STRING, d.c_str())};
    if (TRITONSERVER_Error* e = TRITONSERVER_MetricNew(&metric_, family, labels, 3)) {
      TRITONSERVER_ErrorDelete(e);
      metric_ = nullptr;
    }
    for (const TRITONSERVER_Parameter* l : labels) TRITONSERVER_ParameterDelete(const_cast<TRITONSERVER_Parameter*>(l));
  }
  gauge(const gauge&) = delete;
  gauge& operator=(const gauge&) = delete;
  ~gauge() {
    if (metric_)
      if (TRITONSERVER_Error* e = TRITONSERVER_MetricDelete(metric_)) TRITONSERVER_ErrorDelete(e);
  }
  void set(double value) noexcept {
    if (metric_)
      if (TRITONSERVER_Error* e = TRITONSERVER_MetricSet(metric_, value)) TRITONSERVER_ErrorDelete(e);
  }

 private:
  TRITONSERVER_Metric* metric_ = nullptr;
};

}  // namespace gexec_triton
