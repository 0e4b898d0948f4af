#include "run_job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <random>
#include <thread>

#include "cli.hpp"
#include "common/atomic_file.hpp"
#include "common/dir_lock.hpp"
#include "common/error.hpp"
#include "common/sha256.hpp"
#include "experiments/experiment_runner.hpp"
#include "experiments/run_report.hpp"
#include "extract/extraction.hpp"
#include "extract/inputs_record.hpp"
#include "hooks/hook_chain.hpp"
#include "generation_output.hpp"
#include "runtime/session.hpp"
#include "supervised_run.hpp"

namespace ember::app {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

experiments::StopReason experiment_stop_reason(runtime::StopReason reason) {
    switch (reason) {
        case runtime::StopReason::MaxTokens: return experiments::StopReason::MaxTokens;
        case runtime::StopReason::EndOfGeneration: return experiments::StopReason::EndOfGeneration;
        case runtime::StopReason::Skipped: return experiments::StopReason::Skipped;
    }
    return experiments::StopReason::MaxTokens;
}

// What the lifecycle services may do in this run: an extraction needs the evaluation.
experiments::LifecyclePolicy lifecycle_policy(const config::RunConfig& config, const LoadedModel& model) {
    experiments::LifecyclePolicy policy;
    policy.allow_skip = policy.allow_rewrite = !config.output.extract;
    policy.refusal = "an extraction ([output] extract = true) needs the evaluated prompt's activations";
    policy.max_supplied_tokens = config.generation.max_tokens;
    policy.vocabulary_size = static_cast<std::uint32_t>(
        std::min<std::size_t>(model.tokenizer.vocab_size(), model.model->config().n_vocab));
    return policy;
}

// A skipped run's result: the supplied ids, each told to `on_token` as a generated one would be.
runtime::GenerationResult supplied_result(const std::vector<std::uint32_t>& ids,
                                          const std::function<void(std::int32_t)>& on_token) {
    runtime::GenerationResult result;
    result.stop_reason = runtime::StopReason::Skipped;
    for (std::uint32_t id : ids) {
        result.tokens.push_back(static_cast<std::int32_t>(id));
        on_token(static_cast<std::int32_t>(id));
    }
    return result;
}

// What run.json holds (docs/run-config.md, "run.json"); `result` is null for a failed run.
struct ReportParts {
    const config::RunConfig& config;
    const std::string& config_hash;
    const LoadedModel& model;
    const RunOutcome& outcome;
    const std::string& prompt;
    const std::vector<std::int32_t>& generated;  // the tokens chosen so far
    const extract::EncodedPrompt* encoded = nullptr;  // the prompt as first encoded
    const runtime::GenerationResult* result = nullptr;
    const std::string* error = nullptr;
    bool hooks_active = false;
    std::size_t ctx = 0;
    double total_ms = 0;
    const std::optional<trace::JournalSummary>* trace = nullptr;
    const json::array* inputs = nullptr;
    std::string replaced_run_id;  // the run --overwrite replaced
    std::string failed_during;    // what the run was doing: setup, generation, trace, extraction, run.json, manifest
};

json::value trace_json(const std::optional<trace::JournalSummary>* trace) {
    if (trace == nullptr || !*trace) return nullptr;
    const trace::JournalSummary& t = **trace;
    return json::object{{"path", t.path.string()},
                        {"operations", t.operations},
                        {"evaluations", t.evaluations},
                        {"fingerprint", t.fingerprint}};
}

json::object report_json(const ReportParts& p, const experiments::RunnerSnapshot& experiments) {
    json::object prompt{{"text", valid_utf8(p.prompt)}, {"tokens", json::value_from(p.outcome.prompt_tokens)}};
    if (p.encoded && p.encoded->chat) {  // a conversation: its provenance and each token's message
        prompt["chat"] = *p.encoded->chat;
        prompt["token_messages"] = extract::token_messages_json(*p.encoded);
    }
    json::object generated{{"tokens", json::value_from(p.result ? p.result->tokens : p.generated)}};
    add_text(generated, p.model.tokenizer, p.result ? p.result->tokens : p.generated);
    if (p.result) {
        generated["steps"] = steps_json(p.model.tokenizer, p.result->steps);
        generated["stop_reason"] = runtime::stop_reason_name(p.result->stop_reason);
    } else {
        generated["stop_reason"] = nullptr;
    }
    json::object timings{{"load_ms", p.model.load_ms}, {"total_ms", p.total_ms}};
    if (p.result) {
        timings = timings_json(p.result->timings, p.outcome.prompt_tokens.size(), p.model.load_ms, p.total_ms);
        timings["decode_evaluations"] = p.result->timings.decode_evaluations;
    }
    return json::object{
        {"schema_version", 1},
        {"kind", "ember.run"},
        {"run_id", p.outcome.run_id},
        {"outcome", p.error ? "failed" : "ok"},
        {"error", p.error ? json::value(*p.error) : json::value(nullptr)},
        {"failed_during", p.error ? json::value(p.failed_during) : json::value(nullptr)},
        {"replaced_run_id", p.replaced_run_id.empty() ? json::value(nullptr) : json::value(p.replaced_run_id)},
        {"config_file", p.config.source.string()},
        {"config_hash", p.config_hash},
        {"config", config::to_json(p.config)},
        {"model", model_json(p.model)},
        {"inputs", p.inputs ? json::value(*p.inputs) : json::value(json::array())},
        {"route", p.outcome.route},
        {"cpu_variant", p.outcome.variant.empty() ? json::value(nullptr) : json::value(p.outcome.variant)},
        {"kv_type", p.config.model.kv_type},
        {"threads", p.outcome.threads},
        {"ctx", p.ctx},
        {"hooks", p.hooks_active ? "active" : "disabled"},
        {"prompt", std::move(prompt)},
        {"generated", std::move(generated)},
        {"timings", std::move(timings)},
        {"trace", trace_json(p.trace)},
        {"lifecycle", lifecycle_json(p.outcome.lifecycle)},
        {"experiments", experiments::experiments_report(experiments)},
    };
}

}  // namespace

boost::json::object lifecycle_json(const Lifecycle& l) {
    json::value rewrite = nullptr;
    if (!l.rewritten_by.empty())
        rewrite = json::object{
            {"experiment", l.rewritten_by}, {"original_text", valid_utf8(l.original_prompt)}, {"text", l.prompt}};
    return {{"result", l.skipped_by.empty() ? "computed" : "supplied"},
            {"skipped_by", l.skipped_by.empty() ? json::value(nullptr) : json::value(l.skipped_by)},
            {"prompt_rewrite", std::move(rewrite)}};
}

boost::json::object model_json(const LoadedModel& model) {
    const models::ModelConfig& c = model.model->config();
    return {{"path", model.path.string()},
            {"sha256", model.sha256},
            {"name", c.name},
            {"family", models::family_name(c.family)},
            {"n_layers", c.n_layers},
            {"n_embd", c.n_embd},
            {"n_vocab", c.n_vocab}};
}

std::optional<models::Family> family_from_config(const config::RunConfig& config) {
    if (config.model.arch == "auto") return std::nullopt;
    return models::family_from_name(config.model.arch);
}

std::string make_run_id() {
    const std::time_t now = std::time(nullptr);
    std::tm utc{};
    ::gmtime_r(&now, &utc);
    char stamp[32];
    std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
    std::random_device random;
    return fmt::format("{}-{:08x}", stamp, random());
}

RunOutcome execute_run(const config::RunConfig& config, const LoadedModel& model, const RunOptions& options) {
    // Experiments are other people's code: their run happens in a worker this process supervises.
    if (!config.experiments.empty() && options.progress == nullptr && options.observer == nullptr)
        return supervise_run(config, model, options);
    const auto start = Clock::now();
    const std::string config_hash = config::config_hash(config);
    const models::ModelConfig& model_config = model.model->config();

    RunOutcome outcome;
    outcome.run_id = options.run_id.empty() ? make_run_id() : options.run_id;
    outcome.route = config.model.route;
    outcome.config_hash = config_hash;
    outcome.threads = extract::effective_threads(config.model.threads);
    extract::EncodedPrompt encoded = extract::encode_run_prompt(model, config.prompt);
    std::string prompt = encoded.text;  // an experiment may rewrite it (before_prefill)
    outcome.prompt_tokens = encoded.ids;
    // An extraction's layers and positions are checked before anything is written.
    std::optional<extract::Extractor> extractor;
    if (config.output.extract) extractor.emplace(extract::resolve(config.output, model_config, encoded.text, encoded.tokens));
    const std::vector<extract::InputFile> inputs = extract::collect_inputs(config, model.sha256);

    // Creates and locks the output directory (an earlier run in it: refused, or replaced);
    // none for a run that records nothing (ember generate).
    std::optional<extract::RunDirectoryWriter> directory;
    if (options.record) {
        directory.emplace(
            config.output.dir,
            extract::RunDirectoryOptions{
                config.output.overwrite || options.overwrite, fmt::format("run {}", outcome.run_id),
                options.skip_if_current ? [&](const fs::path&) { return extract::current_result(config, config_hash); }
                                        : std::function<std::optional<std::string>(const fs::path&)>()});
        outcome.report = config.output.dir / "run.json";
    }
    const fs::path report_path = directory ? directory->dir() / "run.json" : fs::path();

    experiments::RunInfo info{outcome.run_id, directory ? directory->dir().string() : std::string(), model.path.string(), model.sha256,
                              config.model.route, config_hash, {}, encoded.text, {}};
    for (std::int32_t id : outcome.prompt_tokens) info.prompt_token_ids.push_back(static_cast<std::uint32_t>(id));
    for (const tokenizer::Token& t : encoded.tokens) info.prompt_token_spans.push_back({t.start, t.end});

    runtime::SessionOptions session_options;
    session_options.route = *runtime::route_from_name(config.model.route);  // the parser checked the name
    session_options.kv_type = *kernels::kv_type_from_name(config.model.kv_type);  // so did it this one
    session_options.context_length = config.model.ctx;
    session_options.threads = outcome.threads;
    session_options.max_batch = outcome.prompt_tokens.size();
    session_options.all_logits = extractor && extractor->selection().needs_all_logits();
    std::optional<trace::Journal> journal;
    session_options.observer = options.observer;

    runtime::GenerationOptions generation;
    generation.max_tokens = config.generation.max_tokens;
    generation.sampling.temperature = static_cast<float>(config.generation.temperature);
    generation.sampling.top_k = config.generation.top_k;
    generation.sampling.top_p = static_cast<float>(config.generation.top_p);
    generation.sampling.seed = config.generation.seed;
    generation.all_prompt_logits = session_options.all_logits;

    std::vector<std::int32_t> generated;
    experiments::ExperimentRunner* token_sink = nullptr;  // the runner, once made
    const auto on_token = [&](std::int32_t token) {
        generated.push_back(token);
        if (token_sink) token_sink->on_token(static_cast<std::uint32_t>(token));
        if (options.on_token) options.on_token(token);
    };
    const auto is_end = [&](std::int32_t token) { return model.tokenizer.is_end_of_generation(token); };

    const json::array inputs_record = extract::inputs_json(inputs);
    ReportParts parts{config, config_hash, model, outcome, prompt, generated};
    parts.encoded = &encoded;
    parts.trace = &outcome.trace;
    parts.inputs = &inputs_record;
    if (directory) parts.replaced_run_id = directory->replaced_run_id();
    parts.ctx = config.model.ctx != 0 ? config.model.ctx : runtime::default_context_length(model_config);
    parts.hooks_active = !config.experiments.empty();
    const experiments::RunnerSnapshot no_experiments{config.hooks.failure, config.hooks.timeout_ms, {}, {}};
    const auto write_report = [&](const experiments::RunnerSnapshot& snapshot) {
        if (!options.record) return;
        parts.total_ms = ms_since(start);
        write_file_atomically(report_path, pretty_json(report_json(parts, snapshot)) + "\n");
    };
    // For a failed run: the run's own error is what propagates, never one from writing the
    // report. When even run.json cannot be written, no run.json may claim anything: an
    // earlier "ok" one is removed and stderr says so.
    const auto write_failure_report = [&](const std::string& error, const experiments::RunnerSnapshot& snapshot) {
        journal.reset();  // its temporary goes, before the directory may be swapped into place
        if (!directory) return;
        parts.error = &error;
        try {
            write_report(snapshot);
        } catch (const std::exception&) {
            // A full disk: what the failed run wrote has no manifest and is worth nothing
            // next to the record of the failure, so it makes room for it.
            std::error_code ec;
            for (const auto& entry : fs::directory_iterator(directory->dir(), ec))
                if (entry.path().filename() != kLockRecordName) fs::remove_all(entry.path(), ec);
            try {
                write_report(snapshot);
            } catch (const std::exception& e) {
                fs::remove(report_path, ec);
                fmt::print(stderr, "ember: {} could not be written ({}); the run failed during {}: {}\n",
                           outcome.report.string(), e.what(), parts.failed_during, error);
            }
        }
        try {
            directory->publish();
        } catch (const std::exception& e) {
            fmt::print(stderr, "ember: {}\n", e.what());
        }
    };

    std::unique_ptr<experiments::ExperimentRunner> runner;
    bool runner_finished = false;
    const auto finish_runner = [&] {
        if (runner && !runner_finished) {
            runner_finished = true;
            runner->finish();
        }
    };
    std::string& stage = parts.failed_during;
    try {
        stage = "setup";
        if (config.tracing.enabled && options.observer == nullptr)
            session_options.observer =
                &journal.emplace(directory ? directory->place(config.tracing.path) : config.tracing.path);
        if (!config.experiments.empty()) {
            runner = std::make_unique<experiments::ExperimentRunner>(
                experiments::specs_from_config(config), info,
                experiments::RunnerOptions{config.hooks.failure, config.hooks.timeout_ms, {}, options.progress,
                                           lifecycle_policy(config, model)});
            runner->on_model_loaded(model_config);
            token_sink = runner.get();
        }
        std::optional<runtime::Session> session(std::in_place, *model.model, session_options);
        outcome.variant = session->backend().variant();
        stage = "generation";
        if (runner) {
            hooks::EvalInfo prefill;
            prefill.n_tokens = outcome.prompt_tokens.size();
            prefill.tracing = session_options.observer != nullptr;
            runner->before_prefill(prefill);
            // A rewritten prompt is tokenized now; everything after before_prefill sees its tokens.
            if (const auto& rewrite = runner->rewrite()) {
                outcome.lifecycle.rewritten_by = rewrite->experiment;
                outcome.lifecycle.original_prompt = prompt;
                outcome.lifecycle.prompt = rewrite->text;
                prompt = rewrite->text;
                encoded = extract::encode_prompt(model.tokenizer, prompt, config.prompt.add_bos);
                outcome.prompt_tokens = encoded.ids;
                runner->set_prompt_tokens({encoded.ids.begin(), encoded.ids.end()});
                std::vector<ember_token_span> spans;  // the prompt services describe the rewritten text too
                for (const tokenizer::Token& t : encoded.tokens) spans.push_back({t.start, t.end});
                runner->set_prompt(encoded.text, {encoded.ids.begin(), encoded.ids.end()}, std::move(spans));
                if (encoded.ids.size() > session_options.max_batch) {
                    session_options.max_batch = encoded.ids.size();
                    session.emplace(*model.model, session_options);
                }
            }
            if (runner->skip()) outcome.lifecycle.skipped_by = runner->skip()->experiment;
            if (outcome.lifecycle.changed() && options.on_lifecycle) options.on_lifecycle(outcome.lifecycle);
        }
        if (runner && runner->skip()) {
            // Skipped: nothing is evaluated and no stage fires; the supplied ids are the result.
            outcome.result = supplied_result(runner->skip()->ids, on_token);
        } else {
            // No runner and no extraction: no hooks, so the session runs the DisabledHooks forward pass.
            hooks::HookChain chain{runner.get(), extractor ? &*extractor : nullptr};
            outcome.result =
                runtime::generate(*session, outcome.prompt_tokens, generation, is_end, on_token, chain.simplest());
        }
        if (runner) {
            runner->on_generation_complete(outcome.result.tokens.size(),
                                           experiment_stop_reason(outcome.result.stop_reason));
        }
        parts.result = &outcome.result;
        stage = "experiments";
        finish_runner();
        stage = "trace";
        if (journal) {
            outcome.trace = journal->finish();
            outcome.trace->path = config.tracing.path;
        }
        const experiments::RunnerSnapshot snapshot = runner ? runner->snapshot() : no_experiments;
        outcome.experiment_failures = snapshot.failures;

        if (!directory) return outcome;  // nothing recorded (ember generate)

        // The extraction's arrays, then run.json, then the manifest listing every file.
        stage = "extraction";
        extract::RunRecord record;
        record.kind = "ember.run";
        record.run_id = outcome.run_id;
        record.route = outcome.route;
        record.variant = outcome.variant;
        record.config_hash = config_hash;
        record.config = config::to_json(config);
        record.trace = outcome.trace;
        record.inputs = inputs_record;
        record.threads = outcome.threads;
        if (outcome.lifecycle.changed()) record.lifecycle = lifecycle_json(outcome.lifecycle);
        extract::write_extraction(*directory, extractor ? &*extractor : nullptr, model, encoded, record,
                                  session_options.route, outcome.threads, [&] {
                                      stage = "run.json";
                                      write_report(snapshot);
                                      stage = "manifest";
                                  });
    } catch (const experiments::ExperimentFailure& failure) {
        finish_runner();
        write_failure_report(failure.what(), runner ? runner->snapshot() : failure.snapshot().value_or(no_experiments));
        throw;
    } catch (const std::exception& e) {
        if (runner && !runner_finished) runner->notify_error(e.what(), generated.size());
        finish_runner();
        write_failure_report(e.what(), runner ? runner->snapshot() : no_experiments);
        throw;
    }

    if (directory)
        for (const auto& f : directory->files()) outcome.arrays += f.name.ends_with(".npy");
    outcome.manifest = config.output.dir / extract::kManifestName;
    return outcome;
}

}  // namespace ember::app
