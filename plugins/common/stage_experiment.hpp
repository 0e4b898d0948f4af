// The base of the built-ins that treat every tensor stage alike: the six stage methods
// all lead to one act(stage, context, layer, tensor), with no layer for the logits
// stages. Header-only, built against the SDK alone like the plugins themselves.
#pragma once

#include <ember/experiment.hpp>

#include <cstddef>
#include <optional>

#include "common/selection.hpp"

namespace ember_plugins {

class StageExperiment : public ember::Experiment {
public:
    ember::Status before_layer(const ember::LayerContext& c, ember::TensorAccess& t) final {
        return act(Stage::BeforeLayer, c, c.layer_index, t);
    }
    ember::Status after_attention(const ember::LayerContext& c, ember::TensorAccess& t) final {
        return act(Stage::AfterAttention, c, c.layer_index, t);
    }
    ember::Status after_mlp(const ember::LayerContext& c, ember::TensorAccess& t) final {
        return act(Stage::AfterMlp, c, c.layer_index, t);
    }
    ember::Status after_layer(const ember::LayerContext& c, ember::TensorAccess& t) final {
        return act(Stage::AfterLayer, c, c.layer_index, t);
    }
    ember::Status before_logits(const ember::ExecutionContext& c, ember::TensorAccess& t) final {
        return act(Stage::BeforeLogits, c, std::nullopt, t);
    }
    ember::Status after_logits(const ember::ExecutionContext& c, ember::TensorAccess& t) final {
        return act(Stage::AfterLogits, c, std::nullopt, t);
    }

protected:
    virtual ember::Status act(Stage stage, const ember::ExecutionContext& context, std::optional<std::size_t> layer,
                              ember::TensorAccess& tensor) = 0;
};

}  // namespace ember_plugins
