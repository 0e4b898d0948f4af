// ember sweep CONFIG... [--jobs N] [--summary FILE.csv|FILE.json] [--force]
// Runs many run configs (a directory stands for its *.toml files), each as `ember run`
// runs it (docs/sweep.md): a progress line while it works when stdout is a terminal, a
// summary of every run at the end, the failed ones named with their error. It goes on
// after a failed run; exit status 1 if any run failed, 0 otherwise (skipped runs are not
// failures), 2 for bad usage.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "cli.hpp"
#include "commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "sweep.hpp"

namespace ember::app {
namespace {

// "\r[3/10] 2 ok, 1 failed, 0 skipped; running a.toml" rewritten in place.
class ProgressLine {
public:
    explicit ProgressLine(bool enabled) : enabled_(enabled) {}
    bool enabled() const { return enabled_; }
    void started(const std::filesystem::path& config) {
        running_ = config.filename().string();
        show();
    }
    void finished(const SweepRun& run, std::size_t done, std::size_t total) {
        ++counts_[static_cast<std::size_t>(run.outcome)];
        done_ = done;
        total_ = total;
        show();
    }
    void clear() {
        if (enabled_ && width_ > 0) fmt::print("\r{:{}}\r", "", width_);
        std::fflush(stdout);
    }

private:
    void show() {
        if (!enabled_) return;
        const std::string line = fmt::format("[{}/{}] {} ok, {} failed, {} skipped; last started {}", done_, total_,
                                             counts_[0], counts_[1], counts_[2], running_);
        fmt::print("\r{:{}}", line, std::max(width_, line.size()));
        width_ = std::max(width_, line.size());
        std::fflush(stdout);
    }

    bool enabled_;
    std::size_t counts_[3] = {0, 0, 0};  // by SweepOutcome
    std::size_t done_ = 0, total_ = 0, width_ = 0;
    std::string running_;
};

void print_table(const std::vector<SweepRun>& runs) {
    fmt::print("{:<8} {:>6} {:>6} {:>10} {:>10}  {}\n", "outcome", "prompt", "tokens", "prefill_ms", "total_ms",
               "config -> output dir");
    for (const SweepRun& r : runs) {
        fmt::print("{:<8} {:>6} {:>6} {:>10.1f} {:>10.1f}  {} -> {}\n", sweep_outcome_name(r.outcome), r.prompt_tokens,
                   r.generated_tokens, r.prefill_ms, r.total_ms, r.config.string(), r.output_dir.string());
        if (r.outcome == SweepOutcome::Failed) fmt::print("         error: {}\n", r.error);
    }
}

}  // namespace

int run_sweep(const std::vector<std::string>& args) {
    po::options_description options("sweep options");
    options.add_options()
        ("configs", po::value<std::vector<std::string>>(), "run configs (TOML files, or directories of them)")
        ("jobs", po::value<long long>()->default_value(1), "runs at once (each its own session and experiment instances)")
        ("summary", po::value<std::string>(), "also write the summary to FILE.csv or FILE.json")
        ("force", po::bool_switch(), "rerun configs whose verified result already exists");
    po::positional_options_description positional;
    positional.add("configs", -1);
    po::variables_map vm;
    if (!parse_options("sweep", args, options, positional, vm)) return kExitOk;
    if (!vm.count("configs")) throw UsageError("usage: ember sweep CONFIG... [--jobs N] [--summary FILE.csv|json] [--force]");
    const long long jobs = vm["jobs"].as<long long>();
    if (jobs < 1 || jobs > 1024) throw UsageError(fmt::format("ember sweep: --jobs {} must be in [1, 1024]", jobs));
    std::string summary;
    if (vm.count("summary")) {
        summary = vm["summary"].as<std::string>();
        if (!summary.ends_with(".csv") && !summary.ends_with(".json"))
            throw UsageError(fmt::format("ember sweep: --summary {} must end in .csv or .json", summary));
    }
    const std::vector<std::filesystem::path> configs = expand_configs(vm["configs"].as<std::vector<std::string>>());

    ProgressLine progress(::isatty(STDOUT_FILENO) == 1);
    SweepOptions sweep;
    sweep.jobs = static_cast<std::size_t>(jobs);
    sweep.force = vm["force"].as<bool>();
    sweep.on_run_start = [&](const std::filesystem::path& config) { progress.started(config); };
    sweep.on_run_done = [&](const SweepRun& run, std::size_t done, std::size_t total) {
        progress.finished(run, done, total);
        if (run.outcome == SweepOutcome::Failed)
            fmt::print(stderr, "{}ember: {} failed: {}\n", progress.enabled() ? "\n" : "", run.config.string(), run.error);
    };
    const std::vector<SweepRun> runs = execute_sweep(configs, sweep);
    progress.clear();

    print_table(runs);
    if (!summary.empty()) {
        write_file_atomically(summary, summary.ends_with(".csv") ? sweep_summary_csv(runs)
                                                                 : pretty_json(sweep_summary_json(runs)) + "\n");
    }
    std::size_t failed = 0, skipped = 0;
    for (const SweepRun& r : runs) {
        failed += r.outcome == SweepOutcome::Failed;
        skipped += r.outcome == SweepOutcome::Skipped;
    }
    fmt::print(stderr, "ember sweep: {} runs: {} ok, {} failed, {} skipped\n", runs.size(), runs.size() - failed - skipped,
               failed, skipped);
    return failed > 0 ? kExitFailure : kExitOk;
}

}  // namespace ember::app
