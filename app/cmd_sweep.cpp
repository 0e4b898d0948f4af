// ember sweep CONFIG... [--jobs N] [--summary FILE.csv|FILE.json] [--force] [--shard K/N]
// ember sweep --list [--shard K/N] CONFIG...
// ember sweep --collect [--summary FILE] [--shard K/N] CONFIG...
// ember sweep --slurm [--slurm-opt=ARG]... [--shards N] [--slurm-dir DIR] [--summary FILE] [--submit] CONFIG...
// Runs many run configs (a directory stands for its *.toml files, a grid file for its
// runs), each as `ember run` runs it (docs/sweep.md): a progress line while it works when
// stdout is a terminal, a summary of every run at the end, the failed ones named with
// their error. It goes on after a failed run; exit status 1 if any run failed, 0
// otherwise (skipped runs are not failures), 2 for bad usage. --list prints the runs
// without running them, --collect reads their results from their output directories,
// --slurm writes (and with --submit submits) the sweep as a Slurm job array. A dataset run
// with [dataset] shards = N is N runs; a whole sweep (and the Slurm final job) merges them.
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>

#include "cli.hpp"
#include "commands.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/output_path.hpp"
#include "config/run_config.hpp"
#include "slurm.hpp"
#include "sweep.hpp"
#include "sweep_shard.hpp"

namespace ember::app {
namespace {

// "\r[3/10] 2 ok, 1 failed, 0 skipped; last started a.toml" rewritten in place.
class ProgressLine {
public:
    explicit ProgressLine(bool enabled) : enabled_(enabled) {}
    bool enabled() const { return enabled_; }
    // A grid run or a shard by its name (its config is the grid file), a config by its file name.
    void started(const SweepRun& run) {
        running_ = run.name.empty() ? run.config.filename().string() : run.name;
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

void print_sweep_table(const std::vector<SweepRun>& runs) {
    fmt::print("{:<8} {:>6} {:>6} {:>10} {:>10}  {}\n", "outcome", "prompt", "tokens", "prefill_ms", "total_ms",
               "config -> output dir");
    for (const SweepRun& r : runs) {
        fmt::print("{:<8} {:>6} {:>6} {:>10.1f} {:>10.1f}  {} -> {}\n", sweep_outcome_name(r.outcome), r.prompt_tokens,
                   r.generated_tokens, r.prefill_ms, r.total_ms, r.config.string(), r.output_dir.string());
        if (r.outcome == SweepOutcome::Failed) fmt::print("         error: {}\n", r.error);
    }
}

void write_summary(const std::string& summary, const std::vector<SweepRun>& runs) {
    if (summary.empty()) return;
    write_file_atomically(summary, summary.ends_with(".csv") ? sweep_summary_csv(runs)
                                                             : pretty_json(sweep_summary_json(runs)) + "\n");
}

// Exit status 1 if any run failed, with the count line on stderr.
int report_counts(const std::vector<SweepRun>& runs) {
    std::size_t failed = 0, skipped = 0;
    for (const SweepRun& r : runs) {
        failed += r.outcome == SweepOutcome::Failed;
        skipped += r.outcome == SweepOutcome::Skipped;
    }
    fmt::print(stderr, "ember sweep: {} runs: {} ok, {} failed, {} skipped\n", runs.size(), runs.size() - failed - skipped,
               failed, skipped);
    return failed > 0 ? kExitFailure : kExitOk;
}

// --list: index, config hash, name (or config file) and output directory of each run.
int list_runs(const std::vector<SweepInput>& inputs, std::size_t first) {
    const std::optional<std::filesystem::path> defaults = config::find_defaults_file();
    int status = kExitOk;
    for (std::size_t i = 0; i < inputs.size(); ++i) {
        const SweepInput& input = inputs[i];
        try {
            config::LoadOptions load;
            load.defaults_file = defaults;
            config::RunConfig c = input.expanded ? *input.expanded : config::load_run_config(input.config, load);
            if (c.dataset.path) c.output.extract = true;  // as the sweep runs it
            fmt::print("{:>5}  {}  {}  -> {}\n", first + i, config::config_hash(c).substr(0, 12),
                       input.name.empty() ? input.config.string() : input.name, c.output.dir.string());
        } catch (const std::exception& e) {
            fmt::print("{:>5}  error: {}\n", first + i, e.what());
            status = kExitFailure;
        }
    }
    fmt::print(stderr, "ember sweep: {} runs\n", inputs.size());
    return status;
}

}  // namespace

int run_sweep(const std::vector<std::string>& args) {
    po::options_description options("sweep options");
    options.add_options()
        ("configs", po::value<std::vector<std::string>>(), "run configs (TOML files, directories of them, grid files)")
        ("jobs", po::value<long long>()->default_value(1), "runs at once (each its own session and experiment instances)")
        ("summary", po::value<std::string>(), "also write the summary to FILE.csv or FILE.json")
        ("force", po::bool_switch(), "rerun configs whose verified result already exists")
        ("shard", po::value<std::string>(), "only shard K of N (K/N, K from 0): a deterministic slice of the runs")
        ("list", po::bool_switch(), "print the runs (index, config hash, name, output dir) without running them")
        ("collect", po::bool_switch(), "run nothing: the summary of the results already in the output directories")
        ("slurm", po::bool_switch(), "write the sweep as a Slurm job array (sweep.sbatch) and its summary job")
        ("slurm-opt", po::value<std::vector<std::string>>()->composing(), "with --slurm: an #SBATCH line for both scripts (--slurm-opt=--time=1:00:00)")
        ("shards", po::value<long long>(), "with --slurm: the array's tasks (default: one per run)")
        ("slurm-dir", po::value<std::string>(), "with --slurm: where the scripts and logs go (default: slurm-<first config's name>)")
        ("submit", po::bool_switch(), "with --slurm: submit both jobs with sbatch and print their ids");
    po::positional_options_description positional;
    positional.add("configs", -1);
    po::variables_map vm;
    if (!parse_options("sweep", args, options, positional, vm)) return kExitOk;
    if (!vm.count("configs"))
        throw UsageError("usage: ember sweep CONFIG... [--jobs N] [--summary FILE.csv|json] [--force] [--shard K/N]\n"
                         "       ember sweep --list|--collect|--slurm ... CONFIG... (ember sweep --help)");
    const long long jobs = vm["jobs"].as<long long>();
    if (jobs < 1 || jobs > 1024) throw UsageError(fmt::format("ember sweep: --jobs {} must be in [1, 1024]", jobs));
    std::string summary;
    if (vm.count("summary")) {
        summary = vm["summary"].as<std::string>();
        if (!summary.ends_with(".csv") && !summary.ends_with(".json"))
            throw UsageError(fmt::format("ember sweep: --summary {} must end in .csv or .json", summary));
        check_output_file("--summary", summary);  // before any run
    }
    const bool list = vm["list"].as<bool>(), collect = vm["collect"].as<bool>(), slurm = vm["slurm"].as<bool>();
    if (list + collect + slurm > 1) throw UsageError("ember sweep: --list, --collect and --slurm exclude each other");
    for (const char* option : {"slurm-opt", "shards", "slurm-dir"})
        if (vm.count(option) && !slurm) throw UsageError(fmt::format("ember sweep: --{} goes with --slurm", option));
    if (vm["submit"].as<bool>() && !slurm) throw UsageError("ember sweep: --submit goes with --slurm");
    if (slurm && vm.count("shard")) throw UsageError("ember sweep: --slurm makes the shards itself (--shards N), not --shard");

    const std::vector<std::string> arguments = vm["configs"].as<std::vector<std::string>>();
    std::vector<SweepInput> inputs = expand_configs(arguments);
    std::size_t first = 0;
    if (vm.count("shard")) {
        const auto [begin, end] = shard_range(inputs.size(), parse_shard(vm["shard"].as<std::string>()));
        inputs = std::vector<SweepInput>(inputs.begin() + static_cast<std::ptrdiff_t>(begin),
                                         inputs.begin() + static_cast<std::ptrdiff_t>(end));
        first = begin;
    }
    if (list) return list_runs(inputs, first);
    if (collect) {
        const std::vector<SweepRun> runs = collect_sweep(inputs);
        print_sweep_table(runs);
        write_summary(summary, runs);
        return report_counts(runs);
    }
    if (slurm) {
        SlurmPlan plan;
        plan.dir = absolute_path(vm.count("slurm-dir") ? vm["slurm-dir"].as<std::string>()
                                                  : "slurm-" + std::filesystem::path(arguments.front()).stem().string());
        check_output_directory("--slurm-dir", plan.dir);
        plan.ember = std::filesystem::read_symlink("/proc/self/exe");
        for (const std::string& a : arguments) plan.configs.push_back(absolute_path(a));
        plan.runs = inputs.size();
        const long long shards = vm.count("shards") ? vm["shards"].as<long long>()
                                                    : static_cast<long long>(std::max<std::size_t>(inputs.size(), 1));
        if (shards < 1 || shards > static_cast<long long>(kMaxShards))
            throw UsageError(fmt::format("ember sweep: --shards {} must be in [1, {}]", shards, kMaxShards));
        plan.shards = static_cast<std::size_t>(shards);
        if (vm.count("slurm-opt")) plan.options = vm["slurm-opt"].as<std::vector<std::string>>();
        if (jobs != 1) plan.sweep_options.push_back(fmt::format("--jobs {}", jobs));
        if (vm["force"].as<bool>()) plan.sweep_options.push_back("--force");
        plan.summary = summary.empty() ? plan.dir / "summary.csv" : absolute_path(summary);
        for (const DatasetMerge& m : dataset_merges(inputs)) plan.merges.push_back({m.shards, m.unsharded.output.dir});
        const SlurmScripts scripts = write_slurm_scripts(plan);
        fmt::print("{}\n{}\n", scripts.sweep.string(), scripts.summary.string());
        if (vm["submit"].as<bool>()) {
            const SlurmJobs submitted = submit_slurm(scripts);
            fmt::print("sweep job {} ({} tasks)\nsummary job {} (afterok:{}), {}writing {}\n", submitted.sweep, plan.shards,
                       submitted.summary, submitted.sweep,
                       plan.merges.empty() ? "" : fmt::format("merging {} sharded dataset run(s), ", plan.merges.size()),
                       plan.summary.string());
        }
        return kExitOk;
    }

    ProgressLine progress(::isatty(STDOUT_FILENO) == 1);
    SweepOptions sweep;
    sweep.jobs = static_cast<std::size_t>(jobs);
    sweep.force = vm["force"].as<bool>();
    sweep.on_run_start = [&](const SweepRun& run) { progress.started(run); };
    sweep.on_run_done = [&](const SweepRun& run, std::size_t done, std::size_t total) {
        progress.finished(run, done, total);
        if (run.outcome == SweepOutcome::Failed)
            fmt::print(stderr, "{}ember: {}{} failed: {}\n", progress.enabled() ? "\n" : "", run.config.string(),
                       run.name.empty() ? "" : " [" + run.name + "]", run.error);
    };
    const std::vector<SweepRun> runs = execute_sweep(inputs, sweep);
    progress.clear();

    print_sweep_table(runs);
    write_summary(summary, runs);
    const int status = report_counts(runs);
    // The whole sweep ran here: its sharded dataset runs are merged (a --shard K/N task
    // leaves that to the final job, docs/sweep.md).
    const std::size_t unmerged = vm.count("shard") ? 0 : merge_sweep_datasets(inputs, runs);
    return unmerged > 0 ? kExitFailure : status;
}

}  // namespace ember::app
