// Where the shared fixtures are: $EMBER_FIXTURES, else ../shared/fixtures beside the
// source tree. A test that needs a fixture calls fixture_path(); if the file is missing
// the test fails loudly, naming the path and how to point EMBER_FIXTURES at it.
#pragma once

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "common/build_options.hpp"

namespace ember::test {

// The first line of a test case that runs only the fast route: in a build without it
// (-DEMBER_FAST=OFF) the case says so in the test output and returns (nothing to check).
// A case over both routes loops over built_routes() instead, so such a build still runs
// its reference half.
//   if (test::fast_route_missing()) return;
inline bool fast_route_missing() {
    if (has_fast_route()) return false;
    MESSAGE("not run: this build has no fast route (-DEMBER_FAST=OFF), and this case checks only the fast route");
    return true;
}

// The routes this build has, by name: "reference", and "fast" unless -DEMBER_FAST=OFF.
inline std::vector<const char*> built_routes() {
    if (has_fast_route()) return {"reference", "fast"};
    return {"reference"};
}

std::filesystem::path fixtures_dir();

// fixtures_dir() / relative, checked to exist (a doctest failure otherwise).
std::filesystem::path fixture_path(const std::string& relative);

// The fixture models every family-wide test iterates over.
inline constexpr const char* kFixtureModels[] = {
    "stories260K", "stories260K-q8_0", "stories260K-f16", "stories260K-bf16", "llama-2-tiny-random",
    "synth-llama3-q8_0", "synth-qwen3-q8_0", "synth-gemma4-q8_0", "synth-gemma4-e-q8_0",
};

// Runs a shell command, capturing stdout (and stderr when merge_stderr); returns the
// exit status as `ember` saw it.
struct CommandResult {
    int exit_code = -1;
    std::string output;
};
CommandResult run_command(const std::string& command, bool merge_stderr = false);

// Quotes a string for /bin/sh.
std::string shell_quote(const std::string& s);

}  // namespace ember::test
