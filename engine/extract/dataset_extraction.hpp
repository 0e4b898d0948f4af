// `ember extract --dataset`: every sample of a dataset through the model in one process,
// the selected rows of every sample stacked into one array per (stage, layer)
// (docs/extraction.md, "Datasets"; docs/formats.md, "Dataset run directory").
//
// Before anything is written every line is read and every sample tokenized and its
// selection resolved, so a malformed line or an empty selection (unless on_empty = skip)
// stops the run naming the file, line and sample id. Then batches of samples (up to
// dataset.batch_tokens tokens) are evaluated and their rows appended to the arrays; each
// finished batch is a resume point (dataset_outputs.hpp). The manifest is written last.
// With dataset.shard = K/N only the shard's batches are evaluated: shard K of the whole
// run's B batches (config/shard.hpp over B), the same samples packed the same way as in the
// unsharded run; its rows and samples keep their places in the whole dataset (global row
// and sample numbers), and the manifest's "shard" record says which they are
// (dataset_merge.hpp joins shards).
//
//   const auto result = extract::run_dataset_extraction(model, config);
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "config/run_config.hpp"
#include "extract/extraction.hpp"

namespace ember::experiments {
class ExperimentRunner;
}

namespace ember::extract {

struct DatasetRunOptions {
    bool progress = false;                                    // a progress line on stderr, redrawn per batch
    std::function<void(std::size_t samples_done)> on_batch;  // after each checkpoint (tests stop a run here)
    // Experiments, called per sample (docs/extraction.md, "Experiments on a dataset").
    experiments::ExperimentRunner* experiments = nullptr;
    bool overwrite = false;        // replace an earlier run in the directory (a sweep replacing a stale result)
    bool skip_if_current = false;  // record::RunNotNeeded when the directory holds a current result (record::current_result)
};

struct DatasetResult {
    std::filesystem::path dir;
    std::size_t samples = 0;
    std::size_t skipped = 0;
    std::size_t rows = 0;
    std::size_t tokens = 0;
    std::size_t tokens_this_run = 0;  // evaluated by this process
    std::size_t evaluated = 0;        // rows evaluated (tokens, or fewer: docs/extraction.md)
    std::size_t evaluated_this_run = 0;
    std::size_t arrays = 0;
    std::size_t batches = 0;          // evaluated by this process
    std::size_t resumed_samples = 0;  // samples an earlier process had finished
    double seconds = 0;               // this process's evaluation and writing
};

// What a supervised dataset run leaves when it ends without its manifest (crashed, timed
// out, interrupted or failed: app/supervised_run.cpp): DIR/run.json of this kind. It
// never stops a re-run: the directory resumes (its finished batches are kept), and the
// record is removed once the re-run holds the directory.
inline constexpr const char* kDatasetFailureKind = "ember.dataset_run";
bool holds_dataset_failure_record(const std::filesystem::path& dir);
// Whether DIR holds an unfinished dataset run that a run continues in place: no manifest,
// and its progress.json, its samples.jsonl (killed between renaming the files into place
// and the manifest: rerun, it is written again whole) or a failure record.
bool dataset_run_resumable(const std::filesystem::path& dir);

DatasetResult run_dataset_extraction(const LoadedModel& model, const config::RunConfig& config,
                                     const DatasetRunOptions& options = {});

}  // namespace ember::extract
