#include "run_pipeline.hpp"

#include "common/error.hpp"
#include "dataset_job.hpp"
#include "supervised_run.hpp"

namespace ember::app {

Supervision supervision_for(const config::RunConfig& config, const RunOptions& options) {
    return !config.experiments.empty() && options.observer == nullptr ? Supervision::Worker : Supervision::InThisProcess;
}

RunOutcome execute_run(const config::RunConfig& config, const LoadedModel& model, const RunOptions& options,
                       Supervision supervision) {
    if (supervision == Supervision::InThisProcess) return run_in_this_process(config, model, options);
    if (options.observer != nullptr) throw Error("a run with an observer cannot run in a worker (it cannot cross processes)");
    return supervise_run(config, model, options);
}

extract::DatasetResult execute_dataset_run(const LoadedModel& model, const config::RunConfig& config,
                                           const extract::DatasetRunOptions& options, Supervision supervision) {
    if (supervision == Supervision::InThisProcess) return run_dataset_in_this_process(model, config, options);
    if (options.experiments != nullptr || options.on_batch)
        throw Error("a supervised dataset run takes no runner and no batch callback (they cannot cross processes)");
    return supervise_dataset_run(model, config, options);
}

}  // namespace ember::app
