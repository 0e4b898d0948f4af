// Hidden-state extraction, end to end: the prompt through one prefill evaluation with an
// Extractor attached, then the run directory written (arrays, logits, logit lens, the
// manifest last). `ember extract` calls run_extraction(); a generation run that also
// extracts attaches an Extractor itself and calls write_extraction() after it.
//
//   const runtime::LoadedModel model(config.model.path, arch);
//   const auto result = extract::run_extraction(model, config);
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "config/run_config.hpp"
#include "extract/extractor.hpp"
#include "record/manifest.hpp"
#include "record/run_directory.hpp"
#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "runtime/loaded_model.hpp"
#include "runtime/prompt.hpp"
#include "runtime/session.hpp"
#include "runtime/threads.hpp"
#include "tokenizer/tokenizer.hpp"
#include "trace/journal.hpp"

namespace ember::extract {

using runtime::LoadedModel;

// What the manifest says about the run besides the arrays.
struct RunRecord {
    std::string kind = "ember.extraction";  // "ember.run" for `ember run`'s output directory
    std::string run_id;                      // empty: none (ember extract)
    std::string route;
    std::string variant;
    std::string config_hash;
    boost::json::object config;  // config::to_json of the run config
    std::optional<trace::JournalSummary> trace;  // its path as configured (not the staging one)
    boost::json::array inputs;                   // record::inputs_json of the run's inputs
    std::size_t threads = 0;                     // recorded, not hashed (results do not depend on it)
    // ember run: what the experiments' lifecycle requests changed (a skip, a rewritten
    // prompt; app/run_job.hpp lifecycle_json); null: nothing, and the manifest has no "lifecycle".
    boost::json::value lifecycle = nullptr;
    // extract --sae: the SAE feature arrays' entries (sae_extraction.hpp); null: none, and
    // the manifest has no "sae_features".
    boost::json::value sae_features = nullptr;
    // A single prompt's --target scored (target_scoring.hpp target_record): written as
    // targets.jsonl and targets.npy, as a dataset run's, and listed as the manifest's "targets".
    std::optional<boost::json::object> target;
};

// Writes every capture, the logits dump and the logit lens of `extractor` (none when
// null) into `writer`, calls `before_manifest` (ember run writes run.json there), then
// the manifest listing every file of the directory. `route`/`threads` run the lens.
void write_extraction(record::RunDirectoryWriter& writer, const Extractor* extractor, const LoadedModel& model,
                      const runtime::EncodedPrompt& prompt, const RunRecord& run, runtime::Route route, std::size_t threads,
                      const std::function<void()>& before_manifest = {});

struct ExtractionResult {
    std::filesystem::path dir;
    std::size_t n_tokens = 0;
    std::size_t arrays = 0;  // .npy files written
    std::optional<trace::JournalSummary> trace;
    double prefill_ms = 0;
    double write_ms = 0;
    std::optional<boost::json::object> target;  // --target: its score (target_record)
};

struct ExtractionOptions {
    std::function<void(const record::FileRecord&)> on_file_written;  // see record::RunDirectoryWriter
    bool overwrite = false;  // --overwrite: as [output] overwrite = true
};

// Runs the extraction `config` describes ([model], [prompt], [output], [tracing]) on
// `model`. Throws ember::Error; a failure leaves no manifest in the output directory (and
// an earlier run it was to replace in place).
ExtractionResult run_extraction(const LoadedModel& model, const config::RunConfig& config,
                                const ExtractionOptions& options = {});

// A single prompt's target (prompt.target) scored on `session` (reset first). `stepwise`
// false: one prefill of prompt + target with every row's logits, as a dataset sample's.
// true (a run with experiments or SAEs, through `hooks`): as the generation would see it,
// the prompt's prefill, then one decode evaluation per target token (teacher forcing), so
// an experiment's phases and positions ("last": the prompt's) mean what they mean in the
// generation, and the score is the edited model's. Returns target_record's fields;
// ember::Error when the target does not split from the prompt or the whole does not fit
// in the context.
boost::json::object score_prompt_target(runtime::Session& session, const LoadedModel& model,
                                        const runtime::EncodedPrompt& prompt, const config::PromptSection& section,
                                        hooks::ActiveHooks* hooks = nullptr, bool stepwise = false);

}  // namespace ember::extract
