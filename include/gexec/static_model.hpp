#pragma once
// The model a static program runs: kernels linked in (packed_c/system_lib.hpp), the graph
// and the weights embedded by gexec_add_model (cmake/gexecModel.cmake), the graph read
// without Boost.JSON and the weights read where the program holds them.
//
//   #include <gexec/executor.hpp>
//   #include <gexec/static_model.hpp>
//   #include <gexec_models/resnet.hpp>
//   const auto m = gexec::static_model(gexec_models::resnet::graph_json(), gexec_models::resnet::params());
//   auto ex = m.instantiate();

#include "config.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <utility>

#include "model.hpp"
#include "packed_c/system_lib.hpp"
#include "params/tvm_blob.hpp"

GEXEC_NAMESPACE_BEGIN

/// The model a static program (gexec_add_model) runs: its graph read without Boost.JSON,
/// its kernels the ones linked in, and its weights read where the program holds them.
/// `params` is a TVM parameter blob that lives as long as the program (the embedded
/// gexec_models::<name>::params()): every tensor 64-byte aligned in it is used in place,
/// copying nothing (embed the blob `gexec-run --convert-params` writes); the others are
/// copied once. model::weights() says which.
inline basic_model<backends<cpu_backend>, pool_allocator, system_lib> static_model(std::string_view graph_json, std::span<const std::byte> params,
                                                                                  model_options options = {}) {
  const std::shared_ptr<const void> forever(params.data(), [](const void*) {});  // the program's own bytes
  param_dict weights = read_param_dict(tvm_blob_memory_source(params, forever));
  detail::param_dict_access::set_mapped(weights, params);
  return {detail::graph_reader<system_lib>::text(graph_json), system_lib{}, weights, std::move(options)};
}

GEXEC_NAMESPACE_END
