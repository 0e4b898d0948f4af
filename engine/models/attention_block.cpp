#include "models/attention_block.hpp"

#include <fmt/format.h>

#include "models/model.hpp"

namespace ember::models {

using kernels::OpKind;
using kernels::Rows;

Attention load_attention(const TensorLoader& t, std::uint32_t layer, const LayerConfig& L, std::size_t n_embd,
                         HeadNorm head_norm) {
    auto name = [layer](const char* n) { return TensorLoader::layer_weight(layer, n); };
    const std::size_t q_width = std::size_t{L.n_head} * L.head_dim;
    const std::size_t kv_width = std::size_t{L.n_head_kv} * L.head_dim;
    Attention w;
    w.norm = t.vector(name("attn_norm"), n_embd);
    w.q = t.matrix(name("attn_q"), q_width, n_embd);
    w.k = t.matrix(name("attn_k"), kv_width, n_embd);
    w.v = t.matrix(name("attn_v"), kv_width, n_embd);
    if (head_norm == HeadNorm::QK) {
        w.q_norm = t.vector(name("attn_q_norm"), L.head_dim);
        w.k_norm = t.vector(name("attn_k_norm"), L.head_dim);
    }
    w.output = t.matrix(name("attn_output"), n_embd, q_width);
    return w;
}

void refuse_unsupported_tensors(const TensorLoader& t, std::uint32_t layer) {
    for (const char* unsupported : {"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.bias", "attn_qkv.weight",
                                    "ffn_gate.bias", "ffn_up.bias", "ffn_down.bias", "ffn_gate_inp.weight"}) {
        t.refuse_if_present(fmt::format("blk.{}.{}", layer, unsupported), "biases, fused QKV and experts");
    }
}

Rows attention_heads(kernels::Ops& ops, const AttentionSite& site, const Evaluation& eval, const Attention& w,
                     kernels::ConstRows x, KvCache& cache, Workspace& ws, Rows pattern) {
    const LayerConfig& L = *site.config;
    const std::int32_t layer = site.layer;
    const auto il = static_cast<std::uint32_t>(layer);
    const std::size_t T = x.rows;
    const std::size_t D = L.head_dim;
    const std::size_t first = site.first_position;
    const float eps = site.model->rms_eps;

    Rows h = Workspace::rows(ws.normed, T, x.cols);             // [T, E]
    Rows q = Workspace::rows(ws.q, T, L.n_head * D);            // [T, H * D]
    Rows k = Workspace::rows(ws.k, T, L.n_head_kv * D);         // [T, Hkv * D]
    Rows v = Workspace::rows(ws.v, T, L.n_head_kv * D);         // [T, Hkv * D]
    Rows heads = Workspace::rows(ws.attention, T, L.n_head * D);  // [T, H * D]
    ops.rms_norm({"attn_norm", layer, OpKind::Norm}, x, w.norm, eps, h);
    ops.matmul({"attn_q", layer, OpKind::Projection}, h, w.q, q);
    ops.matmul({"attn_k", layer, OpKind::Projection}, h, w.k, k);
    ops.matmul({"attn_v", layer, OpKind::Projection}, h, w.v, v);
    if (!w.q_norm.empty()) {
        ops.rms_norm({"attn_q_norm", layer, OpKind::Norm}, q.reshape(T * L.n_head, D), w.q_norm, eps,
                     q.reshape(T * L.n_head, D));
        ops.rms_norm({"attn_k_norm", layer, OpKind::Norm}, k.reshape(T * L.n_head_kv, D), w.k_norm, eps,
                     k.reshape(T * L.n_head_kv, D));
    }
    kernels::RopeParams rope = rope_params(*site.model, L, site.rope_freqs);
    rope_rows(ops, {"rope_q", layer, OpKind::Rope}, eval, q, rope);
    rope.n_heads = L.n_head_kv;
    rope_rows(ops, {"rope_k", layer, OpKind::Rope}, eval, k, rope);

    kernels::KvRows cache_k = cache.keys(il);    // [capacity, Hkv * D]
    kernels::KvRows cache_v = cache.values(il);  // [capacity, Hkv * D]
    ops.store_kv({"cache_k", layer, OpKind::KvStore}, k, cache_k.slice(first, T));
    ops.store_kv({"cache_v", layer, OpKind::KvStore}, v, cache_v.slice(first, T));
    attend(ops, {"kqv", layer, OpKind::Attention}, eval, q, cache_k, cache_v, attention_params(*site.model, L), heads,
           pattern);
    return heads;
}

}  // namespace ember::models
