// Counts the residual-stream rows each layer sees and logs a summary at the end.
#include <ember/experiment.hpp>

#include <string>
#include <vector>

class Counter : public ember::Experiment {
public:
    explicit Counter(const ember::ExperimentConfig& config) : verbose_(config.get_bool("verbose", false)) {}

    const char* name() const override { return "counter"; }

    ember::Status on_model_loaded(const ember::ModelContext& model) override {
        rows_per_layer_.assign(model.n_layers, 0);
        return {};
    }

    ember::Status after_layer(const ember::LayerContext& ctx, ember::TensorAccess& hidden) override {
        rows_per_layer_.at(ctx.layer_index) += hidden.shape()[0];
        if (verbose_)
            ember::host().debug("layer " + std::to_string(ctx.layer_index) + " at position " +
                                std::to_string(ctx.start_position));
        return {};
    }

    ember::Status on_generation_complete(const ember::GenerationContext& gen) override {
        std::string line = "run " + std::string(gen.run_id) + ": rows per layer";
        for (auto n : rows_per_layer_) line += " " + std::to_string(n);
        ember::host().info(line);
        return {};
    }

private:
    bool verbose_;
    std::vector<std::size_t> rows_per_layer_;
};

EMBER_EXPORT_EXPERIMENT(Counter, "counter", "1.0.0", "counts the rows each layer sees")
