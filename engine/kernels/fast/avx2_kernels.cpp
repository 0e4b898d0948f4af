// The AVX2 + FMA + F16C variant (compiled with -mavx2 -mfma -mf16c; see
// variant_kernels.hpp for the rules of a variant translation unit).
//
// Matrix products are computed in tiles of R weight rows x T tokens: each weight block
// is loaded once per tile and reused for T tokens, each activation block once and
// reused for R rows. Every output (row, token) owns one 8-lane accumulator whose
// sequence of operations does not depend on the tile shape, so a matrix-vector product
// (T = 1) and a matrix-matrix product give bit-identical results.
#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/half_precision.hpp"
#include "kernels/fast/prefetch.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx2 {

namespace {

// ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7))
float fold_lanes(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));  // l0+l4, l1+l5, ...
    const __m128 pairs = _mm_add_ps(s, _mm_movehl_ps(s, s));                              // (s0+s2), (s1+s3)
    return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

float half_to_float(std::uint16_t h) { return _cvtsh_ss(h); }

// ---- Q8_0 (model-math §2.9) ----
// Per block: s_i = sum of four int8 products for lane i (exact in int32), computed as
// |w| * sign(a, w) with maddubs (pairs stay below 2*128*127, no saturation) and madd;
// then acc_i = fma(d_w * d_a, (float)s_i, acc_i).
template <int R, int T>
void q8_0_tile(const MatmulTask& task, std::size_t r0, std::size_t t0) {
    const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
    const BlockQ8_0* w[R];
    const BlockQ8_0* a[T];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const BlockQ8_0*>(task.weights + (r0 + r) * task.weight_row_bytes);
    for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const BlockQ8_0*>(task.acts + (t0 + t) * task.act_row_bytes);
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
    const __m256i ones = _mm256_set1_epi16(1);

    const NextRowsPrefetch prefetch(task, r0 + R, T == 1 ? R : 0, n_blocks);
    for (std::size_t b = 0; b < n_blocks; ++b) {
        prefetch(b);
        __m256i wq[R], wabs[R];
        __m256 wd[R];
        for (int r = 0; r < R; ++r) {
            wq[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r][b].qs));
            wabs[r] = _mm256_abs_epi8(wq[r]);
            wd[r] = _mm256_set1_ps(half_to_float(w[r][b].d));
        }
        for (int t = 0; t < T; ++t) {
            const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs));
            const __m256 ad = _mm256_set1_ps(half_to_float(a[t][b].d));
            for (int r = 0; r < R; ++r) {
                const __m256i pairs = _mm256_maddubs_epi16(wabs[r], _mm256_sign_epi8(aq, wq[r]));
                const __m256 s = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
                acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(wd[r], ad), s, acc[r][t]);
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) task.out[(t0 + t) * task.out_stride + r0 + r] = fold_lanes(acc[r][t]);
}

// ---- F16 / BF16 / F32: one 8-lane FMA accumulator per output, element k in lane k % 8 ----
struct F16Loader {
    using Element = std::uint16_t;
    static __m256 load(const Element* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
};
struct BF16Loader {
    using Element = std::uint16_t;
    static __m256 load(const Element* p) {
        const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    }
};
struct F32Loader {
    using Element = float;
    static __m256 load(const Element* p) { return _mm256_loadu_ps(p); }
};

// The last n < 8 elements, zero-padded to a full vector.
template <typename Loader>
__m256 load_tail(const typename Loader::Element* p, std::size_t n) {
    typename Loader::Element padded[8] = {};
    for (std::size_t i = 0; i < n; ++i) padded[i] = p[i];
    return Loader::load(padded);
}

template <typename Loader, int R, int T>
void float_tile(const MatmulTask& task, std::size_t r0, std::size_t t0) {
    using Element = typename Loader::Element;
    const Element* w[R];
    const Element* a[T];
    for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Element*>(task.weights + (r0 + r) * task.weight_row_bytes);
    for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const Element*>(task.acts + (t0 + t) * task.act_row_bytes);
    __m256 acc[R][T];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();

    const std::size_t n = task.cols;
    const NextRowsPrefetch prefetch(task, r0 + R, T == 1 ? R : 0, n / 8);
    std::size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        prefetch(k / 8);
        __m256 wv[R];
        for (int r = 0; r < R; ++r) wv[r] = Loader::load(w[r] + k);
        for (int t = 0; t < T; ++t) {
            const __m256 av = Loader::load(a[t] + k);
            for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
    if (k < n) {
        __m256 wv[R];
        for (int r = 0; r < R; ++r) wv[r] = load_tail<Loader>(w[r] + k, n - k);
        for (int t = 0; t < T; ++t) {
            const __m256 av = load_tail<Loader>(a[t] + k, n - k);
            for (int r = 0; r < R; ++r) acc[r][t] = _mm256_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) task.out[(t0 + t) * task.out_stride + r0 + r] = fold_lanes(acc[r][t]);
}

// Walks rows in groups of R and tokens in groups of T (remainders with smaller tiles).
// Tile is a class template with a static `run<R, T>` so one walker serves every type.
// The last `count` < T tokens of rows r0.. as one tile of exactly `count` tokens.
template <typename Tile, int R, int T>
void token_remainder(const MatmulTask& task, std::size_t r0, std::size_t t0, std::size_t count) {
    if constexpr (T > 0) {
        if (count == T) Tile::template run<R, T>(task, r0, t0);
        else token_remainder<Tile, R, T - 1>(task, r0, t0, count);
    }
}

template <typename Tile, int R, int T>
void tokens_of_rows(const MatmulTask& task, std::size_t r0) {
    std::size_t t = 0;
    for (; t + T <= task.n_tokens; t += T) Tile::template run<R, T>(task, r0, t);
    if (t < task.n_tokens) token_remainder<Tile, R, T - 1>(task, r0, t, task.n_tokens - t);
}

template <typename Tile, int R, int T>
void walk_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    std::size_t r = row_begin;
    for (; r + R <= row_end; r += R) tokens_of_rows<Tile, R, T>(task, r);
    for (; r < row_end; ++r) tokens_of_rows<Tile, 1, T>(task, r);
}

struct Q8_0Tile {
    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) { q8_0_tile<R, T>(task, r0, t0); }
};
template <typename Loader>
struct FloatTile {
    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) { float_tile<Loader, R, T>(task, r0, t0); }
};

template <typename Tile>
void matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.n_tokens == 1) walk_rows<Tile, 4, 1>(task, row_begin, row_end);
    else walk_rows<Tile, 2, 4>(task, row_begin, row_end);
}

}  // namespace

void quantize_row_q8_0(const float* x, BlockQ8_0* y, std::size_t n) {
    const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (std::size_t b = 0; b < n / kQ8_0BlockSize; ++b) {
        const float* xb = x + b * kQ8_0BlockSize;
        __m256 v[4];
        __m256i amax = _mm256_setzero_si256();
        for (int i = 0; i < 4; ++i) {
            v[i] = _mm256_loadu_ps(xb + 8 * i);
            amax = _mm256_max_epu32(amax, _mm256_and_si256(_mm256_castps_si256(v[i]), abs_mask));
        }
        // max of |x| on the bit patterns (a NaN wins, see the scalar variant)
        __m128i m = _mm_max_epu32(_mm256_castsi256_si128(amax), _mm256_extracti128_si256(amax, 1));
        m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0x4E));
        m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0xB1));
        const float max_abs = _mm_cvtss_f32(_mm_castsi128_ps(m));
        y[b].d = static_cast<std::uint16_t>(_cvtss_sh(max_abs / 127.0f, 0));
        const __m256 id = _mm256_set1_ps(max_abs != 0.0f ? 127.0f / max_abs : 0.0f);
        __m256i q[4];
        for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));  // round half to even
        const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), _mm256_permutevar8x32_epi32(packed, order));
    }
}

void round_row_f16(const float* x, std::uint16_t* y, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    }
    for (; i < n; ++i) y[i] = static_cast<std::uint16_t>(_cvtss_sh(x[i], 0));
}

void round_row_bf16(const float* x, std::uint16_t* y, std::size_t n) {
    const __m256i magnitude_mask = _mm256_set1_epi32(0x7FFFFFFF);
    const __m256i infinity = _mm256_set1_epi32(0x7F800000);
    const __m256i bias = _mm256_set1_epi32(0x7FFF);
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i quiet = _mm256_set1_epi32(0x40);
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i half[2];
        for (int h = 0; h < 2; ++h) {
            const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i + 8 * h));
            const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(bits, magnitude_mask), infinity);
            const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), one);
            const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(bits, _mm256_add_epi32(bias, lsb)), 16);
            const __m256i nan = _mm256_or_si256(_mm256_srli_epi32(bits, 16), quiet);
            half[h] = _mm256_blendv_epi8(rounded, nan, is_nan);
        }
        const __m256i packed = _mm256_packus_epi32(half[0], half[1]);  // lanes: 0-3, 8-11, 4-7, 12-15
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm256_permute4x64_epi64(packed, 0xD8));
    }
    for (; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}

void q8_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    matmul_rows<Q8_0Tile>(task, row_begin, row_end);
}
void f16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    matmul_rows<FloatTile<F16Loader>>(task, row_begin, row_end);
}
void bf16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    matmul_rows<FloatTile<BF16Loader>>(task, row_begin, row_end);
}
void f32_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    matmul_rows<FloatTile<F32Loader>>(task, row_begin, row_end);
}

}  // namespace ember::kernels::fast::avx2
