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

#include <string>

#include "attribution/attribution.hpp"
#include "attribution/configured_options.hpp"
#include "config/run_config.hpp"

namespace ember::attribution {

// The request of `config` (which has [attribute]) for one prompt; the output selection is
// [output]'s. ember::Error naming the key for what the section cannot mean.
AttributeRequest request_from_config(const config::RunConfig& config, std::size_t threads);

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
