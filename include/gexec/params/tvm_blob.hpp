#pragma once
// TVM's parameter blob: the NDArray-list format (tvm.runtime.save_param_dict), read and
// written bit for bit. Reading copies the tensors (the default) or, from a file, maps it
// and hands out views that keep the mapping alive (load_mode::mmap: read its limits).
//
// Aligned blobs. TVM's format has no padding: a tensor's data starts wherever the names
// and records before it end, so a map of the file can hand out views only by chance.
// save_param_dict(dict, {.align = 64}) puts, before each tensor whose data would start
// at a misaligned offset, a uint8 tensor named "__gexec_pad_<i>" (i: the tensor's index
// in the dict) whose length moves that data to a multiple of `align`. TVM reads such a
// blob as it is (load_param_dict returns the pads too; a graph executor ignores names
// that are not graph inputs); gexec's readers drop every name that starts with
// "__gexec_pad_", and its writers refuse such names in a dict.
//
// tvm_blob_source is its weight source (params/source.hpp); params/formats.hpp sniffs it
// by its first 8 bytes, param_list_magic.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../detail/byte_io.hpp"
#include "../detail/name_index.hpp"
#include "../detail/shape.hpp"
#include "../file_path.hpp"
#include "../load_progress.hpp"
#include "../ndarray.hpp"
#include "dict.hpp"
#include "source.hpp"

GEXEC_NAMESPACE_BEGIN

inline constexpr std::uint64_t param_list_magic = 0xF7E58D4F05049CB7ULL;
/// Names that start with this are padding (see the top of this header): readers drop them.
inline constexpr std::string_view param_pad_prefix = "__gexec_pad_";
inline constexpr std::uint64_t tensor_magic = 0xDD5E40F096B4A13FULL;

namespace detail {

/// The dtype codes of a record as gexec names them (a parameter blob's, TVM v0.19's).
struct same_dtype_codes {
  constexpr DLDataType operator()(DLDataType t) const noexcept { return t; }
};

/// Reads a tensor record up to its data from a byte_reader or a file_reader, and checks
/// that the reader holds that much data (before anyone allocates for it). `to_gexec`
/// maps the record's dtype to gexec's codes (records whose writer names dtypes otherwise,
/// as a Relax executable's constants do); a dtype it maps to one gexec lacks is refused.
template <class Reader, class ToGexec = same_dtype_codes>
tensor_header read_tensor_header(Reader& in, ToGexec to_gexec = {}) {
  auto magic = in.template read<std::uint64_t>("tensor magic");
  if (magic != tensor_magic) {
    char hex[19];
    std::snprintf(hex, sizeof hex, "0x%016llx", static_cast<unsigned long long>(magic));
    in.fail(std::string("bad tensor magic ") + hex);
  }
  (void)in.template read<std::uint64_t>("tensor reserved field");
  auto device_type = in.template read<std::int32_t>("device type");
  (void)in.template read<std::int32_t>("device id");
  if (device_type != kDLCPU) in.fail("device type " + std::to_string(device_type) + " (saved tensors are always on the CPU)");
  auto ndim = in.template read<std::int32_t>("ndim");
  tensor_header h;
  h.dtype.code = in.template read<std::uint8_t>("dtype code");
  h.dtype.bits = in.template read<std::uint8_t>("dtype bits");
  h.dtype.lanes = in.template read<std::uint16_t>("dtype lanes");
  if (ndim < 0) in.fail("negative ndim " + std::to_string(ndim));
  if (static_cast<std::uint64_t>(ndim) > in.remaining() / sizeof(std::int64_t))
    in.fail("truncated: ndim " + std::to_string(ndim) + " needs more shape bytes than the " +
            std::to_string(in.remaining()) + " left");
  if (ndim > max_ndim) in.fail("ndim " + std::to_string(ndim) + " exceeds gexec's limit of " + std::to_string(max_ndim));
  if (h.dtype.lanes != 1) in.fail("dtype " + to_string(h.dtype) + " has " + std::to_string(h.dtype.lanes) + " lanes; saved tensors have 1");
  const DLDataType written = h.dtype;
  h.dtype = to_gexec(written);
  if (!is_supported(h.dtype))
    in.fail("unsupported dtype (code " + std::to_string(written.code) + ", bits " + std::to_string(written.bits) + ")");
  h.shape.resize(static_cast<std::size_t>(ndim));
  for (auto& d : h.shape) d = in.template read<std::int64_t>("shape");
  auto bytes = checked_byte_size(h.shape, h.dtype);
  if (!bytes) in.fail("shape " + shape_to_string(h.shape) + " is negative or overflows");
  auto byte_size = in.template read<std::int64_t>("byte size");
  if (byte_size < 0 || static_cast<std::uint64_t>(byte_size) != *bytes)
    in.fail("byte size " + std::to_string(byte_size) + " disagrees with shape " + shape_to_string(h.shape) + " of " +
            to_string(h.dtype) + " (" + std::to_string(*bytes) + " bytes)");
  // The size comes from the input: check that the input has it before allocating for it.
  in.require(*bytes, "tensor data");
  h.bytes = *bytes;
  return h;
}

/// Reads one tensor record from a byte_reader or a file_reader into a tensor that owns
/// a copy of its data; with `keepalive` set (a byte_reader only), the tensor views the
/// reader's bytes (which `keepalive` owns) where they are aligned for it.
template <class Reader, class ToGexec = same_dtype_codes>
ndarray read_tensor_record(Reader& in, const std::shared_ptr<const void>& keepalive, ToGexec to_gexec = {}) {
  tensor_header h = read_tensor_header(in, to_gexec);
  if constexpr (std::is_same_v<Reader, byte_reader>) {
    // Names of odd lengths shift everything after them: where the data is misaligned
    // for its elements, copy instead.
    if (keepalive && can_view(in.data().data() + in.position(), h.dtype)) {
      auto data = in.bytes(h.bytes, "tensor data");
      return ndarray::view(h.over(const_cast<std::byte*>(data.data())), keepalive);
    }
  }
  ndarray a = allocate_tensor(in, h.shape, h.dtype, h.bytes);
  in.read_into(a.data(), h.bytes, "tensor data");
  return a;
}

/// Reads the header of a parameter list: the magic, then the names (checked against the
/// bytes left before anything is reserved for them), then the tensor count.
template <class Reader>
std::vector<std::string> read_param_names_of(Reader& in) {
  in.set_context("header");
  if (auto magic = in.template read<std::uint64_t>("magic"); magic != param_list_magic)
    in.fail("not a parameter blob (bad magic)");
  (void)in.template read<std::uint64_t>("reserved field");
  auto n_names = in.read_count("names", sizeof(std::uint64_t));
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(n_names));
  for (std::uint64_t i = 0; i < n_names; ++i) names.push_back(in.read_string("name"));
  auto n_tensors = in.template read<std::uint64_t>("tensor count");
  if (n_tensors != n_names)
    in.fail("tensor count " + std::to_string(n_tensors) + " differs from the name count " + std::to_string(n_names));
  return names;
}

inline bool is_pad_name(std::string_view name) noexcept { return name.starts_with(param_pad_prefix); }

/// Reads a parameter list from a byte_reader or a file_reader: per tensor, `read(in,
/// header)` takes the data (which is checked to be there) and returns the tensor.
/// Padding tensors are checked and stepped over.
template <class Reader, class ReadData>
param_dict read_param_list(Reader& in, ReadData&& read, progress_sink* progress = nullptr) {
  std::vector<std::string> names = read_param_names_of(in);
  param_dict dict;
  for (std::size_t i = 0; i < names.size(); ++i) {
    in.set_context("tensor " + std::to_string(i) + " (\"" + names[i] + "\")");
    if (dict.contains(names[i])) in.fail("duplicate parameter name");
    tensor_header h = read_tensor_header(in);
    if (is_pad_name(names[i])) {
      if constexpr (requires { in.skip(h.bytes, ""); }) in.skip(h.bytes, "padding");
      else (void)in.bytes(h.bytes, "padding");
      continue;
    }
    dict.set(names[i], read(in, h));
    if (progress) progress->report(in.position());
  }
  in.set_context({});
  return dict;
}

/// A tensor that owns a copy of the data the reader is at.
template <class Reader>
ndarray copy_tensor_data(Reader& in, tensor_header& h) {
  ndarray a = allocate_tensor(in, h.shape, h.dtype, h.bytes);
  in.read_into(a.data(), h.bytes, "tensor data");
  return a;
}

/// For read_param_list over bytes that `keepalive` owns: views where the data are
/// aligned for their elements, copies elsewhere.
inline auto view_or_copy(std::shared_ptr<const void> keepalive) {
  return [keepalive = std::move(keepalive)](byte_reader& in, tensor_header& h) {
    const std::byte* at = in.data().data() + in.position();
    if (!can_view(at, h.dtype)) return copy_tensor_data(in, h);
    (void)in.bytes(h.bytes, "tensor data");
    return ndarray::view(h.over(const_cast<std::byte*>(at)), keepalive);
  };
}

/// Reads a whole parameter blob: the list, then nothing after it. Memory that cannot be
/// had (for the names, the tables) is errc::out_of_memory naming the source, never
/// std::bad_alloc.
template <class Reader, class ReadData>
param_dict read_param_blob(Reader& in, ReadData&& read, progress_sink* progress = nullptr) {
  try {
    param_dict dict = read_param_list(in, read, progress);
    if (in.remaining() != 0) in.fail(std::to_string(in.remaining()) + " unexpected bytes after the last tensor");
    return dict;
  } catch (const std::bad_alloc&) {
    in.fail(errc::out_of_memory, "out of memory");
  }
}

/// The names of a parameter blob, without reading its tensors (padding left out).
inline std::vector<std::string> read_param_names(std::span<const std::byte> blob) {
  byte_reader in(blob, "params");
  if (in.read<std::uint64_t>("magic") != param_list_magic) in.fail("not a parameter blob (bad magic)");
  (void)in.read<std::uint64_t>("reserved field");
  auto n = in.read_count("names", sizeof(std::uint64_t));
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(n));
  for (std::uint64_t i = 0; i < n; ++i)
    if (std::string name = in.read_string("name"); !is_pad_name(name)) names.push_back(std::move(name));
  return names;
}

inline void write_tensor_record(byte_writer& out, std::string_view name, const ndarray& a) {
  auto fail = [&](const std::string& why) {
    throw error(errc::invalid_argument, "save_param_dict: \"" + std::string(name) + "\": " + why);
  };
  if (!a.defined()) fail("undefined tensor");
  if (a.device().device_type != kDLCPU) fail("tensor is on " + to_string(a.device()) + "; copy it to the host first");
  if (!a.is_contiguous()) fail("tensor is strided");
  if (a.dtype().lanes != 1) fail("dtype " + to_string(a.dtype()) + " has lanes; TVM's format stores one lane");
  out.write(tensor_magic);
  out.write(std::uint64_t{0});
  out.write(std::int32_t{kDLCPU});
  out.write(std::int32_t{0});
  out.write(std::int32_t{a.ndim()});
  out.write(a.dtype());
  for (std::int64_t d : a.shape()) out.write(d);
  out.write(static_cast<std::int64_t>(a.byte_size()));
  out.append(a.data(), static_cast<std::size_t>(a.byte_size()));
}

}  // namespace detail

/// TVM's parameter blob as a weight source: its record headers read and checked when it
/// is made (the data stepped over, so a malformed blob is refused before any tensor data
/// is read); padding tensors left out. Views in place where the input is memory that may
/// be viewed and a tensor's data sits aligned for its elements.
class tvm_blob_source {
 public:
  /// The format's name, as the sniff table and messages give it.
  static constexpr std::string_view format = "params";
  /// The file extension that names the format where no magic bytes do.
  static constexpr std::string_view extension = ".params";
  /// Whether an input starting with `head` is TVM's blob: its first 8 bytes are param_list_magic.
  static bool sniff(std::span<const std::byte> head) noexcept {
    if (head.size() < 8) return false;
    std::uint64_t magic = 0;
    std::memcpy(&magic, head.data(), 8);
    return magic == param_list_magic;
  }

  explicit tvm_blob_source(param_input in) : in_(std::move(in)), name_(in_.name(format)) {
    if (in_.file() && in_.bytes().empty()) {
      detail::file_reader r(*in_.file(), name_);
      index(r);
    } else {
      detail::byte_reader r(in_.bytes(), name_);
      index(r);
    }
  }

  [[nodiscard]] std::span<const param_entry> entries() const noexcept { return entries_; }
  void read(std::size_t i, void* dst, detail::progress_sink* progress = nullptr) const {
    in_.read(entries_[i].offset, dst, entries_[i].bytes, progress);
  }
  [[nodiscard]] ndarray view(std::size_t i) const { return detail::view_in_place(in_, entries_[i].offset, entries_[i]); }
  [[nodiscard]] const std::string& name() const noexcept { return name_; }
  [[nodiscard]] std::uint64_t input_bytes() const noexcept { return in_.size(); }
  /// Refuses bytes after the last tensor. Separate from the index, as TVM's reader: a
  /// tensor that cannot be had is reported before them (read_param_dict calls this last,
  /// load_params_file before it reads any data).
  void finish() const {
    if (trailing_ != 0)
      throw error(errc::invalid_params, name_ + ": " + std::to_string(trailing_) + " unexpected bytes after the last tensor (at byte " +
                                            std::to_string(end_) + ")");
  }

 protected:
  struct in_memory {};
  /// The input's bytes indexed with the byte reader alone (tvm_blob_memory_source).
  tvm_blob_source(param_input in, in_memory) : in_(std::move(in)), name_(in_.name(format)) {
    detail::byte_reader r(in_.bytes(), name_);
    index(r);
  }
  [[nodiscard]] const param_input& input() const noexcept { return in_; }

 private:

  template <class Reader>
  void index(Reader& r) {
    try {
      std::vector<std::string> names = detail::read_param_names_of(r);
      entries_.reserve(names.size());
      detail::name_index seen;  // the first tensor of each name
      for (std::size_t i = 0; i < names.size(); ++i) {
        r.set_context("tensor " + std::to_string(i) + " (\"" + names[i] + "\")");
        if (!seen.emplace(names[i], i).second) r.fail("duplicate parameter name");
        detail::tensor_header h = detail::read_tensor_header(r);
        const std::uint64_t at = r.position();
        if constexpr (requires { r.skip(h.bytes, ""); }) r.skip(h.bytes, "tensor data");
        else (void)r.bytes(h.bytes, "tensor data");
        if (!detail::is_pad_name(names[i])) entries_.push_back({std::move(names[i]), h.dtype, std::move(h.shape), h.bytes, at});
      }
      r.set_context({});
      trailing_ = r.remaining();
      end_ = r.position();
    } catch (const std::bad_alloc&) {
      r.fail(errc::out_of_memory, "out of memory");
    }
  }

  param_input in_;
  std::string name_;
  std::vector<param_entry> entries_;
  std::uint64_t trailing_ = 0, end_ = 0;
};
static_assert(param_source<tvm_blob_source>);

/// TVM's parameter blob in memory (as param_input::memory(bytes, owner) gives it to
/// tvm_blob_source), read with neither a file reader nor pread: what a static program
/// reads its embedded weights with (static_model), so that it links no file code.
class tvm_blob_memory_source : public tvm_blob_source {
 public:
  explicit tvm_blob_memory_source(std::span<const std::byte> bytes, std::shared_ptr<const void> owner = nullptr)
      : tvm_blob_source(param_input::memory(bytes, std::move(owner)), in_memory{}) {}
  /// Copies entry i's bytes (the index checked that they lie inside).
  void read(std::size_t i, void* dst, detail::progress_sink* = nullptr) const {
    const param_entry& e = entries()[i];
    if (e.bytes != 0) std::memcpy(dst, input().bytes().data() + e.offset, static_cast<std::size_t>(e.bytes));
  }
};
static_assert(param_source<tvm_blob_memory_source>);

/// How save_param_dict lays a blob out.
struct save_options {
  /// 0: exactly as TVM writes it. A power of two (64 for kernels, 4096 for pages): every
  /// tensor's data starts at a multiple of it in the blob, moved there by padding
  /// tensors TVM reads and ignores (see the top of this header), so that load_mode::mmap
  /// maps every tensor of the file without a copy.
  std::size_t align = 0;
};

namespace detail {

/// Per tensor of `dict`, the bytes of padding data to put before it (-1: no padding
/// tensor) so that every tensor's data starts at a multiple of `align`. A padding tensor
/// adds a name to the header, which moves every record before the first padding: the
/// set of padded tensors only grows, so this settles in at most dict.size() rounds.
/// `head_bytes`: what precedes the first name, from where alignment counts (a blob's
/// magic, reserved word and two counts; more inside a module blob).
inline std::vector<std::int64_t> plan_padding(const param_dict& dict, std::uint64_t align, std::uint64_t head_bytes = 32) {
  std::vector<std::int64_t> pad(dict.size(), -1);
  if (align <= 1) return pad;
  const std::uint64_t record_head = 40, pad_record_head = record_head + 8;  // ndim 1
  for (bool changed = true; changed;) {
    changed = false;
    std::uint64_t at = head_bytes;
    std::size_t i = 0;
    for (const auto& [name, a] : dict) {
      at += 8 + name.size();
      if (pad[i] >= 0) at += 8 + param_pad_prefix.size() + std::to_string(i).size();
      ++i;
    }
    i = 0;
    for (const auto& [name, a] : dict) {
      const std::uint64_t head = record_head + 8 * static_cast<std::uint64_t>(a.ndim());
      if (pad[i] >= 0) {
        at += pad_record_head;
        pad[i] = static_cast<std::int64_t>((align - (at + head) % align) % align);
        at += static_cast<std::uint64_t>(pad[i]);
      }
      at += head;
      if (at % align != 0 && pad[i] < 0) {
        pad[i] = 0;
        changed = true;
      }
      at += a.byte_size();
      ++i;
    }
  }
  return pad;
}

inline void write_pad_record(byte_writer& out, std::int64_t n) {
  out.write(tensor_magic);
  out.write(std::uint64_t{0});
  out.write(std::int32_t{kDLCPU});
  out.write(std::int32_t{0});
  out.write(std::int32_t{1});
  out.write(DLDataType{kDLUInt, 8, 1});
  out.write(n);
  out.write(n);
  static constexpr std::byte zeros[4096] = {};
  for (std::int64_t left = n; left > 0; left -= static_cast<std::int64_t>(sizeof zeros))
    out.append(zeros, static_cast<std::size_t>(std::min<std::int64_t>(left, sizeof zeros)));
}

}  // namespace detail

/// Writes a parameter blob that tvm.runtime.load_param_dict reads; with options.align,
/// one whose tensor data are all aligned (see save_options). Names that start with
/// "__gexec_pad_" are reserved for padding: errc::invalid_argument.
inline std::vector<std::byte> save_param_dict(const param_dict& dict, save_options options) {
  if (options.align != 0 && (options.align & (options.align - 1)) != 0)
    throw error(errc::invalid_argument, "save_param_dict: align " + std::to_string(options.align) + " is not a power of two");
  for (const auto& [name, a] : dict)
    if (detail::is_pad_name(name))
      throw error(errc::invalid_argument, "save_param_dict: \"" + name + "\": names that start with \"" + std::string(param_pad_prefix) +
                                              "\" are reserved for padding");
  const std::vector<std::int64_t> pad = detail::plan_padding(dict, options.align);
  detail::byte_writer out;
  std::size_t total = 32, count = dict.size();
  std::size_t i = 0;
  for (const auto& [name, a] : dict) {
    total += 8 + name.size() + 64 + 8 * static_cast<std::size_t>(a.ndim()) + a.byte_size();
    if (pad[i] >= 0) total += 8 + 32 + 64 + static_cast<std::size_t>(pad[i]), ++count;
    ++i;
  }
  out.reserve(total);
  out.write(param_list_magic);
  out.write(std::uint64_t{0});
  out.write(static_cast<std::uint64_t>(count));
  i = 0;
  for (const auto& [name, a] : dict) {
    if (pad[i] >= 0) out.write_string(std::string(param_pad_prefix) + std::to_string(i));
    out.write_string(name);
    ++i;
  }
  out.write(static_cast<std::uint64_t>(count));
  i = 0;
  for (const auto& [name, a] : dict) {
    if (pad[i] >= 0) detail::write_pad_record(out, pad[i]);
    detail::write_tensor_record(out, name, a);
    ++i;
  }
  return std::move(out).take();
}
inline std::vector<std::byte> save_param_dict(const param_dict& dict) { return save_param_dict(dict, save_options{}); }

namespace detail {
/// Writes a parameter file's bytes as a cooperating writer (see save_param_dict_file).
inline void write_parameter_file(const std::vector<std::byte>& bytes, const file_path& path) {
  const std::string name = "parameter file " + path.string();
  // errno is read once, as the call that failed left it, before a message is built.
  auto fail_errno = [&](const char* doing, int err) {
    throw error(errc::io, std::string(doing) + " " + name + ": " + std::generic_category().message(err));
  };
  int fd;
  do fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOCTTY | O_NONBLOCK, 0666);
  while (fd < 0 && errno == EINTR);
  if (fd < 0) fail_errno("cannot create", errno);
  struct closer {
    int fd;
    ~closer() { ::close(fd); }
  } close_at_end{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail_errno("cannot stat", errno);
  if (!S_ISREG(st.st_mode)) throw error(errc::io, name + " is " + detail::file_kind(st.st_mode) + ", not a regular file");
  detail::lock_file(fd, LOCK_EX, name, "is in use (mapped or being read, here or by another process); not rewriting it");
  if (::ftruncate(fd, 0) != 0) fail_errno("cannot truncate", errno);
  const char* p = reinterpret_cast<const char*>(bytes.data());
  std::size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail_errno("cannot write", n < 0 ? errno : EIO);
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

}  // namespace detail

/// Writes a parameter file as a cooperating writer: it takes an exclusive flock before
/// truncating, and refuses (errc::io) a file that is mapped (load_mode::mmap) or being
/// read by load_param_dict_file, here or in another process, instead of changing the
/// views or raising SIGBUS in their users.
inline void save_param_dict_file(const param_dict& dict, const file_path& path, save_options options = {}) {
  detail::write_parameter_file(save_param_dict(dict, options), path);
}

GEXEC_NAMESPACE_END
