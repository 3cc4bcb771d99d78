#pragma once
// --write-library OUT.so: a single-file library as TVM's export_library makes one, the
// kernels' objects linked with __tvm_dev_mblob (the graph and its parameters), with
// every weight --align-params aligned in the library, so that gexec reads the weights
// where they lie in the mapped library instead of copying them once per model.
//
//   gexec-run --write-library model.so --graph graph.json --params params.bin --kernel-objects kernels.tar
//
// The kernels come as export_library leaves objects: a .tar of them
// (`lib.get_lib().export_library("kernels.tar")`) or .o files. As export_library does,
// this calls the system's tools: tar unpacks, the C compiler ($CC, else cc) links. A
// devc.o in a tar (TVM's own copy of the blob, from exporting the whole factory) is
// left out: the library gets the blob written here. The result is loaded back before
// this reports success, and its weights are counted where they lie.

#include <gexec/executor.hpp>
#include <gexec/load.hpp>
#include <gexec/packed_c/module_blob.hpp>

#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <elf.h>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "options.hpp"

extern char** environ;

namespace gexec_run {

/// A directory of its own under the system's temporary one, removed with everything in it.
class scratch_dir {
 public:
  scratch_dir() {
    std::string pattern = (fs::temp_directory_path() / "gexec-run-library-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) fail("--write-library: cannot make a temporary directory under " + fs::temp_directory_path().string());
    path_ = pattern;
  }
  scratch_dir(const scratch_dir&) = delete;
  scratch_dir& operator=(const scratch_dir&) = delete;
  ~scratch_dir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  [[nodiscard]] const fs::path& path() const noexcept { return path_; }

 private:
  fs::path path_;
};

/// Runs `args` (found on PATH), its output on this one's; fails naming the command unless
/// it exits with 0.
inline void run_tool(const std::vector<std::string>& args, const std::string& what) {
  std::vector<char*> argv;
  std::string line;
  for (const std::string& a : args) {
    argv.push_back(const_cast<char*>(a.c_str()));
    line += (line.empty() ? "" : " ") + a;
  }
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (const int rc = ::posix_spawnp(&pid, argv[0], nullptr, nullptr, argv.data(), environ); rc != 0)
    fail("--write-library: cannot run " + args[0] + " to " + what + ": " + std::strerror(rc) + " (" + line + ")");
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail("--write-library: " + what + " failed: " + line);
}

/// The object files `inputs` name: .o files as given, the objects in each .tar (unpacked
/// under `scratch`), TVM's devc.o left out.
inline std::vector<std::string> kernel_objects(const std::vector<std::string>& inputs, const fs::path& scratch) {
  std::vector<std::string> objects;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const fs::path in = inputs[i];
    if (!fs::is_regular_file(in)) fail("--kernel-objects " + in.string() + ": no such file");
    const std::string name = in.filename().string();
    if (name.ends_with(".o")) {
      objects.push_back(fs::absolute(in).string());
      continue;
    }
    if (!name.ends_with(".tar") && !name.ends_with(".tar.gz") && !name.ends_with(".tgz"))
      fail("--kernel-objects " + in.string() + ": give object files (.o) or a .tar of them, as export_library writes");
    const fs::path into = scratch / ("objects" + std::to_string(i));
    fs::create_directories(into);
    run_tool({"tar", "-xf", fs::absolute(in).string(), "-C", into.string()}, "unpack " + in.string());
    std::size_t found = 0;
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(into)) {
      if (!e.is_regular_file() || e.path().extension() != ".o") continue;
      if (e.path().filename() == "devc.o") continue;  // TVM's blob: this library carries its own
      objects.push_back(e.path().string());
      ++found;
    }
    if (found == 0) fail("--kernel-objects " + in.string() + ": holds no object file (.o) of kernels");
  }
  return objects;
}

/// Whether an ELF object is for the machine this program runs on (a library linked with a
/// cross compiler is written, not loaded back here).
inline bool for_this_machine(const std::string& object) {
  unsigned char head[20] = {};
  std::ifstream in(object, std::ios::binary);
  in.read(reinterpret_cast<char*>(head), sizeof head);
  if (!in || head[0] != 0x7f || head[1] != 'E' || head[2] != 'L' || head[3] != 'F') fail("--kernel-objects: " + object + " is not an ELF object file");
  const auto machine = static_cast<std::uint16_t>(head[5] == ELFDATA2MSB ? (head[18] << 8) | head[19] : head[18] | (head[19] << 8));
#if defined(__x86_64__)
  return machine == EM_X86_64;
#elif defined(__aarch64__)
  return machine == EM_AARCH64;
#elif defined(__arm__)
  return machine == EM_ARM;
#else
  return true;
#endif
}

/// `text` inside an assembler string's quotes: backslashes and quotes escaped.
inline std::string assembler_string(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

/// --write-library: see the top of this file.
inline int write_library(const options& o) {
  const fs::path out = o.write_library;
  if (!o.convert_params.empty()) fail("--write-library and --convert-params each write a file and exit: give one of them");
  if (!o.model.empty() || !o.lib.empty()) fail("--write-library links --kernel-objects, not a library: give no MODEL.so or --lib with it");
  if (o.graph.empty()) fail("--write-library needs --graph (and --params, where the model has parameters)");
  if (o.kernel_objects.empty()) fail("--write-library needs --kernel-objects: the kernels as export_library leaves objects (a .tar, or .o files)");
  std::error_code ec;
  std::vector<std::string> read{o.graph, o.params};
  read.insert(read.end(), o.kernel_objects.begin(), o.kernel_objects.end());
  for (const std::string& in : read)
    if (!in.empty() && fs::equivalent(in, out, ec)) fail("--write-library " + out.string() + ": is a file this run reads (" + in + ")");

  gexec::graph_factory_blob factory;
  {
    (void)gexec::load_graph_file(o.graph);  // a graph gexec can run, or a clear error before anything is linked
    std::ifstream in(o.graph, std::ios::binary);
    factory.graph_json.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (!o.params.empty()) factory.params = gexec::map_param_dict_file(o.params);
  factory.module_name = "default";
  const std::vector<std::byte> blob = gexec::write_module_blob(factory, {}, gexec::save_options{o.align_params});

  const scratch_dir scratch;
  const std::vector<std::string> objects = kernel_objects(o.kernel_objects, scratch.path());
  {
    std::ofstream bin(scratch.path() / "blob.bin", std::ios::binary);
    bin.write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(blob.size()));
    if (!bin) fail("--write-library: cannot write the blob under " + scratch.path().string());
  }
  {
    // The symbol aligned as its tensors are, in read-only data that the loader maps from
    // the file: every process that loads the library shares those pages.
    std::ofstream s(scratch.path() / "blob.s");
    s << "  .section .rodata.__tvm_dev_mblob,\"a\"\n"
      << "  .globl __tvm_dev_mblob\n"
      << "  .type __tvm_dev_mblob, STT_OBJECT\n"
      << "  .balign " << std::max<std::size_t>(o.align_params, 8) << "\n"
      << "__tvm_dev_mblob:\n"
      << "  .incbin \"" << assembler_string((scratch.path() / "blob.bin").string()) << "\"\n"
      << "  .size __tvm_dev_mblob, " << blob.size() << "\n"
      << "  .section .note.GNU-stack,\"\"\n";
    if (!s) fail("--write-library: cannot write the blob's assembly under " + scratch.path().string());
  }
  // Linked beside OUT under another name, and renamed to OUT once loaded back: a library
  // that fails either step is never left as OUT.
  const fs::path partial = fs::absolute(out).string() + ".partial";
  struct remove_partial {
    const fs::path& path;
    ~remove_partial() {
      std::error_code ignored;
      fs::remove(path, ignored);
    }
  } cleanup{partial};
  const char* cc = std::getenv("CC");
  std::vector<std::string> link{cc != nullptr && *cc != '\0' ? cc : "cc", "-shared", "-fPIC", "-o", partial.string()};
  link.insert(link.end(), objects.begin(), objects.end());
  link.push_back((scratch.path() / "blob.s").string());
  link.push_back("-lm");
  run_tool(link, "link " + out.string());

  if (!for_this_machine(objects.front())) {
    fs::rename(partial, out);
    std::cout << "wrote " << out.string() << " (kernels for another machine: not loaded back here)\n";
    return 0;
  }
  // Loaded back: the kernels the graph names are there, and the weights lie where gexec reads them.
  const gexec::weights_report w = [&] {
    try {
      return gexec::model::load(partial).weights();
    } catch (const gexec::error& e) {
      throw gexec::error(e.code(), "--write-library " + out.string() + ": the library linked does not load: " + std::string(e.message()));
    }
  }();
  fs::rename(partial, out);
  std::cout << "wrote " << out.string() << ": the kernels of " << objects.size() << " object file" << (objects.size() == 1 ? "" : "s") << ", the graph and "
            << factory.params.size() << " parameters (" << w.in_place_bytes + w.copied_bytes << " bytes); loaded back: " << w.in_place
            << " read where they lie in the library, " << w.copied << " copied";
  if (!w.why_copied.empty()) std::cout << " (first: " << w.why_copied << ")";
  std::cout << '\n';
  return 0;
}

}  // namespace gexec_run
