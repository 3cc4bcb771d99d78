// Boost.JSON compiled from its headers, for builds with GEXEC_BOOST_JSON_HEADER_ONLY=ON
// (cross builds whose target has Boost's headers but no Boost.JSON library).
#include <boost/json/src.hpp>
