// The gated feed-forward block the three families share (llama.cpp's build_ffn with a
// parallel gate): out = down(act(gate(h)) * up(h)), h = rms_norm(x) * norm. Llama and
// Qwen3 gate with SiLU, Gemma 4 with tanh-GELU. It fires no hook: feed_forward_input
// returns h, feed_forward_activation stops at the gated activation, and the family file
// fires mlp_input and mlp_activation between them and applies the down projection itself,
// so every hook site stays in the family files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "hooks/hooks.hpp"
#include "kernels/ops.hpp"
#include "kernels/weight_format.hpp"
#include "models/model.hpp"
#include "models/tensor_loader.hpp"
#include "models/workspace.hpp"

namespace ember::models {

struct FeedForward {
    std::vector<float> norm;     // [n_embd] ffn_norm
    kernels::WeightMatrix gate;  // [n_ff, n_embd]
    kernels::WeightMatrix up;    // [n_ff, n_embd]
    kernels::WeightMatrix down;  // [n_embd, n_ff]
};

enum class GateActivation { Silu, Gelu };

// The rows [T - result, T) the MLP block of layer `il` computes: all T rows; but in the
// last layer, when no hook observes any row (DisabledHooks), the evaluation is one
// sequence and only the last row's logits are read, that row alone, if the block's
// products give it the same bits at any row count (llama.cpp's output ids do the same).
template <class Hooks>
std::size_t mlp_rows(const Evaluation& eval, std::uint32_t il, std::uint32_t n_layers, const FeedForward& w) {
    const std::size_t T = eval.tokens.size();
    if constexpr (!std::is_same_v<Hooks, hooks::DisabledHooks>) {
        return T;
    } else {
        if (T == 1 || il + 1 != n_layers || !eval.segments.empty() || logit_rows(eval) != 1) return T;
        for (const kernels::WeightMatrix* m : {&w.gate, &w.up, &w.down})
            if (!kernels::same_bits_at_any_row_count(kernels::weight_format(m->type))) return T;
        return 1;
    }
}

// blk.N.ffn_norm, ffn_gate, ffn_up and ffn_down, checked against n_embd and n_ff.
FeedForward load_feed_forward(const TensorLoader& tensors, std::uint32_t layer, std::size_t n_embd, std::size_t n_ff);

// x: [T, n_embd] the residual stream (read only). Returns h = rms_norm(x) * norm, a
// [T, n_embd] view of ws.normed.
kernels::Rows feed_forward_input(kernels::Ops& ops, std::int32_t layer, const FeedForward& w, float eps,
                                 kernels::ConstRows x, Workspace& ws);

// h: [T, n_embd] feed_forward_input's rows. Returns act(gate(h)) * up(h), a
// [T, n_ff] view of ws.ffn_hidden (the input of w.down); the intermediates live in the
// workspace's normed, gate and up buffers.
kernels::Rows feed_forward_activation(kernels::Ops& ops, std::int32_t layer, GateActivation activation,
                                      const FeedForward& w, kernels::ConstRows h, Workspace& ws);

}  // namespace ember::models
