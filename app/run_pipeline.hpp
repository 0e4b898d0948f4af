// Where a run happens, decided by its caller and passed as a value: every run that loads
// an experiment (a generation, a single-prompt run, a dataset run, each run of a sweep)
// runs in a supervised worker (supervised_run.hpp), so plugin code that crashes, exits or
// hangs ends that run with a record, never the `ember` process; a run without one runs
// here (run_job.hpp, dataset_job.hpp), the disabled path unchanged.
//
//   const RunOutcome done = execute_run(config, model, options, supervision_for(config, options));
#pragma once

#include "config/run_config.hpp"
#include "extract/dataset_extraction.hpp"
#include "run_job.hpp"

namespace ember::app {

enum class Supervision {
    InThisProcess,  // no experiment, or an observer attached in code (which cannot cross processes)
    Worker,         // in `ember run --worker`, supervised by this process
};

// Worker when the config loads an experiment, unless `options` carries an observer.
Supervision supervision_for(const config::RunConfig& config, const RunOptions& options = {});

// The generation run of `config` (run_job.hpp); a supervised one throws ember::Error with
// the worker's failure, or with its crash when it did not finish (run.json says "crashed").
RunOutcome execute_run(const config::RunConfig& config, const LoadedModel& model, const RunOptions& options,
                       Supervision supervision);

// The dataset run of `config` (dataset_job.hpp), as execute_run.
extract::DatasetResult execute_dataset_run(const LoadedModel& model, const config::RunConfig& config,
                                           const extract::DatasetRunOptions& options, Supervision supervision);

}  // namespace ember::app
