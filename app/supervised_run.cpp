#include "supervised_run.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "child_process.hpp"
#include "common/atomic_file.hpp"
#include "common/dir_lock.hpp"
#include "common/error.hpp"
#include "common/json_pretty.hpp"
#include "experiments/plugin_library.hpp"
#include "experiments/stage_record.hpp"
#include "extract/manifest.hpp"
#include "extract/run_directory.hpp"
#include "generation_output.hpp"
#include "worker_protocol.hpp"

namespace ember::app {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

// The worker's descriptors: the input memfd, the stage record, the control pipe.
constexpr int kInputFd = 3;
constexpr int kRecordFd = 4;
constexpr int kControlFd = 5;
// How often the supervisor looks at the clock: when a limit is set, well within the 1 s
// grace past timeout_ms; otherwise rarely (only to notice a worker that ended while
// something it started holds the pipe open).
constexpr int kPollMsWithLimits = 100;
constexpr int kPollMsWithoutLimits = 500;

[[noreturn]] void fail_errno(const char* what) { throw Error(fmt::format("{}: {}", what, std::strerror(errno))); }

int memfd_with(const std::string& bytes) {
    const int fd = ::memfd_create("ember-worker-input", MFD_CLOEXEC);
    if (fd < 0) fail_errno("cannot create the worker's input");
    for (std::size_t done = 0; done < bytes.size();) {
        const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            ::close(fd);
            fail_errno("cannot write the worker's input");
        }
        done += static_cast<std::size_t>(n);
    }
    return fd;
}

std::string read_all(int fd) {
    std::string out;
    char buffer[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) fail_errno("cannot read");
        if (n == 0) return out;
        out.append(buffer, static_cast<std::size_t>(n));
    }
}

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() { reset(); }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }
    void reset() {
        if (fd_ >= 0) ::close(fd_);
        fd_ = -1;
    }

private:
    int fd_;
};

// The worker process: killed and reaped when the supervisor leaves early (an exception).
class Worker {
public:
    explicit Worker(pid_t pid) : pid_(pid) {}
    ~Worker() {
        if (status_) return;
        ::kill(pid_, SIGKILL);
        try {
            wait_for(pid_);
        } catch (...) {
        }
    }
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    pid_t pid() const { return pid_; }
    void kill() { ::kill(pid_, SIGKILL); }
    // True once it ended (reaped without blocking).
    bool ended() {
        if (status_) return true;
        int status = 0;
        const pid_t r = ::waitpid(pid_, &status, WNOHANG);
        if (r == pid_) status_ = status;
        return status_.has_value();
    }
    int wait() {
        if (!status_) status_ = wait_for(pid_);
        return *status_;
    }

private:
    pid_t pid_;
    std::optional<int> status_;
};

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// How the worker ended when it did not say so itself.
struct Crash {
    std::string outcome;  // "crashed" | "timed_out"
    std::string message;
    std::optional<int> signal;
    std::optional<int> exit_status;
    std::string limit;  // timed_out: "hooks.timeout_ms" | "hooks.run_timeout_s"
    double elapsed_ms = 0;
};

std::string experiment_name(const experiments::StageRecord& r) { return r.experiment; }

Crash describe_crash(const experiments::StageRecord& record, int status, const std::string& timed_out_limit,
                     const config::HooksSection& hooks, double elapsed_ms, double stage_ms) {
    Crash c;
    c.elapsed_ms = elapsed_ms;
    if (WIFSIGNALED(status)) c.signal = WTERMSIG(status);
    if (WIFEXITED(status)) c.exit_status = WEXITSTATUS(status);
    const std::string where = record.where();
    const bool in_call = record.active.load() != 0;
    const std::string name = experiment_name(record);
    if (!timed_out_limit.empty()) {
        c.outcome = "timed_out";
        c.limit = timed_out_limit;
        if (timed_out_limit == "hooks.timeout_ms") {
            c.message = fmt::format("experiment '{}' timed out after {:.0f} ms in {} (hooks.timeout_ms = {})", name,
                                    stage_ms, where, hooks.timeout_ms);
        } else {
            c.message = fmt::format("the run timed out after {:.0f} ms (hooks.run_timeout_s = {})", elapsed_ms,
                                    hooks.run_timeout_s);
            if (!where.empty())
                c.message += fmt::format("; experiment '{}' was {} {}", name, in_call ? "in" : "last in", where);
        }
        return c;
    }
    c.outcome = "crashed";
    const std::string how = end_text(status);
    if (where.empty()) {
        c.message = fmt::format("the run's worker crashed ({}) before any experiment code ran", how);
    } else if (std::string_view(record.stage) == "load") {
        c.message = fmt::format("plugin '{}' crashed ({}) while loading", name, how);
    } else if (in_call) {
        c.message = fmt::format("experiment '{}' crashed ({}) in {}", name, how, where);
    } else {
        c.message = fmt::format("the run's worker crashed ({}) outside experiment code; experiment '{}' last returned from {}",
                                how, name, where);
    }
    return c;
}

json::value stage_json(const experiments::StageRecord& r) {
    if (!r.entered) return nullptr;
    return json::object{
        {"experiment", std::string(r.experiment)},
        {"stage", std::string(r.stage)},
        {"phase", r.has_phase ? json::value(hooks::phase_name(static_cast<hooks::Phase>(r.phase))) : json::value(nullptr)},
        {"layer", r.has_layer ? json::value(r.layer) : json::value(nullptr)},
        {"decode_step", r.has_phase ? json::value(r.step) : json::value(nullptr)},
        {"in_call", r.active.load() != 0},
    };
}

// Removes what the worker `pid` may have left half-written beside the trace journal when
// it lies outside the output directory (the output directory itself is taken over by
// write_crash_report).
void remove_leftovers(const config::RunConfig& config, pid_t pid) {
    const std::string suffix = fmt::format(".tmp.{}", pid);
    std::error_code ec;
    const fs::path dir = config.tracing.path.parent_path();
    if (!fs::is_directory(dir, ec)) return;
    for (const auto& entry : fs::directory_iterator(dir, ec))
        if (entry.path().filename().string().ends_with(suffix)) fs::remove(entry.path(), ec);
}

void write_crash_report(const config::RunConfig& config, const LoadedModel& model, const std::string& run_id,
                        const Crash& crash, const experiments::StageRecord& record,
                        const std::vector<std::int32_t>& generated, const Lifecycle& lifecycle, double total_ms,
                        bool overwrite) {
    // The worker is dead, so its lock is gone. The crash record replaces what it left (a
    // crashed run is never sealed; its half-written files, staging directory and
    // temporaries go), unless the directory holds another, earlier run it was not allowed
    // to replace (the worker died before it took the directory).
    const std::string held = extract::recorded_run_id(config.output.dir);
    if (!held.empty() && held != run_id && !overwrite && !config.output.overwrite)
        throw Error(fmt::format("{} holds run {}, which this run was not to replace", config.output.dir.string(), held));
    extract::RunDirectoryWriter directory(config.output.dir, {true, fmt::format("run {} (its crash record)", run_id), {}, {}});
    const json::object report{
        {"schema_version", 1},
        {"kind", "ember.run"},
        {"run_id", run_id},
        {"outcome", crash.outcome},
        {"error", crash.message},
        {"crash",
         {{"signal", crash.signal ? json::value(signal_name(*crash.signal)) : json::value(nullptr)},
          {"signal_number", crash.signal ? json::value(*crash.signal) : json::value(nullptr)},
          {"exit_status", crash.exit_status ? json::value(*crash.exit_status) : json::value(nullptr)},
          {"limit", crash.limit.empty() ? json::value(nullptr) : json::value(crash.limit)},
          {"stage", stage_json(record)}}},
        {"config_file", config.source.string()},
        {"config_hash", config::config_hash(config)},
        {"config", config::to_json(config)},
        {"model", model_json(model)},
        {"route", config.model.route},
        {"kv_type", config.model.kv_type},
        {"hooks", "active"},
        {"generated", {{"tokens", json::array(generated.begin(), generated.end())}, {"stop_reason", nullptr}}},
        {"timings", {{"load_ms", model.load_ms}, {"total_ms", total_ms}}},
        {"lifecycle", lifecycle_json(lifecycle)},
    };
    write_file_atomically(directory.dir() / "run.json", pretty_json(report) + "\n");
    directory.publish();
}

// One control line from the worker: "t ID" or "KIND {json}".
struct Final {
    std::string kind;  // done | failed | refused
    json::value body;
};

}  // namespace

RunOutcome supervise_run(const config::RunConfig& config, const LoadedModel& model, const RunOptions& options) {
    const auto start = Clock::now();
    const std::string run_id = options.run_id.empty() ? make_run_id() : options.run_id;
    experiments::SharedStageRecord shared = experiments::SharedStageRecord::create();
    const experiments::StageRecord& record = shared.record();
    const WorkerInput input{config,       config::config_hash(config), run_id,
                            model.path.string(), model.sha256, model.load_ms,
                            options.overwrite,   options.skip_if_current};
    const Fd input_fd(memfd_with(json::serialize(worker_input_json(input))));
    const auto [read_end, write_end] = cloexec_pipe();
    Fd control(read_end);
    Fd worker_end(write_end);
    Worker worker(spawn_self({"run", "--worker"},
                             {{input_fd.get(), kInputFd}, {shared.fd(), kRecordFd}, {worker_end.get(), kControlFd}},
                             STDERR_FILENO));
    worker_end.reset();
    // SIGINT/SIGTERM reach the worker, which removes its temporaries (common/atomic_file.hpp).
    install_signal_cleanup();
    forward_signals_to(worker.pid());

    const std::int64_t stage_limit_ns =
        config.hooks.timeout_ms == 0 ? 0 : (std::int64_t{config.hooks.timeout_ms} + kTimeoutGraceMs) * 1'000'000;
    const std::int64_t run_limit_ns = std::int64_t{config.hooks.run_timeout_s} * 1'000'000'000;
    const std::int64_t started_ns = now_ns();

    std::vector<std::int32_t> generated;
    Lifecycle lifecycle;  // what the worker said its experiments changed ("l" line)
    std::optional<Final> final;
    std::string timed_out;  // the limit that ended it
    double stage_ms = 0;
    std::string pending;
    bool open = true;
    while (open) {
        pollfd p{control.get(), POLLIN, 0};
        const int ready = ::poll(&p, 1, stage_limit_ns > 0 || run_limit_ns > 0 ? kPollMsWithLimits : kPollMsWithoutLimits);
        if (ready < 0 && errno != EINTR) fail_errno("cannot wait for the worker");
        if (ready > 0) {
            char buffer[4096];
            const ssize_t n = ::read(control.get(), buffer, sizeof buffer);
            if (n < 0 && errno != EINTR) fail_errno("cannot read from the worker");
            if (n == 0) open = false;
            if (n > 0) pending.append(buffer, static_cast<std::size_t>(n));
            for (std::size_t eol; (eol = pending.find('\n')) != std::string::npos; pending.erase(0, eol + 1)) {
                const std::string_view line(pending.data(), eol);
                if (line.starts_with("t ")) {
                    const std::int32_t token = std::stoi(std::string(line.substr(2)));
                    generated.push_back(token);
                    if (options.on_token) options.on_token(token);
                    continue;
                }
                if (line.starts_with("l ")) {
                    boost::system::error_code ec;
                    const json::value body = json::parse(line.substr(2), ec);
                    try {
                        if (!ec) lifecycle = lifecycle_from_message(body);
                    } catch (const std::exception&) {
                        // Not the worker's line (plugin code writing to the pipe): ignored.
                    }
                    continue;
                }
                const std::size_t space = line.find(' ');
                boost::system::error_code ec;
                json::value body = json::parse(line.substr(space == std::string_view::npos ? line.size() : space + 1), ec);
                if (!ec && space != std::string_view::npos) final = Final{std::string(line.substr(0, space)), std::move(body)};
            }
        }
        // A worker that ended while something it started still holds the pipe open: done.
        if (open && ready == 0 && worker.ended()) open = false;
        if (!open || final) continue;
        const std::int64_t now = now_ns();
        if (stage_limit_ns > 0 && record.active.load(std::memory_order_acquire) != 0) {
            const std::int64_t in_stage = now - record.entered_ns.load(std::memory_order_relaxed);
            if (in_stage > stage_limit_ns) {
                timed_out = "hooks.timeout_ms";
                stage_ms = static_cast<double>(in_stage) / 1e6;
            }
        }
        if (run_limit_ns > 0 && now - started_ns > run_limit_ns) timed_out = "hooks.run_timeout_s";
        if (!timed_out.empty()) {
            worker.kill();
            open = false;
        }
    }
    const int status = worker.wait();
    forward_signals_to(0);
    control.reset();

    if (final && final->kind == "done") return outcome_from_json(final->body);
    if (final && final->kind == "in_use") throw DirectoryInUse(std::string(final->body.at("message").as_string()));
    if (final && final->kind == "not_needed")
        throw extract::RunNotNeeded(std::string(final->body.at("message").as_string()));
    if (final && (final->kind == "failed" || final->kind == "refused"))
        throw Error(std::string(final->body.at("message").as_string()));

    const Crash crash = describe_crash(record, status, timed_out, config.hooks, ms_since(start), stage_ms);
    remove_leftovers(config, worker.pid());
    try {
        write_crash_report(config, model, run_id, crash, record, generated, lifecycle, ms_since(start),
                           options.overwrite);
    } catch (const std::exception& e) {
        fmt::print(stderr, "ember: {} was not written: {}\n", (config.output.dir / "run.json").string(), e.what());
    }
    throw Error(crash.message);
}

namespace {

// The worker's end of the control pipe. A failed write means the supervisor is gone.
class Control {
public:
    explicit Control(int fd) : fd_(fd) {}
    void line(const std::string& text) const {
        const std::string bytes = text + "\n";
        for (std::size_t done = 0; done < bytes.size();) {
            const ssize_t n = ::write(fd_, bytes.data() + done, bytes.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) ::_exit(1);
            done += static_cast<std::size_t>(n);
        }
    }
    [[noreturn]] void end(std::string_view kind, const json::value& body) const {
        std::fflush(stdout);
        std::fflush(stderr);
        line(fmt::format("{} {}", kind, json::serialize(body)));
        ::_exit(0);
    }

private:
    int fd_;
};

}  // namespace

void run_worker() {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the supervisor gone: nobody would read this run
    for (int fd : {kInputFd, kRecordFd, kControlFd}) ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // not for plugins' children
    const Control control(kControlFd);
    std::optional<WorkerInput> input;
    std::optional<experiments::SharedStageRecord> shared;
    // Loaded here first, as an unsupervised `ember run` loads them before anything starts:
    // a plugin that cannot be loaded is refused before the output directory is touched.
    std::vector<std::shared_ptr<const experiments::PluginLibrary>> plugins;
    try {
        shared.emplace(experiments::SharedStageRecord::attach(kRecordFd));
        if (::lseek(kInputFd, 0, SEEK_SET) != 0) fail_errno("cannot read the worker's input");
        input = worker_input_from_json(json::parse(read_all(kInputFd)));
        ::close(kInputFd);
        experiments::StageRecord& record = shared->record();
        for (const auto& e : input->config.experiments) {
            record.enter(e.plugin.filename().string(), "load", nullptr, false, 0, std::chrono::steady_clock::now());
            plugins.push_back(experiments::PluginLibrary::load(e.plugin));
            record.leave();
        }
    } catch (const std::exception& e) {
        control.end("refused", json::object{{"message", e.what()}});
    }
    try {
        LoadedModel model(input->model_path, family_from_config(input->config), input->model_sha256);
        model.load_ms += input->model_load_ms;  // what this run spent loading: the supervisor's load and this one
        RunOptions options;
        options.run_id = input->run_id;
        options.progress = &shared->record();
        options.overwrite = input->overwrite;
        options.skip_if_current = input->skip_if_current;
        options.on_token = [&](std::int32_t token) { control.line(fmt::format("t {}", token)); };
        options.on_lifecycle = [&](const Lifecycle& l) {
            control.line("l " + json::serialize(lifecycle_message(l)));
        };
        const RunOutcome outcome = execute_run(input->config, model, options);
        control.end("done", outcome_json(outcome));
    } catch (const DirectoryInUse& e) {
        control.end("in_use", json::object{{"message", e.what()}});
    } catch (const extract::RunNotNeeded& e) {
        control.end("not_needed", json::object{{"message", e.what()}});
    } catch (const std::exception& e) {
        control.end("failed", json::object{{"message", e.what()}});
    }
}

}  // namespace ember::app
