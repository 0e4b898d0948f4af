// One configured run in this process, what `ember run` does after parsing its command
// line. Callers go through run_pipeline.hpp, which decides where the run happens (here,
// or in a supervised worker when it loads an experiment); the worker calls
// run_in_this_process itself.
//
//   const LoadedModel model(config.model.path, arch);   // may serve several runs (sweeps)
//   RunOutcome done = execute_run(config, model, {.on_token = print}, supervision_for(config, {}));
//
// The steps (run_job.cpp, one function each, in this order):
//   resolve inputs  a run id; the prompt read and tokenized (an extraction's layers and
//                   positions checked against the model and prompt); every input hashed
//                   (the inputs record);
//   lock            the output directory created and locked (one run per directory: a
//                   directory holding an earlier run is refused, or with overwrite
//                   replaced by a staging directory swapped in at the end;
//                   record/run_directory.hpp); none for a run that records nothing;
//   load            the trace journal when [tracing] asks; the composed experiments loaded
//                   and created, on_model_loaded; the session;
//   evaluate        before_prefill (where an experiment may rewrite the prompt, which is
//                   then tokenized again, or skip the inference: its ids are the result);
//                   the generation loop (the experiments, then the extraction when
//                   [output] extract = true, at every stage site); on_generation_complete;
//                   the instances destroyed; the journal finished;
//   write and seal  the extraction's arrays, then run.json, then manifest.json last, which
//                   lists every file of the directory (experiment outputs included) with
//                   its checksum, so `ember verify` can check the whole directory
//                   (docs/formats.md);
//   report          the RunOutcome.
// With no experiment the runner is never built and the loop is given no hooks: the
// forward pass is the DisabledHooks instantiation.
//
// A failure after the output directory exists (an experiment, the trace, the extraction,
// a full disk) still writes run.json (outcome "failed", the error, failed_during, what
// was generated so far), but no trace journal and no manifest; when run.json cannot be
// written (a full disk), the failed run's files are removed to make room and it is
// written again; when even that fails, stderr says so and no run.json is left. Then the
// error propagates: ExperimentFailure for a strict experiment failure (on_error was told
// first), any other error after the experiments are told through on_error. Under
// fail_open a failing experiment is listed in run.json and the run goes on.
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

// What the experiments' 1.1 lifecycle requests changed (docs/experiments.md, "Skipping and
// rewriting"); run.json's "lifecycle", the manifest's too when anything changed.
struct Lifecycle {
    std::string skipped_by;       // the experiment that supplied the result; empty: computed
    std::string rewritten_by;     // the experiment that rewrote the prompt; empty: not rewritten
    std::string original_prompt;  // set with rewritten_by: the text before the rewrite
    std::string prompt;           // set with rewritten_by: the text the run's tokens were made from

    bool changed() const { return !skipped_by.empty() || !rewritten_by.empty(); }
};
// {"result": "computed"|"supplied", "skipped_by": NAME|null,
//  "prompt_rewrite": null|{"experiment": NAME, "original_text": ..., "text": ...}}
boost::json::object lifecycle_json(const Lifecycle& lifecycle);

struct RunOptions {
    std::function<void(std::int32_t)> on_token;  // each generated token as soon as it is chosen
    // An observer that sees every operation of the run instead of the journal that
    // [tracing] asks for (null: the journal when tracing.enabled, else none).
    kernels::OpObserver* observer = nullptr;
    bool overwrite = false;  // replace an earlier run in the output directory (as [output] overwrite)
    // With the directory locked: when it holds a current result of this config (verified,
    // same config hash, same input digests; record::current_result), throw
    // record::RunNotNeeded instead of running (a sweep; another sweep made it meanwhile).
    bool skip_if_current = false;
    // false: no output directory, run.json or manifest (ember generate, which prints only).
    bool record = true;
    std::string run_id;  // empty: a new one (make_run_id)
    // Called once after the before_prefill round when an experiment skipped or rewrote
    // (the worker tells its supervisor, whose crash record then says so).
    std::function<void(const Lifecycle&)> on_lifecycle;
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
    Lifecycle lifecycle;
    // prompt.target (--target): its score, after the generation in an evaluation of its own
    // through the run's experiments (extract::score_prompt_target); none for a skipped run.
    std::optional<boost::json::object> target;
    // A run with experiments or SAEs (not skipped): what they did to the next-token
    // distribution against the same prompt without them (intervention_effect.hpp).
    std::optional<boost::json::object> effect;
};

// The run, here. `stages`, when set (a supervised worker's shared record), is where the
// experiments' runner publishes each call into plugin code.
RunOutcome run_in_this_process(const config::RunConfig& config, const LoadedModel& model, const RunOptions& options,
                               experiments::StageRecord* stages = nullptr);

// run.json's "model": path, sha256, name, family, n_layers, n_embd, n_vocab.
boost::json::object model_json(const LoadedModel& model);

// A new run id: UTC time and 32 random bits, "20250101T120000Z-1a2b3c4d".
std::string make_run_id();

}  // namespace ember::app
