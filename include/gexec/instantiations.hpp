#pragma once
// The instantiations gexec::compiled holds: the executor and model over the host with
// a TVM-compiled library (gexec::model) and with a registry of C++ kernels. In compiled
// mode they are declared extern here, so a program including <gexec/executor.hpp> (or
// this header) does not instantiate them again; src/gexec.cpp defines them. In
// header-only mode this header declares nothing.

#include "config.hpp"

#include "binding/registry.hpp"
#include "graph_executor.hpp"
#include "load.hpp"
#include "model.hpp"

/// GEXEC_DETAIL_INSTANTIATIONS(extern) declares them; with an empty argument, defines them.
#define GEXEC_DETAIL_INSTANTIATIONS(how)                                                \
  how template class graph_executor<backends<cpu_backend>, pool_allocator, packed_c_abi>; \
  how template class basic_model<backends<cpu_backend>, pool_allocator, packed_c_abi>;    \
  how template class graph_executor<backends<cpu_backend>, pool_allocator, registry>;     \
  how template class basic_model<backends<cpu_backend>, pool_allocator, registry>;

#if !GEXEC_HEADER_ONLY()
GEXEC_NAMESPACE_BEGIN
GEXEC_DETAIL_INSTANTIATIONS(extern)
GEXEC_NAMESPACE_END
#endif
