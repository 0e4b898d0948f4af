// Rung: smoke (a property of scheduling, not of numbers).
//
// ABI 1.1's concurrency declaration: `ember sweep --jobs 2` never has two instances of a
// plugin that does not declare EMBER_PLUGIN_FLAG_CONCURRENT alive at once; a plugin that
// declares it runs in both jobs at the same time (so the check can fail). The test plugin
// overlap writes when its instance lived (monotonic clock, comparable across the
// supervised worker processes).
#include <doctest/doctest.h>

#include <fmt/format.h>

#include <sstream>
#include <string>

#include "../run/ember_run.hpp"
#include "support/fixtures.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;

// Whether the two runs' instances were alive at the same time.
bool instances_overlapped(const std::string& plugin) {
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
    long long start[2], end[2];
    for (int i = 0; i < 2; ++i) {
        std::istringstream in(read_text(dir.path() / "runs" / (i == 0 ? "a" : "b") / "overlap.txt"));
        in >> start[i] >> end[i];
        REQUIRE(!in.fail());
    }
    return start[0] < end[1] && start[1] < end[0];
}

}  // namespace

TEST_CASE("sweep --jobs 2 runs an undeclared plugin's instances one at a time, a concurrent one side by side") {
    CHECK_FALSE(instances_overlapped("overlap"));
    CHECK(instances_overlapped("overlap-concurrent"));
}

}  // namespace ember::test
