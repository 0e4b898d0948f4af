// The tiles of the AVX2 quant products, shared by avx2_quants.cpp and avx2_quants_low.cpp
// (internal linkage only, see variant_kernels.hpp). Each output's operations do not depend
// on the tile; the tiles differ in what a weight block is unpacked into.
//
// QuantTile: R rows x T tokens, each weight block unpacked whole once per tile (a legacy
// block is one register). A format F gives F::W, F::load(block, w),
// F::step(w, block, act, acc), F::finish(acc).
//
// StreamTile: R rows x T tokens, a K-quant super-block unpacked one 32-element chunk at a
// time (its quants and its sub-block scales, two or three registers), each chunk used at
// once for the tile's T tokens, so a tile's state is its accumulators and int32 chunk
// sums, which fit AVX2's sixteen registers. The int32 chunk sums are exact, so the order
// they are added in changes no bit. A format F gives:
//   F::Pre, F::prepare(block, pre)          what a super-block's chunks share (its scales)
//   F::begin(pre, block, act, acc)           the min terms, before the chunks
//   F::Chunk, F::chunk<c>(pre, block)        chunk c's quants and scales, c = 0..7
//   F::dot(chunk, act_qs)                    its int32 lane sums with 32 activations
//   F::end(block, act, sumi, acc), F::finish(acc)
// Decode (T = 1) tiles pull the next tile's rows into L1 meanwhile (prefetch.hpp).
#pragma once

#include "kernels/fast/intrinsics.hpp"

#include <cstddef>
#include <cstdint>

#include "kernels/fast/avx2_common.hpp"
#include "kernels/fast/kernel_types.hpp"
#include "kernels/fast/prefetch.hpp"
#include "kernels/quant_blocks.hpp"

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

// The eight 6-bit scales (int16 lanes 0-7) and mins (8-15) of a Q4_K / Q5_K super-block.
inline __m256i k4_scales_mins(const std::uint8_t* scales) {
    std::uint32_t bytes[4];
    k4_scales_mins_bytes(scales, bytes);
    return _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(bytes)));
}

// The min products of Q4_K / Q5_K: int32 lane k = m[2k] B[2k] + m[2k+1] B[2k+1], with
// B the 32-element sums of the activations (from their 16-element bsums).
inline __m128i k4_min_products(__m128i mins, const BlockQ8_K& a) {
    const __m256i bsums = load256(a.bsums);
    return _mm_madd_epi16(mins, _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1)));
}

// What Q4_K's and Q5_K's streams share: their scales and mins, one scale a chunk, the
// chunk's lane sums and the block's FMA. B is the block type; a format adds begin,
// chunk<c> (its quants) and finish.
template <typename B>
struct K4Stream {
    using Block = B;
    using Act = BlockQ8_K;
    static constexpr std::size_t kBlock = 256;
    struct Pre {
        __m256i scales;  // the eight scales as int16, in both halves
        __m128i mins;    // the eight mins as int16
    };
    struct Chunk {
        __m256i q, scale;  // sub-block c (= chunk c): its quants, its scale in every lane
    };
    static void prepare(const Block& b, Pre& p) {
        const __m256i both = k4_scales_mins(b.scales);
        p.scales = broadcast_half<false>(both);
        p.mins = _mm256_extracti128_si256(both, 1);
    }
    static __m256i dot(const Chunk& k, const std::int8_t* a) {
        return _mm256_madd_epi16(k.scale, _mm256_maddubs_epi16(k.q, load256(a)));
    }
    static void end(const Block& b, const Act& a, __m256i sumi, Acc& acc) {
        const float d = a.d * half(b.d);
        acc.lanes = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc.lanes);
    }
};

// The nibbles of sub-block c of a Q4_K / Q5_K super-block: qs[32 (c / 2)..], low or high.
template <int c>
__m256i k4_nibbles(const std::uint8_t* qs) {
    return _mm256_and_si256(_mm256_srli_epi16(load256(qs + 32 * (c / 2)), 4 * (c % 2)), _mm256_set1_epi8(0xF));
}

// The R weight rows and T activation rows of the tile at (r0, t0), and its zeroed accumulators.
template <typename F, int R, int T>
struct TileOperands {
    const typename F::Block* w[R];
    const typename F::Act* a[T];
    Acc acc[R][T];
    TileOperands(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const typename F::Block*>(task.weights + (r0 + r) * task.weight_row_bytes);
        for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const typename F::Act*>(task.acts + (t0 + t) * task.act_row_bytes);
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) acc[r][t] = {_mm256_setzero_ps(), _mm_setzero_ps(), 0.0f};
    }
    // Each output, F::finish of its accumulators, to the task's rows r0.., tokens t0...
    void store(const MatmulTask& task, std::size_t r0, std::size_t t0) const {
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) task.out[(t0 + t) * task.out_stride + r0 + r] = F::finish(acc[r][t]);
    }
};

template <typename F>
struct QuantTile {
    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        const std::size_t n_blocks = task.cols / F::kBlock;
        TileOperands<F, R, T> tile(task, r0, t0);
        const NextRowsPrefetch prefetch(task, r0 + R, T == 1 ? R : 0, n_blocks);
        for (std::size_t b = 0; b < n_blocks; ++b) {
            prefetch(b);
            typename F::W u[R];
            for (int r = 0; r < R; ++r) F::load(tile.w[r][b], u[r]);
            for (int t = 0; t < T; ++t)
                for (int r = 0; r < R; ++r) F::step(u[r], tile.w[r][b], tile.a[t][b], tile.acc[r][t]);
        }
        tile.store(task, r0, t0);
    }
};

template <typename F>
void quant_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.n_tokens == 1) walk_rows<QuantTile<F>, 4, 1>(task, row_begin, row_end);
    else walk_rows<QuantTile<F>, 2, 4>(task, row_begin, row_end);
}

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

// R weight rows x T tokens, super-block by super-block.
template <typename F>
struct StreamTile {
    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        const std::size_t n_blocks = task.cols / F::kBlock;
        TileOperands<F, R, T> tile(task, r0, t0);
        const NextRowsPrefetch prefetch(task, r0 + R, T == 1 ? R : 0, n_blocks);
        for (std::size_t b = 0; b < n_blocks; ++b) {
            prefetch(b);
            typename F::Pre p[R];
            __m256i sumi[R][T];
            for (int r = 0; r < R; ++r) {
                F::prepare(tile.w[r][b], p[r]);
                for (int t = 0; t < T; ++t) {
                    F::begin(p[r], tile.w[r][b], tile.a[t][b], tile.acc[r][t]);
                    sumi[r][t] = _mm256_setzero_si256();
                }
            }
            chunks_from<F, R, T, 0>(p, tile.w, tile.a, b, sumi);
            for (int r = 0; r < R; ++r)
                for (int t = 0; t < T; ++t) F::end(tile.w[r][b], tile.a[t][b], sumi[r][t], tile.acc[r][t]);
        }
        tile.store(task, r0, t0);
    }
};

// Decode: two rows a tile share each activation load; prompts: one row x 4 tokens.
template <typename F>
void stream_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.n_tokens == 1) walk_rows<StreamTile<F>, 2, 1>(task, row_begin, row_end);
    else walk_rows<StreamTile<F>, 1, 4>(task, row_begin, row_end);
}

}  // namespace
}  // namespace ember::kernels::fast::avx2
