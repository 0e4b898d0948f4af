#include "models/model.hpp"

#include <fmt/format.h>

#include <string_view>

#include "common/error.hpp"
#include "models/block_scales.hpp"
#include "models/family.hpp"
#include "models/tensor_loader.hpp"

namespace ember::models {

std::unique_ptr<Model> load_model(const gguf::File& file, std::optional<Family> expected, ScaleCheck scales) {
    ModelConfig config = load_model_config(file, expected);
    if (scales == ScaleCheck::here) check_block_scales(file);
    const FamilyInfo& family = family_info(config.family);
    return family.load(file, std::move(config));
}

OutputHead load_output_head(const gguf::File& file, const ModelConfig& c,
                            const kernels::WeightMatrix& token_embd) {
    const TensorLoader t(file, c);
    OutputHead head;
    head.output_norm = t.vector("output_norm.weight", c.n_embd);
    head.output = t.optional_matrix("output.weight", c.n_vocab, c.n_embd).value_or(token_embd);
    return head;
}

void Model::final_norm(kernels::Ops& ops, kernels::ConstRows hidden, kernels::Rows normed) const {
    ops.rms_norm({"result_norm", kernels::kNoLayer, kernels::OpKind::Norm}, hidden, head_.output_norm, config_.rms_eps,
                 normed);
}

void Model::lm_head(kernels::Ops& ops, kernels::ConstRows normed, kernels::Rows logits,
                    std::span<const Segment> segments) const {
    const bool per_sequence = !segments.empty() && logits.rows == segments.back().row_begin + segments.back().rows;
    if (!per_sequence) segments = {};
    const Segment whole{0, logits.rows, 0, 0, true};
    for (const Segment& s : segments.empty() ? std::span<const Segment>(&whole, 1) : segments) {
        const std::size_t n = s.all_logits ? s.rows : 1;
        const std::size_t first = s.row_begin + s.rows - n;
        kernels::Rows out = logits.slice(first, n);  // [n, n_vocab]
        ops.matmul({"output", kernels::kNoLayer, kernels::OpKind::LmHead}, normed.slice(first, n), head_.output, out);
        if (config_.final_logit_softcap != 0.0f) {
            ops.softcap({"final_logit_softcap", kernels::kNoLayer, kernels::OpKind::Softcap}, out,
                        config_.final_logit_softcap, out);
        }
    }
}

kernels::RopeParams rope_params(const ModelConfig& config, const LayerConfig& layer, std::span<const float> freq_factors) {
    kernels::RopeParams p;
    p.pairing = config.rope_mode == RopeMode::Norm ? kernels::RopePairing::Adjacent : kernels::RopePairing::HalfSplit;
    p.n_heads = layer.n_head;  // callers override for K (n_head_kv)
    p.head_dim = layer.head_dim;
    p.n_rot = layer.n_rot;
    p.freq_base = layer.rope_base;
    p.freq_scale = layer.rope_freq_scale;
    if (layer.uses_rope_freqs) p.freq_factors = freq_factors;
    p.ext_factor = config.yarn_ext_factor;
    p.attn_factor = config.rope_attn_factor;
    p.beta_fast = config.yarn_beta_fast;
    p.beta_slow = config.yarn_beta_slow;
    p.n_ctx_orig = config.n_ctx_orig;
    return p;
}

kernels::AttentionParams attention_params(const ModelConfig& config, const LayerConfig& layer) {
    kernels::AttentionParams p;
    p.n_head = layer.n_head;
    p.n_head_kv = layer.n_head_kv;
    p.head_dim = layer.head_dim;
    p.scale = layer.attention_scale;
    p.window = layer.sliding_window ? config.n_swa : 0;
    return p;
}

void rope_rows(kernels::Ops& ops, const kernels::OpSite& site, const Evaluation& eval, kernels::Rows x,
               const kernels::RopeParams& rope) {
    if (eval.segments.empty()) {
        ops.rope(site, x, eval.info.start_position, rope);
        return;
    }
    for (const Segment& s : eval.segments) ops.rope(site, x.slice(s.row_begin, s.rows), s.position, rope);
}

void attend(kernels::Ops& ops, const kernels::OpSite& site, const Evaluation& eval, kernels::ConstRows q,
            kernels::KvRows cache_k, kernels::KvRows cache_v, const kernels::AttentionParams& params, kernels::Rows out,
            kernels::Rows pattern) {
    if (eval.segments.empty()) {
        const std::size_t first = eval.info.start_position;
        const std::size_t n_kv = first + q.rows;  // cached positions visible after this evaluation
        ops.attention(site, q, cache_k.slice(0, n_kv), cache_v.slice(0, n_kv), first, params, out, pattern);
        return;
    }
    // One pattern per sequence would not be one [n_head * T, n_kv] tensor: a packed
    // evaluation has no attention_pattern (dataset extraction evaluates such samples alone).
    if (pattern.data) throw Error("the attention_pattern stage needs one sequence per evaluation, not a packed one");
    for (const Segment& s : eval.segments) {
        const std::size_t n_kv = s.position + s.rows;
        ops.attention(site, q.slice(s.row_begin, s.rows), cache_k.slice(s.kv_begin, n_kv),
                      cache_v.slice(s.kv_begin, n_kv), s.position, params, out.slice(s.row_begin, s.rows));
    }
}

}  // namespace ember::models
