// The Qwen3 forward pass (model-math §6.3), top to bottom. Llama's structure plus a
// per-head RMS norm of Q and K before RoPE, RoPE on half-split pairs (NEOX), and a head
// dimension read from the file (n_head * head_dim may differ from n_embd).
//
// Hook sites as in Llama: before_layer / after_layer around each layer, after_attention
// and after_mlp on the block outputs about to be added to the residual stream, so that
// after_layer = before_layer + after_attention + after_mlp.
#include "models/qwen3.hpp"

#include <fmt/format.h>

#include <cmath>
#include <vector>

#include "models/feed_forward.hpp"
#include "models/tensor_loader.hpp"

namespace ember::models {
namespace {

using kernels::OpKind;
using kernels::Rows;

struct Qwen3Layer {
    std::vector<float> attn_norm;       // [n_embd]
    kernels::WeightMatrix attn_q;       // [n_head * head_dim, n_embd]
    kernels::WeightMatrix attn_k;       // [n_head_kv * head_dim, n_embd]
    kernels::WeightMatrix attn_v;       // [n_head_kv * head_dim, n_embd]
    std::vector<float> attn_q_norm;     // [head_dim]
    std::vector<float> attn_k_norm;     // [head_dim]
    kernels::WeightMatrix attn_output;  // [n_embd, n_head * head_dim]
    FeedForward ffn;  // ffn_norm, ffn_gate, ffn_up, ffn_down
};

struct Qwen3Weights {
    kernels::WeightMatrix token_embd;  // [n_vocab, n_embd]
    std::vector<Qwen3Layer> layers;
};

Qwen3Weights load_weights(const gguf::File& file, const ModelConfig& c) {
    const TensorLoader t(file, c);
    const std::size_t E = c.n_embd;
    Qwen3Weights w;
    w.token_embd = t.matrix("token_embd.weight", c.n_vocab, E);
    for (std::uint32_t l = 0; l < c.n_layers; ++l) {
        const LayerConfig& L = c.layers[l];
        const std::size_t q_width = std::size_t{L.n_head} * L.head_dim;
        const std::size_t kv_width = std::size_t{L.n_head_kv} * L.head_dim;
        for (const char* unsupported : {"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "attn_qkv.weight",
                                        "ffn_gate.bias", "ffn_up.bias", "ffn_down.bias", "ffn_gate_inp.weight"}) {
            t.refuse_if_present(fmt::format("blk.{}.{}", l, unsupported), "biases, fused QKV and experts");
        }
        auto name = [l](const char* n) { return TensorLoader::layer_weight(l, n); };
        Qwen3Layer layer;
        layer.attn_norm = t.vector(name("attn_norm"), E);
        layer.attn_q = t.matrix(name("attn_q"), q_width, E);
        layer.attn_k = t.matrix(name("attn_k"), kv_width, E);
        layer.attn_v = t.matrix(name("attn_v"), kv_width, E);
        layer.attn_q_norm = t.vector(name("attn_q_norm"), L.head_dim);
        layer.attn_k_norm = t.vector(name("attn_k_norm"), L.head_dim);
        layer.attn_output = t.matrix(name("attn_output"), E, q_width);
        layer.ffn = load_feed_forward(t, l, E, L.n_ff);
        w.layers.push_back(std::move(layer));
    }
    return w;
}

class Qwen3Model final : public Model {
public:
    Qwen3Model(ModelConfig config, OutputHead head, Qwen3Weights weights)
        : Model(std::move(config), std::move(head)), w_(std::move(weights)) {}

    void evaluate(const Evaluation& eval, ForwardState& state, kernels::Ops& ops, hooks::DisabledHooks& hooks) const override {
        forward(eval, state, ops, hooks);
    }
    void evaluate(const Evaluation& eval, ForwardState& state, kernels::Ops& ops, hooks::ActiveHooks& hooks) const override {
        forward(eval, state, ops, hooks);
    }

    template <class Hooks>
    void forward(const Evaluation& eval, ForwardState& state, kernels::Ops& ops, Hooks& hooks) const;

private:
    Qwen3Weights w_;
};

template <class Hooks>
void Qwen3Model::forward(const Evaluation& eval, ForwardState& state, kernels::Ops& ops, Hooks& hooks) const {
    const ModelConfig& c = config_;
    Workspace& ws = state.workspace;
    const hooks::EvalInfo& info = eval.info;
    const std::size_t T = eval.tokens.size();
    const std::size_t first = info.start_position;  // position of row 0
    const std::size_t E = c.n_embd;
    const float eps = c.rms_eps;

    Rows x = Workspace::rows(ws.residual, T, E);  // [T, E] the residual stream
    ops.get_rows({"token_embd", kernels::kNoLayer, OpKind::Embedding}, w_.token_embd, eval.tokens, x);

    for (std::uint32_t il = 0; il < c.n_layers; ++il) {
        const LayerConfig& L = c.layers[il];
        const Qwen3Layer& w = w_.layers[il];
        const auto layer = static_cast<std::int32_t>(il);
        const std::size_t D = L.head_dim;
        const std::size_t q_width = L.n_head * D;
        const std::size_t kv_width = L.n_head_kv * D;

        hooks.before_layer(info, il, tensor_view(x));

        // ---- attention block ----
        Rows h = Workspace::rows(ws.normed, T, E);                // [T, E]
        Rows q = Workspace::rows(ws.q, T, q_width);               // [T, H * D]
        Rows k = Workspace::rows(ws.k, T, kv_width);              // [T, Hkv * D]
        Rows v = Workspace::rows(ws.v, T, kv_width);              // [T, Hkv * D]
        Rows attn = Workspace::rows(ws.attention, T, q_width);    // [T, H * D]
        Rows attn_out = Workspace::rows(ws.attention_out, T, E);  // [T, E]
        ops.rms_norm({"attn_norm", layer, OpKind::Norm}, x, w.attn_norm, eps, h);
        ops.matmul({"attn_q", layer, OpKind::Projection}, h, w.attn_q, q);
        ops.matmul({"attn_k", layer, OpKind::Projection}, h, w.attn_k, k);
        ops.matmul({"attn_v", layer, OpKind::Projection}, h, w.attn_v, v);

        // Each head of Q and K RMS-normed over its D values, then rotated.
        ops.rms_norm({"attn_q_norm", layer, OpKind::Norm}, q.reshape(T * L.n_head, D), w.attn_q_norm, eps,
                     q.reshape(T * L.n_head, D));
        ops.rms_norm({"attn_k_norm", layer, OpKind::Norm}, k.reshape(T * L.n_head_kv, D), w.attn_k_norm, eps,
                     k.reshape(T * L.n_head_kv, D));
        kernels::RopeParams rope = rope_params(c, L, {});
        rope_rows(ops, {"rope_q", layer, OpKind::Rope}, eval, q, rope);
        rope.n_heads = L.n_head_kv;
        rope_rows(ops, {"rope_k", layer, OpKind::Rope}, eval, k, rope);

        kernels::KvRows cache_k = state.kv_cache.keys(il);    // [capacity, Hkv * D]
        kernels::KvRows cache_v = state.kv_cache.values(il);  // [capacity, Hkv * D]
        ops.store_kv({"cache_k", layer, OpKind::KvStore}, k, cache_k.slice(first, T));
        ops.store_kv({"cache_v", layer, OpKind::KvStore}, v, cache_v.slice(first, T));
        attend(ops, {"kqv", layer, OpKind::Attention}, eval, q, cache_k, cache_v, attention_params(c, L), attn);
        ops.matmul({"attn_output", layer, OpKind::Projection}, attn, w.attn_output, attn_out);

        hooks.after_attention(info, il, tensor_view(attn_out));
        ops.add({"ffn_inp", layer, OpKind::ResidualAdd}, x, attn_out, x);

        // ---- MLP block: down(silu(gate(h)) * up(h)) ----
        Rows mlp_out = Workspace::rows(ws.mlp_out, T, E);  // [T, E]
        feed_forward(ops, layer, GateActivation::Silu, w.ffn, eps, x, ws, mlp_out);

        hooks.after_mlp(info, il, tensor_view(mlp_out));
        ops.add({"l_out", layer, OpKind::ResidualAdd}, x, mlp_out, x);

        hooks.after_layer(info, il, tensor_view(x));
    }

    // ---- logits for the last row, or for every row when asked ----
    const std::size_t R = logit_rows(eval);
    Rows normed = Workspace::rows(ws.final_normed, R, E);    // [R, E]
    Rows logits = Workspace::rows(ws.logits, R, c.n_vocab);  // [R, n_vocab]
    final_norm(ops, x.slice(T - R, R), normed);
    hooks.before_logits(info, tensor_view(normed));
    lm_head(ops, normed, logits);
    hooks.after_logits(info, tensor_view(logits));
}

template void Qwen3Model::forward<hooks::DisabledHooks>(const Evaluation&, ForwardState&, kernels::Ops&,
                                                        hooks::DisabledHooks&) const;
template void Qwen3Model::forward<hooks::ActiveHooks>(const Evaluation&, ForwardState&, kernels::Ops&,
                                                      hooks::ActiveHooks&) const;

}  // namespace

static std::unique_ptr<Model> load_qwen3(const gguf::File& file, ModelConfig config) {
    Qwen3Weights weights = load_weights(file, config);
    OutputHead head = load_output_head(file, config, weights.token_embd);
    return std::make_unique<Qwen3Model>(std::move(config), std::move(head), std::move(weights));
}

// ---- the registry entry (models/family.hpp) ----
namespace {

void read_config(const MetadataKeys& keys, ModelConfig& c, LayerGeometry& g) {
    c.rope_mode = RopeMode::Neox;
    require_full_rotation(keys, g, "qwen3");
}

void configure_layer(const ModelConfig&, const LayerGeometry&, std::uint32_t, LayerConfig& layer) {
    layer.attention_scale = 1.0f / std::sqrt(static_cast<float>(layer.head_dim));
}

}  // namespace

extern const FamilyInfo kQwen3Family{"qwen3", Family::Qwen3, read_config, configure_layer, load_qwen3};

}  // namespace ember::models
