// The backward half of GradientModel: the forward of gradient_forward.cpp in reverse,
// one layer at a time from the logits to before_layer(0), each operation through its
// backward in gradient_ops.hpp. Every site's gradient is handed to the sink as soon as it
// is complete.
#include <cmath>

#include "attribution/gradient_model.hpp"
#include "attribution/gradient_ops.hpp"
#include "models/model.hpp"

namespace ember::attribution {

using hooks::Stage;

namespace {

Matrix matmul_back(const Matrix& dy, const kernels::WeightMatrix& w) {
    Matrix dx = Matrix::zeros(dy.rows, w.cols);
    matmul_backward(dy.view(), w, dx.view());
    return dx;
}

// dM/dx of y = rms_norm(x) * weight, over groups of `group` values (0: the whole row).
Matrix rms_back(const Matrix& x, std::span<const float> weight, float eps, const Matrix& dy, std::size_t group = 0) {
    Matrix dx = Matrix::zeros(x.rows, x.cols);
    const std::size_t n = group == 0 ? x.cols : group;
    const std::size_t r = x.rows * x.cols / n;
    rms_norm_backward(x.view().reshape(r, n), weight, eps, dy.view().reshape(r, n), dx.view().reshape(r, n));
    return dx;
}

void add_to(Matrix& dst, const Matrix& src) { add_into(src.view(), dst.view()); }

void emit(const SiteSink& sink, Stage stage, std::optional<std::uint32_t> layer, const Matrix& activation,
          const Matrix& gradient) {
    if (sink) sink({stage, layer, activation.view(), gradient.view()});
}

}  // namespace

void GradientModel::backward(const Tape& tape, kernels::ConstRows dlogits, const SiteSink& sink) const {
    const models::ModelConfig& c = config_;
    const std::size_t T = tape.tokens.size();
    const std::size_t E = c.n_embd;

    // ---- logits -> before_logits -> after_layer(last) ----
    Matrix dz{dlogits.rows, dlogits.cols, std::vector<float>(dlogits.data, dlogits.data + dlogits.rows * dlogits.cols)};
    if (c.final_logit_softcap != 0.0f) softcap_backward(tape.logits_raw.view(), c.final_logit_softcap, dz.view(), dz.view());
    const Matrix drows = matmul_back(dz, w_.output);  // [R, E]
    Matrix dnormed = Matrix::zeros(T, E);
    for (std::size_t r = 0; r < tape.logit_rows.size(); ++r)
        add_into(kernels::ConstRows(drows.values.data() + r * E, 1, E),
                 kernels::Rows(dnormed.values.data() + tape.logit_rows[r] * E, 1, E));
    emit(sink, Stage::BeforeLogits, std::nullopt, tape.normed, dnormed);
    Matrix dx = rms_back(tape.x_final, w_.output_norm, c.rms_eps, dnormed);

    std::vector<Matrix> dk(c.n_layers), dv(c.n_layers);
    for (std::uint32_t il = 0; il < c.n_layers; ++il) {
        const models::LayerConfig& L = c.layers[il];
        if (!L.has_own_kv(il)) continue;
        dk[il] = Matrix::zeros(T, std::size_t{L.n_head_kv} * L.head_dim);
        dv[il] = Matrix::zeros(T, std::size_t{L.n_head_kv} * L.head_dim);
    }
    for (std::uint32_t il = c.n_layers; il-- > 0;) {
        if (tape.keeps == TapeKeeps::Everything) {
            layer_backward(il, tape, tape.layers[il], dx, dk, dv, sink);
            continue;
        }
        // Recompute the layer from its kept input with the forward's own edits (before_layer's
        // is already in x_in): the same kernels on the same values, the same bytes.
        LayerTape lt;
        lt.x_in = tape.layers[il].x_in;
        const std::uint32_t source = c.layers[il].kv_source;
        layer_forward(il, tape, lt, source == il ? nullptr : &tape.layers[source], tape.edit);
        layer_backward(il, tape, lt, dx, dk, dv, sink);
    }
}

void GradientModel::layer_backward(std::uint32_t il, const Tape& tape, const LayerTape& lt, Matrix& dx,
                                   std::vector<Matrix>& dk, std::vector<Matrix>& dv, const SiteSink& sink) const {
    const models::ModelConfig& c = config_;
    const models::LayerConfig& L = c.layers[il];
    const LayerWeights& w = w_.layers[il];
    const float eps = c.rms_eps;
    const std::size_t T = lt.x_in.rows;
    const std::size_t D = L.head_dim;

    emit(sink, Stage::AfterLayer, il, lt.x_out, dx);
    // x_out = x_unscaled * s: dx_unscaled = dx_out * s.
    if (w.output_scale) scale_into(dx.view(), *w.output_scale, dx.view());
    // x_unscaled = x_pe + post_norm(proj(gelu(inp_gate(x_pe)) * inputs_l)); the inputs are
    // constants here (computed before before_layer(0)).
    if (w.per_layer) {
        const std::size_t PL = c.n_embd_per_layer;
        const Matrix dproj = rms_back(lt.ple_proj, w.per_layer->post_norm, eps, dx);
        Matrix dgated = matmul_back(dproj, w.per_layer->proj);  // [T, PL]
        const float* inputs = tape.per_layer_inputs.values.data() + il * PL;
        for (std::size_t t = 0; t < T; ++t)
            for (std::size_t j = 0; j < PL; ++j) dgated.values[t * PL + j] *= inputs[t * c.n_layers * PL + j];
        gelu_backward(lt.ple_pre.view(), dgated.view(), dgated.view());
        add_to(dx, matmul_back(dgated, w.per_layer->inp_gate));
    }

    // ---- MLP block: x_pe = x_mid + post_norm(down(act(gate(h)) * up(h))), h = norm(x_mid) ----
    emit(sink, Stage::AfterMlp, il, lt.mlp_out, dx);
    const Matrix dmlp_proj = w.mlp.post_norm.empty() ? dx : rms_back(lt.mlp_proj, w.mlp.post_norm, eps, dx);
    const Matrix dact = matmul_back(dmlp_proj, w.mlp.down);  // [T, n_ff]
    emit(sink, Stage::MlpActivation, il, lt.act, dact);
    Matrix dgate = Matrix::zeros(dact.rows, dact.cols);
    Matrix dup = Matrix::zeros(dact.rows, dact.cols);
    if (c.family == models::Family::Gemma4) geglu_backward(lt.gate.view(), lt.up.view(), dact.view(), dgate.view(), dup.view());
    else swiglu_backward(lt.gate.view(), lt.up.view(), dact.view(), dgate.view(), dup.view());
    Matrix dh = matmul_back(dgate, w.mlp.gate);
    add_to(dh, matmul_back(dup, w.mlp.up));
    emit(sink, Stage::MlpInput, il, lt.mlp_in, dh);
    add_to(dx, rms_back(lt.x_mid, w.mlp.norm, eps, dh));  // dx is now dM/d x_mid
    emit(sink, Stage::ResidualMid, il, lt.x_mid, dx);

    // ---- attention block: x_mid = x_in + post_norm(output(attention(q, k, v))) ----
    emit(sink, Stage::AfterAttention, il, lt.attn_out, dx);
    const Matrix dattn_proj = w.attn.post_norm.empty() ? dx : rms_back(lt.attn_proj, w.attn.post_norm, eps, dx);
    const Matrix dheads = matmul_back(dattn_proj, w.attn.output);  // [T, H * D]
    emit(sink, Stage::HeadOutputs, il, lt.heads, dheads);

    const LayerTape& kv = L.has_own_kv(il) ? lt : tape.layers[L.kv_source];
    Matrix dq = Matrix::zeros(T, L.n_head * D);
    Matrix dpattern = Matrix::zeros(lt.pattern.rows, lt.pattern.cols);
    attention_backward(lt.q.view(), kv.k.view(), kv.v.view(), lt.pattern.view(), models::attention_params(c, L),
                       dheads.view(), dq.view(), dk[L.kv_source].view(), dv[L.kv_source].view(), dpattern.view());
    emit(sink, Stage::AttentionPattern, il, lt.pattern, dpattern);

    kernels::RopeParams rope = models::rope_params(c, L, w_.rope_freqs);
    const RopeFactors factors = rope_factors(T, 0, rope);
    rope_backward(dq.view(), factors, rope);
    const Matrix dq_raw = w.attn.q_norm.empty() ? dq : rms_back(lt.q_raw, w.attn.q_norm, eps, dq, D);
    Matrix dh_attn = matmul_back(dq_raw, w.attn.q);
    if (L.has_own_kv(il)) {
        // Every reader of this layer's K/V (itself, and later layers sharing it) has added its part.
        rope.n_heads = L.n_head_kv;
        rope_backward(dk[il].view(), factors, rope);
        Matrix dk_raw = w.attn.k_norm.empty() ? dk[il] : rms_back(lt.k_raw, w.attn.k_norm, eps, dk[il], D);
        const Matrix dv_raw = c.family == models::Family::Gemma4 ? rms_back(lt.v_raw, {}, eps, dv[il], D) : dv[il];
        if (w.attn.v) add_to(dh_attn, matmul_back(dv_raw, *w.attn.v));
        else add_to(dk_raw, dv_raw);  // V was the raw K projection
        add_to(dh_attn, matmul_back(dk_raw, *w.attn.k));
    }
    add_to(dx, rms_back(lt.x_in, w.attn.norm, eps, dh_attn));  // dx is now dM/d x_in
    emit(sink, Stage::BeforeLayer, il, lt.x_in, dx);
}

}  // namespace ember::attribution
