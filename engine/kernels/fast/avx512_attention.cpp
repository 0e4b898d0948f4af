// The AVX-512 variant's attention pieces (AVX-512 flags; see variant_kernels.hpp).
// Softmax: sixteen lanes, llama.cpp's vector exp, each group's sum folded in F32 and
// added to a double (ggml_vec_soft_max_f32). Weighted sum: llama.cpp's order over
// positions (weighted_sum_lanes.hpp), sixteen value elements at a time.
#include "kernels/fast/avx512_common.hpp"
#include "kernels/fast/avx512_exp.hpp"
#include "kernels/fast/variant_kernels.hpp"
#include "kernels/fast/weighted_sum_lanes.hpp"

namespace ember::kernels::fast::avx512 {

namespace {

__mmask16 tail_mask(std::size_t count) {
    return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

// The instructions of weighted_sum_lanes.hpp, sixteen value elements per register.
struct Avx512Arithmetic {
    using Vector = __m512;
    static constexpr std::size_t kWidth = 16;
    static __m512 zero() { return _mm512_setzero_ps(); }
    static __m512 set1(float x) { return _mm512_set1_ps(x); }
    static __m512 fmadd(__m512 a, __m512 b, __m512 c) { return _mm512_fmadd_ps(a, b, c); }
    static __m512 add(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
    static void store(float* out, std::size_t count, __m512 v) { _mm512_mask_storeu_ps(out, tail_mask(count), v); }
    static float round_to_f16(float x) { return _cvtsh_ss(static_cast<unsigned short>(_cvtss_sh(x, 0))); }
};
struct F32Values : Avx512Arithmetic {
    static __m512 load(const std::byte* row, std::size_t d, std::size_t count) {
        return _mm512_maskz_loadu_ps(tail_mask(count), reinterpret_cast<const float*>(row) + d);
    }
};
struct F16Values : Avx512Arithmetic {
    static __m512 load(const std::byte* row, std::size_t d, std::size_t count) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask(count), reinterpret_cast<const std::uint16_t*>(row) + d));
    }
};

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

void weighted_sum_f32(const WeightedSumTask& task) { weighted_sum_in_order<F32Values>(task); }
void weighted_sum_f16(const WeightedSumTask& task) { weighted_sum_in_order<F16Values>(task); }

}  // namespace ember::kernels::fast::avx512
