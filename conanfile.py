# Conan 2 recipe for gexec: the headers and gexec's own CMake package, nothing built.
# Boost (JSON and headers) and DLPack come from the system, not from a Conan remote:
# the installed gexecConfig.cmake finds them, as it does for any other consumer, so
# `conan create .` needs no network. Consumers write find_package(gexec CONFIG).
import os
import re

from conan import ConanFile
from conan.tools.build import check_min_cppstd
from conan.tools.cmake import CMake, CMakeToolchain, cmake_layout
from conan.tools.files import copy, load


class GexecConan(ConanFile):
    name = "gexec"
    description = "Header-only C++20 runtime for Apache TVM graph-executor artifacts"
    license = "Apache-2.0"
    topics = ("tvm", "graph-executor", "inference", "header-only")
    package_type = "header-library"
    settings = "os", "arch", "compiler", "build_type"
    exports_sources = "CMakeLists.txt", "cmake/*", "include/*", "LICENSE"
    no_copy_source = True

    def set_version(self):
        # The version lives in include/gexec/config.hpp, as for CMake.
        config = load(self, os.path.join(self.recipe_folder, "include", "gexec", "config.hpp"))
        parts = [re.search(rf"#define GEXEC_VERSION_{p} (\d+)", config).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
        self.version = ".".join(parts)

    def layout(self):
        cmake_layout(self)

    def validate(self):
        check_min_cppstd(self, 20)

    def generate(self):
        tc = CMakeToolchain(self)
        for part in ("TESTS", "EXAMPLES", "BENCHMARKS", "TOOLS", "COMPILED", "C_API"):
            tc.cache_variables[f"GEXEC_BUILD_{part}"] = False
        tc.generate()

    def build(self):
        CMake(self).configure()

    def package(self):
        CMake(self).install()
        copy(self, "LICENSE", self.source_folder, os.path.join(self.package_folder, "licenses"))

    def package_id(self):
        # Headers only: one package serves every build type, compiler and architecture.
        self.info.clear()

    def package_info(self):
        self.cpp_info.bindirs = []
        self.cpp_info.libdirs = []
        # find_package(gexec) loads gexec's own gexecConfig.cmake, which finds Boost and
        # DLPack; Conan generates no CMake files of its own for gexec.
        self.cpp_info.set_property("cmake_find_mode", "none")
        self.cpp_info.builddirs = [os.path.join("lib", "cmake", "gexec")]
