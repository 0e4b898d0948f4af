#include "features/sae.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ember::features {
namespace {

// SAELens's layer_norm epsilon (run_time_activation_ln_in).
constexpr double kLayerNormEps = 1e-5;

// The row's normalization: x_in = (x - shift) · in_scale; decode = recon · out_scale + shift.
void row_norm(const Sae& sae, const float* x, float& in_scale, float& out_scale, float& shift) {
    // (a transcoder's caller resets the output half: its output is another site's)
    const std::size_t n = sae.d_in;
    in_scale = out_scale = 1.0f;
    shift = 0.0f;
    switch (sae.normalization) {
        case Normalization::None: break;
        case Normalization::ScalingFactor:
            in_scale = sae.scaling_factor;
            out_scale = 1.0f / sae.scaling_factor;
            break;
        case Normalization::ConstantNormRescale: {
            double sum = 0.0;
            for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
            const double coeff = std::sqrt(static_cast<double>(n)) / std::sqrt(sum);
            in_scale = static_cast<float>(coeff);
            out_scale = static_cast<float>(1.0 / coeff);
            break;
        }
        case Normalization::LayerNorm: {
            double mean = 0.0;
            for (std::size_t i = 0; i < n; ++i) mean += x[i];
            mean /= static_cast<double>(n);
            double var = 0.0;
            for (std::size_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
            const double std = std::sqrt(var / static_cast<double>(n - 1));  // torch's unbiased std
            shift = static_cast<float>(mean);
            in_scale = static_cast<float>(1.0 / (std + kLayerNormEps));
            out_scale = static_cast<float>(std);
            break;
        }
    }
}

// pre[j] = sum_i x_c[i] W[i, j] (+ bias[j]), in double. W is [d_in, d_sae].
void affine(const std::vector<double>& x_c, const std::vector<float>& W, const std::vector<float>& bias,
            std::size_t d_sae, std::vector<double>& pre) {
    std::fill(pre.begin(), pre.end(), 0.0);
    for (std::size_t i = 0; i < x_c.size(); ++i) {
        const double xi = x_c[i];
        if (xi == 0.0) continue;
        const float* row = W.data() + i * d_sae;
        for (std::size_t j = 0; j < d_sae; ++j) pre[j] += xi * row[j];
    }
    if (!bias.empty())
        for (std::size_t j = 0; j < d_sae; ++j) pre[j] += bias[j];
}

void activate(const Sae& sae, const std::vector<double>& pre, float* f) {
    const std::size_t n = sae.d_sae;
    switch (sae.architecture) {
        case Architecture::Standard:
            for (std::size_t j = 0; j < n; ++j) f[j] = static_cast<float>(std::max(pre[j], 0.0));
            break;
        case Architecture::JumpRelu:
            for (std::size_t j = 0; j < n; ++j)
                f[j] = pre[j] > sae.threshold[j] ? static_cast<float>(std::max(pre[j], 0.0)) : 0.0f;
            break;
        case Architecture::TopK: {
            // The k largest pre-activations (ties to the lower index), relu'd; 0 elsewhere.
            std::vector<std::size_t> order(n);
            std::iota(order.begin(), order.end(), std::size_t{0});
            const std::size_t k = std::min(sae.k, n);
            std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                              [&](std::size_t a, std::size_t b) { return pre[a] != pre[b] ? pre[a] > pre[b] : a < b; });
            std::fill(f, f + n, 0.0f);
            for (std::size_t r = 0; r < k; ++r) f[order[r]] = static_cast<float>(std::max(pre[order[r]], 0.0));
            break;
        }
        case Architecture::Gated: break;  // encode() computes it from two products
    }
}

}  // namespace

std::string_view architecture_name(Architecture a) {
    switch (a) {
        case Architecture::Standard: return "standard";
        case Architecture::JumpRelu: return "jumprelu";
        case Architecture::TopK: return "topk";
        case Architecture::Gated: return "gated";
    }
    return "?";
}

std::string_view normalization_name(Normalization n) {
    switch (n) {
        case Normalization::None: return "none";
        case Normalization::ScalingFactor: return "expected_average_only_in";
        case Normalization::ConstantNormRescale: return "constant_norm_rescale";
        case Normalization::LayerNorm: return "layer_norm";
    }
    return "?";
}

void reset_norm(std::size_t T, RowNorm& norm) {
    norm.in_scale.assign(T, 1.0f);
    norm.in_shift.assign(T, 0.0f);
    norm.out_scale.assign(T, 1.0f);
    norm.out_shift.assign(T, 0.0f);
}

void encoder_input(const Sae& sae, const float* row, std::size_t t, RowNorm& norm, double* x_c) {
    row_norm(sae, row, norm.in_scale[t], norm.out_scale[t], norm.in_shift[t]);
    if (sae.is_transcoder()) norm.out_scale[t] = 1.0f;  // SAELens's transcoders decode without denormalizing
    else norm.out_shift[t] = norm.in_shift[t];
    for (std::size_t i = 0; i < sae.d_in; ++i) {
        const double centred = (static_cast<double>(row[i]) - norm.in_shift[t]) * norm.in_scale[t];
        x_c[i] = centred - (sae.apply_b_dec_to_input ? sae.b_dec[i] : 0.0);
    }
}

void features_from_product(const Sae& sae, std::vector<double>& pre, float* f) {
    const std::size_t d_sae = sae.d_sae;
    if (sae.architecture == Architecture::Gated) {
        // x_c (W_enc ∘ exp(r_mag)) = exp(r_mag) ∘ (x_c W_enc): one product for both paths
        for (std::size_t j = 0; j < d_sae; ++j) {
            const double gate = pre[j] + sae.b_gate[j];
            const double magnitude = pre[j] * std::exp(static_cast<double>(sae.r_mag[j])) + sae.b_mag[j];
            f[j] = gate > 0.0 ? static_cast<float>(std::max(magnitude, 0.0)) : 0.0f;
        }
        return;
    }
    for (std::size_t j = 0; j < d_sae; ++j) pre[j] += sae.b_enc[j];
    activate(sae, pre, f);
}

void encode(const Sae& sae, const float* x, std::size_t T, float* features, RowNorm& norm) {
    const std::size_t d_in = sae.d_in, d_sae = sae.d_sae;
    reset_norm(T, norm);
    std::vector<double> x_c(d_in), pre(d_sae);
    for (std::size_t t = 0; t < T; ++t) {
        encoder_input(sae, x + t * d_in, t, norm, x_c.data());
        affine(x_c, sae.W_enc, {}, d_sae, pre);  // x_c W_enc, the bias added with the activation
        features_from_product(sae, pre, features + t * d_sae);
    }
}

void decode(const Sae& sae, const float* features, std::size_t T, const RowNorm& norm, float* out) {
    const std::size_t d_in = sae.d_out, d_sae = sae.d_sae;  // d_in: the width decoded into
    std::vector<double> recon(d_in);
    for (std::size_t t = 0; t < T; ++t) {
        for (std::size_t i = 0; i < d_in; ++i) recon[i] = sae.b_dec[i];
        const float* f = features + t * d_sae;
        for (std::size_t j = 0; j < d_sae; ++j) {
            if (f[j] == 0.0f) continue;  // the decoder is read for active features only
            const float* row = sae.W_dec.data() + j * d_in;
            for (std::size_t i = 0; i < d_in; ++i) recon[i] += static_cast<double>(f[j]) * row[i];
        }
        for (std::size_t i = 0; i < d_in; ++i)
            out[t * d_in + i] = static_cast<float>(recon[i] * norm.out_scale[t] + norm.out_shift[t]);
    }
}

bool splice_delta(const Sae& sae, const float* original, const float* edited, std::size_t T, const RowNorm& norm,
                  float* out) {
    const std::size_t d_in = sae.d_out, d_sae = sae.d_sae;  // d_in: the width decoded into
    bool changed_any = false;
    std::vector<double> delta(d_in);
    for (std::size_t t = 0; t < T; ++t) {
        std::fill(delta.begin(), delta.end(), 0.0);
        bool changed = false;
        for (std::size_t j = 0; j < d_sae; ++j) {
            const float before = original[t * d_sae + j], after = edited[t * d_sae + j];
            if (before == after) continue;
            changed = true;
            const double step = static_cast<double>(after) - before;
            const float* row = sae.W_dec.data() + j * d_in;
            for (std::size_t i = 0; i < d_in; ++i) delta[i] += step * row[i];
        }
        for (std::size_t i = 0; i < d_in; ++i)
            out[t * d_in + i] = changed ? static_cast<float>(delta[i] * norm.out_scale[t]) : 0.0f;
        changed_any |= changed;
    }
    return changed_any;
}

}  // namespace ember::features
