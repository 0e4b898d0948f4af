// How a dataset run's batch is evaluated (dataset_extraction.cpp): each sample alone (with
// experiments, or attention patterns, or a single sample), or the batch's samples packed
// into one prefill evaluation, each at positions from 0 in its own cache slots; then the
// batch's SAE features, one product per SAE (docs/extraction.md, "Datasets").
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "extract/dataset.hpp"
#include "extract/dataset_records.hpp"
#include "extract/sae_extraction.hpp"
#include "runtime/loaded_model.hpp"
#include "runtime/session.hpp"

namespace ember::experiments {
class ExperimentRunner;
}

namespace ember::extract {

// "FILE:LINE: sample ID", as every error about a sample begins.
std::string sample_name(const Sample& s, const std::filesystem::path& file);

// What every batch of a run is evaluated with.
struct BatchEvaluation {
    runtime::Session& session;
    const runtime::LoadedModel& model;
    runtime::Route route;
    std::size_t threads;
    experiments::ExperimentRunner* experiments;  // none: no experiments
    bool attention_pattern;                      // the run extracts attention_pattern (no packed evaluation)
    const SaeEncoders& encoders;
    std::size_t n_saes;
    const std::filesystem::path& file;  // the dataset, for the samples' names
};

// The batch's samples evaluated, in order: one SampleRows per sample (a skipped sample's
// without an extractor), each pointing into `batch`.
std::vector<SampleRows> evaluate_batch(const BatchEvaluation& e, const std::vector<Prepared>& batch);

}  // namespace ember::extract
