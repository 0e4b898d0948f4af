// The base of the built-ins that treat every tensor stage alike: the stage methods all
// lead to one act(stage, context, layer, tensor), with no layer for the logits stages,
// and the instance subscribes only to the stages its selection names (so an unselected
// attention_pattern is never computed). It owns the Selection and resolves its `select`
// spec at every before_prefill (a derived class that needs before_prefill too calls
// StageExperiment::before_prefill first). Header-only, built against the SDK alone like
// the plugins themselves.
#pragma once

#include <ember/experiment.hpp>

#include <cstddef>
#include <optional>
#include <utility>

#include "plugin_support/site_selection.hpp"

namespace ember_plugins {

class StageExperiment : public ember::Experiment {
public:
    explicit StageExperiment(Selection selection) : selection_(std::move(selection)) {}

    ember::Status before_prefill(const ember::ExecutionContext&) override { return selection_.select_in_prompt(); }

    ember::Status before_layer(const ember::LayerContext& c, ember::TensorAccess& t) final {
        return act(EMBER_STAGE_BEFORE_LAYER, c, c.layer_index, t);
    }
    // Read-only: the built-ins that write refuse the stage when configured
    // (Selection::refuse_read_only), so act() only reads it.
    ember::Status attention_pattern(const ember::LayerContext& c, const ember::TensorView& t) final {
        ember::TensorAccess view(const_cast<float*>(t.data()), t.shape()[0], t.shape()[1]);
        return act(EMBER_STAGE_ATTENTION_PATTERN, c, c.layer_index, view);
    }
    ember::Status head_outputs(const ember::LayerContext& c, ember::TensorAccess& t) final {
        return act(EMBER_STAGE_HEAD_OUTPUTS, c, c.layer_index, t);
    }
    ember::Status after_attention(const ember::LayerContext& c, ember::TensorAccess& t) final {
        return act(EMBER_STAGE_AFTER_ATTENTION, c, c.layer_index, t);
    }
    ember::Status residual_mid(const ember::LayerContext& c, ember::TensorAccess& t) final {
        return act(EMBER_STAGE_RESIDUAL_MID, c, c.layer_index, t);
    }
    ember::Status mlp_input(const ember::LayerContext& c, ember::TensorAccess& t) final {
        return act(EMBER_STAGE_MLP_INPUT, c, c.layer_index, t);
    }
    ember::Status mlp_activation(const ember::LayerContext& c, ember::TensorAccess& t) final {
        return act(EMBER_STAGE_MLP_ACTIVATION, c, c.layer_index, t);
    }
    ember::Status after_mlp(const ember::LayerContext& c, ember::TensorAccess& t) final {
        return act(EMBER_STAGE_AFTER_MLP, c, c.layer_index, t);
    }
    ember::Status after_layer(const ember::LayerContext& c, ember::TensorAccess& t) final {
        return act(EMBER_STAGE_AFTER_LAYER, c, c.layer_index, t);
    }
    ember::Status sae_features(const ember::LayerContext& c, ember::TensorAccess& t) final {
        return act(EMBER_STAGE_SAE_FEATURES, c, c.layer_index, t);
    }
    ember::Status before_logits(const ember::ExecutionContext& c, ember::TensorAccess& t) final {
        return act(EMBER_STAGE_BEFORE_LOGITS, c, std::nullopt, t);
    }
    ember::Status after_logits(const ember::ExecutionContext& c, ember::TensorAccess& t) final {
        return act(EMBER_STAGE_AFTER_LOGITS, c, std::nullopt, t);
    }
    std::uint64_t subscribed_stages() const override { return selection_.stage_bits(); }

protected:
    // For a layer stage (layer set), `context` is the stage's LayerContext (its geometry:
    // layer_context(context).n_head).
    virtual ember::Status act(Stage stage, const ember::ExecutionContext& context, std::optional<std::size_t> layer,
                              ember::TensorAccess& tensor) = 0;

    static const ember::LayerContext& layer_context(const ember::ExecutionContext& context) {
        return static_cast<const ember::LayerContext&>(context);
    }

    Selection selection_;
};

}  // namespace ember_plugins
