// The AVX-512 variant's conversions and F16 / BF16 / F32 products (compiled with
// -mavx512f -mavx512bw -mavx512vl -mavx512dq on top of the AVX2 flags; see
// variant_kernels.hpp for the rules of a variant translation unit).
//
// The products follow llama.cpp's two summation orders (avx512_float_tiles.hpp). BF16
// here is for CPUs without AVX512_BF16: vdpbf16ps is emulated exactly (pairs odd
// element first) with two plain FMAs per lane, run with MXCSR's DAZ and FTZ set
// (FlushSubnormalsMode, float_tiles.hpp) for the instruction's DAZ inputs and FTZ
// results; the folds and tails run in the caller's MXCSR, as llama.cpp's do.
#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/avx512_float_tiles.hpp"
#include "kernels/fast/variant_kernels.hpp"

#include <algorithm>

namespace ember::kernels::fast::avx512 {

namespace {

__mmask16 partial_mask(std::size_t count) { return static_cast<__mmask16>((1u << count) - 1u); }

// (acc0 + acc2) + (acc1 + acc3), reduced
float combine_four_vectors(const __m512* acc) {
    return avx512_fold16(_mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3])));
}

struct F32Policy : Avx512Lanes {
    using Element = float;
    using Vector = __m512;
    static constexpr std::size_t kChunk = 16;
    static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
    static __m512 load_partial(const float* p, std::size_t count) { return _mm512_maskz_loadu_ps(partial_mask(count), p); }
    static __m512 accumulate(__m512 acc, __m512 w, __m512 a) { return _mm512_fmadd_ps(w, a, acc); }
    static float finish_vec_dot(const __m512* acc, const float* w, const float* a, std::size_t tail) {
        return f32_dot_tail(combine_four_vectors(acc), w, a, tail);
    }
};

float half_value(std::uint16_t h) { return _cvtsh_ss(h); }


struct F16Policy : Avx512Lanes {
    using Element = std::uint16_t;
    using Vector = __m512;
    static constexpr std::size_t kChunk = 16;
    static __m512 load(const Element* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
    static __m512 load_partial(const Element* p, std::size_t count) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(partial_mask(count), p));
    }
    static __m512 accumulate(__m512 acc, __m512 w, __m512 a) { return _mm512_fmadd_ps(w, a, acc); }
    static float finish_vec_dot(const __m512* acc, const Element* w, const Element* a, std::size_t tail) {
        return static_cast<float>(half_dot_tail(static_cast<double>(combine_four_vectors(acc)), w, a, tail, half_value));
    }
};

// vdpbf16ps: lane j += w[2j+1] * a[2j+1], then += w[2j] * a[2j] (float_sums.hpp), each
// a plain FMA: the products of BF16 values are exact, and MXCSR's DAZ and FTZ (set around
// the loops, FlushSubnormalsMode) give the instruction's subnormal handling.
__m512 bf16_odd(__m512i pairs) { return _mm512_castsi512_ps(_mm512_and_si512(pairs, _mm512_set1_epi32(static_cast<int>(0xFFFF0000u)))); }
__m512 bf16_even(__m512i pairs) { return _mm512_castsi512_ps(_mm512_slli_epi32(pairs, 16)); }

struct BF16EmulatedPolicy : Avx512Lanes {
    using Element = std::uint16_t;
    using Vector = __m512i;
    using FmaMode = FlushSubnormalsMode;
    static constexpr std::size_t kChunk = 32;
    static __m512i load(const Element* p) { return avx512_load_bf16_pairs(p); }
    static __m512i load_partial(const Element* p, std::size_t count) { return avx512_load_bf16_pairs_partial(p, count); }
    static __m512 accumulate(__m512 acc, __m512i w, __m512i a) {
        acc = _mm512_fmadd_ps(bf16_odd(w), bf16_odd(a), acc);
        return _mm512_fmadd_ps(bf16_even(w), bf16_even(a), acc);
    }
    static float finish_vec_dot(const __m512* acc, const Element* w, const Element* a, std::size_t tail) {
        return avx512_finish_bf16_vec_dot(acc, w, a, tail);
    }
};

// x86 runtime Q8_0 quantization of 16 values with the block's multiplier: cvtps2dq
// rounds half to even (NaN and out-of-range give INT32_MIN), vpmovsdb saturates.
__m128i quantize16(__m512 v, __m512 id) { return _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v, id))); }

// ---- F16 / BF16 prompts (the tiled order: tinyBLAS, one accumulator per output) ----
// TiledTile widens every activation vector in every tile. Here a call widens each chunk
// of Prompt::kTokens tokens to F32 once (F16: converted; BF16: per 32 elements the 16
// odd ones, then the 16 even ones, as F32 bit patterns), and Prompt::kRows-row x
// kTokens-token tiles read them as FMA memory operands; each output's FMAs and fold are
// TiledTile's, so are its bits. The rows are taken in slabs of about 1 MiB of weights,
// which stay in L2 while every chunk of tokens is widened and multiplied with them
// (ember_kernel_bench: 5-15% faster for F16, 20-30% for BF16, than every chunk with all
// rows of the call).
constexpr std::size_t kPromptPackFloats = 48 * 1024;  // 192 KiB on the stack (oneTBB workers have 4 MiB)
constexpr std::size_t kPromptSlabBytes = 1024 * 1024;

const std::uint16_t* weight_row(const MatmulTask& task, std::size_t r) {
    return reinterpret_cast<const std::uint16_t*>(task.weights + r * task.weight_row_bytes);
}

struct F16Prompt {
    static constexpr int kRows = 4;
    static constexpr std::size_t kTokens = 6;
    static constexpr std::size_t kChunk = 16;
    static void widen(const std::uint16_t* a, float* out, std::size_t n) {
        for (std::size_t k = 0; k < n; k += 16) _mm512_store_ps(out + k, F16Policy::load(a + k));
    }
    template <int R, int T>
    static void sums(const MatmulTask& task, const float* acts, std::size_t r0, __m512 (&acc)[R][T]) {
        const std::size_t n = task.cols;
        for (std::size_t k = 0; k < n; k += 16) {
            __m512 wv[R];
            for (int r = 0; r < R; ++r) wv[r] = F16Policy::load(weight_row(task, r0 + r) + k);
            for (int t = 0; t < T; ++t) {
                const __m512 av = _mm512_load_ps(acts + t * n + k);
                for (int r = 0; r < R; ++r) acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
            }
        }
    }
};

// vdpbf16ps per output and 32 elements: FMA of the odd halves, then of the even halves,
// in MXCSR's FTZ | DAZ mode (BF16EmulatedPolicy).
struct BF16Prompt {
    static constexpr int kRows = 4;
    static constexpr std::size_t kTokens = 5;
    static constexpr std::size_t kChunk = 32;
    static void widen(const std::uint16_t* a, float* out, std::size_t n) {
        for (std::size_t k = 0; k < n; k += 32) {
            const __m512i pairs = avx512_load_bf16_pairs(a + k);
            _mm512_store_ps(out + k, bf16_odd(pairs));
            _mm512_store_ps(out + k + 16, bf16_even(pairs));
        }
    }
    template <int R, int T>
    static void sums(const MatmulTask& task, const float* acts, std::size_t r0, __m512 (&acc)[R][T]) {
        const std::size_t n = task.cols;
        using Mode = BF16EmulatedPolicy::FmaMode;
        {
            [[maybe_unused]] const Mode mode;
            pin_each<Mode>(acc);
            for (std::size_t k = 0; k < n; k += 32) {
                __m512 odd[R], even[R];
                for (int r = 0; r < R; ++r) {
                    const __m512i pairs = avx512_load_bf16_pairs(weight_row(task, r0 + r) + k);
                    odd[r] = bf16_odd(pairs);
                    even[r] = bf16_even(pairs);
                }
                for (int t = 0; t < T; ++t) {
                    const __m512 a_odd = _mm512_load_ps(acts + t * n + k);
                    const __m512 a_even = _mm512_load_ps(acts + t * n + k + 16);
                    for (int r = 0; r < R; ++r) {
                        acc[r][t] = _mm512_fmadd_ps(odd[r], a_odd, acc[r][t]);
                        acc[r][t] = _mm512_fmadd_ps(even[r], a_even, acc[r][t]);
                    }
                }
            }
            pin_each<Mode>(acc);
        }
        pin_each<Mode>(acc);
    }
};

// One tile: Prompt::sums accumulates each output's FMAs, then each is folded.
template <typename Prompt, int R, int T>
void prompt_tile(const MatmulTask& task, const float* acts, std::size_t r0, std::size_t t0) {
    __m512 acc[R][T];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
    Prompt::template sums<R, T>(task, acts, r0, acc);
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) task.out[(t0 + t) * task.out_stride + r0 + r] = avx512_fold16(acc[r][t]);
}

template <typename Prompt, int T>
void prompt_rows(const MatmulTask& task, const float* acts, std::size_t row_begin, std::size_t row_end, std::size_t t0) {
    std::size_t r = row_begin;
    for (; r + Prompt::kRows <= row_end; r += Prompt::kRows) prompt_tile<Prompt, Prompt::kRows, T>(task, acts, r, t0);
    for (; r < row_end; ++r) prompt_tile<Prompt, 1, T>(task, acts, r, t0);
}

template <typename Prompt, int T>
void prompt_rows_up_to(std::size_t tokens, const MatmulTask& task, const float* acts, std::size_t row_begin,
                       std::size_t row_end, std::size_t t0) {
    if constexpr (T > 1) {
        if (tokens < static_cast<std::size_t>(T)) {
            return prompt_rows_up_to<Prompt, T - 1>(tokens, task, acts, row_begin, row_end, t0);
        }
    }
    prompt_rows<Prompt, T>(task, acts, row_begin, row_end, t0);
}

// False when a chunk would not fit the pack (F16 rows over 8192 columns, BF16 over 9824)
// or the order is not the tiled one (columns a multiple of Prompt::kChunk is part of it).
template <typename Prompt>
bool prompt_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    const std::size_t n = task.cols;
    if (task.order != SumOrder::tiled || task.n_tokens < 2 || n % Prompt::kChunk != 0 ||
        n * Prompt::kTokens > kPromptPackFloats) {
        return false;
    }
    alignas(64) float acts[kPromptPackFloats];
    const std::size_t slab_rows = std::max<std::size_t>(Prompt::kRows, kPromptSlabBytes / (2 * n) / Prompt::kRows * Prompt::kRows);
    for (std::size_t first = row_begin; first < row_end; first += slab_rows) {
        const std::size_t end = std::min(row_end, first + slab_rows);
        for (std::size_t t0 = 0; t0 < task.n_tokens; t0 += Prompt::kTokens) {
            const std::size_t tokens = std::min(Prompt::kTokens, task.n_tokens - t0);
            for (std::size_t t = 0; t < tokens; ++t) {
                Prompt::widen(reinterpret_cast<const std::uint16_t*>(task.acts + (t0 + t) * task.act_row_bytes), acts + t * n, n);
            }
            prompt_rows_up_to<Prompt, static_cast<int>(Prompt::kTokens)>(tokens, task, acts, first, end, t0);
        }
    }
    return true;
}

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
    if (!prompt_matmul_rows<F16Prompt>(task, row_begin, row_end)) avx512_float_matmul_rows<F16Policy>(task, row_begin, row_end);
}
void bf16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (!prompt_matmul_rows<BF16Prompt>(task, row_begin, row_end)) {
        avx512_float_matmul_rows<BF16EmulatedPolicy>(task, row_begin, row_end);
    }
}
void f32_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    avx512_float_matmul_rows<F32Policy>(task, row_begin, row_end);
}

}  // namespace ember::kernels::fast::avx512
