# gexec_add_model(<target> <name> <graph.json> <params.bin> <kernels.tar>)
#
# Links a TVM-compiled model into <target>, for a program that needs no file but itself:
#   - <graph.json> and <params.bin> are embedded in the binary (assembler .incbin, so the
#     bytes are never turned into C source), read back through the generated header
#     <gexec_models/<name>.hpp>:
#       gexec_models::<name>::graph_json()  -> std::string_view
#       gexec_models::<name>::params()      -> std::span<const std::byte>
#   - <kernels.tar> is what TVM's export_library writes for a system library
#     (relay.build with Runtime("cpp", {"system-lib": True}), then
#     lib.get_lib().export_library("kernels.tar")): its object files are linked in whole,
#     so their constructors register the kernels with gexec before main();
#     gexec::system_lib (<gexec/packed_c/system_lib.hpp>) binds the graph to them.
# <name> must be a C identifier. Relative paths are taken from the current source dir.
#
# gexec_add_relax_model(<target> <name> <kernels.tar> [WEIGHTS <file>])
#
# Links a Relax model (TVM >= 0.21) into <target> the same way: <kernels.tar> is what
# relax.build(mod, target, system_lib=True).export_library("kernels.tar") writes, lib0.o
# (the kernels) and devc.o (the executable, its constants included), linked in whole;
# gexec::system_module() (<gexec/library/system_module.hpp>) is the module they register,
# which gexec::relax::load_executable runs. WEIGHTS embeds a parameter file (TVM's blob,
# .safetensors or .npz) for the weights that nn.Module.export_tvm leaves as arguments,
# read back through <gexec_models/<name>.hpp> as gexec_models::<name>::weights().
# Several models link into one program: each model's objects register for <name> (their
# registration call renamed with objcopy, their kernels' symbols made local to them), and
# gexec::system_module("<name>") is that model's module (gexec::system_module() the one
# model where there is one).
#
# gexec_embed_file(<target> <symbol> <file>) embeds one more file the same way, read
# back through <gexec_models/<symbol>.hpp> as gexec_models::<symbol>::bytes().
#
# gexec_small_terminate_handler(<target>) links, for a static program that counts its
# bytes, a terminate handler without libstdc++'s demangler (some 47 KB on aarch64): an
# uncaught exception still prints its type and what() and aborts, the type named as the
# compiler mangles it (N5gexec4v0_55errorE for gexec::error). GNU ld, gold or lld with
# libstdc++; with libc++ it changes nothing. Such a program is best built with link-time
# optimisation too (INTERPROCEDURAL_OPTIMIZATION: some 11 KB less on aarch64, docs/arm.md).
include_guard(GLOBAL)

function(_gexec_embed _target _name)  # _gexec_embed(target name [key file]...)
  set(_dir ${CMAKE_CURRENT_BINARY_DIR}/gexec_models)
  set(_asm "")
  set(_decls "")
  set(_files "")
  set(_pairs ${ARGN})
  while(_pairs)
    list(POP_FRONT _pairs _key _file)
    get_filename_component(_file "${_file}" ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    list(APPEND _files ${_file})
    set(_sym gexec_embedded_${_name}_${_key})
    string(APPEND _asm "    \".global ${_sym}_begin\\n.global ${_sym}_end\\n.balign 64\\n${_sym}_begin:\\n\"\n"
                       "    \".incbin \\\"${_file}\\\"\\n${_sym}_end:\\n.byte 0\\n\"\n")
    string(APPEND _decls "extern \"C\" const char ${_sym}_begin[];\nextern \"C\" const char ${_sym}_end[];\n")
  endwhile()
  file(CONFIGURE OUTPUT ${_dir}/${_name}.cpp CONTENT "// Made by gexec_add_model/gexec_embed_file: the bytes of ${_files}.
#include \"gexec_models/${_name}.hpp\"
__asm__(\".section .rodata.gexec_embedded_${_name},\\\"a\\\"\\n\"
${_asm}    \".previous\\n\");
" @ONLY)
  set_source_files_properties(${_dir}/${_name}.cpp PROPERTIES OBJECT_DEPENDS "${_files}")
  target_sources(${_target} PRIVATE ${_dir}/${_name}.cpp)
  target_include_directories(${_target} PRIVATE ${_dir}/include)
  set(GEXEC_EMBED_DECLS "${_decls}" PARENT_SCOPE)
endfunction()

function(gexec_embed_file _target _symbol _file)
  _gexec_embed(${_target} ${_symbol} bytes ${_file})
  set(_sym gexec_embedded_${_symbol}_bytes)
  file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/gexec_models/include/gexec_models/${_symbol}.hpp CONTENT "#pragma once
// Made by gexec_embed_file: the bytes of ${_file}, embedded in the program.
#include <cstddef>
#include <span>
${GEXEC_EMBED_DECLS}
namespace gexec_models::${_symbol} {
inline std::span<const std::byte> bytes() noexcept {
  return {reinterpret_cast<const std::byte*>(${_sym}_begin), static_cast<std::size_t>(${_sym}_end - ${_sym}_begin)};
}
}  // namespace gexec_models::${_symbol}
" @ONLY)
endfunction()

function(gexec_add_model _target _name _graph _params _kernels)
  if(NOT _name MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "gexec_add_model: the model name \"${_name}\" is not a C identifier")
  endif()
  _gexec_embed(${_target} ${_name} graph ${_graph} params ${_params})
  set(_graph_sym gexec_embedded_${_name}_graph)
  set(_params_sym gexec_embedded_${_name}_params)
  file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/gexec_models/include/gexec_models/${_name}.hpp CONTENT "#pragma once
// Made by gexec_add_model: model ${_name}, its graph and parameters embedded in the
// program and its kernels linked in (gexec::system_lib binds them).
#include <cstddef>
#include <span>
#include <string_view>
${GEXEC_EMBED_DECLS}
namespace gexec_models::${_name} {
inline std::string_view graph_json() noexcept {
  return {${_graph_sym}_begin, static_cast<std::size_t>(${_graph_sym}_end - ${_graph_sym}_begin)};
}
inline std::span<const std::byte> params() noexcept {
  return {reinterpret_cast<const std::byte*>(${_params_sym}_begin), static_cast<std::size_t>(${_params_sym}_end - ${_params_sym}_begin)};
}
}  // namespace gexec_models::${_name}
" @ONLY)

  _gexec_link_kernels(${_target} ${_name} ${_kernels})
endfunction()

# The kernels: the .tar's objects, archived at build time and linked in whole (nothing
# refers to them by name; their constructors register them).
# With a fourth argument (gexec_add_relax_model), the objects register for that model.
function(_gexec_link_kernels _target _name _kernels)
  get_filename_component(_kernels "${_kernels}" ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  set(_archive ${CMAKE_CURRENT_BINARY_DIR}/gexec_models/${_target}/${_name}/libkernels.a)  # per program: several may link one model
  set(_rename "")
  if(ARGC GREATER 3)
    set(_rename -DMODEL=${ARGV3} -DOBJCOPY=${CMAKE_OBJCOPY})
  endif()
  add_custom_command(OUTPUT ${_archive}
    COMMAND ${CMAKE_COMMAND} -DTAR=${_kernels} -DARCHIVE=${_archive} -DAR=${CMAKE_AR} ${_rename} -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/gexecKernelArchive.cmake
    DEPENDS ${_kernels} ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/gexecKernelArchive.cmake
    COMMENT "gexec: kernels of model ${_name} from ${_kernels}" VERBATIM)
  add_custom_target(${_target}_${_name}_kernels DEPENDS ${_archive})
  add_dependencies(${_target} ${_target}_${_name}_kernels)
  # One option: CMake drops repeated options, which would leave a second model's archive
  # outside --whole-archive.
  target_link_options(${_target} PRIVATE "LINKER:--whole-archive,${_archive},--no-whole-archive")
  set_property(TARGET ${_target} APPEND PROPERTY LINK_DEPENDS ${_archive})
  target_link_libraries(${_target} PRIVATE m)
endfunction()

function(gexec_add_relax_model _target _name _kernels)
  cmake_parse_arguments(_arg "" "WEIGHTS" "" ${ARGN})
  if(_arg_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "gexec_add_relax_model: unexpected arguments ${_arg_UNPARSED_ARGUMENTS} (it takes <target> <name> <kernels.tar> [WEIGHTS <file>])")
  endif()
  if(NOT _name MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "gexec_add_relax_model: the model name \"${_name}\" is not a C identifier")
  endif()
  if(_arg_WEIGHTS)
    _gexec_embed(${_target} ${_name} weights ${_arg_WEIGHTS})
    set(_sym gexec_embedded_${_name}_weights)
    file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/gexec_models/include/gexec_models/${_name}.hpp CONTENT "#pragma once
// Made by gexec_add_relax_model: the weights of Relax model ${_name}, embedded in the
// program (its kernels and executable are linked in: gexec::system_module()).
#include <cstddef>
#include <span>
${GEXEC_EMBED_DECLS}
namespace gexec_models::${_name} {
inline std::span<const std::byte> weights() noexcept {
  return {reinterpret_cast<const std::byte*>(${_sym}_begin), static_cast<std::size_t>(${_sym}_end - ${_sym}_begin)};
}
}  // namespace gexec_models::${_name}
" @ONLY)
  endif()
  # The objects' registration call, renamed to this function (gexecKernelArchive.cmake),
  # registers for model <name>: gexec::system_module("<name>").
  if(NOT CMAKE_OBJCOPY)
    message(FATAL_ERROR "gexec_add_relax_model: needs objcopy (CMAKE_OBJCOPY) to keep model ${_name}'s symbols apart from other models'")
  endif()
  file(CONFIGURE OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/gexec_models/${_name}_registration.cpp CONTENT "// Made by gexec_add_relax_model: what model ${_name}'s objects call to register their symbols.
extern \"C\" int gexec_register_system_lib_symbol_of(const char* model, const char* name, void* symbol);
extern \"C\" int gexec_relax_register_${_name}(const char* name, void* symbol) { return gexec_register_system_lib_symbol_of(\"${_name}\", name, symbol); }
" @ONLY)
  target_sources(${_target} PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/gexec_models/${_name}_registration.cpp)
  _gexec_link_kernels(${_target} ${_name} ${_kernels} ${_name})
endfunction()

function(gexec_small_terminate_handler _target)
  if(APPLE OR MSVC)
    message(FATAL_ERROR "gexec_small_terminate_handler: needs a GNU-style linker (--defsym) and libstdc++")
  endif()
  # libstdc++'s handler, __gnu_cxx::__verbose_terminate_handler(), defined by the linker
  # as gexec's: the archive member that holds it (and calls the demangler) is not needed.
  target_sources(${_target} PRIVATE ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/gexecTerminateHandler.cpp)
  target_link_options(${_target} PRIVATE "LINKER:--defsym=_ZN9__gnu_cxx27__verbose_terminate_handlerEv=gexec_terminate_handler")
endfunction()
