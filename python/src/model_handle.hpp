// The engine side of `ember.Model` (docs/python.md): one model file opened once, and the
// runs Python asks for, made of the same engine calls the CLI makes, so the numbers are
// the CLI's bit for bit:
//   run()      ember extract's single-prompt path (encode_prompt, resolve, a Session's
//              prefill with an Extractor), with Python hooks and .so experiments chained
//              before the extractor as `ember run` chains its experiments;
//   generate() ember generate's loop (runtime::generate with the same sampling options);
//   extract_dataset() ember extract --dataset (app/dataset_job's run_dataset_in_this_process).
// Nothing here knows Python but the hooks' type: the bindings (bindings.cpp) convert.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "config/run_config.hpp"
#include "extract/extractor.hpp"
#include "record/manifest.hpp"
#include "runtime/generate.hpp"
#include "runtime/loaded_model.hpp"
#include "runtime/prompt.hpp"
#include "runtime/session.hpp"

namespace ember::python {

class PythonHooks;

struct ModelOptions {
    std::filesystem::path path;
    std::string route = "fast";
    std::uint32_t threads = 0;  // 0: every hardware thread, as --threads 0
    std::uint32_t ctx = 0;      // 0: the default context length
    std::string kv_type = "f32";
    std::string arch;           // empty: the file's own
};

// An experiment plugin and its config (the [experiment.config] table as JSON text).
struct ExperimentArg {
    std::string plugin;
    std::string config_json = "{}";
};

// One prefill of a prompt: what ember extract --prompt is asked for.
struct RunRequest {
    std::string prompt;
    config::AddBos add_bos = config::AddBos::Auto;
    std::string stages = "after_layer";      // --stages
    std::string layers = "all";              // --layers
    std::string positions = "all";           // --positions, unless select is given
    std::optional<std::string> select;       // --select SPEC
    std::string logits = "last";             // --logits
    std::vector<ExperimentArg> experiments;  // run first, in order (as [[experiment]])
    std::string failure = "strict";          // hooks.failure: strict | fail_open
};

// What a run computed. Owns the captured values: NumPy arrays are views into it.
struct RunResult {
    runtime::EncodedPrompt prompt;
    std::unique_ptr<extract::Extractor> extractor;
    std::string route;
    std::string variant;  // the kernels' CPU variant
    std::size_t threads = 0;
};

struct GenerateRequest {
    std::string prompt;
    config::AddBos add_bos = config::AddBos::Auto;
    std::size_t max_tokens = 32;
    runtime::SamplingOptions sampling;
};

struct GenerateResult {
    std::vector<std::int32_t> prompt_tokens;
    runtime::GenerationResult result;
    std::string route;
    std::string variant;
};

class ModelHandle {
public:
    explicit ModelHandle(const ModelOptions& options);

    // The loaded model; ember::Error naming the path once close() was called.
    const runtime::LoadedModel& model() const { return *shared_model(); }
    std::shared_ptr<const runtime::LoadedModel> shared_model() const;
    const ModelOptions& options() const { return options_; }
    runtime::Route route() const { return route_; }
    std::size_t threads() const;
    bool closed() const { return model_ == nullptr; }
    // Drops the engine's model and session; arrays already handed out stay valid.
    void close();

    // Holds the model for one run: ember::Error when it is running already (a hook
    // calling back into its own model) or closed.
    class Busy {
    public:
        explicit Busy(ModelHandle& handle);
        ~Busy();
        Busy(const Busy&) = delete;
        Busy& operator=(const Busy&) = delete;

    private:
        ModelHandle& handle_;
    };

    // Checks the request (stages, layers, positions against the model and prompt) and
    // the hooks' sites, then evaluates. `hooks` may be null; when set the evaluation
    // gets a session of its own, which the hooks' views keep alive.
    std::shared_ptr<RunResult> run(const RunRequest& request, PythonHooks* hooks);
    GenerateResult generate(const GenerateRequest& request);
    // The extraction's resolved selection without running: what run() would record.
    config::OutputSection output_section(const RunRequest& request) const;

    // A run config for the dataset extraction ember extract --dataset makes.
    config::RunConfig dataset_config() const;

private:
    // The session a run without Python hooks reuses (reset before each run), made again
    // when a run needs more rows or every row's logits.
    runtime::Session& shared_session(std::size_t rows, bool all_logits);
    std::shared_ptr<runtime::Session> new_session(std::size_t rows, bool all_logits) const;

    ModelOptions options_;
    runtime::Route route_;
    std::shared_ptr<const runtime::LoadedModel> model_;
    std::shared_ptr<runtime::Session> session_;
    std::size_t session_rows_ = 0;
    bool session_all_logits_ = false;
    std::atomic<bool> busy_{false};
};

}  // namespace ember::python
