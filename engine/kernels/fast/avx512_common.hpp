// Internal helpers shared by the AVX-512 translation units (all compiled with at least
// -mavx512f -mavx512bw -mavx512vl -mavx512dq). Internal linkage only: see
// variant_kernels.hpp.
#pragma once

#include "kernels/fast/intrinsics.hpp"

#include <cstddef>

#include "kernels/fast/kernel_types.hpp"
#include "kernels/fast/tile_walk.hpp"

namespace ember::kernels::fast {
namespace {

// ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)) over eight lanes
inline float avx512_fold8(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 pairs = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

// Sixteen lanes: lane j + lane j+8 first, then the eight-lane fold.
inline float avx512_fold16(__m512 v) {
    return avx512_fold8(_mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1)));
}

}  // namespace
}  // namespace ember::kernels::fast
