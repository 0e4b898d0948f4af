# ember_add_plugin(NAME SOURCES...): an experiment plugin lib<NAME>.so built against the
# SDK headers alone, C++20, everything hidden except ember_plugin_entry (a linker
# version script keeps even inline library code from being exported).
function(ember_add_plugin name)
  add_library(${name} MODULE ${ARGN})
  target_link_libraries(${name} PRIVATE Ember::PluginSDK)
  target_compile_features(${name} PRIVATE cxx_std_20)
  set_target_properties(${name} PROPERTIES
    PREFIX "lib"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  target_link_options(${name} PRIVATE "LINKER:--version-script=${EMBER_PLUGIN_VERSION_SCRIPT}")
  set_property(TARGET ${name} APPEND PROPERTY LINK_DEPENDS ${EMBER_PLUGIN_VERSION_SCRIPT})
endfunction()
