// libFuzzer target: bytes through parse_vm_executable (a Relax VM executable, as TVM's
// export_library packs it into __tvm_ffi__library_bin). Malformed input must end in
// gexec::error and nothing else. For an executable that reads:
//  - written back by write_vm_executable, it is the same bytes;
//  - every VM function's code stays inside it (what the checks promise the VM).

#include <gexec/relax/executable.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <span>
#include <vector>

namespace {

[[noreturn]] void property_failed(const char* what) {
  std::fprintf(stderr, "fuzz_relax_executable: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  gexec::relax::vm_executable ex;
  try {
    ex = gexec::relax::parse_vm_executable(bytes);
  } catch (const gexec::error&) {
    return 0;
  }
  const std::vector<std::byte> again = gexec::relax::write_vm_executable(ex);
  if (again.size() != bytes.size() || !std::equal(again.begin(), again.end(), bytes.begin())) property_failed("written back, the bytes differ");
  for (const auto& f : ex.functions) {
    if (f.kind != gexec::relax::function_kind::vm) continue;
    if (f.start_instr < 0 || f.end_instr > static_cast<std::int64_t>(ex.code.size()) || f.start_instr >= f.end_instr)
      property_failed("a VM function's code outside the executable");
    for (std::int64_t pc = f.start_instr; pc < f.end_instr; ++pc) {
      const auto& in = ex.code[static_cast<std::size_t>(pc)];
      if (in.first_arg + static_cast<std::uint64_t>(in.num_args) > ex.args.size()) property_failed("arguments outside the table");
    }
  }
  return 0;
}
