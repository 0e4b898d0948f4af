#include "experiments/experiment_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "common/input_file.hpp"
#include "common/sha256_file.hpp"
#include "ember/utf8.hpp"
#include "experiments/log_line.hpp"

namespace ember::experiments {
namespace {

using Clock = std::chrono::steady_clock;

using hooks::index_of;

// plugin.h's family list is the registry's Family values (models/family.hpp), one for one;
// the names are checked against the registry's in tests/models/family_registry_test.cpp.
#define EMBER_FAMILY_MATCHES_(c_name, cxx_name, code, name)                       \
    static_assert(static_cast<std::uint32_t>(models::Family::cxx_name) == (code), \
                  "plugin.h's EMBER_FAMILY_LIST: " name "'s code is not models::Family's value");
EMBER_FAMILY_LIST(EMBER_FAMILY_MATCHES_)
#undef EMBER_FAMILY_MATCHES_
#define EMBER_FAMILY_ONE_(c_name, cxx_name, code, name) +1
static_assert(models::kFamilyCount == 0 EMBER_FAMILY_LIST(EMBER_FAMILY_ONE_),
              "a new family needs its row in plugin.h's EMBER_FAMILY_LIST");
#undef EMBER_FAMILY_ONE_

std::uint32_t family_code(models::Family family) { return static_cast<std::uint32_t>(family); }

std::uint32_t stop_code(StopReason reason) { return static_cast<std::uint32_t>(reason); }

std::string_view level_name(LogLevel level) {
    switch (level) {
        case LogLevel::Debug: return "debug";
        case LogLevel::Info: return "info";
        case LogLevel::Warning: return "warning";
        case LogLevel::Error: return "error";
    }
    return "info";
}

}  // namespace

std::string_view outcome_name(Outcome outcome) {
    switch (outcome) {
        case Outcome::Ok: return "ok";
        case Outcome::Failed: return "failed";
        case Outcome::Disabled: return "disabled";
        case Outcome::NotRun: return "not_run";
    }
    return "unknown";
}

std::vector<ExperimentSpec> specs_from_config(const config::RunConfig& config) {
    std::vector<ExperimentSpec> specs;
    for (const auto& e : config.experiments) specs.push_back({e.plugin, e.config_json, e.base_dir, e.origin});
    return specs;
}

// One experiment instance and everything the host keeps for it. Owned through a
// unique_ptr so its address (the host_data of its services table) never moves.
struct ExperimentRunner::Entry {
    ExperimentRunner* runner = nullptr;
    std::shared_ptr<const PluginLibrary> library;  // outlives `instance`
    ExperimentSpec spec;
    std::string base_dir;
    ember_run_info run_info{};
    ember_host_services services{};
    void* instance = nullptr;
    bool enabled = true;  // false once it failed under fail_open
    hooks::StageMask stages = 0;  // the stages it implements and subscribes to
    Outcome outcome = Outcome::NotRun;
    std::string failure;
    std::array<StageTiming, kStageCount> timings{};
    std::array<char, EMBER_ERROR_CAPACITY> error{};
    bool error_dirty = false;
    std::vector<ReadInput> read_inputs;
    std::vector<std::unique_ptr<std::string>> read_bytes;  // what read_input handed out, until destroy

    void destroy() {
        if (instance) library->descriptor().destroy(instance);
        instance = nullptr;
    }
    ~Entry() { destroy(); }
};

// Where a call happens, for the failure message.
struct ExperimentRunner::Site {
    StageId stage;
    const hooks::EvalInfo* eval = nullptr;  // set for stages that carry a phase
    bool has_layer = false;
    std::uint32_t layer = 0;
};

ExperimentRunner::ExperimentRunner(const std::vector<ExperimentSpec>& specs, RunInfo run, RunnerOptions options)
    : run_(std::move(run)), options_(std::move(options)) {
    prompt_text_ = run_.prompt_text;
    prompt_ids_ = run_.prompt_token_ids;
    prompt_spans_ = run_.prompt_token_spans;
    timeout_ns_ = static_cast<std::uint64_t>(options_.timeout_ms) * 1'000'000u;
    // Every plugin loads before anything is created: a bad plugin is a configuration error.
    std::vector<std::shared_ptr<const PluginLibrary>> libraries;
    for (const auto& spec : specs) libraries.push_back(PluginLibrary::load(spec.plugin));

    for (std::size_t i = 0; i < specs.size(); ++i) {
        auto e = std::make_unique<Entry>();
        e->runner = this;
        e->library = libraries[i];
        e->spec = specs[i];
        e->base_dir = specs[i].base_dir.string();
        e->run_info = ember_run_info{sizeof(ember_run_info),
                                     0,
                                     run_.run_id.c_str(),
                                     run_.output_dir.c_str(),
                                     run_.model_path.c_str(),
                                     run_.model_sha256.c_str(),
                                     run_.route.c_str(),
                                     run_.config_hash.c_str(),
                                     e->base_dir.c_str(),
                                     run_.prompt_token_ids.data(),
                                     run_.prompt_token_ids.size()};
        e->services = ember_host_services{sizeof(ember_host_services),
                                          EMBER_PLUGIN_ABI_MAJOR,
                                          EMBER_PLUGIN_ABI_MINOR,
                                          0,
                                          e.get(),
                                          &ExperimentRunner::host_log,
                                          &e->run_info,
                                          &ExperimentRunner::host_generated_token_ids,
                                          &ExperimentRunner::host_skip_inference,
                                          &ExperimentRunner::host_rewrite_prompt,
                                          &ExperimentRunner::host_prompt_text,
                                          &ExperimentRunner::host_prompt_token_ids,
                                          &ExperimentRunner::host_prompt_token_spans,
                                          &ExperimentRunner::host_read_input};
        for (StageId stage : e->library->implemented_stages()) e->stages |= hooks::stage_bit(stage);
        entries_.push_back(std::move(e));
    }
    try {
        create_all();
        update_subscriptions();
    } catch (ExperimentFailure& failure) {
        finish();
        failure.set_snapshot(snapshot());
        throw;
    } catch (...) {
        finish();
        throw;
    }
}

ExperimentRunner::~ExperimentRunner() { finish(); }

void ExperimentRunner::finish() {
    for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
        if (options_.progress && (*it)->instance)
            options_.progress->enter((*it)->library->name(), "destroy", nullptr, false, 0, Clock::now());
        (*it)->destroy();
        if (options_.progress) options_.progress->leave();
    }
}

void ExperimentRunner::create_all() {
    for (auto& entry : entries_) {
        if (halted_) break;
        Entry& e = *entry;
        const auto create = e.library->descriptor().create;
        e.outcome = Outcome::Ok;
        call(e, Site{StageId::Create}, [&](ember_error_buffer& error) {
            void* made = nullptr;
            const ember_status status = create(e.spec.config_json.c_str(), &e.services, &made, &error);
            if (status == EMBER_OK) e.instance = made;
            return status;
        });
        if (!e.instance && e.enabled && e.outcome == Outcome::Ok)
            fail(e, Site{StageId::Create}, "create succeeded but returned no instance");
    }
}

template <class Call>
void ExperimentRunner::call(Entry& e, const Site& site, Call&& invoke) {
    // The buffer is cleared before each call. A plugin writes from byte 0, so a buffer
    // whose first byte is still 0 after a call was not written and needs no memset.
    if (e.error_dirty) std::memset(e.error.data(), 0, e.error.size());
    ember_error_buffer buffer{e.error.data(), e.error.size()};
    const auto start = Clock::now();
    if (options_.progress)
        options_.progress->enter(e.library->name(), stage_id_name(site.stage), site.eval, site.has_layer, site.layer, start);
    const ember_status status = invoke(buffer);
    if (options_.progress) options_.progress->leave();
    const auto ns = static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
    e.error_dirty = e.error[0] != '\0';
    StageTiming& t = e.timings[index_of(site.stage)];
    ++t.calls;
    t.total_ns += ns;
    t.max_ns = std::max(t.max_ns, ns);
    if (status == EMBER_OK && (timeout_ns_ == 0 || ns <= timeout_ns_)) return;

    if (status != EMBER_OK) {
        e.error.back() = '\0';
        fail(e, site, e.error[0] != '\0' ? sanitize_plugin_text(e.error.data()) : "failed without a message");
    } else {
        fail(e, site, fmt::format("returned after {:.1f} ms, over the {} ms timeout (hooks.timeout_ms)",
                                  static_cast<double>(ns) / 1e6, options_.timeout_ms));
    }
}

void ExperimentRunner::fail(Entry& e, const Site& site, std::string_view detail) {
    std::string where;
    if (site.eval && site.has_layer)
        where = fmt::format(" (phase={}, layer={})", hooks::phase_name(site.eval->phase), site.layer);
    else if (site.eval)
        where = fmt::format(" (phase={})", hooks::phase_name(site.eval->phase));
    const std::string message =
        fmt::format("experiment '{}' failed in {}{}: {}", e.library->name(), stage_id_name(site.stage), where, detail);
    failures_.push_back(message);
    if (e.failure.empty()) e.failure = message;

    if (site.stage == StageId::OnError) {
        // The run is already failing: recorded after the original error, never replacing it.
        if (e.outcome == Outcome::Ok) e.outcome = Outcome::Failed;
        log(LogLevel::Warning, e.library->name(), message);
        return;
    }
    if (options_.failure == config::FailurePolicy::FailOpen) {
        e.enabled = false;
        e.outcome = Outcome::Disabled;
        update_subscriptions();
        log(LogLevel::Warning, e.library->name(), message + " (fail_open: not called again in this run)");
        return;
    }
    e.outcome = Outcome::Failed;
    notify_error(message);
    throw ExperimentFailure(message, e.library->name(), site.stage);
}

void ExperimentRunner::notify_error(std::string_view message, std::optional<std::size_t> generated_tokens) {
    halted_ = true;
    if (error_notified_) return;
    error_notified_ = true;
    const std::string text(message);
    const ember_generation_context context = generation_context(EMBER_STOP_ERROR, generated_tokens.value_or(last_step_));
    for (auto& entry : entries_) {
        Entry& e = *entry;
        const auto on_error = e.library->descriptor().on_error;
        if (!on_error || !e.instance || !e.enabled) continue;
        call(e, Site{StageId::OnError},
             [&](ember_error_buffer& error) { return on_error(e.instance, &context, text.c_str(), &error); });
    }
}

void ExperimentRunner::on_model_loaded(const models::ModelConfig& model) {
    if (halted_) return;
    model_name_ = model.name;
    model_context_ = ember_model_context{sizeof(ember_model_context), family_code(model.family), model_name_.c_str(),
                                        model.n_layers, model.n_embd, model.n_vocab, 0};
    model_loaded_ = true;
    layer_contexts_.clear();
    for (std::uint32_t l = 0; l < model.layers.size(); ++l) {
        const models::LayerConfig& L = model.layers[l];
        layer_contexts_.push_back(
            ember_layer_context{sizeof(ember_layer_context), l, nullptr, L.n_head, L.head_dim, L.n_head_kv, L.n_ff});
    }
    for (auto& entry : entries_) {
        Entry& e = *entry;
        const auto fn = e.library->descriptor().on_model_loaded;
        if (!fn || !e.instance || !e.enabled) continue;
        call(e, Site{StageId::OnModelLoaded},
             [&](ember_error_buffer& error) { return fn(e.instance, &model_context_, &error); });
    }
    // 1.1: an instance may narrow the stages it implements to those it wants.
    for (auto& entry : entries_) {
        Entry& e = *entry;
        const auto subscribed = e.library->descriptor().subscribed_stages;
        if (subscribed && e.instance && e.enabled) e.stages &= subscribed(e.instance);
    }
    update_subscriptions();
}

void ExperimentRunner::update_subscriptions() {
    subscribed_ = 0;
    for (const auto& e : entries_)
        if (e->instance && e->enabled) subscribed_ |= e->stages;
}

void ExperimentRunner::before_prefill(const hooks::EvalInfo& prefill) {
    if (halted_) return;
    started_ = true;
    prefill_start_ = Clock::now();
    prompt_tokens_ = prefill.n_tokens;
    const ember_execution_context context = execution_context(prefill);
    for (auto& entry : entries_) {
        Entry& e = *entry;
        const auto fn = e.library->descriptor().before_prefill;
        if (!fn || !e.instance || !e.enabled) continue;
        in_before_prefill_ = &e;  // the lifecycle services answer this entry only
        try {
            call(e, Site{StageId::BeforePrefill, &prefill},
                 [&](ember_error_buffer& error) { return fn(e.instance, &context, &error); });
        } catch (...) {
            in_before_prefill_ = nullptr;
            throw;
        }
        in_before_prefill_ = nullptr;
        // fail_open: a request made by a call that then failed is withdrawn with it.
        if (!e.enabled && skip_owner_ == &e) skip_.reset();
        if (!e.enabled && rewrite_owner_ == &e) rewrite_.reset();
    }
}

void ExperimentRunner::set_prompt_tokens(std::vector<std::uint32_t> ids) {
    rewritten_prompt_ids_ = std::move(ids);
    prompt_tokens_ = rewritten_prompt_ids_.size();
    for (auto& e : entries_) {
        e->run_info.prompt_token_ids = rewritten_prompt_ids_.data();
        e->run_info.prompt_token_count = rewritten_prompt_ids_.size();
    }
}

ember_status ExperimentRunner::refuse(const Entry& e, std::string_view what, ember_status code, std::string_view why,
                                      ember_error_buffer* reason) const {
    const std::string message = fmt::format("{} refused: {}", what, why);
    ember_error_set(reason, message.c_str());
    log(LogLevel::Warning, e.library->name(), message);
    return code;
}

ember_execution_context ExperimentRunner::execution_context(const hooks::EvalInfo& eval) const {
    return ember_execution_context{sizeof(ember_execution_context),
                                   eval.phase == hooks::Phase::Prefill ? EMBER_PHASE_PREFILL : EMBER_PHASE_DECODE,
                                   eval.start_position,
                                   eval.n_tokens,
                                   eval.tracing ? EMBER_TRACING_ENABLED : EMBER_TRACING_DISABLED,
                                   0,
                                   &model_context_,
                                   eval.step};
}

ember_generation_context ExperimentRunner::generation_context(std::uint32_t stop_reason, std::size_t generated) const {
    const std::size_t prompt_tokens = started_ ? prompt_tokens_ : run_.prompt_token_ids.size();
    return ember_generation_context{sizeof(ember_generation_context),
                                    stop_reason,
                                    generated,
                                    prompt_tokens,
                                    run_.run_id.c_str(),
                                    elapsed_ms(),
                                    model_loaded_ ? &model_context_ : nullptr};
}

double ExperimentRunner::elapsed_ms() const {
    if (!started_) return 0.0;
    return std::chrono::duration<double, std::milli>(Clock::now() - prefill_start_).count();
}

void ExperimentRunner::stage(StageId stage, const hooks::EvalInfo& eval, std::uint32_t layer,
                             hooks::TensorView view) {
    if (halted_ || !wants(stage)) return;
    last_step_ = eval.step;
    const ember_execution_context execution = execution_context(eval);
    const bool layer_stage = hooks::is_layer_stage(stage);
    ember_layer_context context{sizeof(ember_layer_context), layer, &execution, 0, 0, 0, 0};
    if (layer_stage && layer < layer_contexts_.size()) {
        context = layer_contexts_[layer];
        context.execution = &execution;
    }
    const Site site{stage, &eval, layer_stage, layer};
    for (auto& entry : entries_) {
        Entry& e = *entry;
        if (!(e.stages & hooks::stage_bit(stage)) || !e.instance || !e.enabled) continue;
        ember_tensor tensor{view.data, view.rows, view.cols, EMBER_DTYPE_F32, 0};
        if (layer_stage) {
            const auto fn = e.library->function<ember_layer_stage_fn>(stage);
            call(e, site, [&](ember_error_buffer& error) { return fn(e.instance, &context, &tensor, &error); });
        } else {
            const auto fn = e.library->function<ember_logits_stage_fn>(stage);
            call(e, site, [&](ember_error_buffer& error) { return fn(e.instance, &execution, &tensor, &error); });
        }
    }
}

void ExperimentRunner::on_generation_complete(std::size_t generated_tokens, StopReason reason) {
    if (halted_) return;
    const ember_generation_context context = generation_context(stop_code(reason), generated_tokens);
    for (auto& entry : entries_) {
        Entry& e = *entry;
        const auto fn = e.library->descriptor().on_generation_complete;
        if (!fn || !e.instance || !e.enabled) continue;
        call(e, Site{StageId::OnGenerationComplete},
             [&](ember_error_buffer& error) { return fn(e.instance, &context, &error); });
    }
}

std::vector<ExperimentRecord> ExperimentRunner::records() const {
    std::vector<ExperimentRecord> out;
    for (const auto& e : entries_)
        out.push_back({e->library, e->spec, e->outcome, e->failure, e->timings, e->read_inputs});
    return out;
}

RunnerSnapshot ExperimentRunner::snapshot() const {
    return RunnerSnapshot{options_.failure, options_.timeout_ms, records(), failures_};
}

void ExperimentRunner::log(LogLevel level, std::string_view experiment, std::string_view message) const {
    if (options_.log) {
        options_.log(level, experiment, message);
        return;
    }
    fmt::print(stderr, "[{}] {}: {}\n", experiment, level_name(level), message);
}

std::uint64_t ExperimentRunner::host_generated_token_ids(void* host_data, const std::uint32_t** ids) noexcept {
    const auto* e = static_cast<const Entry*>(host_data);
    const std::vector<std::uint32_t>& generated = e->runner->generated_;
    if (ids) *ids = generated.data();
    return generated.size();
}

// A lifecycle request of kind `what` from the entry behind `host_data`: refused outside its
// before_prefill, when the policy does not allow it, or after an earlier request of that
// kind; otherwise `decide(runner, entry, invalid)` accepts it or refuses it as invalid.
template <class Request, class Decide>
ember_status ExperimentRunner::lifecycle_request(void* host_data, std::string_view what, bool LifecyclePolicy::*allowed,
                                                 std::optional<Request> ExperimentRunner::*earlier,
                                                 ember_error_buffer* reason, Decide&& decide) noexcept {
    try {
        const auto* e = static_cast<const Entry*>(host_data);
        ExperimentRunner& r = *e->runner;
        if (r.in_before_prefill_ != e)
            return r.refuse(*e, what, EMBER_REFUSED_STAGE, "it is accepted only during before_prefill", reason);
        if (!(r.options_.lifecycle.*allowed))
            return r.refuse(*e, what, EMBER_REFUSED_UNSUPPORTED, r.options_.lifecycle.refusal, reason);
        if (const auto& taken = r.*earlier)
            return r.refuse(*e, what, EMBER_REFUSED_TAKEN,
                            fmt::format("experiment '{}' already asked for it (the first request in composition "
                                        "order wins)",
                                        taken->experiment),
                            reason);
        const auto invalid = [&](const std::string& why) { return r.refuse(*e, what, EMBER_REFUSED_INVALID, why, reason); };
        return decide(r, e, invalid);
    } catch (...) {
        ember_error_set(reason, "refused: the host could not take the request (out of memory, or EMBER_MAX_INPUT_BYTES is malformed)");
        return EMBER_REFUSED_INVALID;
    }
}

ember_status ExperimentRunner::host_skip_inference(void* host_data, const std::uint32_t* ids, std::uint64_t count,
                                                   ember_error_buffer* reason) noexcept {
    return lifecycle_request(host_data, "skip_inference", &LifecyclePolicy::allow_skip, &ExperimentRunner::skip_, reason,
                             [&](ExperimentRunner& r, const Entry* e, const auto& invalid) {
        const LifecyclePolicy& policy = r.options_.lifecycle;
        if (count > 0 && ids == nullptr) return invalid(fmt::format("{} ids were announced but the pointer is null", count));
        if (count > policy.max_supplied_tokens)
            return invalid(fmt::format("{} ids, more than the run may generate (generation.max_tokens = {})", count,
                                       policy.max_supplied_tokens));
        const std::uint32_t vocabulary = policy.vocabulary_size != 0 ? policy.vocabulary_size : r.model_context_.n_vocab;
        for (std::uint64_t i = 0; i < count; ++i)
            if (ids[i] >= vocabulary)
                return invalid(fmt::format("token id {} (index {}) is outside the vocabulary (n_vocab = {})", ids[i], i,
                                           vocabulary));
        r.skip_ = SkipRequest{std::string(e->library->name()), std::vector<std::uint32_t>(ids, ids + count)};
        r.skip_owner_ = e;
        return static_cast<ember_status>(EMBER_OK);
    });
}

ember_status ExperimentRunner::host_rewrite_prompt(void* host_data, const char* text, std::uint64_t length,
                                                   ember_error_buffer* reason) noexcept {
    return lifecycle_request(host_data, "rewrite_prompt", &LifecyclePolicy::allow_rewrite, &ExperimentRunner::rewrite_,
                             reason, [&](ExperimentRunner& r, const Entry* e, const auto& invalid) {
        const std::uint64_t limit = r.options_.lifecycle.max_prompt_bytes != 0 ? r.options_.lifecycle.max_prompt_bytes
                                                                               : max_input_bytes();
        if (length > limit)
            return invalid(fmt::format("the text is {} bytes, more than the limit of {} bytes (set EMBER_MAX_INPUT_BYTES "
                                       "to raise it)",
                                       length, limit));
        if (length > 0 && text == nullptr) return invalid(fmt::format("{} bytes were announced but the pointer is null", length));
        if (length == 0) return invalid("the text is empty");
        const std::string_view bytes(text, static_cast<std::size_t>(length));
        for (std::size_t pos = 0; pos < bytes.size();) {
            const std::size_t n = utf8::valid_sequence_length(bytes, pos);
            if (n == 0) return invalid(fmt::format("the text is not valid UTF-8 (byte {})", pos));
            pos += n;
        }
        r.rewrite_ = PromptRewrite{std::string(e->library->name()), std::string(bytes)};
        r.rewrite_owner_ = e;
        return static_cast<ember_status>(EMBER_OK);
    });
}

void ExperimentRunner::set_prompt(std::string text, std::vector<std::uint32_t> ids, std::vector<ember_token_span> spans) {
    prompt_text_ = std::move(text);
    prompt_ids_ = std::move(ids);
    prompt_spans_ = std::move(spans);
}

std::uint64_t ExperimentRunner::host_prompt_text(void* host_data, const char** text) noexcept {
    const std::string& prompt = static_cast<const Entry*>(host_data)->runner->prompt_text_;
    if (text) *text = prompt.c_str();
    return prompt.size();
}

std::uint64_t ExperimentRunner::host_prompt_token_ids(void* host_data, const std::uint32_t** ids) noexcept {
    const std::vector<std::uint32_t>& prompt = static_cast<const Entry*>(host_data)->runner->prompt_ids_;
    if (ids) *ids = prompt.data();
    return prompt.size();
}

std::uint64_t ExperimentRunner::host_prompt_token_spans(void* host_data, const ember_token_span** spans) noexcept {
    const std::vector<ember_token_span>& prompt = static_cast<const Entry*>(host_data)->runner->prompt_spans_;
    if (spans) *spans = prompt.data();
    return prompt.size();
}

void ExperimentRunner::host_log(void* host_data, std::uint32_t level, const char* message) noexcept {
    try {
        const auto* e = static_cast<const Entry*>(host_data);
        const LogLevel l = level <= EMBER_LOG_ERROR ? static_cast<LogLevel>(level) : LogLevel::Error;
        e->runner->log(l, e->library->name(), sanitize_plugin_text(message ? message : ""));
    } catch (...) {
        // A log line is never worth crashing the plugin's call over.
    }
}

// The file is read once, hashed from the bytes handed out, and kept until destroy: what
// the experiment used is what the record names.
ember_status ExperimentRunner::host_read_input(void* host_data, const char* path, const std::uint8_t** bytes,
                                               std::uint64_t* size, ember_error_buffer* reason) noexcept {
    auto* e = static_cast<Entry*>(host_data);
    try {
        if (path == nullptr || bytes == nullptr || size == nullptr) throw Error("read_input: a null argument");
        const std::filesystem::path named(path);
        const std::filesystem::path full =
            (named.is_absolute() ? named : std::filesystem::path(e->base_dir) / named).lexically_normal();
        auto text = std::make_unique<std::string>(read_input_file(full, "file an experiment reads"));
        e->read_inputs.push_back({full.string(), sha256_hex(std::as_bytes(std::span(text->data(), text->size()))),
                                  text->size()});
        *bytes = reinterpret_cast<const std::uint8_t*>(text->c_str());
        *size = text->size();
        e->read_bytes.push_back(std::move(text));
        return EMBER_OK;
    } catch (const std::exception& error) {
        ember_error_set(reason, error.what());
        return EMBER_FAILED;
    }
}

}  // namespace ember::experiments
