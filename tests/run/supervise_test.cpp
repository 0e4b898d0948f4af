// Rung: smoke (containment). Experiments cannot take Ember down: hostile plugins built
// here as an outside author builds one (`g++ -std=c++20 -shared -fPIC -I<sdk>`) crash,
// abort, exit, hang and write past their tensor inside a supervised worker; through the
// CLI each run ends with exit 1 within a bounded time, a strict-JSON run.json saying
// "crashed" or "timed_out" and naming the stage, and no temporary file or manifest; a
// sweep of good and hostile configs runs every good one and writes its summary.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <boost/json.hpp>

#include <chrono>
#include <regex>

#include "ember_run.hpp"

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;

// The hostile plugins, built once for the whole suite.
struct HostilePlugins {
    TempDir dir;
    fs::path hostile, ctor_crash, ctor_exit, truncated;

    static fs::path build(const TempDir& dir, const std::string& source, const std::string& library,
                          const std::string& flags = "") {
        if (!fs::exists(dir.path() / source))
            fs::copy_file(fs::path(EMBER_TEST_SOURCE_DIR) / "hostile" / source, dir.path() / source);
        const auto built = run_command(fmt::format("cd {} && g++ -std=c++20 -shared -fPIC -I{} {} {} -o {}",
                                                   shell_quote(dir.path().string()), EMBER_SDK_INCLUDE_DIR, flags,
                                                   source, library),
                                       true);
        REQUIRE_MESSAGE(built.exit_code == 0, built.output);
        return dir.path() / library;
    }
    HostilePlugins() {
        hostile = build(dir, "hostile.cpp", "libhostile.so");
        ctor_crash = build(dir, "hostile_ctor.cpp", "libctor-crash.so");
        ctor_exit = build(dir, "hostile_ctor.cpp", "libctor-exit.so", "-DEXIT_ON_LOAD");
        // A real plugin cut short, as a copy interrupted half-way leaves it.
        truncated = dir.path() / "libtruncated.so";
        fs::copy_file(builtin_plugin("finite-check"), truncated);
        fs::resize_file(truncated, fs::file_size(truncated) / 2);
    }
};

const HostilePlugins& plugins() {
    static const HostilePlugins built;
    return built;
}

std::string stories(const std::string& more, int tokens = 4) {
    return run_config(fixture_path("models/stories260K.gguf"), "Once upon a time", tokens, more);
}

std::string hostile(const std::string& config) { return experiment(plugins().hostile, config); }

struct Timed {
    EmberRun run;
    double seconds = 0;
};

Timed timed_run(const TempDir& dir, const std::string& toml) {
    const auto start = Clock::now();
    Timed t{ember_run(dir, toml)};
    t.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return t;
}

// Nothing half-written: no temporary, no manifest; run.json is all there is of Ember's.
void check_nothing_half_written(const fs::path& dir) {
    for (const auto& entry : fs::directory_iterator(dir)) {
        const std::string name = entry.path().filename().string();
        CHECK_MESSAGE(name.find(".tmp.") == std::string::npos, name);
        CHECK_MESSAGE(name != "manifest.json", name);
    }
}

// The one "error: " line of a run.
std::string error_line(const EmberRun& run) {
    const auto errors = run.err_lines("error: ");
    REQUIRE_MESSAGE(errors.size() == 1, run.err);
    return errors[0].substr(7);
}

struct Case {
    const char* what;
    std::string toml;
    std::string outcome;
    std::string message;   // exact, or a regex when `pattern`
    bool pattern = false;
    std::string stage;     // run.json crash.stage.stage ("" = any)
    double bound_s = 20;   // the run ends within this
};

void check_case(const Case& c) {
    CAPTURE(c.what);
    TempDir dir;
    const Timed t = timed_run(dir, c.toml);
    CHECK(t.run.exit_code == 1);
    CHECK(t.seconds < c.bound_s);
    const std::string error = error_line(t.run);
    if (c.pattern) CHECK_MESSAGE(std::regex_match(error, std::regex(c.message)), error);
    else CHECK(error == c.message);
    REQUIRE_MESSAGE(t.run.has_report, t.run.err);  // ember_run parsed it as strict JSON
    CHECK(str(t.run.report.at("outcome")) == c.outcome);
    CHECK(str(t.run.report.at("error")) == error);
    const json::value& stage = t.run.report.at("crash").at("stage");
    if (!c.stage.empty()) {
        REQUIRE(stage.is_object());
        CHECK(str(stage.at("stage")) == c.stage);
    }
    check_nothing_half_written(t.run.output_dir);
}

}  // namespace

TEST_CASE("a segfault, an abort and exit() in plugin code become crashed runs naming the stage") {
    check_case({"segfault in a decode layer stage",
                stories(hostile("act = \"segv\"\nstage = \"after_mlp\"\nphase = \"decode\"\nlayer = 3")), "crashed",
                "experiment 'hostile' crashed (SIGSEGV) in after_mlp (phase=decode, layer=3)", false, "after_mlp"});
    check_case({"abort in the prefill", stories(hostile("act = \"abort\"\nstage = \"before_layer\"\nlayer = 0")),
                "crashed", "experiment 'hostile' crashed (SIGABRT) in before_layer (phase=prefill, layer=0)", false,
                "before_layer"});
    check_case({"exit(0) in a stage", stories(hostile("act = \"exit0\"\nstage = \"after_logits\"\nphase = \"decode\"")),
                "crashed", "experiment 'hostile' crashed (exit status 0) in after_logits (phase=decode)", false,
                "after_logits"});
    check_case({"exit(0) in create", stories(hostile("act = \"exit0\"\nstage = \"create\"")), "crashed",
                "experiment 'hostile' crashed (exit status 0) in create", false, "create"});
    check_case({"quick_exit in destroy", stories(hostile("act = \"quick_exit\"\nstage = \"destroy\"")), "crashed",
                "experiment 'hostile' crashed (exit status 0) in destroy", false, "destroy"});
}

TEST_CASE("a stage stuck past timeout_ms and a run past run_timeout_s are ended by the supervisor") {
    check_case({"an endless loop with timeout_ms = 100",
                stories("[hooks]\ntimeout_ms = 100\n\n" + hostile("act = \"loop\"\nstage = \"after_mlp\"\nlayer = 1")),
                "timed_out",
                R"(experiment 'hostile' timed out after [0-9]+ ms in after_mlp \(phase=prefill, layer=1\) \(hooks\.timeout_ms = 100\))",
                true, "after_mlp", 10});
    check_case({"an endless loop past run_timeout_s = 1",
                stories("[hooks]\nrun_timeout_s = 1\n\n" + hostile("act = \"loop\"\nstage = \"after_logits\"")),
                "timed_out",
                R"(the run timed out after [0-9]+ ms \(hooks\.run_timeout_s = 1\); experiment 'hostile' was in after_logits \(phase=prefill\))",
                true, "after_logits", 10});
}

TEST_CASE("a write 100,000 floats past the tensor, a crashing static constructor, a truncated plugin") {
    // Where the overrun is noticed depends on what it hit: in the stage itself (SIGSEGV), in
    // a later stage the experiment runs (the damage is found on its next call), or outside
    // experiment code (a corrupted heap); either way the run is a crash and says so.
    check_case({"an overrun", stories(hostile("act = \"overrun\"\nstage = \"after_mlp\"\nlayer = 0")), "crashed",
                R"((experiment 'hostile' crashed \(SIG[A-Z]+\) in [a-z_]+ \(phase=(prefill|decode)(, layer=[0-9]+)?\))|)"
                R"((the run's worker crashed \(SIG[A-Z]+\) outside experiment code; .*))",
                true, ""});
    check_case({"a static constructor that segfaults", stories(experiment(plugins().ctor_crash)), "crashed",
                "plugin 'libctor-crash.so' crashed (SIGSEGV) while loading", false, "load"});

    // A truncated library is refused by the loader or crashes it: either is named.
    TempDir dir;
    const Timed t = timed_run(dir, stories(experiment(plugins().truncated)));
    CHECK(t.run.exit_code == 1);
    CHECK(t.seconds < 20);
    const std::string error = error_line(t.run);
    if (t.run.has_report) {
        CHECK(str(t.run.report.at("outcome")) == "crashed");
        CHECK(error.starts_with("plugin 'libtruncated.so' crashed ("));
        check_nothing_half_written(t.run.output_dir);
    } else {
        CHECK_MESSAGE(error.starts_with(fmt::format("plugin '{}'", plugins().truncated.string())), error);
    }
}

TEST_CASE("plugins validate inspects each plugin in a child: a crash or an exit while loading is named") {
    const auto validate = [](const fs::path& plugin) {
        return run_command(fmt::format("{} plugins validate {} 2>&1", shell_quote(EMBER_BINARY), shell_quote(plugin.string())));
    };
    const auto crash = validate(plugins().ctor_crash);
    CHECK(crash.exit_code == 1);
    CHECK(crash.output == fmt::format("error: plugin '{}' crashed (SIGSEGV) while loading\n", plugins().ctor_crash.string()));
    const auto exits = validate(plugins().ctor_exit);
    CHECK(exits.exit_code == 1);
    CHECK(exits.output == fmt::format("error: plugin '{}' crashed (exit status 0) while loading\n", plugins().ctor_exit.string()));
    const auto truncated = validate(plugins().truncated);
    CHECK(truncated.exit_code == 1);
    CHECK(truncated.output.starts_with(fmt::format("error: plugin '{}'", plugins().truncated.string())));
    const auto fine = validate(plugins().hostile);  // loading it is harmless: validate never creates it
    CHECK_MESSAGE(fine.exit_code == 0, fine.output);
    CHECK(fine.output.find("name:        hostile\n") != std::string::npos);

    // ...and as a run: the worker dies while loading, before any output directory exists.
    TempDir dir;
    const auto run = ember_run(dir, stories(experiment(plugins().ctor_exit)));
    CHECK(run.exit_code == 1);
    CHECK(error_line(run) == "plugin 'libctor-exit.so' crashed (exit status 0) while loading");
    REQUIRE(run.has_report);
    CHECK(str(run.report.at("crash").at("stage").at("stage")) == "load");
}

TEST_CASE("a crash replacing an earlier run (--overwrite) leaves its record and no manifest") {
    TempDir dir;
    const auto good = ember_run(dir, stories(experiment(builtin_plugin("finite-check"))));
    REQUIRE_MESSAGE(good.exit_code == 0, good.err);
    REQUIRE(fs::exists(good.output_dir / "manifest.json"));
    // One run per directory: replacing the earlier run takes --overwrite.
    const auto bad = ember_run(dir, stories(hostile("act = \"segv\"\nstage = \"after_mlp\"\nphase = \"decode\"")),
                               "--overwrite");
    CHECK(bad.exit_code == 1);
    REQUIRE(bad.has_report);
    CHECK(str(bad.report.at("outcome")) == "crashed");
    CHECK(str(bad.report.at("crash").at("signal")) == "SIGSEGV");
    CHECK(bad.report.at("crash").at("stage").at("decode_step").to_number<int>() == 1);
    CHECK(bad.report.at("generated").at("tokens").as_array().size() == 1);  // chosen before the crash
    CHECK(bad.out.size() > 0);                                            // ...and printed
    check_nothing_half_written(bad.output_dir);
}

TEST_CASE("ember sweep: good, hostile, good, hostile, good: every good run finishes, the summary lists all five") {
    TempDir dir;
    const fs::path configs = dir.path() / "configs";
    fs::create_directories(configs);
    const std::string crash = hostile("act = \"segv\"\nstage = \"after_mlp\"\nphase = \"decode\"\nlayer = 2");
    const std::string hang = "[hooks]\ntimeout_ms = 50\n\n" + hostile("act = \"loop\"\nstage = \"before_layer\"");
    const std::string kinds[] = {"", crash, "", hang, ""};
    for (int i = 0; i < 5; ++i) {
        std::string toml = stories(experiment(builtin_plugin("finite-check")) + kinds[i], 3);
        toml.replace(toml.find("dir = \"out\""), 11, fmt::format("dir = \"../runs/{}\"", i));
        write_text(configs / fmt::format("{}.toml", i), toml);
    }
    for (const char* jobs : {"1", "2"}) {
        CAPTURE(jobs);
        const fs::path summary = dir.path() / fmt::format("summary-{}.json", jobs);
        const auto start = Clock::now();
        const auto r = run_command(fmt::format("env -u EMBER_DEFAULTS XDG_CONFIG_HOME=/nonexistent {} sweep {} --force "
                                               "--jobs {} --summary {} 2>&1",
                                               shell_quote(EMBER_BINARY), shell_quote(configs.string()), jobs,
                                               shell_quote(summary.string())));
        CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 30);
        CHECK(r.exit_code == 1);
        CHECK_MESSAGE(r.output.find("5 runs: 3 ok, 2 failed, 0 skipped") != std::string::npos, r.output);
        const json::array rows = json::parse(read_text(summary)).as_array();
        REQUIRE(rows.size() == 5);
        for (int i : {0, 2, 4}) CHECK(str(rows[i].at("outcome")) == "ok");
        CHECK(str(rows[1].at("error")) == "experiment 'hostile' crashed (SIGSEGV) in after_mlp (phase=decode, layer=2)");
        CHECK(str(rows[3].at("error")).starts_with("experiment 'hostile' timed out after "));
        for (int i : {1, 3}) {
            const json::value report = json::parse(read_text(dir.path() / "runs" / std::to_string(i) / "run.json"));
            CHECK(str(report.at("outcome")) == (i == 1 ? "crashed" : "timed_out"));
            check_nothing_half_written(dir.path() / "runs" / std::to_string(i));
        }
    }
}

}  // namespace ember::test
