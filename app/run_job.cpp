#include "run_job.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <random>
#include <thread>

#include "cli.hpp"
#include "common/atomic_file.hpp"
#include "record/dir_lock.hpp"
#include "common/error.hpp"
#include "common/sha256_file.hpp"
#include "experiments/experiment_runner.hpp"
#include "experiments/run_report.hpp"
#include "extract/extraction.hpp"
#include "features/sae_loader.hpp"
#include "features/sae_splicer.hpp"
#include "record/inputs_record.hpp"
#include "extract/sae_extraction.hpp"
#include "hooks/hook_chain.hpp"
#include "generation_output.hpp"
#include "intervention_effect.hpp"
#include "runtime/prompt.hpp"
#include "runtime/session.hpp"
#include "runtime/threads.hpp"

namespace ember::app {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;


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
    const runtime::EncodedPrompt* encoded = nullptr;  // the prompt as first encoded
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
        prompt["token_messages"] = runtime::token_messages_json(*p.encoded);
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
        {"target", p.outcome.target ? json::value(*p.outcome.target) : json::value(nullptr)},
        {"effect", p.outcome.effect ? json::value(*p.outcome.effect) : json::value(nullptr)},
        {"timings", std::move(timings)},
        {"trace", trace_json(p.trace)},
        {"lifecycle", lifecycle_json(p.outcome.lifecycle)},
        {"experiments", experiments::experiments_report(experiments)},
    };
}

// The run's [[sae]] entries, loaded and checked against the model's sites.
std::vector<features::Sae> load_saes(const config::RunConfig& config, const models::ModelConfig& model) {
    std::vector<features::Sae> out;
    for (const config::SaeEntry& entry : config.saes) {
        out.push_back(features::load_sae(entry.path, {entry.site}));
        features::fit_sae_to_model(out.back(), features::site_widths(model));
    }
    return out;
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

namespace {

// One run in this process, step by step (run_job.hpp lists the steps). The members are
// what the steps hand on to each other; `failed_during` names the step a failure stops.
class RunPipeline {
public:
    RunPipeline(const config::RunConfig& config, const LoadedModel& model, const RunOptions& options,
                experiments::StageRecord* stages)
        : config_(config), model_(model), options_(options), stages_(stages), config_hash_(config::config_hash(config)),
          parts_{config, config_hash_, model, outcome_, prompt_, generated_} {}

    RunOutcome run() {
        resolve_inputs();
        lock_directory();
        try {
            load();
            evaluate();
            check_inputs();
            if (!directory_) return outcome_;  // nothing recorded (ember generate)
            write_and_seal();
        } catch (const experiments::ExperimentFailure& failure) {
            finish_runner();
            record_failure(failure.what(), runner_ ? runner_->snapshot() : failure.snapshot().value_or(no_experiments()));
            throw;
        } catch (const std::exception& e) {
            if (runner_ && !runner_finished_) runner_->notify_error(e.what(), generated_.size());
            finish_runner();
            record_failure(e.what(), runner_ ? runner_->snapshot() : no_experiments());
            throw;
        }
        return report();
    }

private:
    // A run id; the prompt read and tokenized, an extraction resolved against it; the inputs hashed.
    void resolve_inputs() {
        outcome_.run_id = options_.run_id.empty() ? make_run_id() : options_.run_id;
        outcome_.route = config_.model.route;
        outcome_.config_hash = config_hash_;
        outcome_.threads = runtime::effective_threads(config_.model.threads);
        // Hashed before they are read: a change while the run reads them fails it (check_inputs).
        inputs_ = record::collect_inputs(config_, model_.sha256, model_.file.mapping()->state());
        encoded_ = runtime::encode_run_prompt(model_, config_.prompt);  // a text, or a conversation rendered
        prompt_ = encoded_.text;  // an experiment may rewrite it (before_prefill)
        outcome_.prompt_tokens = encoded_.ids;
        // The SAEs are loaded and checked against the model before anything is written; each
        // file they were read from is an input of the run.
        saes_ = load_saes(config_, model_.model->config());
        // An extraction's layers and positions are checked before anything is written; it
        // keeps each SAE's site rows too, for the features it writes (write_and_seal).
        if (config_.output.extract) {
            extract::Selection selection =
                extract::resolve(config_.output, model_.model->config(), encoded_.text, encoded_.tokens, nullptr,
                                 encoded_.conversation ? &*encoded_.conversation : nullptr);
            selection.sae_sites = extract::sae_sites(saes_);
            extractor_.emplace(std::move(selection));
        }
        for (std::size_t i = 0; i < saes_.size(); ++i)
            for (const features::SaeInput& file : saes_[i].inputs) {
                record::InputFile input = record::input_file("sae", file.path);
                input.key = fmt::format("saes[{}]", i);
                inputs_.push_back(std::move(input));
            }
        parts_.encoded = &encoded_;
        parts_.trace = &outcome_.trace;
        parts_.inputs = &inputs_record_;
        parts_.ctx = config_.model.ctx != 0 ? config_.model.ctx : runtime::default_context_length(model_.model->config());
        parts_.hooks_active = !config_.experiments.empty() || !config_.saes.empty();
    }

    // Creates and locks the output directory (an earlier run in it: refused, or replaced);
    // none for a run that records nothing (ember generate).
    void lock_directory() {
        if (!options_.record) return;
        std::function<std::optional<std::string>(const fs::path&)> not_needed;
        if (options_.skip_if_current)
            not_needed = [this](const fs::path&) { return record::current_result(config_, config_hash_); };
        directory_.emplace(config_.output.dir,
                           record::RunDirectoryOptions{config_.output.overwrite || options_.overwrite,
                                                        fmt::format("run {}", outcome_.run_id), not_needed, {}});
        outcome_.report = config_.output.dir / "run.json";
        parts_.replaced_run_id = directory_->replaced_run_id();
    }

    // The journal, the experiments (created, on_model_loaded) and the session.
    void load() {
        experiments::RunInfo info = run_info();
        inputs_record_ = record::inputs_json(inputs_);
        parts_.failed_during = "setup";
        session_options_.route = *runtime::route_from_name(config_.model.route);     // the parser checked the name
        session_options_.kv_type = *kernels::kv_type_from_name(config_.model.kv_type);  // so did it this one
        session_options_.context_length = config_.model.ctx;
        session_options_.threads = outcome_.threads;
        session_options_.max_batch = outcome_.prompt_tokens.size();
        session_options_.all_logits = extractor_ && extractor_->selection().needs_all_logits();
        session_options_.observer = options_.observer;
        if (config_.tracing.enabled && options_.observer == nullptr)
            session_options_.observer =
                &journal_.emplace(directory_ ? directory_->place(config_.tracing.path) : config_.tracing.path);
        if (!config_.experiments.empty()) {
            runner_ = std::make_unique<experiments::ExperimentRunner>(
                experiments::specs_from_config(config_), std::move(info),
                experiments::RunnerOptions{config_.hooks.failure, config_.hooks.timeout_ms, {}, stages_,
                                           lifecycle_policy(config_, model_)});
            runner_->on_model_loaded(model_.model->config());
        }
        session_.emplace(*model_.model, session_options_);
        outcome_.variant = session_->backend().variant();
    }

    // before_prefill (a rewrite or a skip), the generation, on_generation_complete, the
    // runner finished, the journal finished.
    void evaluate() {
        parts_.failed_during = "generation";
        if (runner_) before_prefill_round();
        const auto on_token = [this](std::int32_t token) {
            generated_.push_back(token);
            if (runner_) runner_->on_token(static_cast<std::uint32_t>(token));
            if (options_.on_token) options_.on_token(token);
        };
        if (runner_ && runner_->skip()) {
            // Skipped: nothing is evaluated and no stage fires; the supplied ids are the result.
            outcome_.result = supplied_result(runner_->skip()->ids, on_token);
        } else {
            // No runner and no extraction: no hooks, so the session runs the DisabledHooks forward pass.
            const auto is_end = [this](std::int32_t token) { return model_.tokenizer.is_end_of_generation(token); };
            hooks::HookChain chain{runner_.get(), extractor_ ? &*extractor_ : nullptr};
            // SAEs sit in front of the run's hooks: they fire sae_features into them and splice.
            std::optional<features::SaeSplicer> splicer;
            if (!saes_.empty()) splicer.emplace(spliced_saes(), chain.simplest());
            hooks::ActiveHooks* hooks = splicer ? &*splicer : chain.simplest();
            // With experiments or SAEs, the logits the prefill ends with, for the effect record.
            std::optional<LastLogitsTap> tap;
            if (parts_.hooks_active) hooks = &tap.emplace(hooks);
            outcome_.result = runtime::generate(*session_, outcome_.prompt_tokens, generation_options(), is_end, on_token, hooks);
            // The target through the experiments and SAEs, not the extraction (its rows are the
            // prompt's), and the effect: evaluations besides the run's own, left out of its trace.
            kernels::OpObserver* const observer = session_->observer();
            session_->set_observer(nullptr);
            if (config_.prompt.target) {
                hooks::HookChain scoring{runner_.get(), nullptr};
                if (splicer) splicer.emplace(spliced_saes(), scoring.simplest());
                outcome_.target = extract::score_prompt_target(*session_, model_, encoded_, config_.prompt,
                                                               splicer ? &*splicer : scoring.simplest(), parts_.hooks_active);
            }
            if (tap) outcome_.effect = unedited_effect(tap->logits());
            session_->set_observer(observer);
        }
        if (runner_)
            runner_->on_generation_complete(outcome_.result.tokens.size(), outcome_.result.stop_reason  /* one list: the ABI's code */);
        parts_.result = &outcome_.result;
        parts_.failed_during = "experiments";
        finish_runner();
        parts_.failed_during = "trace";
        if (journal_) {
            outcome_.trace = journal_->finish();
            outcome_.trace->path = config_.tracing.path;
        }
        snapshot_ = runner_ ? runner_->snapshot() : no_experiments();
        outcome_.experiment_failures = snapshot_.failures;
        record::add_read_inputs(inputs_record_, snapshot_);
    }

    // The before_prefill round: a rewritten prompt is tokenized now (everything after it
    // sees its tokens); the lifecycle told to options.on_lifecycle when anything changed.
    void before_prefill_round() {
        hooks::EvalInfo prefill;
        prefill.n_tokens = outcome_.prompt_tokens.size();
        prefill.tracing = session_options_.observer != nullptr;
        runner_->before_prefill(prefill);
        if (const auto& rewrite = runner_->rewrite()) {
            outcome_.lifecycle.rewritten_by = rewrite->experiment;
            outcome_.lifecycle.original_prompt = prompt_;
            outcome_.lifecycle.prompt = rewrite->text;
            prompt_ = rewrite->text;
            encoded_ = runtime::encode_prompt(model_.tokenizer, prompt_, config_.prompt.add_bos);
            outcome_.prompt_tokens = encoded_.ids;
            runner_->set_prompt_tokens({encoded_.ids.begin(), encoded_.ids.end()});
            runner_->set_prompt(encoded_.text, {encoded_.ids.begin(), encoded_.ids.end()}, token_spans(encoded_));
            if (encoded_.ids.size() > session_options_.max_batch) {
                session_options_.max_batch = encoded_.ids.size();
                session_.emplace(*model_.model, session_options_);
            }
        }
        if (runner_->skip()) outcome_.lifecycle.skipped_by = runner_->skip()->experiment;
        if (outcome_.lifecycle.changed() && options_.on_lifecycle) options_.on_lifecycle(outcome_.lifecycle);
    }

    // Every input is still what was hashed (a dataset, prompt file or model edited during
    // the run fails it, naming the file).
    void check_inputs() {
        parts_.failed_during = "inputs";
        record::check_inputs_unchanged(inputs_, model_.file.mapping());
    }

    // The extraction's arrays, then run.json, then the manifest listing every file.
    void write_and_seal() {
        parts_.failed_during = "extraction";
        extract::RunRecord record;
        record.kind = "ember.run";
        record.run_id = outcome_.run_id;
        record.route = outcome_.route;
        record.variant = outcome_.variant;
        record.config_hash = config_hash_;
        record.config = config::to_json(config_);
        record.trace = outcome_.trace;
        record.inputs = inputs_record_;
        record.threads = outcome_.threads;
        if (outcome_.lifecycle.changed()) record.lifecycle = lifecycle_json(outcome_.lifecycle);
        record.target = outcome_.target;
        // Each SAE's features at the extracted rows, as `ember extract --sae` writes them: encoded
        // from the site rows the run's hooks saw (before this SAE's splice; an experiment's edit
        // of the features themselves is what `capture` at sae_features records).
        if (extractor_ && !saes_.empty()) {
            const extract::SaeEncoders encoders(saes_, session_options_.route, outcome_.threads);
            record.sae_features =
                extract::write_sae_features(*directory_, *extractor_, saes_, encoders, config_.output.sae_output);
        }
        extract::write_extraction(*directory_, extractor_ ? &*extractor_ : nullptr, model_, encoded_, record,
                                  session_options_.route, outcome_.threads, [&] {
                                      parts_.failed_during = "run.json";
                                      write_report(snapshot_);
                                      parts_.failed_during = "manifest";
                                  });
    }

    RunOutcome report() {
        for (const auto& f : directory_->files()) outcome_.arrays += f.name.ends_with(".npy");
        outcome_.manifest = config_.output.dir / record::kManifestName;
        return std::move(outcome_);
    }

    // For a failed run: run.json says so. The run's own error is what propagates, never
    // one from writing the report; when even run.json cannot be written, no run.json may
    // claim anything: an earlier "ok" one is removed and stderr says so.
    void record_failure(const std::string& error, const experiments::RunnerSnapshot& snapshot) {
        journal_.reset();  // its temporary goes, before the directory may be swapped into place
        if (!directory_) return;
        parts_.error = &error;
        try {
            write_report(snapshot);
        } catch (const std::exception&) {
            // A full disk: what the failed run wrote has no manifest and is worth nothing
            // next to the record of the failure, so it makes room for it.
            std::error_code ec;
            for (const auto& entry : fs::directory_iterator(directory_->dir(), ec))
                if (entry.path().filename() != kLockRecordName) fs::remove_all(entry.path(), ec);
            try {
                write_report(snapshot);
            } catch (const std::exception& e) {
                fs::remove(directory_->dir() / "run.json", ec);
                fmt::print(stderr, "ember: {} could not be written ({}); the run failed during {}: {}\n",
                           outcome_.report.string(), e.what(), parts_.failed_during, error);
            }
        }
        try {
            directory_->publish();
        } catch (const std::exception& e) {
            fmt::print(stderr, "ember: {}\n", e.what());
        }
    }

    void write_report(const experiments::RunnerSnapshot& snapshot) {
        parts_.total_ms = ms_since(start_);
        write_file_atomically(directory_->dir() / "run.json", pretty_json(report_json(parts_, snapshot)) + "\n");
    }

    void finish_runner() {
        if (runner_ && !runner_finished_) {
            runner_finished_ = true;
            runner_->finish();
        }
    }

    experiments::RunnerSnapshot no_experiments() const {
        return {config_.hooks.failure, config_.hooks.timeout_ms, {}, {}};
    }

    experiments::RunInfo run_info() const {
        experiments::RunInfo info{outcome_.run_id, directory_ ? directory_->dir().string() : std::string(),
                                  model_.path.string(), model_.sha256, config_.model.route, config_hash_, {}, encoded_.text,
                                  token_spans(encoded_)};
        for (std::int32_t id : outcome_.prompt_tokens) info.prompt_token_ids.push_back(static_cast<std::uint32_t>(id));
        return info;
    }

    // The same prompt (and target) without experiments or SAEs, against the run's.
    json::object unedited_effect(const std::vector<float>& edited) {
        std::optional<TargetPair> target;
        if (outcome_.target) {
            const json::object unedited =
                extract::score_prompt_target(*session_, model_, encoded_, config_.prompt, nullptr, /*stepwise=*/true);
            target = TargetPair{outcome_.target->at("logprob").as_double(), unedited.at("logprob").as_double()};
        }
        session_->reset();
        const kernels::ConstRows last = session_->prefill(encoded_.ids, false, nullptr);  // [1, n_vocab]
        return effect_json(edited, {last.data, last.cols}, model_.tokenizer, target);
    }

    std::vector<features::SplicedSae> spliced_saes() {
        std::vector<features::SplicedSae> spliced;
        for (std::size_t i = 0; i < saes_.size(); ++i) spliced.push_back({&saes_[i], config_.saes[i].splice});
        return spliced;
    }

    static std::vector<ember_token_span> token_spans(const runtime::EncodedPrompt& encoded) {
        std::vector<ember_token_span> spans;
        for (const tokenizer::Token& t : encoded.tokens) spans.push_back({t.start, t.end});
        return spans;
    }

    runtime::GenerationOptions generation_options() const {
        runtime::GenerationOptions generation;
        generation.max_tokens = config_.generation.max_tokens;
        generation.sampling.temperature = static_cast<float>(config_.generation.temperature);
        generation.sampling.top_k = config_.generation.top_k;
        generation.sampling.top_p = static_cast<float>(config_.generation.top_p);
        generation.sampling.seed = config_.generation.seed;
        generation.all_prompt_logits = session_options_.all_logits;
        return generation;
    }

    const config::RunConfig& config_;
    const LoadedModel& model_;
    const RunOptions& options_;
    experiments::StageRecord* stages_;
    const Clock::time_point start_ = Clock::now();
    const std::string config_hash_;

    RunOutcome outcome_;
    std::string prompt_;
    runtime::EncodedPrompt encoded_;
    std::optional<extract::Extractor> extractor_;
    std::vector<record::InputFile> inputs_;
    std::vector<features::Sae> saes_;
    json::array inputs_record_;
    std::optional<record::RunDirectoryWriter> directory_;
    runtime::SessionOptions session_options_;
    std::optional<trace::Journal> journal_;
    std::unique_ptr<experiments::ExperimentRunner> runner_;
    bool runner_finished_ = false;
    std::optional<runtime::Session> session_;
    std::vector<std::int32_t> generated_;
    experiments::RunnerSnapshot snapshot_;
    ReportParts parts_;
};

}  // namespace

RunOutcome run_in_this_process(const config::RunConfig& config, const LoadedModel& model, const RunOptions& options,
                               experiments::StageRecord* stages) {
    return RunPipeline(config, model, options, stages).run();
}

}  // namespace ember::app
