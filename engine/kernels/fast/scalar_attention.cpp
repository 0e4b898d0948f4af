// The portable variant's attention pieces (baseline flags): softmax over one score row
// and the weighted sum of value rows, plain loops.
#include "kernels/fast/half_precision.hpp"
#include "kernels/fast/variant_kernels.hpp"
#include "kernels/fast/vector_exp.hpp"

namespace ember::kernels::fast::scalar {

void softmax_row(float* s, std::size_t n, float scale) {
    if (n == 0) return;
    float max = -__builtin_inff();
    for (std::size_t i = 0; i < n; ++i) {
        s[i] = s[i] * scale;
        if (s[i] > max) max = s[i];
    }
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
        s[i] = vector_exp_scalar(s[i] - max);
        sum += s[i];
    }
    const auto inverse = static_cast<float>(1.0 / sum);
    for (std::size_t i = 0; i < n; ++i) s[i] = s[i] * inverse;
}

namespace {

template <typename Element, typename Load>
void weighted_sum(const WeightedSumTask& t, Load load) {
    for (std::size_t h = 0; h < t.n_heads; ++h) {
        float* out = t.out + h * t.out_stride;
        for (std::size_t d = 0; d < t.head_dim; ++d) out[d] = 0.0f;
        const float* p = t.p + h * t.p_stride;
        for (std::size_t j = 0; j < t.n; ++j) {
            const auto* v = reinterpret_cast<const Element*>(t.v + j * t.v_row_bytes);
            for (std::size_t d = 0; d < t.head_dim; ++d) out[d] = out[d] + p[j] * load(v[d]);
        }
    }
}

float identity(float x) { return x; }

}  // namespace

void weighted_sum_f32(const WeightedSumTask& task) { weighted_sum<float>(task, identity); }
void weighted_sum_f16(const WeightedSumTask& task) { weighted_sum<std::uint16_t>(task, fp16_to_fp32); }

}  // namespace ember::kernels::fast::scalar
