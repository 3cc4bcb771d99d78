#pragma once
// detail::name_index: names to positions, the one map type gexec keeps names in.

#include "../config.hpp"

#include <cstddef>
#include <string>
#include <unordered_map>

GEXEC_NAMESPACE_BEGIN
namespace detail {

/// Names to positions: a graph input's or output's index, a parameter's place in a dict
/// and in a file, a JSON member's. One type for all of them, so that a program links one
/// hash table's code for every such map (a static program's size counts it).
using name_index = std::unordered_map<std::string, std::size_t>;

}  // namespace detail
GEXEC_NAMESPACE_END
