// `[attribute]` in a run config (docs/attribution.md, "Run configs and datasets"): what
// `ember run CONFIG` and each run of `ember sweep` do when the config has the section.
// A single prompt is the run `ember attribute` makes of the same inputs (the same files,
// byte for byte: tests/attribution/attribute_config_test); with [dataset], every sample is
// one, its files named "sampleI." + the single run's name, in one sealed directory. A
// dataset line's `target`, `corrupt` and `corrupt_select` override [attribute]'s; its
// `select` (default dataset.select) chooses the positions, and corrupt_select (default: the
// same spec) the corrupted prompt's rows patched onto them, the k-th onto the k-th, as
// patch aligns a source by text.
#pragma once

#include <boost/json/object.hpp>

#include <filesystem>
#include <functional>
#include <string>

#include "attribution/attribution.hpp"
#include "config/run_config.hpp"

namespace ember::attribution {

struct ConfiguredAttribution {
    std::filesystem::path dir;
    std::string run_id;
    std::size_t samples = 0;     // 1 for a single prompt
    std::size_t resumed_samples = 0;  // a dataset run's samples an interrupted run had finished
    std::size_t prompt_tokens = 0;    // a dataset run's: summed over its samples
    std::size_t arrays = 0;
    double metric = 0.0;         // a single prompt's; a dataset run's first sample's
    double forward_ms = 0.0, backward_ms = 0.0;
};

// The request of `config` (which has [attribute]) for one prompt; the output selection is
// [output]'s. ember::Error naming the key for what the section cannot mean.
AttributeRequest request_from_config(const config::RunConfig& config, std::size_t threads);

struct ConfiguredOptions {
    bool overwrite = false;  // as [output] overwrite
    std::string run_id;      // the manifest's run_id (app's make_run_id); an interrupted dataset run resumed keeps its own
    // A dataset run: called after each finished sample with the number finished (tests stop a run here).
    std::function<void(std::size_t)> on_sample;
};

// Runs it (every sample of a dataset checked before anything is written; an error names
// FILE:LINE: sample ID). A dataset run is resumable: interrupted, the same config run
// again goes on after its last finished sample (dataset_attribution.hpp).
ConfiguredAttribution run_configured_attribution(const runtime::LoadedModel& model, const config::RunConfig& config,
                                                 const ConfiguredOptions& options);

// What a sweep's summary reads back from a configured attribution run's manifest (ember
// sweep --collect, a Slurm sweep's summary job): its run id and prompt tokens (summed over
// a dataset's samples), as run_configured_attribution returned them.
struct AttributionSummary {
    std::string run_id;
    std::size_t prompt_tokens = 0;
};
AttributionSummary summary_from_manifest(const boost::json::object& manifest);

}  // namespace ember::attribution
