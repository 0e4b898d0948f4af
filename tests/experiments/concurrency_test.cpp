// Rung: smoke (a property of scheduling, not of numbers).
//
// ABI 1.1's concurrency declaration: `ember sweep --jobs 2` never has two instances of a
// plugin that does not declare EMBER_PLUGIN_FLAG_CONCURRENT alive at once; a plugin that
// declares it runs in both jobs at the same time (so the check can fail). The test plugin
// overlap counts its live instances in the process and writes the largest count it saw.
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <string>

#include "../run/ember_run.hpp"
#include "support/fixtures.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

int largest_overlap(const std::string& plugin) {
    TempDir dir;
    const fs::path configs = dir.path() / "configs";
    fs::create_directories(configs);
    std::string args;
    for (const char* name : {"a", "b"}) {
        write_text(configs / (std::string(name) + ".toml"),
                   fmt::format("[model]\npath = {}\nthreads = 1\n[prompt]\ntext = \"Once upon a time\"\n"
                               "[generation]\nmax_tokens = 6\n[output]\ndir = \"../runs/{}\"\n\n{}",
                               toml_literal(fixture_path("models/stories260K.gguf").string()), name,
                               experiment(test_plugin(plugin), "sleep_ms = 15\n")));
        args += " " + shell_quote((configs / (std::string(name) + ".toml")).string());
    }
    const auto r = run_command(fmt::format("env -u EMBER_DEFAULTS XDG_CONFIG_HOME=/nonexistent {} sweep --jobs 2{} 2>&1",
                                           shell_quote(EMBER_BINARY), args));
    REQUIRE_MESSAGE(r.exit_code == 0, r.output);
    int most = 0;
    for (const char* name : {"a", "b"}) most = std::max(most, std::stoi(read_text(dir.path() / "runs" / name / "overlap.txt")));
    return most;
}

}  // namespace

TEST_CASE("sweep --jobs 2 runs an undeclared plugin's instances one at a time, a concurrent one side by side") {
    CHECK(largest_overlap("overlap") == 1);
    CHECK(largest_overlap("overlap-concurrent") == 2);
}

}  // namespace ember::test
