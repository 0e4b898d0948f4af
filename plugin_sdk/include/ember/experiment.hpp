// The C++ way to write an Ember experiment: derive from ember::Experiment, override the
// stages you need, export the class. Builds with `g++ -std=c++20 -shared -fPIC -I<sdk>`
// and nothing else; the plugin never links against ember.
//
//   #include <ember/experiment.hpp>
//   class Counter : public ember::Experiment {
//   public:
//       const char* name() const override { return "counter"; }
//       ember::Status after_layer(const ember::LayerContext& ctx, ember::TensorAccess& hidden) override;
//   };
//   EMBER_EXPORT_EXPERIMENT(Counter)                      // name derived from the class: "counter"
//   // or EMBER_EXPORT_EXPERIMENT(Counter, "counter", "1.0.0", "counts layer calls")
//
// The stages a class does not override stay null in the descriptor and cost nothing.
// Every exported call is wrapped: a failed Status or an escaping exception becomes a
// failure with its message (what()). See docs/plugin-guide.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#include "ember/experiment_config.hpp"
#include "ember/plugin.h"
#include "ember/stages.h"

namespace ember {

// The outcome of a stage: Status{} is success, Status::error("...") a failure.
class Status {
public:
    Status() = default;
    static Status error(std::string message) {
        Status s;
        s.failed_ = true;
        s.message_ = std::move(message);
        return s;
    }
    bool ok() const { return !failed_; }
    const std::string& message() const { return message_; }

private:
    bool failed_ = false;
    std::string message_;
};

enum class TensorDType { F32 };
// plugin.h's EMBER_FAMILY_LIST, each enumerator its code; the names are the host's (its
// family registry, checked by tests/models/family_registry_test.cpp).
#define EMBER_SDK_FAMILY_(c_name, cxx_name, code, name) cxx_name = code,
enum class ModelFamily : std::uint32_t { EMBER_FAMILY_LIST(EMBER_SDK_FAMILY_) };
#undef EMBER_SDK_FAMILY_
// The same list as a table: the code, the enumerator and the name; every family switch of
// the SDK reads it (and a code not in it is refused, detail/export.hpp).
struct FamilyCode {
    std::uint32_t code;
    ModelFamily family;
    std::string_view name;
};
#define EMBER_SDK_FAMILY_ROW_(c_name, cxx_name, code, name) {code, ModelFamily::cxx_name, name},
inline constexpr FamilyCode kFamilyCodes[] = {EMBER_FAMILY_LIST(EMBER_SDK_FAMILY_ROW_)};
#undef EMBER_SDK_FAMILY_ROW_
inline std::string_view family_name(ModelFamily family) {
    for (const FamilyCode& f : kFamilyCodes)
        if (f.family == family) return f.name;
    return "unknown";
}
enum class ExecutionPhase { Prefill, Decode };
enum class TracingState { Disabled, Enabled };
// plugin.h's EMBER_STOP_REASON_LIST, each enumerator its code. Skipped (1.1): an
// experiment supplied the result (Host::skip_inference); nothing was evaluated.
#define EMBER_SDK_STOP_(c_name, cxx_name, code, name) cxx_name = code,
enum class StopReason : std::uint32_t { EMBER_STOP_REASON_LIST(EMBER_SDK_STOP_) };
#undef EMBER_SDK_STOP_
// The same list as a table: the code, the enumerator and the name (a code not in it is
// refused, detail/export.hpp).
struct StopCode {
    std::uint32_t code;
    StopReason reason;
    std::string_view name;
};
#define EMBER_SDK_STOP_ROW_(c_name, cxx_name, code, name) {code, StopReason::cxx_name, name},
inline constexpr StopCode kStopCodes[] = {EMBER_STOP_REASON_LIST(EMBER_SDK_STOP_ROW_)};
#undef EMBER_SDK_STOP_ROW_
inline std::string_view stop_reason_name(StopReason reason) {
    for (const StopCode& s : kStopCodes)
        if (s.reason == reason) return s.name;
    return "unknown";
}

// The SDK's free helpers are function objects, not functions: argument-dependent lookup
// never finds them, so a plugin's own phase_name(ember::ExecutionPhase) (or any other
// name) never clashes with them. Call them qualified: ember::phase_name(phase).
namespace detail {
struct PhaseName {
    std::string_view operator()(ExecutionPhase phase) const { return phase == ExecutionPhase::Prefill ? "prefill" : "decode"; }
};
}  // namespace detail
inline constexpr detail::PhaseName phase_name{};

// A read-only view of a contiguous F32 [rows, columns] activation (row stride = columns,
// always: tensor views carry no stride). Valid only during the stage call. The
// attention_pattern stage hands one of these: it is a copy, and has no values_mut().
class TensorView {
public:
    TensorView(const float* data, std::size_t rows, std::size_t columns) : data_(data), shape_{rows, columns} {}

    const std::array<std::size_t, 2>& shape() const { return shape_; }  // {rows, columns}
    TensorDType dtype() const { return TensorDType::F32; }
    std::span<const float> values() const { return {data_, shape_[0] * shape_[1]}; }
    // One row, for convenience.
    std::span<const float> row(std::size_t r) const { return {data_ + r * shape_[1], shape_[1]}; }
    const float* data() const { return data_; }

protected:
    const float* data_;
    std::array<std::size_t, 2> shape_;
};

// A view of a contiguous F32 [rows, columns] activation the engine owns. Valid only
// during the stage call; writes change the computation (no copy is made).
class TensorAccess : public TensorView {
public:
    TensorAccess(float* data, std::size_t rows, std::size_t columns) : TensorView(data, rows, columns), mutable_(data) {}

    std::span<float> values_mut() { return {mutable_, shape_[0] * shape_[1]}; }
    void zero() {
        for (float& v : values_mut()) v = 0.0f;
    }
    std::span<float> row_mut(std::size_t r) { return {mutable_ + r * shape_[1], shape_[1]}; }

private:
    float* mutable_;
};

struct ModelContext {
    ModelFamily family = ModelFamily::Llama;
    std::string_view model_name;
    std::size_t n_layers = 0;
    std::size_t n_embd = 0;
    std::size_t n_vocab = 0;
};

struct ExecutionContext {
    ExecutionPhase phase;
    std::size_t start_position;     // position of the evaluation's first token
    std::size_t input_token_count;  // tokens in this evaluation
    TracingState tracing;
    const ModelContext& model;
    std::size_t decode_step = 0;  // 0 for the prefill, then 1, 2, ... (0 on a 1.0 host)

    std::size_t sequence_length() const { return start_position + input_token_count; }
    // The position of the one token this evaluation holds (decode); empty otherwise.
    std::optional<std::size_t> token_position() const {
        if (input_token_count == 1) return start_position;
        return std::nullopt;
    }
};

struct LayerContext : ExecutionContext {
    std::size_t layer_index;
    // 1.1: the layer's geometry (0 on a 1.0 host).
    std::size_t n_head = 0;
    std::size_t head_dim = 0;
    std::size_t n_head_kv = 0;
    std::size_t n_ff = 0;
};

struct GenerationContext {
    std::size_t generated_tokens;
    std::size_t prompt_tokens;
    StopReason stop_reason;
    std::string_view run_id;
    double elapsed_ms;  // since before_prefill
    const ModelContext& model;
};

// The token position of row 0 of a stage's tensor: the evaluation's first position for
// layer stages, the first of the last `rows` positions for before_logits / after_logits.
// (Not for attention_pattern, whose rows are head-major: row h * T + t.)
namespace detail {
struct FirstRowPosition {
    std::size_t operator()(const ExecutionContext& ctx, const TensorView& tensor) const {
        return ctx.sequence_length() - tensor.shape()[0];
    }
};
}  // namespace detail
inline constexpr detail::FirstRowPosition first_row_position{};

enum class LogLevel { Debug, Info, Warning, Error };

// 1.1: what the host answered a lifecycle request (Host::skip_inference, rewrite_prompt).
// Refused leaves the run as it was; status() turns a refusal into a failed Status
// carrying the host's reason, for a stage that cannot go on without it.
class HostAnswer {
public:
    enum class Refusal { None, WrongStage, Taken, Invalid, Unsupported, OlderHost };

    HostAnswer() = default;
    HostAnswer(Refusal refusal, std::string reason) : refusal_(refusal), reason_(std::move(reason)) {}

    bool accepted() const { return refusal_ == Refusal::None; }
    Refusal refusal() const { return refusal_; }
    const std::string& reason() const { return reason_; }  // empty when accepted
    Status status() const { return accepted() ? Status{} : Status::error(reason_); }

private:
    Refusal refusal_ = Refusal::None;
    std::string reason_;
};

// What the host says about the run (views valid until the instance is destroyed).
struct RunInfo {
    std::string_view run_id;
    std::string_view output_dir;
    std::string_view model_path;
    std::string_view model_sha256;
    std::string_view route;
    std::string_view config_hash;
    std::string_view config_dir;
    std::span<const std::uint32_t> prompt_token_ids;
};

// The host's services for the instance being called. ember::host() returns it during
// any call into the plugin (create, a stage, destroy); outside one it is unavailable
// and logs go to stderr.
class Host {
public:
    explicit Host(const ember_host_services* services) : services_(services) {}

    bool available() const { return services_ != nullptr; }

    void log(LogLevel level, std::string_view message) const {
        const std::string text(message);
        if (services_ && services_->log) {
            services_->log(services_->host_data, static_cast<std::uint32_t>(level), text.c_str());
        } else {
            std::fprintf(stderr, "%s\n", text.c_str());
        }
    }
    void debug(std::string_view message) const { log(LogLevel::Debug, message); }
    void info(std::string_view message) const { log(LogLevel::Info, message); }
    void warning(std::string_view message) const { log(LogLevel::Warning, message); }
    void error(std::string_view message) const { log(LogLevel::Error, message); }

    RunInfo run_info() const {
        RunInfo info;
        if (!services_ || !EMBER_HAS_FIELD(services_, ember_host_services, run_info) || !services_->run_info)
            return info;
        const ember_run_info* r = services_->run_info;
        auto text = [](const char* s) { return s ? std::string_view(s) : std::string_view(); };
        info.run_id = text(r->run_id);
        info.output_dir = text(r->output_dir);
        info.model_path = text(r->model_path);
        info.model_sha256 = text(r->model_sha256);
        info.route = text(r->route);
        info.config_hash = text(r->config_hash);
        info.config_dir = text(r->config_dir);
        if (EMBER_HAS_FIELD(r, ember_run_info, prompt_token_count) && r->prompt_token_ids)
            info.prompt_token_ids = {r->prompt_token_ids, static_cast<std::size_t>(r->prompt_token_count)};
        return info;
    }

    // 1.1: the ids generated so far (the prompt excluded), valid during the current call.
    // Empty on a 1.0 host.
    std::span<const std::uint32_t> generated_token_ids() const {
        if (!services_ || !EMBER_HAS_FIELD(services_, ember_host_services, generated_token_ids) ||
            !services_->generated_token_ids)
            return {};
        const std::uint32_t* ids = nullptr;
        const std::uint64_t n = services_->generated_token_ids(services_->host_data, &ids);
        return {ids, ids ? static_cast<std::size_t>(n) : 0};
    }

    // 1.1, during before_prefill only: skip the inference and make `ids` the generated
    // tokens (nothing is evaluated, no tensor stage fires, on_generation_complete sees
    // StopReason::Skipped). Refused on a 1.0 host, outside before_prefill, after another
    // experiment's request, for an id outside the vocabulary, and in an extraction.
    HostAnswer skip_inference(std::span<const std::uint32_t> ids) const {
        if (!services_ || !EMBER_HAS_FIELD(services_, ember_host_services, skip_inference) || !services_->skip_inference)
            return {HostAnswer::Refusal::OlderHost, "skip_inference refused: this host (an older ABI) does not offer it"};
        return answer([&](ember_error_buffer* reason) {
            return services_->skip_inference(services_->host_data, ids.data(), ids.size(), reason);
        });
    }

    // 1.1, during before_prefill only: replace the prompt text (UTF-8) before it is
    // tokenized; every call after the before_prefill round sees the new text's tokens.
    HostAnswer rewrite_prompt(std::string_view text) const {
        if (!services_ || !EMBER_HAS_FIELD(services_, ember_host_services, rewrite_prompt) || !services_->rewrite_prompt)
            return {HostAnswer::Refusal::OlderHost, "rewrite_prompt refused: this host (an older ABI) does not offer it"};
        return answer([&](ember_error_buffer* reason) {
            return services_->rewrite_prompt(services_->host_data, text.data(), text.size(), reason);
        });
    }

    // 1.2: the current prompt (the run's; in a dataset run the current sample's, from its
    // before_prefill on), valid during the current call. Empty on an older host, and in a
    // dataset run before the first sample.
    std::string_view prompt_text() const {
        if (!services_ || !EMBER_HAS_FIELD(services_, ember_host_services, prompt_text) || !services_->prompt_text)
            return {};
        const char* text = nullptr;
        const std::uint64_t n = services_->prompt_text(services_->host_data, &text);
        return text ? std::string_view(text, static_cast<std::size_t>(n)) : std::string_view();
    }
    std::span<const std::uint32_t> prompt_token_ids() const {
        if (!services_ || !EMBER_HAS_FIELD(services_, ember_host_services, prompt_token_ids) ||
            !services_->prompt_token_ids)
            return {};
        const std::uint32_t* ids = nullptr;
        const std::uint64_t n = services_->prompt_token_ids(services_->host_data, &ids);
        return {ids, ids ? static_cast<std::size_t>(n) : 0};
    }
    // Each prompt token's byte span [start, end) in prompt_text(), one per prompt token.
    std::span<const ember_token_span> prompt_token_spans() const {
        if (!has_prompt_text()) return {};
        const ember_token_span* spans = nullptr;
        const std::uint64_t n = services_->prompt_token_spans(services_->host_data, &spans);
        return {spans, spans ? static_cast<std::size_t>(n) : 0};
    }
    // Whether this host offers the prompt's text and token spans (1.2).
    bool has_prompt_text() const {
        return services_ && EMBER_HAS_FIELD(services_, ember_host_services, prompt_token_spans) &&
               services_->prompt_text && services_->prompt_token_spans;
    }

    // 1.4: the bytes of the file at `path` (a relative path is taken from the directory of
    // the TOML file that configured the experiment), read by the host and recorded as an
    // input of the run (run.json's and the manifest's "inputs", role experiment_read), so
    // a result names the file by the digest of exactly these bytes. The view is valid
    // until the instance is destroyed. On failure (or an older host) `error` says why.
    struct InputBytes {
        std::string_view bytes;
        std::string error;
        bool ok() const { return error.empty(); }
    };
    InputBytes read_input(std::string_view path) const {
        if (!services_ || !EMBER_HAS_FIELD(services_, ember_host_services, read_input) || !services_->read_input)
            return {{}, "read_input refused: this host (an older ABI) does not offer it"};
        std::array<char, EMBER_ERROR_CAPACITY> text{};
        ember_error_buffer reason{text.data(), text.size()};
        const std::uint8_t* bytes = nullptr;
        std::uint64_t size = 0;
        const std::string name(path);
        if (services_->read_input(services_->host_data, name.c_str(), &bytes, &size, &reason) != EMBER_OK) {
            text.back() = '\0';
            return {{}, text[0] != '\0' ? std::string(text.data()) : std::string("read_input failed")};
        }
        return {{reinterpret_cast<const char*>(bytes), static_cast<std::size_t>(size)}, {}};
    }

    // A path from this experiment's config, made absolute against the directory of the
    // TOML file that configured it (unchanged when already absolute).
    std::string resolve_path(std::string_view path) const {
        const auto dir = run_info().config_dir;
        if (path.empty() || path.front() == '/' || dir.empty()) return std::string(path);
        std::string out(dir);
        if (out.back() != '/') out += '/';
        return out + std::string(path);
    }

private:
    template <class Request>
    static HostAnswer answer(Request&& request) {
        std::array<char, EMBER_ERROR_CAPACITY> text{};
        ember_error_buffer reason{text.data(), text.size()};
        const ember_status code = request(&reason);
        text.back() = '\0';
        switch (code) {
            case EMBER_OK: return {};
            case EMBER_REFUSED_STAGE: return {HostAnswer::Refusal::WrongStage, text.data()};
            case EMBER_REFUSED_TAKEN: return {HostAnswer::Refusal::Taken, text.data()};
            case EMBER_REFUSED_UNSUPPORTED: return {HostAnswer::Refusal::Unsupported, text.data()};
            default: return {HostAnswer::Refusal::Invalid, text.data()};
        }
    }

    const ember_host_services* services_;
};

namespace detail {
// The services of the instance currently being called (set by the exported wrappers).
// Hidden, so that two plugins in one process never share it.
[[gnu::visibility("hidden")]] inline thread_local const ember_host_services* current_services = nullptr;
}  // namespace detail

inline Host host() { return Host(detail::current_services); }

// The base class of every experiment. Only name() is required; it must return the name
// the plugin is exported under. Every stage defaults to success and, when not
// overridden, is not called at all.
class Experiment {
public:
    virtual ~Experiment() = default;
    virtual const char* name() const = 0;

    virtual Status on_model_loaded(const ModelContext&) { return {}; }
    virtual Status before_prefill(const ExecutionContext&) { return {}; }
    virtual Status before_layer(const LayerContext&, TensorAccess& /*hidden*/) { return {}; }
    // 1.1: [n_head * T, n_kv] post-softmax probabilities, row h * T + t; read-only.
    virtual Status attention_pattern(const LayerContext&, const TensorView& /*pattern*/) { return {}; }
    // 1.1: [T, n_head * head_dim] per-head attention outputs, head h in columns [h * D, (h + 1) * D).
    virtual Status head_outputs(const LayerContext&, TensorAccess& /*heads*/) { return {}; }
    virtual Status after_attention(const LayerContext&, TensorAccess& /*attention_output*/) { return {}; }
    // 1.3: [T, n_embd] the residual stream between the blocks (before_layer + after_attention).
    virtual Status residual_mid(const LayerContext&, TensorAccess& /*hidden*/) { return {}; }
    // 1.5: [T, n_embd] the MLP block's input after its norm (what the gate and up projections read).
    virtual Status mlp_input(const LayerContext&, TensorAccess& /*hidden*/) { return {}; }
    // 1.1: [T, n_ff] the gated activation entering the down projection.
    virtual Status mlp_activation(const LayerContext&, TensorAccess& /*activation*/) { return {}; }
    virtual Status after_mlp(const LayerContext&, TensorAccess& /*mlp_output*/) { return {}; }
    virtual Status after_layer(const LayerContext&, TensorAccess& /*hidden*/) { return {}; }
    // 1.3: [T, d_sae] the features of an SAE loaded at a site of this layer (docs/features.md).
    virtual Status sae_features(const LayerContext&, TensorAccess& /*features*/) { return {}; }
    virtual Status before_logits(const ExecutionContext&, TensorAccess& /*hidden*/) { return {}; }
    virtual Status after_logits(const ExecutionContext&, TensorAccess& /*logits*/) { return {}; }
    virtual Status on_generation_complete(const GenerationContext&) { return {}; }
    virtual Status on_error(const GenerationContext&, std::string_view /*message*/) { return {}; }

    // 1.1: the stages this instance wants, as bits 1 << EMBER_STAGE_* (ember/stages.h),
    // asked once after on_model_loaded. Overriding it lets a class that implements many
    // stages be called only at the ones its configuration selects; a stage nobody wants
    // costs nothing (the attention pattern is not even computed).
    virtual std::uint64_t subscribed_stages() const { return ~std::uint64_t{0}; }
};

}  // namespace ember

#include "ember/detail/export.hpp"
