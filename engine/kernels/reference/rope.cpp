// Rotary position embedding exactly as llama.cpp computes it (model-math §3.2): the
// angle of pair i is built by repeated float multiplication theta *= theta_scale, and
// the rotation is the FMA-contracted form the GCC build of llama.cpp executes.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <numbers>

#include "kernels/reference/kernels.hpp"

namespace ember::kernels::reference {
namespace {

// The range of pairs YaRN blends between interpolation and extrapolation.
struct CorrectionDims {
    float low = 0.0f;
    float high = 0.0f;
};

float yarn_corr_dim(std::size_t n_rot, std::uint32_t n_ctx_orig, float beta, float base) {
    return static_cast<float>(n_rot) *
           std::log(static_cast<float>(n_ctx_orig) / (beta * 2.0f * std::numbers::pi_v<float>)) /
           (2.0f * std::log(base));
}

CorrectionDims yarn_corr_dims(const RopeParams& p) {
    const float start = std::floor(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_fast, p.freq_base));
    const float end = std::ceil(yarn_corr_dim(p.n_rot, p.n_ctx_orig, p.beta_slow, p.freq_base));
    return {std::max(0.0f, start), std::min(static_cast<float>(p.n_rot) - 1.0f, end)};
}

struct CosSin {
    float cos = 1.0f;
    float sin = 0.0f;
};

// cos/sin of pair `pair` for the unscaled angle `theta_extrap` (llama.cpp's rope_yarn).
CosSin pair_angle(float theta_extrap, std::size_t pair, const RopeParams& p, const CorrectionDims& corr) {
    const float theta_interp = p.freq_scale * theta_extrap;
    float theta = theta_interp;
    float magnitude = p.attn_factor;
    if (p.ext_factor != 0.0f) {
        const float y = (static_cast<float>(pair) - corr.low) / std::max(0.001f, corr.high - corr.low);
        const float ramp = 1.0f - std::min(1.0f, std::max(0.0f, y));
        const float mix = ramp * p.ext_factor;
        theta = theta_interp * (1.0f - mix) + theta_extrap * mix;
        magnitude *= 1.0f + 0.1f * std::log(1.0f / p.freq_scale);
    }
    return {std::cos(theta) * magnitude, std::sin(theta) * magnitude};
}

void rotate(float& a, float& b, CosSin r) {
    const float x0 = a;
    const float x1 = b;
    a = std::fma(x0, r.cos, -(x1 * r.sin));
    b = std::fma(x0, r.sin, x1 * r.cos);
}

}  // namespace

// x: [T, n_heads * head_dim]; row t is the token at first_position + t.
void rope(Rows x, std::size_t first_position, const RopeParams& p) {
    assert(x.cols == p.n_heads * p.head_dim && p.n_rot % 2 == 0 && p.n_rot <= p.head_dim);
    assert(p.freq_factors.empty() || p.freq_factors.size() >= p.n_rot / 2);
    const std::size_t n_pairs = p.n_rot / 2;
    const float theta_scale = std::pow(p.freq_base, -2.0f / static_cast<float>(p.n_rot));
    const CorrectionDims corr = p.ext_factor != 0.0f ? yarn_corr_dims(p) : CorrectionDims{};

    for (std::size_t t = 0; t < x.rows; ++t) {
        float* row = x.row(t);
        float theta = static_cast<float>(first_position + t);
        for (std::size_t i = 0; i < n_pairs; ++i) {
            const float factor = p.freq_factors.empty() ? 1.0f : p.freq_factors[i];
            const CosSin r = pair_angle(theta / factor, i, p, corr);
            for (std::size_t h = 0; h < p.n_heads; ++h) {
                float* head = row + h * p.head_dim;
                if (p.pairing == RopePairing::Adjacent) {
                    rotate(head[2 * i], head[2 * i + 1], r);
                } else {
                    rotate(head[i], head[i + n_pairs], r);
                }
            }
            theta *= theta_scale;
        }
    }
}

}  // namespace ember::kernels::reference
