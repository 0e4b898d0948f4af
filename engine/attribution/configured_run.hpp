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

#include <filesystem>

#include "attribution/attribution.hpp"
#include "config/run_config.hpp"

namespace ember::attribution {

struct ConfiguredAttribution {
    std::filesystem::path dir;
    std::size_t samples = 0;     // 1 for a single prompt
    std::size_t prompt_tokens = 0;
    std::size_t arrays = 0;
    double metric = 0.0;         // a single prompt's; a dataset run's first sample's
    double forward_ms = 0.0, backward_ms = 0.0;
};

// The request of `config` (which has [attribute]) for one prompt; the output selection is
// [output]'s. ember::Error naming the key for what the section cannot mean.
AttributeRequest request_from_config(const config::RunConfig& config, std::size_t threads);

// Runs it (every sample of a dataset checked before anything is written; an error names
// FILE:LINE: sample ID). `overwrite` as [output] overwrite.
ConfiguredAttribution run_configured_attribution(const runtime::LoadedModel& model, const config::RunConfig& config,
                                                 bool overwrite);

}  // namespace ember::attribution
