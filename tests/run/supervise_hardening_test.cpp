// Rung: smoke (containment). Supervision that trusts no one (issues 24 and 25):
// - a dataset run (and a sweep of dataset runs) whose experiment segfaults, aborts,
//   exits 0 or loops runs in the supervised worker: exit 1, a strict-JSON run.json naming
//   the experiment, the stage and the sample, the sweep goes on, and the same config run
//   again resumes the samples already written;
// - a plugin that writes to the worker's control pipe (a forged "failed" message, bytes
//   that are no frame) is not believed: the run is "crashed" with the worker's real end;
// - a child a plugin forks does not outlive the run (it neither holds the directory's
//   lock nor writes into the sealed directory);
// - SIGTERM/SIGINT to ember reach a worker that ignores them, SIGKILL follows the grace
//   period, run.json says "interrupted";
// - a descriptor whose struct_size ends inside a function pointer keeps whole fields only;
// - `plugins validate` on a plugin whose static constructor never returns ends in time.
#include <doctest/doctest.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <chrono>
#include <thread>

#include "ember_run.hpp"
#include "experiments/plugin_library.hpp"

extern char** environ;

namespace ember::test {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;

fs::path stories() { return fixture_path("models/stories260K.gguf"); }

// Four samples, ids a-d; with batch_tokens = 1 each is a batch (a resume point) of its own.
void write_dataset(const fs::path& file) {
    write_text(file, "{\"id\": \"a\", \"text\": \"Once upon a time\"}\n{\"id\": \"b\", \"text\": \"there was\"}\n"
                     "{\"id\": \"c\", \"text\": \"a little girl\"}\n{\"id\": \"d\", \"text\": \"named Lily\"}\n");
}

// A dataset run config in DIR (output DIR/NAME) with `more` appended (experiments, [hooks]).
fs::path dataset_config(const fs::path& dir, const std::string& name, const std::string& more) {
    const fs::path config = dir / (name + ".toml");
    write_text(config, fmt::format("[model]\npath = {}\nroute = \"reference\"\nthreads = 1\n\n[dataset]\npath = {}\n"
                                   "batch_tokens = 1\n\n[output]\ndir = {}\nstages = [\"after_layer\"]\nlayers = [0]\n\n{}\n",
                                   toml_literal(stories().string()), toml_literal((dir / "data.jsonl").string()),
                                   toml_literal((dir / name).string()), more));
    return config;
}

// The saboteur acting at the third sample's after_mlp of layer 0, while `trigger` exists.
std::string saboteur_at_third_sample(const std::string& act, const fs::path& trigger, const std::string& more = "") {
    return experiment(test_plugin("saboteur"),
                      fmt::format("act = \"{}\"\nstage = \"after_mlp\"\nlayer = 0\ncalls = 3\ntrigger = {}\n{}", act,
                                  toml_literal(trigger.string()), more));
}

CommandResult ember(const std::string& args) {
    return run_command(fmt::format("env -u EMBER_DEFAULTS XDG_CONFIG_HOME=/nonexistent {} {} 2>&1",
                                   shell_quote(EMBER_BINARY), args));
}

json::object read_json(const fs::path& file) { return json::parse(read_text(file)).as_object(); }

// The one "error: " line of an output.
std::string error_line(const std::string& output) {
    const std::size_t at = output.rfind("error: ");
    REQUIRE_MESSAGE(at != std::string::npos, output);
    return output.substr(at + 7, output.find('\n', at) - at - 7);
}

// Every file of a finished dataset run but its manifest.
std::vector<std::pair<std::string, std::string>> arrays_and_records(const fs::path& dir) {
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().filename() != "manifest.json") out.emplace_back(e.path().filename().string(), read_text(e.path()));
    std::sort(out.begin(), out.end());
    return out;
}

struct DatasetCase {
    const char* act;
    std::string hooks;        // a [hooks] table
    std::string outcome;
    std::string what;         // the error after "DATA:3: sample c: experiment 'saboteur' "
};

}  // namespace

TEST_CASE("a dataset run whose experiment crashes, exits or loops: exit 1, a record naming the sample, a re-run resumes") {
    const DatasetCase cases[] = {
        {"segv", "", "crashed", "crashed (SIGSEGV) in after_mlp (phase=prefill, layer=0)"},
        {"abort", "", "crashed", "crashed (SIGABRT) in after_mlp (phase=prefill, layer=0)"},
        {"exit0", "", "crashed", "crashed (exit status 0) in after_mlp (phase=prefill, layer=0)"},
        {"loop", "[hooks]\ntimeout_ms = 100\n\n", "timed_out", "timed out after "},
    };
    TempDir dir;
    write_dataset(dir.path() / "data.jsonl");
    const fs::path trigger = dir.path() / "trigger";
    const fs::path clean = dataset_config(dir.path(), "clean", "");
    REQUIRE(ember(fmt::format("extract {}", shell_quote(clean.string()))).exit_code == 0);
    for (const DatasetCase& c : cases) {
        CAPTURE(c.act);
        write_text(trigger, "");
        const fs::path config = dataset_config(dir.path(), c.act, c.hooks + saboteur_at_third_sample(c.act, trigger));
        const fs::path out = dir.path() / c.act;
        const auto start = Clock::now();
        const CommandResult crashed = ember(fmt::format("extract {}", shell_quote(config.string())));
        CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 20);
        CHECK_MESSAGE(crashed.exit_code == 1, crashed.output);
        const std::string error = error_line(crashed.output);
        const std::string sample = fmt::format("{}:3: sample c: experiment 'saboteur' ", (dir.path() / "data.jsonl").string());
        CHECK_MESSAGE(error.starts_with(sample + c.what), error);
        REQUIRE(fs::exists(out / "run.json"));
        const json::object record = read_json(out / "run.json");
        CHECK(str(record.at("kind")) == "ember.dataset_run");
        CHECK(str(record.at("outcome")) == c.outcome);
        CHECK(str(record.at("error")) == error);
        const json::value& stage = record.at("crash").at("stage");
        CHECK(str(stage.at("experiment")) == "saboteur");
        CHECK(str(stage.at("stage")) == "after_mlp");
        CHECK(str(stage.at("sample").at("id")) == "c");
        CHECK(stage.at("sample").at("index").to_number<int>() == 2);
        CHECK(!fs::exists(out / "manifest.json"));
        CHECK(fs::exists(out / "progress.json"));  // samples a and b are a resume point

        // The same config again (the plugin harmless now): it resumes after sample b and
        // writes what the run without the plugin wrote.
        fs::remove(trigger);
        const CommandResult resumed = ember(fmt::format("extract {} --json", shell_quote(config.string())));
        REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.output);
        const json::object summary = json::parse(resumed.output.substr(resumed.output.find('{'))).as_object();
        CHECK(summary.at("resumed_samples").to_number<int>() == 2);
        CHECK(summary.at("samples").to_number<int>() == 4);
        CHECK(!fs::exists(out / "run.json"));
        CHECK(arrays_and_records(out) == arrays_and_records(dir.path() / "clean"));
        CHECK(ember(fmt::format("verify {}", shell_quote(out.string()))).exit_code == 0);
    }
}

TEST_CASE("ember extract of a single-prompt config with experiments is refused, not run without them") {
    TempDir dir;
    write_text(dir.path() / "one.toml",
               run_config(stories(), "Once upon a time", 1) + experiment(test_plugin("saboteur"), "act = \"segv\""));
    const CommandResult r = ember(fmt::format("extract {}", shell_quote((dir.path() / "one.toml").string())));
    CHECK(r.exit_code == 2);
    CHECK_MESSAGE(r.output.find("composes 1 experiment(s) ([[experiment]]): a single-prompt run with experiments is "
                                "`ember run ") != std::string::npos,
                  r.output);
    CHECK(!fs::exists(dir.path() / "out"));
}

TEST_CASE("a sweep of dataset runs: a crashing one is that run's failure, the others finish") {
    TempDir dir;
    write_dataset(dir.path() / "data.jsonl");
    const fs::path trigger = dir.path() / "trigger";
    write_text(trigger, "");
    const fs::path configs = dir.path() / "configs";
    fs::create_directories(configs);
    dataset_config(configs, "0", experiment(builtin_plugin("finite-check")));
    dataset_config(configs, "1", saboteur_at_third_sample("segv", trigger));
    dataset_config(configs, "2", experiment(builtin_plugin("finite-check")));
    write_dataset(configs / "data.jsonl");
    const fs::path summary = dir.path() / "summary.json";
    const CommandResult r = ember(fmt::format("sweep {} --force --summary {}", shell_quote(configs.string()),
                                              shell_quote(summary.string())));
    CHECK(r.exit_code == 1);
    CHECK_MESSAGE(r.output.find("3 runs: 2 ok, 1 failed, 0 skipped") != std::string::npos, r.output);
    const json::array rows = json::parse(read_text(summary)).as_array();
    REQUIRE(rows.size() == 3);
    CHECK(str(rows[0].at("outcome")) == "ok");
    CHECK(str(rows[2].at("outcome")) == "ok");
    CHECK(str(rows[1].at("error")) ==
          fmt::format("{}:3: sample c: experiment 'saboteur' crashed (SIGSEGV) in after_mlp (phase=prefill, layer=0)",
                      (configs / "data.jsonl").string()));
    CHECK(str(read_json(configs / "1" / "run.json").at("outcome")) == "crashed");
}

TEST_CASE("forged control messages are not believed: the run is crashed with the worker's real end") {
    const std::string base = run_config(stories(), "Once upon a time", 3);
    {
        TempDir dir;
        const EmberRun run = ember_run(dir, base + experiment(test_plugin("saboteur"),
                                                              "act = \"forge_failed\"\nstage = \"after_mlp\"\nlayer = 0"));
        CHECK(run.exit_code == 1);
        CHECK_MESSAGE(run.err.find("error: all is well") == std::string::npos, run.err);  // the forged message
        REQUIRE_MESSAGE(run.has_report, run.err);
        CHECK(str(run.report.at("outcome")) == "crashed");
        CHECK(str(run.report.at("crash").at("signal")) == "SIGSEGV");
        CHECK(str(run.report.at("error")).starts_with("experiment 'saboteur' crashed (SIGSEGV) in after_mlp (phase=prefill, layer=0)"));
    }
    {
        TempDir dir;
        const EmberRun run =
            ember_run(dir, base + experiment(test_plugin("saboteur"), "act = \"garbage\"\nstage = \"after_mlp\"\nlayer = 0"));
        CHECK(run.exit_code == 1);
        REQUIRE_MESSAGE(run.has_report, run.err);
        CHECK(str(run.report.at("outcome")) == "crashed");
        CHECK_MESSAGE(str(run.report.at("error")).find("its control channel was not believed") != std::string::npos,
                      str(run.report.at("error")));
        CHECK(!fs::exists(run.output_dir / "manifest.json"));
    }
}

TEST_CASE("a child a plugin forks does not outlive the run: no lock held, nothing written into the sealed directory") {
    // Containment rung. In the worker's process group, out of it (a session or a group of
    // its own: the group kill misses it; this process is a subreaper and ends it), and a
    // daemon's double fork (the grandchild's parent is gone before the run ends).
    for (const std::string act : {"fork_orphan", "fork_orphan_setsid", "fork_orphan_setpgid", "fork_orphan_daemon"}) {
        CAPTURE(act);
        TempDir dir;
        const fs::path orphan = dir.path() / "out" / "orphan.txt";
        const EmberRun run = ember_run(
            dir, run_config(stories(), "Once upon a time", 2) +
                     experiment(test_plugin("saboteur"),
                                fmt::format("act = \"{}\"\nstage = \"create\"\norphan_ms = 1500\norphan_path = {}", act,
                                            toml_literal(orphan.string()))));
        REQUIRE_MESSAGE(run.exit_code == 0, run.err);
        // The child inherited the worker's descriptor of the directory's lock.
        const int fd = ::open(run.output_dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        REQUIRE(fd >= 0);
        CHECK_MESSAGE(::flock(fd, LOCK_EX | LOCK_NB) == 0, "the directory's lock is still held after the run");
        ::close(fd);
        std::this_thread::sleep_for(std::chrono::milliseconds(2000));
        CHECK(!fs::exists(orphan));
        CHECK(ember(fmt::format("verify {}", shell_quote(run.output_dir.string()))).exit_code == 0);
    }
}

namespace {

// `ember ARGS` started in DIR with its output in DIR/ember.out, for a test that signals it.
pid_t start_ember(const fs::path& dir, const std::vector<std::string>& args) {
    std::vector<std::string> strings{"/bin/sh", "-c",
                                     fmt::format("cd {} && exec env -u EMBER_DEFAULTS XDG_CONFIG_HOME=/nonexistent {} ",
                                                 shell_quote(dir.string()), shell_quote(EMBER_BINARY))};
    for (const std::string& a : args) strings[2] += shell_quote(a) + " ";
    strings[2] += "> ember.out 2>&1";
    std::vector<char*> argv;
    for (auto& s : strings) argv.push_back(s.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    REQUIRE(::posix_spawn(&pid, "/bin/sh", nullptr, nullptr, argv.data(), environ) == 0);
    return pid;
}

bool wait_for_file(const fs::path& file, double seconds) {
    const auto until = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < until) {
        if (fs::exists(file) && fs::file_size(file) > 0) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

// The wait status of `pid`, or nullopt when it is still running after `seconds` (then killed).
std::optional<int> wait_with_deadline(pid_t pid, double seconds) {
    const auto until = Clock::now() + std::chrono::duration<double>(seconds);
    while (Clock::now() < until) {
        int status = 0;
        if (::waitpid(pid, &status, WNOHANG) == pid) return status;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    return std::nullopt;
}

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0; }

// Signals `ember` once the plugin (which ignores SIGINT/SIGTERM) wrote its pid; the run
// ends within the grace period and a margin, by the signal, and the plugin's process is gone.
void interrupt(pid_t ember_pid, int signal_number, const fs::path& pid_file) {
    REQUIRE_MESSAGE(wait_for_file(pid_file, 20), "the plugin never started looping");
    const pid_t plugin = static_cast<pid_t>(std::stol(read_text(pid_file)));
    const auto start = Clock::now();
    REQUIRE(::kill(ember_pid, signal_number) == 0);
    const std::optional<int> status = wait_with_deadline(ember_pid, 10);
    if (!status) ::kill(plugin, SIGKILL);
    REQUIRE_MESSAGE(status.has_value(), "ember was still running 10 s after the signal");
    CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 6);
    CHECK(WIFSIGNALED(*status));
    if (WIFSIGNALED(*status)) CHECK(WTERMSIG(*status) == signal_number);
    CHECK_MESSAGE(!process_alive(plugin), "the worker that ignored the signal is still running");
}

}  // namespace

TEST_CASE("SIGTERM to ember reaches a worker that ignores it, SIGKILL follows, run.json says interrupted") {
    TempDir dir;
    const fs::path pid_file = dir.path() / "plugin.pid";
    write_text(dir.path() / "run.toml",
               run_config(stories(), "Once upon a time", 3) +
                   experiment(test_plugin("saboteur"), fmt::format("act = \"ignore_signals\"\nstage = \"after_mlp\"\n"
                                                                  "layer = 0\npid_file = {}",
                                                                  toml_literal(pid_file.string()))));
    interrupt(start_ember(dir.path(), {"run", "run.toml"}), SIGTERM, pid_file);
    REQUIRE(fs::exists(dir.path() / "out" / "run.json"));
    const json::object report = read_json(dir.path() / "out" / "run.json");
    CHECK(str(report.at("outcome")) == "interrupted");
    CHECK(str(report.at("crash").at("interrupted_by")) == "SIGTERM");
    CHECK(str(report.at("crash").at("signal")) == "SIGKILL");  // it ignored SIGTERM: killed after the grace period
    CHECK_MESSAGE(str(report.at("error")).starts_with("the run was interrupted (SIGTERM); experiment 'saboteur' was in "
                                                      "after_mlp (phase=prefill, layer=0); its worker was still running"),
                  str(report.at("error")));
    CHECK(!fs::exists(dir.path() / "out" / "manifest.json"));
}

TEST_CASE("SIGINT to a dataset run: interrupted at its sample, and the re-run resumes") {
    TempDir dir;
    write_dataset(dir.path() / "data.jsonl");
    const fs::path trigger = dir.path() / "trigger", pid_file = dir.path() / "plugin.pid";
    write_text(trigger, "");
    const fs::path config = dataset_config(
        dir.path(), "out", saboteur_at_third_sample("ignore_signals", trigger, "pid_file = " + toml_literal(pid_file.string())));
    interrupt(start_ember(dir.path(), {"extract", config.string()}), SIGINT, pid_file);
    const json::object record = read_json(dir.path() / "out" / "run.json");
    CHECK(str(record.at("outcome")) == "interrupted");
    CHECK(str(record.at("crash").at("interrupted_by")) == "SIGINT");
    CHECK(str(record.at("crash").at("stage").at("sample").at("id")) == "c");
    fs::remove(trigger);
    const CommandResult resumed = ember(fmt::format("extract {} --json", shell_quote(config.string())));
    REQUIRE_MESSAGE(resumed.exit_code == 0, resumed.output);
    CHECK(json::parse(resumed.output.substr(resumed.output.find('{'))).at("resumed_samples").to_number<int>() == 2);
}

TEST_CASE("a descriptor whose struct_size ends inside a function pointer keeps whole fields only") {
    // Its size ends 4 bytes into after_layer: the host must not see half a pointer.
    const auto plugin = experiments::PluginLibrary::load(test_plugin("abi-mid-field"));
    CHECK(plugin->declared_size() == offsetof(ember_plugin_descriptor, after_layer) + 4);
    CHECK(!plugin->implements(experiments::StageId::AfterLayer));
    CHECK(plugin->implemented_stages().empty());
    // ...and a run with it completes: nothing calls the half-declared stage.
    TempDir dir;
    const EmberRun run = ember_run(dir, run_config(stories(), "Once upon a time", 2) + experiment(test_plugin("abi-mid-field")));
    CHECK_MESSAGE(run.exit_code == 0, run.err);
}

TEST_CASE("plugins validate ends a plugin whose static constructor never returns") {
    const auto start = Clock::now();
    const CommandResult r = ember(fmt::format("plugins validate --timeout-s 1 {}", shell_quote(test_plugin("ctor-loop").string())));
    CHECK(std::chrono::duration<double>(Clock::now() - start).count() < 5);
    CHECK(r.exit_code == 1);
    CHECK(r.output == fmt::format("error: plugin '{}' was still loading after 1 s (its static constructors?)\n",
                                  test_plugin("ctor-loop").string()));
    CHECK(ember("plugins validate --timeout-s 0 x.so").exit_code == 2);
}

}  // namespace ember::test
