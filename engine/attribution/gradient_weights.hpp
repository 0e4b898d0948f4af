// The weights the gradient forward reads, for every family in one shape: views into the
// mapped GGUF file (matrices) and F32 vectors (norms), found and checked with the same
// TensorLoader and the same loaders as the families' own forward passes (models/attention_block,
// models/feed_forward; Gemma 4's layout as models/gemma4.cpp loads it). Nothing is
// dequantized here: the kernels dequantize rows as they read them.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "kernels/weight.hpp"
#include "models/model_config.hpp"

namespace ember::attribution {

struct AttentionWeights {
    std::vector<float> norm;                    // [n_embd] attn_norm
    kernels::WeightMatrix q;                    // [H * D, n_embd]
    std::optional<kernels::WeightMatrix> k;     // [Hkv * D, n_embd]; absent on a layer that shares K/V
    std::optional<kernels::WeightMatrix> v;     // absent: Gemma 4 takes V from the raw K projection
    std::vector<float> q_norm;                  // [D] or empty (Llama)
    std::vector<float> k_norm;                  // [D] or empty
    kernels::WeightMatrix output;               // [n_embd, H * D]
    std::vector<float> post_norm;               // [n_embd] Gemma 4's post-attention norm, else empty
};

struct MlpWeights {
    std::vector<float> norm;      // [n_embd] ffn_norm
    kernels::WeightMatrix gate;   // [n_ff, n_embd]
    kernels::WeightMatrix up;     // [n_ff, n_embd]
    kernels::WeightMatrix down;   // [n_embd, n_ff]
    std::vector<float> post_norm; // [n_embd] Gemma 4's post-FFN norm, else empty
};

// Gemma 4's per-layer embedding residual of one layer (n_embd_per_layer = PL > 0).
struct PerLayerWeights {
    kernels::WeightMatrix inp_gate;  // [PL, n_embd]
    kernels::WeightMatrix proj;      // [n_embd, PL]
    std::vector<float> post_norm;    // [n_embd]
};

struct LayerWeights {
    AttentionWeights attn;
    MlpWeights mlp;
    std::optional<PerLayerWeights> per_layer;
    std::optional<float> output_scale;  // Gemma 4's layer_output_scale
};

struct GradientWeights {
    kernels::WeightMatrix token_embd;   // [n_vocab, n_embd]
    std::vector<float> rope_freqs;      // [n_rot / 2] or empty
    // Gemma 4 per-layer embeddings (PL > 0).
    std::optional<kernels::WeightMatrix> per_layer_token_embd;  // [n_vocab, n_layers * PL]
    std::optional<kernels::WeightMatrix> per_layer_model_proj;  // [n_layers * PL, n_embd]
    std::vector<float> per_layer_proj_norm;                     // [PL]
    std::vector<LayerWeights> layers;
    std::vector<float> output_norm;     // [n_embd]
    kernels::WeightMatrix output;       // [n_vocab, n_embd]; token_embd when tied
};

// ember::Error naming the file and tensor on anything missing or of the wrong shape.
GradientWeights load_gradient_weights(const gguf::File& file, const models::ModelConfig& config);

}  // namespace ember::attribution
