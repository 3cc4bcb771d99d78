#pragma once
// Moved to <gexec/packed_c/binding.hpp>, with the rest of the packed C ABI.
#include "../packed_c/binding.hpp"
