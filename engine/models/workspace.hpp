// Every intermediate activation of a forward pass, allocated once per session for the
// largest evaluation it will run (the prompt) so that decoding allocates nothing. Buffers
// are sized for the widest layer (Gemma 4 layers differ in geometry); the family code
// takes views of the shape it needs with rows().
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/rows.hpp"
#include "models/model_config.hpp"

namespace ember::models {

// The widest per-layer dimensions of a model.
struct MaxDims {
    std::size_t q_width = 0;   // n_head * head_dim
    std::size_t kv_width = 0;  // n_head_kv * head_dim
    std::size_t n_ff = 0;
    std::size_t n_head = 0;
    std::size_t head_dim = 0;
};
MaxDims max_dims(const ModelConfig& config);

struct Workspace {
    // Makes room for evaluations of up to n_tokens rows, with logits for up to
    // n_logit_rows of them. Never shrinks; allocates only when asked for more.
    void reserve(const ModelConfig& config, std::size_t n_tokens, std::size_t n_logit_rows);

    std::size_t max_tokens = 0;
    std::size_t max_logit_rows = 0;

    std::vector<float> residual;       // [T, n_embd] the residual stream
    std::vector<float> normed;         // [T, n_embd] a normed copy feeding a block
    std::vector<float> q;              // [T, n_head * head_dim]
    std::vector<float> k;              // [T, n_head_kv * head_dim]
    std::vector<float> v;              // [T, n_head_kv * head_dim]
    std::vector<float> attention;      // [T, n_head * head_dim] softmax(q k^T) v
    std::vector<float> attention_out;  // [T, n_embd] the attention block output
    std::vector<float> gate;           // [T, n_ff]
    std::vector<float> up;             // [T, n_ff]
    std::vector<float> ffn_hidden;     // [T, n_ff] the gated activation
    std::vector<float> mlp_out;        // [T, n_embd] the MLP block output

    // Gemma 4 per-layer embeddings (empty otherwise).
    std::vector<float> per_layer_inputs;     // [T, n_layers * n_embd_per_layer]
    std::vector<float> per_layer_projected;  // [T, n_layers * n_embd_per_layer]
    std::vector<float> per_layer_gate;       // [T, n_embd_per_layer]
    std::vector<float> per_layer_out;        // [T, n_embd]

    // [n_head * T, n_kv] attention probabilities, only when a stage asks for them
    // (hooks attention_pattern): grown by pattern(), never by reserve().
    std::vector<float> attention_pattern;

    std::vector<float> final_normed;  // [R, n_embd] the rows whose logits are computed
    std::vector<float> logits;        // [R, n_vocab]

    // A [rows, cols] view of attention_pattern, grown to fit.
    kernels::Rows pattern(std::size_t rows, std::size_t cols);

    // A [rows, cols] view of the front of `buffer` (which must be large enough).
    static kernels::Rows rows(std::vector<float>& buffer, std::size_t rows, std::size_t cols);
};

}  // namespace ember::models
