#pragma once
// The definitions of load.hpp that are not templates. Included by load.hpp in
// header-only mode and by src/gexec.cpp in compiled mode.

#include "load.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "library/module_impl.hpp"

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// Gives back the pages of `blob` (a loaded library's data) that no tensor of `kept`
/// reads where it lies: what was copied out or parsed.
inline void release_unread_pages(std::span<const std::byte> blob, const param_dict& kept) {
  std::vector<std::span<const std::byte>> in_place;
  for (const auto& [name, t] : kept) {
    const auto* p = static_cast<const std::byte*>(t.data());
    if (std::less_equal<>()(blob.data(), p) && std::less<>()(p, blob.data() + blob.size())) in_place.emplace_back(p, t.byte_size());
  }
  std::sort(in_place.begin(), in_place.end(), [](const auto& a, const auto& b) { return std::less<>()(a.data(), b.data()); });
  const std::byte* from = blob.data();
  for (const auto& range : in_place) {
    if (std::less<>()(from, range.data())) release_pages({from, static_cast<std::size_t>(range.data() - from)});
    if (std::less<>()(from, range.data() + range.size())) from = range.data() + range.size();
  }
  release_pages({from, static_cast<std::size_t>(blob.data() + blob.size() - from)});
}

/// Parsed once per loaded library and shared by every model and factory made from it,
/// so N loads of one model.so hold one copy of its weights. `progress` hears of the
/// bytes of the embedded blob read (all at once when it was parsed before).
GEXEC_DECL std::shared_ptr<const embedded_factory> read_embedded_factory(const module& lib, const load_progress* progress) {
  if (!lib) throw error(errc::invalid_argument, "read_embedded_factory: no module");
  module_source& state = *lib.state_;
  std::lock_guard g(state.embedded_mu);
  const std::string where = lib.path().string();
  auto symbol = lib.data_symbol("__tvm_dev_mblob");
  if (auto cached = state.embedded.lock()) {
    if (progress && *progress) {  // read before: all of the payload at once
      std::uint64_t length = 0;
      std::memcpy(&length, symbol.data(), sizeof length);  // the blob was parsed, so its length is there
      (*progress)(length, length);
    }
    return cached;
  }
  if (symbol.empty())
    throw error(errc::invalid_module, where + " has no __tvm_dev_mblob: it is a kernel library without an embedded "
                                              "graph (load it with load_module and pass the graph JSON to create)");
  // Parameters aligned in the library's pages are read where they lie (the views keep
  // the library loaded); the others are copied out, and the pages they were read from
  // released as they are read: no byte is resident twice.
  module_blob blob = parse_module_blob(symbol, "__tvm_dev_mblob of " + where, blob_parts::all, lib.state_, progress);
  if (!blob.factory) throw error(errc::invalid_module, "__tvm_dev_mblob of " + where + " holds no GraphExecutorFactory");
  auto parsed = std::make_shared<embedded_factory>();
  parsed->graph = parse_graph(blob.factory->graph_json);
  parsed->blob = std::move(*blob.factory);
  parsed->device_modules = std::move(blob.device_modules);
  release_unread_pages(symbol, parsed->blob.params);
  state.embedded = parsed;
  return parsed;
}

GEXEC_DECL module load_library_for(const model_options& options, const file_path& library) {
  return options.runtime ? options.runtime->load_module(library) : load_module(library);
}

}  // namespace detail

GEXEC_DECL graph_executor<> create(const validated_graph& g, const module& lib, std::vector<DLDevice> devices) {
  return model(g, packed_c_abi(lib), detail::on_devices(std::move(devices))).instantiate();
}
GEXEC_DECL graph_executor<> create(std::string_view graph_json, const module& lib, std::vector<DLDevice> devices) {
  return create(parse_graph(graph_json), lib, std::move(devices));
}
GEXEC_DECL graph_executor<> create(graph g, const module& lib, std::vector<DLDevice> devices) {
  return create(validate(std::move(g)), lib, std::move(devices));
}

GEXEC_DECL factory::factory(module lib, std::shared_ptr<runtime> rt) : s_(std::make_shared<state>()) {
  s_->embedded = detail::read_embedded_factory(lib);
  s_->lib = std::move(lib);
  s_->rt = std::move(rt);
}

GEXEC_DECL model factory::get_model(const std::vector<DLDevice>& devices) const {
  std::lock_guard g(s_->mu);
  for (const auto& [d, m] : s_->models)
    if (std::equal(d.begin(), d.end(), devices.begin(), devices.end(), same_device)) return m;
  model_options options = detail::on_devices(devices);
  options.runtime = s_->rt;
  model m(s_->embedded->graph, packed_c_abi(s_->lib), s_->embedded->blob.params, std::move(options));
  detail::library_model<model>::count_library_copies(m, s_->lib, s_->embedded->blob.params);
  m.keep_source(s_->embedded);
  s_->models.emplace_back(devices, m);
  return m;
}

GEXEC_DECL graph_executor<> factory::create(const std::vector<DLDevice>& devices) const { return get_model(devices).instantiate(); }

GEXEC_DECL factory load_factory(const file_path& path, std::shared_ptr<runtime> rt) {
  module lib = rt ? rt->load_module(path) : load_module(path);
  return factory(std::move(lib), std::move(rt));
}

GEXEC_NAMESPACE_END
