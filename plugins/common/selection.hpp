// Which activations a built-in experiment acts on, read from its [experiment.config]:
//
//   stage = "after_mlp"              # or stages = ["after_mlp", "after_layer"]
//   layers = [0, 3]                  # or "all" (default); ignored by logits stages
//   positions = [0, 5]               # absolute token positions, or "last", or "all" (default)
//   phase = "prefill"                # or "decode", or "all" (default)
//
// "last" is the last position of each evaluation: the prompt's last token in prefill,
// the one token of every decode step. Shared by the built-ins; header-only, built
// against the SDK alone like the plugins themselves.
#pragma once

#include <ember/experiment.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ember_plugins {

enum class Stage { BeforeLayer, AfterAttention, AfterMlp, AfterLayer, BeforeLogits, AfterLogits };
inline constexpr std::array<Stage, 6> kAllStages = {Stage::BeforeLayer, Stage::AfterAttention, Stage::AfterMlp,
                                                    Stage::AfterLayer,  Stage::BeforeLogits,   Stage::AfterLogits};

inline const char* stage_name(Stage s) {
    switch (s) {
        case Stage::BeforeLayer: return "before_layer";
        case Stage::AfterAttention: return "after_attention";
        case Stage::AfterMlp: return "after_mlp";
        case Stage::AfterLayer: return "after_layer";
        case Stage::BeforeLogits: return "before_logits";
        case Stage::AfterLogits: return "after_logits";
    }
    return "unknown";
}

inline std::optional<Stage> stage_from_name(std::string_view name) {
    for (Stage s : kAllStages)
        if (name == stage_name(s)) return s;
    return std::nullopt;
}

inline bool is_layer_stage(Stage s) { return s != Stage::BeforeLogits && s != Stage::AfterLogits; }

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
            stages_[static_cast<std::size_t>(*s)] = true;
        }
        if (names.empty())
            for (Stage s : default_stages) stages_[static_cast<std::size_t>(s)] = true;

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

    bool has_stage(Stage s) const { return stages_[static_cast<std::size_t>(s)]; }
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

    // The rows of `tensor` whose positions are selected.
    template <class F>
    void for_each_row(const ember::ExecutionContext& ctx, const ember::TensorAccess& tensor, F&& f) const {
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

    std::array<bool, 6> stages_{};
    bool all_layers_ = true;
    std::vector<std::size_t> layers_;
    bool all_positions_ = true;
    bool last_only_ = false;
    std::vector<std::size_t> positions_;
    PhaseFilter phase_ = PhaseFilter::All;
};

}  // namespace ember_plugins
