// Running `ember run` from a test the way a user does: a TOML config written into a
// temporary directory, the CLI run on it (no defaults file unless the test gives one),
// its exit status, stdout, stderr and run.json read back.
//
//   TempDir dir;
//   const auto run = ember_run(dir, run_config(fixture_path("models/stories260K.gguf"), "Once upon a time", 4) +
//                                       experiment(builtin_plugin("ablate"), "stage = \"after_mlp\""));
//   CHECK(run.exit_code == 0);
//   CHECK(run.report.at("outcome") == "ok");
#pragma once

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "support/fixtures.hpp"
#include "support/temp_dir.hpp"

namespace ember::test {

inline std::filesystem::path test_plugin(const std::string& name) {
    return std::filesystem::path(EMBER_TEST_PLUGIN_DIR) / ("lib" + name + ".so");
}
inline std::filesystem::path builtin_plugin(const std::string& name) {
    return std::filesystem::path(EMBER_BUILTIN_PLUGIN_DIR) / ("lib" + name + ".so");
}

inline std::string read_text(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE_MESSAGE(in, "cannot read " << path.string());
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    REQUIRE_MESSAGE(out, "cannot write " << path.string());
}

// A TOML literal string (no escapes; the tests' texts hold no single quote).
inline std::string toml_literal(const std::string& text) {
    REQUIRE(text.find('\'') == std::string::npos);
    return "'" + text + "'";
}

// [model], [prompt], [generation] and [output] (dir "out", beside the config); greedy, one thread.
inline std::string run_config(const std::filesystem::path& model, const std::string& prompt, int max_tokens,
                              const std::string& more = "") {
    return fmt::format("[model]\npath = {}\nthreads = 1\n\n[prompt]\ntext = {}\n\n[generation]\nmax_tokens = {}\n\n"
                       "[output]\ndir = \"out\"\n\n{}\n",
                       toml_literal(model.string()), toml_literal(prompt), max_tokens, more);
}

// One [[experiment]] entry; `config` is the body of its [experiment.config] table.
inline std::string experiment(const std::filesystem::path& plugin, const std::string& config = "") {
    std::string out = fmt::format("[[experiment]]\nplugin = {}\n", toml_literal(plugin.string()));
    if (!config.empty()) out += "[experiment.config]\n" + config + "\n";
    return out + "\n";
}

struct EmberRun {
    int exit_code = -1;
    std::string out;  // stdout: the generated text
    std::string err;  // stderr: the summary, experiment logs, errors
    std::filesystem::path output_dir;
    bool has_report = false;
    boost::json::object report;  // run.json, when it was written

    // The stderr lines that start with `prefix`.
    std::vector<std::string> err_lines(const std::string& prefix) const {
        std::vector<std::string> lines;
        std::istringstream in(err);
        for (std::string line; std::getline(in, line);)
            if (line.rfind(prefix, 0) == 0) lines.push_back(line);
        return lines;
    }
    const boost::json::array& experiments() const { return report.at("experiments").at("experiments").as_array(); }
};

// Writes `config_toml` as DIR/NAME and runs `ember run ARGS NAME` in DIR. `env` is put
// before the command (e.g. "EMBER_DEFAULTS=/x.toml"); without it no defaults file is read.
inline EmberRun ember_run(const TempDir& dir, const std::string& config_toml, const std::string& args = "",
                          const std::string& env = "", const std::string& name = "run.toml") {
    write_text(dir.path() / name, config_toml);
    const auto err_file = dir.path() / "stderr.txt";
    const std::string environment =
        env.empty() ? fmt::format("env -u EMBER_DEFAULTS XDG_CONFIG_HOME={}", shell_quote((dir.path() / "xdg").string()))
                    : "env " + env;
    const auto result = run_command(fmt::format("cd {} && {} {} run {} {} 2> {}", shell_quote(dir.path().string()),
                                                environment, shell_quote(EMBER_BINARY), args, shell_quote(name),
                                                shell_quote(err_file.string())));
    EmberRun run;
    run.exit_code = result.exit_code;
    run.out = result.output;
    run.err = read_text(err_file);
    run.output_dir = dir.path() / "out";
    const auto report = run.output_dir / "run.json";
    if (std::filesystem::exists(report)) {
        run.has_report = true;
        run.report = boost::json::parse(read_text(report)).as_object();
    }
    return run;
}

// The calls an experiment received at a stage, from run.json's timings (0 if none).
inline std::int64_t stage_calls(const boost::json::value& experiment, const char* stage) {
    const auto& timings = experiment.at("timings").as_object();
    const auto it = timings.find(stage);
    return it == timings.end() ? 0 : it->value().at("calls").to_number<std::int64_t>();
}

// A JSON string as std::string (a doctest failure when it is not a string).
inline std::string str(const boost::json::value& v) {
    REQUIRE_MESSAGE(v.is_string(), boost::json::serialize(v) << " is not a string");
    return std::string(v.as_string());
}

inline std::vector<std::int64_t> int_list(const boost::json::value& array) {
    std::vector<std::int64_t> out;
    for (const auto& v : array.as_array()) out.push_back(v.to_number<std::int64_t>());
    return out;
}

// Builds tests/experiments/outside/counter.cpp the way an outside author would: copied
// into DIR and compiled there with exactly `g++ -std=c++20 -shared -fPIC -I<sdk include>
// counter.cpp` (which writes a.out), then named libcounter.so.
inline std::filesystem::path build_outside_counter(const TempDir& dir) {
    std::filesystem::copy_file(EMBER_SOURCE_DIR "/tests/experiments/outside/counter.cpp", dir.path() / "counter.cpp");
    const auto build = run_command(fmt::format("cd {} && g++ -std=c++20 -shared -fPIC -I{} counter.cpp",
                                               shell_quote(dir.path().string()), EMBER_SDK_INCLUDE_DIR),
                                   true);
    REQUIRE_MESSAGE(build.exit_code == 0, build.output);
    const auto library = dir.path() / "libcounter.so";
    std::filesystem::rename(dir.path() / "a.out", library);
    return library;
}

}  // namespace ember::test
