// The AVX512_BF16 product (compiled with the AVX-512 flags plus -mavx512bf16; see
// variant_kernels.hpp for the rules of a variant translation unit).
//
// vdpbf16ps multiplies pairs of BF16 values and adds both products to an F32 lane
// (elements 2j and 2j+1 of each 32-element chunk go to lane j). Its rounding differs
// from a separate convert-and-FMA (it flushes subnormals and rounds each addition), so
// this kernel agrees with the other variants within F32 tolerance, not bitwise; within
// this kernel the matrix-vector and matrix-matrix paths are bit-identical.
#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/avx512_common.hpp"
#include "kernels/fast/prefetch.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx512_bf16 {

namespace {

__m512bh load_pairs(const std::uint16_t* p) { return (__m512bh)_mm512_loadu_si512(p); }
__m512bh load_pairs_tail(const std::uint16_t* p, __mmask32 m) { return (__m512bh)_mm512_maskz_loadu_epi16(m, p); }

struct BF16Tile {
    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        const std::uint16_t* w[R];
        const std::uint16_t* a[T];
        for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const std::uint16_t*>(task.weights + (r0 + r) * task.weight_row_bytes);
        for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const std::uint16_t*>(task.acts + (t0 + t) * task.act_row_bytes);
        __m512 acc[R][T];
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();

        const std::size_t n = task.cols;
        const NextRowsPrefetch prefetch(task, r0 + R, T == 1 ? R : 0, n / 32);
        std::size_t k = 0;
        for (; k + 32 <= n; k += 32) {
            prefetch(k / 32);
            __m512bh wv[R];
            for (int r = 0; r < R; ++r) wv[r] = load_pairs(w[r] + k);
            for (int t = 0; t < T; ++t) {
                const __m512bh av = load_pairs(a[t] + k);
                for (int r = 0; r < R; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], av);
            }
        }
        if (k < n) {
            const __mmask32 m = static_cast<__mmask32>((1ull << (n - k)) - 1ull);
            __m512bh wv[R];
            for (int r = 0; r < R; ++r) wv[r] = load_pairs_tail(w[r] + k, m);
            for (int t = 0; t < T; ++t) {
                const __m512bh av = load_pairs_tail(a[t] + k, m);
                for (int r = 0; r < R; ++r) acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], av);
            }
        }
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) task.out[(t0 + t) * task.out_stride + r0 + r] = avx512_fold16(acc[r][t]);
    }
};

}  // namespace

void bf16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.n_tokens == 1) avx512_walk_rows<BF16Tile, 4, 1>(task, row_begin, row_end);  // 16 KB tiles, as F16
    else avx512_walk_rows<BF16Tile, 4, 4>(task, row_begin, row_end);
}

}  // namespace ember::kernels::fast::avx512_bf16
