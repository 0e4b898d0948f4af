// Internal: llama.cpp's AVX-512 vector exp (vector_exp.hpp) eight lanes at a time, for
// the AVX2 translation units; internal linkage only (see variant_kernels.hpp). AVX2 has
// no vscalefps: j * 2^n is formed as (j * 2^n1) * 2^n2 with n1 = n / 2, where the first
// product is exact, so the one rounding matches vscalefps bit for bit.
#pragma once

#include "kernels/fast/intrinsics.hpp"
#include "kernels/fast/vector_exp.hpp"

namespace ember::kernels::fast {
namespace {

inline __m256 power_of_two(__m256i exponent) {  // 2^e for -126 <= e <= 127
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(exponent, _mm256_set1_epi32(127)), 23));
}

inline __m256 vector_exp8(__m256 x) {
    namespace c = exp_constants;
    const __m256 shift = _mm256_set1_ps(c::kShift);
    const __m256 z = _mm256_fmadd_ps(x, _mm256_set1_ps(c::kLog2e), shift);
    const __m256 n = _mm256_sub_ps(z, shift);
    const __m256 b = _mm256_fnmadd_ps(n, _mm256_set1_ps(c::kLn2Lo), _mm256_fnmadd_ps(n, _mm256_set1_ps(c::kLn2Hi), x));
    const __m256 u = _mm256_mul_ps(b, b);
    const __m256 j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(_mm256_fmadd_ps(_mm256_set1_ps(c::kC5), b, _mm256_set1_ps(c::kC4)), u,
                        _mm256_fmadd_ps(_mm256_set1_ps(c::kC3), b, _mm256_set1_ps(c::kC2))),
        u, _mm256_fmadd_ps(_mm256_set1_ps(c::kC1), b, _mm256_set1_ps(1.0f)));
    const __m256 magnitude = _mm256_andnot_ps(_mm256_set1_ps(-0.0f), n);
    const __m256 out_of_range = _mm256_cmp_ps(magnitude, _mm256_set1_ps(c::kOverflowN), _CMP_GT_OQ);
    // in range, |n| <= 192: n1 = trunc(n / 2) and n2 = n - n1 lie within +-96
    const __m256 clamped = _mm256_min_ps(_mm256_max_ps(n, _mm256_set1_ps(-c::kOverflowN)), _mm256_set1_ps(c::kOverflowN));
    const __m256i whole = _mm256_cvttps_epi32(clamped);
    const __m256i half = _mm256_srai_epi32(_mm256_add_epi32(whole, _mm256_srli_epi32(whole, 31)), 1);  // whole / 2
    const __m256 result = _mm256_mul_ps(_mm256_mul_ps(j, power_of_two(half)), power_of_two(_mm256_sub_epi32(whole, half)));
    if (_mm256_movemask_ps(out_of_range) == 0) return result;
    const __m256 non_positive = _mm256_cmp_ps(n, _mm256_setzero_ps(), _CMP_LE_OQ);
    const __m256 limit = _mm256_blendv_ps(_mm256_set1_ps(__builtin_inff()), _mm256_setzero_ps(), non_positive);
    return _mm256_blendv_ps(result, limit, out_of_range);
}

}  // namespace
}  // namespace ember::kernels::fast
