// `[attribute]` with `[dataset]` (docs/attribution.md, "Run configs, grids and datasets"):
// every sample one attribution run, its files named "sampleI." + the single run's names, in
// one sealed directory. Resumable as a dataset extraction is (extract/dataset_outputs.hpp):
// samples.jsonl (one line per sample: its manifest record) grows as samples.jsonl.partial
// (record/partial_file.hpp), and after each finished sample, its files in place, the line
// is flushed and progress.json (written atomically) records the samples done, the line
// file's size, the run id and the time spent. A process given the same run key (the
// config's canonical JSON, the dataset's and the model's SHA-256) in that directory cuts
// samples.jsonl back to that size and goes on after the last finished sample, so every file
// of the finished directory is what an uninterrupted run writes, byte for byte, and the
// manifest too but for its run id (the interrupted run's), its timing and their seal.
#pragma once

#include "attribution/attribution.hpp"
#include "attribution/configured_options.hpp"
#include "config/run_config.hpp"

namespace ember::attribution {

// ember::Error when the request names what goes with a corrupted prompt without one.
void check_pairing(const AttributeRequest& request);

// The dataset run of `config` (dataset.path set), `base` its request with the run record.
ConfiguredAttribution run_dataset_attribution(const runtime::LoadedModel& model, const GradientModel& gradient_model,
                                              const config::RunConfig& config, AttributeRequest base,
                                              const ConfiguredOptions& options);

}  // namespace ember::attribution
