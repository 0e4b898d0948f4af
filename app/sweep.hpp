// Many run configs, each run exactly as `ember run` runs one (execute_run), with what a
// batch needs on top: configs from directories and grids (config/sweep_grid), a model loaded once however many
// configs use it, runs whose verified result already exists skipped (same config hash and
// every recorded input's digest unchanged; a stale result is replaced), several runs at
// once on worker threads (each run has its own session and its own experiment
// instances; only the immutable loaded model is shared), and a summary of every run.
// Two sweeps over the same configs: a run whose directory the other holds waits for it,
// then finds its result and reports it skipped, so each run is counted by the sweep that
// made it.
#pragma once

#include <boost/json/array.hpp>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/sweep_grid.hpp"

namespace ember::app {

enum class SweepOutcome { Ok, Failed, Skipped };
std::string_view sweep_outcome_name(SweepOutcome outcome);  // "ok", "failed", "skipped"

// One run to do: a run config file, or one run of a grid (expanded and parsed already),
// or one shard of a dataset run done as `[dataset] shards = N` shards.
struct SweepInput {
    std::filesystem::path config;               // the config file, or the grid file
    std::string name;                           // a grid run: its name; a shard: "shard-K-of-N" (after the grid name)
    std::vector<config::GridValue> grid;        // a grid run: its value of each grid key
    std::optional<config::RunConfig> expanded;  // a grid run or a shard: its config
    std::optional<config::RunConfig> unsharded;  // a shard: the run its shards are merged into
};

// The shards of one dataset run and the directory `ember merge` joins them into.
struct DatasetMerge {
    std::vector<std::filesystem::path> shards;  // in shard order
    config::RunConfig unsharded;                // output.dir: where the merged run goes
};

struct SweepRun {
    std::filesystem::path config;  // as found
    std::string name;              // a grid run's name
    std::vector<config::GridValue> grid;
    SweepOutcome outcome = SweepOutcome::Failed;
    std::string error;             // failed: why; skipped: what was found
    std::string run_id;
    std::string config_hash;
    std::filesystem::path output_dir;
    std::size_t prompt_tokens = 0;
    std::size_t generated_tokens = 0;
    bool model_shared = false;     // the model was already loaded for an earlier config
    double load_ms = 0;            // loading the model (0 when shared)
    double prefill_ms = 0;
    double decode_ms = 0;
    double total_ms = 0;           // this run, wall time
};

struct SweepOptions {
    std::size_t jobs = 1;
    bool force = false;  // run even where a verified result for the same config hash exists
    // Called as each run ends (from the worker that ran it, one call at a time).
    std::function<void(const SweepRun& run, std::size_t done, std::size_t total)> on_run_done;
    // Called as a run starts (one call at a time): its config file and, for a grid run or a shard, its name.
    std::function<void(const SweepRun& run)> on_run_start;
};

// CONFIG arguments: files as given, directories as their *.toml files in name order, a
// grid file (a [grid] table) as its runs in expansion order, and a dataset run with
// `[dataset] shards = N` as its N shard runs (sweep_shard.hpp: dataset_shard_config).
// UsageError for a path that does not exist or a directory without configs; an
// ember::Error for a grid that does not expand.
std::vector<SweepInput> expand_configs(const std::vector<std::string>& arguments);

// The dataset runs among `inputs` done as shards: each one's shard directories, in order.
std::vector<DatasetMerge> dataset_merges(const std::vector<SweepInput>& inputs);

// After a whole sweep: every dataset run whose shards all finished (ok or skipped) and
// whose merged result is not current (record::current_result) is merged into its
// output.dir (ember merge, replacing a stale one). One line a dataset on stderr; the
// number of merges that failed or could not be made (a shard failed).
std::size_t merge_sweep_datasets(const std::vector<SweepInput>& inputs, const std::vector<SweepRun>& runs);

// Runs every config; the result is in the order of `inputs`, whatever ran first.
std::vector<SweepRun> execute_sweep(const std::vector<SweepInput>& inputs, const SweepOptions& options);

// Runs nothing: each input's result read from its output directory (run.json, when the
// directory verifies and records the input's config hash), as a sweep that ran it reports
// it; `failed` with the reason when there is no such result. For the outputs of shards.
std::vector<SweepRun> collect_sweep(const std::vector<SweepInput>& inputs);

// The summary as JSON (an array of objects) or CSV (a header line, then one line a run);
// grid runs add `name` and one column per grid key after `config`.
boost::json::array sweep_summary_json(const std::vector<SweepRun>& runs);
std::string sweep_summary_csv(const std::vector<SweepRun>& runs);

}  // namespace ember::app
