// finite-check: fails the stage where a NaN or an infinity first appears.
//
//   [[experiment]]
//   plugin = "build/plugins/libfinite-check.so"
//   [experiment.config]
//   stages = ["after_attention", "after_mlp"]   # default: the six block stages of ABI 1.0
//                                                # (head_outputs, mlp_activation, attention_pattern by name)
//   layers = "all"                               # or [0, 1]
//   phase = "all"                                # or "prefill", "decode"
//
// The message names the first bad value in row-major order:
//   expected a finite activation, found nan at position 5 (row 5), column 17
#include <ember/experiment.hpp>

#include <cmath>
#include <string>

#include "plugin_support/site_selection.hpp"
#include "plugin_support/stage_experiment.hpp"

namespace {

using ember_plugins::Selection;
using ember_plugins::Stage;

class FiniteCheck : public ember_plugins::StageExperiment {
public:
    explicit FiniteCheck(const ember::ExperimentConfig& config)
        : StageExperiment(Selection(config, ember_plugins::block_stages())) {
        config.expect_only({"stage", "stages", "layers", "phase"});
    }

    const char* name() const override { return "finite-check"; }

    ember::Status on_model_loaded(const ember::ModelContext& model) override { return selection_.check_layers(model); }

private:
    ember::Status act(Stage stage, const ember::ExecutionContext& ctx, std::optional<std::size_t> layer,
                        ember::TensorAccess& tensor) override {
        if (!selection_.wants(stage, ctx, layer)) return {};
        const auto values = tensor.values();
        const std::size_t cols = tensor.shape()[1];
        for (std::size_t i = 0; i < values.size(); ++i) {
            if (std::isfinite(values[i])) continue;
            const std::size_t row = i / cols;
            const std::size_t col = i % cols;
            const std::size_t position = stage == EMBER_STAGE_ATTENTION_PATTERN
                                             ? ctx.start_position + row % ctx.input_token_count
                                             : ember::first_row_position(ctx, tensor) + row;
            const char* what = std::isnan(values[i]) ? "nan" : (values[i] > 0 ? "inf" : "-inf");
            return ember::Status::error("expected a finite activation, found " + std::string(what) + " at position " +
                                        std::to_string(position) + " (row " +
                                        std::to_string(row) + "), column " + std::to_string(col));
        }
        return {};
    }

};

}  // namespace

EMBER_EXPORT_EXPERIMENT(FiniteCheck, "finite-check", "1.0.0", "fail where a NaN or infinity appears in an activation")
