#include "support/fixtures.hpp"

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>

namespace ember::test {

std::filesystem::path fixtures_dir() {
    if (const char* env = std::getenv("EMBER_FIXTURES"); env && *env) return env;
    return EMBER_DEFAULT_FIXTURES;
}

std::filesystem::path fixture_path(const std::string& relative) {
    const auto path = fixtures_dir() / relative;
    if (!std::filesystem::exists(path)) {
        const std::string why = "FIXTURE MISSING: " + path.string() +
                                " -- the fixture tests need ../shared/fixtures beside the source tree; "
                                "set EMBER_FIXTURES=/path/to/fixtures to point elsewhere";
        // Outside a test case (a suite's constants, while ctest lists its cases) doctest
        // has nowhere to report a failure: say it and end the program.
        if (!doctest::is_running_in_test) {
            std::fprintf(stderr, "%s\n", why.c_str());
            std::exit(1);
        }
        FAIL(why);
    }
    return path;
}

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s) {
        if (c == '\'') out += "'\\''";
        else out += c;
    }
    return out + "'";
}

CommandResult run_command(const std::string& command, bool merge_stderr) {
    CommandResult result;
    const std::string full = merge_stderr ? command + " 2>&1" : command;
    FILE* pipe = ::popen(full.c_str(), "r");
    REQUIRE_MESSAGE(pipe != nullptr, "cannot run: " << command);
    std::array<char, 4096> buf;
    std::size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), pipe)) > 0) result.output.append(buf.data(), n);
    const int status = ::pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return result;
}

}  // namespace ember::test
