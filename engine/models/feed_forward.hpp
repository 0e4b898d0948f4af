// The gated feed-forward block the three families share (llama.cpp's build_ffn with a
// parallel gate): out = down(act(gate(h)) * up(h)), h = rms_norm(x) * norm. Llama and
// Qwen3 gate with SiLU, Gemma 4 with tanh-GELU. It fires no hook: every hook site stays
// in the family files, where the whole forward pass is read.
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

// x: [T, n_embd] the residual stream (read only); out: [T, n_embd]. The intermediates
// live in the workspace's normed, gate, up and ffn_hidden buffers.
void feed_forward(kernels::Ops& ops, std::int32_t layer, GateActivation activation, const FeedForward& w, float eps,
                  kernels::ConstRows x, Workspace& ws, kernels::Rows out);

}  // namespace ember::models
