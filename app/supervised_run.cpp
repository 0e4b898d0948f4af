#include "supervised_run.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <cerrno>
#include <cstring>

#include "child_process.hpp"
#include "common/atomic_file.hpp"
#include "record/dir_lock.hpp"
#include "common/error.hpp"
#include "record/json_pretty.hpp"
#include "experiments/stage_record.hpp"
#include "record/run_directory.hpp"
#include "generation_output.hpp"
#include "utf8_stream.hpp"
#include "worker_protocol.hpp"

namespace ember::app {

namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

// How often the supervisor looks at the clock and the worker when nothing arrives.
constexpr int kPollMs = 50;

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

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() { reset(); }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }
    void reset(int fd = -1) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = fd;
    }

private:
    int fd_;
};

std::int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// SIGINT/SIGTERM noted, not acted on, while this supervisor watches its worker
// (common/atomic_file.hpp); the last one to end acts on a noted signal.
class SignalDeferral {
public:
    SignalDeferral() { begin_deferring_signals(); }
    ~SignalDeferral() { end_deferring_signals(); }
    SignalDeferral(const SignalDeferral&) = delete;
    SignalDeferral& operator=(const SignalDeferral&) = delete;
};

// How a worker ended, as its supervisor saw it.
struct WorkerEnd {
    std::optional<WorkerMessage> final;  // its last frame (believed only by believed_final)
    int status = 0;                      // waitpid status
    std::string protocol_error;          // the first malformed frame: nothing after it was read
    std::string timed_out;               // the limit that ended it: hooks.timeout_ms | hooks.run_timeout_s
    double stage_ms = 0;                 // timed out in a call: how long it had been in it
    int interrupted_by = 0;              // SIGINT/SIGTERM passed on to it
    bool killed_after_grace = false;     // ...and it was still running kInterruptGraceMs later
    std::vector<std::int32_t> generated;
    Lifecycle lifecycle;                 // what it said its experiments changed
};

// Starts the worker for `input` and watches it to its end (see supervised_run.hpp).
class Supervisor {
public:
    Supervisor(const WorkerInput& input, const experiments::SharedStageRecord& shared, std::uint64_t vocab_size,
               const std::function<void(std::int32_t)>& on_token)
        : input_(input), record_(shared.record()), vocab_size_(vocab_size), on_token_(on_token),
          input_fd_(memfd_with(input.nonce + "\n" + json::serialize(worker_input_json(input)))), control_(-1),
          worker_(start(shared)) {}

    pid_t pid() const { return worker_.pid(); }

    WorkerEnd watch() {
        const config::HooksSection& hooks = input_.config.hooks;
        stage_limit_ns_ = hooks.timeout_ms == 0 ? 0 : (std::int64_t{hooks.timeout_ms} + kTimeoutGraceMs) * 1'000'000;
        run_limit_ns_ = std::int64_t{hooks.run_timeout_s} * 1'000'000'000;
        while (!worker_.ended()) {
            read_frames(kPollMs);
            check_signals();
            if (end_.timed_out.empty() && end_.interrupted_by == 0) check_limits();
        }
        worker_.signal(SIGKILL);  // what it forked, before anything of the run is believed
        read_frames(0);           // what it wrote before it ended is in the pipe
        end_.status = worker_.finish();
        return std::move(end_);
    }

private:
    pid_t start(const experiments::SharedStageRecord& shared) {
        const auto [read_end, write_end] = cloexec_pipe();
        control_.reset(read_end);
        ::fcntl(read_end, F_SETFL, O_NONBLOCK);
        const Fd worker_end(write_end);
        return spawn_self({"run", "--worker"},
                          {{input_fd_.get(), kInputFd}, {shared.fd(), kRecordFd}, {worker_end.get(), kControlFd}},
                          STDERR_FILENO);
    }

    // Reads what the pipe holds (waiting up to `wait_ms` for the first bytes) and acts on
    // each whole frame. After a malformed one, the rest is read and dropped.
    void read_frames(int wait_ms) {
        if (control_.get() < 0) {  // closed: the worker is ending, soon noticed
            if (wait_ms > 0) ::poll(nullptr, 0, 2);
            return;
        }
        pollfd p{control_.get(), POLLIN, 0};
        if (::poll(&p, 1, wait_ms) <= 0) return;
        for (;;) {
            char buffer[65536];
            const ssize_t n = ::read(control_.get(), buffer, sizeof buffer);
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) return;  // EAGAIN: all read
            if (n == 0) {
                control_.reset();  // the worker (and all it forked) closed it: it is ending
                return;
            }
            if (!end_.protocol_error.empty()) continue;
            frames_.feed(buffer, static_cast<std::size_t>(n));
            try {
                while (const auto payload = frames_.next()) act_on(parse_message(*payload, input_.nonce, vocab_size_));
            } catch (const ProtocolError& e) {
                end_.protocol_error = e.what();
                end_.final.reset();
            }
        }
    }

    void act_on(WorkerMessage message) {
        if (end_.final) throw ProtocolError(fmt::format("a {} frame after the final {} frame", message.kind, end_.final->kind));
        if (message.kind == "token") {
            const auto token = static_cast<std::int32_t>(message.body.at("id").as_int64());
            end_.generated.push_back(token);
            if (on_token_) on_token_(token);
        } else if (message.kind == "lifecycle") {
            end_.lifecycle = lifecycle_from_message(message.body);
        } else {
            end_.final = std::move(message);
        }
    }

    // A SIGINT/SIGTERM this process was sent goes to the worker's group; SIGKILL follows.
    void check_signals() {
        const int signal_number = deferred_signal();
        if (signal_number == 0) return;
        if (end_.interrupted_by == 0) {
            end_.interrupted_by = signal_number;
            interrupted_ns_ = now_ns();
            worker_.signal(signal_number);
        } else if (!end_.killed_after_grace && now_ns() - interrupted_ns_ > std::int64_t{kInterruptGraceMs} * 1'000'000) {
            end_.killed_after_grace = true;
            worker_.signal(SIGKILL);
        }
    }

    void check_limits() {
        const std::int64_t now = now_ns();
        if (stage_limit_ns_ > 0 && record_.active.load(std::memory_order_acquire) != 0) {
            const std::int64_t in_stage = now - record_.entered_ns.load(std::memory_order_relaxed);
            if (in_stage > stage_limit_ns_) {
                end_.timed_out = "hooks.timeout_ms";
                end_.stage_ms = static_cast<double>(in_stage) / 1e6;
            }
        }
        if (end_.timed_out.empty() && run_limit_ns_ > 0 && now - started_ns_ > run_limit_ns_)
            end_.timed_out = "hooks.run_timeout_s";
        if (!end_.timed_out.empty()) worker_.signal(SIGKILL);
    }

    const WorkerInput& input_;
    const experiments::StageRecord& record_;
    std::uint64_t vocab_size_;
    std::function<void(std::int32_t)> on_token_;
    Fd input_fd_;
    Fd control_;
    ProcessGroup worker_;
    FrameReader frames_;
    WorkerEnd end_;
    const std::int64_t started_ns_ = now_ns();
    std::int64_t stage_limit_ns_ = 0, run_limit_ns_ = 0, interrupted_ns_ = 0;
};

// The worker's last frame, when it can be believed: well-formed frames only, and the
// worker exited with status 0 right after it (as it does; a plugin that forged a frame
// and then crashed is a crash).
const WorkerMessage* believed_final(const WorkerEnd& end) {
    if (!end.final || !end.protocol_error.empty()) return nullptr;
    if (!WIFEXITED(end.status) || WEXITSTATUS(end.status) != 0) return nullptr;
    return &*end.final;
}

// How the worker ended when it did not say so itself (or was not believed).
struct Crash {
    std::string outcome;  // "crashed" | "timed_out" | "interrupted"
    std::string message;
    std::optional<int> signal;
    std::optional<int> exit_status;
    std::string limit;  // timed_out: "hooks.timeout_ms" | "hooks.run_timeout_s"
};

// "DATA.jsonl:4: sample s3: " for a dataset run's sample, else "".
std::string sample_prefix(const config::RunConfig& config, const experiments::StageRecord& r) {
    if (!config.dataset.path || !r.has_sample) return "";
    return fmt::format("{}:{}: sample {}: ", config.dataset.path->string(), r.sample_line, valid_utf8(r.sample_id_text()));
}

std::string crash_text(const experiments::StageRecord& record, const std::string& how) {
    const std::string where = record.where();
    const std::string name = valid_utf8(record.experiment_name());
    if (where.empty()) return fmt::format("the run's worker crashed ({}) before any experiment code ran", how);
    if (record.stage_name() == "load") return fmt::format("plugin '{}' crashed ({}) while loading", name, how);
    if (record.active.load() != 0) return fmt::format("experiment '{}' crashed ({}) in {}", name, how, where);
    return fmt::format("the run's worker crashed ({}) outside experiment code; experiment '{}' last returned from {}", how,
                       name, where);
}

Crash describe_crash(const config::RunConfig& config, const experiments::StageRecord& record, const WorkerEnd& end,
                     double elapsed_ms) {
    Crash c;
    if (WIFSIGNALED(end.status)) c.signal = WTERMSIG(end.status);
    if (WIFEXITED(end.status)) c.exit_status = WEXITSTATUS(end.status);
    const std::string where = record.where();
    const std::string name = valid_utf8(record.experiment_name());
    const bool in_call = record.active.load() != 0;
    const std::string last = where.empty() ? "" : fmt::format("; experiment '{}' was {} {}", name, in_call ? "in" : "last in", where);
    if (end.interrupted_by != 0) {
        c.outcome = "interrupted";
        c.message = fmt::format("the run was interrupted ({}){}", signal_name(end.interrupted_by), last);
        if (end.killed_after_grace)
            c.message += fmt::format("; its worker was still running {} ms later and was killed", kInterruptGraceMs);
    } else if (end.timed_out == "hooks.timeout_ms") {
        c.outcome = "timed_out";
        c.message = fmt::format("experiment '{}' timed out after {:.0f} ms in {} (hooks.timeout_ms = {})", name,
                                end.stage_ms, where, config.hooks.timeout_ms);
    } else if (!end.timed_out.empty()) {
        c.outcome = "timed_out";
        c.message = fmt::format("the run timed out after {:.0f} ms (hooks.run_timeout_s = {}){}", elapsed_ms,
                                config.hooks.run_timeout_s, last);
    } else {
        c.outcome = "crashed";
        c.message = crash_text(record, end_text(end.status));
        if (!end.protocol_error.empty()) c.message += fmt::format(" (its control channel was not believed: {})", end.protocol_error);
        else if (end.final) c.message += fmt::format(" (after a '{}' frame)", end.final->kind);
    }
    c.limit = end.timed_out;
    c.message = sample_prefix(config, record) + c.message;
    return c;
}

json::value stage_json(const experiments::StageRecord& r) {
    if (!r.entered) return nullptr;
    const std::optional<hooks::Phase> phase = r.phase_value();
    json::object stage{
        {"experiment", valid_utf8(r.experiment_name())},
        {"stage", valid_utf8(r.stage_name())},
        {"phase", phase ? json::value(hooks::phase_name(*phase)) : json::value(nullptr)},
        {"layer", r.has_layer ? json::value(r.layer) : json::value(nullptr)},
        {"decode_step", phase ? json::value(r.step) : json::value(nullptr)},
        {"in_call", r.active.load() != 0},
    };
    if (r.has_sample)
        stage["sample"] = {{"index", r.sample_index}, {"line", r.sample_line}, {"id", valid_utf8(r.sample_id_text())}};
    return stage;
}

json::object crash_json(const Crash& crash, const experiments::StageRecord& record, int interrupted_by) {
    return {{"signal", crash.signal ? json::value(signal_name(*crash.signal)) : json::value(nullptr)},
            {"signal_number", crash.signal ? json::value(*crash.signal) : json::value(nullptr)},
            {"exit_status", crash.exit_status ? json::value(*crash.exit_status) : json::value(nullptr)},
            {"limit", crash.limit.empty() ? json::value(nullptr) : json::value(crash.limit)},
            {"interrupted_by", interrupted_by ? json::value(signal_name(interrupted_by)) : json::value(nullptr)},
            {"stage", stage_json(record)}};
}

// Removes what the worker `pid` may have left half-written beside the trace journal when
// it lies outside the output directory (the output directory itself is taken over by the
// record's RunDirectoryWriter, which removes a dead process's temporaries).
void remove_leftovers(const config::RunConfig& config, pid_t pid) {
    const std::string suffix = fmt::format(".tmp.{}", pid);
    std::error_code ec;
    const fs::path dir = config.tracing.path.parent_path();
    if (!fs::is_directory(dir, ec)) return;
    for (const auto& entry : fs::directory_iterator(dir, ec))
        if (entry.path().filename().string().ends_with(suffix)) fs::remove(entry.path(), ec);
}

// A generation run's crash record: run.json replacing what the worker left (a crashed run
// is never sealed; its half-written files, staging directory and temporaries go), unless
// the directory holds another, earlier run it was not allowed to replace (the worker died
// before it took the directory).
void write_crash_report(const config::RunConfig& config, const LoadedModel& model, const std::string& run_id,
                        const Crash& crash, const experiments::StageRecord& record, const WorkerEnd& end,
                        double total_ms, bool overwrite) {
    const std::string held = record::recorded_run_id(config.output.dir);
    if (!held.empty() && held != run_id && !overwrite && !config.output.overwrite)
        throw Error(fmt::format("{} holds run {}, which this run was not to replace", config.output.dir.string(), held));
    record::RunDirectoryWriter directory(config.output.dir, {true, fmt::format("run {} (its crash record)", run_id), {}, {}});
    const json::object report{
        {"schema_version", 1},
        {"kind", "ember.run"},
        {"run_id", run_id},
        {"outcome", crash.outcome},
        {"error", crash.message},
        {"crash", crash_json(crash, record, end.interrupted_by)},
        {"config_file", config.source.string()},
        {"config_hash", config::config_hash(config)},
        {"config", config::to_json(config)},
        {"model", model_json(model)},
        {"route", config.model.route},
        {"kv_type", config.model.kv_type},
        {"hooks", "active"},
        {"generated", {{"tokens", json::array(end.generated.begin(), end.generated.end())}, {"stop_reason", nullptr}}},
        {"timings", {{"load_ms", model.load_ms}, {"total_ms", total_ms}}},
        {"lifecycle", lifecycle_json(end.lifecycle)},
    };
    write_file_atomically(directory.dir() / "run.json", pretty_json(report) + "\n");
    directory.publish();
}

// A dataset run's record of a run that ended without its manifest (a crash, a timeout, an
// interruption, or a failure the worker reported): DIR/run.json of kind
// extract::kDatasetFailureKind beside the finished batches, which a re-run resumes. A
// directory holding a finished run (its manifest) is left alone unless the run was to
// replace it.
void write_dataset_record(const config::RunConfig& config, const LoadedModel& model, const std::string& outcome,
                          const std::string& error, json::value crash, const experiments::StageRecord& record,
                          double total_ms, bool overwrite) {
    record::RunDirectoryOptions options;
    options.overwrite = overwrite || config.output.overwrite;
    options.holder = "ember extract --dataset (its failure record)";
    options.resumable = extract::dataset_run_resumable;
    record::RunDirectoryWriter directory(config.output.dir, options);
    const json::object report{
        {"schema_version", 1},
        {"kind", extract::kDatasetFailureKind},
        {"run_id", nullptr},
        {"outcome", outcome},
        {"error", error},
        {"crash", std::move(crash)},
        {"stage", stage_json(record)},
        {"dataset", {{"path", config.dataset.path->string()}}},
        {"resume", "running the same config again resumes after the last finished batch (progress.json)"},
        {"config_file", config.source.string()},
        {"config_hash", config::config_hash(config)},
        {"config", config::to_json(config)},
        {"model", model_json(model)},
        {"route", config.model.route},
        {"kv_type", config.model.kv_type},
        {"hooks", "active"},
        {"timings", {{"load_ms", model.load_ms}, {"total_ms", total_ms}}},
    };
    write_file_atomically(directory.dir() / "run.json", pretty_json(report) + "\n");
    directory.publish();
}

// The final frames every job answers alike: the directory is another's, the run is not needed, a plugin was refused.
void throw_common(const WorkerMessage& final) {
    const std::string message(final.body.at("message").as_string());
    if (final.kind == "in_use") throw DirectoryInUse(message);
    if (final.kind == "not_needed") throw record::RunNotNeeded(message);
    if (final.kind == "refused") throw Error(message);
}

// The ids a token frame may carry: any the model or its tokenizer has.
std::uint64_t vocab_size(const LoadedModel& model) {
    return std::max<std::uint64_t>(model.tokenizer.vocab_size(), model.model->config().n_vocab);
}

WorkerInput worker_input(WorkerJob job, const config::RunConfig& config, const LoadedModel& model, std::string run_id,
                         bool overwrite, bool skip_if_current) {
    if (deferred_signal() != 0)
        throw Error(fmt::format("not started: ember was interrupted ({})", signal_name(deferred_signal())));
    return {job,           config,          config::config_hash(config), std::move(run_id), model.path.string(),
            model.sha256, model.load_ms, overwrite, skip_if_current, false, make_nonce()};
}

void print_not_written(const config::RunConfig& config, const std::exception& e) {
    fmt::print(stderr, "ember: {} was not written: {}\n", (config.output.dir / "run.json").string(), e.what());
}

}  // namespace

RunOutcome supervise_run(const config::RunConfig& config, const LoadedModel& model, const RunOptions& options) {
    const auto start = Clock::now();
    const std::string run_id = options.run_id.empty() ? make_run_id() : options.run_id;
    const WorkerInput input =
        worker_input(WorkerJob::Generation, config, model, run_id, options.overwrite, options.skip_if_current);
    const experiments::SharedStageRecord shared = experiments::SharedStageRecord::create();
    const SignalDeferral deferral;  // after the record is written, a noted signal ends this process
    Supervisor supervisor(input, shared, vocab_size(model), options.on_token);
    WorkerEnd end = supervisor.watch();

    if (const WorkerMessage* final = believed_final(end)) {
        try {
            if (final->kind == "done") return outcome_from_json(final->body);
        } catch (const ProtocolError& e) {
            end.protocol_error = e.what();
        }
        if (end.protocol_error.empty()) {
            throw_common(*final);
            throw Error(std::string(final->body.at("message").as_string()));  // failed: run.json says so
        }
    }
    const Crash crash = describe_crash(config, shared.record(), end, ms_since(start));
    remove_leftovers(config, supervisor.pid());
    try {
        write_crash_report(config, model, run_id, crash, shared.record(), end, ms_since(start), options.overwrite);
    } catch (const std::exception& e) {
        print_not_written(config, e);
    }
    throw Error(crash.message);
}

extract::DatasetResult supervise_dataset_run(const LoadedModel& model, const config::RunConfig& config,
                                             const extract::DatasetRunOptions& options) {
    const auto start = Clock::now();
    WorkerInput input = worker_input(WorkerJob::Dataset, config, model, "", options.overwrite, options.skip_if_current);
    input.progress = options.progress;
    const experiments::SharedStageRecord shared = experiments::SharedStageRecord::create();
    const SignalDeferral deferral;
    Supervisor supervisor(input, shared, vocab_size(model), {});
    WorkerEnd end = supervisor.watch();

    std::string outcome, error;
    json::value crash = nullptr;
    const WorkerMessage* final = believed_final(end);
    if (final) {
        try {
            if (final->kind == "done") return dataset_result_from_json(final->body);
        } catch (const ProtocolError& e) {
            end.protocol_error = e.what();
            final = nullptr;
        }
    }
    if (final) {
        throw_common(*final);
        outcome = "failed";
        error = std::string(final->body.at("message").as_string());
    } else {
        const Crash c = describe_crash(config, shared.record(), end, ms_since(start));
        outcome = c.outcome;
        error = c.message;
        crash = crash_json(c, shared.record(), end.interrupted_by);
    }
    try {
        write_dataset_record(config, model, outcome, error, std::move(crash), shared.record(), ms_since(start),
                             options.overwrite);
    } catch (const std::exception& e) {
        print_not_written(config, e);
    }
    throw Error(error);
}

}  // namespace ember::app
