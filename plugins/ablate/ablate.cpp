// ablate: zero or scale one stage's activations at chosen layers, positions and phases.
//
//   [[experiment]]
//   plugin = "build/plugins/libablate.so"
//   [experiment.config]
//   stage = "after_mlp"        # required: where to ablate
//   layers = [1]               # or "all" (default)
//   positions = "all"          # or "last", or [0, 3]
//   select = "substring:كتب"   # instead of positions: a selection spec on the prompt's text
//   phase = "all"              # or "prefill", "decode"
//   mode = "zero"              # or "scale" (then scale = 0.5)
//   heads = [3]                # head_outputs only: these heads' columns (default all)
//   neurons = [17, 301]        # mlp_activation only: these neurons (default all)
//   features = [3, 41]         # sae_features only: these SAE features (default all)
//
// Zeroing head h of head_outputs removes exactly that head's term from after_attention;
// attention_pattern is read-only and refused.
#include <ember/experiment.hpp>

#include "plugin_support/site_selection.hpp"
#include "plugin_support/stage_experiment.hpp"

namespace {

using ember_plugins::Selection;
using ember_plugins::Stage;

class Ablate : public ember_plugins::StageExperiment {
public:
    explicit Ablate(const ember::ExperimentConfig& config) : StageExperiment(Selection(config, {})) {
        config.expect_only(
            {"stage", "stages", "layers", "positions", "select", "phase", "mode", "scale", "heads", "neurons", "features"});
        selection_.refuse_read_only("ablate");
        const std::string mode = config.get_string("mode", "zero");
        if (mode == "scale") {
            if (!config.has("scale")) throw ember::ConfigError("mode = \"scale\" needs config key 'scale'");
            scale_ = static_cast<float>(config.get_double("scale", 1.0));
            zero_ = false;
        } else if (mode == "zero") {
            if (config.has("scale")) throw ember::ConfigError("config key 'scale' applies only with mode = \"scale\"");
        } else {
            throw ember::ConfigError("config key 'mode' must be \"zero\" or \"scale\"");
        }
    }

    const char* name() const override { return "ablate"; }

    ember::Status on_model_loaded(const ember::ModelContext& model) override { return selection_.check_layers(model); }

private:
    ember::Status act(Stage stage, const ember::ExecutionContext& ctx, std::optional<std::size_t> layer,
                        ember::TensorAccess& tensor) override {
        if (!selection_.wants(stage, ctx, layer)) return {};
        const std::size_t n_head = layer ? layer_context(ctx).n_head : 0;
        if (stage == EMBER_STAGE_HEAD_OUTPUTS && n_head == 0) return ember::Status::error("the host gave no head count");
        ember::Status status;
        selection_.for_each_row(stage, ctx, tensor, [&](std::size_t row, std::size_t) {
            auto values = tensor.row_mut(row);
            if (status.ok())
                status = selection_.for_each_column(stage, values.size(), n_head, [&](std::size_t c) {
                    values[c] = zero_ ? 0.0f : values[c] * scale_;
                });
        });
        return status;
    }

    bool zero_ = true;
    float scale_ = 1.0f;
};

}  // namespace

EMBER_EXPORT_EXPERIMENT(Ablate, "ablate", "1.0.0", "zero or scale a stage's activations at chosen layers and positions")
