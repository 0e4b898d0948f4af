// The suites' precompiled-header owner (cmake/precompiled_headers.cmake); its main is
// doctest's, from tests/support/test_main.cpp.
