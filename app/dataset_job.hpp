// One dataset run in this process, as `ember extract --dataset` and `ember sweep` do it
// (callers go through run_pipeline.hpp, which runs it in a supervised worker when it loads
// an experiment): the composed experiments (when the config has any) created once, told
// on_model_loaded, called per sample and finished however the run ends; then the
// extraction (extract/dataset_extraction.hpp).
#pragma once

#include "config/run_config.hpp"
#include "experiments/stage_record.hpp"
#include "extract/dataset_extraction.hpp"
#include "runtime/loaded_model.hpp"

namespace ember::app {

// `stages`, when set (a supervised worker's shared record), is where the runner publishes
// each call into plugin code and the sample it is evaluating.
extract::DatasetResult run_dataset_in_this_process(const runtime::LoadedModel& model, const config::RunConfig& config,
                                                   extract::DatasetRunOptions options,
                                                   experiments::StageRecord* stages = nullptr);

}  // namespace ember::app
