#pragma once
// The graph: TVM's graph-executor JSON as plain C++ data. graph/data.hpp holds the data
// and its validation, graph/compact.hpp the compact form models keep, graph/validated.hpp
// validated_graph, graph/json.hpp reading and writing the JSON, graph/builder.hpp graphs
// built in C++.

#include "graph/builder.hpp"
#include "graph/compact.hpp"
#include "graph/data.hpp"
#include "graph/json.hpp"
#include "graph/validated.hpp"
