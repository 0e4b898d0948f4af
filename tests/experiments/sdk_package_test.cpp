// Rung: smoke (SDK package). `cmake --install --component plugin_sdk` gives a CMake
// package with which the out-of-tree example in plugin_sdk/example (the one
// docs/plugin-guide.md walks through) configures and builds with find_package alone, and
// `ember plugins validate` accepts the result.
#include <doctest/doctest.h>

#include <fstream>

#include "support/fixtures.hpp"
#include "synthetic_run.hpp"

using namespace ember::test;
namespace fs = std::filesystem;

TEST_CASE("the installed SDK package builds the out-of-tree example") {
    TempDir dir;
    const std::string cmake = shell_quote(EMBER_CMAKE_COMMAND);
    const fs::path prefix = dir.path() / "prefix";
    const auto install = run_command(cmake + " --install " + shell_quote(EMBER_BUILD_DIR) +
                                         " --component plugin_sdk --prefix " + shell_quote(prefix.string()),
                                     true);
    REQUIRE_MESSAGE(install.exit_code == 0, install.output);
    for (const char* file : {"include/ember/plugin.h", "include/ember/experiment.hpp", "include/ember/experiment_config.hpp",
                             "include/ember/detail/export.hpp", "lib/cmake/EmberPluginSDK/EmberPluginSDKConfig.cmake",
                             "lib/cmake/EmberPluginSDK/EmberPluginSDKConfigVersion.cmake",
                             "lib/cmake/EmberPluginSDK/EmberPlugin.cmake", "lib/cmake/EmberPluginSDK/ember_plugin.map"}) {
        CHECK_MESSAGE(fs::exists(prefix / file), "not installed: " << file);
    }
    // Nothing but the SDK: no ember binary, no engine headers.
    CHECK(!fs::exists(prefix / "bin"));

    const fs::path build = dir.path() / "build";
    const std::string example = shell_quote(std::string(EMBER_SOURCE_DIR) + "/plugin_sdk/example");
    const auto configure = run_command(cmake + " -S " + example + " -B " + shell_quote(build.string()) +
                                           " -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH=" + shell_quote(prefix.string()),
                                       true);
    REQUIRE_MESSAGE(configure.exit_code == 0, configure.output);
    const auto compile = run_command(cmake + " --build " + shell_quote(build.string()), true);
    REQUIRE_MESSAGE(compile.exit_code == 0, compile.output);

    const fs::path plugin = build / "libcounter.so";
    const auto validate = run_command(std::string(EMBER_BINARY) + " plugins validate " + shell_quote(plugin.string()), true);
    REQUIRE_MESSAGE(validate.exit_code == 0, validate.output);
    CHECK(validate.output.find("name:        counter\n") != std::string::npos);
    CHECK(validate.output.find("stages:      on_model_loaded, after_layer, on_generation_complete\n") != std::string::npos);

    // Only the entry symbol is exported.
    const auto symbols = run_command("nm -D --defined-only " + shell_quote(plugin.string()) + " | awk '{print $3}'");
    CHECK(symbols.output == "ember_plugin_entry\n");

    // The package version is the ABI version: another major is not found.
    const fs::path other = dir.path() / "other";
    fs::create_directories(other);
    std::ofstream(other / "CMakeLists.txt") << "cmake_minimum_required(VERSION 3.20)\nproject(x LANGUAGES CXX)\n"
                                               "find_package(EmberPluginSDK 2.0 REQUIRED)\n";
    const auto wrong = run_command(cmake + " -S " + shell_quote(other.string()) + " -B " +
                                       shell_quote((other / "build").string()) + " -DCMAKE_PREFIX_PATH=" +
                                       shell_quote(prefix.string()),
                                   true);
    CHECK(wrong.exit_code != 0);
    CHECK(wrong.output.find("EmberPluginSDK") != std::string::npos);
}
