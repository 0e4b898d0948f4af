#include "attribution/gradient_weights.hpp"

#include "models/attention_block.hpp"
#include "models/feed_forward.hpp"
#include "models/model.hpp"
#include "models/tensor_loader.hpp"

namespace ember::attribution {
namespace {

using models::TensorLoader;

// Llama and Qwen3: the shared loaders of models/attention_block and models/feed_forward.
LayerWeights llama_like_layer(const TensorLoader& t, std::uint32_t l, const models::ModelConfig& c) {
    const models::HeadNorm head_norm = c.family == models::Family::Qwen3 ? models::HeadNorm::QK : models::HeadNorm::None;
    models::refuse_unsupported_tensors(t, l);
    const models::Attention a = models::load_attention(t, l, c.layers[l], c.n_embd, head_norm);
    const models::FeedForward f = models::load_feed_forward(t, l, c.n_embd, c.layers[l].n_ff);
    LayerWeights w;
    w.attn = {a.norm, a.q, a.k, a.v, a.q_norm, a.k_norm, a.output, {}};
    w.mlp = {f.norm, f.gate, f.up, f.down, {}};
    return w;
}

// Gemma 4, as models/gemma4.cpp's load_weights finds them.
LayerWeights gemma4_layer(const TensorLoader& t, std::uint32_t l, const models::ModelConfig& c) {
    const models::LayerConfig& L = c.layers[l];
    const std::size_t E = c.n_embd;
    const std::size_t q_width = std::size_t{L.n_head} * L.head_dim;
    const std::size_t kv_width = std::size_t{L.n_head_kv} * L.head_dim;
    auto name = [l](const char* n) { return TensorLoader::layer_weight(l, n); };
    models::refuse_unsupported_tensors(t, l);
    LayerWeights w;
    w.attn.norm = t.vector(name("attn_norm"), E);
    w.attn.q = t.matrix(name("attn_q"), q_width, E);
    w.attn.q_norm = t.vector(name("attn_q_norm"), L.head_dim);
    if (L.has_own_kv(l)) {
        w.attn.k = t.matrix(name("attn_k"), kv_width, E);
        w.attn.v = t.optional_matrix(name("attn_v"), kv_width, E);
        w.attn.k_norm = t.vector(name("attn_k_norm"), L.head_dim);
    }
    w.attn.output = t.matrix(name("attn_output"), E, q_width);
    w.attn.post_norm = t.vector(name("post_attention_norm"), E);
    const models::FeedForward f = models::load_feed_forward(t, l, E, L.n_ff);
    w.mlp = {f.norm, f.gate, f.up, f.down, t.vector(name("post_ffw_norm"), E)};
    if (auto scale = t.optional_vector(name("layer_output_scale"), 1)) w.output_scale = (*scale)[0];
    if (c.n_embd_per_layer > 0) {
        w.per_layer = PerLayerWeights{t.matrix(name("inp_gate"), c.n_embd_per_layer, E),
                                      t.matrix(name("proj"), E, c.n_embd_per_layer), t.vector(name("post_norm"), E)};
    }
    return w;
}

}  // namespace

GradientWeights load_gradient_weights(const gguf::File& file, const models::ModelConfig& c) {
    const TensorLoader t(file, c);
    GradientWeights w;
    w.token_embd = t.matrix("token_embd.weight", c.n_vocab, c.n_embd);
    const bool gemma = c.family == models::Family::Gemma4;
    if (gemma) {
        for (const models::LayerConfig& L : c.layers) {
            if (L.sliding_window) continue;  // full layers share one table of proportional-RoPE factors
            w.rope_freqs = t.vector("rope_freqs.weight", L.n_rot / 2);
            break;
        }
        const std::size_t PL = c.n_embd_per_layer;
        if (PL > 0) {
            w.per_layer_token_embd = t.matrix("per_layer_token_embd.weight", c.n_vocab, c.n_layers * PL);
            w.per_layer_model_proj = t.matrix("per_layer_model_proj.weight", c.n_layers * PL, c.n_embd);
            w.per_layer_proj_norm = t.vector("per_layer_proj_norm.weight", PL);
        }
    } else if (c.family == models::Family::Llama) {  // (Qwen3's forward passes no RoPE factors)
        w.rope_freqs = t.optional_vector("rope_freqs.weight", c.layers[0].n_rot / 2).value_or(std::vector<float>{});
    }
    for (std::uint32_t l = 0; l < c.n_layers; ++l) w.layers.push_back(gemma ? gemma4_layer(t, l, c) : llama_like_layer(t, l, c));
    const models::OutputHead head = models::load_output_head(file, c, w.token_embd);
    w.output_norm = head.output_norm;
    w.output = head.output;
    return w;
}

}  // namespace ember::attribution
