#include "models/workspace.hpp"

#include <algorithm>
#include <cassert>

#include "common/checked.hpp"
#include "common/error.hpp"

namespace ember::models {
namespace {

void grow(std::vector<float>& buffer, std::size_t rows, std::size_t cols) {
    const auto n = checked_mul(rows, cols);
    if (!n) throw Error("a workspace buffer size overflows");
    if (buffer.size() < *n) buffer.resize(*n);
}

}  // namespace

MaxDims max_dims(const ModelConfig& config) {
    MaxDims m;
    for (const LayerConfig& layer : config.layers) {
        m.q_width = std::max<std::size_t>(m.q_width, std::size_t{layer.n_head} * layer.head_dim);
        m.kv_width = std::max<std::size_t>(m.kv_width, std::size_t{layer.n_head_kv} * layer.head_dim);
        m.n_ff = std::max<std::size_t>(m.n_ff, layer.n_ff);
        m.n_head = std::max<std::size_t>(m.n_head, layer.n_head);
        m.head_dim = std::max<std::size_t>(m.head_dim, layer.head_dim);
    }
    return m;
}

void Workspace::reserve(const ModelConfig& config, std::size_t n_tokens, std::size_t n_logit_rows) {
    if (n_tokens <= max_tokens && n_logit_rows <= max_logit_rows) return;
    max_tokens = std::max(max_tokens, n_tokens);
    max_logit_rows = std::max(max_logit_rows, n_logit_rows);
    const std::size_t T = max_tokens;
    const std::size_t E = config.n_embd;
    const MaxDims m = max_dims(config);
    grow(residual, T, E);
    grow(normed, T, E);
    grow(q, T, m.q_width);
    grow(k, T, m.kv_width);
    grow(v, T, m.kv_width);
    grow(attention, T, m.q_width);
    grow(attention_out, T, E);
    grow(gate, T, m.n_ff);
    grow(up, T, m.n_ff);
    grow(ffn_hidden, T, m.n_ff);
    grow(mlp_out, T, E);
    if (config.n_embd_per_layer > 0) {
        const std::size_t PL = config.n_embd_per_layer;
        grow(per_layer_inputs, T, config.n_layers * PL);
        grow(per_layer_projected, T, config.n_layers * PL);
        grow(per_layer_gate, T, PL);
        grow(per_layer_out, T, E);
    }
    grow(final_normed, max_logit_rows, E);
    grow(logits, max_logit_rows, config.n_vocab);
}

kernels::Rows Workspace::pattern(std::size_t rows, std::size_t cols) {
    grow(attention_pattern, rows, cols);
    return {attention_pattern.data(), rows, cols};
}

kernels::Rows Workspace::rows(std::vector<float>& buffer, std::size_t rows, std::size_t cols) {
    assert(rows * cols <= buffer.size());
    return {buffer.data(), rows, cols};
}

}  // namespace ember::models
