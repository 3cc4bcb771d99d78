#pragma once
// Moved to <gexec/packed_c/factory.hpp>, with the rest of the packed C ABI.
#include "packed_c/factory.hpp"
