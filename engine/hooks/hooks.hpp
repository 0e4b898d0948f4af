// The hook contract inside the engine (design.md, "The hook contract").
//
// Family code is a template over a hooks type and calls a hook at every stage site:
//
//   hooks.before_layer(eval, layer, hidden);      // residual entering layer
//   hooks.after_attention(eval, layer, attn_out); // attention block output, before the residual add
//   hooks.after_mlp(eval, layer, mlp_out);        // MLP block output, before the residual add
//   hooks.after_layer(eval, layer, hidden);       // residual leaving layer (llama.cpp's l_out-N)
//   hooks.before_logits(eval, normed);            // final-normed rows whose logits are computed
//   hooks.after_logits(eval, logits);             // final logits (after soft-capping)
//
// Two hooks types exist:
// - DisabledHooks: normal generation. Every method is an empty always-inlined function,
//   so an instantiation with it contains no hook dispatch at all.
// - ActiveHooks: an abstract class; experiments, extraction and capture implement it. One
//   virtual call per stage site. A hook that fails throws (the run stops).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ember::hooks {

enum class Phase { Prefill, Decode };

inline std::string_view phase_name(Phase p) { return p == Phase::Prefill ? "prefill" : "decode"; }

// The tensor-bearing stages in the order they fire within one evaluation.
enum class Stage { BeforeLayer, AfterAttention, AfterMlp, AfterLayer, BeforeLogits, AfterLogits };

inline std::string_view stage_name(Stage s) {
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

// A contiguous F32 [rows, cols] activation owned by the engine (row stride = cols).
// Valid only during the hook call; writes through it change the computation.
struct TensorView {
    float* data = nullptr;
    std::size_t rows = 0;
    std::size_t cols = 0;
};

// What an evaluation is: the prompt (prefill) or one generated token (decode).
struct EvalInfo {
    Phase phase = Phase::Prefill;
    std::size_t start_position = 0;  // position of the first row
    std::size_t n_tokens = 0;        // rows in the layer tensors
    std::size_t step = 0;            // 0 for prefill, then 1, 2, ... per decode evaluation
    bool tracing = false;
    // The positions of the rows seen by before_logits/after_logits: the last one unless
    // the run asked for all of them.
    bool all_logits = false;
};

struct DisabledHooks {
    static constexpr bool enabled = false;
    [[gnu::always_inline]] void before_layer(const EvalInfo&, std::uint32_t, TensorView) {}
    [[gnu::always_inline]] void after_attention(const EvalInfo&, std::uint32_t, TensorView) {}
    [[gnu::always_inline]] void after_mlp(const EvalInfo&, std::uint32_t, TensorView) {}
    [[gnu::always_inline]] void after_layer(const EvalInfo&, std::uint32_t, TensorView) {}
    [[gnu::always_inline]] void before_logits(const EvalInfo&, TensorView) {}
    [[gnu::always_inline]] void after_logits(const EvalInfo&, TensorView) {}
};

class ActiveHooks {
public:
    static constexpr bool enabled = true;
    virtual ~ActiveHooks() = default;
    virtual void before_layer(const EvalInfo& eval, std::uint32_t layer, TensorView hidden) = 0;
    virtual void after_attention(const EvalInfo& eval, std::uint32_t layer, TensorView attention_output) = 0;
    virtual void after_mlp(const EvalInfo& eval, std::uint32_t layer, TensorView mlp_output) = 0;
    virtual void after_layer(const EvalInfo& eval, std::uint32_t layer, TensorView hidden) = 0;
    virtual void before_logits(const EvalInfo& eval, TensorView hidden) = 0;
    virtual void after_logits(const EvalInfo& eval, TensorView logits) = 0;
};

}  // namespace ember::hooks
