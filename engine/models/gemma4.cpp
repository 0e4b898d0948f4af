// The Gemma 4 forward pass (model-math §7.6), top to bottom. Different from Llama:
//  - token embeddings scaled by sqrt(n_embd); optional per-layer token embeddings (PLE,
//    §7.5) computed from them before the first layer;
//  - layers of two kinds with their own geometry: sliding-window layers (masked to the
//    last n_swa positions) and full layers (proportional RoPE through rope_freqs);
//  - Q and K RMS-normed per head with weights, V RMS-normed without one, V taken from the
//    raw K projection where attn_v is absent, attention scale 1;
//  - trailing layers may share the K/V cache of an earlier layer (§7.4);
//  - "sandwich" norms: attention and MLP outputs are RMS-normed before their residual
//    adds; a GELU-gated MLP (llama.cpp's F16-table GELU); a per-layer output scale;
//  - final logits soft-capped: cap * tanh(z / cap).
//
// Hook sites: before_layer / after_layer around each layer (after_layer = l_out, after
// the PLE residual and the layer scale); after_attention / after_mlp on the post-normed
// block outputs about to be added to the residual stream. The PLE inputs are computed
// before before_layer(0), so a write there does not change them. Inside the blocks:
// attention_pattern (only when wanted; a sliding-window layer's row is 0 outside its
// window, a layer sharing another's KV attends over that layer's cache, the same
// positions), head_outputs (what attn_output reads: after_attention =
// post_norm(attn_output(head_outputs))) and mlp_activation (what ffn_down reads).
#include "models/gemma4.hpp"

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <vector>

#include "models/attention_block.hpp"
#include "models/feed_forward.hpp"
#include "models/tensor_loader.hpp"

namespace ember::models {
namespace {

using kernels::OpKind;
using kernels::Rows;

struct Gemma4Layer {
    std::vector<float> attn_norm;                     // [n_embd]
    kernels::WeightMatrix attn_q;                     // [n_head * D, n_embd]
    std::vector<float> attn_q_norm;                   // [D]
    std::optional<kernels::WeightMatrix> attn_k;      // [n_head_kv * D, n_embd]; layers with their own K/V
    std::optional<kernels::WeightMatrix> attn_v;      // absent: V is the raw K projection
    std::vector<float> attn_k_norm;                   // [D]; layers with their own K/V
    kernels::WeightMatrix attn_output;                // [n_embd, n_head * D]
    std::vector<float> post_attention_norm;           // [n_embd]
    FeedForward ffn;  // ffn_norm, ffn_gate, ffn_up, ffn_down
    std::vector<float> post_ffw_norm;                 // [n_embd]
    std::optional<float> layer_output_scale;          // multiplies the whole layer output
    // Per-layer embeddings (when n_embd_per_layer > 0).
    std::optional<kernels::WeightMatrix> inp_gate;    // [PL, n_embd]
    std::optional<kernels::WeightMatrix> proj;        // [n_embd, PL]
    std::vector<float> post_norm;                     // [n_embd]
};

struct Gemma4Weights {
    kernels::WeightMatrix token_embd;  // [n_vocab, n_embd]
    std::vector<float> rope_freqs;     // [n_rot / 2] of the full layers; empty if none
    // Per-layer embeddings (when n_embd_per_layer = PL > 0).
    std::optional<kernels::WeightMatrix> per_layer_token_embd;  // [n_vocab, n_layers * PL]
    std::optional<kernels::WeightMatrix> per_layer_model_proj;  // [n_layers * PL, n_embd]
    std::vector<float> per_layer_proj_norm;                     // [PL]
    std::vector<Gemma4Layer> layers;
};

Gemma4Weights load_weights(const gguf::File& file, const ModelConfig& c) {
    const TensorLoader t(file, c);
    const std::size_t E = c.n_embd;
    const std::size_t PL = c.n_embd_per_layer;
    Gemma4Weights w;
    w.token_embd = t.matrix("token_embd.weight", c.n_vocab, E);
    for (const LayerConfig& L : c.layers) {
        if (L.sliding_window) continue;  // full layers share one table of proportional-RoPE factors
        w.rope_freqs = t.vector("rope_freqs.weight", L.n_rot / 2);
        break;
    }
    if (PL > 0) {
        w.per_layer_token_embd = t.matrix("per_layer_token_embd.weight", c.n_vocab, c.n_layers * PL);
        w.per_layer_model_proj = t.matrix("per_layer_model_proj.weight", c.n_layers * PL, E);
        w.per_layer_proj_norm = t.vector("per_layer_proj_norm.weight", PL);
    }
    for (std::uint32_t l = 0; l < c.n_layers; ++l) {
        const LayerConfig& L = c.layers[l];
        const std::size_t q_width = std::size_t{L.n_head} * L.head_dim;
        const std::size_t kv_width = std::size_t{L.n_head_kv} * L.head_dim;
        refuse_unsupported_tensors(t, l);
        auto name = [l](const char* n) { return TensorLoader::layer_weight(l, n); };
        Gemma4Layer layer;
        layer.attn_norm = t.vector(name("attn_norm"), E);
        layer.attn_q = t.matrix(name("attn_q"), q_width, E);
        layer.attn_q_norm = t.vector(name("attn_q_norm"), L.head_dim);
        if (L.has_own_kv(l)) {
            layer.attn_k = t.matrix(name("attn_k"), kv_width, E);
            layer.attn_v = t.optional_matrix(name("attn_v"), kv_width, E);
            layer.attn_k_norm = t.vector(name("attn_k_norm"), L.head_dim);
        }
        layer.attn_output = t.matrix(name("attn_output"), E, q_width);
        layer.post_attention_norm = t.vector(name("post_attention_norm"), E);
        layer.ffn = load_feed_forward(t, l, E, L.n_ff);
        layer.post_ffw_norm = t.vector(name("post_ffw_norm"), E);
        if (auto scale = t.optional_vector(name("layer_output_scale"), 1)) layer.layer_output_scale = (*scale)[0];
        if (PL > 0) {
            layer.inp_gate = t.matrix(name("inp_gate"), PL, E);
            layer.proj = t.matrix(name("proj"), E, PL);
            layer.post_norm = t.vector(name("post_norm"), E);
        }
        w.layers.push_back(std::move(layer));
    }
    return w;
}

class Gemma4Model final : public Model {
public:
    Gemma4Model(ModelConfig config, OutputHead head, Gemma4Weights weights)
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
    void per_layer_inputs(const Evaluation& eval, Workspace& ws, kernels::Ops& ops, Rows x) const;

    Gemma4Weights w_;
};

// PLE inputs for every layer (model-math §7.5), from the scaled token embeddings x:
//   inputs[t][l] = (rmsnorm((W_proj x[t])[l] / sqrt(E)) * norm + embd_l(token t) * sqrt(PL)) / sqrt(2)
// into ws.per_layer_inputs, [T, n_layers * PL] (layer l's slice at columns l*PL .. l*PL+PL-1).
void Gemma4Model::per_layer_inputs(const Evaluation& eval, Workspace& ws, kernels::Ops& ops, Rows x) const {
    const ModelConfig& c = config_;
    const std::size_t T = eval.tokens.size();
    const std::size_t PL = c.n_embd_per_layer;
    const std::size_t width = c.n_layers * PL;
    constexpr auto model = kernels::kNoLayer;
    Rows selected = Workspace::rows(ws.per_layer_inputs, T, width);      // [T, L * PL]
    Rows projected = Workspace::rows(ws.per_layer_projected, T, width);  // [T, L * PL]
    ops.get_rows({"per_layer_token_embd", model, OpKind::Embedding}, *w_.per_layer_token_embd, eval.tokens, selected);
    ops.scale({"inp_per_layer_selected", model, OpKind::Scale}, selected, std::sqrt(static_cast<float>(PL)), selected);
    ops.matmul({"per_layer_model_proj", model, OpKind::Projection}, x, *w_.per_layer_model_proj, projected);
    ops.scale({"per_layer_proj_scaled", model, OpKind::Scale}, projected, 1.0f / std::sqrt(static_cast<float>(c.n_embd)),
              projected);
    // One norm per (token, layer) slice of PL values.
    ops.rms_norm({"per_layer_proj", model, OpKind::Norm}, projected.reshape(T * c.n_layers, PL), w_.per_layer_proj_norm,
                 c.rms_eps, projected.reshape(T * c.n_layers, PL));
    ops.add({"per_layer_inputs_sum", model, OpKind::ResidualAdd}, projected, selected, selected);
    ops.scale({"inp_per_layer", model, OpKind::Scale}, selected, 1.0f / std::sqrt(2.0f), selected);
}

// The rows of layer il after its attention output: models::mlp_rows, with the
// per-layer-embedding products (inp_gate, proj) held to the same rule as the MLP's.
template <class Hooks>
std::size_t last_layer_rows(const Evaluation& eval, std::uint32_t il, std::uint32_t n_layers, const Gemma4Layer& w) {
    const std::size_t T = eval.tokens.size();
    const std::size_t M = mlp_rows<Hooks>(eval, il, n_layers, w.ffn);
    if (M == T) return T;
    for (const auto* m : {&w.inp_gate, &w.proj})
        if (*m && !kernels::same_bits_at_any_row_count(kernels::weight_format((*m)->type))) return T;
    return M;
}

template <class Hooks>
void Gemma4Model::forward(const Evaluation& eval, ForwardState& state, kernels::Ops& ops, Hooks& hooks) const {
    const ModelConfig& c = config_;
    Workspace& ws = state.workspace;
    const hooks::EvalInfo& info = eval.info;
    const std::size_t T = eval.tokens.size();
    const std::size_t first = info.start_position;  // position of row 0
    const std::size_t n_kv = first + T;             // cached positions visible after this evaluation
    const std::size_t E = c.n_embd;
    const std::size_t PL = c.n_embd_per_layer;
    const float eps = c.rms_eps;

    Rows x = Workspace::rows(ws.residual, T, E);  // [T, E] the residual stream
    ops.get_rows({"token_embd", kernels::kNoLayer, OpKind::Embedding}, w_.token_embd, eval.tokens, x);
    ops.scale({"inp_scaled", kernels::kNoLayer, OpKind::Scale}, x, c.embedding_scale, x);
    if (PL > 0) per_layer_inputs(eval, ws, ops, x);

    for (std::uint32_t il = 0; il < c.n_layers; ++il) {
        const LayerConfig& L = c.layers[il];
        const Gemma4Layer& w = w_.layers[il];
        const auto layer = static_cast<std::int32_t>(il);
        const std::size_t D = L.head_dim;
        const std::size_t q_width = L.n_head * D;
        const std::size_t kv_width = L.n_head_kv * D;

        hooks.before_layer(info, il, x);

        // ---- attention block ----
        Rows h = Workspace::rows(ws.normed, T, E);                // [T, E]
        Rows q = Workspace::rows(ws.q, T, q_width);               // [T, H * D]
        Rows attn = Workspace::rows(ws.attention, T, q_width);    // [T, H * D] the heads
        Rows attn_out = Workspace::rows(ws.attention_out, T, E);  // [T, E]
        ops.rms_norm({"attn_norm", layer, OpKind::Norm}, x, w.attn_norm, eps, h);
        ops.matmul({"attn_q", layer, OpKind::Projection}, h, w.attn_q, q);
        ops.rms_norm({"attn_q_norm", layer, OpKind::Norm}, q.reshape(T * L.n_head, D), w.attn_q_norm, eps,
                     q.reshape(T * L.n_head, D));
        kernels::RopeParams rope = rope_params(c, L, w_.rope_freqs);
        rope_rows(ops, {"rope_q", layer, OpKind::Rope}, eval, q, rope);

        kernels::KvRows cache_k = state.kv_cache.keys(il);    // [capacity, Hkv * D]; the source layer's when shared
        kernels::KvRows cache_v = state.kv_cache.values(il);  // [capacity, Hkv * D]
        if (L.has_own_kv(il)) {
            Rows k = Workspace::rows(ws.k, T, kv_width);  // [T, Hkv * D]
            Rows v = Workspace::rows(ws.v, T, kv_width);  // [T, Hkv * D]
            ops.matmul({"attn_k", layer, OpKind::Projection}, h, *w.attn_k, k);
            // V: each head RMS-normed without a weight, from its own projection or, without
            // attn_v, from the raw K projection (before K's own norm).
            Rows v_source = k;
            if (w.attn_v) {
                ops.matmul({"attn_v", layer, OpKind::Projection}, h, *w.attn_v, v);
                v_source = v;
            }
            ops.rms_norm({"attn_v_norm", layer, OpKind::Norm}, v_source.reshape(T * L.n_head_kv, D), {}, eps,
                         v.reshape(T * L.n_head_kv, D));
            ops.rms_norm({"attn_k_norm", layer, OpKind::Norm}, k.reshape(T * L.n_head_kv, D), w.attn_k_norm, eps,
                         k.reshape(T * L.n_head_kv, D));
            rope.n_heads = L.n_head_kv;
            rope_rows(ops, {"rope_k", layer, OpKind::Rope}, eval, k, rope);
            ops.store_kv({"cache_k", layer, OpKind::KvStore}, k, cache_k.slice(first, T));
            ops.store_kv({"cache_v", layer, OpKind::KvStore}, v, cache_v.slice(first, T));
        }
        Rows pattern = pattern_buffer(hooks, ws, L.n_head, T, n_kv);  // empty unless wanted
        attend(ops, {"kqv", layer, OpKind::Attention}, eval, q, cache_k, cache_v, attention_params(c, L), attn, pattern);
        if (pattern.data) hooks.attention_pattern(info, il, pattern);
        hooks.head_outputs(info, il, attn);
        ops.matmul({"attn_output", layer, OpKind::Projection}, attn, w.attn_output, attn_out);
        ops.rms_norm({"attn_post_norm", layer, OpKind::Norm}, attn_out, w.post_attention_norm, eps, attn_out);

        hooks.after_attention(info, il, attn_out);
        // (the last rows only, in a last layer nothing else reads: last_layer_rows)
        const std::size_t M = last_layer_rows<Hooks>(eval, il, c.n_layers, w);
        Rows xm = x.slice(T - M, M);  // [M, E]
        ops.add({"attn_out", layer, OpKind::ResidualAdd}, xm, attn_out.slice(T - M, M), xm);
        hooks.residual_mid(info, il, xm);  // (ActiveHooks: M = T)

        // ---- MLP block: post_norm(down(gelu(gate(h)) * up(h))) ----
        Rows mlp_in = feed_forward_input(ops, layer, w.ffn, eps, xm, ws);  // [M, E]
        hooks.mlp_input(info, il, mlp_in);
        Rows activation = feed_forward_activation(ops, layer, GateActivation::Gelu, w.ffn, mlp_in, ws);  // [M, n_ff]
        hooks.mlp_activation(info, il, activation);
        Rows mlp_out = Workspace::rows(ws.mlp_out, M, E);  // [M, E]
        ops.matmul({"ffn_down", layer, OpKind::Projection}, activation, w.ffn.down, mlp_out);
        ops.rms_norm({"ffn_post_norm", layer, OpKind::Norm}, mlp_out, w.post_ffw_norm, eps, mlp_out);

        hooks.after_mlp(info, il, mlp_out);
        ops.add({"pe_in", layer, OpKind::ResidualAdd}, xm, mlp_out, xm);

        // ---- per-layer embedding residual: post_norm(proj(gelu(inp_gate(x)) * inputs_l)) ----
        if (PL > 0) {
            Rows gated = Workspace::rows(ws.per_layer_gate, M, PL);  // [M, PL]
            Rows ple_out = Workspace::rows(ws.per_layer_out, M, E);  // [M, E]
            const Rows inputs_l =
                Rows(ws.per_layer_inputs.data() + il * PL, T, PL, c.n_layers * PL).slice(T - M, M);  // [M, PL] strided
            ops.matmul({"inp_gate", layer, OpKind::Projection}, xm, *w.inp_gate, gated);
            ops.gelu({"inp_gate_gelu", layer, OpKind::Activation}, gated, gated);
            ops.mul({"per_layer_gated", layer, OpKind::Multiply}, gated, inputs_l, gated);
            ops.matmul({"proj", layer, OpKind::Projection}, gated, *w.proj, ple_out);
            ops.rms_norm({"per_layer_embd_out", layer, OpKind::Norm}, ple_out, w.post_norm, eps, ple_out);
            ops.add({"per_layer_residual", layer, OpKind::ResidualAdd}, xm, ple_out, xm);
        }
        if (w.layer_output_scale) {
            ops.scale({"layer_output_scale", layer, OpKind::Scale}, xm, *w.layer_output_scale, xm);
        }

        hooks.after_layer(info, il, x);
    }

    // ---- logits for the last row, or for every row when asked (soft-capped in lm_head) ----
    const std::size_t R = logit_rows(eval);
    Rows normed = Workspace::rows(ws.final_normed, R, E);    // [R, E]
    Rows logits = Workspace::rows(ws.logits, R, c.n_vocab);  // [R, n_vocab]
    final_norm(ops, x.slice(T - R, R), normed);
    hooks.before_logits(info, normed);
    lm_head(ops, normed, logits, eval.segments);
    hooks.after_logits(info, logits);
}

template void Gemma4Model::forward<hooks::DisabledHooks>(const Evaluation&, ForwardState&, kernels::Ops&,
                                                         hooks::DisabledHooks&) const;
template void Gemma4Model::forward<hooks::ActiveHooks>(const Evaluation&, ForwardState&, kernels::Ops&,
                                                       hooks::ActiveHooks&) const;

}  // namespace

static std::unique_ptr<Model> load_gemma4(const gguf::File& file, ModelConfig config) {
    Gemma4Weights weights = load_weights(file, config);
    OutputHead head = load_output_head(file, config, weights.token_embd);
    return std::make_unique<Gemma4Model>(std::move(config), std::move(head), std::move(weights));
}

// ---- the registry entry (models/family.hpp) ----
namespace {

// Sliding-window layers with their own geometry, shared K/V, the logit soft-cap (§7.1).
void read_config(const MetadataKeys& keys, ModelConfig& c, LayerGeometry& g) {
    c.rope_mode = RopeMode::Neox;
    g.sliding_window = keys.per_layer("attention.sliding_window_pattern", c.n_layers, std::nullopt);
    c.n_swa = keys.required_u32("attention.sliding_window");
    c.n_embd_per_layer = keys.required_u32("embedding_length_per_layer_input");
    g.head_dim_swa = keys.required_u32("attention.key_length_swa");
    const std::uint32_t value_swa = keys.required_u32("attention.value_length_swa");
    if (g.head_dim_swa != value_swa) {
        keys.fail(fmt::format("key_length_swa {} differs from value_length_swa {}", g.head_dim_swa, value_swa));
    }
    g.n_rot_swa = keys.u32("rope.dimension_count_swa").value_or(g.n_rot);  // defaults to the full n_rot (§7.1)
    g.rope_base_swa = keys.f32("rope.freq_base_swa").value_or(10000.0f);
    keys.require_finite_positive("rope.freq_base_swa", g.rope_base_swa);
    c.n_shared_kv_layers = keys.u32("attention.shared_kv_layers").value_or(0);
    c.final_logit_softcap = keys.f32("final_logit_softcapping").value_or(30.0f);
    if (!(std::isfinite(c.final_logit_softcap) && c.final_logit_softcap >= 0)) {
        keys.fail(fmt::format("final_logit_softcapping = {} is invalid", c.final_logit_softcap));
    }
    c.embedding_scale = std::sqrt(static_cast<float>(c.n_embd));
    if (c.n_swa == 0) keys.fail(fmt::format("'{}' is 0", keys.key("attention.sliding_window")));
    if (c.n_embd_per_layer > ConfigLimits::max_embd) keys.fail("embedding_length_per_layer_input is out of range");
    if (c.n_shared_kv_layers >= c.n_layers) {
        keys.fail(fmt::format("shared_kv_layers = {} leaves no layer with its own K/V ({} layers)", c.n_shared_kv_layers, c.n_layers));
    }
    if (c.n_shared_kv_layers > 0 && c.n_layers - c.n_shared_kv_layers < 2) {
        keys.fail("shared KV layers need at least two earlier layers with their own K/V");
    }
}

void configure_layer(const ModelConfig& c, const LayerGeometry& g, std::uint32_t l, LayerConfig& layer) {
    layer.uses_rope_freqs = !layer.sliding_window && g.has_rope_freqs;
    layer.attention_scale = 1.0f;  // Q and K are RMS-normalised instead (model-math §3.6)
    // The last n_shared_kv_layers read the K/V of the last earlier layer of their kind.
    const std::uint32_t n_kv_from_start = c.n_layers - c.n_shared_kv_layers;
    if (l >= n_kv_from_start) layer.kv_source = layer.sliding_window ? n_kv_from_start - 2 : n_kv_from_start - 1;
}

}  // namespace

extern const FamilyInfo kGemma4Family{"gemma4", Family::Gemma4, read_config, configure_layer, load_gemma4};

}  // namespace ember::models
