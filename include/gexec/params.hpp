#pragma once
// Parameter blobs: TVM's NDArray-list format (tvm.runtime.save_param_dict), read and
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
// .safetensors files (safetensors.hpp) are read by the same calls, told apart from TVM's
// blobs by their first bytes, and written by save_safetensors / save_safetensors_file.

#include "config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "detail/aligned_memory.hpp"
#include "detail/byte_io.hpp"
#include "detail/shape.hpp"
#include "load_progress.hpp"
#include "ndarray.hpp"
#include "safetensors.hpp"

GEXEC_NAMESPACE_BEGIN

namespace detail {
struct param_dict_access;
}

inline constexpr std::uint64_t param_list_magic = 0xF7E58D4F05049CB7ULL;
/// Names that start with this are padding (see the top of this header): readers drop them.
inline constexpr std::string_view param_pad_prefix = "__gexec_pad_";
inline constexpr std::uint64_t tensor_magic = 0xDD5E40F096B4A13FULL;

/// Name -> tensor, in insertion order (so a blob read and written back is identical).
class param_dict {
 public:
  using value_type = std::pair<std::string, ndarray>;

  /// Inserts or replaces; a replaced entry keeps its position.
  void set(std::string name, ndarray value) {
    if (auto it = index_.find(name); it != index_.end()) {
      items_[it->second].second = std::move(value);
      return;
    }
    index_.emplace(name, items_.size());
    items_.emplace_back(std::move(name), std::move(value));
  }
  [[nodiscard]] const ndarray* find(std::string_view name) const {
    auto it = index_.find(std::string(name));
    return it == index_.end() ? nullptr : &items_[it->second].second;
  }
  [[nodiscard]] const ndarray& at(std::string_view name) const {
    if (const ndarray* a = find(name)) return *a;
    throw error(errc::not_found, "no parameter named \"" + std::string(name) + "\"");
  }
  [[nodiscard]] bool contains(std::string_view name) const { return find(name) != nullptr; }
  [[nodiscard]] std::size_t size() const noexcept { return items_.size(); }
  [[nodiscard]] bool empty() const noexcept { return items_.empty(); }
  [[nodiscard]] auto begin() const noexcept { return items_.begin(); }
  [[nodiscard]] auto end() const noexcept { return items_.end(); }

  /// The addresses of the file mapping that a load_mode::mmap load read (empty otherwise):
  /// a tensor whose data() lies inside is a view of the file, any other one a copy. Only
  /// an address range: the mapping lives as long as a tensor viewing it, not the dict.
  [[nodiscard]] std::span<const std::byte> mapped_range() const noexcept { return mapped_; }
  /// Whether `a`'s data lies in mapped_range(): a view of the mapped file, not a copy.
  [[nodiscard]] bool is_mapped(const ndarray& a) const noexcept {
    const auto* p = static_cast<const std::byte*>(a.data());
    return !mapped_.empty() && std::less_equal<>()(mapped_.data(), p) && std::less<>()(p, mapped_.data() + mapped_.size());
  }

 private:
  friend struct detail::param_dict_access;
  std::vector<value_type> items_;
  std::unordered_map<std::string, std::size_t> index_;
  std::span<const std::byte> mapped_;
};

/// How load_param_dict_file reads a file. Copy is the default everywhere in gexec
/// (load_param_dict_file, graph_executor::load_params_file, model loading); choose mmap
/// only for files nothing rewrites while the tensors live.
enum class load_mode {
  copy,  ///< tensors own 64-byte aligned copies of their bytes; the file is closed on return
  /// Tensors view a private (copy-on-write) mapping of the file where their elements are
  /// naturally aligned there (not necessarily to 64 bytes), and are copies otherwise. The
  /// mapping lives as long as any tensor from it, and its limits are the platform's:
  ///  - the file must not be changed while views of it live: MAP_PRIVATE isolates the
  ///    file from writes through the views, not the views from writes to the file, so
  ///    pages not yet read (or not yet copied by a write) show another process's
  ///    in-place writes, and a file truncated under the mapping raises SIGBUS on access
  ///    to the pages past its new end, which no library can turn into an error;
  ///  - only regular files are mapped (a FIFO, directory or device is refused);
  ///  - while the mapping lives its file holds a shared advisory lock (flock LOCK_SH),
  ///    so cooperating writers can see it in use: save_param_dict_file refuses to
  ///    rewrite it then, and loading refuses a file whose exclusive lock a writer holds.
  ///    A writer that ignores advisory locks (cp, an editor, a build tool, a filesystem
  ///    that does not support them) can still change the views or cause SIGBUS.
  /// Replace such files by writing a new file and renaming it over the old one: existing
  /// mappings keep the old file.
  mmap,
};

namespace detail {

/// Takes an advisory flock (LOCK_SH or LOCK_EX) without waiting: errc::io if another
/// open file holds a conflicting one; where the filesystem has no flock, goes on unlocked.
inline void lock_file(int fd, int operation, const std::string& name, const char* conflict) {
  int rc;
  do rc = ::flock(fd, operation | LOCK_NB);
  while (rc != 0 && errno == EINTR);
  if (rc == 0) return;
  if (errno == EWOULDBLOCK) throw error(errc::io, name + " " + conflict);
  // ENOLCK, EOPNOTSUPP, EINVAL: no advisory locks here; nothing to cooperate with.
}

/// A whole regular file mapped privately and read-write (writes through views change
/// neither the file nor other mappings), locked shared (flock LOCK_SH) for as long as
/// the mapping lives. See load_mode::mmap for what that does not protect against.
class mapped_file {
 public:
  explicit mapped_file(const std::filesystem::path& path) : file_(path, "parameter file") {
    lock_file(file_.fd(), LOCK_SH, file_.name(), "is being written (another process holds an exclusive flock on it)");
    if (file_.size() == 0) return;
    if (file_.size() > static_cast<std::uint64_t>(PTRDIFF_MAX))
      throw error(errc::out_of_memory, "cannot map " + file_.name() + ": " + std::to_string(file_.size()) + " bytes");
    size_ = static_cast<std::size_t>(file_.size());
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE, file_.fd(), 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      throw error(err == ENOMEM ? errc::out_of_memory : errc::io,
                  "cannot map " + file_.name() + ": " + std::generic_category().message(err));
    }
    address_ = p;
  }
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  /// Unmaps, then (file_'s destructor) closes the file, which releases the lock.
  ~mapped_file() {
    if (address_) ::munmap(address_, size_);
  }

  [[nodiscard]] std::span<const std::byte> bytes() const noexcept {
    return {static_cast<const std::byte*>(address_), address_ ? size_ : 0};
  }
  [[nodiscard]] const regular_file& file() const noexcept { return file_; }

 private:
  regular_file file_;
  void* address_ = nullptr;
  std::size_t size_ = 0;
};

/// Host storage for a tensor read from a blob, not zeroed (its bytes are about to be
/// overwritten); errc::out_of_memory naming the tensor if it cannot be had.
template <class Reader>
ndarray allocate_tensor(const Reader& in, std::vector<std::int64_t>& shape, DLDataType dtype, std::uint64_t bytes) {
  void* p = nullptr;
  try {
    p = allocate_aligned(bytes);
  } catch (const error&) {
    in.fail(errc::out_of_memory, "cannot allocate " + std::to_string(bytes) + " bytes for the tensor data");
  }
  std::shared_ptr<void> storage(p, &free_aligned);
  // The padding after the elements (up to the alignment) is zeroed, as ndarray::empty's is.
  const auto padded = align_up(bytes == 0 ? 1 : bytes, host_alignment);
  std::memset(static_cast<std::byte*>(p) + bytes, 0, static_cast<std::size_t>(padded - bytes));
  DLTensor t{p, cpu(), static_cast<std::int32_t>(shape.size()), dtype, shape.data(), nullptr, 0};
  return ndarray::view(t, std::move(storage));
}

/// A tensor record up to its data: what the data will be, checked.
struct tensor_header {
  std::vector<std::int64_t> shape;
  DLDataType dtype{};
  std::uint64_t bytes = 0;

  /// A DLTensor of this shape and dtype over `data`, valid while the header lives.
  [[nodiscard]] DLTensor over(void* data) { return {data, cpu(), static_cast<std::int32_t>(shape.size()), dtype, shape.data(), nullptr, 0}; }
};

/// Reads a tensor record up to its data from a byte_reader or a file_reader, and checks
/// that the reader holds that much data (before anyone allocates for it).
template <class Reader>
tensor_header read_tensor_header(Reader& in) {
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
  if (!is_supported(h.dtype))
    in.fail("unsupported dtype (code " + std::to_string(h.dtype.code) + ", bits " + std::to_string(h.dtype.bits) + ")");
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

/// Whether a view of data at `at` may stand for a tensor of `dtype`: its elements are
/// naturally aligned there.
inline bool can_view(const void* at, DLDataType dtype) noexcept {
  const auto natural = std::min<std::uint64_t>(element_bytes(dtype), 8);
  return reinterpret_cast<std::uintptr_t>(at) % natural == 0;
}

/// Reads one tensor record from a byte_reader or a file_reader into a tensor that owns
/// a copy of its data; with `keepalive` set (a byte_reader only), the tensor views the
/// reader's bytes (which `keepalive` owns) where they are aligned for it.
template <class Reader>
ndarray read_tensor_record(Reader& in, const std::shared_ptr<const void>& keepalive) {
  tensor_header h = read_tensor_header(in);
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

struct param_dict_access {
  static void set_mapped(param_dict& d, std::span<const std::byte> range) { d.mapped_ = range; }
};

/// One tensor of a parameter file, located: its name, header and the offset of its data.
struct param_record {
  std::string name;
  tensor_header header;
  std::uint64_t offset = 0;
};

/// A parameter file opened, locked shared and indexed: every record header read and
/// checked (the data stepped over, so a malformed file is refused before any tensor data
/// is read), for a reader that puts each tensor's data where it will stay.
class param_file {
 public:
  explicit param_file(const std::filesystem::path& path) : file_(path, "parameter file") {
    lock_file(file_.fd(), LOCK_SH, file_.name(), "is being written (another process holds an exclusive flock on it)");
    if (file_.size() >= 9) {
      std::byte first[9];
      file_.read_exact(first, 9, 0);
      if (looks_like_safetensors(first)) {
        index_safetensors();
        return;
      }
    }
    file_reader in(file_, "params " + path.string());
    try {
      std::vector<std::string> names = read_param_names_of(in);
      records_.reserve(names.size());
      std::unordered_set<std::string> seen;
      for (std::size_t i = 0; i < names.size(); ++i) {
        in.set_context("tensor " + std::to_string(i) + " (\"" + names[i] + "\")");
        if (!seen.insert(names[i]).second) in.fail("duplicate parameter name");
        tensor_header h = read_tensor_header(in);
        const std::uint64_t at = in.position();
        in.skip(h.bytes, "tensor data");
        if (!is_pad_name(names[i])) records_.push_back({std::move(names[i]), std::move(h), at});
      }
      in.set_context({});
      if (in.remaining() != 0) in.fail(std::to_string(in.remaining()) + " unexpected bytes after the last tensor");
    } catch (const std::bad_alloc&) {
      in.fail(errc::out_of_memory, "out of memory");
    }
  }

  [[nodiscard]] const std::vector<param_record>& records() const noexcept { return records_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return file_.size(); }
  /// Reads record `r`'s data into `dst` (r.header.bytes of them).
  void read(const param_record& r, void* dst, progress_sink* progress = nullptr) const {
    file_.read_exact(dst, r.header.bytes, r.offset, progress);
  }

 private:
  // A .safetensors file: its header read and checked, its tensors indexed where they lie.
  void index_safetensors() {
    for (safetensors_entry& e : read_safetensors_index(file_))
      records_.push_back({std::move(e.name), tensor_header{std::move(e.shape), e.dtype, e.bytes}, e.offset});
  }

  regular_file file_;
  std::vector<param_record> records_;
};

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

/// A whole regular file's bytes, read with one sized read; errc::io for anything but a
/// regular file (a FIFO, a directory, a device) and for what cannot be read.
inline std::string read_file_bytes(const std::filesystem::path& path, std::string_view what) {
  return regular_file(path, what).read_all();
}

inline std::span<const std::byte> as_bytes(std::string_view s) noexcept {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

}  // namespace detail

namespace detail {
inline param_dict to_param_dict(std::vector<std::pair<std::string, ndarray>>&& tensors) {
  param_dict dict;
  for (auto& [name, a] : tensors) dict.set(std::move(name), std::move(a));
  return dict;
}
}  // namespace detail

/// Reads a parameter blob (tvm.runtime.save_param_dict's bytes, or a .safetensors file's);
/// the tensors are copies.
inline param_dict load_param_dict(std::span<const std::byte> blob) {
  if (blob.size() >= 9 && detail::looks_like_safetensors(blob.first(9)))
    return detail::to_param_dict(detail::read_safetensors(blob, "safetensors"));
  detail::byte_reader in(blob, "params");
  return detail::read_param_blob(in, [](auto& r, detail::tensor_header& h) { return detail::copy_tensor_data(r, h); });
}
inline param_dict load_param_dict(std::string_view blob) { return load_param_dict(detail::as_bytes(blob)); }

/// Reads a parameter file: TVM's blob, or a .safetensors file (told apart by the first
/// bytes; read as safetensors.hpp says, with the same modes). Only regular files are read: a FIFO, a directory or a device
/// is refused (errc::io, naming the path) before anything is read from it.
///  - load_mode::copy (the default): the header is read and checked first (a file that is
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
inline param_dict load_param_dict_file(const std::filesystem::path& path, load_mode mode, const load_progress& progress) {
  if (mode == load_mode::copy) {
    detail::regular_file file(path, "parameter file");
    detail::lock_file(file.fd(), LOCK_SH, file.name(), "is being written (another process holds an exclusive flock on it)");
    detail::progress_sink sink(&progress, file.size());
    if (file.size() >= 9) {
      std::byte first[9];
      file.read_exact(first, 9, 0);
      if (detail::looks_like_safetensors(first)) {
        param_dict dict = detail::to_param_dict(detail::read_safetensors_file(file, &sink));
        sink.report(file.size());
        return dict;
      }
    }
    detail::file_reader in(file, "params " + path.string(), errc::invalid_params, &sink);
    param_dict dict = detail::read_param_blob(in, [](auto& r, detail::tensor_header& h) { return detail::copy_tensor_data(r, h); }, &sink);
    sink.report(file.size());
    return dict;
  }
  auto mapping = std::make_shared<const detail::mapped_file>(path);
  const std::span<const std::byte> bytes = mapping->bytes();
  detail::progress_sink sink(&progress, bytes.size());
  if (bytes.size() >= 9 && detail::looks_like_safetensors(bytes.first(9))) {
    param_dict dict = detail::to_param_dict(detail::read_safetensors(bytes, "safetensors " + path.string(), mapping));
    sink.report(bytes.size());
    detail::param_dict_access::set_mapped(dict, bytes);
    return dict;
  }
  detail::byte_reader in(bytes, "params " + path.string());
  // Views where the elements are aligned; copies of the rest read from the file, which
  // neither faults the mapping's pages in nor keeps them.
  param_dict dict = detail::read_param_blob(
      in,
      [&](detail::byte_reader& r, detail::tensor_header& h) {
        const std::byte* at = r.data().data() + r.position();
        if (detail::can_view(at, h.dtype)) {
          (void)r.bytes(h.bytes, "tensor data");
          return ndarray::view(h.over(const_cast<std::byte*>(at)), mapping);
        }
        ndarray a = detail::allocate_tensor(r, h.shape, h.dtype, h.bytes);
        mapping->file().read_exact(a.data(), h.bytes, r.position(), &sink);
        (void)r.bytes(h.bytes, "tensor data");
        return a;
      },
      &sink);
  sink.report(bytes.size());
  detail::param_dict_access::set_mapped(dict, bytes);
  return dict;
}
inline param_dict load_param_dict_file(const std::filesystem::path& path, load_mode mode = load_mode::copy) {
  return load_param_dict_file(path, mode, load_progress());
}
inline param_dict load_param_dict_file(const std::filesystem::path& path, const load_progress& progress) {
  return load_param_dict_file(path, load_mode::copy, progress);
}

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
inline std::vector<std::int64_t> plan_padding(const param_dict& dict, std::uint64_t align) {
  std::vector<std::int64_t> pad(dict.size(), -1);
  if (align <= 1) return pad;
  const std::uint64_t record_head = 40, pad_record_head = record_head + 8;  // ndim 1
  for (bool changed = true; changed;) {
    changed = false;
    std::uint64_t at = 32;  // magic, reserved, name count, tensor count
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
inline void write_parameter_file(const std::vector<std::byte>& bytes, const std::filesystem::path& path);
}  // namespace detail

/// Writes a parameter file as a cooperating writer: it takes an exclusive flock before
/// truncating, and refuses (errc::io) a file that is mapped (load_mode::mmap) or being
/// read by load_param_dict_file, here or in another process, instead of changing the
/// views or raising SIGBUS in their users.
inline void save_param_dict_file(const param_dict& dict, const std::filesystem::path& path, save_options options = {}) {
  detail::write_parameter_file(save_param_dict(dict, options), path);
}

/// Writes `dict` as a .safetensors file (see save_safetensors), as save_param_dict_file
/// writes: under an exclusive flock, refusing a file that is mapped or being read.
inline void save_safetensors_file(const param_dict& dict, const std::filesystem::path& path) {
  detail::write_parameter_file(save_safetensors(dict), path);
}

namespace detail {
inline void write_parameter_file(const std::vector<std::byte>& bytes, const std::filesystem::path& path) {
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

GEXEC_NAMESPACE_END
