// The decoder Llama and Qwen3 both are, top to bottom (model-math §5.4, §6.3): the
// weights, the forward pass with its hook sites, and the load. Grouped-query attention
// with RoPE (the pairing is the family's RopeMode: adjacent pairs for Llama, half-split
// for Qwen3), optional per-pair RoPE factors (rope_freqs), optional per-head Q/K RMS
// norms, a SwiGLU MLP, and an output projection that may be tied to the token
// embedding. Each family file (llama.cpp, qwen3.cpp) states only what differs, as a
// LlamaDecoderSpec and its registry entry.
//
// Hook sites: before_layer / after_layer see the residual stream entering / leaving a
// layer; after_attention / after_mlp the block outputs about to be added to it, so that
// after_layer = before_layer + after_attention + after_mlp, computed from the very
// tensors the hooks saw (and possibly changed). Inside the blocks: attention_pattern (a
// copy of the probabilities, only when wanted), head_outputs (the heads the output
// projection reads: after_attention = attn_output(head_outputs)) and mlp_activation (what
// ffn_down reads: after_mlp = ffn_down(mlp_activation)).
#include "models/llama_decoder.hpp"

#include <vector>

#include "models/feed_forward.hpp"
#include "models/tensor_loader.hpp"

namespace ember::models {
namespace {

using kernels::OpKind;
using kernels::Rows;

struct DecoderLayer {
    Attention attn;   // attn_norm, attn_q, attn_k, attn_v, (Qwen3: attn_q_norm, attn_k_norm), attn_output
    FeedForward ffn;  // ffn_norm, ffn_gate, ffn_up, ffn_down
};

struct DecoderWeights {
    kernels::WeightMatrix token_embd;  // [n_vocab, n_embd]
    std::vector<float> rope_freqs;     // [n_rot / 2], or empty (none in the file, or a family without them)
    std::vector<DecoderLayer> layers;
};

DecoderWeights load_weights(const gguf::File& file, const ModelConfig& c, const LlamaDecoderSpec& spec) {
    const TensorLoader t(file, c);
    const std::size_t E = c.n_embd;
    DecoderWeights w;
    w.token_embd = t.matrix("token_embd.weight", c.n_vocab, E);
    if (spec.rope_freqs)
        w.rope_freqs = t.optional_vector("rope_freqs.weight", c.layers[0].n_rot / 2).value_or(std::vector<float>{});
    for (std::uint32_t l = 0; l < c.n_layers; ++l) {
        refuse_unsupported_tensors(t, l);
        DecoderLayer layer;
        layer.attn = load_attention(t, l, c.layers[l], E, spec.head_norm);
        layer.ffn = load_feed_forward(t, l, E, c.layers[l].n_ff);
        w.layers.push_back(std::move(layer));
    }
    return w;
}

class LlamaDecoderModel final : public Model {
public:
    LlamaDecoderModel(ModelConfig config, OutputHead head, DecoderWeights weights)
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
    DecoderWeights w_;
};

template <class Hooks>
void LlamaDecoderModel::forward(const Evaluation& eval, ForwardState& state, kernels::Ops& ops, Hooks& hooks) const {
    const ModelConfig& c = config_;
    Workspace& ws = state.workspace;
    const hooks::EvalInfo& info = eval.info;
    const std::size_t T = eval.tokens.size();
    const std::size_t first = info.start_position;  // position of row 0
    const std::size_t n_kv = first + T;             // cached positions visible after this evaluation
    const std::size_t E = c.n_embd;
    const float eps = c.rms_eps;

    Rows x = Workspace::rows(ws.residual, T, E);  // [T, E] the residual stream
    ops.get_rows({"token_embd", kernels::kNoLayer, OpKind::Embedding}, w_.token_embd, eval.tokens, x);

    for (std::uint32_t il = 0; il < c.n_layers; ++il) {
        const LayerConfig& L = c.layers[il];
        const DecoderLayer& w = w_.layers[il];
        const auto layer = static_cast<std::int32_t>(il);

        hooks.before_layer(info, il, x);

        // ---- attention block: attn_output(softmax(q k^T / sqrt(D)) v) (Qwen3: Q and K RMS-normed per head) ----
        Rows pattern = pattern_buffer(hooks, ws, L.n_head, T, n_kv);  // empty unless wanted
        const AttentionSite site{layer, &c, &L, w_.rope_freqs, first};
        Rows heads = attention_heads(ops, site, eval, w.attn, x, state.kv_cache, ws, pattern);  // [T, H * D]
        if (pattern.data) hooks.attention_pattern(info, il, pattern);
        hooks.head_outputs(info, il, heads);
        Rows attn_out = Workspace::rows(ws.attention_out, T, E);  // [T, E]
        ops.matmul({"attn_output", layer, OpKind::Projection}, heads, w.attn.output, attn_out);

        hooks.after_attention(info, il, attn_out);
        // (the last rows only, in a last layer nothing else reads: mlp_rows)
        const std::size_t M = mlp_rows<Hooks>(eval, il, c.n_layers, w.ffn);
        Rows xm = x.slice(T - M, M);  // [M, E]
        ops.add({"ffn_inp", layer, OpKind::ResidualAdd}, xm, attn_out.slice(T - M, M), xm);
        hooks.residual_mid(info, il, xm);  // (ActiveHooks: M = T)

        // ---- MLP block: down(silu(gate(h)) * up(h)) ----
        Rows mlp_in = feed_forward_input(ops, layer, w.ffn, eps, xm, ws);  // [M, E]
        hooks.mlp_input(info, il, mlp_in);
        Rows activation = feed_forward_activation(ops, layer, GateActivation::Silu, w.ffn, mlp_in, ws);  // [M, n_ff]
        hooks.mlp_activation(info, il, activation);
        Rows mlp_out = Workspace::rows(ws.mlp_out, M, E);  // [M, E]
        ops.matmul({"ffn_down", layer, OpKind::Projection}, activation, w.ffn.down, mlp_out);

        hooks.after_mlp(info, il, mlp_out);
        ops.add({"l_out", layer, OpKind::ResidualAdd}, xm, mlp_out, xm);

        hooks.after_layer(info, il, x);
    }

    // ---- logits for the last row, or for every row when asked ----
    const std::size_t R = logit_rows(eval);
    Rows normed = Workspace::rows(ws.final_normed, R, E);  // [R, E]
    Rows logits = Workspace::rows(ws.logits, R, c.n_vocab);  // [R, n_vocab]
    final_norm(ops, x.slice(T - R, R), normed);
    hooks.before_logits(info, normed);
    lm_head(ops, normed, logits, eval.segments);
    hooks.after_logits(info, logits);
}

template void LlamaDecoderModel::forward<hooks::DisabledHooks>(const Evaluation&, ForwardState&, kernels::Ops&,
                                                        hooks::DisabledHooks&) const;
template void LlamaDecoderModel::forward<hooks::ActiveHooks>(const Evaluation&, ForwardState&, kernels::Ops&,
                                                      hooks::ActiveHooks&) const;

}  // namespace

std::unique_ptr<Model> load_llama_decoder(const gguf::File& file, ModelConfig config, const LlamaDecoderSpec& spec) {
    DecoderWeights weights = load_weights(file, config, spec);
    OutputHead head = load_output_head(file, config, weights.token_embd);
    return std::make_unique<LlamaDecoderModel>(std::move(config), std::move(head), std::move(weights));
}

}  // namespace ember::models
