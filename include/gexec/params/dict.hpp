#pragma once
// The parameter dictionary every weight source fills (name -> tensor, in the source's
// order), how a file is read (copy or map), and the host storage and file mapping the
// sources share. No format lives here: see params/source.hpp for the seam and
// params/formats.hpp for the formats.

#include "../config.hpp"

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <sys/file.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../detail/aligned_memory.hpp"
#include "../detail/byte_io.hpp"
#include "../detail/name_index.hpp"
#include "../detail/shape.hpp"
#include "../file_path.hpp"
#include "../ndarray.hpp"

GEXEC_NAMESPACE_BEGIN

namespace detail {
struct param_dict_access;
}

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
  detail::name_index index_;
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
  explicit mapped_file(const file_path& path) : file_(path, "parameter file") {
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

/// A tensor record up to its data: what the data will be, checked.
struct tensor_header {
  std::vector<std::int64_t> shape;
  DLDataType dtype{};
  std::uint64_t bytes = 0;

  /// A DLTensor of this shape and dtype over `data`, valid while the header lives.
  [[nodiscard]] DLTensor over(void* data) { return {data, cpu(), static_cast<std::int32_t>(shape.size()), dtype, shape.data(), nullptr, 0}; }
};

/// Whether a view of data at `at` may stand for a tensor of `dtype`: its elements are
/// naturally aligned there.
inline bool can_view(const void* at, DLDataType dtype) noexcept {
  const auto natural = std::min<std::uint64_t>(element_bytes(dtype), 8);
  return reinterpret_cast<std::uintptr_t>(at) % natural == 0;
}

struct param_dict_access {
  static void set_mapped(param_dict& d, std::span<const std::byte> range) { d.mapped_ = range; }
};


/// A whole regular file's bytes, read with one sized read; errc::io for anything but a
/// regular file (a FIFO, a directory, a device) and for what cannot be read.
inline std::string read_file_bytes(const file_path& path, std::string_view what) {
  return regular_file(path, what).read_all();
}

/// A dict of (name, tensor) pairs, in their order.
inline param_dict to_param_dict(std::vector<std::pair<std::string, ndarray>>&& tensors) {
  param_dict dict;
  for (auto& [name, a] : tensors) dict.set(std::move(name), std::move(a));
  return dict;
}

}  // namespace detail

GEXEC_NAMESPACE_END
