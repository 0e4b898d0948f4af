// A model's forward pass on the reference route that keeps what its backward pass needs,
// and that backward pass: d(metric)/d(activation) at every tensor stage site, for Llama,
// Qwen3 and Gemma 4 (docs/attribution.md).
//
// The forward calls the reference kernels themselves (kernels/reference), in the order
// the family files call them through kernels::Ops, so every activation it keeps is bit
// for bit the reference route's (tests/attribution/forward_match_test). The backward
// treats the weights as constants and differentiates the activations only; each
// operation's backward is in gradient_ops.hpp with its derivation.
//
// What a gradient at a stage means: the derivative of the metric with respect to the
// tensor a hook sees at that site, an edit there propagating exactly as an edit by a hook
// would. So after_layer(l) and before_layer(l + 1) are the same gradient; Gemma 4's
// per-layer embedding inputs are computed before before_layer(0) and do not depend on it;
// attention_pattern (a read-only copy for hooks) has the gradient with respect to the
// probabilities as the layer used them.
//
// Memory: by default the tape keeps, per layer, only its input (before_layer, after any
// edit) and, for a layer whose K/V later layers share, its K and V; the backward recomputes
// each layer's intermediates from that input when it reaches the layer (gradient
// checkpointing at the layer boundaries), calling the same kernels on the same values, so
// the gradients are the same bytes as from a tape that kept everything
// (tests/attribution/recompute_test). One layer's intermediates are alive at a time.
//
//   const GradientModel model(file, config);
//   Tape tape = model.forward(tokens, logit_rows);          // logits of those rows in tape.logits
//   model.backward(tape, dlogits, [&](const Site& site) { ... });
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "attribution/gradient_weights.hpp"
#include "hooks/hooks.hpp"
#include "kernels/rows.hpp"
#include "models/model_config.hpp"

namespace ember::attribution {

// An owned F32 matrix, row-major.
struct Matrix {
    std::size_t rows = 0;
    std::size_t cols = 0;
    std::vector<float> values;

    static Matrix zeros(std::size_t rows, std::size_t cols) { return {rows, cols, std::vector<float>(rows * cols, 0.0f)}; }
    kernels::Rows view() { return {values.data(), rows, cols}; }
    kernels::ConstRows view() const { return {values.data(), rows, cols}; }
    bool empty() const { return values.empty(); }
};

// What one layer's forward kept: the activations at its stage sites and the
// intermediates their backward reads. T = the evaluated tokens.
struct LayerTape {
    Matrix x_in;        // [T, E] before_layer
    Matrix q_raw;       // [T, H * D] attn_q's output, before the per-head norm
    Matrix q;           // [T, H * D] as attended (normed, rotated)
    Matrix k_raw;       // [T, Hkv * D] attn_k's output (empty on a layer sharing K/V)
    Matrix v_raw;       // [T, Hkv * D] attn_v's output, or the raw K (Gemma 4 without attn_v)
    Matrix k;           // [T, Hkv * D] as attended
    Matrix v;           // [T, Hkv * D] as attended
    Matrix pattern;     // [H * T, T] attention_pattern, row h * T + t
    Matrix heads;       // [T, H * D] head_outputs
    Matrix attn_proj;   // [T, E] attn_output's output (Gemma 4: before its post-norm)
    Matrix attn_out;    // [T, E] after_attention
    Matrix x_mid;       // [T, E] the residual after the attention block
    Matrix mlp_in;      // [T, E] mlp_input: x_mid after the MLP's norm
    Matrix gate;        // [T, n_ff]
    Matrix up;          // [T, n_ff]
    Matrix act;         // [T, n_ff] mlp_activation
    Matrix mlp_proj;    // [T, E] ffn_down's output (Gemma 4: before its post-norm)
    Matrix mlp_out;     // [T, E] after_mlp
    Matrix x_pe;        // [T, E] the residual after the MLP block
    // Gemma 4 per-layer embedding residual (PL > 0).
    Matrix ple_pre;     // [T, PL] inp_gate(x_pe)
    Matrix ple_gelu;    // [T, PL]
    Matrix ple_proj;    // [T, E] proj(gelu * inputs), before its norm
    Matrix x_unscaled;  // [T, E] before layer_output_scale
    Matrix x_out;       // [T, E] after_layer
};

// What the forward keeps of each layer (see the top of this file).
enum class TapeKeeps {
    LayerInputs,  // before_layer (and shared K/V) per layer: the backward recomputes the rest
    Everything,   // every intermediate of every layer (tests; the tape read directly)
};

// One stage site in the backward: the activation the forward had there and the metric's
// gradient with respect to it, both [rows, cols] (attention_pattern: [H * T, T]). In the
// forward's `observe` calls, the gradient is empty.
struct Site {
    hooks::Stage stage = hooks::Stage::AfterLayer;
    std::optional<std::uint32_t> layer;  // none for before_logits
    kernels::ConstRows activation;
    kernels::ConstRows gradient;
};
using SiteSink = std::function<void(const Site&)>;

// Called by the forward at the writable stage sites (before_layer, head_outputs,
// after_attention, residual_mid, mlp_input, mlp_activation, after_mlp, after_layer) with the tensor
// about to be used; it may change it, as a hook may (integrated gradients interpolates a
// site). The tape keeps it: a recomputing backward makes the same edits again, so it must
// give the same result for the same tensor and outlive the tape's backward.
using SiteEdit = std::function<void(hooks::Stage stage, std::uint32_t layer, kernels::Rows tensor)>;

struct Tape {
    TapeKeeps keeps = TapeKeeps::LayerInputs;
    SiteEdit edit;                   // the forward's edits, made again by a recomputing backward
    std::vector<std::int32_t> tokens;
    Matrix per_layer_inputs;         // [T, n_layers * PL] (Gemma 4 with PL > 0)
    std::vector<LayerTape> layers;   // LayerInputs: x_in (and k, v when shared) alone
    Matrix x_final;                  // [T, E] after_layer of the last layer
    Matrix normed;                   // [T, E] before_logits, every row
    std::vector<std::size_t> logit_rows;  // the rows whose logits were computed
    Matrix logits_raw;               // [R, n_vocab] the LM head's output (before a soft-cap)
    Matrix logits;                   // [R, n_vocab] as the model reports them
};

class GradientModel {
public:
    // `file` must outlive the model (weights are views into its mapping).
    GradientModel(const gguf::File& file, const models::ModelConfig& config);

    const models::ModelConfig& config() const { return config_; }

    // The tokens at positions 0.. in one evaluation; the logits of `logit_rows` (ascending).
    // `observe` (optional) sees every stage site's activation as the forward passes it.
    Tape forward(std::span<const std::int32_t> tokens, std::span<const std::size_t> logit_rows,
                 const SiteEdit& edit = {}, const SiteSink& observe = {}, TapeKeeps keeps = TapeKeeps::LayerInputs) const;
    // dlogits [R, n_vocab]: dM/d tape.logits. Calls `sink` at every stage site, from
    // before_logits back to before_layer(0).
    void backward(const Tape& tape, kernels::ConstRows dlogits, const SiteSink& sink) const;

private:
    // One layer from lt.x_in (already edited) to lt.x_out, every intermediate into lt;
    // `kv` is the layer whose K/V it attends to (lt itself unless shared).
    void layer_forward(std::uint32_t il, const Tape& tape, LayerTape& lt, const LayerTape* kv_source,
                       const SiteEdit& edit) const;
    void attention_forward(std::uint32_t il, LayerTape& lt, const LayerTape& kv, const SiteEdit& edit) const;
    void mlp_forward(std::uint32_t il, LayerTape& lt, const SiteEdit& edit) const;
    void per_layer_forward(std::uint32_t il, const Tape& tape, LayerTape& lt) const;
    void per_layer_inputs(Tape& tape, const Matrix& x0) const;
    // Whether a later layer attends to layer il's K/V (Gemma 4's shared KV).
    bool kv_shared_later(std::uint32_t il) const;

    // dx: dM/d after_layer(il) in, dM/d before_layer(il) out. dk, dv: per layer, the
    // gradients of the K/V a layer stores (shared ones receive their readers' gradients).
    void layer_backward(std::uint32_t il, const Tape& tape, const LayerTape& lt, Matrix& dx, std::vector<Matrix>& dk,
                        std::vector<Matrix>& dv, const SiteSink& sink) const;

    models::ModelConfig config_;
    GradientWeights w_;
};

}  // namespace ember::attribution
