// The hook contract inside the engine (design.md, "The hook contract"). The stages are
// the rows of ember/stages.h; this header names them for C++ and checks the names
// against that table at compile time.
//
// Family code is a template over a hooks type and calls a hook at every tensor stage site:
//
//   hooks.before_layer(eval, layer, hidden);          // residual entering layer
//   hooks.attention_pattern(eval, layer, pattern);    // post-softmax probabilities [H*T, n_kv] (read-only copy)
//   hooks.head_outputs(eval, layer, heads);           // per-head attention output [T, H*D], before attn_output
//   hooks.after_attention(eval, layer, attn_out);     // attention block output, before the residual add
//   hooks.residual_mid(eval, layer, hidden);          // residual after the attention add, what the MLP reads
//   hooks.mlp_input(eval, layer, normed);             // that residual after the MLP's norm, what gate/up read
//   hooks.mlp_activation(eval, layer, hidden);        // gated activation entering ffn_down [T, n_ff]
//   hooks.after_mlp(eval, layer, mlp_out);            // MLP block output, before the residual add
//   hooks.after_layer(eval, layer, hidden);           // residual leaving layer (llama.cpp's l_out-N)
//   hooks.before_logits(eval, normed);                // final-normed rows whose logits are computed
//   hooks.after_logits(eval, logits);                 // final logits (after soft-capping)
//
// and asks hooks.wants(Stage::AttentionPattern) before materialising the pattern, which
// only a subscribed stage is worth.
//
// Two hooks types exist:
// - DisabledHooks: normal generation. Every method is an empty always-inlined function
//   and wants() is constantly false, so an instantiation with it contains no hook code.
// - ActiveHooks: experiments, extraction and capture implement its one virtual, stage();
//   one virtual call per stage site. A hook that fails throws (the run stops).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ember/stages.h"
#include "kernels/rows.hpp"

namespace ember::hooks {

enum class Phase { Prefill, Decode };

inline std::string_view phase_name(Phase p) { return p == Phase::Prefill ? "prefill" : "decode"; }

// Every call into an experiment, by its ABI id (ember/stages.h).
enum class Stage : std::uint32_t {
    Create = EMBER_STAGE_CREATE,
    OnModelLoaded = EMBER_STAGE_ON_MODEL_LOADED,
    BeforePrefill = EMBER_STAGE_BEFORE_PREFILL,
    BeforeLayer = EMBER_STAGE_BEFORE_LAYER,
    AttentionPattern = EMBER_STAGE_ATTENTION_PATTERN,
    HeadOutputs = EMBER_STAGE_HEAD_OUTPUTS,
    AfterAttention = EMBER_STAGE_AFTER_ATTENTION,
    ResidualMid = EMBER_STAGE_RESIDUAL_MID,
    SaeFeatures = EMBER_STAGE_SAE_FEATURES,  // fired by features::SaeSplicer, not by the families
    MlpInput = EMBER_STAGE_MLP_INPUT,
    MlpActivation = EMBER_STAGE_MLP_ACTIVATION,
    AfterMlp = EMBER_STAGE_AFTER_MLP,
    AfterLayer = EMBER_STAGE_AFTER_LAYER,
    BeforeLogits = EMBER_STAGE_BEFORE_LOGITS,
    AfterLogits = EMBER_STAGE_AFTER_LOGITS,
    OnGenerationComplete = EMBER_STAGE_ON_GENERATION_COMPLETE,
    OnError = EMBER_STAGE_ON_ERROR,
};
inline constexpr std::size_t kStageCount = EMBER_STAGE_COUNT;

constexpr std::size_t index_of(Stage s) { return static_cast<std::size_t>(s); }
constexpr const ember_stage_info& stage_info(Stage s) { return *ember_find_stage(static_cast<std::uint32_t>(s)); }
constexpr std::string_view stage_name(Stage s) { return stage_info(s).name; }
constexpr bool is_tensor_stage(Stage s) { return stage_info(s).kind != EMBER_STAGE_KIND_LIFECYCLE; }
constexpr bool is_layer_stage(Stage s) { return stage_info(s).kind == EMBER_STAGE_KIND_LAYER; }

// Every stage in firing order (the table's order).
inline constexpr std::array<Stage, kStageCount> kAllStages = [] {
    std::array<Stage, kStageCount> out{};
    for (std::size_t i = 0; i < kStageCount; ++i) out[i] = static_cast<Stage>(ember_stage_table[i].id);
    return out;
}();

// The tensor-bearing stages in firing order.
inline constexpr std::size_t kTensorStageCount = ember_tensor_stage_count;
inline constexpr std::array<Stage, kTensorStageCount> kTensorStages = [] {
    std::array<Stage, kTensorStageCount> out{};
    for (std::size_t i = 0; i < kTensorStageCount; ++i) out[i] = static_cast<Stage>(ember_tensor_stages.ids[i]);
    return out;
}();

// The enumerators above are the table's rows, by name.
static_assert(stage_name(Stage::BeforeLayer) == "before_layer" && stage_name(Stage::AfterAttention) == "after_attention" &&
              stage_name(Stage::AfterMlp) == "after_mlp" && stage_name(Stage::AfterLayer) == "after_layer" &&
              stage_name(Stage::BeforeLogits) == "before_logits" && stage_name(Stage::AfterLogits) == "after_logits" &&
              stage_name(Stage::AttentionPattern) == "attention_pattern" &&
              stage_name(Stage::HeadOutputs) == "head_outputs" && stage_name(Stage::MlpActivation) == "mlp_activation" &&
              stage_name(Stage::ResidualMid) == "residual_mid" && stage_name(Stage::SaeFeatures) == "sae_features" &&
              stage_name(Stage::MlpInput) == "mlp_input" &&
              stage_name(Stage::Create) == "create" && stage_name(Stage::OnModelLoaded) == "on_model_loaded" &&
              stage_name(Stage::BeforePrefill) == "before_prefill" &&
              stage_name(Stage::OnGenerationComplete) == "on_generation_complete" &&
              stage_name(Stage::OnError) == "on_error",
              "hooks::Stage and ember_stage_table disagree");

// A set of stages, one bit per id (the ABI's subscribed_stages bits).
using StageMask = std::uint64_t;
constexpr StageMask stage_bit(Stage s) { return StageMask{1} << index_of(s); }
inline constexpr StageMask kAllStageBits = (StageMask{1} << kStageCount) - 1;

// A contiguous F32 [rows, cols] activation owned by the engine (row stride = cols).
// Valid only during the hook call; writes through it change the computation (except for
// the read-only stages, whose tensor is a copy).
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

// The layer argument of stage() for the logits stages.
inline constexpr std::uint32_t kNoLayer = UINT32_MAX;

// The family code hands the stage sites its own Rows (contiguous): nothing is computed
// at a site for DisabledHooks, not even the view.
struct DisabledHooks {
    static constexpr bool enabled = false;
    static constexpr bool wants(Stage) { return false; }
    [[gnu::always_inline]] void before_layer(const EvalInfo&, std::uint32_t, const kernels::Rows&) {}
    [[gnu::always_inline]] void attention_pattern(const EvalInfo&, std::uint32_t, const kernels::Rows&) {}
    [[gnu::always_inline]] void head_outputs(const EvalInfo&, std::uint32_t, const kernels::Rows&) {}
    [[gnu::always_inline]] void after_attention(const EvalInfo&, std::uint32_t, const kernels::Rows&) {}
    [[gnu::always_inline]] void residual_mid(const EvalInfo&, std::uint32_t, const kernels::Rows&) {}
    [[gnu::always_inline]] void mlp_input(const EvalInfo&, std::uint32_t, const kernels::Rows&) {}
    [[gnu::always_inline]] void mlp_activation(const EvalInfo&, std::uint32_t, const kernels::Rows&) {}
    [[gnu::always_inline]] void after_mlp(const EvalInfo&, std::uint32_t, const kernels::Rows&) {}
    [[gnu::always_inline]] void after_layer(const EvalInfo&, std::uint32_t, const kernels::Rows&) {}
    [[gnu::always_inline]] void before_logits(const EvalInfo&, const kernels::Rows&) {}
    [[gnu::always_inline]] void after_logits(const EvalInfo&, const kernels::Rows&) {}
};

class ActiveHooks {
public:
    static constexpr bool enabled = true;
    virtual ~ActiveHooks() = default;

    // Called at every tensor stage site; `layer` is kNoLayer for the logits stages.
    virtual void stage(Stage stage, const EvalInfo& eval, std::uint32_t layer, TensorView tensor) = 0;
    // Whether stage() wants `stage` at all; the family code skips work (the attention
    // pattern) for a stage nobody wants. Called per layer, so cheap.
    virtual bool wants(Stage /*stage*/) const { return true; }

    // The view of the engine's own rows (contiguous) at a stage site.
    static TensorView view(const kernels::Rows& r) { return {r.data, r.rows, r.cols}; }

    void before_layer(const EvalInfo& e, std::uint32_t l, TensorView t) { stage(Stage::BeforeLayer, e, l, t); }
    void attention_pattern(const EvalInfo& e, std::uint32_t l, TensorView t) { stage(Stage::AttentionPattern, e, l, t); }
    void head_outputs(const EvalInfo& e, std::uint32_t l, TensorView t) { stage(Stage::HeadOutputs, e, l, t); }
    void after_attention(const EvalInfo& e, std::uint32_t l, TensorView t) { stage(Stage::AfterAttention, e, l, t); }
    void residual_mid(const EvalInfo& e, std::uint32_t l, TensorView t) { stage(Stage::ResidualMid, e, l, t); }
    void mlp_input(const EvalInfo& e, std::uint32_t l, TensorView t) { stage(Stage::MlpInput, e, l, t); }
    void mlp_activation(const EvalInfo& e, std::uint32_t l, TensorView t) { stage(Stage::MlpActivation, e, l, t); }
    void after_mlp(const EvalInfo& e, std::uint32_t l, TensorView t) { stage(Stage::AfterMlp, e, l, t); }
    void after_layer(const EvalInfo& e, std::uint32_t l, TensorView t) { stage(Stage::AfterLayer, e, l, t); }
    void before_logits(const EvalInfo& e, TensorView t) { stage(Stage::BeforeLogits, e, kNoLayer, t); }
    void after_logits(const EvalInfo& e, TensorView t) { stage(Stage::AfterLogits, e, kNoLayer, t); }
    void before_layer(const EvalInfo& e, std::uint32_t l, const kernels::Rows& r) { before_layer(e, l, view(r)); }
    void attention_pattern(const EvalInfo& e, std::uint32_t l, const kernels::Rows& r) { attention_pattern(e, l, view(r)); }
    void head_outputs(const EvalInfo& e, std::uint32_t l, const kernels::Rows& r) { head_outputs(e, l, view(r)); }
    void after_attention(const EvalInfo& e, std::uint32_t l, const kernels::Rows& r) { after_attention(e, l, view(r)); }
    void residual_mid(const EvalInfo& e, std::uint32_t l, const kernels::Rows& r) { residual_mid(e, l, view(r)); }
    void mlp_input(const EvalInfo& e, std::uint32_t l, const kernels::Rows& r) { mlp_input(e, l, view(r)); }
    void mlp_activation(const EvalInfo& e, std::uint32_t l, const kernels::Rows& r) { mlp_activation(e, l, view(r)); }
    void after_mlp(const EvalInfo& e, std::uint32_t l, const kernels::Rows& r) { after_mlp(e, l, view(r)); }
    void after_layer(const EvalInfo& e, std::uint32_t l, const kernels::Rows& r) { after_layer(e, l, view(r)); }
    void before_logits(const EvalInfo& e, const kernels::Rows& r) { before_logits(e, view(r)); }
    void after_logits(const EvalInfo& e, const kernels::Rows& r) { after_logits(e, view(r)); }
};

}  // namespace ember::hooks
