// One dataset run, as `ember extract --dataset` and `ember sweep` do it: the composed
// experiments (when the config has any) created once, told on_model_loaded, called per
// sample and finished however the run ends; then the extraction
// (extract/dataset_extraction.hpp).
#pragma once

#include "config/run_config.hpp"
#include "extract/dataset_extraction.hpp"
#include "runtime/loaded_model.hpp"

namespace ember::app {

extract::DatasetResult execute_dataset_run(const runtime::LoadedModel& model, const config::RunConfig& config,
                                           extract::DatasetRunOptions options);

}  // namespace ember::app
