#include "common/build_options.hpp"

namespace ember {

// EMBER_NO_FAST_ROUTE: set on this file (and the files that call the fast route) by the
// top-level CMakeLists.txt in a -DEMBER_FAST=OFF build.
bool has_fast_route() {
#ifdef EMBER_NO_FAST_ROUTE
    return false;
#else
    return true;
#endif
}

}  // namespace ember
