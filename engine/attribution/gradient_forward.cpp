// The forward half of GradientModel: the families' forward passes (models/llama.cpp,
// qwen3.cpp, gemma4.cpp) on the reference kernels, one sequence at positions 0..T-1 with
// no KV cache beyond this evaluation (its own K/V rows are the cache), keeping every
// intermediate in the tape.
#include <cmath>

#include "attribution/gradient_model.hpp"
#include "kernels/kv_rows.hpp"
#include "kernels/reference/kernels.hpp"
#include "models/model.hpp"

namespace ember::attribution {

namespace ref = kernels::reference;
using hooks::Stage;
using kernels::Rows;

namespace {

bool is_gemma(const models::ModelConfig& c) { return c.family == models::Family::Gemma4; }

Matrix matmul(const Matrix& x, const kernels::WeightMatrix& w) {
    Matrix y = Matrix::zeros(x.rows, w.rows);
    ref::matmul(x.view(), w, y.view());
    return y;
}

Matrix rms_norm(const Matrix& x, std::span<const float> weight, float eps, std::size_t group = 0) {
    Matrix y = Matrix::zeros(x.rows, x.cols);
    const std::size_t n = group == 0 ? x.cols : group;  // norm over groups of n values (per head)
    ref::rms_norm(x.view().reshape(x.rows * x.cols / n, n), weight, eps, y.view().reshape(x.rows * x.cols / n, n));
    return y;
}

Matrix add(const Matrix& a, const Matrix& b) {
    Matrix y = Matrix::zeros(a.rows, a.cols);
    ref::add(a.view(), b.view(), y.view());
    return y;
}

void edit_site(const SiteEdit& edit, Stage stage, std::uint32_t il, Matrix& m) {
    if (edit) edit(stage, il, m.view());
}

}  // namespace

GradientModel::GradientModel(const gguf::File& file, const models::ModelConfig& config)
    : config_(config), w_(load_gradient_weights(file, config)) {
    ref::gelu_f16_table_values();  // built once, before any parallel use
}

// Gemma 4's per-layer embedding inputs (models/gemma4.cpp per_layer_inputs), from the
// scaled token embeddings x0: ((rmsnorm(W x0 / sqrt(E)) * norm) + embd * sqrt(PL)) / sqrt(2).
void GradientModel::per_layer_inputs(Tape& tape, const Matrix& x0) const {
    const models::ModelConfig& c = config_;
    const std::size_t T = tape.tokens.size();
    const std::size_t PL = c.n_embd_per_layer;
    Matrix selected = Matrix::zeros(T, c.n_layers * PL);  // [T, L * PL]
    ref::get_rows(*w_.per_layer_token_embd, tape.tokens, selected.view());
    ref::scale(selected.view(), std::sqrt(static_cast<float>(PL)), selected.view());
    Matrix projected = matmul(x0, *w_.per_layer_model_proj);  // [T, L * PL]
    ref::scale(projected.view(), 1.0f / std::sqrt(static_cast<float>(c.n_embd)), projected.view());
    projected = rms_norm(projected, w_.per_layer_proj_norm, c.rms_eps, PL);
    ref::add(projected.view(), selected.view(), selected.view());
    ref::scale(selected.view(), 1.0f / std::sqrt(2.0f), selected.view());
    tape.per_layer_inputs = std::move(selected);
}

bool GradientModel::kv_shared_later(std::uint32_t il) const {
    for (std::uint32_t j = il + 1; j < config_.n_layers; ++j)
        if (config_.layers[j].kv_source == il) return true;
    return false;
}

void GradientModel::layer_forward(std::uint32_t il, const Tape& tape, LayerTape& lt, const LayerTape* kv_source,
                                  const SiteEdit& edit) const {
    attention_forward(il, lt, kv_source ? *kv_source : lt, edit);
    mlp_forward(il, lt, edit);
    if (w_.layers[il].per_layer) per_layer_forward(il, tape, lt);
    else lt.x_unscaled = lt.x_pe;
    lt.x_out = lt.x_unscaled;
    if (const auto& s = w_.layers[il].output_scale) ref::scale(lt.x_out.view(), *s, lt.x_out.view());
    edit_site(edit, Stage::AfterLayer, il, lt.x_out);
}

namespace {

// Every stage site of a layer's tape, in firing order, as the forward left it.
void observe_layer(const SiteSink& observe, std::uint32_t il, const LayerTape& lt) {
    const std::pair<Stage, const Matrix*> sites[] = {
        {Stage::BeforeLayer, &lt.x_in},       {Stage::AttentionPattern, &lt.pattern}, {Stage::HeadOutputs, &lt.heads},
        {Stage::AfterAttention, &lt.attn_out}, {Stage::ResidualMid, &lt.x_mid},       {Stage::MlpInput, &lt.mlp_in},
        {Stage::MlpActivation, &lt.act},      {Stage::AfterMlp, &lt.mlp_out},         {Stage::AfterLayer, &lt.x_out},
    };
    for (const auto& [stage, m] : sites) observe({stage, il, m->view(), {}});
}

}  // namespace

Tape GradientModel::forward(std::span<const std::int32_t> tokens, std::span<const std::size_t> logit_rows,
                            const SiteEdit& edit, const SiteSink& observe, TapeKeeps keeps) const {
    const models::ModelConfig& c = config_;
    const std::size_t T = tokens.size();
    const std::size_t E = c.n_embd;
    Tape tape;
    tape.keeps = keeps;
    tape.edit = edit;
    tape.tokens.assign(tokens.begin(), tokens.end());
    tape.logit_rows.assign(logit_rows.begin(), logit_rows.end());

    Matrix x = Matrix::zeros(T, E);  // [T, E] the residual stream
    ref::get_rows(w_.token_embd, tokens, x.view());
    if (is_gemma(c)) {
        ref::scale(x.view(), c.embedding_scale, x.view());
        if (c.n_embd_per_layer > 0) per_layer_inputs(tape, x);
    }
    tape.layers.resize(c.n_layers);
    for (std::uint32_t il = 0; il < c.n_layers; ++il) {
        LayerTape lt;
        lt.x_in = std::move(x);
        edit_site(edit, Stage::BeforeLayer, il, lt.x_in);
        const std::uint32_t source = c.layers[il].kv_source;
        layer_forward(il, tape, lt, source == il ? nullptr : &tape.layers[source], edit);
        if (observe) observe_layer(observe, il, lt);
        x = lt.x_out;
        if (keeps == TapeKeeps::Everything) {
            tape.layers[il] = std::move(lt);
            continue;
        }
        // The layer boundary alone (and K/V a later layer reads): the backward recomputes the rest.
        LayerTape& kept = tape.layers[il];
        kept.x_in = std::move(lt.x_in);
        if (kv_shared_later(il)) {
            kept.k = std::move(lt.k);
            kept.v = std::move(lt.v);
        }
    }
    tape.x_final = x;

    // ---- the final norm of every row, the LM head of the metric's rows ----
    tape.normed = rms_norm(x, w_.output_norm, c.rms_eps);
    if (observe) observe({Stage::BeforeLogits, std::nullopt, tape.normed.view(), {}});
    Matrix rows = Matrix::zeros(logit_rows.size(), E);  // [R, E]
    for (std::size_t r = 0; r < logit_rows.size(); ++r)
        std::copy_n(tape.normed.values.data() + logit_rows[r] * E, E, rows.values.data() + r * E);
    tape.logits_raw = matmul(rows, w_.output);
    tape.logits = tape.logits_raw;
    if (c.final_logit_softcap != 0.0f) ref::softcap(tape.logits.view(), c.final_logit_softcap, tape.logits.view());
    return tape;
}

// models/attention_block.cpp attention_heads (Llama, Qwen3) and Gemma 4's attention block.
void GradientModel::attention_forward(std::uint32_t il, LayerTape& lt, const LayerTape& kv, const SiteEdit& edit) const {
    const models::ModelConfig& c = config_;
    const models::LayerConfig& L = c.layers[il];
    const AttentionWeights& w = w_.layers[il].attn;
    const std::size_t T = lt.x_in.rows;
    const std::size_t D = L.head_dim;
    const float eps = c.rms_eps;

    const Matrix h = rms_norm(lt.x_in, w.norm, eps);  // [T, E]
    lt.q_raw = matmul(h, w.q);
    lt.q = w.q_norm.empty() ? lt.q_raw : rms_norm(lt.q_raw, w.q_norm, eps, D);
    kernels::RopeParams rope = models::rope_params(c, L, w_.rope_freqs);
    ref::rope(lt.q.view(), 0, rope);
    if (L.has_own_kv(il)) {
        lt.k_raw = matmul(h, *w.k);
        lt.v_raw = w.v ? matmul(h, *w.v) : lt.k_raw;
        // Gemma 4 RMS-normalises each V head without a weight; Llama and Qwen3 use V as projected.
        lt.v = is_gemma(c) ? rms_norm(lt.v_raw, {}, eps, D) : lt.v_raw;
        lt.k = w.k_norm.empty() ? lt.k_raw : rms_norm(lt.k_raw, w.k_norm, eps, D);
        rope.n_heads = L.n_head_kv;
        ref::rope(lt.k.view(), 0, rope);
    }

    const kernels::AttentionParams params = models::attention_params(c, L);
    lt.pattern = Matrix::zeros(L.n_head * T, T);
    lt.heads = Matrix::zeros(T, L.n_head * D);
    std::vector<float> scores(L.n_head * T);
    std::vector<double> sums(L.n_head * D);
    ref::attention(lt.q.view(), kernels::f32_kv_rows(kv.k.view()), kernels::f32_kv_rows(kv.v.view()), 0, params, scores,
                   sums, lt.heads.view(), lt.pattern.view());
    edit_site(edit, Stage::HeadOutputs, il, lt.heads);
    lt.attn_proj = matmul(lt.heads, w.output);
    lt.attn_out = w.post_norm.empty() ? lt.attn_proj : rms_norm(lt.attn_proj, w.post_norm, eps);
    edit_site(edit, Stage::AfterAttention, il, lt.attn_out);
    lt.x_mid = add(lt.x_in, lt.attn_out);
    edit_site(edit, Stage::ResidualMid, il, lt.x_mid);
}

// models/feed_forward.cpp feed_forward_input and _activation, ffn_down, Gemma 4's post-norm.
void GradientModel::mlp_forward(std::uint32_t il, LayerTape& lt, const SiteEdit& edit) const {
    const MlpWeights& w = w_.layers[il].mlp;
    const float eps = config_.rms_eps;
    lt.mlp_in = rms_norm(lt.x_mid, w.norm, eps);  // [T, E]
    edit_site(edit, Stage::MlpInput, il, lt.mlp_in);
    lt.gate = matmul(lt.mlp_in, w.gate);
    lt.up = matmul(lt.mlp_in, w.up);
    lt.act = Matrix::zeros(lt.gate.rows, lt.gate.cols);
    if (is_gemma(config_)) ref::geglu(lt.gate.view(), lt.up.view(), lt.act.view());
    else ref::swiglu(lt.gate.view(), lt.up.view(), lt.act.view());
    edit_site(edit, Stage::MlpActivation, il, lt.act);
    lt.mlp_proj = matmul(lt.act, w.down);
    lt.mlp_out = w.post_norm.empty() ? lt.mlp_proj : rms_norm(lt.mlp_proj, w.post_norm, eps);
    edit_site(edit, Stage::AfterMlp, il, lt.mlp_out);
    lt.x_pe = add(lt.x_mid, lt.mlp_out);
}

// Gemma 4's per-layer embedding residual: x + post_norm(proj(gelu(inp_gate(x)) * inputs_l)).
void GradientModel::per_layer_forward(std::uint32_t il, const Tape& tape, LayerTape& lt) const {
    const PerLayerWeights& w = *w_.layers[il].per_layer;
    const std::size_t T = lt.x_pe.rows;
    const std::size_t PL = config_.n_embd_per_layer;
    lt.ple_pre = matmul(lt.x_pe, w.inp_gate);  // [T, PL]
    lt.ple_gelu = Matrix::zeros(T, PL);
    ref::gelu(lt.ple_pre.view(), lt.ple_gelu.view());
    Matrix gated = Matrix::zeros(T, PL);
    const kernels::ConstRows inputs(tape.per_layer_inputs.values.data() + il * PL, T, PL, config_.n_layers * PL);
    ref::mul(lt.ple_gelu.view(), inputs, gated.view());
    lt.ple_proj = matmul(gated, w.proj);
    lt.x_unscaled = add(lt.x_pe, rms_norm(lt.ple_proj, w.post_norm, config_.rms_eps));
}

}  // namespace ember::attribution
