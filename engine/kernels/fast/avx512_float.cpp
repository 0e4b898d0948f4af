// The AVX-512 variant's conversions and F16 / BF16 / F32 products (compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512dq on top of the AVX2 flags; see
// variant_kernels.hpp for the rules of a variant translation unit).
//
// Each output (row, token) owns one 16-lane FMA accumulator; element k goes to lane
// k % 16 (the tail is zero-padded with masked loads), folded by avx512_fold16. Tiles of
// R rows x T tokens reuse every loaded weight vector T times and every activation vector
// R times without changing any output's sequence of operations.
#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/avx512_common.hpp"
#include "kernels/fast/prefetch.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx512 {

namespace {

struct F16Loader {
    using Element = std::uint16_t;
    static __m512 load(const Element* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
    static __m512 load_tail(const Element* p, __mmask16 m) { return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p)); }
};
struct BF16Loader {
    using Element = std::uint16_t;
    static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
    static __m512 load(const Element* p) { return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
    static __m512 load_tail(const Element* p, __mmask16 m) { return widen(_mm256_maskz_loadu_epi16(m, p)); }
};
struct F32Loader {
    using Element = float;
    static __m512 load(const Element* p) { return _mm512_loadu_ps(p); }
    static __m512 load_tail(const Element* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};

template <typename Loader>
struct FloatTile {
    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        using Element = typename Loader::Element;
        const Element* w[R];
        const Element* a[T];
        for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const Element*>(task.weights + (r0 + r) * task.weight_row_bytes);
        for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const Element*>(task.acts + (t0 + t) * task.act_row_bytes);
        __m512 acc[R][T];
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();

        const std::size_t n = task.cols;
        const NextRowsPrefetch prefetch(task, r0 + R, T == 1 ? R : 0, n / 16);
        std::size_t k = 0;
        for (; k + 16 <= n; k += 16) {
            prefetch(k / 16);
            __m512 wv[R];
            for (int r = 0; r < R; ++r) wv[r] = Loader::load(w[r] + k);
            for (int t = 0; t < T; ++t) {
                const __m512 av = Loader::load(a[t] + k);
                for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
            }
        }
        if (k < n) {
            const __mmask16 m = static_cast<__mmask16>((1u << (n - k)) - 1u);
            __m512 wv[R];
            for (int r = 0; r < R; ++r) wv[r] = Loader::load_tail(w[r] + k, m);
            for (int t = 0; t < T; ++t) {
                const __m512 av = Loader::load_tail(a[t] + k, m);
                for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
            }
        }
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) task.out[(t0 + t) * task.out_stride + r0 + r] = avx512_fold16(acc[r][t]);
    }
};

template <typename Tile>
void matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    // Matrix-vector: four rows of 2048 F16 values are 16 KB, so a tile and the next one
    // being prefetched fit in L1 together.
    if (task.n_tokens == 1) avx512_walk_rows<Tile, 4, 1>(task, row_begin, row_end);
    else avx512_walk_rows<Tile, 4, 4>(task, row_begin, row_end);
}

// x86 runtime Q8_0 quantization of 16 values with the block's multiplier: cvtps2dq
// rounds half to even (NaN and out-of-range give INT32_MIN), vpmovsdb saturates.
__m128i quantize16(__m512 v, __m512 id) { return _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v, id))); }

}  // namespace

void quantize_row_q8_0(const float* x, BlockQ8_0* y, std::size_t n) {
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF);
    for (std::size_t b = 0; b < n / kQ8_0BlockSize; ++b) {
        const float* xb = x + b * kQ8_0BlockSize;
        const __m512 v0 = _mm512_loadu_ps(xb);
        const __m512 v1 = _mm512_loadu_ps(xb + 16);
        // max of |x| on the bit patterns (a NaN wins, see the scalar variant)
        const __m512i bits = _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(v0), abs_mask),
                                              _mm512_and_si512(_mm512_castps_si512(v1), abs_mask));
        const float max_abs = __builtin_bit_cast(float, _mm512_reduce_max_epu32(bits));
        y[b].d = static_cast<std::uint16_t>(_cvtss_sh(max_abs / 127.0f, 0));
        const __m512 id = _mm512_set1_ps(max_abs != 0.0f ? 127.0f / max_abs : 0.0f);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs), quantize16(v0, id));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y[b].qs + 16), quantize16(v1, id));
    }
}

void round_row_f16(const float* x, std::uint16_t* y, std::size_t n) {
    std::size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(y + i), _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    }
    if (i < n) {
        const __mmask16 m = static_cast<__mmask16>((1u << (n - i)) - 1u);
        _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, x + i), _MM_FROUND_TO_NEAREST_INT));
    }
}

void round_row_bf16(const float* x, std::uint16_t* y, std::size_t n) {
    const __m512i magnitude_mask = _mm512_set1_epi32(0x7FFFFFFF);
    const __m512i infinity = _mm512_set1_epi32(0x7F800000);
    const __m512i bias = _mm512_set1_epi32(0x7FFF);
    const __m512i one = _mm512_set1_epi32(1);
    const __m512i quiet = _mm512_set1_epi32(0x40);
    for (std::size_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1u);
        const __m512i bits = _mm512_maskz_loadu_epi32(m, x + i);
        const __mmask16 is_nan = _mm512_cmpgt_epu32_mask(_mm512_and_si512(bits, magnitude_mask), infinity);
        const __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(bits, 16), one);
        const __m512i rounded = _mm512_srli_epi32(_mm512_add_epi32(bits, _mm512_add_epi32(bias, lsb)), 16);
        const __m512i nan = _mm512_or_si512(_mm512_srli_epi32(bits, 16), quiet);
        _mm256_mask_storeu_epi16(y + i, m, _mm512_cvtepi32_epi16(_mm512_mask_blend_epi32(is_nan, rounded, nan)));
    }
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

}  // namespace ember::kernels::fast::avx512
