// Which activations a built-in experiment acts on, read from its [experiment.config]:
//
//   stage = "after_mlp"              # or stages = ["after_mlp", "after_layer"]
//   layers = [0, 3]                  # or "all" (default); ignored by logits stages
//   positions = [0, 5]               # absolute token positions, or "last", or "all" (default)
//   phase = "prefill"                # or "decode", or "all" (default)
//   heads = [2, 5]                   # head_outputs / attention_pattern only: these heads (default all)
//   neurons = [17, 301]              # mlp_activation only: these columns (default all)
//
// "last" is the last position of each evaluation: the prompt's last token in prefill,
// the one token of every decode step. The stages are ember/stages.h's tensor stages, by
// their ABI ids. Shared by the built-ins; header-only, built against the SDK alone like
// the plugins themselves.
#pragma once

#include <ember/experiment.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
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
    // Reads stage/stages, layers, positions and phase. `default_stages` applies when
    // neither stage nor stages is given; empty means one of them is required.
    Selection(const ember::ExperimentConfig& config, std::vector<Stage> default_stages) {
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
    }

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
    bool all_layers_ = true;
    std::vector<std::size_t> layers_;
    bool all_positions_ = true;
    bool last_only_ = false;
    std::vector<std::size_t> positions_;
    PhaseFilter phase_ = PhaseFilter::All;
};

}  // namespace ember_plugins
