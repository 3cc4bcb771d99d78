// Compiled mode (gexec::compiled, GEXEC_COMPILED): the umbrella header includes neither
// Boost.JSON nor Boost.DLL, and what the library defines serves through the same API:
// graph JSON read and written, a kernel library loaded, the MLP run as gexec-run runs it.
// The other unit tests are header-only, so both modes are tested.
#include <gexec/executor.hpp>

// The loading functions take a gexec::file_path, built from a std::filesystem::path
// without <filesystem> among gexec's headers (a program pays for it only if it names one).
#if defined(__GLIBCXX__) && defined(_GLIBCXX_FILESYSTEM)
#error "<gexec/executor.hpp> includes <filesystem> in compiled mode"
#endif

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <string_view>

#if GEXEC_HEADER_ONLY()
#error "test_compiled_mode is built in compiled mode: it links gexec::compiled"
#endif
#ifdef BOOST_JSON_HPP
#error "<gexec/executor.hpp> includes Boost.JSON in compiled mode"
#endif
#ifdef BOOST_DLL_SHARED_LIBRARY_HPP
#error "<gexec/executor.hpp> includes Boost.DLL in compiled mode"
#endif

TEST_CASE("compiled mode: graph JSON both ways, through the library") {
  gexec::graph_builder b;
  b.output(b.op("add", "add_one", {b.input("x", {2})}, {{{2}}}));
  const gexec::validated_graph g = b.build();
  const std::string json = gexec::to_json(g);
  const gexec::validated_graph back = gexec::parse_graph(json);
  CHECK(back.get().nodes.size() == g.get().nodes.size());
  CHECK(gexec::to_json(back) == json);
  CHECK_THROWS_AS(gexec::parse_graph("{"), gexec::error);

  gexec::registry kernels;
  kernels.add("add_one", [](gexec::packed_args a) {
    const DLTensor& x = a.tensor(0);
    DLTensor& y = a.tensor(1);
    for (std::int64_t i = 0; i < x.shape[0]; ++i) static_cast<float*>(y.data)[i] = static_cast<float*>(x.data)[i] + 1;
  });
  auto ex = gexec::create(json, kernels);  // graph_executor<>, instantiated in the library
  ex.set_input("x", gexec::ndarray::from_values<float>({2}, {1.0f, 2.5f}));
  ex.run();
  const auto y = ex.get_output(0).values<float>();
  CHECK(y[0] == 2.0f);
  CHECK(y[1] == 3.5f);
}

TEST_CASE("compiled mode: a TVM-style kernel library, through the library") {
  const std::filesystem::path mlp = std::filesystem::path(GEXEC_SOURCE_DIR) / "examples" / "mlp";
  gexec::module lib = gexec::load_module(GEXEC_TEST_KERNELS);
  CHECK(lib.has_symbol("test_dense"));
  CHECK(lib.get_function("test_relu"));
  auto ex = gexec::create(mlp / "graph.json", lib, {gexec::cpu()});
  ex.load_params_file((mlp / "params.bin").string());
  ex.set_input("x", gexec::ndarray::from_values<float>({1, 4}, {0.5f, -1.0f, 2.0f, 0.25f}));
  ex.run();
  const auto y = ex.get_output(0).values<float>();
  REQUIRE(y.size() == 3);
  // numpy's output for the same weights (as test_cli checks gexec-run's).
  CHECK(y[0] == doctest::Approx(0.400786).epsilon(1e-5));
  CHECK(y[1] == doctest::Approx(0.336452).epsilon(1e-5));
  CHECK(y[2] == doctest::Approx(0.262762).epsilon(1e-5));
  CHECK_THROWS_AS(gexec::load_module(mlp / "no_such_library.so"), gexec::error);
}

TEST_CASE("compiled mode: a path as a std::filesystem::path, a string or a directory entry") {
  namespace fs = std::filesystem;
  const fs::path kernels(GEXEC_TEST_KERNELS);
  const gexec::module by_path = gexec::load_module(kernels);
  const gexec::module by_string = gexec::load_module(std::string(GEXEC_TEST_KERNELS));
  const gexec::module by_view = gexec::load_module(std::string_view(GEXEC_TEST_KERNELS));
  // One library loaded once: the same module whichever way its path was spelled.
  CHECK(by_path == by_string);
  CHECK(by_path == by_view);
  const fs::path back = by_path.path();  // converts back to the caller's path type
  CHECK(back == fs::canonical(kernels));
  CHECK(by_string.path().string() == fs::canonical(kernels).string());
  CHECK(by_path.path().filename().string() == kernels.filename().string());
  const fs::directory_entry entry(kernels);
  CHECK(gexec::load_module(entry) == by_path);

  const fs::path graph = fs::path(GEXEC_SOURCE_DIR) / "examples" / "mlp" / "graph.json";
  const std::string from_path = gexec::to_json(gexec::load_graph_file(graph));
  CHECK(gexec::to_json(gexec::load_graph_file(graph.string())) == from_path);
  CHECK(gexec::to_json(gexec::load_graph_file(graph.c_str())) == from_path);
  const std::string missing = (graph.parent_path() / "no_such_graph.json").string();
  try {
    (void)gexec::load_graph_file(std::string_view(missing));
    FAIL("a missing graph file was read");
  } catch (const gexec::error& e) {
    CHECK(e.code() == gexec::errc::io);
    CHECK(std::string(e.what()).find(missing) != std::string::npos);
  }
}

TEST_CASE("compiled mode: file_path's filename and parent_path as std::filesystem::path's") {
  for (const char* text : {"a/b", "/x", "x", "a//b", "a/b/", "/", "//x", "a/.", "..", "", "dir/sub/model.so", "/usr//lib/x.so"}) {
    CAPTURE(text);
    const std::filesystem::path p(text);
    const gexec::file_path f(text);
    CHECK(f.filename().string() == p.filename().string());
    CHECK(f.parent_path().string() == p.parent_path().string());
  }
}
