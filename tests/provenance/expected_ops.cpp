#include "expected_ops.hpp"

#include <fmt/format.h>

namespace ember::test {
namespace {

using kernels::OpKind;

class Builder {
public:
    explicit Builder(std::vector<ExpectedOp>& out) : out_(out) {}
    void op(std::string name, OpKind kind, std::int32_t layer, trace::Shape in, trace::Shape out) {
        out_.push_back({std::move(name), kind, layer, in, out});
    }
    // An operation whose output has the shape of its input.
    void same(std::string name, OpKind kind, std::int32_t layer, trace::Shape shape) {
        op(std::move(name), kind, layer, shape, shape);
    }

private:
    std::vector<ExpectedOp>& out_;
};

bool has_tensor(const gguf::File& file, std::uint32_t layer, const char* name) {
    return file.find_tensor(fmt::format("blk.{}.{}.weight", layer, name)) != nullptr;
}

bool float_weight(const gguf::File& file, std::uint32_t layer, const char* name) {
    const gguf::GgmlType t = file.find_tensor(fmt::format("blk.{}.{}.weight", layer, name))->type;
    return t == gguf::GgmlType::F32 || t == gguf::GgmlType::F16 || t == gguf::GgmlType::BF16;
}

// The rows of layer il's MLP block in an evaluation without hooks: in the last layer, the
// logits' rows only when those are the last one and no FFN weight is a float type (whose
// product order depends on the row count); else all T.
std::size_t mlp_rows(const gguf::File& file, const models::ModelConfig& c, std::uint32_t il, std::size_t T, std::size_t R) {
    if (il + 1 != c.n_layers || R != 1) return T;
    for (const char* w : {"ffn_gate", "ffn_up", "ffn_down"})
        if (float_weight(file, il, w)) return T;
    return 1;
}

// Llama and Qwen3: attention with optional per-head Q/K norms, then SwiGLU over M rows
// (mlp_rows).
void llama_like_layer(Builder& b, const models::ModelConfig& c, std::uint32_t il, std::size_t T, std::size_t M,
                      bool qk_norm) {
    const auto& L = c.layers[il];
    const auto l = static_cast<std::int32_t>(il);
    const std::size_t E = c.n_embd, D = L.head_dim, qw = L.n_head * D, kvw = L.n_head_kv * D, ff = L.n_ff;
    b.same("attn_norm", OpKind::Norm, l, {T, E});
    b.op("attn_q", OpKind::Projection, l, {T, E}, {T, qw});
    b.op("attn_k", OpKind::Projection, l, {T, E}, {T, kvw});
    b.op("attn_v", OpKind::Projection, l, {T, E}, {T, kvw});
    if (qk_norm) {
        b.same("attn_q_norm", OpKind::Norm, l, {T * L.n_head, D});
        b.same("attn_k_norm", OpKind::Norm, l, {T * L.n_head_kv, D});
    }
    b.same("rope_q", OpKind::Rope, l, {T, qw});
    b.same("rope_k", OpKind::Rope, l, {T, kvw});
    b.same("cache_k", OpKind::KvStore, l, {T, kvw});
    b.same("cache_v", OpKind::KvStore, l, {T, kvw});
    b.same("kqv", OpKind::Attention, l, {T, qw});
    b.op("attn_output", OpKind::Projection, l, {T, qw}, {T, E});
    b.same("ffn_inp", OpKind::ResidualAdd, l, {M, E});
    b.same("ffn_norm", OpKind::Norm, l, {M, E});
    b.op("ffn_gate", OpKind::Projection, l, {M, E}, {M, ff});
    b.op("ffn_up", OpKind::Projection, l, {M, E}, {M, ff});
    b.same("ffn_swiglu", OpKind::Activation, l, {M, ff});
    b.op("ffn_down", OpKind::Projection, l, {M, ff}, {M, E});
    b.same("l_out", OpKind::ResidualAdd, l, {M, E});
}

// Gemma 4 (model-math §7): per-layer inputs, Q/K/V norms, shared KV, post norms, GEGLU.
void gemma4_per_layer_inputs(Builder& b, const models::ModelConfig& c, std::size_t T) {
    const std::size_t E = c.n_embd, PL = c.n_embd_per_layer, width = c.n_layers * PL;
    b.op("per_layer_token_embd", OpKind::Embedding, -1, {T, 1}, {T, width});
    b.same("inp_per_layer_selected", OpKind::Scale, -1, {T, width});
    b.op("per_layer_model_proj", OpKind::Projection, -1, {T, E}, {T, width});
    b.same("per_layer_proj_scaled", OpKind::Scale, -1, {T, width});
    b.same("per_layer_proj", OpKind::Norm, -1, {T * c.n_layers, PL});
    b.same("per_layer_inputs_sum", OpKind::ResidualAdd, -1, {T, width});
    b.same("inp_per_layer", OpKind::Scale, -1, {T, width});
}

// Gemma 4's rows after the attention output (models/gemma4.cpp last_layer_rows):
// mlp_rows, with the per-layer-embedding products held to the same rule.
std::size_t gemma4_last_rows(const gguf::File& file, const models::ModelConfig& c, std::uint32_t il, std::size_t T,
                             std::size_t R) {
    const std::size_t M = mlp_rows(file, c, il, T, R);
    if (c.n_embd_per_layer == 0 || M == T) return M;
    for (const char* w : {"inp_gate", "proj"})
        if (float_weight(file, il, w)) return T;
    return M;
}

void gemma4_layer(Builder& b, const gguf::File& file, const models::ModelConfig& c, std::uint32_t il, std::size_t T,
                  std::size_t M) {
    const auto& L = c.layers[il];
    const auto l = static_cast<std::int32_t>(il);
    const std::size_t E = c.n_embd, D = L.head_dim, qw = L.n_head * D, kvw = L.n_head_kv * D, ff = L.n_ff;
    const std::size_t PL = c.n_embd_per_layer;
    b.same("attn_norm", OpKind::Norm, l, {T, E});
    b.op("attn_q", OpKind::Projection, l, {T, E}, {T, qw});
    b.same("attn_q_norm", OpKind::Norm, l, {T * L.n_head, D});
    b.same("rope_q", OpKind::Rope, l, {T, qw});
    if (L.kv_source == il) {
        b.op("attn_k", OpKind::Projection, l, {T, E}, {T, kvw});
        if (has_tensor(file, il, "attn_v")) b.op("attn_v", OpKind::Projection, l, {T, E}, {T, kvw});
        b.same("attn_v_norm", OpKind::Norm, l, {T * L.n_head_kv, D});
        b.same("attn_k_norm", OpKind::Norm, l, {T * L.n_head_kv, D});
        b.same("rope_k", OpKind::Rope, l, {T, kvw});
        b.same("cache_k", OpKind::KvStore, l, {T, kvw});
        b.same("cache_v", OpKind::KvStore, l, {T, kvw});
    }
    b.same("kqv", OpKind::Attention, l, {T, qw});
    b.op("attn_output", OpKind::Projection, l, {T, qw}, {T, E});
    b.same("attn_post_norm", OpKind::Norm, l, {T, E});
    b.same("attn_out", OpKind::ResidualAdd, l, {M, E});
    b.same("ffn_norm", OpKind::Norm, l, {M, E});
    b.op("ffn_gate", OpKind::Projection, l, {M, E}, {M, ff});
    b.op("ffn_up", OpKind::Projection, l, {M, E}, {M, ff});
    b.same("ffn_geglu", OpKind::Activation, l, {M, ff});
    b.op("ffn_down", OpKind::Projection, l, {M, ff}, {M, E});
    b.same("ffn_post_norm", OpKind::Norm, l, {M, E});
    b.same("pe_in", OpKind::ResidualAdd, l, {M, E});
    if (PL > 0) {
        b.op("inp_gate", OpKind::Projection, l, {M, E}, {M, PL});
        b.same("inp_gate_gelu", OpKind::Activation, l, {M, PL});
        b.same("per_layer_gated", OpKind::Multiply, l, {M, PL});
        b.op("proj", OpKind::Projection, l, {M, PL}, {M, E});
        b.same("per_layer_embd_out", OpKind::Norm, l, {M, E});
        b.same("per_layer_residual", OpKind::ResidualAdd, l, {M, E});
    }
    if (has_tensor(file, il, "layer_output_scale")) b.same("layer_output_scale", OpKind::Scale, l, {M, E});
}

}  // namespace

std::vector<ExpectedOp> expected_evaluation(const gguf::File& file, const models::ModelConfig& c, std::size_t T,
                                            bool all_logits) {
    std::vector<ExpectedOp> ops;
    Builder b(ops);
    const std::size_t E = c.n_embd, R = all_logits ? T : 1;
    b.op("token_embd", OpKind::Embedding, -1, {T, 1}, {T, E});
    if (c.family == models::Family::Gemma4) {
        b.same("inp_scaled", OpKind::Scale, -1, {T, E});
        if (c.n_embd_per_layer > 0) gemma4_per_layer_inputs(b, c, T);
    }
    for (std::uint32_t il = 0; il < c.n_layers; ++il) {
        if (c.family == models::Family::Gemma4) gemma4_layer(b, file, c, il, T, gemma4_last_rows(file, c, il, T, R));
        else llama_like_layer(b, c, il, T, mlp_rows(file, c, il, T, R), c.family == models::Family::Qwen3);
    }
    b.same("result_norm", OpKind::Norm, -1, {R, E});
    b.op("output", OpKind::LmHead, -1, {R, E}, {R, c.n_vocab});
    if (c.final_logit_softcap != 0.0f) b.same("final_logit_softcap", OpKind::Softcap, -1, {R, c.n_vocab});
    return ops;
}

ExpectedOp expected_sampling(const models::ModelConfig& c) {
    return {"sampling", OpKind::Sampling, -1, {1, c.n_vocab}, {1, 1}};
}

std::string fingerprint_of(const std::vector<ExpectedOp>& ops) {
    trace::Fingerprint f;
    for (const auto& op : ops) f.add(op.name, kernels::op_kind_name(op.kind), op.layer, op.input, op.output);
    return f.hex();
}

}  // namespace ember::test
