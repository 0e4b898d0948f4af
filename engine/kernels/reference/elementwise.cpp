// Row-wise and element-wise reference kernels: RMS norm (model-math §3.1), the gated
// activations (§3.5), residual adds, scaling and Gemma's logit soft-capping.
#include <array>
#include <cassert>
#include <cmath>
#include <vector>

#include "kernels/float16.hpp"
#include "kernels/reference/kernels.hpp"

namespace ember::kernels::reference {
namespace {

void check_same_shape(ConstRows a, ConstRows b) {
    assert(a.rows == b.rows && a.cols == b.cols);
    (void)a;
    (void)b;
}

// out[r][c] = f(a[r][c], b[r][c])
template <class F>
void binary(ConstRows a, ConstRows b, Rows out, F&& f) {
    check_same_shape(a, b);
    check_same_shape(a, out);
    for (std::size_t r = 0; r < out.rows; ++r) {
        const float* ra = a.row(r);
        const float* rb = b.row(r);
        float* ro = out.row(r);
        for (std::size_t c = 0; c < out.cols; ++c) ro[c] = f(ra[c], rb[c]);
    }
}

template <class F>
void unary(ConstRows x, Rows out, F&& f) {
    check_same_shape(x, out);
    for (std::size_t r = 0; r < out.rows; ++r) {
        const float* rx = x.row(r);
        float* ro = out.row(r);
        for (std::size_t c = 0; c < out.cols; ++c) ro[c] = f(rx[c]);
    }
}

// llama.cpp evaluates GELU through a table of F16 results indexed by the F16 bits of
// the input. The GCC build it was compiled with contracts 1 + a*x*x to an FMA.
struct GeluTable {
    std::vector<float> values;  // 65536 entries, each an F16 value widened to F32

    GeluTable() : values(65536) {
        constexpr float sqrt_2_over_pi = 0.79788456080286535587989211986876f;
        constexpr float gelu_coef_a = 0.044715f;
        for (std::uint32_t h = 0; h < 65536; ++h) {
            const float x = fp16_to_fp32(static_cast<std::uint16_t>(h));
            const float inner = std::fma(gelu_coef_a * x, x, 1.0f);
            const float y = 0.5f * x * (1.0f + std::tanh(sqrt_2_over_pi * x * inner));
            values[h] = fp16_to_fp32(fp32_to_fp16(y));
        }
    }
};

const GeluTable& gelu_table() {
    static const GeluTable table;  // immutable once built
    return table;
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

}  // namespace

const float* gelu_f16_table_values() { return gelu_table().values.data(); }

float gelu_f16_table(float x) {
    if (x <= -10.0f) return 0.0f;
    if (x >= 10.0f) return x;
    return gelu_table().values[fp32_to_fp16(x)];
}

// y = x / sqrt(mean(x^2) + eps) * weight, per row. The sum of squares is accumulated in
// double from float products, the mean cast back to float, as llama.cpp does.
void rms_norm(ConstRows x, std::span<const float> weight, float eps, Rows y) {
    check_same_shape(x, y);
    assert(weight.empty() || weight.size() == x.cols);
    for (std::size_t r = 0; r < x.rows; ++r) {
        const float* in = x.row(r);
        float* out = y.row(r);
        double sum = 0.0;
        for (std::size_t c = 0; c < x.cols; ++c) sum += static_cast<double>(in[c] * in[c]);
        const auto mean = static_cast<float>(sum / static_cast<double>(x.cols));
        const float scale = 1.0f / std::sqrt(mean + eps);
        for (std::size_t c = 0; c < x.cols; ++c) out[c] = in[c] * scale;
        if (!weight.empty()) {
            for (std::size_t c = 0; c < x.cols; ++c) out[c] = out[c] * weight[c];
        }
    }
}

void swiglu(ConstRows gate, ConstRows up, Rows out) {
    binary(gate, up, out, [](float g, float u) { return silu(g) * u; });
}

// ggml_vec_geglu_f32: exactly 0 (not 0 * up) below -10.
void geglu(ConstRows gate, ConstRows up, Rows out) {
    binary(gate, up, out, [](float g, float u) { return g <= -10.0f ? 0.0f : gelu_f16_table(g) * u; });
}

void gelu(ConstRows x, Rows out) { unary(x, out, gelu_f16_table); }

void add(ConstRows a, ConstRows b, Rows out) {
    binary(a, b, out, [](float p, float q) { return p + q; });
}

void mul(ConstRows a, ConstRows b, Rows out) {
    binary(a, b, out, [](float p, float q) { return p * q; });
}

void scale(ConstRows x, float factor, Rows out) {
    unary(x, out, [factor](float v) { return v * factor; });
}

// Three operations as llama.cpp builds them: multiply by the float reciprocal, tanh,
// multiply by the cap.
void softcap(ConstRows x, float cap, Rows out) {
    const float inverse = 1.0f / cap;
    unary(x, out, [cap, inverse](float v) { return std::tanh(v * inverse) * cap; });
}

void copy(ConstRows x, Rows out) {
    unary(x, out, [](float v) { return v; });
}

}  // namespace ember::kernels::reference
