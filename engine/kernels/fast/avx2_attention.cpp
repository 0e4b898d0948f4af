// The AVX2 variant's attention pieces (AVX2 flags; see variant_kernels.hpp), in the
// AVX-512 variant's (and llama.cpp's) order, the same bits: softmax with llama.cpp's
// vector exp and per-16 sums in double; the weighted sum over positions as
// weighted_sum_lanes.hpp says, eight value elements at a time.
#include "kernels/fast/avx2_common.hpp"
#include "kernels/fast/avx2_exp.hpp"
#include "kernels/float16.hpp"
#include "kernels/fast/variant_kernels.hpp"
#include "kernels/fast/weighted_sum_lanes.hpp"

namespace ember::kernels::fast::avx2 {

namespace {

// Lanes [0, count) set, for maskload / maskstore.
__m256i lane_mask(std::size_t count) {
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count < 8 ? count : 8)), index);
}

// The instructions of weighted_sum_lanes.hpp, eight value elements per register.
struct Avx2Arithmetic {
    using Vector = __m256;
    static constexpr std::size_t kWidth = 8;
    static __m256 zero() { return _mm256_setzero_ps(); }
    static __m256 set1(float x) { return _mm256_set1_ps(x); }
    static __m256 fmadd(__m256 a, __m256 b, __m256 c) { return _mm256_fmadd_ps(a, b, c); }
    static __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
    static void store(float* out, std::size_t count, __m256 v) {
        if (count == 8) _mm256_storeu_ps(out, v);
        else _mm256_maskstore_ps(out, lane_mask(count), v);
    }
    static float round_to_f16(float x) { return _cvtsh_ss(static_cast<unsigned short>(_cvtss_sh(x, 0))); }
};
struct F32Values : Avx2Arithmetic {
    static __m256 load(const std::byte* row, std::size_t d, std::size_t count) {
        const float* p = reinterpret_cast<const float*>(row) + d;
        return count >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lane_mask(count));
    }
};
struct F16Values : Avx2Arithmetic {
    static __m256 load(const std::byte* row, std::size_t d, std::size_t count) {
        const std::uint16_t* p = reinterpret_cast<const std::uint16_t*>(row) + d;
        if (count >= 8) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        std::uint16_t padded[8] = {};
        for (std::size_t i = 0; i < count; ++i) padded[i] = p[i];
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(padded)));
    }
};

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

void weighted_sum_f32(const WeightedSumTask& task) { weighted_sum_in_order<F32Values>(task); }
void weighted_sum_f16(const WeightedSumTask& task) { weighted_sum_in_order<F16Values>(task); }

}  // namespace ember::kernels::fast::avx2
