// One configured run, what `ember run` does after parsing its command line:
//
//   const LoadedModel model(config.model.path, arch);   // may serve several runs (sweeps)
//   RunOutcome done = execute_run(config, model, {.on_token = print});
//
// In order: a run id is made; the prompt is tokenized (and an extraction's layers and
// positions checked against the model and prompt); the output directory is created (and
// an earlier manifest.json in it removed); the composed experiments are loaded and
// created; on_model_loaded; the session (with the trace journal when [tracing] asks);
// before_prefill; the generation loop (the experiments, then the extraction when
// [output] extract = true, at every stage site); on_generation_complete; the instances
// are destroyed; run.json is written into the output directory (temporary name, then
// rename); then the extraction's arrays, and manifest.json last, which lists run.json,
// the journal (when it lies in the directory) and the arrays with their checksums, so
// `ember verify` can check the whole directory (docs/formats.md).
// With no experiment the runner is never built and the loop is given no hooks: the
// forward pass is the DisabledHooks instantiation. With one, the whole run happens in a
// supervised worker process (supervised_run.hpp), unless options.observer is set.
//
// A failure after the output directory exists still writes run.json (outcome "failed",
// the error, what was generated so far), but no trace journal and no manifest, and then
// propagates: ExperimentFailure for a strict experiment failure (on_error was told
// first), any other error after the experiments are told through on_error. Under fail_open a failing experiment is listed
// in run.json and the run goes on. A supervised run throws ember::Error with the same
// message, or with the crash's when its worker did not finish (run.json says "crashed").
#pragma once

#include <boost/json/object.hpp>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/run_config.hpp"
#include "experiments/stage_record.hpp"
#include "gguf/gguf_file.hpp"
#include "kernels/ops.hpp"
#include "models/model.hpp"
#include "runtime/generate.hpp"
#include "runtime/loaded_model.hpp"
#include "tokenizer/tokenizer.hpp"
#include "trace/journal.hpp"

namespace ember::app {

using runtime::LoadedModel;  // one model may serve several runs (sweeps)

// "auto" -> nullopt, else the family of that name (the config parser checked it).
std::optional<models::Family> family_from_config(const config::RunConfig& config);

struct RunOptions {
    std::function<void(std::int32_t)> on_token;  // each generated token as soon as it is chosen
    // An observer that sees every operation of the run instead of the journal that
    // [tracing] asks for (null: the journal when tracing.enabled, else none).
    kernels::OpObserver* observer = nullptr;
    std::string run_id;  // empty: a new one (make_run_id)
    // Set in a supervised worker (supervised_run.hpp): the run happens in this process and
    // the runner publishes each stage it enters here.
    experiments::StageRecord* progress = nullptr;
};

struct RunOutcome {
    std::string run_id;
    std::vector<std::int32_t> prompt_tokens;
    runtime::GenerationResult result;
    std::vector<std::string> experiment_failures;  // fail_open: the failures the run went past
    std::filesystem::path report;                  // run.json
    std::size_t threads = 0;
    std::string route;
    std::string variant;                         // the kernels' CPU variant
    std::optional<trace::JournalSummary> trace;  // [tracing]: the journal written
    std::size_t arrays = 0;                      // [output] extract: .npy files written
    std::filesystem::path manifest;              // the output directory's manifest.json
    std::string config_hash;
};

RunOutcome execute_run(const config::RunConfig& config, const LoadedModel& model, const RunOptions& options = {});

// run.json's "model": path, sha256, name, family, n_layers, n_embd, n_vocab.
boost::json::object model_json(const LoadedModel& model);

// A new run id: UTC time and 32 random bits, "20250101T120000Z-1a2b3c4d".
std::string make_run_id();

}  // namespace ember::app
