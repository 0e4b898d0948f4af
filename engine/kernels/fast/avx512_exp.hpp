// Internal: llama.cpp's vector exp (vector_exp.hpp) sixteen lanes at a time, for the
// AVX-512 translation units; internal linkage only (see variant_kernels.hpp).
#pragma once

#include "kernels/fast/intrinsics.hpp"
#include "kernels/fast/vector_exp.hpp"

namespace ember::kernels::fast {
namespace {

inline __m512 vector_exp16(__m512 x) {
    namespace c = exp_constants;
    const __m512 shift = _mm512_set1_ps(c::kShift);
    const __m512 z = _mm512_fmadd_ps(x, _mm512_set1_ps(c::kLog2e), shift);
    const __m512 n = _mm512_sub_ps(z, shift);
    const __m512 b = _mm512_fnmadd_ps(n, _mm512_set1_ps(c::kLn2Lo), _mm512_fnmadd_ps(n, _mm512_set1_ps(c::kLn2Hi), x));
    const __m512 u = _mm512_mul_ps(b, b);
    const __m512 j = _mm512_fmadd_ps(
        _mm512_fmadd_ps(_mm512_fmadd_ps(_mm512_set1_ps(c::kC5), b, _mm512_set1_ps(c::kC4)), u,
                        _mm512_fmadd_ps(_mm512_set1_ps(c::kC3), b, _mm512_set1_ps(c::kC2))),
        u, _mm512_fmadd_ps(_mm512_set1_ps(c::kC1), b, _mm512_set1_ps(1.0f)));
    const __m512 result = _mm512_scalef_ps(j, n);
    const __mmask16 out_of_range = _mm512_cmp_ps_mask(_mm512_abs_ps(n), _mm512_set1_ps(c::kOverflowN), _CMP_GT_OQ);
    if (out_of_range == 0) return result;
    const __mmask16 non_positive = _mm512_cmp_ps_mask(n, _mm512_setzero_ps(), _CMP_LE_OQ);
    const __m512 limit = _mm512_mask_blend_ps(non_positive, _mm512_set1_ps(__builtin_inff()), _mm512_setzero_ps());
    return _mm512_mask_blend_ps(out_of_range, result, limit);
}

}  // namespace
}  // namespace ember::kernels::fast
