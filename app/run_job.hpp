// One configured run, what `ember run` does after parsing its command line:
//
//   const LoadedModel model(config.model.path, arch);   // may serve several runs (sweeps)
//   RunOutcome done = execute_run(config, model, {.on_token = print});
//
// In order: the output directory is created; a run id is made; the prompt is tokenized;
// the composed experiments are loaded and created; on_model_loaded; the session;
// before_prefill; the generation loop; on_generation_complete; the instances are
// destroyed; run.json is written into the output directory (temporary name, then rename).
// With no experiment the runner is never built and the loop is given no hooks: the
// forward pass is the DisabledHooks instantiation.
//
// A failure after the output directory exists still writes run.json (outcome "failed",
// the error, what was generated so far) and then propagates: ExperimentFailure for a
// strict experiment failure (on_error was told first), any other error after the
// experiments are told through on_error. Under fail_open a failing experiment is listed
// in run.json and the run goes on.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/run_config.hpp"
#include "gguf/gguf_file.hpp"
#include "kernels/ops.hpp"
#include "models/model.hpp"
#include "runtime/generate.hpp"
#include "tokenizer/tokenizer.hpp"

namespace ember::app {

// A model file opened for running: weights, tokenizer and the file's sha256.
struct LoadedModel {
    LoadedModel(const std::filesystem::path& path, std::optional<models::Family> expected);
    LoadedModel(const LoadedModel&) = delete;
    LoadedModel& operator=(const LoadedModel&) = delete;

    std::filesystem::path path;
    gguf::File file;  // the weights are views into its mapping
    std::unique_ptr<models::Model> model;
    tokenizer::Tokenizer tokenizer;
    std::string sha256;
    double load_ms = 0;  // map, validate, load weights and tokenizer, hash

private:
    LoadedModel(const std::filesystem::path& path, std::optional<models::Family> expected,
                std::chrono::steady_clock::time_point start);
};

// "auto" -> nullopt, else the family of that name (the config parser checked it).
std::optional<models::Family> family_from_config(const config::RunConfig& config);

struct RunOptions {
    std::function<void(std::int32_t)> on_token;  // each generated token as soon as it is chosen
    // Tracing seam: an observer that sees every operation of the run (null = none). The
    // operation journal behind `[tracing]` and `--trace` plugs in here.
    kernels::OpObserver* observer = nullptr;
};

struct RunOutcome {
    std::string run_id;
    std::vector<std::int32_t> prompt_tokens;
    runtime::GenerationResult result;
    std::vector<std::string> experiment_failures;  // fail_open: the failures the run went past
    std::filesystem::path report;                  // run.json
    std::size_t threads = 0;
    std::string route;
    std::string cpu_variant;  // the backend's kernels (Backend::variant); empty before the session exists
};

RunOutcome execute_run(const config::RunConfig& config, const LoadedModel& model, const RunOptions& options = {});

// A new run id: UTC time and 32 random bits, "20250101T120000Z-1a2b3c4d".
std::string make_run_id();

}  // namespace ember::app
