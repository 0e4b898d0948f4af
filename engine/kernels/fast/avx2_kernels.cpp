// The AVX2 + FMA + F16C variant's conversions and Q8_0 product (compiled with -mavx2
// -mfma -mf16c; see variant_kernels.hpp for the rules of a variant translation unit;
// the float products are in avx2_float.cpp).
//
// The Q8_0 product is computed in tiles of R weight rows x T tokens: each weight block
// is loaded once per tile and reused for T tokens, each activation block once and
// reused for R rows. Every output (row, token) owns one 8-lane accumulator whose
// sequence of operations does not depend on the tile shape, so a matrix-vector product
// (T = 1) and a matrix-matrix product give bit-identical results.
#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/avx2_common.hpp"
#include "kernels/float16.hpp"
#include "kernels/fast/prefetch.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx2 {

namespace {

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
        for (int t = 0; t < T; ++t) task.out[(t0 + t) * task.out_stride + r0 + r] = avx2_fold8(acc[r][t]);
}

struct Q8_0Tile {
    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) { q8_0_tile<R, T>(task, r0, t0); }
};

// One block of 32 by the x86 runtime rule: max_abs the largest |x| on the bit patterns (a
// NaN wins, see the scalar variant), id = 127 / max_abs (0 for 0), q = cvtps2dq(x * id)
// (round half to even) saturated by packs, in element order in the returned register.
__m256i quantize_block_q8(const float* xb, float& max_abs) {
    const __m256i abs_mask = _mm256_set1_epi32(0x7FFFFFFF);
    __m256 v[4];
    __m256i amax = _mm256_setzero_si256();
    for (int i = 0; i < 4; ++i) {
        v[i] = _mm256_loadu_ps(xb + 8 * i);
        amax = _mm256_max_epu32(amax, _mm256_and_si256(_mm256_castps_si256(v[i]), abs_mask));
    }
    __m128i m = _mm_max_epu32(_mm256_castsi256_si128(amax), _mm256_extracti128_si256(amax, 1));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0x4E));
    m = _mm_max_epu32(m, _mm_shuffle_epi32(m, 0xB1));
    max_abs = _mm_cvtss_f32(_mm_castsi128_ps(m));
    const __m256 id = _mm256_set1_ps(max_abs != 0.0f ? 127.0f / max_abs : 0.0f);
    __m256i q[4];
    for (int i = 0; i < 4; ++i) q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], id));
    const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
    return _mm256_permutevar8x32_epi32(packed, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

}  // namespace

void quantize_row_q8_0(const float* x, BlockQ8_0* y, std::size_t n) {
    for (std::size_t b = 0; b < n / kQ8_0BlockSize; ++b) {
        float max_abs;
        const __m256i bytes = quantize_block_q8(x + b * kQ8_0BlockSize, max_abs);
        y[b].d = static_cast<std::uint16_t>(_cvtss_sh(max_abs / 127.0f, 0));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), bytes);
    }
}

// quantize_row_q8_0's blocks with s = fp16(d * sum of the quants), d = amax / 127 in F32:
// scalar_quants.cpp's quantize_row_q8_1, the x86 runtime rule.
void quantize_row_q8_1(const float* x, BlockQ8_1* y, std::size_t n) {
    for (std::size_t b = 0; b < n / 32; ++b) {
        float max_abs;
        const __m256i bytes = quantize_block_q8(x + b * 32, max_abs);
        const float d = max_abs / 127.0f;
        y[b].d = static_cast<std::uint16_t>(_cvtss_sh(d, 0));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs), bytes);
        // the sum of the stored (saturated) bytes, exact in int32
        const __m256i pairs = _mm256_maddubs_epi16(_mm256_set1_epi8(1), bytes);
        const __m256i quads = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(quads), _mm256_extracti128_si256(quads, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4E));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xB1));
        y[b].s = static_cast<std::uint16_t>(_cvtss_sh(d * static_cast<float>(_mm_cvtsi128_si32(s4)), 0));
    }
}

// quantize_row_q8_K_ref's operations on each super-block (scalar_quants.cpp, model-math
// §2.8): the first element of largest magnitude m, iscale = -127 / m, q = min(127,
// nearest_int(iscale * x)) by the same 1.5 * 2^23 trick (so a NaN or infinite product
// gives the same integer), stored as its low byte, the sixteen sums and d = 1 / iscale.
// Blocks holding a NaN, or only zeros, are the scalar variant's.
void quantize_row_q8_K(const float* x, BlockQ8_K* y, std::size_t n) {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
    const __m256 shift = _mm256_set1_ps(12582912.0f);
    const __m256i mantissa = _mm256_set1_epi32(0x007FFFFF);
    const __m256i offset = _mm256_set1_epi32(0x00400000);
    const __m256i top = _mm256_set1_epi32(127);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (std::size_t b = 0; b < n / 256; ++b) {
        const float* xb = x + 256 * b;
        __m256 amax = _mm256_setzero_ps();
        __m256 nan = _mm256_setzero_ps();
        for (int i = 0; i < 32; ++i) {
            const __m256 v = _mm256_loadu_ps(xb + 8 * i);
            amax = _mm256_max_ps(amax, _mm256_and_ps(v, abs_mask));
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        }
        if (!_mm256_testz_ps(nan, nan)) {
            scalar::quantize_row_q8_K(xb, y + b, 256);
            continue;
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const __m256 largest = _mm256_broadcastss_ps(m4);
        if (_mm_cvtss_f32(m4) == 0.0f) {
            scalar::quantize_row_q8_K(xb, y + b, 256);
            continue;
        }
        float max = 0.0f;  // the first element of that magnitude, with its sign
        for (int i = 0; i < 32; ++i) {
            const int hits = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(xb + 8 * i), abs_mask), largest, _CMP_EQ_OQ));
            if (hits != 0) {
                max = xb[8 * i + __builtin_ctz(static_cast<unsigned>(hits))];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m256 scale = _mm256_set1_ps(iscale);
        __m256i group_sums[16];  // [16 elements]: int32 lanes summing to bsums[k]
        for (int c = 0; c < 8; ++c) {  // 32 elements
            __m256i q[4];
            for (int i = 0; i < 4; ++i) {
                const __m256 shifted = _mm256_add_ps(_mm256_mul_ps(scale, _mm256_loadu_ps(xb + 32 * c + 8 * i)), shift);
                const __m256i v = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(shifted), mantissa), offset);
                // the int8 store keeps the low byte (an overflowed iscale gives v far out
                // of range): sign-extended from it, exact through both packs
                q[i] = _mm256_srai_epi32(_mm256_slli_epi32(_mm256_min_epi32(v, top), 24), 24);
            }
            group_sums[2 * c] = _mm256_add_epi32(q[0], q[1]);
            group_sums[2 * c + 1] = _mm256_add_epi32(q[2], q[3]);
            const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(y[b].qs + 32 * c), _mm256_permutevar8x32_epi32(packed, order));
        }
        for (int k = 0; k < 16; k += 4) {  // four groups' lane sums: [g0, g1, g2, g3] in each half, then the halves
            const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(group_sums[k], group_sums[k + 1]),
                                                _mm256_hadd_epi32(group_sums[k + 2], group_sums[k + 3]));
            const __m128i sums = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
            _mm_storel_epi64(reinterpret_cast<__m128i*>(y[b].bsums + k), _mm_packs_epi32(sums, sums));
        }
        y[b].d = 1.0f / iscale;
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
    if (task.n_tokens == 1) walk_rows<Q8_0Tile, 4, 1>(task, row_begin, row_end);
    else if (!q8_0_prompt_rows(task, row_begin, row_end)) walk_rows<Q8_0Tile, 2, 4>(task, row_begin, row_end);
}

}  // namespace ember::kernels::fast::avx2
