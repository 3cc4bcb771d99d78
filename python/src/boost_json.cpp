// Boost.JSON compiled into the extension (its header-only form), so the wheel needs no
// Boost library at run time.
#include <boost/json/src.hpp>
