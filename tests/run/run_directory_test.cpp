// Rung: smoke (provenance). One run per directory, through the CLI:
// - a second `ember run` into a directory holding a run is refused naming that run's id;
//   --overwrite replaces it so that no file of the old run survives beside the new one;
// - two processes racing into one directory, 20 times: one wins, the other fails at once
//   and cleanly (naming the holder, or the run that won), and the result verifies;
// - two sweeps over the same configs at once: every result verifies and each run is
//   counted (outcome "ok") by exactly one sweep, the one that made it;
// - SIGINT and SIGTERM during a run remove the temporaries being written and leave no
//   manifest; a later run removes temporaries of dead processes from its directory.
#include <doctest/doctest.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <chrono>
#include <thread>

#include "ember_run.hpp"
#include "record/verify.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const fs::path kModel = fixture_path("models/stories260K.gguf");

// Every name under `dir` (recursively) that is a temporary (NAME.tmp.PID) or a lock record.
std::vector<std::string> leftovers(const fs::path& dir) {
    std::vector<std::string> out;
    std::error_code ec;
    for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::end(it); it.increment(ec)) {
        const std::string name = it->path().filename().string();
        if (name.find(".tmp.") != std::string::npos || name == ".ember-lock" || name.find(".ember-staging.") != std::string::npos)
            out.push_back(it->path().string());
    }
    return out;
}

std::string ember_env(const TempDir& dir) {
    return fmt::format("env -u EMBER_DEFAULTS XDG_CONFIG_HOME={}", shell_quote((dir.path() / "xdg").string()));
}

// A pid that is certainly not alive: a child that has exited and been reaped.
long dead_pid() {
    const pid_t child = ::fork();
    if (child == 0) ::_exit(0);
    int status = 0;
    ::waitpid(child, &status, 0);
    return child;
}

}  // namespace

TEST_CASE("a directory holding a run is refused by its run id, --overwrite replaces it and no old file survives") {
    TempDir dir;
    const auto first = ember_run(dir, run_config(kModel, "Once upon a time", 3, "[tracing]\nenabled = true\n") +
                                          experiment(builtin_plugin("capture")));
    REQUIRE_MESSAGE(first.exit_code == 0, first.err);
    const std::string first_id = str(first.report.at("run_id"));
    REQUIRE(fs::exists(first.output_dir / "trace.jsonl"));
    REQUIRE(fs::exists(first.output_dir / "capture" / "manifest.json"));

    const auto refused = ember_run(dir, run_config(kModel, "Once upon a time", 2));
    CHECK(refused.exit_code == 1);
    CHECK(refused.err.find("holds run " + first_id) != std::string::npos);
    CHECK(refused.err.find("--overwrite") != std::string::npos);
    CHECK(str(refused.report.at("run_id")) == first_id);  // untouched
    CHECK(record::verify_run_directory(first.output_dir).ok());

    // The replacement has no trace and no capture: neither may survive from the first run.
    const auto second = ember_run(dir, run_config(kModel, "Once upon a time", 2), "--overwrite");
    REQUIRE_MESSAGE(second.exit_code == 0, second.err);
    CHECK(str(second.report.at("replaced_run_id")) == first_id);
    CHECK(!fs::exists(second.output_dir / "trace.jsonl"));
    CHECK(!fs::exists(second.output_dir / "capture"));
    CHECK(record::verify_run_directory(second.output_dir).ok());
    CHECK(leftovers(dir.path()).empty());

    // The config key does the same.
    std::string with_key = run_config(kModel, "Once upon a time", 2);
    with_key.replace(with_key.find("dir = \"out\""), 11, "dir = \"out\"\noverwrite = true");
    const auto third = ember_run(dir, with_key);
    CHECK_MESSAGE(third.exit_code == 0, third.err);
    CHECK(str(third.report.at("replaced_run_id")) == str(second.report.at("run_id")));
    CHECK(record::verify_run_directory(third.output_dir).ok());
}

TEST_CASE("two processes racing into one directory, 20 times: one wins, one fails cleanly, the result verifies") {
    TempDir dir;
    // 5 ms at every layer: the two runs overlap.
    write_text(dir.path() / "run.toml",
               run_config(kModel, "Once upon a time", 8) + experiment(test_plugin("slow"), "sleep_ms = 5"));
    for (int round = 0; round < 20; ++round) {
        CAPTURE(round);
        std::error_code ec;
        fs::remove_all(dir.path() / "out", ec);
        const std::string one = fmt::format("cd {} && {} {} run run.toml > /dev/null 2> {}", shell_quote(dir.path().string()),
                                            ember_env(dir), shell_quote(EMBER_BINARY), "err.{}");
        const auto result = run_command(fmt::format("({0}) & ({1}) & wait; cat {2}/err.a {2}/err.b",
                                                    fmt::format(fmt::runtime(one), "a"), fmt::format(fmt::runtime(one), "b"),
                                                    shell_quote(dir.path().string())));
        const std::string a = read_text(dir.path() / "err.a");
        const std::string b = read_text(dir.path() / "err.b");
        const bool a_won = a.find("written to") != std::string::npos;
        const bool b_won = b.find("written to") != std::string::npos;
        CHECK_MESSAGE(a_won != b_won, result.output);
        const std::string& loser = a_won ? b : a;
        const bool clean = loser.find("in use by another ember process (") != std::string::npos ||
                           loser.find("the output directory holds run ") != std::string::npos;
        CHECK_MESSAGE(clean, loser);
        const record::VerifyReport report = record::verify_run_directory(dir.path() / "out");
        CHECK(report.ok());
        CHECK(leftovers(dir.path() / "out").empty());
    }
}

TEST_CASE("two sweeps over the same configs: every result verifies, each run counted by the sweep that made it") {
    TempDir dir;
    fs::create_directories(dir.path() / "configs");
    constexpr int kConfigs = 6;
    for (int i = 0; i < kConfigs; ++i) {
        write_text(dir.path() / "configs" / fmt::format("c{}.toml", i),
                   fmt::format("[model]\npath = {}\nthreads = 1\nroute = \"reference\"\n[prompt]\ntext = 'Once upon a time {}'\n"
                               "[generation]\nmax_tokens = 6\n[output]\ndir = \"../runs/c{}\"\n",
                               toml_literal(kModel.string()), i, i));
    }
    const std::string one = fmt::format("{} {} sweep --jobs 2 --summary {{}} {} > /dev/null 2>&1", ember_env(dir),
                                        shell_quote(EMBER_BINARY), shell_quote((dir.path() / "configs").string()));
    const fs::path sa = dir.path() / "a.json", sb = dir.path() / "b.json";
    run_command(fmt::format("({}) & ({}) & wait", fmt::format(fmt::runtime(one), shell_quote(sa.string())),
                            fmt::format(fmt::runtime(one), shell_quote(sb.string()))));
    const json::array a = json::parse(read_text(sa)).as_array();
    const json::array b = json::parse(read_text(sb)).as_array();
    REQUIRE(a.size() == kConfigs);
    REQUIRE(b.size() == kConfigs);
    for (int i = 0; i < kConfigs; ++i) {
        CAPTURE(i);
        const std::string oa = str(a[i].at("outcome")), ob = str(b[i].at("outcome"));
        CHECK(((oa == "ok" && ob == "skipped") || (oa == "skipped" && ob == "ok")));
        const fs::path out = dir.path() / "runs" / fmt::format("c{}", i);
        const record::VerifyReport report = record::verify_run_directory(out);
        CHECK(report.ok());
        // The run in the directory is the one the counting sweep reports.
        const std::string maker = oa == "ok" ? str(a[i].at("run_id")) : str(b[i].at("run_id"));
        CHECK(report.run_id == maker);
    }
}

TEST_CASE("SIGINT and SIGTERM remove the temporaries being written and leave no manifest") {
    for (const int signal_number : {SIGINT, SIGTERM}) {
        CAPTURE(signal_number);
        TempDir dir;
        // Slow (50 ms at every layer) with the journal open for writing the whole run.
        write_text(dir.path() / "run.toml", run_config(kModel, "Once upon a time", 64, "[tracing]\nenabled = true\n") +
                                                experiment(test_plugin("slow")));
        const pid_t child = ::fork();
        if (child == 0) {
            ::chdir(dir.path().c_str());
            ::setenv("XDG_CONFIG_HOME", (dir.path() / "xdg").c_str(), 1);
            ::unsetenv("EMBER_DEFAULTS");
            ::execl(EMBER_BINARY, EMBER_BINARY, "run", "run.toml", static_cast<char*>(nullptr));
            ::_exit(127);
        }
        // Wait until the journal's temporary exists, then interrupt.
        const fs::path out = dir.path() / "out";
        bool writing = false;
        for (int i = 0; i < 200 && !writing; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            writing = !leftovers(out).empty();
        }
        CHECK(writing);
        ::kill(child, signal_number);
        int status = 0;
        ::waitpid(child, &status, 0);
        CHECK(WIFSIGNALED(status));
        CHECK(WTERMSIG(status) == signal_number);
        CHECK_MESSAGE(leftovers(out).empty(), leftovers(out).front());
        CHECK(!fs::exists(out / "manifest.json"));
        // Nothing of the interrupted run is left to refuse: a new run takes the directory.
        const auto again = ember_run(dir, run_config(kModel, "Once upon a time", 2));
        CHECK_MESSAGE(again.exit_code == 0, again.err);
    }
}

TEST_CASE("SIGTERM during ember synth removes the model's temporary and writes no model") {
    TempDir dir;
    const fs::path model = dir.path() / "big.gguf";
    const pid_t child = ::fork();
    if (child == 0) {
        ::execl(EMBER_BINARY, EMBER_BINARY, "synth", "--shape", "llama-1b", "--type", "f16", "--vocab-from",
                kModel.c_str(), model.c_str(), static_cast<char*>(nullptr));
        ::_exit(127);
    }
    bool writing = false;
    for (int i = 0; i < 1500 && !writing; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        writing = !leftovers(dir.path()).empty();
    }
    CHECK(writing);
    ::kill(child, SIGTERM);
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGTERM);
    CHECK_MESSAGE(leftovers(dir.path()).empty(), leftovers(dir.path()).front());
    CHECK(!fs::exists(model));
}

TEST_CASE("a run removes temporaries of dead processes from its directory, and keeps those of live ones") {
    TempDir dir;
    const fs::path out = dir.path() / "out";
    fs::create_directories(out / "capture");
    const long dead = dead_pid();
    write_text(out / fmt::format("run.json.tmp.{}", dead), "half");
    write_text(out / "capture" / fmt::format("after_layer.layer0.prefill.npy.tmp.{}", dead), "half");
    const auto run = ember_run(dir, run_config(kModel, "Once upon a time", 2) + experiment(builtin_plugin("capture")));
    REQUIRE_MESSAGE(run.exit_code == 0, run.err);
    CHECK(leftovers(out).empty());
    CHECK(record::verify_run_directory(out).ok());

    // A temporary of a live process is another writer's: the directory is not empty.
    TempDir live;
    fs::create_directories(live.path() / "out");
    write_text(live.path() / "out" / fmt::format("x.npy.tmp.{}", ::getpid()), "mine");
    const auto refused = ember_run(live, run_config(kModel, "Once upon a time", 2));
    CHECK(refused.exit_code == 1);
    CHECK(refused.err.find("holds files of no recorded run") != std::string::npos);
}

}  // namespace ember::test
