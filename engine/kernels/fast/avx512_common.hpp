// Internal helpers shared by the AVX-512 translation units (all compiled with at least
// -mavx512f -mavx512bw -mavx512vl -mavx512dq). Internal linkage only: see
// variant_kernels.hpp.
#pragma once

#include "kernels/fast/intrinsics.hpp"

#include <cstddef>

#include "kernels/fast/kernel_types.hpp"

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

// Walks rows in groups of R and tokens in groups of T (remainders with smaller tiles).
// Tile::run<R, T>(task, first_row, first_token) computes one tile.
// The last `count` < T tokens of rows r0.. as one tile of exactly `count` tokens.
template <typename Tile, int R, int T>
void avx512_token_remainder(const MatmulTask& task, std::size_t r0, std::size_t t0, std::size_t count) {
    if constexpr (T > 0) {
        if (count == T) Tile::template run<R, T>(task, r0, t0);
        else avx512_token_remainder<Tile, R, T - 1>(task, r0, t0, count);
    }
}

template <typename Tile, int R, int T>
void avx512_tokens_of_rows(const MatmulTask& task, std::size_t r0) {
    std::size_t t = 0;
    for (; t + T <= task.n_tokens; t += T) Tile::template run<R, T>(task, r0, t);
    if (t < task.n_tokens) avx512_token_remainder<Tile, R, T - 1>(task, r0, t, task.n_tokens - t);
}

template <typename Tile, int R, int T>
void avx512_walk_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    std::size_t r = row_begin;
    for (; r + R <= row_end; r += R) avx512_tokens_of_rows<Tile, R, T>(task, r);
    for (; r < row_end; ++r) avx512_tokens_of_rows<Tile, 1, T>(task, r);
}

}  // namespace
}  // namespace ember::kernels::fast
