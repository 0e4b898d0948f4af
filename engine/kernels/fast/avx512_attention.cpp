// The AVX-512 variant's attention pieces (AVX-512 flags; see variant_kernels.hpp).
// Softmax: sixteen lanes, llama.cpp's vector exp, each group's sum folded in F32 and
// added to a double (ggml_vec_soft_max_f32). Weighted sum: llama.cpp's order over
// positions (kernel_types.hpp WeightedSumTask), sixteen value elements at a time.
#include "kernels/fast/avx512_common.hpp"
#include "kernels/fast/avx512_exp.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx512 {

namespace {

__mmask16 tail_mask(std::size_t count) {
    return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

struct F32Values {
    static __m512 load(const std::byte* row, std::size_t d, __mmask16 m) {
        return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + d);
    }
};
struct F16Values {
    static __m512 load(const std::byte* row, std::size_t d, __mmask16 m) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const std::uint16_t*>(row) + d));
    }
};

float probability(const WeightedSumTask& t, const float* p, std::size_t j) {
    return t.round_p_to_f16 ? _cvtsh_ss(static_cast<unsigned short>(_cvtss_sh(p[j], 0))) : p[j];
}

// Sixteen value elements from d: the chain of products of the positions in class `cls`
// modulo `modulus` (absolute positions), in order.
template <typename Values>
__m512 position_class_sum(const WeightedSumTask& t, const float* p, std::size_t d, __mmask16 m, std::size_t cls,
                          std::size_t modulus) {
    __m512 acc = _mm512_setzero_ps();
    for (std::size_t j = (cls + modulus - t.first_position % modulus) % modulus; j < t.n; j += modulus) {
        acc = _mm512_fmadd_ps(_mm512_set1_ps(probability(t, p, j)), Values::load(t.v + j * t.v_row_bytes, d, m), acc);
    }
    return acc;
}

// llama.cpp's product of the transposed values with the probabilities (kernel_types.hpp
// WeightedSumTask), sixteen value elements at a time: lane l of its accumulators is
// one 512-bit register here, reduced across registers by the same tree.
template <typename Values>
void weighted_sum(const WeightedSumTask& t) {
    for (std::size_t h = 0; h < t.n_heads; ++h) {
        const float* p = t.p + h * t.p_stride;
        for (std::size_t d = 0; d < t.head_dim; d += 16) {
            const __mmask16 m = tail_mask(t.head_dim - d);
            __m512 lanes[16];
            for (std::size_t l = 0; l < 16; ++l) {
                if (t.order == SumOrder::tiled) {
                    lanes[l] = position_class_sum<Values>(t, p, d, m, l, 16);
                } else {  // (acc0 + acc2) + (acc1 + acc3)
                    lanes[l] = _mm512_add_ps(_mm512_add_ps(position_class_sum<Values>(t, p, d, m, l, 64),
                                                           position_class_sum<Values>(t, p, d, m, l + 32, 64)),
                                             _mm512_add_ps(position_class_sum<Values>(t, p, d, m, l + 16, 64),
                                                           position_class_sum<Values>(t, p, d, m, l + 48, 64)));
                }
            }
            __m512 half[8], quarter[4];
            for (int j = 0; j < 8; ++j) half[j] = _mm512_add_ps(lanes[j + 8], lanes[j]);
            for (int j = 0; j < 4; ++j) quarter[j] = _mm512_add_ps(half[j + 4], half[j]);
            const __m512 sum = _mm512_add_ps(_mm512_add_ps(quarter[0], quarter[2]), _mm512_add_ps(quarter[1], quarter[3]));
            _mm512_mask_storeu_ps(t.out + h * t.out_stride + d, m, sum);
        }
    }
}

}  // namespace

void softmax_row(float* s, std::size_t n, float scale) {
    if (n == 0) return;
    const __m512 factor = _mm512_set1_ps(scale);
    __m512 max = _mm512_set1_ps(-__builtin_inff());
    for (std::size_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + i), factor);
        _mm512_mask_storeu_ps(s + i, m, v);
        max = _mm512_mask_max_ps(max, m, max, v);
    }
    const __m512 row_max = _mm512_set1_ps(_mm512_reduce_max_ps(max));
    double sum = 0.0;
    for (std::size_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 e = _mm512_maskz_mov_ps(m, vector_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + i), row_max)));
        _mm512_mask_storeu_ps(s + i, m, e);
        sum += avx512_fold16(e);
    }
    const __m512 inverse = _mm512_set1_ps(static_cast<float>(1.0 / sum));
    for (std::size_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(s + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + i), inverse));
    }
}

void weighted_sum_f32(const WeightedSumTask& task) { weighted_sum<F32Values>(task); }
void weighted_sum_f16(const WeightedSumTask& task) { weighted_sum<F16Values>(task); }

}  // namespace ember::kernels::fast::avx512
