// An ActiveHooks for tests: copies what the stage sites hand out during the prefill
// evaluation (per layer: before_layer, after_attention, after_mlp, after_layer; then
// before_logits and after_logits), and records every evaluation's EvalInfo and largest
// |logit|. It also proves the sites: the tensors it copies are the ones llama.cpp
// calls l_out-N and result_norm.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "hooks/hooks.hpp"

namespace ember::test {

struct CapturedTensor {
    std::size_t rows = 0;
    std::size_t cols = 0;
    std::vector<float> values;
};

class CaptureHooks final : public hooks::ActiveHooks {
public:
    explicit CaptureHooks(std::size_t n_layers) {
        prefill.before_layer.resize(n_layers);
        prefill.after_attention.resize(n_layers);
        prefill.after_mlp.resize(n_layers);
        prefill.after_layer.resize(n_layers);
    }

    // Copies from the prefill evaluation, named by stage.
    struct Stages {
        std::vector<CapturedTensor> before_layer, after_attention, after_mlp, after_layer;  // per layer
        CapturedTensor before_logits, after_logits;
    } prefill;
    // Every evaluation, in order.
    std::vector<hooks::EvalInfo> evaluations;
    std::vector<float> max_abs_logit;  // over the after_logits rows
    std::size_t layer_calls = 0;       // tensor-bearing layer stage calls, all evaluations

    void stage(hooks::Stage stage, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView t) override {
        switch (stage) {
            case hooks::Stage::BeforeLayer:
                if (layer == 0) evaluations.push_back(eval);
                keep(eval, prefill.before_layer[layer], t);
                ++layer_calls;
                break;
            case hooks::Stage::AfterAttention:
                keep(eval, prefill.after_attention[layer], t);
                ++layer_calls;
                break;
            case hooks::Stage::AfterMlp:
                keep(eval, prefill.after_mlp[layer], t);
                ++layer_calls;
                break;
            case hooks::Stage::AfterLayer:
                keep(eval, prefill.after_layer[layer], t);
                ++layer_calls;
                break;
            case hooks::Stage::BeforeLogits: keep(eval, prefill.before_logits, t); break;
            case hooks::Stage::AfterLogits: {
                keep(eval, prefill.after_logits, t);
                float m = 0;
                for (std::size_t i = 0; i < t.rows * t.cols; ++i) m = std::max(m, std::abs(t.data[i]));
                max_abs_logit.push_back(m);
                break;
            }
            default: break;  // the stages inside the blocks are not captured here
        }
    }
    // Only the six block stages: no attention pattern is materialised for it.
    bool wants(hooks::Stage stage) const override {
        return stage != hooks::Stage::AttentionPattern && stage != hooks::Stage::HeadOutputs &&
               stage != hooks::Stage::MlpActivation;
    }

private:
    static void keep(const hooks::EvalInfo& eval, CapturedTensor& into, hooks::TensorView t) {
        if (eval.phase != hooks::Phase::Prefill) return;
        into.rows = t.rows;
        into.cols = t.cols;
        into.values.assign(t.data, t.data + t.rows * t.cols);
    }
};

}  // namespace ember::test
