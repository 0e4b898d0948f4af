// What this build of ember has, as CMake configured it, for the code that chooses a
// default from it.
#pragma once

namespace ember {

// False in a -DEMBER_FAST=OFF build (the default off x86-64): the reference route is then
// the only one. A function, not a constant, so that only build_options.cpp and the few
// files that include the fast route's headers are compiled differently in such a build;
// every other object is the same as the fast build's, and a compiler cache reuses it.
bool has_fast_route();

}  // namespace ember
