// The Triton backend's parts that need no server: configuration completion and checks
// (triton/model_config.hpp) and the row batcher (triton/batcher.hpp).

#include "batcher.hpp"
#include "model_config.hpp"

#include <doctest/doctest.h>

#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace gt = gexec_triton;
namespace json = boost::json;

namespace {

std::string error_of(auto&& f) {
  try {
    f();
  } catch (const gexec::error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

json::object config(std::string_view text) { return json::parse(json::string_view(text.data(), text.size())).as_object(); }

const std::vector<gt::model_tensor> mlp_in = {{"data", 0, gexec::dtypes::float32, {2, 64}}};
const std::vector<gt::model_tensor> mlp_out = {{"node:0", 0, gexec::dtypes::float32, {2, 10}}};

}  // namespace

TEST_CASE("data types map one to one to Triton's, and what has no equivalent is refused") {
  CHECK(gt::triton_type(gexec::dtypes::float32) == TRITONSERVER_TYPE_FP32);
  CHECK(gt::triton_type(gexec::dtypes::float16) == TRITONSERVER_TYPE_FP16);
  CHECK(gt::triton_type(gexec::dtypes::float64) == TRITONSERVER_TYPE_FP64);
  CHECK(gt::triton_type(gexec::dtypes::int8) == TRITONSERVER_TYPE_INT8);
  CHECK(gt::triton_type(gexec::dtypes::int64) == TRITONSERVER_TYPE_INT64);
  CHECK(gt::triton_type(gexec::dtypes::uint8) == TRITONSERVER_TYPE_UINT8);
  CHECK(gt::triton_type(gexec::dtypes::boolean) == TRITONSERVER_TYPE_BOOL);
  CHECK(gt::triton_type(DLDataType{kDLBfloat, 16, 1}) == TRITONSERVER_TYPE_BF16);
  CHECK(gt::triton_type(DLDataType{kDLFloat, 32, 4}) == TRITONSERVER_TYPE_INVALID);
  CHECK(gt::triton_type(gexec::dtypes::int4) == TRITONSERVER_TYPE_INVALID);
  CHECK(gt::config_type_name(TRITONSERVER_TYPE_FP32) == "TYPE_FP32");
  CHECK(gt::config_type_name(TRITONSERVER_TYPE_BOOL) == "TYPE_BOOL");
  const std::vector<gt::model_tensor> vec4 = {{"x", 0, DLDataType{kDLFloat, 32, 4}, {3}}};
  CHECK(contains(error_of([&] { (void)gt::complete_config(config("{}"), vec4, {}, true); }), "x: data type float32x4 has no Triton equivalent"));
}

TEST_CASE("parameters: defaults, the known keys, and a clear error for anything else") {
  const gt::settings d = gt::read_settings(config("{}"));
  CHECK(d.num_threads == 0);
  CHECK(d.planner == "as_compiled");
  CHECK(d.execution_policy == "sequential");
  CHECK_FALSE(d.weights_as_inputs);
  const gt::settings s = gt::read_settings(config(R"({"parameters": {"num_threads": {"string_value": "3"},
      "planner": {"string_value": "liveness"}, "execution_policy": {"string_value": "parallel"},
      "weights_as_inputs": {"string_value": "true"}}})"));
  CHECK(s.num_threads == 3);
  CHECK(s.planner == "liveness");
  CHECK(s.execution_policy == "parallel");
  CHECK(s.weights_as_inputs);
  CHECK_FALSE(gt::read_settings(config(R"({"parameters": {"weights_as_inputs": {"string_value": "false"}}})")).weights_as_inputs);
  CHECK(d.function.empty());
  CHECK(gt::read_settings(config(R"({"parameters": {"function": {"string_value": "forward"}}})")).function == "forward");
  CHECK(contains(error_of([] { (void)gt::read_settings(config(R"({"parameters": {"function": {"string_value": ""}}})")); }),
                 "parameter function: expected the name of a function of the Relax executable"));
  CHECK(contains(error_of([] { (void)gt::read_settings(config(R"({"parameters": {"weights_as_inputs": {"string_value": "yes"}}})")); }),
                 "parameter weights_as_inputs \"yes\": expected true or false"));
  CHECK(contains(error_of([] { (void)gt::read_settings(config(R"({"parameters": {"threads": {"string_value": "3"}}})")); }),
                 "unknown parameter \"threads\" (gexec reads num_threads, planner, execution_policy, weights_as_inputs, cuda_graph, cuda_devices and function)"));
  CHECK(contains(error_of([] { (void)gt::read_settings(config(R"({"parameters": {"num_threads": {"string_value": "-1"}}})")); }),
                 "parameter num_threads \"-1\""));
  CHECK(contains(error_of([] { (void)gt::read_settings(config(R"({"parameters": {"num_threads": {"string_value": "2x"}}})")); }),
                 "parameter num_threads \"2x\""));
  CHECK(contains(error_of([] { (void)gt::read_settings(config(R"({"parameters": {"planner": {"string_value": "best"}}})")); }),
                 "expected as_compiled or liveness"));
  CHECK(contains(error_of([] { (void)gt::read_settings(config(R"({"parameters": {"execution_policy": {"string_value": "fast"}}})")); }),
                 "expected sequential or parallel"));
  // GPU instances: CUDA Graph replay, and the devices KIND_MODEL instances take in turn.
  CHECK_FALSE(d.cuda_graph);
  CHECK(d.cuda_devices.empty());
  const gt::settings g = gt::read_settings(config(R"({"parameters": {"cuda_graph": {"string_value": "true"}, "cuda_devices": {"string_value": "1,0,3"}}})"));
  CHECK(g.cuda_graph);
  CHECK(g.cuda_devices == std::vector<int>{1, 0, 3});
  CHECK(contains(error_of([] { (void)gt::read_settings(config(R"({"parameters": {"cuda_graph": {"string_value": "on"}}})")); }),
                 "parameter cuda_graph \"on\": expected true or false"));
  for (const char* bad : {"", "1,", "a", "-1", "0,,1", "1 "}) {
    const std::string text = std::string(R"({"parameters": {"cuda_devices": {"string_value": ")") + bad + "\"}}}";
    INFO(bad);
    CHECK(contains(error_of([&] { (void)gt::read_settings(config(text)); }), "parameter cuda_devices"));
  }
}

TEST_CASE("auto-completion fills in inputs and outputs with the model's shapes and no batching") {
  const gt::completed_config c = gt::complete_config(config(R"({"name": "mlp", "backend": "gexec"})"), mlp_in, mlp_out, true);
  CHECK(c.changed);
  CHECK(c.layout.max_batch_size == 0);
  CHECK(c.layout.rows_per_run == 1);
  CHECK(c.config.at("max_batch_size").as_int64() == 0);
  CHECK(json::serialize(c.config.at("input")) == R"([{"name":"data","data_type":"TYPE_FP32","dims":[2,64]}])");
  CHECK(json::serialize(c.config.at("output")) == R"([{"name":"output0","data_type":"TYPE_FP32","dims":[2,10]}])");
  CHECK(c.config.at("name").as_string() == "mlp");  // the rest is kept
  REQUIRE(c.layout.inputs.size() == 1);
  CHECK(c.layout.inputs[0].row_bytes == 2 * 64 * 4);
  CHECK(c.layout.outputs[0].row_bytes == 2 * 10 * 4);

  // Triton has no scalars without batching: a scalar is served as [1].
  const std::vector<gt::model_tensor> scalar = {{"y", 1, gexec::dtypes::int32, {}}};
  const gt::completed_config s = gt::complete_config(config("{}"), scalar, scalar, true);
  CHECK(json::serialize(s.config.at("input")) == R"([{"name":"y","data_type":"TYPE_INT32","dims":[1]}])");
  CHECK(s.layout.inputs[0].row_bytes == 4);
  CHECK(s.layout.inputs[0].index == 1);
}

TEST_CASE("max_batch_size batches a model whose inputs and outputs share a leading dimension") {
  const gt::completed_config c = gt::complete_config(config(R"({"max_batch_size": 4})"), mlp_in, mlp_out, true);
  CHECK(c.layout.max_batch_size == 4);
  CHECK(c.layout.rows_per_run == 2);
  CHECK(json::serialize(c.config.at("input")) == R"([{"name":"data","data_type":"TYPE_FP32","dims":[64]}])");
  CHECK(c.layout.inputs[0].row_bytes == 64 * 4);
  CHECK(c.layout.outputs[0].row_bytes == 10 * 4);
  // Given as the server writes 64-bit fields (strings) and checked, nothing to complete.
  const gt::completed_config e = gt::complete_config(
      config(R"({"max_batch_size": "2", "input": [{"name": "data", "data_type": "TYPE_FP32", "dims": ["64"]}],
                 "output": [{"name": "output0", "data_type": "TYPE_FP32", "dims": [10]}]})"),
      mlp_in, mlp_out, false);
  CHECK_FALSE(e.changed);
  CHECK(e.layout.rows_per_run == 2);

  const std::vector<gt::model_tensor> other_out = {{"node:0", 0, gexec::dtypes::float32, {10}}};
  CHECK(contains(error_of([&] { (void)gt::complete_config(config(R"({"max_batch_size": 4})"), mlp_in, other_out, true); }),
                 "max_batch_size 4: the model cannot be batched, its inputs and outputs share no leading dimension (data [2,64], output0 [10]); use max_batch_size 0"));
}

TEST_CASE("dims known only at run time (an interpreted Relax function) are served as -1, without batching") {
  const std::vector<gt::model_tensor> in = {{"x", 0, gexec::dtypes::float32, {-1, 16}}, {"w", 1, gexec::dtypes::float32, {16, 8}}};
  const std::vector<gt::model_tensor> out = {{"output0", 0, gexec::dtypes::float32, {-1, 8}}};
  const gt::completed_config c = gt::complete_config(config("{}"), in, out, true);
  CHECK(json::serialize(c.config.at("input")) ==
        R"([{"name":"x","data_type":"TYPE_FP32","dims":[-1,16]},{"name":"w","data_type":"TYPE_FP32","dims":[16,8]}])");
  CHECK(json::serialize(c.config.at("output")) == R"([{"name":"output0","data_type":"TYPE_FP32","dims":[-1,8]}])");
  CHECK(c.layout.inputs[0].row_bytes == 0);  // known per request
  CHECK(c.layout.inputs[1].row_bytes == 16 * 8 * 4);
  // An explicit configuration gives -1 where the model does; a fixed size there is refused.
  const gt::completed_config e = gt::complete_config(
      config(R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [-1, 16]}, {"name": "w", "data_type": "TYPE_FP32", "dims": [16, 8]}],
                 "output": [{"name": "output0", "data_type": "TYPE_FP32", "dims": [-1, 8]}]})"),
      in, out, false);
  CHECK_FALSE(e.changed);
  CHECK(contains(error_of([&] {
                   (void)gt::complete_config(config(R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4, 16]}]})"), in, out, true);
                 }),
                 "config input \"x\": dims [4,16], the model's are [-1,16]"));
  CHECK(contains(error_of([&] { (void)gt::complete_config(config(R"({"max_batch_size": 4})"), in, out, true); }),
                 "max_batch_size 4: the model has dimensions known only at run time (x [-1,16], w [16,8], output0 [-1,8]); serve it with max_batch_size 0"));
}

TEST_CASE("a configuration that disagrees with the model is refused, saying where") {
  auto refused = [&](std::string_view text, bool auto_complete = true) {
    return error_of([&] { (void)gt::complete_config(config(text), mlp_in, mlp_out, auto_complete); });
  };
  CHECK(contains(refused(R"({"input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [2, 64]}]})"),
                 "config input \"x\": the model has no input of that name (inputs: data)"));
  CHECK(contains(refused(R"({"input": [{"name": "data", "data_type": "TYPE_INT32", "dims": [2, 64]}]})"),
                 "config input \"data\": data_type TYPE_INT32, the model's is TYPE_FP32"));
  CHECK(contains(refused(R"({"input": [{"name": "data", "data_type": "TYPE_FP32", "dims": [64]}]})"),
                 "config input \"data\": dims [64], the model's are [2,64]"));
  CHECK(contains(refused(R"({"max_batch_size": 2, "input": [{"name": "data", "data_type": "TYPE_FP32", "dims": [2, 64]}]})"),
                 "dims [2,64], the model's are [64] (its shape [2,64] without the batch dimension, as max_batch_size > 0)"));
  CHECK(contains(refused(R"({"output": [{"name": "output1", "data_type": "TYPE_FP32", "dims": [2, 10]}]})"),
                 "config output \"output1\": the model has no output of that name (outputs: output0 (node:0))"));
  CHECK(contains(refused(R"({"max_batch_size": -1})"), "max_batch_size must be a whole number >= 0"));
  CHECK(contains(refused("{}", false), "the config lists no inputs and auto-completion is disabled"));
  // A reshape to the model's own dims is accepted; one to other dims is not.
  CHECK(refused(R"({"input": [{"name": "data", "data_type": "TYPE_FP32", "dims": [128], "reshape": {"shape": [2, 64]}}]})").empty());
  CHECK(contains(refused(R"({"input": [{"name": "data", "data_type": "TYPE_FP32", "dims": [128], "reshape": {"shape": [64, 2]}}]})"),
                 "reshape shape [64,2], the model's dims are [2,64]"));
  const std::vector<gt::model_tensor> two_in = {{"a", 0, gexec::dtypes::float32, {3}}, {"b", 1, gexec::dtypes::float32, {3}}};
  CHECK(contains(error_of([&] {
                   (void)gt::complete_config(config(R"({"input": [{"name": "a", "data_type": "TYPE_FP32", "dims": [3]}]})"), two_in, {}, true);
                 }),
                 "the config lists inputs but not \"b\", which the model needs"));
}

TEST_CASE("an explicit configuration names outputs: output<k>, the graph's names or the bare node name; any other name is refused") {
  const std::vector<gt::model_tensor> in = {{"x", 0, gexec::dtypes::float32, {2, 4}}};
  const std::vector<gt::model_tensor> out = {{"dense:0", 0, gexec::dtypes::float32, {2, 10}}, {"argmax:1", 1, gexec::dtypes::int64, {2}}};
  auto served = [&](std::string_view outputs) {
    const gt::completed_config c = gt::complete_config(config("{\"output\": " + std::string(outputs) + "}"), in, out, true);
    std::vector<std::string> names;
    for (const gt::served_tensor& t : c.layout.outputs) names.push_back(t.name);
    return names;
  };
  auto refused = [&](std::string_view outputs) {
    return error_of([&] { (void)gt::complete_config(config("{\"output\": " + std::string(outputs) + "}"), in, out, true); });
  };
  const std::string dense = R"("data_type": "TYPE_FP32", "dims": [2, 10]})", argmax = R"("data_type": "TYPE_INT64", "dims": [2]})";
  using names = std::vector<std::string>;
  CHECK(served("[{\"name\": \"output1\", " + argmax + "]") == names{"output0", "output1"});
  CHECK(served("[{\"name\": \"argmax:1\", " + argmax + ", {\"name\": \"dense:0\", " + dense + "]") == names{"dense:0", "argmax:1"});
  CHECK(served("[{\"name\": \"argmax\", " + argmax + ", {\"name\": \"dense\", " + dense + "]") == names{"dense", "argmax"});
  CHECK(served("[{\"name\": \"dense\", " + dense + "]") == names{"dense", "output1"});  // one listed: the other keeps its name
  // The names are what requests use and what completion keeps: the config is left as given.
  const gt::completed_config c = gt::complete_config(config("{\"output\": [{\"name\": \"dense\", " + dense + "]}"), in, out, true);
  CHECK(json::serialize(c.config.at("output")) == R"([{"name":"dense","data_type":"TYPE_FP32","dims":[2,10]}])");

  CHECK(contains(refused("[{\"name\": \"output0\", " + argmax + "]"),
                 "config output \"output0\": data_type TYPE_INT64, the model's is TYPE_FP32"));
  CHECK(contains(refused("[{\"name\": \"dense\", " + dense + ", {\"name\": \"output0\", " + dense + "]"),
                 "config outputs \"dense\" and \"output0\" both name the model's output 0 (dense:0)"));
  // A name the model does not have is refused, whatever its position: never served under another output.
  CHECK(contains(refused("[{\"name\": \"scores\", " + dense + ", {\"name\": \"labels\", " + argmax + "]"),
                 "config output \"scores\": the model has no output of that name (outputs: output0 (dense:0), output1 (argmax:1))"));
  CHECK(contains(refused("[{\"name\": \"nonexistent\", " + dense + "]"), "config output \"nonexistent\": the model has no output of that name"));
  CHECK(contains(refused("[{\"name\": \"dense:3\", " + dense + "]"), "config output \"dense:3\": the model has no output of that name"));
  CHECK(contains(refused("[{\"name\": \"output2\", " + dense + "]"), "config output \"output2\": the model has no output of that name"));
  const std::vector<gt::model_tensor> split = {{"split:0", 0, gexec::dtypes::float32, {3}}, {"split:1", 1, gexec::dtypes::float32, {3}}};
  CHECK(contains(error_of([&] {
                   (void)gt::complete_config(config(R"({"output": [{"name": "split", "data_type": "TYPE_FP32", "dims": [3]}]})"), in, split, true);
                 }),
                 "config output \"split\": 2 outputs come from that node (split:0, split:1); name one of them"));
  CHECK(gt::output_index_name("output12") == 12u);
  CHECK_FALSE(gt::output_index_name("output"));
  CHECK_FALSE(gt::output_index_name("output01"));
  CHECK_FALSE(gt::output_index_name("outputs"));
}

namespace {

/// A model of B rows: out[row] = 10 * in[row] + run number (one float per row).
struct fake_executor {
  std::int64_t rows;
  std::vector<float> in, out;
  int runs = 0, fail_on = -1;
  std::vector<std::vector<float>> seen;  // the inputs of each run, padding included

  explicit fake_executor(std::int64_t b) : rows(b), in(static_cast<std::size_t>(b), -1.0f), out(static_cast<std::size_t>(b)) {}
  std::size_t go(std::span<gt::batch_request> requests) {
    gt::batch_layout L{rows, {4}, {4}};
    return gt::run_batched(
        requests, L, [&] { return std::vector<std::byte*>{reinterpret_cast<std::byte*>(in.data())}; },
        [&](std::int64_t) {
          seen.push_back(in);
          if (runs++ == fail_on) throw std::runtime_error("kernel failed");
          for (std::size_t i = 0; i < in.size(); ++i) out[i] = 10 * in[i] + static_cast<float>(runs);
        },
        [&] { return std::vector<const std::byte*>{reinterpret_cast<const std::byte*>(out.data())}; });
  }
};

gt::batch_request request(const std::vector<float>& values, float* out, std::size_t split = 0) {
  gt::batch_request r;
  r.rows = static_cast<std::int64_t>(values.size());
  const auto* bytes = reinterpret_cast<const std::byte*>(values.data());
  gt::input_bytes in;
  if (split) in.buffers.emplace_back(bytes, split * 4);
  in.buffers.emplace_back(bytes + split * 4, (values.size() - split) * 4);
  r.inputs.push_back(in);
  r.outputs.push_back(reinterpret_cast<std::byte*>(out));
  return r;
}

}  // namespace

TEST_CASE("rows of several requests are packed B at a time, the last run padded with zeros, and sliced back") {
  fake_executor ex(2);
  const std::vector<float> a = {1, 2, 3}, b = {4}, c = {5, 6};
  std::vector<float> oa(3), ob(1), oc(2);
  std::vector<gt::batch_request> reqs = {request(a, oa.data(), 1), request(b, ob.data()), request(c, oc.data())};
  CHECK(ex.go(reqs) == 3);
  CHECK(ex.seen == std::vector<std::vector<float>>{{1, 2}, {3, 4}, {5, 6}});
  CHECK(oa == std::vector<float>{11, 21, 32});
  CHECK(ob == std::vector<float>{42});
  CHECK(oc == std::vector<float>{53, 63});

  fake_executor pad(4);
  const std::vector<float> seven = {7};
  std::vector<float> o1(1);
  std::vector<gt::batch_request> one = {request(seven, o1.data())};
  CHECK(pad.go(one) == 1);
  CHECK(pad.seen[0] == std::vector<float>{7, 0, 0, 0});  // zero rows, not the previous run's
  CHECK(o1[0] == 71);
}

TEST_CASE("a failed run fails the requests with rows in it and no others; outputs not asked for are skipped") {
  fake_executor ex(2);
  ex.fail_on = 1;  // the second run
  const std::vector<float> a = {1}, b = {2, 3}, c = {4}, d = {9};
  std::vector<float> oa(1), ob(2), oc(1);
  std::vector<gt::batch_request> reqs = {request(a, oa.data()), request(b, ob.data()), request(c, nullptr)};
  CHECK(ex.go(reqs) == 1);  // runs that succeeded
  CHECK(reqs[0].error.empty());
  CHECK(oa[0] == 11);
  CHECK(reqs[1].error == "kernel failed");  // its second row was in the failed run
  CHECK(reqs[2].error == "kernel failed");
  // A request already refused is not run.
  fake_executor ex2(1);
  std::vector<gt::batch_request> refused = {request(d, oc.data())};
  refused[0].error = "bad shape";
  CHECK(ex2.go(refused) == 0);
  CHECK(ex2.seen.empty());
}

TEST_CASE("a mover sees where each piece of a request lies, pads short runs once per input and takes rows to their device") {
  struct call {
    std::string what;
    std::size_t index;
    std::int64_t row;
    std::uint64_t bytes;
    std::vector<gt::memory_device> devices;
  };
  struct recorder {
    std::vector<call> calls;
    void put(std::size_t k, std::int64_t row, const gt::input_bytes& src, std::uint64_t offset, std::uint64_t n) {
      call c{"put", k, row, n, {}};
      src.pieces(offset, n, [&](std::span<const std::byte> piece, gt::memory_device d, std::uint64_t) {
        c.devices.push_back(d);
        CHECK(piece.size() > 0);
      });
      calls.push_back(c);
    }
    void pad(std::size_t k, std::int64_t row) { calls.push_back({"pad", k, row, 0, {}}); }
    void run(std::int64_t filled) { calls.push_back({"run", 0, filled, 0, {}}); }
    void take(std::size_t j, std::int64_t row, std::byte*, gt::memory_device d, std::uint64_t n) { calls.push_back({"take", j, row, n, {d}}); }
  };
  static_assert(gt::batch_mover<recorder>);
  std::vector<float> a(3), b(1), oa(3), ob(1);
  gt::batch_request ra, rb;
  ra.rows = 3;  // 2 rows on the host, then 1 on cuda:1
  gt::input_bytes ia;
  ia.buffers = {{reinterpret_cast<const std::byte*>(a.data()), 8}, {reinterpret_cast<const std::byte*>(a.data() + 2), 4}};
  ia.devices = {gt::host_memory, 1};
  ra.inputs = {ia};
  ra.outputs = {reinterpret_cast<std::byte*>(oa.data())};
  ra.output_devices = {0};  // cuda:0
  rb.rows = 1;
  gt::input_bytes ib;
  ib.buffers = {{reinterpret_cast<const std::byte*>(b.data()), 4}};  // devices empty: on the host
  rb.inputs = {ib};
  rb.outputs = {reinterpret_cast<std::byte*>(ob.data())};
  std::vector<gt::batch_request> reqs = {ra, rb};
  recorder m;
  gt::batch_layout L{3, {4}, {4}};
  CHECK(gt::run_batched(std::span(reqs), L, m) == 2);
  // Run 1: ra's 3 rows (pieces on the host and cuda:1), taken to cuda:0. Run 2: rb's row, padded.
  std::vector<std::string> order;
  for (const call& c : m.calls) order.push_back(c.what);
  CHECK(order == std::vector<std::string>{"put", "run", "take", "put", "pad", "run", "take"});
  CHECK(m.calls[0].devices == std::vector<gt::memory_device>{gt::host_memory, 1});
  CHECK(m.calls[0].bytes == 12);
  CHECK(m.calls[2].devices == std::vector<gt::memory_device>{0});
  CHECK(m.calls[2].bytes == 12);
  CHECK(m.calls[3].devices == std::vector<gt::memory_device>{gt::host_memory});
  CHECK(m.calls[4].row == 1);  // padding from the first unfilled row
  CHECK(m.calls[5].row == 1);  // one row filled
  CHECK(m.calls[6].devices == std::vector<gt::memory_device>{gt::host_memory});
}
