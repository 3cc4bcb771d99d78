#pragma once
// The instantiations gexec::compiled holds: the executor over the host (one type, whatever
// binding made its model), the model over a TVM-compiled library (gexec::model), and the
// constructor of a model over a registry of C++ kernels. In compiled
// mode they are declared extern here, so a program including <gexec/executor.hpp> (or
// this header) does not instantiate them again; src/gexec.cpp defines them. In
// header-only mode this header declares nothing.

#include "config.hpp"

#include "binding/registry.hpp"
#include "graph_executor.hpp"
#include "load.hpp"
#include "model.hpp"

/// GEXEC_DETAIL_INSTANTIATIONS(extern) declares them; with an empty argument, defines them.
/// Of the model over a registry, the constructor alone: Clang instantiates model::load
/// (for kernel libraries only) in an explicit instantiation of the whole class, though
/// its constraint is not satisfied.
#define GEXEC_DETAIL_INSTANTIATIONS(how)                                                  \
  how template class graph_executor<backends<cpu_backend>>;                                 \
  how template class basic_model<backends<cpu_backend>, pool_allocator, packed_c_abi>;      \
  how template basic_model<backends<cpu_backend>, pool_allocator, registry>::basic_model( \
      validated_graph, registry, const param_dict&, model_options, backends<cpu_backend>, pool_allocator);

#if !GEXEC_HEADER_ONLY()
GEXEC_NAMESPACE_BEGIN
GEXEC_DETAIL_INSTANTIATIONS(extern)
GEXEC_NAMESPACE_END
#endif
