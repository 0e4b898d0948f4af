// The portable variant's attention pieces (baseline flags): softmax over one score row
// and the weighted sum of value rows, plain loops in the AVX-512 variant's (and
// llama.cpp's) order: the same bits.
#include "kernels/fast/float_sums.hpp"
#include "kernels/float16.hpp"
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
    // groups of 16, each summed as _mm512_reduce_add_ps would (zeros past the end) and
    // added to a double
    double sum = 0.0;
    for (std::size_t i = 0; i < n; i += 16) {
        float lanes[16] = {};
        for (std::size_t l = 0; l < 16 && i + l < n; ++l) lanes[l] = s[i + l] = vector_exp_scalar(s[i + l] - max);
        sum += static_cast<double>(reduce16(lanes));
    }
    const auto inverse = static_cast<float>(1.0 / sum);
    for (std::size_t i = 0; i < n; ++i) s[i] = s[i] * inverse;
}

namespace {

// The chain of products of positions in class `cls` modulo `modulus` (absolute
// positions), in order, for value element d.
template <typename Element, typename Load>
float position_class_sum(const WeightedSumTask& t, const float* p, std::size_t d, std::size_t cls, std::size_t modulus,
                         Load load) {
    float acc = 0.0f;
    for (std::size_t j = (cls + modulus - t.first_position % modulus) % modulus; j < t.n; j += modulus) {
        const float pj = t.round_p_to_f16 ? fp16_to_fp32(fp32_to_fp16(p[j])) : p[j];
        acc = __builtin_fmaf(pj, load(reinterpret_cast<const Element*>(t.v + j * t.v_row_bytes)[d]), acc);
    }
    return acc;
}

template <typename Element, typename Load>
void weighted_sum(const WeightedSumTask& t, Load load) {
    for (std::size_t h = 0; h < t.n_heads; ++h) {
        const float* p = t.p + h * t.p_stride;
        for (std::size_t d = 0; d < t.head_dim; ++d) {
            if (t.order == SumOrder::tiled) {
                float lanes[16];
                for (std::size_t l = 0; l < 16; ++l) lanes[l] = position_class_sum<Element>(t, p, d, l, 16, load);
                t.out[h * t.out_stride + d] = reduce16(lanes);
            } else {
                float acc[4][16];
                for (std::size_t c = 0; c < 64; ++c) acc[c / 16][c % 16] = position_class_sum<Element>(t, p, d, c, 64, load);
                t.out[h * t.out_stride + d] = combine_four(acc);
            }
        }
    }
}

float identity(float x) { return x; }

}  // namespace

void weighted_sum_f32(const WeightedSumTask& task) { weighted_sum<float>(task, identity); }
void weighted_sum_f16(const WeightedSumTask& task) { weighted_sum<std::uint16_t>(task, fp16_to_fp32); }

}  // namespace ember::kernels::fast::scalar
