// ExperimentRunner: the loaded experiments of one run, behind hooks::ActiveHooks.
//
// The generation loop drives it in this order (the family code calls the tensor stages):
//
//   ExperimentRunner runner(specs, run_info, options); // loads every plugin, then creates
//                                                      // one instance per spec, in order
//   runner.on_model_loaded(model_config);
//   runner.before_prefill(prefill_eval);
//   forward(prefill_eval, runner);                     // before_layer ... after_logits
//   for each decode step: forward(decode_eval, runner);
//   runner.on_generation_complete(generated, stop_reason);
//   ...and on any exception on the way: runner.notify_error(e.what()); then rethrow.
//   runner.finish();                                   // destroys the instances (the
//                                                      // destructor does it too)
//
// At every stage the experiments run in composition order and each sees the previous
// one's writes (they share the engine's buffer). A stage a plugin does not implement is
// skipped. A failure is a non-OK status, or a call that returns after timeout_ms; its
// message reads exactly
//   experiment 'NAME' failed in STAGE (phase=decode, layer=7): MESSAGE
// (create / on_model_loaded / on_generation_complete / on_error carry no parenthesis,
// before_prefill and the logits stages carry only the phase).
// - strict: on_error is told (once, by every experiment still enabled), then
//   ExperimentFailure is thrown; no later stage runs, on_generation_complete is not called.
// - fail_open: the failure is logged and recorded; that experiment is never called again.
// In both, the first failure stays first: later ones (an on_error failing, say) are
// recorded after it and never replace it.
//
// Plugin load errors (missing file, no entry symbol, wrong ABI) are ember::Error and stop
// the run whatever the policy. The tensor-stage dispatch allocates nothing.
//
// The 1.1 lifecycle services (skip_inference, rewrite_prompt) are answered during the
// before_prefill round only, as options.lifecycle allows; the first request of each kind
// in composition order wins. After the round the caller reads skip() and rewrite(), makes
// the run's tokens from the rewritten text (set_prompt_tokens) and, for a skip, feeds the
// supplied ids through on_token and calls on_generation_complete(n, StopReason::Skipped)
// without evaluating anything (app/run_job.cpp).
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.hpp"
#include "config/run_config.hpp"
#include "ember/plugin.h"
#include "experiments/plugin_library.hpp"
#include "experiments/stage_record.hpp"
#include "hooks/hooks.hpp"
#include "hooks/stop_reason.hpp"
#include "models/model_config.hpp"

namespace ember::experiments {

// What the host tells every experiment about the run (ember_run_info).
struct RunInfo {
    std::string run_id;
    std::string output_dir;
    std::string model_path;
    std::string model_sha256;
    std::string route;
    std::string config_hash;
    std::vector<std::uint32_t> prompt_token_ids;
    // The prompt services (1.2): its text and each token's byte span (none in a dataset
    // run, whose samples set_prompt gives).
    std::string prompt_text;
    std::vector<ember_token_span> prompt_token_spans;
};

struct ExperimentSpec {
    std::filesystem::path plugin;
    std::string config_json = "{}";  // the [experiment.config] table as JSON text
    std::filesystem::path base_dir;  // relative paths inside the config are relative to it
    std::string origin;              // where it was declared, for messages and run.json
};

// Builds the specs from a parsed run config (same order).
std::vector<ExperimentSpec> specs_from_config(const config::RunConfig& config);

enum class LogLevel { Debug, Info, Warning, Error };
// Receives plugin log lines and the runner's own warnings (fail_open failures).
using LogSink = std::function<void(LogLevel level, std::string_view experiment, std::string_view message)>;

// What the lifecycle services may do in this run (docs/experiments.md, "Skipping and
// rewriting"). By default both are refused as unsupported: only the host code that can
// honour them (ember run without an extraction) allows them.
struct LifecyclePolicy {
    bool allow_skip = false;
    bool allow_rewrite = false;
    // Why they are refused when not allowed (after "skip_inference refused: ").
    std::string refusal = "this run cannot honour it (an extraction needs the evaluation's activations)";
    std::size_t max_supplied_tokens = 0;  // skip_inference's ids: at most this many (generation.max_tokens)
    std::uint32_t vocabulary_size = 0;    // and each below it (0: the model's n_vocab)
    std::uint64_t max_prompt_bytes = 0;   // rewrite_prompt's text: at most this many bytes (0: max_input_bytes())
};

// A skip_inference request the run honours.
struct SkipRequest {
    std::string experiment;
    std::vector<std::uint32_t> ids;
};

// A rewrite_prompt request the run honours.
struct PromptRewrite {
    std::string experiment;
    std::string text;
};

struct RunnerOptions {
    config::FailurePolicy failure = config::FailurePolicy::Strict;
    std::uint32_t timeout_ms = 0;  // 0 = no timeout
    LogSink log;                   // empty: lines go to stderr as "[NAME] level: message"
    // A supervised worker's shared record (stage_record.hpp): set around every call into a plugin.
    StageRecord* progress = nullptr;
    LifecyclePolicy lifecycle;
};

// Why a generation ended: the host's list (hooks/stop_reason.hpp), each value its ABI code.
using hooks::StopReason;

enum class Outcome {
    Ok,        // every call it received succeeded
    Failed,    // it failed under the strict policy and stopped the run
    Disabled,  // it failed under fail_open and was not called again
    NotRun,    // never created: the run stopped before its turn
};
std::string_view outcome_name(Outcome outcome);  // "ok", "failed", "disabled", "not_run"

struct StageTiming {
    std::uint64_t calls = 0;
    std::uint64_t total_ns = 0;
    std::uint64_t max_ns = 0;
};

// A file an experiment read through the host (plugin.h's read_input): an input of the run.
struct ReadInput {
    std::string path;    // absolute
    std::string sha256;  // of the bytes the experiment got
    std::uint64_t bytes = 0;
};

// What run.json records about one experiment.
struct ExperimentRecord {
    std::shared_ptr<const PluginLibrary> library;
    ExperimentSpec spec;
    Outcome outcome = Outcome::NotRun;
    std::string failure;  // the full failure message; empty when it never failed
    std::array<StageTiming, kStageCount> timings{};  // indexed by StageId
    std::vector<ReadInput> read_inputs;  // in the order it read them
};

// Everything run.json says about the experiments of a run (run_report.hpp writes it).
struct RunnerSnapshot {
    config::FailurePolicy failure = config::FailurePolicy::Strict;
    std::uint32_t timeout_ms = 0;
    std::vector<ExperimentRecord> records;  // composition order
    std::vector<std::string> failures;      // in the order they happened
};

// A strict-policy failure: the run stops. what() is the exact failure message.
class ExperimentFailure : public Error {
public:
    ExperimentFailure(const std::string& message, std::string experiment, StageId stage)
        : Error(message), experiment_(std::move(experiment)), stage_(stage) {}
    const std::string& experiment() const { return experiment_; }
    StageId stage() const { return stage_; }

    // Set when a create failure ends the runner's constructor: the caller never gets the
    // runner, so what it would have reported travels with the failure.
    const std::optional<RunnerSnapshot>& snapshot() const { return snapshot_; }
    void set_snapshot(RunnerSnapshot snapshot) { snapshot_ = std::move(snapshot); }

private:
    std::string experiment_;
    StageId stage_;
    std::optional<RunnerSnapshot> snapshot_;
};

class ExperimentRunner final : public hooks::ActiveHooks {
public:
    // Loads every plugin first (any load error throws ember::Error before anything is
    // created), then creates the instances in order. A failing create follows the policy:
    // strict throws ExperimentFailure (instances already made are told on_error and
    // destroyed) carrying the runner's snapshot().
    ExperimentRunner(const std::vector<ExperimentSpec>& specs, RunInfo run, RunnerOptions options);
    ~ExperimentRunner() override;
    ExperimentRunner(const ExperimentRunner&) = delete;
    ExperimentRunner& operator=(const ExperimentRunner&) = delete;

    void on_model_loaded(const models::ModelConfig& model);
    // The before_prefill round; the only time the lifecycle services answer.
    void before_prefill(const hooks::EvalInfo& prefill);

    // What the before_prefill round asked for (the first request of each kind), if anything.
    const std::optional<SkipRequest>& skip() const { return skip_; }
    const std::optional<PromptRewrite>& rewrite() const { return rewrite_; }
    // The tokens of the rewritten prompt: from now on run_info's prompt_token_ids and the
    // contexts' prompt_tokens. (The original ids stay valid: a plugin may hold their span.)
    void set_prompt_tokens(std::vector<std::uint32_t> ids);

    // Every tensor stage: each enabled experiment that implements and subscribes to it.
    void stage(hooks::Stage stage, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView tensor) override;
    // Whether any enabled experiment implements and subscribes to `stage`.
    bool wants(hooks::Stage stage) const override { return (subscribed_ & hooks::stage_bit(stage)) != 0; }

    // A token the generation chose (the 1.1 host service generated_token_ids shows them).
    void on_token(std::uint32_t token) { generated_.push_back(token); }

    // The prompt the 1.2 prompt services show from now on (a dataset run's next sample,
    // before its before_prefill); the run info's prompt_token_ids stay the run's.
    void set_prompt(std::string text, std::vector<std::uint32_t> ids, std::vector<ember_token_span> spans);
    // A dataset run's next sample, published in options.progress (a supervised worker's
    // crash record then names it); nothing without a progress record.
    void set_sample(std::size_t index, std::size_t line, std::string_view id) {
        if (options_.progress) options_.progress->set_sample(index, line, id);
    }

    void on_generation_complete(std::size_t generated_tokens, StopReason reason);

    // The run failed (for any reason): tells on_error to every experiment still enabled,
    // the first time only; later calls do nothing. The runner calls it itself before
    // throwing a strict failure. `generated_tokens` defaults to the tokens generated so
    // far as the runner saw them (the decode step of the last evaluation).
    void notify_error(std::string_view message, std::optional<std::size_t> generated_tokens = std::nullopt);

    // Destroys every instance (in reverse creation order); idempotent.
    void finish();

    // True once the run failed (a strict failure, or notify_error).
    bool halted() const { return halted_; }
    // Every failure message in the order they happened; front() is the first.
    const std::vector<std::string>& failures() const { return failures_; }
    std::vector<ExperimentRecord> records() const;
    RunnerSnapshot snapshot() const;
    const RunnerOptions& options() const { return options_; }

private:
    struct Entry;
    struct Site;

    void create_all();
    void update_subscriptions();
    template <class Call>
    void call(Entry& entry, const Site& site, Call&& call);
    void fail(Entry& entry, const Site& site, std::string_view detail);
    ember_execution_context execution_context(const hooks::EvalInfo& eval) const;
    ember_generation_context generation_context(std::uint32_t stop_reason, std::size_t generated) const;
    double elapsed_ms() const;
    void log(LogLevel level, std::string_view experiment, std::string_view message) const;
    static void host_log(void* host_data, std::uint32_t level, const char* message) noexcept;
    static std::uint64_t host_generated_token_ids(void* host_data, const std::uint32_t** ids) noexcept;
    static ember_status host_skip_inference(void* host_data, const std::uint32_t* ids, std::uint64_t count,
                                            ember_error_buffer* reason) noexcept;
    static ember_status host_rewrite_prompt(void* host_data, const char* text, std::uint64_t length,
                                            ember_error_buffer* reason) noexcept;
    // Writes "WHAT refused: WHY" into `reason` (may be null) and the log, and returns `code`.
    ember_status refuse(const Entry& e, std::string_view what, ember_status code, std::string_view why,
                        ember_error_buffer* reason) const;
    template <class Request, class Decide>
    static ember_status lifecycle_request(void* host_data, std::string_view what, bool LifecyclePolicy::*allowed,
                                          std::optional<Request> ExperimentRunner::*earlier, ember_error_buffer* reason,
                                          Decide&& decide) noexcept;
    static std::uint64_t host_prompt_text(void* host_data, const char** text) noexcept;
    static std::uint64_t host_prompt_token_ids(void* host_data, const std::uint32_t** ids) noexcept;
    static std::uint64_t host_prompt_token_spans(void* host_data, const ember_token_span** spans) noexcept;
    static ember_status host_read_input(void* host_data, const char* path, const std::uint8_t** bytes,
                                        std::uint64_t* size, ember_error_buffer* reason) noexcept;

    RunInfo run_;
    RunnerOptions options_;
    std::uint64_t timeout_ns_ = 0;
    std::vector<std::unique_ptr<Entry>> entries_;
    std::vector<std::string> failures_;
    hooks::StageMask subscribed_ = 0;  // union of the enabled entries' stages
    std::vector<std::uint32_t> generated_;
    const Entry* in_before_prefill_ = nullptr;  // the entry whose before_prefill is running
    std::optional<SkipRequest> skip_;
    std::optional<PromptRewrite> rewrite_;
    const Entry* skip_owner_ = nullptr;  // who made each request
    const Entry* rewrite_owner_ = nullptr;
    std::vector<std::uint32_t> rewritten_prompt_ids_;
    // The current prompt of the prompt services (run_'s until set_prompt).
    std::string prompt_text_;
    std::vector<std::uint32_t> prompt_ids_;
    std::vector<ember_token_span> prompt_spans_;

    ember_model_context model_context_{};
    std::vector<ember_layer_context> layer_contexts_;  // per layer: its geometry (execution set per call)
    std::string model_name_;
    bool model_loaded_ = false;
    bool halted_ = false;
    bool error_notified_ = false;
    bool started_ = false;
    std::chrono::steady_clock::time_point prefill_start_{};
    std::size_t prompt_tokens_ = 0;
    std::size_t last_step_ = 0;
};

}  // namespace ember::experiments
