#pragma once
// Parameter dictionaries, read and written: tvm.runtime.save_param_dict / load_param_dict
// and their files. Reading goes through the weight-source seam (params/source.hpp): the
// sniff table (params/formats.hpp) picks the source by the input's first bytes, so TVM's
// blob (params/tvm_blob.hpp, which also writes it, padding and alignment included),
// .safetensors files (safetensors.hpp) and numpy's .npz archives (npz.hpp) load through
// the same calls. Copying tensors (the default) or, from a file, mapping it and handing
// out views that keep the mapping alive (load_mode::mmap: read its limits in params/dict.hpp).

#include "config.hpp"

#include <cstddef>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "file_path.hpp"
#include "load_progress.hpp"
#include "params/dict.hpp"
#include "params/formats.hpp"
#include "params/source.hpp"
#include "params/tvm_blob.hpp"
#include "safetensors.hpp"

GEXEC_NAMESPACE_BEGIN

/// Reads a parameter blob (tvm.runtime.save_param_dict's bytes, a .safetensors file's or an
/// .npz archive's, told apart by their first bytes); the tensors are copies.
inline param_dict load_param_dict(std::span<const std::byte> blob) {
  return with_param_source(param_input::memory(blob), [](const auto& source) { return read_param_dict(source); });
}
inline param_dict load_param_dict(std::string_view blob) { return load_param_dict(detail::as_bytes(blob)); }

/// Reads a parameter blob whose bytes outlive every tensor and model made from it (a
/// program's own read-only data: gexec_add_model's params(), or memory the caller never
/// frees): tensors whose data is aligned for their elements there are views of it, the
/// others copies. A model reads the views that are 64-byte aligned where they lie (a blob
/// written with save_options::align, `gexec-run --convert-params`), copying nothing.
inline param_dict view_param_dict(std::span<const std::byte> blob) {
  // No owner to keep: the bytes live as long as the program.
  const std::shared_ptr<const void> forever(blob.data(), [](const void*) {});
  param_dict dict = with_param_source(param_input::memory(blob, forever), [](const auto& source) { return read_param_dict(source); });
  detail::param_dict_access::set_mapped(dict, blob);
  return dict;
}

/// Reads a parameter file: TVM's blob, a .safetensors file or an .npz archive (told apart
/// by the first bytes, then the extension: params/formats.hpp), with the same modes. Only
/// regular files are read: a FIFO, a directory or a device is refused (errc::io, naming
/// the path) before anything is read from it.
///  - load_mode::copy (the default): the index (headers) is read and checked first (a file that is
///    not a parameter blob is refused after one small read, however large it is), then
///    each tensor's data is read straight into its own storage (64-byte aligned, not
///    zero-filled first), its size checked against the bytes the file has left before
///    that storage is allocated. The file holds a shared flock while it is read, so a
///    cooperating writer cannot rewrite it meanwhile.
///  - load_mode::mmap: tensors whose data sits at an offset aligned for their elements
///    are views into a private mapping of the file that lives as long as any of them
///    (nothing is read: the cost does not grow with their size); the others are read
///    from the file into storage of their own. param_dict::is_mapped tells which is
///    which; save_options::align writes files whose tensors all map. Read
///    load_mode::mmap for what must not happen to the file while views of it live.
/// `progress`, when set, hears of the bytes read every few MiB, the last time with the
/// file's size. Malformed blobs are errc::invalid_params and memory that cannot be had
/// errc::out_of_memory, both naming the path, the tensor and the byte.
inline param_dict load_param_dict_file(const file_path& path, load_mode mode, const load_progress& progress) {
  const param_input in = param_input::open(path, mode);
  return with_param_source(in, [&](const auto& source) {
    detail::progress_sink sink(&progress, source.input_bytes());
    param_dict dict = read_param_dict(source, &sink);
    if (mode == load_mode::mmap) detail::param_dict_access::set_mapped(dict, in.bytes());
    return dict;
  });
}
/// A parameter file mapped for a model (what model::load reads): only tensors whose data
/// sits 64-byte aligned in the file (kernel_alignment: save_options::align, `gexec-run
/// --convert-params`) are views of the mapping, which a model then reads in place; the
/// others are read from the file into memory of their own without touching the mapping,
/// so no byte is resident twice. The mapping's limits are load_mode::mmap's.
inline param_dict map_param_dict_file(const file_path& path, const load_progress& progress = {}) {
  const param_input in = param_input::mapped(path, detail::host_alignment);
  return with_param_source(in, [&](const auto& source) {
    detail::progress_sink sink(&progress, source.input_bytes());
    param_dict dict = read_param_dict(source, &sink);
    detail::param_dict_access::set_mapped(dict, in.bytes());
    return dict;
  });
}

inline param_dict load_param_dict_file(const file_path& path, load_mode mode = load_mode::copy) {
  return load_param_dict_file(path, mode, load_progress());
}
inline param_dict load_param_dict_file(const file_path& path, const load_progress& progress) {
  return load_param_dict_file(path, load_mode::copy, progress);
}

/// Writes `dict` as a .safetensors file (see save_safetensors), as save_param_dict_file
/// writes: under an exclusive flock, refusing a file that is mapped or being read.
inline void save_safetensors_file(const param_dict& dict, const file_path& path) {
  detail::write_parameter_file(save_safetensors(dict), path);
}

GEXEC_NAMESPACE_END
