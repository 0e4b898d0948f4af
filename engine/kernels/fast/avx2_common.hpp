// Internal helpers shared by the AVX2 translation units (compiled with -mavx2 -mfma
// -mf16c). Internal linkage only: see variant_kernels.hpp.
#pragma once

#include "kernels/fast/intrinsics.hpp"

#include <cstddef>

#include "kernels/fast/kernel_types.hpp"
#include "kernels/fast/tile_walk.hpp"

namespace ember::kernels::fast {
namespace {

// ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7))
inline float avx2_fold8(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // l0+l4, l1+l5, ...
    const __m128 pairs = _mm_add_ps(s, _mm_movehl_ps(s, s));                              // (s0+s2), (s1+s3)
    return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

}  // namespace
}  // namespace ember::kernels::fast
