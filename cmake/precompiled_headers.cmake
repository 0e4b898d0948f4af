# Precompiled headers: the standard library, fmt and Boost.JSON (and doctest for the
# suites) are most of what a file of this project costs to parse, and nearly every file
# includes them. Each is parsed once per build tree, by one owner per kind of object GCC
# can share a precompiled header between (it refuses one made with other -fPIC/-fPIE
# settings), and every target of that kind reuses the owner's:
#   ember_pch_library  objects of libraries and plugins (-fPIC)
#   ember_pch_program  objects of programs (-fPIE): the ember binary and the tools
#   ember_pch_suite    the suites' objects (-fPIE, with doctest)
# The owners are empty translation units, built for their headers alone. Left out: the
# kernels (each file has its own -m flags), the objects the disabled-path gate reads, the
# Python module (its own flags), and targets compiled without fmt's
# or Boost.JSON's definitions (below). EMBER_PCH=OFF builds without them.

set(ember_pch_common_headers
  <algorithm> <array> <cmath> <cstddef> <cstdint> <cstring> <filesystem> <fstream> <functional>
  <map> <memory> <optional> <set> <span> <sstream> <string> <string_view> <utility> <vector>
  <fmt/format.h> <boost/json.hpp>)
set(ember_pch_left_out "^(ember_kernels_.*|disabled_path_gate_objects|_ember)$")

# Every target defined under DIR, recursively.
function(ember_targets_under dir out)
  get_property(targets DIRECTORY "${dir}" PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY "${dir}" PROPERTY SUBDIRECTORIES)
  foreach(sub IN LISTS subdirs)
    ember_targets_under("${sub}" sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# Whether TARGET's compilation sees DEPENDENCY's usage requirements (its definitions): linked
# directly, or through the public links of what it links (a private link of a static
# library reaches the consumer's link line alone, as $<LINK_ONLY:...>).
function(ember_compiles_with target dependency out)
  get_target_property(links ${target} LINK_LIBRARIES)
  set(queue ${links})
  set(seen "")
  while(queue)
    list(POP_FRONT queue item)
    if(item STREQUAL dependency)
      set(${out} TRUE PARENT_SCOPE)
      return()
    endif()
    if(NOT TARGET "${item}" OR item IN_LIST seen)
      continue()
    endif()
    list(APPEND seen "${item}")
    get_target_property(public ${item} INTERFACE_LINK_LIBRARIES)
    if(public)
      list(FILTER public EXCLUDE REGEX "^\\$<LINK_ONLY:")
      list(APPEND queue ${public})
    endif()
  endwhile()
  set(${out} FALSE PARENT_SCOPE)
endfunction()

function(ember_precompile_headers)
  set(owner_source "${PROJECT_SOURCE_DIR}/cmake/pch_owner.cpp")
  add_library(ember_pch_library OBJECT "${owner_source}")
  add_executable(ember_pch_program "${owner_source}")
  set(owners ember_pch_library ember_pch_program)
  get_property(suites GLOBAL PROPERTY EMBER_SUITES)
  if(suites)
    # A suite: doctest's main (and the test case registry doctest.h refers to) from the
    # suites' support library, and the suites' own options (ember_add_test's -O1).
    add_executable(ember_pch_suite "${PROJECT_SOURCE_DIR}/cmake/pch_owner_suite.cpp")
    target_link_libraries(ember_pch_suite PRIVATE ember_test_support)
    target_precompile_headers(ember_pch_suite PRIVATE <doctest/doctest.h>)
    list(GET suites 0 first_suite)
    get_target_property(suite_options ${first_suite} COMPILE_OPTIONS)
    if(suite_options)
      target_compile_options(ember_pch_suite PRIVATE ${suite_options})
    endif()
    list(APPEND owners ember_pch_suite)
  endif()
  foreach(owner IN LISTS owners)
    # The definitions fmt and Boost.JSON's headers read (FMT_SHARED, BOOST_JSON_DYN_LINK).
    target_link_libraries(${owner} PRIVATE fmt::fmt Boost::json)
    target_precompile_headers(${owner} PRIVATE ${ember_pch_common_headers})
  endforeach()

  ember_targets_under("${PROJECT_SOURCE_DIR}" targets)
  foreach(target IN LISTS targets)
    get_target_property(type ${target} TYPE)
    if(target MATCHES "^ember_pch_" OR target MATCHES "${ember_pch_left_out}" OR type STREQUAL "INTERFACE_LIBRARY"
       OR type STREQUAL "UTILITY")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    list(FILTER sources INCLUDE REGEX "\\.cpp$")
    if(NOT sources)  # C alone (test plugins of the C ABI)
      continue()
    endif()
    # A header compiled with other definitions is not used (GCC says so, -Winvalid-pch) and
    # the file would parse every header of it instead: the plugins, built against the SDK
    # alone, and the few files without fmt or Boost.JSON compile as they are.
    ember_compiles_with(${target} fmt::fmt with_fmt)
    ember_compiles_with(${target} Boost::json with_json)
    if(NOT with_fmt OR NOT with_json)
      continue()
    endif()
    if(target IN_LIST suites)
      target_precompile_headers(${target} REUSE_FROM ember_pch_suite)
    elseif(type STREQUAL "EXECUTABLE")
      target_precompile_headers(${target} REUSE_FROM ember_pch_program)
    else()
      target_precompile_headers(${target} REUSE_FROM ember_pch_library)
    endif()
  endforeach()
endfunction()
