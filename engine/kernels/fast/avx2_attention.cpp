// The AVX2 variant's attention pieces (AVX2 flags; see variant_kernels.hpp), in the
// AVX-512 variant's (and llama.cpp's) order, the same bits: softmax with llama.cpp's
// vector exp and per-16 sums in double; the weighted sum over positions as
// kernel_types.hpp WeightedSumTask says, eight value elements at a time.
#include "kernels/fast/avx2_common.hpp"
#include "kernels/fast/avx2_exp.hpp"
#include "kernels/fast/half_precision.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx2 {

namespace {

// Lanes [0, count) set, for maskload / maskstore.
__m256i lane_mask(std::size_t count) {
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count < 8 ? count : 8)), index);
}

struct F32Values {
    static __m256 load(const std::byte* row, std::size_t d, std::size_t count) {
        const float* p = reinterpret_cast<const float*>(row) + d;
        return count >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lane_mask(count));
    }
};
struct F16Values {
    static __m256 load(const std::byte* row, std::size_t d, std::size_t count) {
        const std::uint16_t* p = reinterpret_cast<const std::uint16_t*>(row) + d;
        if (count >= 8) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        std::uint16_t padded[8] = {};
        for (std::size_t i = 0; i < count; ++i) padded[i] = p[i];
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(padded)));
    }
};

float probability(const WeightedSumTask& t, const float* p, std::size_t j) {
    return t.round_p_to_f16 ? _cvtsh_ss(static_cast<unsigned short>(_cvtss_sh(p[j], 0))) : p[j];
}

// Eight value elements from d (count of them real): the chain of products of the
// positions in class `cls` modulo `modulus` (absolute positions), in order.
template <typename Values>
__m256 position_class_sum(const WeightedSumTask& t, const float* p, std::size_t d, std::size_t count, std::size_t cls,
                          std::size_t modulus) {
    __m256 acc = _mm256_setzero_ps();
    for (std::size_t j = (cls + modulus - t.first_position % modulus) % modulus; j < t.n; j += modulus) {
        acc = _mm256_fmadd_ps(_mm256_set1_ps(probability(t, p, j)), Values::load(t.v + j * t.v_row_bytes, d, count), acc);
    }
    return acc;
}

// llama.cpp's product of the transposed values with the probabilities (kernel_types.hpp
// WeightedSumTask), eight value elements at a time, as the AVX-512 variant computes it.
template <typename Values>
void weighted_sum(const WeightedSumTask& t) {
    for (std::size_t h = 0; h < t.n_heads; ++h) {
        const float* p = t.p + h * t.p_stride;
        for (std::size_t d = 0; d < t.head_dim; d += 8) {
            const std::size_t count = t.head_dim - d < 8 ? t.head_dim - d : 8;
            __m256 lanes[16];
            for (std::size_t l = 0; l < 16; ++l) {
                if (t.order == SumOrder::tiled) {
                    lanes[l] = position_class_sum<Values>(t, p, d, count, l, 16);
                } else {  // (acc0 + acc2) + (acc1 + acc3)
                    lanes[l] = _mm256_add_ps(_mm256_add_ps(position_class_sum<Values>(t, p, d, count, l, 64),
                                                           position_class_sum<Values>(t, p, d, count, l + 32, 64)),
                                             _mm256_add_ps(position_class_sum<Values>(t, p, d, count, l + 16, 64),
                                                           position_class_sum<Values>(t, p, d, count, l + 48, 64)));
                }
            }
            __m256 half[8], quarter[4];
            for (int j = 0; j < 8; ++j) half[j] = _mm256_add_ps(lanes[j + 8], lanes[j]);
            for (int j = 0; j < 4; ++j) quarter[j] = _mm256_add_ps(half[j + 4], half[j]);
            const __m256 sum = _mm256_add_ps(_mm256_add_ps(quarter[0], quarter[2]), _mm256_add_ps(quarter[1], quarter[3]));
            float* out = t.out + h * t.out_stride + d;
            if (count == 8) _mm256_storeu_ps(out, sum);
            else _mm256_maskstore_ps(out, lane_mask(count), sum);
        }
    }
}

}  // namespace

void softmax_row(float* s, std::size_t n, float scale) {
    if (n == 0) return;
    float max = -__builtin_inff();
    for (std::size_t i = 0; i < n; ++i) {
        s[i] = s[i] * scale;
        max = s[i] > max ? s[i] : max;
    }
    // groups of 16 as ggml_vec_soft_max_f32's AVX-512 build: vector exp, the group's
    // sum by _mm512_reduce_add_ps's tree (zeros past the end), added to a double
    const __m256 row_max = _mm256_set1_ps(max);
    double sum = 0.0;
    for (std::size_t i = 0; i < n; i += 16) {
        alignas(32) float group[16] = {};
        for (std::size_t l = 0; l < 16 && i + l < n; ++l) group[l] = s[i + l];
        __m256 e[2];
        for (int h = 0; h < 2; ++h) {
            const __m256i valid = lane_mask(i + 8 * h < n ? n - i - 8 * h : 0);
            e[h] = _mm256_and_ps(vector_exp8(_mm256_sub_ps(_mm256_load_ps(group + 8 * h), row_max)), _mm256_castsi256_ps(valid));
            _mm256_store_ps(group + 8 * h, e[h]);
        }
        for (std::size_t l = 0; l < 16 && i + l < n; ++l) s[i + l] = group[l];
        sum += static_cast<double>(avx2_fold8(_mm256_add_ps(e[1], e[0])));
    }
    const auto inverse = static_cast<float>(1.0 / sum);
    for (std::size_t i = 0; i < n; ++i) s[i] = s[i] * inverse;
}

void weighted_sum_f32(const WeightedSumTask& task) { weighted_sum<F32Values>(task); }
void weighted_sum_f16(const WeightedSumTask& task) { weighted_sum<F16Values>(task); }

}  // namespace ember::kernels::fast::avx2
