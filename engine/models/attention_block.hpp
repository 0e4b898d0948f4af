// The self-attention block Llama and Qwen3 share (llama.cpp's build_attn with separate
// Q, K and V projections), up to the per-head outputs:
//
//   h = rms_norm(x) * attn_norm;   q = Wq h,  k = Wk h,  v = Wv h
//   (Qwen3) each head of q and k RMS-normed over its head_dim values with attn_q_norm / attn_k_norm
//   q, k rotated (RoPE); k, v stored at the evaluation's positions of the layer's cache
//   heads = softmax(scale * q k^T, causal) v          [T, n_head * head_dim]
//
// It fires no hook: the family file fires attention_pattern and head_outputs on what this
// returns, then applies the output projection (w.output), so every hook site stays in
// the family file. Gemma 4's attention (shared KV, V norm) is its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/ops.hpp"
#include "models/kv_cache.hpp"
#include "models/model_config.hpp"
#include "models/tensor_loader.hpp"
#include "models/workspace.hpp"

namespace ember::models {

struct Attention {
    std::vector<float> norm;        // [n_embd] attn_norm
    kernels::WeightMatrix q;        // [n_head * head_dim, n_embd]
    kernels::WeightMatrix k;        // [n_head_kv * head_dim, n_embd]
    kernels::WeightMatrix v;        // [n_head_kv * head_dim, n_embd]
    std::vector<float> q_norm;      // [head_dim], or empty (no per-head Q/K norm)
    std::vector<float> k_norm;      // [head_dim], or empty
    kernels::WeightMatrix output;   // [n_embd, n_head * head_dim]
};

enum class HeadNorm { None, QK };  // Llama: None; Qwen3: each head of Q and K RMS-normed

// blk.N.attn_norm, attn_q, attn_k, attn_v, attn_output (and attn_q_norm, attn_k_norm
// with HeadNorm::QK), checked against the layer's geometry.
Attention load_attention(const TensorLoader& tensors, std::uint32_t layer, const LayerConfig& config,
                         std::size_t n_embd, HeadNorm head_norm);

// Refuses, for every family, the tensors no forward pass here computes with: attention
// and MLP biases, a fused QKV projection, a mixture-of-experts router.
void refuse_unsupported_tensors(const TensorLoader& tensors, std::uint32_t layer);

// Where one layer's attention reads and writes.
struct Evaluation;

struct AttentionSite {
    std::int32_t layer = 0;
    const ModelConfig* model = nullptr;
    const LayerConfig* config = nullptr;
    std::span<const float> rope_freqs;  // per-pair RoPE factors, or empty
    std::size_t first_position = 0;     // position of row 0
};

// x: [T, n_embd] the residual stream (read only). Returns the per-head outputs, a
// [T, n_head * head_dim] view of ws.attention; the intermediates live in ws.normed, q, k,
// v. RoPE and attention go per sequence of a packed evaluation (rope_rows, attend).
// pattern: empty, or [n_head * T, n_kv] receiving the probabilities (Backend::attention).
kernels::Rows attention_heads(kernels::Ops& ops, const AttentionSite& site, const Evaluation& eval, const Attention& w,
                              kernels::ConstRows x, KvCache& cache, Workspace& ws, kernels::Rows pattern);

}  // namespace ember::models
