// Which activations a built-in experiment acts on, read from its [experiment.config]:
//
//   stage = "after_mlp"              # or stages = ["after_mlp", "after_layer"]
//   layers = [0, 3]                  # or "all" (default); ignored by logits stages
//   positions = [0, 5]               # absolute token positions, or "last", or "all" (default)
//   select = "substring:كتب:last"    # or a selection spec anchored to the prompt's text
//                                    # (ember/selection.hpp), instead of positions
//   phase = "prefill"                # or "decode", or "all" (default)
//   heads = [2, 5]                   # head_outputs / attention_pattern only: these heads (default all)
//   neurons = [17, 301]              # mlp_activation only: these columns (default all)
//
// "last" is the last position of each evaluation: the prompt's last token in prefill,
// the one token of every decode step. `select` (a string or the object form) is resolved
// at every before_prefill against the prompt's text and token spans, which the host gives
// (plugin ABI 1.2): the run's prompt, or in a dataset run each sample's. It picks prompt
// positions only (no decode row), and a spec that selects nothing fails before_prefill,
// naming the key and the spec. The stages are ember/stages.h's tensor stages, by
// their ABI ids. Shared by the built-ins; header-only, built against the SDK alone like
// the plugins themselves.
#pragma once

#include <ember/experiment.hpp>
#include <ember/selection.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ember_plugins {

// A tensor stage, by its ABI id (EMBER_STAGE_*).
using Stage = std::uint32_t;

// Every tensor stage, in firing order.
inline constexpr const ember_tensor_stage_list& kAllStages = ember_tensor_stages;
// The tensor stages of ABI 1.0 ("every stage" for the built-ins that default to all: the
// inner stages are chosen by name).
inline std::vector<Stage> block_stages() {
    std::vector<Stage> out;
    for (Stage s : kAllStages)
        if (ember_find_stage(s)->since_minor == 0) out.push_back(s);
    return out;
}

inline const char* stage_name(Stage s) { return ember_find_stage(s)->name; }

inline std::optional<Stage> stage_from_name(std::string_view name) {
    for (Stage s : kAllStages)
        if (name == stage_name(s)) return s;
    return std::nullopt;
}

// The selection spec under `key` (a string or the object form), if given; a ConfigError
// naming the key when it is not a spec.
inline std::optional<ember::selection::Spec> read_spec(const ember::ExperimentConfig& config, const char* key) {
    const ember::JsonValue* v = config.json().find(key);
    if (!v) return std::nullopt;
    try {
        return ember::selection::from_json(*v);
    } catch (const ember::selection::SpecError& e) {
        throw ember::ConfigError(std::string("config key '") + key + "': " + e.what());
    }
}

// The spans of the host's current prompt, as ember/selection.hpp takes them.
inline std::vector<ember::selection::TokenSpan> to_token_spans(std::span<const ember_token_span> spans) {
    std::vector<ember::selection::TokenSpan> out;
    for (const ember_token_span& t : spans)
        out.push_back({static_cast<std::size_t>(t.start), static_cast<std::size_t>(t.end)});
    return out;
}

// The rows `spec` (configured under `key`) selects in `text`; an error message naming
// the key, the spec and `where` (e.g. "this prompt") when it selects nothing.
inline std::vector<ember::selection::Selected> resolve_spec(const ember::selection::Spec& spec, const char* key,
                                                            std::string_view text,
                                                            std::span<const ember::selection::TokenSpan> spans,
                                                            const std::string& where, std::string& error) {
    ember::selection::Resolved r = ember::selection::resolve(spec, text, spans);
    if (r.rows.empty())
        error = std::string("config key '") + key + "' = '" + spec.to_string() + "' selects nothing in " + where + ": " +
                r.why_empty;
    return std::move(r.rows);
}

inline bool is_layer_stage(Stage s) { return ember_find_stage(s)->kind == EMBER_STAGE_KIND_LAYER; }
inline bool is_read_only(Stage s) { return ember_find_stage(s)->access == EMBER_ACCESS_READ_ONLY; }

// Every tensor stage a write can change, in firing order.
inline std::vector<Stage> writable_stages() {
    std::vector<Stage> out;
    for (Stage s : kAllStages)
        if (!is_read_only(s)) out.push_back(s);
    return out;
}

class Selection {
public:
    // Reads stage/stages, layers, positions (or the spec) and phase. `default_stages` applies when
    // neither stage nor stages is given; empty means one of them is required.
    // `select_key` names the spec key (patch reads its target's spec as target_select).
    Selection(const ember::ExperimentConfig& config, std::vector<Stage> default_stages, const char* select_key = "select")
        : select_key_(select_key) {
        if (config.has("stage") && config.has("stages")) throw ember::ConfigError("give stage or stages, not both");
        std::vector<std::string> names;
        if (config.has("stage")) names.push_back(config.get_string("stage", ""));
        else if (config.has("stages")) names = config.get_string_list("stages", {});
        if (names.empty() && default_stages.empty())
            throw ember::ConfigError("config key 'stage' is required (one of " + stage_list() + ")");
        for (const auto& n : names) {
            const auto s = stage_from_name(n);
            if (!s) throw ember::ConfigError("unknown stage '" + n + "' (one of " + stage_list() + ")");
            stages_[*s] = true;
        }
        if (names.empty())
            for (Stage s : default_stages) stages_[s] = true;
        heads_ = columns_key(config, "heads", {EMBER_STAGE_HEAD_OUTPUTS, EMBER_STAGE_ATTENTION_PATTERN});
        neurons_ = columns_key(config, "neurons", {EMBER_STAGE_MLP_ACTIVATION});
        features_ = columns_key(config, "features", {EMBER_STAGE_SAE_FEATURES});

        if (const ember::JsonValue* v = config.json().find("layers"); v && !(v->is_string() && v->as_string() == "all")) {
            for (auto l : config.get_int_list("layers", {})) {
                if (l < 0) throw ember::ConfigError("config key 'layers' holds a negative layer " + std::to_string(l));
                layers_.push_back(static_cast<std::size_t>(l));
            }
            all_layers_ = false;
        }
        if (const ember::JsonValue* v = config.json().find("positions"); v && v->is_string()) {
            const std::string p = v->as_string();
            if (p == "last") last_only_ = true;
            else if (p != "all") throw ember::ConfigError("config key 'positions' must be \"all\", \"last\" or a list");
        } else if (v) {
            for (auto p : config.get_int_list("positions", {})) {
                if (p < 0) throw ember::ConfigError("config key 'positions' holds a negative position");
                positions_.push_back(static_cast<std::size_t>(p));
            }
            all_positions_ = false;
        }
        const std::string phase = config.get_string("phase", "all");
        if (phase == "prefill") phase_ = PhaseFilter::Prefill;
        else if (phase == "decode") phase_ = PhaseFilter::Decode;
        else if (phase != "all") throw ember::ConfigError("config key 'phase' must be \"all\", \"prefill\" or \"decode\"");
        spec_ = read_spec(config, select_key_);
        if (spec_ && config.has("positions"))
            throw ember::ConfigError(std::string("give positions or ") + select_key_ + ", not both");
        if (spec_ && phase_ == PhaseFilter::Decode)
            throw ember::ConfigError(std::string("config key '") + select_key_ +
                                     "' selects prompt positions, which phase = \"decode\" never holds");
    }

    // Resolves the spec (if any) against the host's current prompt: call at before_prefill.
    // An error naming the key and the spec when the host gives no prompt text or the spec
    // selects nothing.
    ember::Status select_in_prompt() {
        if (!spec_) return {};
        const ember::Host host = ember::host();
        if (!host.has_prompt_text())
            return ember::Status::error(std::string("config key '") + select_key_ +
                                        "' needs the prompt's text and token spans, which this host does not give "
                                        "(plugin ABI 1.2)");
        spans_ = to_token_spans(host.prompt_token_spans());
        std::string error;
        selected_ = resolve_spec(*spec_, select_key_, host.prompt_text(), spans_, "this prompt", error);
        if (!error.empty()) return ember::Status::error(error);
        chosen_.assign(spans_.size(), false);
        for (const auto& row : selected_) chosen_[row.position] = true;
        return {};
    }

    // The spec (when positions come from one), its key, and what it selected in the
    // current prompt (ascending positions) with that prompt's token spans.
    const std::optional<ember::selection::Spec>& spec() const { return spec_; }
    const char* select_key() const { return select_key_; }
    const std::vector<ember::selection::Selected>& selected() const { return selected_; }
    const std::vector<ember::selection::TokenSpan>& prompt_spans() const { return spans_; }

    // Refuses layers the model does not have (call from on_model_loaded).
    ember::Status check_layers(const ember::ModelContext& model) const {
        for (auto l : layers_)
            if (l >= model.n_layers)
                return ember::Status::error("config key 'layers' names layer " + std::to_string(l) + " but the model has " +
                                            std::to_string(model.n_layers) + " layers");
        return {};
    }

    bool has_stage(Stage s) const { return stages_[s]; }
    // Bits 1 << id of the selected stages (Experiment::subscribed_stages).
    std::uint64_t stage_bits() const {
        std::uint64_t bits = 0;
        for (Stage s : stages()) bits |= std::uint64_t{1} << s;
        return bits;
    }
    // Refuses a selected stage the experiment cannot act on (it writes; the stage is read-only).
    void refuse_read_only(const char* experiment) const {
        for (Stage s : stages())
            if (is_read_only(s))
                throw ember::ConfigError(std::string(stage_name(s)) + " is read-only: " + experiment + " cannot change it");
    }

    // The selected heads (empty: all) and neurons (empty: all).
    const std::vector<std::size_t>& heads() const { return heads_; }
    const std::vector<std::size_t>& neurons() const { return neurons_; }

    // Calls f(column) for the columns of a row that `heads` / `neurons` select: every
    // column without a selector; head h's columns [h * D, (h + 1) * D) for head_outputs
    // (D = columns / n_head); the selected neuron columns for mlp_activation.
    // ember::Status error for a head or neuron the tensor does not have.
    template <class F>
    ember::Status for_each_column(Stage stage, std::size_t columns, std::size_t n_head, F&& f) const {
        if (stage == EMBER_STAGE_HEAD_OUTPUTS && !heads_.empty()) {
            const std::size_t D = columns / n_head;
            for (std::size_t h : heads_) {
                if (h >= n_head) return head_error(h, n_head);
                for (std::size_t c = h * D; c < (h + 1) * D; ++c) f(c);
            }
            return {};
        }
        if (stage == EMBER_STAGE_SAE_FEATURES && !features_.empty()) {
            for (std::size_t n : features_) {
                if (n >= columns)
                    return ember::Status::error("config key 'features' names feature " + std::to_string(n) +
                                                " but the SAE has " + std::to_string(columns));
                f(n);
            }
            return {};
        }
        if (stage == EMBER_STAGE_MLP_ACTIVATION && !neurons_.empty()) {
            for (std::size_t n : neurons_) {
                if (n >= columns)
                    return ember::Status::error("config key 'neurons' names neuron " + std::to_string(n) +
                                                " but mlp_activation has " + std::to_string(columns));
                f(n);
            }
            return {};
        }
        for (std::size_t c = 0; c < columns; ++c) f(c);
        return {};
    }
    // Whether an attention_pattern row (head h) is selected.
    bool wants_head(std::size_t h) const {
        return heads_.empty() || std::find(heads_.begin(), heads_.end(), h) != heads_.end();
    }
    static ember::Status head_error(std::size_t h, std::size_t n_head) {
        return ember::Status::error("config key 'heads' names head " + std::to_string(h) + " but the layer has " +
                                    std::to_string(n_head) + " heads");
    }
    std::vector<Stage> stages() const {
        std::vector<Stage> out;
        for (Stage s : kAllStages)
            if (has_stage(s)) out.push_back(s);
        return out;
    }

    bool wants_phase(ember::ExecutionPhase phase) const {
        if (phase_ == PhaseFilter::All) return true;
        return (phase_ == PhaseFilter::Prefill) == (phase == ember::ExecutionPhase::Prefill);
    }

    // Is this stage, phase and layer selected? (no layer: a logits stage)
    bool wants_site(Stage s, ember::ExecutionPhase phase, std::optional<std::size_t> layer) const {
        if (!has_stage(s) || !wants_phase(phase)) return false;
        if (!layer || all_layers_) return true;
        return std::find(layers_.begin(), layers_.end(), *layer) != layers_.end();
    }
    bool wants(Stage s, const ember::ExecutionContext& ctx, std::optional<std::size_t> layer) const {
        return wants_site(s, ctx.phase, layer);
    }

    // Is the row holding `position` selected, in an evaluation ending at `sequence_length`?
    bool wants_position(std::size_t position, std::size_t sequence_length) const {
        if (spec_) return position < chosen_.size() && chosen_[position];
        if (last_only_) return position + 1 == sequence_length;
        if (all_positions_) return true;
        return std::find(positions_.begin(), positions_.end(), position) != positions_.end();
    }

    // The rows of `tensor` whose positions are selected: f(row, position). For
    // attention_pattern ([n_head * T, n_kv], row h * T + t) the rows of the selected
    // heads, in head-major order.
    template <class F>
    void for_each_row(Stage stage, const ember::ExecutionContext& ctx, const ember::TensorView& tensor, F&& f) const {
        if (stage == EMBER_STAGE_ATTENTION_PATTERN) {
            const std::size_t T = ctx.input_token_count;
            for (std::size_t r = 0; r < tensor.shape()[0]; ++r) {
                const std::size_t position = ctx.start_position + r % T;
                if (wants_head(r / T) && wants_position(position, ctx.sequence_length())) f(r, position);
            }
            return;
        }
        const std::size_t first = ember::first_row_position(ctx, tensor);
        for (std::size_t r = 0; r < tensor.shape()[0]; ++r)
            if (wants_position(first + r, ctx.sequence_length())) f(r, first + r);
    }

private:
    enum class PhaseFilter { All, Prefill, Decode };

    static std::string stage_list() {
        std::string out;
        for (Stage s : kAllStages) out += (out.empty() ? "" : ", ") + std::string(stage_name(s));
        return out;
    }

    // A list of non-negative integers under `key`, allowed only with one of `stages`.
    std::vector<std::size_t> columns_key(const ember::ExperimentConfig& config, const char* key,
                                         std::initializer_list<Stage> stages) const {
        std::vector<std::size_t> out;
        if (!config.has(key)) return out;
        bool applies = false;
        for (Stage s : stages) applies |= has_stage(s);
        if (!applies) {
            std::string names;
            for (Stage s : stages) names += (names.empty() ? "" : " or ") + std::string(stage_name(s));
            throw ember::ConfigError(std::string("config key '") + key + "' applies only to " + names);
        }
        for (auto v : config.get_int_list(key, {})) {
            if (v < 0) throw ember::ConfigError(std::string("config key '") + key + "' holds a negative index");
            out.push_back(static_cast<std::size_t>(v));
        }
        if (out.empty()) throw ember::ConfigError(std::string("config key '") + key + "' is empty");
        return out;
    }

    std::array<bool, EMBER_STAGE_COUNT> stages_{};
    std::vector<std::size_t> heads_;
    std::vector<std::size_t> neurons_;
    std::vector<std::size_t> features_;  // sae_features columns
    bool all_layers_ = true;
    std::vector<std::size_t> layers_;
    bool all_positions_ = true;
    bool last_only_ = false;
    std::vector<std::size_t> positions_;
    PhaseFilter phase_ = PhaseFilter::All;
    const char* select_key_;
    std::optional<ember::selection::Spec> spec_;
    std::vector<ember::selection::TokenSpan> spans_;    // the current prompt's
    std::vector<ember::selection::Selected> selected_;  // what spec_ selects in it
    std::vector<bool> chosen_;                          // by position: selected
};

}  // namespace ember_plugins
