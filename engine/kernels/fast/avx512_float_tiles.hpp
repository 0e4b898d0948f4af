// Internal: the AVX-512 F32 / F16 / BF16 products in llama.cpp's two summation orders
// (kernel_types.hpp SumOrder), for the translation units built with the AVX-512 flags
// (avx512_float.cpp; avx512_bf16_dot.cpp adds -mavx512bf16). Internal linkage only (see
// variant_kernels.hpp).
//
// A policy P describes one weight type:
//   Element, Vector          stored element; what one load of kChunk elements gives
//   kChunk                   elements per vector: 16 (F32, F16) or 32 (BF16 pairs)
//   load(p), load_partial(p, count)   (zero-padded)
//   accumulate(acc, w, a)    acc += w * a for one vector (FMA, or vdpbf16ps)
//   finish_vec_dot(acc, w, a, tail)   ggml_vec_dot's combination of the 64 / kChunk block
//                            accumulators and its element-by-element tail
// Tiles of R rows x T tokens reuse every loaded weight vector T times and every
// activation vector R times without changing any output's sequence of operations.
#pragma once

#include "kernels/fast/intrinsics.hpp"

#include <cstddef>

#include "kernels/fast/avx512_common.hpp"
#include "kernels/fast/float_sums.hpp"
#include "kernels/fast/kernel_types.hpp"
#include "kernels/fast/prefetch.hpp"

namespace ember::kernels::fast {
namespace {

// tinyBLAS: one accumulator per output, over chunks (a last partial chunk is zero-padded).
template <typename P>
struct Avx512TiledTile {
    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        using Element = typename P::Element;
        const Element* w[R];
        const Element* a[T];
        for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Element*>(task.weights + (r0 + r) * task.weight_row_bytes);
        for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const Element*>(task.acts + (t0 + t) * task.act_row_bytes);
        __m512 acc[R][T];
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();

        const std::size_t n = task.cols;
        const NextRowsPrefetch prefetch(task, r0 + R, T == 1 ? R : 0, n / P::kChunk);
        std::size_t k = 0;
        for (; k + P::kChunk <= n; k += P::kChunk) {
            prefetch(k / P::kChunk);
            typename P::Vector wv[R];
            for (int r = 0; r < R; ++r) wv[r] = P::load(w[r] + k);
            for (int t = 0; t < T; ++t) {
                const typename P::Vector av = P::load(a[t] + k);
                for (int r = 0; r < R; ++r) acc[r][t] = P::accumulate(acc[r][t], wv[r], av);
            }
        }
        if (k < n) {
            typename P::Vector wv[R];
            for (int r = 0; r < R; ++r) wv[r] = P::load_partial(w[r] + k, n - k);
            for (int t = 0; t < T; ++t) {
                const typename P::Vector av = P::load_partial(a[t] + k, n - k);
                for (int r = 0; r < R; ++r) acc[r][t] = P::accumulate(acc[r][t], wv[r], av);
            }
        }
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) task.out[(t0 + t) * task.out_stride + r0 + r] = avx512_fold16(acc[r][t]);
    }
};

// ggml_vec_dot: 64-element blocks, chunk q of each block into accumulator q.
template <typename P>
struct Avx512VecDotTile {
    static constexpr int kAccumulators = static_cast<int>(64 / P::kChunk);

    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        using Element = typename P::Element;
        const Element* w[R];
        const Element* a[T];
        for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Element*>(task.weights + (r0 + r) * task.weight_row_bytes);
        for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const Element*>(task.acts + (t0 + t) * task.act_row_bytes);
        __m512 acc[R][T][kAccumulators];
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t)
                for (int q = 0; q < kAccumulators; ++q) acc[r][t][q] = _mm512_setzero_ps();

        const std::size_t n = task.cols;
        const std::size_t blocked = n - n % 64;
        const NextRowsPrefetch prefetch(task, r0 + R, T == 1 ? R : 0, blocked / 64);
        for (std::size_t k = 0; k < blocked; k += 64) {
            prefetch(k / 64);
            for (int q = 0; q < kAccumulators; ++q) {
                typename P::Vector wv[R];
                for (int r = 0; r < R; ++r) wv[r] = P::load(w[r] + k + q * P::kChunk);
                for (int t = 0; t < T; ++t) {
                    const typename P::Vector av = P::load(a[t] + k + q * P::kChunk);
                    for (int r = 0; r < R; ++r) acc[r][t][q] = P::accumulate(acc[r][t][q], wv[r], av);
                }
            }
        }
        for (int r = 0; r < R; ++r) {
            for (int t = 0; t < T; ++t) {
                task.out[(t0 + t) * task.out_stride + r0 + r] =
                    P::finish_vec_dot(acc[r][t], w[r] + blocked, a[t] + blocked, n - blocked);
            }
        }
    }
};

template <typename P>
void avx512_float_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    // Matrix-vector: four rows of 2048 F16 values are 16 KB, so a tile and the next one
    // being prefetched fit in L1 together.
    if (task.order == SumOrder::tiled) {
        if (task.n_tokens == 1) avx512_walk_rows<Avx512TiledTile<P>, 4, 1>(task, row_begin, row_end);
        else avx512_walk_rows<Avx512TiledTile<P>, 4, 4>(task, row_begin, row_end);
    } else {
        if (task.n_tokens == 1) avx512_walk_rows<Avx512VecDotTile<P>, 4, 1>(task, row_begin, row_end);
        else avx512_walk_rows<Avx512VecDotTile<P>, 2, 2>(task, row_begin, row_end);
    }
}

// ---- BF16 pairs: 32 elements per vector, element 2j and 2j + 1 in lane j ----

inline __m512i avx512_load_bf16_pairs(const std::uint16_t* p) { return _mm512_loadu_si512(p); }
inline __m512i avx512_load_bf16_pairs_partial(const std::uint16_t* p, std::size_t count) {
    return _mm512_maskz_loadu_epi16(static_cast<__mmask32>((1ull << count) - 1ull), p);
}

// ggml_vec_dot_bf16: (0 + (double) reduce(first 32 of each block)) + (double) reduce(next 32),
// then the tail in double.
inline float avx512_finish_bf16_vec_dot(const __m512* acc, const std::uint16_t* w, const std::uint16_t* a, std::size_t tail) {
    double sum = 0.0 + static_cast<double>(avx512_fold16(acc[0]));
    sum += static_cast<double>(avx512_fold16(acc[1]));
    return static_cast<float>(half_dot_tail(sum, w, a, tail, bf16_value));
}

}  // namespace
}  // namespace ember::kernels::fast
