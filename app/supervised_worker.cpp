// `ember run --worker`: the worker side of a supervised run (supervised_run.hpp). It reads
// its input, loads the plugins, runs the job in this process with the shared stage record
// and ends with one frame saying how (worker_protocol.hpp), then _exit(0).
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "record/dir_lock.hpp"
#include "common/error.hpp"
#include "experiments/plugin_library.hpp"
#include "experiments/stage_record.hpp"
#include "record/run_directory.hpp"
#include "supervised_run.hpp"
#include "worker_protocol.hpp"

namespace ember::app {
namespace {

namespace json = boost::json;

std::string read_all(int fd) {
    std::string out;
    char buffer[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) throw Error(fmt::format("cannot read the worker's input: {}", std::strerror(errno)));
        if (n == 0) return out;
        out.append(buffer, static_cast<std::size_t>(n));
    }
}

// The worker's end of the control pipe. A failed write means the supervisor is gone.
class Control {
public:
    explicit Control(int fd) : fd_(fd) {}
    void set_nonce(std::string nonce) { nonce_ = std::move(nonce); }
    void send(std::string_view kind, const json::value& body) const {
        const std::string bytes = encode_frame(nonce_, kind, body);
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
        send(kind, body);
        ::_exit(0);
    }

private:
    int fd_;
    std::string nonce_;
};

// The job of `input` in this process: its result as the done frame's body.
json::object run_job_here(const WorkerInput& input, experiments::StageRecord& record, const Control& control) {
    LoadedModel model(input.model_path, family_from_config(input.config), input.model_sha256);
    model.load_ms += input.model_load_ms;  // what this run spent loading: the supervisor's load and this one
    if (input.job == WorkerJob::Dataset) {
        extract::DatasetRunOptions options;
        options.overwrite = input.overwrite;
        options.skip_if_current = input.skip_if_current;
        options.progress = input.progress;
        return dataset_result_json(run_dataset_in_this_process(model, input.config, options, &record));
    }
    RunOptions options;
    options.run_id = input.run_id;
    options.overwrite = input.overwrite;
    options.skip_if_current = input.skip_if_current;
    options.on_token = [&](std::int32_t token) { control.send("token", json::object{{"id", token}}); };
    options.on_lifecycle = [&](const Lifecycle& l) { control.send("lifecycle", lifecycle_message(l)); };
    return outcome_json(run_in_this_process(input.config, model, options, &record));
}

}  // namespace

void run_worker() {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the supervisor gone: nobody would read this run
    for (int fd : {kInputFd, kRecordFd, kControlFd}) ::fcntl(fd, F_SETFD, FD_CLOEXEC);  // not for plugins' children
    Control control(kControlFd);
    std::optional<WorkerInput> input;
    std::optional<experiments::SharedStageRecord> shared;
    // Loaded here first, as an unsupervised run loads them before anything starts: a
    // plugin that cannot be loaded is refused before the output directory is touched.
    std::vector<std::shared_ptr<const experiments::PluginLibrary>> plugins;
    try {
        shared.emplace(experiments::SharedStageRecord::attach(kRecordFd));
        if (::lseek(kInputFd, 0, SEEK_SET) != 0) throw Error("cannot read the worker's input");
        // The nonce first, on a line of its own: known even when the rest is not understood.
        const std::string bytes = read_all(kInputFd);
        ::close(kInputFd);
        const std::size_t eol = bytes.find('\n');
        if (eol == std::string::npos) throw Error("the supervisor's message to the worker has no nonce line");
        control.set_nonce(bytes.substr(0, eol));
        input = worker_input_from_json(json::parse(std::string_view(bytes).substr(eol + 1)));
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
        control.end("done", run_job_here(*input, shared->record(), control));
    } catch (const DirectoryInUse& e) {
        control.end("in_use", json::object{{"message", e.what()}});
    } catch (const record::RunNotNeeded& e) {
        control.end("not_needed", json::object{{"message", e.what()}});
    } catch (const std::exception& e) {
        control.end("failed", json::object{{"message", e.what()}});
    }
}

}  // namespace ember::app
