#pragma once
// The device backends of every device wing, for programs that run whatever devices a
// model names: gexec-run and the Triton backend take their model and executor types
// from here and name no device themselves. A new device wing (its folder beside cuda/)
// adds its header and its backend here: the one line that brings it to every program.
// Needs no device toolkit to compile: each wing loads its driver when first used.

#include "config.hpp"

#include "cuda.hpp"
#include "executor.hpp"

GEXEC_NAMESPACE_BEGIN

/// The host and every device wing's backend, in one list.
using all_backends = backends<cpu_backend, cuda_backend>;
/// A model over all_backends: a graph placed on any device gexec has a wing for.
using any_device_model = basic_model<all_backends>;
using any_device_executor = graph_executor<all_backends>;

GEXEC_NAMESPACE_END
