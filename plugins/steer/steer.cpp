// steer: adds coefficient * vector to a stage's activations at chosen layers, positions
// and phases. The vector is a .npy file (float32 or float64, shape (n,) or (1, n)) whose
// length must be the stage's width: n_embd, n_vocab for after_logits, the layer's
// n_head * head_dim for head_outputs, its n_ff for mlp_activation (checked at each
// call: Gemma 4's layers differ). attention_pattern is read-only and refused.
//
//   [[experiment]]
//   plugin = "build/plugins/libsteer.so"
//   [experiment.config]
//   vector = "vectors/happy.npy"   # relative to the TOML file that configures it
//   coefficient = 4.0              # default 1.0
//   stage = "before_layer"         # required
//   layers = [6]                   # or "all" (default)
//   positions = "all"              # or "last", or [0, 3]
//   select = "substring:كتب:last"  # instead of positions: a selection spec on the prompt's text
//   phase = "all"                  # or "prefill", "decode"
#include <ember/experiment.hpp>
#include <ember/npy.hpp>

#include <string>
#include <vector>

#include "plugin_support/site_selection.hpp"
#include "plugin_support/stage_experiment.hpp"

namespace {

using ember_plugins::Selection;
using ember_plugins::Stage;

class Steer : public ember_plugins::StageExperiment {
public:
    explicit Steer(const ember::ExperimentConfig& config) : StageExperiment(Selection(config, {})) {
        config.expect_only({"vector", "coefficient", "stage", "stages", "layers", "positions", "select", "phase"});
        selection_.refuse_read_only("steer");
        if (!config.has("vector")) throw ember::ConfigError("config key 'vector' (a .npy file) is required");
        path_ = ember::host().resolve_path(config.get_string("vector", ""));
        coefficient_ = static_cast<float>(config.get_double("coefficient", 1.0));
        const ember::npy::Array array = ember::npy::read(path_);
        const auto& s = array.shape;
        if (!(s.size() == 1 || (s.size() == 2 && s[0] == 1)))
            throw std::runtime_error("steer vector '" + path_ + "' must have shape (n,) or (1, n)");
        vector_ = array.values;
    }

    const char* name() const override { return "steer"; }

    ember::Status on_model_loaded(const ember::ModelContext& model) override {
        if (auto s = selection_.check_layers(model); !s.ok()) return s;
        for (Stage stage : selection_.stages()) {
            const std::uint32_t shape = ember_find_stage(stage)->shape;
            if (shape == EMBER_SHAPE_TOKENS_BY_HEADS || shape == EMBER_SHAPE_TOKENS_BY_FF ||
                shape == EMBER_SHAPE_TOKENS_BY_FEATURES)
                continue;  // per layer, or per SAE: checked at each call
            const bool logits = stage == EMBER_STAGE_AFTER_LOGITS;
            const std::size_t width = logits ? model.n_vocab : model.n_embd;
            if (vector_.size() != width)
                return ember::Status::error("steer vector '" + path_ + "' has " + std::to_string(vector_.size()) +
                                            " values, but " + ember_plugins::stage_name(stage) + " is " +
                                            std::to_string(width) + " wide (the model's " +
                                            (logits ? "n_vocab" : "n_embd") + ")");
        }
        return {};
    }

private:
    ember::Status act(Stage stage, const ember::ExecutionContext& ctx, std::optional<std::size_t> layer,
                        ember::TensorAccess& tensor) override {
        if (!selection_.wants(stage, ctx, layer)) return {};
        if (tensor.shape()[1] != vector_.size())
            return ember::Status::error("steer vector '" + path_ + "' has " + std::to_string(vector_.size()) +
                                        " values, but the activation has " + std::to_string(tensor.shape()[1]) +
                                        " columns");
        if (coefficient_ == 0.0f) return {};  // adding nothing: leave every bit as it is
        selection_.for_each_row(stage, ctx, tensor, [&](std::size_t row, std::size_t) {
            auto values = tensor.row_mut(row);
            for (std::size_t i = 0; i < values.size(); ++i) values[i] += coefficient_ * vector_[i];
        });
        return {};
    }

    std::string path_;
    float coefficient_ = 1.0f;
    std::vector<float> vector_;
};

}  // namespace

EMBER_EXPORT_EXPERIMENT(Steer, "steer", "1.0.0", "add a vector from a .npy file to a stage's activations")
