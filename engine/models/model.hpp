// A loaded model: its validated config and weights (views into the mapped GGUF file),
// and the forward pass of its family. One class per family (llama.cpp, qwen3.cpp,
// gemma4.cpp) implements it; load_model picks the family from general.architecture.
//
// The forward pass is generic over a hooks type (hooks/hooks.hpp). Each family compiles
// it twice: with DisabledHooks (normal generation: no hook code at all) and with
// ActiveHooks (experiments, extraction, capture: one virtual call per stage site).
// A Model is immutable after loading and may serve several sessions at once.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "hooks/hooks.hpp"
#include "kernels/ops.hpp"
#include "models/kv_cache.hpp"
#include "models/model_config.hpp"
#include "models/workspace.hpp"

namespace ember::models {

// One sequence of a packed evaluation (several sequences in one, runtime::Session::
// prefill_packed): rows [row_begin, row_begin + rows) at positions position, +1, ...,
// whose position 0 is cache slot kv_begin. Each row attends only to its own sequence.
// With all logits asked for, the LM head reads each sequence's rows as an evaluation of it
// alone would: all of them (all_logits), or its last one only. (A float LM head sums in
// another order for one row than for several, as llama.cpp's does, so batching
// sequences must not change which rows one product holds; the other rows' logits are
// left unwritten.)
struct Segment {
    std::size_t row_begin = 0;
    std::size_t rows = 0;
    std::size_t position = 0;
    std::size_t kv_begin = 0;
    bool all_logits = true;
};

// One evaluation: the tokens at positions info.start_position, +1, ... (their K/V stored
// at the cache slots of those positions). The caller has checked the ids against the
// vocabulary and the positions against the cache.
struct Evaluation {
    std::span<const std::int32_t> tokens;
    hooks::EvalInfo info;  // phase, start_position, n_tokens, step, all_logits
    // Empty: one sequence (position 0 at slot 0). Else the packed sequences, tiling the rows.
    std::span<const Segment> segments;
};

// Everything one sequence's forward passes write. After an evaluation the logits are the
// first logit_rows(eval) rows of workspace.logits ([rows, n_vocab]).
struct ForwardState {
    KvCache kv_cache;
    Workspace workspace;
};

inline std::size_t logit_rows(const Evaluation& eval) { return eval.info.all_logits ? eval.tokens.size() : 1; }

// The weights of the read-out every family shares.
struct OutputHead {
    std::vector<float> output_norm;  // [n_embd]
    kernels::WeightMatrix output;    // [n_vocab, n_embd]; token_embd when the file has no output.weight
};
OutputHead load_output_head(const gguf::File& file, const ModelConfig& config, const kernels::WeightMatrix& token_embd);

class Model {
public:
    virtual ~Model() = default;
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const ModelConfig& config() const { return config_; }

    virtual void evaluate(const Evaluation& eval, ForwardState& state, kernels::Ops& ops,
                          hooks::DisabledHooks& hooks) const = 0;
    virtual void evaluate(const Evaluation& eval, ForwardState& state, kernels::Ops& ops,
                          hooks::ActiveHooks& hooks) const = 0;

    // The model's own read-out applied to any residual rows (a logit lens): the final
    // norm into `normed` [R, n_embd], then the LM head (and Gemma 4's soft-cap) into
    // `logits` [R, n_vocab]. At the last layer it is exactly what evaluate() computes.
    void unembed(kernels::Ops& ops, kernels::ConstRows hidden, kernels::Rows normed, kernels::Rows logits) const {
        final_norm(ops, hidden, normed);
        lm_head(ops, normed, logits);
    }

protected:
    Model(ModelConfig config, OutputHead head) : config_(std::move(config)), head_(std::move(head)) {}

    // "result_norm": hidden [R, n_embd] -> normed [R, n_embd]
    void final_norm(kernels::Ops& ops, kernels::ConstRows hidden, kernels::Rows normed) const;
    // "output" (+ "final_logit_softcap"): normed [R, n_embd] -> logits [R, n_vocab]; for a
    // packed evaluation with every row's logits (R = the rows of all `segments`), one
    // product per sequence over the rows Segment::all_logits names.
    void lm_head(kernels::Ops& ops, kernels::ConstRows normed, kernels::Rows logits,
                 std::span<const Segment> segments = {}) const;

    ModelConfig config_;
    OutputHead head_;
};

// Reads the config (load_model_config) and the family's weights, validating both.
// `file` must outlive the model (weights are views into its mapping).
// `scales` says who runs the block-scale check (block_scales.hpp): load_model, or its
// caller (runtime::LoadedModel does it while it hashes the file, before anything runs).
enum class ScaleCheck { here, by_caller };
std::unique_ptr<Model> load_model(const gguf::File& file, std::optional<Family> expected = std::nullopt,
                                  ScaleCheck scales = ScaleCheck::here);

// Parameters the families pass to the kernels, derived from a layer's config.
kernels::RopeParams rope_params(const ModelConfig& config, const LayerConfig& layer, std::span<const float> freq_factors);
kernels::AttentionParams attention_params(const ModelConfig& config, const LayerConfig& layer);

// Where a layer's attention probabilities go: [n_head * T, n_kv] in the workspace when the
// hooks want the attention_pattern stage, else empty (nothing is materialised). With
// DisabledHooks this is constantly empty.
template <class Hooks>
kernels::Rows pattern_buffer(const Hooks& hooks, Workspace& ws, std::size_t n_head, std::size_t T, std::size_t n_kv) {
    if constexpr (Hooks::enabled) {
        if (hooks.wants(hooks::Stage::AttentionPattern)) return ws.pattern(n_head * T, n_kv);
    }
    return {};
}

// The two operations that depend on which sequence a row belongs to, for a plain or a
// packed evaluation; every family calls these instead of ops.rope / ops.attention.
// RoPE of x's rows, each at its own position:
void rope_rows(kernels::Ops& ops, const kernels::OpSite& site, const Evaluation& eval, kernels::Rows x,
               const kernels::RopeParams& rope);
// Attention of each query row over its own sequence's cached K/V up to its position
// (this evaluation's rows already stored), per segment exactly as a plain evaluation of it.
// pattern: empty, or (plain evaluations only: a packed one refuses it) [n_head * T, n_kv]
// receiving the probabilities (Backend::attention).
void attend(kernels::Ops& ops, const kernels::OpSite& site, const Evaluation& eval, kernels::ConstRows q,
            kernels::KvRows cache_k, kernels::KvRows cache_v, const kernels::AttentionParams& params, kernels::Rows out,
            kernels::Rows pattern = {});

}  // namespace ember::models
