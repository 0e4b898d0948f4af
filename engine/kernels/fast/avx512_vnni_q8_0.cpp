// The AVX-512 VNNI Q8_0 product (compiled with the AVX-512 flags plus -mavx512vnni; see
// variant_kernels.hpp for the rules of a variant translation unit).
//
// Numerics are exactly model-math §2.9: for each output, eight float lanes; per block,
// lane i gets s_i = the int32 sum of its four int8 products (exact) and
// acc_i = fma(d_w * d_a, (float)s_i, acc_i). A 512-bit register holds the eight lanes of
// two tokens for the same weight row (low half token t, high half token t + 1).
//
// vpdpbusd multiplies unsigned by signed bytes, so the weights enter as w + 128 (w xor
// 0x80) and the excess 128 * (sum of the four activations) is subtracted by starting
// the accumulation from -128 * that sum, computed once per activation block. All of it
// is exact integer arithmetic: s_i is the same int32 as a plain loop would give.
#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/avx512_common.hpp"
#include "kernels/fast/prefetch.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx512_vnni {

namespace {

__m512 half_pair(std::uint16_t low, std::uint16_t high) {
    return _mm512_insertf32x8(_mm512_set1_ps(_cvtsh_ss(low)), _mm256_set1_ps(_cvtsh_ss(high)), 1);
}

// Tile of R rows x T tokens; tokens are taken in pairs, an odd last token is paired
// with itself and its duplicate result is not stored.
struct Q8_0Tile {
    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        constexpr int P = (T + 1) / 2;
        const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
        const BlockQ8_0* w[R];
        const BlockQ8_0* a[2 * P];
        for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const BlockQ8_0*>(task.weights + (r0 + r) * task.weight_row_bytes);
        for (int t = 0; t < 2 * P; ++t) {
            const int token = t < T ? t : T - 1;
            a[t] = reinterpret_cast<const BlockQ8_0*>(task.acts + (t0 + token) * task.act_row_bytes);
        }
        __m512 acc[R][P];
        for (int r = 0; r < R; ++r)
            for (int p = 0; p < P; ++p) acc[r][p] = _mm512_setzero_ps();
        const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));

        for (std::size_t b = 0; b < n_blocks; ++b) {
            __m512i wu[R];
            __m512 wd[R];
            for (int r = 0; r < R; ++r) {
                const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r][b].qs));
                wu[r] = _mm512_xor_si512(_mm512_broadcast_i64x4(q), flip);
                wd[r] = _mm512_set1_ps(_cvtsh_ss(w[r][b].d));
            }
            for (int p = 0; p < P; ++p) {
                const BlockQ8_0& lo = a[2 * p][b];
                const BlockQ8_0& hi = a[2 * p + 1][b];
                const __m512i aq = _mm512_inserti64x4(
                    _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo.qs))),
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi.qs)), 1);
                const __m512i excess = _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, aq);
                const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(), excess);
                const __m512 ad = half_pair(lo.d, hi.d);
                for (int r = 0; r < R; ++r) {
                    const __m512 s = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, wu[r], aq));
                    acc[r][p] = _mm512_fmadd_ps(_mm512_mul_ps(wd[r], ad), s, acc[r][p]);
                }
            }
        }
        for (int r = 0; r < R; ++r) {
            for (int p = 0; p < P; ++p) {
                float* out = task.out + r0 + r;
                out[(t0 + 2 * p) * task.out_stride] = avx512_fold8(_mm512_castps512_ps256(acc[r][p]));
                if (2 * p + 1 < T) out[(t0 + 2 * p + 1) * task.out_stride] = avx512_fold8(_mm512_extractf32x8_ps(acc[r][p], 1));
            }
        }
    }
};

// The matrix-vector product (one token), eight rows at a time. Here a 512-bit register
// holds the lanes of two rows (low half row 2q, high half row 2q + 1) for the one token,
// and the eight rows' scales are converted together: per block, the weight side costs
// one load pair, an xor, a vpdpbusd, a convert, a permute and an FMA per two rows.
void q8_0_gemv8(const MatmulTask& task, std::size_t r0) {
    const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
    const BlockQ8_0* w[8];
    for (int r = 0; r < 8; ++r) w[r] = reinterpret_cast<const BlockQ8_0*>(task.weights + (r0 + r) * task.weight_row_bytes);
    const auto* a = reinterpret_cast<const BlockQ8_0*>(task.acts);
    const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512i pair_index[4];
    for (int q = 0; q < 4; ++q) {
        pair_index[q] = _mm512_inserti64x4(_mm512_set1_epi32(2 * q), _mm256_set1_epi32(2 * q + 1), 1);
    }
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};

    const NextRowsPrefetch prefetch(task, r0 + 8, 8, n_blocks);
    for (std::size_t b = 0; b < n_blocks; ++b) {
        prefetch(b);
        const __m512i aq = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs)));
        const __m512i start = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, aq));
        __m128i scales = _mm_setzero_si128();
        scales = _mm_insert_epi16(scales, w[0][b].d, 0);
        scales = _mm_insert_epi16(scales, w[1][b].d, 1);
        scales = _mm_insert_epi16(scales, w[2][b].d, 2);
        scales = _mm_insert_epi16(scales, w[3][b].d, 3);
        scales = _mm_insert_epi16(scales, w[4][b].d, 4);
        scales = _mm_insert_epi16(scales, w[5][b].d, 5);
        scales = _mm_insert_epi16(scales, w[6][b].d, 6);
        scales = _mm_insert_epi16(scales, w[7][b].d, 7);
        // d_w * d_a for the eight rows, in lanes 0..7
        const __m512 dd8 = _mm512_castps256_ps512(_mm256_mul_ps(_mm256_cvtph_ps(scales), _mm256_set1_ps(_cvtsh_ss(a[b].d))));
        for (int q = 0; q < 4; ++q) {
            const __m512i wq = _mm512_inserti64x4(
                _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[2 * q][b].qs))),
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[2 * q + 1][b].qs)), 1);
            const __m512 s = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(start, _mm512_xor_si512(wq, flip), aq));
            acc[q] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pair_index[q], dd8), s, acc[q]);
        }
    }
    for (int q = 0; q < 4; ++q) {
        task.out[r0 + 2 * q] = avx512_fold8(_mm512_castps512_ps256(acc[q]));
        task.out[r0 + 2 * q + 1] = avx512_fold8(_mm512_extractf32x8_ps(acc[q], 1));
    }
}

}  // namespace

void q8_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.n_tokens == 1) {
        std::size_t r = row_begin;
        for (; r + 8 <= row_end; r += 8) q8_0_gemv8(task, r);
        for (; r < row_end; ++r) Q8_0Tile::run<1, 1>(task, r, 0);
        return;
    }
    walk_rows<Q8_0Tile, 4, 6>(task, row_begin, row_end);
}

}  // namespace ember::kernels::fast::avx512_vnni
