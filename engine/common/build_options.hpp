// What this build of ember has, as CMake configured it, for the code that chooses a
// default from it. EMBER_NO_FAST_ROUTE is defined for every translation unit of a
// -DEMBER_FAST=OFF build (the default off x86-64): the reference route is then the only one.
#pragma once

namespace ember {

#ifdef EMBER_NO_FAST_ROUTE
inline constexpr bool kHasFastRoute = false;
#else
inline constexpr bool kHasFastRoute = true;
#endif

}  // namespace ember
