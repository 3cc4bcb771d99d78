#pragma once
// graph_builder (graph/builder.hpp), with the JSON its users write the graphs it builds
// as (graph/json.hpp: to_json, parse_graph).

#include "graph/builder.hpp"
#include "graph/json.hpp"
