#pragma once
// Forward declarations of gexec's public types, with the executor's default policies.

#include "config.hpp"

GEXEC_NAMESPACE_BEGIN

template <class... Bs>
class backends;

class error;
class ndarray;
class param_dict;
struct graph;
class validated_graph;
struct node;
struct node_entry;
class graph_builder;
class module;
class factory;
struct packed_function;
struct packed_args;
struct benchmark_options;
struct benchmark_result;
struct tensor_info;
struct plan;
class runtime;
struct runtime_options;
struct model_options;

struct cpu_backend;
struct pool_allocator;
struct buffer_allocator;
class packed_c_abi;
class registry;
template <class... Kernels>
class static_registry;

template <class Backends = backends<cpu_backend>>
class graph_executor;
class executor_view;
template <class Backends, class Observer>
class step_program;
struct as_compiled;
struct liveness;
template <class Backends = backends<cpu_backend>, class Allocator = pool_allocator, class Binding = packed_c_abi, class Planner = as_compiled>
class basic_model;
using model = basic_model<>;

GEXEC_NAMESPACE_END
