#pragma once
// file_path: the path argument of gexec's loading and saving functions. It is built from
// a string (const char*, std::string, std::string_view) or from a std::filesystem::path
// without this header including <filesystem> (tens of thousands of preprocessed lines
// that a program including gexec would otherwise pay for, whether it names a path or
// not): a path type is recognised by its members, so a program that passes one has
// <filesystem> included itself. The path is kept in the native (POSIX) form, as bytes.

#include "config.hpp"

#include <concepts>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

GEXEC_NAMESPACE_BEGIN

namespace detail {
/// A filesystem path class (std::filesystem::path; boost::filesystem::path has the same
/// members): a native string and the path operations, which no string type has.
template <class P>
concept filesystem_path_like = requires(const P& p) {
  typename P::string_type;
  { p.string() } -> std::same_as<std::string>;
  { p.native() } -> std::convertible_to<const typename P::string_type&>;
  { p.filename() } -> std::same_as<P>;
  { p.parent_path() } -> std::same_as<P>;
};
}  // namespace detail

/// A file's path as gexec's functions take it: load_module("lib.so"),
/// load_param_dict_file(std::string(name)) and load_graph_file(std::filesystem::path(p))
/// all convert to it. It converts back to a std::filesystem::path where one is asked for
/// (std::filesystem::path p = lib.path();).
class file_path {
 public:
  file_path() = default;
  file_path(const char* path) : path_(path) {}                  // NOLINT(google-explicit-constructor)
  file_path(std::string path) noexcept : path_(std::move(path)) {}  // NOLINT(google-explicit-constructor)
  file_path(std::string_view path) : path_(path) {}             // NOLINT(google-explicit-constructor)
  template <detail::filesystem_path_like Path>
  file_path(const Path& path) : path_(path.string()) {}  // NOLINT(google-explicit-constructor)
  /// A directory entry (std::filesystem::directory_entry): its path.
  template <class Entry>
    requires requires(const Entry& e) {
      requires detail::filesystem_path_like<std::remove_cvref_t<decltype(e.path())>>;
    }
  file_path(const Entry& entry) : path_(entry.path().string()) {}  // NOLINT(google-explicit-constructor)

  /// The path as bytes, for messages and for the operating system's calls.
  [[nodiscard]] const std::string& string() const noexcept { return path_; }
  [[nodiscard]] const std::string& native() const noexcept { return path_; }
  [[nodiscard]] const char* c_str() const noexcept { return path_.c_str(); }
  [[nodiscard]] bool empty() const noexcept { return path_.empty(); }

  /// The last component, as std::filesystem::path::filename() gives it for a POSIX path
  /// ("model.so" of "dir/model.so"; empty where the path ends in '/').
  [[nodiscard]] file_path filename() const {
    const std::size_t slash = path_.rfind('/');
    return slash == std::string::npos ? *this : file_path(path_.substr(slash + 1));
  }
  /// The path without its last component, as std::filesystem::path::parent_path() gives
  /// it for a POSIX path ("dir" of "dir/model.so", "/" of "/model.so", empty for "model.so").
  [[nodiscard]] file_path parent_path() const {
    const std::size_t slash = path_.rfind('/');
    if (slash == std::string::npos) return {};
    const std::size_t end = path_.find_last_not_of('/', slash);
    return file_path(end == std::string::npos ? path_.substr(0, 1) : path_.substr(0, end + 1));
  }
  /// Everything up to and including the last '/' ("dir/" of "dir/model.so"; empty for
  /// "model.so"): a file beside this one is directory_prefix() + its name.
  [[nodiscard]] std::string_view directory_prefix() const noexcept {
    const std::size_t slash = path_.rfind('/');
    return slash == std::string::npos ? std::string_view() : std::string_view(path_).substr(0, slash + 1);
  }

  /// A filesystem path of the caller's choosing holding the same bytes.
  template <detail::filesystem_path_like Path>
  operator Path() const {  // NOLINT(google-explicit-constructor)
    return Path(path_);
  }

  friend bool operator==(const file_path&, const file_path&) = default;

 private:
  std::string path_;
};

GEXEC_NAMESPACE_END
