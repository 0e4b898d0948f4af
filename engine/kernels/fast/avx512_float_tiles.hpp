// Internal: the AVX-512 F32 / F16 / BF16 products in llama.cpp's two summation orders,
// for the translation units built with the AVX-512 flags (avx512_float.cpp;
// avx512_bf16_dot.cpp adds -mavx512bf16): the 16-lane accumulator is one 512-bit
// register (float_tiles.hpp has the tiles and the policy contract). Internal linkage
// only (see variant_kernels.hpp).
#pragma once

#include "kernels/fast/intrinsics.hpp"

#include <cstddef>

#include "kernels/fast/avx512_common.hpp"
#include "kernels/fast/float_sums.hpp"
#include "kernels/fast/float_tiles.hpp"
#include "kernels/fast/kernel_types.hpp"

namespace ember::kernels::fast {
namespace {

// What every AVX-512 policy shares: the accumulator and its reduction.
struct Avx512Lanes {
    using Accumulator = __m512;
    static __m512 zero() { return _mm512_setzero_ps(); }
    static float fold(__m512 acc) { return avx512_fold16(acc); }
};

template <typename P>
void avx512_float_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    // Matrix-vector: four rows of 2048 F16 values are 16 KB, so a tile and the next one
    // being prefetched fit in L1 together.
    if (task.order == SumOrder::tiled) {
        if (task.n_tokens == 1) walk_rows<TiledTile<P>, 4, 1>(task, row_begin, row_end);
        else walk_rows<TiledTile<P>, 4, 4>(task, row_begin, row_end);
    } else {
        if (task.n_tokens == 1) walk_rows<VecDotTile<P>, 4, 1>(task, row_begin, row_end);
        else walk_rows<VecDotTile<P>, 2, 2>(task, row_begin, row_end);
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
