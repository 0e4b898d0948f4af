// The AVX-VNNI products of the weights whose dot product takes Q8_0 activations: Q8_0,
// Q4_0 and Q5_0 (compiled with -mavx2 -mfma -mf16c -mavxvnni; see variant_kernels.hpp for
// the rules of a variant translation unit). AVX-VNNI is the 256-bit, VEX-encoded vpdpbusd
// of Alder Lake and later Intel cores, Sapphire Rapids and Zen 5: the AVX2 set with one
// instruction more.
//
// Prompts (2 or more tokens) take the walk of avx2_q8_0_prompt.cpp (q8_0_prompt_walk.hpp:
// weights unpacked once per slab of rows kept in L2, activations once per chunk of tokens,
// 2x4 tiles). Only the exact int32
// lane sums s_i (elements 4i..4i+3 of a block) are formed differently: one vpdpbusd
// instead of two vpmaddwd and an add on operands widened to int16. vpdpbusd multiplies
// unsigned by signed bytes, so the activations enter biased, a + 128 (a xor 0x80 read as
// uint8, for every int8 a), and the bias leaves through the accumulator's start value:
//   s_i = dpbusd(-128 * sum_i(w), a + 128, w)
// with sum_i(w) the lane sums of the weights, computed once per slab. Integer arithmetic,
// exact, so the float work per output (llama.cpp's, model-math §2.9: acc_i = fma(d_w * d_a,
// (float)s_i, acc_i), then the fold) and every bit are the AVX2 kernels' (backend_ops_test).
// The operands are half the bytes of the widened ones, so twice the tokens fit a chunk.
// Decode (one token), and rows too wide for a slab, run the AVX2 kernels.
#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/avx2_common.hpp"
#include "kernels/fast/avx2_quant_unpack.hpp"
#include "kernels/fast/q8_0_prompt_walk.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avxvnni {

namespace {

// The walk's kernel (q8_0_prompt_walk.hpp). Slab row k block b at values[k * n_blocks + b]
// (int8, element order), bias[..] = -128 * the block's lane sums (int32 lane i: elements
// 4i..4i+3), scale at d[..]; pack token j block b at values[j * n_blocks + b] (a + 128 as
// uint8), scale at d[..].
struct Vnni {
    struct Slab {
        __m256i* values;
        __m256i* bias;
        float* d;
    };
    struct Pack {
        const __m256i* values;
        const float* d;
    };
    static constexpr std::size_t kSlabBlocks = 4096;  // unpacked weights: 256 KiB with their bias (+ 16 KiB of scales)
    static constexpr std::size_t kPackBlocks = 4096;  // biased activations: 128 KiB (+ 16 KiB of scales)
    static constexpr std::size_t kChunkTokens = 32;
    struct Buffers {
        __m256i slab_values[kSlabBlocks];
        __m256i slab_bias[kSlabBlocks];
        float slab_d[kSlabBlocks];
        __m256i pack_values[kPackBlocks];
        float pack_d[kPackBlocks];
        Slab slab() { return {slab_values, slab_bias, slab_d}; }
    };

    template <typename W>
    static void unpack_rows(const MatmulTask& task, std::size_t first, std::size_t count, const Slab& out) {
        const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
        const __m256i minus_128 = _mm256_set1_epi8(static_cast<char>(0x80));  // as uint8: 128
        for (std::size_t r = 0; r < count; ++r) {
            const auto* w = reinterpret_cast<const typename W::Block*>(task.weights + (first + r) * task.weight_row_bytes);
            for (std::size_t b = 0; b < n_blocks; ++b) {
                const __m256i v = W::values(w[b]);
                const std::size_t i = r * n_blocks + b;
                out.values[i] = v;
                // 128 * sum_i(w) by the same instruction, then negated
                out.bias[i] = _mm256_sub_epi32(_mm256_setzero_si256(),
                                               _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), minus_128, v));
                out.d[i] = _cvtsh_ss(w[b].d);
            }
        }
    }

    static Pack pack_tokens(const MatmulTask& task, std::size_t first, std::size_t count, Buffers& buffers) {
        const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
        const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));  // a xor 0x80 = a + 128 as uint8
        for (std::size_t t = 0; t < count; ++t) {
            const auto* a = reinterpret_cast<const BlockQ8_0*>(task.acts + (first + t) * task.act_row_bytes);
            for (std::size_t b = 0; b < n_blocks; ++b) {
                buffers.pack_values[t * n_blocks + b] = _mm256_xor_si256(load_bytes(a[b].qs), flip);
                buffers.pack_d[t * n_blocks + b] = _cvtsh_ss(a[b].d);
            }
        }
        return {buffers.pack_values, buffers.pack_d};
    }

    // R slab rows (from row k) x T chunk tokens (from token j); the outputs go to task row
    // r0 + k.., token t0 + j...
    template <int R, int T>
    static void tile(const MatmulTask& task, const Slab& rows, std::size_t k, std::size_t r0, const Pack& tokens,
                     std::size_t j, std::size_t t0) {
        const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
        const __m256i* w[R];
        const __m256i* bias[R];
        const float* wd[R];
        const __m256i* a[T];
        const float* ad[T];
        for (int r = 0; r < R; ++r) {
            w[r] = rows.values + (k + r) * n_blocks;
            bias[r] = rows.bias + (k + r) * n_blocks;
            wd[r] = rows.d + (k + r) * n_blocks;
        }
        for (int t = 0; t < T; ++t) {
            a[t] = tokens.values + (j + t) * n_blocks;
            ad[t] = tokens.d + (j + t) * n_blocks;
        }
        // Every loop over the tile is unrolled: one GCC leaves rolled keeps acc in memory,
        // stored every block (a fifth of the AVX2 Q8_0 prefill on Zen 3).
        __m256 acc[R][T];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
        for (std::size_t b = 0; b < n_blocks; ++b) {
            __m256i wv[R], wb[R];
            __m256 d[R];
#pragma GCC unroll 8
            for (int r = 0; r < R; ++r) {
                wv[r] = _mm256_load_si256(w[r] + b);
                wb[r] = _mm256_load_si256(bias[r] + b);
                d[r] = _mm256_broadcast_ss(wd[r] + b);
            }
#pragma GCC unroll 4
            for (int t = 0; t < T; ++t) {
                const __m256i x = _mm256_load_si256(a[t] + b);
                const __m256 dt = _mm256_broadcast_ss(ad[t] + b);
#pragma GCC unroll 2
                for (int r = 0; r < R; ++r) {
                    const __m256i s = _mm256_dpbusd_avx_epi32(wb[r], x, wv[r]);
                    acc[r][t] = _mm256_fmadd_ps(_mm256_mul_ps(d[r], dt), _mm256_cvtepi32_ps(s), acc[r][t]);
                }
            }
        }
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) task.out[(t0 + j + t) * task.out_stride + r0 + k + r] = avx2_fold8(acc[r][t]);
    }
};

}  // namespace

void q8_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.n_tokens == 1 || !q8_0_prompt_walk<Vnni, Q8_0Values>(task, row_begin, row_end))
        avx2::q8_0_matmul_rows(task, row_begin, row_end);
}
void q4_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.n_tokens == 1 || !q8_0_prompt_walk<Vnni, Q4_0Values>(task, row_begin, row_end))
        avx2::q4_0_matmul_rows(task, row_begin, row_end);
}
void q5_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.n_tokens == 1 || !q8_0_prompt_walk<Vnni, Q5_0Values>(task, row_begin, row_end))
        avx2::q5_0_matmul_rows(task, row_begin, row_end);
}

}  // namespace ember::kernels::fast::avxvnni
