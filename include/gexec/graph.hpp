#pragma once
// The graph: TVM's graph-executor JSON as plain C++ data. graph/data.hpp holds the data
// and its validation (validated_graph), graph/json.hpp reading and writing the JSON.

#include "graph/data.hpp"
#include "graph/json.hpp"
