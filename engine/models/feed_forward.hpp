// The gated feed-forward block the three families share (llama.cpp's build_ffn with a
// parallel gate): out = down(act(gate(h)) * up(h)), h = rms_norm(x) * norm. Llama and
// Qwen3 gate with SiLU, Gemma 4 with tanh-GELU. It fires no hook: feed_forward_activation
// stops at the gated activation, the family file fires mlp_activation on it and applies
// the down projection itself, so every hook site stays in the family files.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/ops.hpp"
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

// blk.N.ffn_norm, ffn_gate, ffn_up and ffn_down, checked against n_embd and n_ff.
FeedForward load_feed_forward(const TensorLoader& tensors, std::uint32_t layer, std::size_t n_embd, std::size_t n_ff);

// x: [T, n_embd] the residual stream (read only). Returns act(gate(h)) * up(h), a
// [T, n_ff] view of ws.ffn_hidden (the input of w.down); the intermediates live in the
// workspace's normed, gate and up buffers.
kernels::Rows feed_forward_activation(kernels::Ops& ops, std::int32_t layer, GateActivation activation,
                                      const FeedForward& w, float eps, kernels::ConstRows x, Workspace& ws);

}  // namespace ember::models
