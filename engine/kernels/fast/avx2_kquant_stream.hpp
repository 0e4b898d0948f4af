// The streaming walk of the AVX2 K-quant products, shared by avx2_quants.cpp (Q4_K decode)
// and avx2_quants_low.cpp (Q2_K, Q3_K, Q5_K): a weight super-block is unpacked one
// 32-element chunk at a time (its quants and its sub-block scales, two or three registers)
// and each chunk is used at once for the tile's T tokens, so a tile's state is its T
// accumulators and T int32 chunk sums, which fit AVX2's sixteen registers. The int32 chunk
// sums are exact, so the order they are added in changes no bit. Internal linkage only
// (see variant_kernels.hpp). A format F gives:
//   F::Pre, F::prepare(block, pre)          what a super-block's chunks share (its scales)
//   F::begin(pre, block, act, acc)           the min terms, before the chunks
//   F::Chunk, F::chunk<c>(pre, block)        chunk c's quants and scales, c = 0..7
//   F::dot(chunk, act_qs)                    its int32 lane sums with 32 activations
//   F::end(block, act, sumi, acc), F::finish(acc)
#pragma once

#include "kernels/fast/intrinsics.hpp"

#include <cstddef>
#include <cstdint>

#include "kernels/fast/avx2_common.hpp"
#include "kernels/fast/kernel_types.hpp"
#include "kernels/fast/prefetch.hpp"

namespace ember::kernels::fast::avx2 {
namespace {

inline float half(std::uint16_t h) { return _cvtsh_ss(h); }

// One output's accumulators: the lanes, and the min or offset terms of the formats that have them.
struct Acc {
    __m256 lanes;
    __m128 min_lanes;  // Q4_K's min terms, four lanes
    float mins;        // Q5_K / Q4_1 / Q5_1: the min or offset terms, added after the fold
};

inline __m256i load256(const void* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Both 128-bit halves of `v` hold its low (kHigh = false) or high half.
template <bool kHigh>
__m256i broadcast_half(__m256i v) {
    return _mm256_permute4x64_epi64(v, kHigh ? 0xEE : 0x44);
}

// int16 lanes 0-7 the scale of sub-block 2i of a register holding eight int16 scales in
// each half, lanes 8-15 that of sub-block 2i + 1 (llama.cpp's get_scale_shuffle_q3k).
template <int i>
__m256i pair_scales(__m256i scales) {
    const __m256i mask = _mm256_set_epi8(4 * i + 3, 4 * i + 2, 4 * i + 3, 4 * i + 2, 4 * i + 3, 4 * i + 2, 4 * i + 3,
                                         4 * i + 2, 4 * i + 3, 4 * i + 2, 4 * i + 3, 4 * i + 2, 4 * i + 3, 4 * i + 2,
                                         4 * i + 3, 4 * i + 2, 4 * i + 1, 4 * i, 4 * i + 1, 4 * i, 4 * i + 1, 4 * i,
                                         4 * i + 1, 4 * i, 4 * i + 1, 4 * i, 4 * i + 1, 4 * i, 4 * i + 1, 4 * i, 4 * i + 1,
                                         4 * i);
    return _mm256_shuffle_epi8(scales, mask);
}

// Every int16 lane the scale of sub-block i (llama.cpp's get_scale_shuffle_k4).
template <int i>
__m256i one_scale(__m256i scales) {
    return _mm256_shuffle_epi8(scales, _mm256_set1_epi16(static_cast<short>((2 * i + 1) << 8 | 2 * i)));
}

// The eight 6-bit scales (int16 lanes 0-7) and mins (8-15) of a Q4_K / Q5_K super-block,
// as llama.cpp's kmask shuffle forms them (get_scale_min_k4 for all eight sub-blocks).
inline __m256i k4_scales_mins(const std::uint8_t* scales) {
    std::uint32_t u[4];
    __builtin_memcpy(u, scales, 12);
    const std::uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    u[3] = ((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4);
    const std::uint32_t mins_low = u[1] & k1;
    u[1] = (u[2] & k2) | (((u[0] >> 6) & k3) << 4);
    u[2] = mins_low;
    u[0] &= k1;
    return _mm256_cvtepu8_epi16(_mm_set_epi32(static_cast<int>(u[3]), static_cast<int>(u[2]), static_cast<int>(u[1]),
                                              static_cast<int>(u[0])));
}

// Rows per decode tile (measured on Zen 3: see docs/fast-path.md).
constexpr int kStreamDecodeRows = 2;

// Chunk c of the tile's R weight super-blocks against its T tokens, then chunk c + 1.
template <typename F, int R, int T, int c>
void chunks_from(const typename F::Pre* p, const typename F::Block* const* w, const typename F::Act* const* a,
                 std::size_t b, __m256i (*sumi)[T]) {
    if constexpr (c < 8) {
        for (int r = 0; r < R; ++r) {
            const typename F::Chunk k = F::template chunk<c>(p[r], w[r][b]);
            for (int t = 0; t < T; ++t) sumi[r][t] = _mm256_add_epi32(sumi[r][t], F::dot(k, a[t][b].qs + 32 * c));
        }
        chunks_from<F, R, T, c + 1>(p, w, a, b, sumi);
    }
}

// R weight rows x T tokens, super-block by super-block; decode (T = 1) pulls the next
// tile's rows into L1 meanwhile (prefetch.hpp).
template <typename F>
struct StreamTile {
    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        const std::size_t n_blocks = task.cols / F::kBlock;
        const typename F::Block* w[R];
        const typename F::Act* a[T];
        for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const typename F::Block*>(task.weights + (r0 + r) * task.weight_row_bytes);
        for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const typename F::Act*>(task.acts + (t0 + t) * task.act_row_bytes);
        Acc acc[R][T];
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) acc[r][t] = {_mm256_setzero_ps(), _mm_setzero_ps(), 0.0f};
        const NextRowsPrefetch prefetch(task, r0 + R, T == 1 ? R : 0, n_blocks);
        for (std::size_t b = 0; b < n_blocks; ++b) {
            prefetch(b);
            typename F::Pre p[R];
            __m256i sumi[R][T];
            for (int r = 0; r < R; ++r) {
                F::prepare(w[r][b], p[r]);
                for (int t = 0; t < T; ++t) {
                    F::begin(p[r], w[r][b], a[t][b], acc[r][t]);
                    sumi[r][t] = _mm256_setzero_si256();
                }
            }
            chunks_from<F, R, T, 0>(p, w, a, b, sumi);
            for (int r = 0; r < R; ++r)
                for (int t = 0; t < T; ++t) F::end(w[r][b], a[t][b], sumi[r][t], acc[r][t]);
        }
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) task.out[(t0 + t) * task.out_stride + r0 + r] = F::finish(acc[r][t]);
    }
};

template <typename F>
void stream_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.n_tokens == 1) walk_rows<StreamTile<F>, kStreamDecodeRows, 1>(task, row_begin, row_end);
    else walk_rows<StreamTile<F>, 1, 4>(task, row_begin, row_end);
}

}  // namespace
}  // namespace ember::kernels::fast::avx2
