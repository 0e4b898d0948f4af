#include "dataset_job.hpp"

#include <memory>

#include "experiments/experiment_runner.hpp"

namespace ember::app {

extract::DatasetResult run_dataset_in_this_process(const runtime::LoadedModel& model, const config::RunConfig& config,
                                                   extract::DatasetRunOptions options, experiments::StageRecord* stages) {
    std::unique_ptr<experiments::ExperimentRunner> runner;
    if (!config.experiments.empty()) {
        const experiments::RunInfo info{"", config.output.dir.string(), model.path.string(), model.sha256,
                                        config.model.route, config::config_hash(config), {}, {}, {}};
        runner = std::make_unique<experiments::ExperimentRunner>(
            experiments::specs_from_config(config), info,
            experiments::RunnerOptions{config.hooks.failure, config.hooks.timeout_ms, {}, stages, {}});
        runner->on_model_loaded(model.model->config());
    }
    options.experiments = runner.get();
    extract::DatasetResult r;
    try {
        r = extract::run_dataset_extraction(model, config, options);
    } catch (...) {
        if (runner) runner->finish();
        throw;
    }
    if (runner) runner->finish();
    return r;
}

}  // namespace ember::app
