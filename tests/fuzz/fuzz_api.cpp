// libFuzzer target: the executor's API driven by fuzzed call sequences, checked
// against a reference model in plain C++.
//
// One fixed graph of float32 elementwise kernels (registry C++ kernels):
//
//   x, w               inputs (w optionally a parameter of the model)
//   y = x + 1          output 7, and output 1 through r = __nop reshape of y to {2, 4}
//   t = w + w          independent of y: a branch parallel_branches runs beside it
//   z = y * w          an intermediate, dead once u is computed
//   u = z + x          output 0
//   v = u - w          output 2, on z's storage id (reused as TVM's planner would)
//   s = v[0:4]         output 3: a __nop alias smaller than v (zero-copy becomes a copy)
//   x, w               outputs 4 and 5: inputs as outputs (zero-copy becomes a copy)
//   t                  output 6
//
// Three executors: two instances of a model planned as compiled, one of a model planned
// by gexec::liveness. The fuzz input is decoded into calls on them: set_input,
// set_input_zero_copy and set_output_zero_copy with caller-owned buffers (any of a few
// positions in three 256-byte buffers, the same one as often as the input says),
// load_params, share_params, run (sequential or parallel_branches), get_output,
// copy_output_to, get_input, debug_get_output, writes of the caller's buffers, moves and
// re-instantiation of executors.
//
// The reference tracks memory, not just values: where each input is read from (the
// executor's own storage, the model's parameter, another executor's memory, or a caller
// buffer), where each output group is written, the output copies run() makes at its
// end, and the contents of every caller buffer. A run is simulated step by step over
// that memory, so aliasing between executors, buffers the caller writes, outputs copied
// into a buffer an input reads, and so on all follow. After every call: only
// gexec::error may be thrown, and exactly where the reference says so (a refused call
// changes nothing); every value read back matches exactly (small integers: the float
// arithmetic is deterministic); and every caller buffer holds exactly what the
// reference says, so a stray write into caller memory is caught too.
//
// Input format: byte 0 holds model options (bit 0: the compiled model has w as a
// parameter; bit 1: it runs unset inputs as zeros; bit 2: the liveness model does),
// then operations, each an opcode byte and its operand bytes (see `op` below); bytes
// past the end read as 0.

#include <gexec/executor.hpp>

#include <array>
#include <cstdarg>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

constexpr int n = 8;                  // elements of every full tensor
constexpr int num_buffers = 3;        // caller-owned buffers
constexpr int buffer_floats = 64;     // 256 bytes each
constexpr int num_positions = 8;      // 32-byte positions in a buffer; even ones are 64-byte aligned
constexpr int max_ops = 300;

using executor = gexec::graph_executor<>;
using compiled_model = gexec::basic_model<gexec::backends<gexec::cpu_backend>, gexec::pool_allocator, gexec::registry>;
using liveness_model = gexec::basic_model<gexec::backends<gexec::cpu_backend>, gexec::pool_allocator, gexec::registry, gexec::liveness>;
static_assert(std::is_same_v<compiled_model::executor, executor> && std::is_same_v<liveness_model::executor, executor>);

using values = std::array<float, n>;

std::string trace;  // the calls made so far, for a failure's report

[[noreturn]] void property_failed(const std::string& what) {
  std::fprintf(stderr, "fuzz_api: %s\ncalls so far:\n%s\n", what.c_str(), trace.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

void note(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void note(const char* fmt, ...) {
  char line[256];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(line, sizeof line, fmt, args);
  va_end(args);
  trace += line;
  trace += '\n';
}

std::string show(const float* v, int len) {
  std::string s = "[";
  for (int i = 0; i < len; ++i) {
    char b[32];
    std::snprintf(b, sizeof b, "%s%g", i ? ", " : "", static_cast<double>(v[i]));
    s += b;
  }
  return s + "]";
}

bool same_float(float a, float b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0; }

// ---- kernels ------------------------------------------------------------------------

float* floats_of(gexec::packed_args a, int i) {
  const DLTensor& t = a.tensor(i);
  if (t.dtype.code != kDLFloat || t.dtype.bits != 32 || t.dtype.lanes != 1) property_failed("kernel argument is not float32");
  std::int64_t count = 1;
  for (int d = 0; d < t.ndim; ++d) count *= t.shape[d];
  if (count != n) property_failed("kernel argument does not have 8 elements");
  if (t.strides != nullptr || t.byte_offset != 0) property_failed("kernel argument is strided or offset");
  if (reinterpret_cast<std::uintptr_t>(t.data) % gexec::kernel_alignment != 0) property_failed("kernel argument is misaligned");
  return static_cast<float*>(t.data);
}

template <class F>
void binary(gexec::packed_args a, F f) {
  if (a.size() != 3) property_failed("binary kernel called with " + std::to_string(a.size()) + " arguments");
  const float* l = floats_of(a, 0);
  const float* r = floats_of(a, 1);
  float* out = floats_of(a, 2);
  for (int i = 0; i < n; ++i) {
    const float lv = l[i], rv = r[i];
    out[i] = f(lv, rv);
  }
}

gexec::registry make_kernels() {
  gexec::registry r;
  r.add("add1", [](gexec::packed_args a) {
    if (a.size() != 2) property_failed("add1 called with " + std::to_string(a.size()) + " arguments");
    const float* in = floats_of(a, 0);
    float* out = floats_of(a, 1);
    for (int i = 0; i < n; ++i) {
      const float v = in[i];
      out[i] = v + 1.0f;
    }
  });
  r.add("add", [](gexec::packed_args a) { binary(a, [](float l, float r) { return l + r; }); });
  r.add("sub", [](gexec::packed_args a) { binary(a, [](float l, float r) { return l - r; }); });
  r.add("mul", [](gexec::packed_args a) { binary(a, [](float l, float r) { return l * r; }); });
  return r;
}

// Entries (one per node): x 0, w 1, y 2, r 3, t 4, z 5, u 6, v 7, s 8.
constexpr int num_entries = 9;
gexec::validated_graph make_graph() {
  gexec::graph_builder b;
  auto x = b.input("x", {n});
  auto w = b.input("w", {n});
  auto y = b.op("y", "add1", {x}, {gexec::tensor_type{{n}}});
  auto r = b.nop("r", y, {2, 4});
  auto t = b.op("t", "add", {w, w}, {gexec::tensor_type{{n}}});
  auto z = b.op("z", "mul", {y, w}, {gexec::tensor_type{{n}}});
  auto u = b.op("u", "add", {z, x}, {gexec::tensor_type{{n}}});
  // v takes z's storage id: z is dead once u is computed.
  auto v = b.op("v", "sub", {u, w}, {gexec::tensor_type{{n}, gexec::dtypes::float32, 0, 5}});
  auto s = b.nop("s", v, {4});
  b.output(u);  // 0
  b.output(r);  // 1
  b.output(v);  // 2
  b.output(s);  // 3
  b.output(x);  // 4
  b.output(w);  // 5
  b.output(t);  // 6
  b.output(y);  // 7
  return b.build();
}

// Alias groups the graph computes, and the inputs.
enum root_id { g_y, g_t, g_u, g_v, r_x, r_w };
constexpr int num_groups = 4;
constexpr int num_outputs = 8;

struct output_desc {
  const char* name;
  int root;
  int len;  // elements: 8, or 4 for s
  std::vector<std::int64_t> shape;
};
const output_desc outputs[num_outputs] = {
    {"u:0", g_u, 8, {n}}, {"r:1", g_y, 8, {2, 4}}, {"v:2", g_v, 8, {n}}, {"s:3", g_v, 4, {4}},
    {"x:4", r_x, 8, {n}}, {"w:5", r_w, 8, {n}},    {"t:6", g_t, 8, {n}}, {"y:7", g_y, 8, {n}},
};
const char* const input_names[2] = {"x", "w"};
const char* const entry_names[num_entries] = {"x", "w", "y", "r", "t", "z", "u", "v", "s"};

// ---- the reference ----------------------------------------------------------------

/// A place in memory: a region and an offset in floats. Regions 0..num_buffers-1 are
/// the caller's buffers; model_region is the compiled model's parameter w; the rest are
/// executors' own input storage.
struct loc {
  int region = -1;
  int off = 0;
};
constexpr int model_region = num_buffers;

bool is_caller(loc l) { return l.region >= 0 && l.region < num_buffers; }
bool overlaps(loc a, int alen, loc b, int blen) {
  return a.region == b.region && a.off < b.off + blen && b.off < a.off + alen;
}

enum class in_kind { own, model, shared, input };
struct ref_input {
  in_kind kind = in_kind::own;
  loc at;
  bool set = false;
  bool is_param = false;
};
struct ref_group {
  bool bound = false;    // to a caller tensor by set_output_zero_copy
  int bound_output = -1;
  loc at;                // where, when bound
  values internal{};     // the executor's own memory for it
  bool known = true;     // whether `internal` is what that memory holds
};
struct ref_copy {
  int index;
  loc at;
};
struct ref_executor {
  bool alive = false;
  int model = 0;  // 0: compiled, 1: liveness
  int own[2] = {-1, -1};
  ref_input in[2];
  ref_group group[num_groups];
  std::vector<ref_copy> copies;  // in the order run() makes them
  values z{};                    // the intermediate, as last computed
};

struct reader {
  const std::uint8_t* data;
  std::size_t size;
  std::size_t at = 0;
  [[nodiscard]] bool done() const { return at >= size; }
  std::uint8_t byte() { return at < size ? data[at++] : 0; }
  float value() { return static_cast<float>(static_cast<int>(byte() % 17) - 8); }
  values vals() {
    values v;
    for (float& f : v) f = value();
    return v;
  }
};

class harness {
 public:
  explicit harness(reader in)
      : in_(in),
        options_(in_.byte()),
        compiled_(graph(), kernels(), model_params(), compiled_options()),
        liveness_(graph(), kernels(), gexec::param_dict{}, liveness_options()) {
    note("options %u", options_ & 7u);
    for (int b = 0; b < num_buffers; ++b) {
      buffers_[b] = gexec::ndarray::empty({buffer_floats}, gexec::dtypes::float32);
      mem_.emplace_back(buffer_floats, 0.0f);
    }
    mem_.emplace_back(model_w().begin(), model_w().end());  // model_region
    for (int e = 0; e < 3; ++e) {
      ex_.push_back(e < 2 ? compiled_.instantiate() : liveness_.instantiate());
      ref_.push_back(fresh(e < 2 ? 0 : 1));
    }
  }

  void go() {
    for (int count = 0; count < max_ops && !in_.done(); ++count) {
      step();
      check_caller_memory();
    }
    // Every executor that lives still runs (or refuses, as the reference says).
    for (int e = 0; e < 3; ++e) do_run(e, false);
    check_caller_memory();
  }

 private:
  // ---- setup --------------------------------------------------------------------------

  static const gexec::validated_graph& graph() {
    static const gexec::validated_graph g = make_graph();
    return g;
  }
  static const gexec::registry& kernels() {
    static const gexec::registry r = make_kernels();
    return r;
  }
  static const values& model_w() {
    static const values w = {3, -2, 0, 1, -1, 2, 5, -4};
    return w;
  }
  [[nodiscard]] bool model_has_w() const { return (options_ & 1u) != 0; }
  [[nodiscard]] bool zero_unset(int model) const { return (options_ & (model == 0 ? 2u : 4u)) != 0; }
  [[nodiscard]] gexec::param_dict model_params() const {
    gexec::param_dict p;
    if (model_has_w()) p.set("w", gexec::ndarray::from_values<float>({n}, std::span<const float>(model_w())));
    return p;
  }
  [[nodiscard]] gexec::model_options compiled_options() const {
    gexec::model_options o;
    o.zero_unset_inputs = zero_unset(0);
    return o;
  }
  [[nodiscard]] gexec::model_options liveness_options() const {
    gexec::model_options o;
    o.zero_unset_inputs = zero_unset(1);
    return o;
  }

  ref_executor fresh(int model) {
    ref_executor r;
    r.alive = true;
    r.model = model;
    for (int i = 0; i < 2; ++i) {
      r.own[i] = static_cast<int>(mem_.size());
      mem_.emplace_back(n, 0.0f);  // input storage starts zeroed
      r.in[i].at = {r.own[i], 0};
    }
    if (model == 0 && model_has_w()) {
      r.in[1] = {in_kind::model, {model_region, 0}, true, true};
    }
    return r;
  }

  // ---- memory -------------------------------------------------------------------------

  float* caller_ptr(loc l) const { return static_cast<float*>(buffers_[l.region].data()) + l.off; }

  values read(loc l, int len = n) const {
    values v{};
    for (int i = 0; i < len; ++i) v[i] = mem_[l.region][l.off + i];
    return v;
  }
  void write(loc l, const values& v, int len = n) {
    for (int i = 0; i < len; ++i) mem_[l.region][l.off + i] = v[i];
    if (is_caller(l)) std::memcpy(caller_ptr(l), v.data(), sizeof(float) * len);
  }

  /// A caller position from one byte: buffer and 32-byte position in it.
  static loc position(std::uint8_t b) { return {b % num_buffers, (b / num_buffers) % num_positions * n}; }
  static bool aligned(loc l) { return l.off % 16 == 0; }

  gexec::ndarray caller_view(loc l, std::vector<std::int64_t> shape, DLDataType dtype = gexec::dtypes::float32) const {
    DLTensor t{caller_ptr(l), gexec::cpu(), static_cast<int>(shape.size()), dtype, shape.data(), nullptr, 0};
    return gexec::ndarray::view(t, buffers_[l.region].storage_owner());
  }

  void check_caller_memory() const {
    for (int b = 0; b < num_buffers; ++b) {
      const float* real = static_cast<const float*>(buffers_[b].data());
      for (int i = 0; i < buffer_floats; ++i)
        if (!same_float(real[i], mem_[b][i]))
          property_failed("caller buffer " + std::to_string(b) + " element " + std::to_string(i) + " holds " +
                          std::to_string(real[i]) + ", the reference says " + std::to_string(mem_[b][i]) +
                          "\n  buffer: " + show(real, buffer_floats) + "\n  expected: " + show(mem_[b].data(), buffer_floats));
    }
  }

  // ---- reference semantics -----------------------------------------------------------

  /// Where the computed group `g` is written.
  values read_group(const ref_executor& r, int g) const {
    const ref_group& grp = r.group[g];
    if (grp.bound) return read(grp.at);
    if (!grp.known) property_failed("harness: the reference reads an unknown group");
    return grp.internal;
  }
  void write_group(ref_executor& r, int g, const values& v) {
    ref_group& grp = r.group[g];
    if (grp.bound) {
      write(grp.at, v);
    } else {
      grp.internal = v;
      grp.known = true;
    }
  }

  /// What output `o`'s entry holds now, if the reference knows (the entry, not a copy
  /// target: run()'s copies read the entry).
  bool entry_value(const ref_executor& r, int o, values& out) const {
    const int root = outputs[o].root;
    if (root >= r_x) {
      out = read(r.in[root - r_x].at);
      return true;
    }
    const ref_group& grp = r.group[root];
    if (grp.bound) {
      out = read(grp.at, outputs[o].len);
      return true;
    }
    out = grp.internal;
    return grp.known;
  }

  /// Whether a step running beside another could meet memory that one writes: two
  /// groups the graph writes on overlapping caller memory, or one on memory an input is
  /// read from. parallel_branches runs those in a nondeterministic order, so the harness
  /// runs such a graph sequentially instead.
  bool parallel_hazard(const ref_executor& r) const {
    std::vector<loc> writes, reads;
    for (const ref_group& g : r.group)
      if (g.bound) writes.push_back(g.at);
    for (const ref_input& i : r.in)
      if (is_caller(i.at)) reads.push_back(i.at);
    for (std::size_t a = 0; a < writes.size(); ++a) {
      for (std::size_t b = a + 1; b < writes.size(); ++b)
        if (overlaps(writes[a], n, writes[b], n)) return true;
      for (loc l : reads)
        if (overlaps(writes[a], n, l, n)) return true;
    }
    return false;
  }

  [[nodiscard]] bool unset_refused(const ref_executor& r) const {
    return !zero_unset(r.model) && (!r.in[0].set || !r.in[1].set);
  }

  /// The first `steps` steps (y, t, z, u, v), then run()'s copies if `finish`.
  void simulate(ref_executor& r, int steps, bool finish) {
    auto add = [](const values& a, const values& b) {
      values o;
      for (int i = 0; i < n; ++i) o[i] = a[i] + b[i];
      return o;
    };
    if (steps > 0) {
      values x = read(r.in[0].at), y;
      for (int i = 0; i < n; ++i) y[i] = x[i] + 1.0f;
      write_group(r, g_y, y);
    }
    if (steps > 1) {
      values w = read(r.in[1].at);
      write_group(r, g_t, add(w, w));
    }
    if (steps > 2) {
      values y = read_group(r, g_y), w = read(r.in[1].at);
      for (int i = 0; i < n; ++i) r.z[i] = y[i] * w[i];
      r.group[g_v].known = false;  // z's storage is v's when v is not bound
    }
    if (steps > 3) write_group(r, g_u, add(r.z, read(r.in[0].at)));
    if (steps > 4) {
      values u = read_group(r, g_u), w = read(r.in[1].at), v;
      for (int i = 0; i < n; ++i) v[i] = u[i] - w[i];
      write_group(r, g_v, v);
    }
    if (finish)
      for (const ref_copy& c : r.copies) {
        values v;
        if (!entry_value(r, c.index, v)) property_failed("harness: a copy at the end of a run reads an unknown entry");
        write(c.at, v, outputs[c.index].len);
      }
  }

  // ---- calls ----------------------------------------------------------------------------

  /// Calls `f`; it must throw gexec::error exactly when `refused`.
  template <class F>
  bool expect(bool refused, const char* what, F&& f) {
    try {
      f();
    } catch (const gexec::error& e) {
      if (!refused) property_failed(std::string(what) + " threw, the reference says it succeeds: " + e.what());
      trace += "  refused: ";
      trace += e.what();
      trace += '\n';
      return false;
    } catch (const std::exception& e) {
      property_failed(std::string(what) + " threw something other than gexec::error: " + e.what());
    } catch (...) {
      property_failed(std::string(what) + " threw something other than a std::exception");
    }
    if (refused) property_failed(std::string(what) + " succeeded, the reference says it is refused");
    return true;
  }

  void check_values(const char* what, const gexec::ndarray& a, const std::vector<std::int64_t>& shape, const float* want, int len) {
    if (!a.defined()) property_failed(std::string(what) + ": undefined tensor");
    if (!std::equal(shape.begin(), shape.end(), a.shape().begin(), a.shape().end()))
      property_failed(std::string(what) + ": shape " + gexec::detail::shape_to_string(a.shape()) + ", expected " +
                      gexec::detail::shape_to_string(shape));
    if (!gexec::same_dtype(a.dtype(), gexec::dtypes::float32)) property_failed(std::string(what) + ": not float32");
    if (a.device().device_type != kDLCPU) property_failed(std::string(what) + ": not on the host");
    if (want == nullptr) return;
    const float* got = static_cast<const float*>(a.data());
    for (int i = 0; i < len; ++i)
      if (!same_float(got[i], want[i]))
        property_failed(std::string(what) + ": got " + show(got, len) + ", the reference says " + show(want, len));
  }

  /// The tensor must be the caller's memory at `l` (or, for !is_caller(l), not in any caller buffer).
  void check_place(const char* what, const gexec::ndarray& a, loc l) const {
    const auto p = reinterpret_cast<std::uintptr_t>(a.data());
    if (is_caller(l)) {
      if (a.data() != caller_ptr(l)) property_failed(std::string(what) + ": not the caller's bound tensor");
      return;
    }
    for (int b = 0; b < num_buffers; ++b) {
      const auto lo = reinterpret_cast<std::uintptr_t>(buffers_[b].data());
      if (p >= lo && p < lo + buffer_floats * sizeof(float))
        property_failed(std::string(what) + ": in a caller buffer, the reference says it is the executor's memory");
    }
  }

  void step() {
    const int op = in_.byte() % 14;
    switch (op) {
      case 0: return op_set_input();
      case 1: return op_set_input_zero_copy();
      case 2: return op_set_output_zero_copy();
      case 3: return op_load_params();
      case 4: return op_share_params();
      case 5: {
        const int e = in_.byte() % 3;
        return do_run(e, (in_.byte() & 1) != 0);
      }
      case 6: return op_get_output();
      case 7: return op_copy_output_to();
      case 8: return op_get_input();
      case 9: return op_write();
      case 10: return op_move();
      case 11: return op_instantiate();
      case 12: return op_debug_get_output();
      default: return op_info();
    }
  }

  /// Input selector: 0, 1 by index; 2, 3 by name; 4 an index out of range; 5 an unknown name.
  struct input_choice {
    int index;  // -1: none
    int sel;
  };
  input_choice choose_input() {
    const int sel = in_.byte() % 6;
    return {sel < 2 ? sel : sel < 4 ? sel - 2 : -1, sel};
  }
  template <class F>
  void call_on_input(executor& ex, input_choice c, F&& f) {
    switch (c.sel) {
      case 0:
      case 1: return f(ex, c.index);
      case 2:
      case 3: return f(ex, std::string_view(input_names[c.index]));
      case 4: return f(ex, 2);
      default: return f(ex, std::string_view("nobody"));
    }
  }

  void op_set_input() {
    const int e = in_.byte() % 3;
    const input_choice c = choose_input();
    const int src = in_.byte() % 4;
    gexec::ndarray value;
    values v{};
    bool bad = false;
    loc from{};
    switch (src) {
      case 0:
        v = in_.vals();
        value = gexec::ndarray::from_values<float>({n}, std::span<const float>(v));
        break;
      case 1:
        from = position(in_.byte());
        v = read(from);
        value = caller_view(from, {n});
        break;
      case 2:
        value = gexec::ndarray::empty({2, 4}, gexec::dtypes::float32);
        bad = true;
        break;
      default:
        value = gexec::ndarray::empty({n}, gexec::dtypes::int32);
        bad = true;
        break;
    }
    note("ex%d.set_input(sel %d, src %d%s) = %s", e, c.sel, src, src == 1 ? (" at " + std::to_string(from.region) + ":" + std::to_string(from.off)).c_str() : "",
         show(v.data(), n).c_str());
    ref_executor& r = ref_[e];
    const bool refused = !r.alive || c.index < 0 || bad;
    if (expect(refused, "set_input", [&] { call_on_input(ex_[e], c, [&](executor& x, auto i) { x.set_input(i, value); }); })) {
      ref_input& in = r.in[c.index];
      in.kind = in_kind::own;
      in.at = {r.own[c.index], 0};
      in.set = true;
      write(in.at, v);
    }
  }

  void op_set_input_zero_copy() {
    const int e = in_.byte() % 3;
    const input_choice c = choose_input();
    const loc at = position(in_.byte());
    const int shape = in_.byte() % 8;
    gexec::ndarray value = shape < 6 ? caller_view(at, {n}) : shape == 6 ? caller_view(at, {2, 4}) : caller_view(at, {n}, gexec::dtypes::int32);
    note("ex%d.set_input_zero_copy(sel %d, %d:%d, shape %d)", e, c.sel, at.region, at.off, shape);
    ref_executor& r = ref_[e];
    bool refused = !r.alive || c.index < 0 || shape >= 6 || !aligned(at);
    if (r.alive) {
      for (const ref_group& g : r.group)
        if (g.bound && overlaps(g.at, n, at, n)) refused = true;
      for (const ref_copy& cp : r.copies)  // an output run() copies into the caller's tensor
        if (overlaps(cp.at, outputs[cp.index].len, at, n)) refused = true;
    }
    if (expect(refused, "set_input_zero_copy",
               [&] { call_on_input(ex_[e], c, [&](executor& x, auto i) { x.set_input_zero_copy(i, value); }); })) {
      ref_input& in = r.in[c.index];
      in.kind = in_kind::input;
      in.at = at;
      in.set = true;
    }
  }

  void op_set_output_zero_copy() {
    const int e = in_.byte() % 3;
    const int o = in_.byte() % (num_outputs + 1);
    const loc at = position(in_.byte());
    const int shape = in_.byte() % 8;
    const output_desc* d = o < num_outputs ? &outputs[o] : nullptr;
    const std::vector<std::int64_t> right = d ? d->shape : std::vector<std::int64_t>{n};
    const std::vector<std::int64_t> wrong = d && d->len == 4 ? std::vector<std::int64_t>{n} : std::vector<std::int64_t>{4};
    gexec::ndarray value = shape < 6 ? caller_view(at, right) : shape == 6 ? caller_view(at, wrong) : caller_view(at, right, gexec::dtypes::int32);
    note("ex%d.set_output_zero_copy(%d, %d:%d, shape %d)", e, o, at.region, at.off, shape);
    ref_executor& r = ref_[e];
    const int len = d ? d->len : n;
    bool refused = !r.alive || !d || shape >= 6 || !aligned(at);
    if (r.alive)
      for (const ref_input& i : r.in)
        if (i.kind == in_kind::input && overlaps(i.at, n, at, len)) refused = true;
    if (!expect(refused, "set_output_zero_copy", [&] { ex_[e].set_output_zero_copy(o, value); })) return;
    std::erase_if(r.copies, [&](const ref_copy& c) { return c.index == o; });
    if (d->root >= r_x) {
      r.copies.push_back({o, at});
      return;
    }
    ref_group& g = r.group[d->root];
    if (g.bound && g.bound_output == o) g.bound = false;  // rebinding this output
    if (g.bound || d->len < n) {
      r.copies.push_back({o, at});
    } else {
      g.bound = true;
      g.bound_output = o;
      g.at = at;
    }
  }

  void op_load_params() {
    const int e = in_.byte() % 3;
    const int flags = in_.byte();
    struct item {
      int input;
      bool wrong;
      values v;
    };
    std::vector<item> items;
    for (int k = 0; k < 2; ++k) {
      const int i = (flags & 32) ? 1 - k : k;  // bit 5: w first
      if (!(flags & (1 << i))) continue;
      item it{i, (flags & (8 << i)) != 0, {}};
      if (!it.wrong) it.v = in_.vals();
      items.push_back(it);
    }
    gexec::param_dict dict;
    if (flags & 4) dict.set("nobody", gexec::ndarray::empty({3}, gexec::dtypes::float32));
    for (const item& it : items)
      dict.set(input_names[it.input], it.wrong ? gexec::ndarray::empty({2, 4}, gexec::dtypes::float32)
                                               : gexec::ndarray::from_values<float>({n}, std::span<const float>(it.v)));
    note("ex%d.load_params(flags %d)", e, flags);
    ref_executor& r = ref_[e];
    bool refused = !r.alive;
    for (const item& it : items) refused = refused || it.wrong;
    if (!expect(refused, "load_params", [&] { ex_[e].load_params(dict); })) return;
    for (const item& it : items) {
      ref_input& in = r.in[it.input];
      in.kind = in_kind::own;
      in.at = {r.own[it.input], 0};
      in.set = true;
      in.is_param = true;
      write(in.at, it.v);
    }
  }

  void op_share_params() {
    const int e = in_.byte() % 3;
    const int other = in_.byte() % 3;
    const int names = in_.byte() % 4;  // 0: w, 1: x, 2: both, 3: none
    gexec::param_dict dict;
    std::vector<int> shared;
    if (names == 0 || names == 2) shared.push_back(1);
    if (names == 1 || names == 2) shared.push_back(0);
    for (int i : shared) dict.set(input_names[i], gexec::ndarray::empty({n}, gexec::dtypes::float32));
    const std::vector<std::byte> blob = gexec::save_param_dict(dict);
    note("ex%d.share_params(ex%d, names %d)", e, other, names);
    ref_executor& r = ref_[e];
    const bool refused = !r.alive || (!shared.empty() && !ref_[other].alive);
    if (!expect(refused, "share_params", [&] { ex_[e].share_params(ex_[other], std::span<const std::byte>(blob)); })) return;
    std::vector<loc> from;
    for (int i : shared) from.push_back(ref_[other].in[i].at);  // all read before any is bound
    for (std::size_t k = 0; k < shared.size(); ++k) {
      ref_input& in = r.in[shared[k]];
      in.kind = in_kind::shared;
      in.at = from[k];
      in.set = true;
      in.is_param = true;
    }
  }

  void do_run(int e, bool parallel) {
    ref_executor& r = ref_[e];
    const bool refused = !r.alive || unset_refused(r);
    if (parallel && r.alive && parallel_hazard(r)) parallel = false;
    note("ex%d.run(%s)", e, parallel ? "parallel_branches" : "sequential");
    if (!expect(refused, "run", [&] {
          if (parallel) ex_[e].run(gexec::parallel_branches{});
          else ex_[e].run();
        }))
      return;
    simulate(r, 5, true);
  }

  void op_get_output() {
    const int e = in_.byte() % 3;
    const int o = in_.byte() % (num_outputs + 1);
    note("ex%d.get_output(%d)", e, o);
    ref_executor& r = ref_[e];
    gexec::ndarray got;
    if (!expect(!r.alive || o >= num_outputs, "get_output", [&] { got = ex_[e].get_output(o); })) return;
    const output_desc& d = outputs[o];
    for (const ref_copy& c : r.copies)
      if (c.index == o) {  // the caller's tensor
        check_place("get_output of an output copied into a caller tensor", got, c.at);
        values v = read(c.at, d.len);
        check_values("get_output (the caller's tensor)", got, d.shape, v.data(), d.len);
        return;
      }
    values v;
    const bool known = entry_value(r, o, v);
    loc place{};
    if (d.root >= r_x) place = r.in[d.root - r_x].at;
    else if (r.group[d.root].bound) place = r.group[d.root].at;
    check_place("get_output", got, place);
    check_values("get_output", got, d.shape, known ? v.data() : nullptr, d.len);
  }

  void op_copy_output_to() {
    const int e = in_.byte() % 3;
    const int o = in_.byte() % (num_outputs + 1);
    const int dst = in_.byte() % 4;  // 0: a new tensor, 1 and 3: the caller's memory, 2: a wrong shape
    const loc at = position(in_.byte());
    ref_executor& r = ref_[e];
    const bool refused = !r.alive || o >= num_outputs || dst == 2;
    values v{};
    bool known = false;
    if (!refused) {
      known = entry_value(r, o, v);
      for (const ref_copy& cp : r.copies)  // copy_output_to copies what get_output returns: the caller's tensor
        if (cp.index == o) {
          v = read(cp.at, outputs[o].len);
          known = true;
        }
      if (!known && (dst == 1 || dst == 3)) return;  // would leave the caller's memory unknown
    }
    const std::vector<std::int64_t> shape = o < num_outputs ? outputs[o].shape : std::vector<std::int64_t>{n};
    gexec::ndarray target = dst == 0 ? gexec::ndarray::empty(shape, gexec::dtypes::float32)
                            : dst == 2 ? gexec::ndarray::empty({3}, gexec::dtypes::float32)
                                       : caller_view(at, shape);
    note("ex%d.copy_output_to(%d, dst %d at %d:%d)", e, o, dst, at.region, at.off);
    if (!expect(refused, "copy_output_to", [&] { ex_[e].copy_output_to(o, target); })) return;
    if (dst == 0) {
      check_values("copy_output_to", target, shape, known ? v.data() : nullptr, outputs[o].len);
    } else {
      write(at, v, outputs[o].len);  // memory is compared after the call
    }
  }

  void op_get_input() {
    const int e = in_.byte() % 3;
    const int i = in_.byte() % 3;
    note("ex%d.get_input(%d)", e, i);
    ref_executor& r = ref_[e];
    gexec::ndarray got;
    if (!expect(!r.alive || i == 2, "get_input", [&] { got = ex_[e].get_input(i); })) return;
    const values v = read(r.in[i].at);
    check_place("get_input", got, r.in[i].at);
    check_values("get_input", got, {n}, v.data(), n);
  }

  void op_write() {
    const loc at = position(in_.byte());
    const values v = in_.vals();
    note("write %d:%d = %s", at.region, at.off, show(v.data(), n).c_str());
    write(at, v);
  }

  void op_move() {
    const int from = in_.byte() % 3;
    int to = in_.byte() % 3;
    if (to == from) to = (from + 1) % 3;
    note("ex%d = move(ex%d)", to, from);
    ex_[to] = std::move(ex_[from]);
    ref_[to] = ref_[from];
    ref_[from] = ref_executor{};
    // Everything on the moved-from executor is refused, and nothing else about it fails.
    executor& gone = ex_[from];  // NOLINT(bugprone-use-after-move): the point
    if (gone.get_num_inputs() != 0 || gone.get_num_outputs() != 0) property_failed("a moved-from executor reports inputs or outputs");
    expect(true, "run on a moved-from executor", [&] { gone.run(); });
    expect(true, "get_output on a moved-from executor", [&] { (void)gone.get_output(0); });
    expect(true, "get_input_index on a moved-from executor", [&] { (void)gone.get_input_index("x"); });
  }

  void op_instantiate() {
    const int e = in_.byte() % 3;
    const int m = in_.byte() & 1;
    note("ex%d = %s.instantiate()", e, m ? "liveness" : "compiled");
    ex_[e] = m ? liveness_.instantiate() : compiled_.instantiate();
    ref_[e] = fresh(m);
  }

  void op_debug_get_output() {
    const int e = in_.byte() % 3;
    const int entry = in_.byte() % (num_entries + 1);
    note("ex%d.debug_get_output(entry %d %s)", e, entry, entry < num_entries ? entry_names[entry] : "(out of range)");
    ref_executor& r = ref_[e];
    const bool refused = !r.alive || entry >= num_entries || unset_refused(r);
    gexec::ndarray got;
    if (!expect(refused, "debug_get_output", [&] { got = ex_[e].debug_get_output(static_cast<std::uint32_t>(entry)); })) return;
    // Steps are the nodes y (2), t (4), z (5), u (6), v (7); it runs those up to the entry's node.
    static constexpr int step_nodes[5] = {2, 4, 5, 6, 7};
    int steps = 0;
    while (steps < 5 && step_nodes[steps] <= entry) ++steps;
    simulate(r, steps, steps == 5);
    values v{};
    int len = n;
    bool known = true;
    std::vector<std::int64_t> shape = {n};
    switch (entry) {
      case 0: v = read(r.in[0].at); break;
      case 1: v = read(r.in[1].at); break;
      case 2: known = entry_value(r, 7, v); break;
      case 3: known = entry_value(r, 1, v), shape = {2, 4}; break;
      case 4: known = entry_value(r, 6, v); break;
      case 5: v = r.z; break;
      case 6: known = entry_value(r, 0, v); break;
      case 7: known = entry_value(r, 2, v); break;
      default: known = entry_value(r, 3, v), shape = {4}, len = 4; break;
    }
    check_values("debug_get_output", got, shape, known ? v.data() : nullptr, len);
  }

  void op_info() {
    const int e = in_.byte() % 3;
    note("ex%d info", e);
    ref_executor& r = ref_[e];
    executor& x = ex_[e];
    if (!r.alive) {
      expect(true, "get_input_info on a moved-from executor", [&] { (void)x.get_input_info(); });
      if (!x.get_output_info().empty()) property_failed("a moved-from executor describes outputs");
      return;
    }
    expect(false, "info", [&] {
      if (x.get_num_inputs() != 2 || x.get_num_outputs() != num_outputs) property_failed("wrong number of inputs or outputs");
      std::vector<std::string> want;
      for (int i = 0; i < 2; ++i)
        if (!r.in[i].is_param) want.emplace_back(input_names[i]);
      auto info = x.get_input_info();
      if (info.size() != want.size()) property_failed("get_input_info lists " + std::to_string(info.size()) + " inputs, the reference " + std::to_string(want.size()));
      for (std::size_t k = 0; k < info.size(); ++k)
        if (info[k].name != want[k] || info[k].shape != std::vector<std::int64_t>{n}) property_failed("get_input_info: wrong input");
      auto outs = x.get_output_info();
      if (outs.size() != num_outputs) property_failed("get_output_info: wrong count");
      for (int o = 0; o < num_outputs; ++o)
        if (outs[static_cast<std::size_t>(o)].name != outputs[o].name || outs[static_cast<std::size_t>(o)].shape != outputs[o].shape)
          property_failed("get_output_info: wrong output " + std::to_string(o));
      if (x.get_input_index("x") != 0 || x.get_input_index("w") != 1 || x.get_input_index("nobody") != -1)
        property_failed("get_input_index");
      for (int o = 0; o < num_outputs; ++o)
        if (x.get_output_index(outputs[o].name) != o) property_failed("get_output_index by \"node:i\"");
      if (x.get_output_index("y") != 7 || x.get_output_index("s") != 3 || x.get_output_index("z") != -1)
        property_failed("get_output_index by node name");
    });
  }

  reader in_;
  unsigned options_;
  compiled_model compiled_;
  liveness_model liveness_;
  gexec::ndarray buffers_[num_buffers];
  std::vector<std::vector<float>> mem_;
  std::vector<executor> ex_;
  std::vector<ref_executor> ref_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  trace.clear();
  try {
    harness h(reader{data, size});
    h.go();
    static const bool print = std::getenv("FUZZ_API_TRACE") != nullptr;  // the calls each input made
    if (print) std::fprintf(stderr, "%s\n", trace.c_str());
  } catch (const std::exception& e) {
    property_failed(std::string("an exception escaped the harness: ") + e.what());
  }
  return 0;
}
