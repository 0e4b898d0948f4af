// The AVX2 prompt products (2 or more tokens) of the weights whose dot product takes Q8_0
// activations: Q8_0, Q4_0 and Q5_0 (compiled with -mavx2 -mfma -mf16c; see
// variant_kernels.hpp for the rules of a variant translation unit).
//
// The float work per output is llama.cpp's (model-math §2.9), unchanged: per block, eight
// int32 lane sums s_i (elements 4i..4i+3, exact), acc_i = fma(d_w * d_a, (float)s_i,
// acc_i), then the fold ((a0+a4)+(a2+a6))+((a1+a5)+(a3+a7)). Only the way the exact s_i
// are formed differs from the decode tiles (avx2_kernels.cpp): there, |w| * sign(a, w)
// with maddubs, whose sign step competes with maddubs and madd for the same vector
// pipes; here both operands are widened to int16 once and s_i is two vpmaddwd and an add,
// with no sign step (the walk over slabs, chunks and tiles is q8_0_prompt_walk.hpp's):
//   - the weights of a slab of rows (up to kSlabBlocks blocks, 256 KiB: kept in L2 while
//     every chunk of tokens is multiplied with them) are widened once per call, their
//     scales converted to F32;
//   - the activations of a chunk of up to kChunkTokens tokens are widened once per slab.
// Both are laid out so that int32 lane i of one vpmaddwd holds elements 4i, 4i+1 (first
// register) or 4i+2, 4i+3 (second register) of the block: Pairs16 below.
// Measured on a Zen 4 core (a test program with these tiles in L1): 2.2-2.9 cycles per
// output and block against 3.0-3.6 for the sign / maddubs tiles.
#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/avx2_common.hpp"
#include "kernels/fast/avx2_quant_unpack.hpp"
#include "kernels/fast/q8_0_prompt_walk.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx2 {

namespace {

// One block's 32 values as int16: q[0] int32 lane i = elements 4i, 4i+1; q[1] = 4i+2, 4i+3.
struct alignas(64) Pairs16 {
    __m256i q[2];
};

// 32 int8 values (element order) to Pairs16: the 16-bit words (element pairs) 0, 2, .., 14
// then 1, 3, .., 15, each byte sign-extended.
inline void widen_values(__m256i v, Pairs16& out) {
    // within each 128-bit half: even words to the low 8 bytes, odd words to the high 8
    const __m256i split = _mm256_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
                                           0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
    const __m256i halves = _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, split), 0xD8);  // even words, odd words
    out.q[0] = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(halves));
    out.q[1] = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(halves, 1));
}

// n tokens of Q8_0 activations (`row_bytes` apart) widened: token t block b at
// q[t * n_blocks + b], its scale at d[..].
void widen_tokens(const std::byte* acts, std::size_t row_bytes, std::size_t n, std::size_t n_blocks, Pairs16* q,
                  float* d) {
    for (std::size_t t = 0; t < n; ++t) {
        const auto* a = reinterpret_cast<const BlockQ8_0*>(acts + t * row_bytes);
        for (std::size_t b = 0; b < n_blocks; ++b) {
            widen_values(load_bytes(a[b].qs), q[t * n_blocks + b]);
            d[t * n_blocks + b] = _cvtsh_ss(a[b].d);
        }
    }
}

// The walk's kernel (q8_0_prompt_walk.hpp): element e (row or token) block b at
// q[e * n_blocks + b], its scale at d[..]. The tokens are the product's own widened ones
// (MatmulTask::token_pairs, once per product for every thread) when it has them.
struct Widening {
    struct Slab {
        Pairs16* q;
        float* d;
    };
    struct Pack {
        const Pairs16* q;
        const float* d;
    };
    static constexpr std::size_t kSlabBlocks = 4096;  // widened weights per slab: 256 KiB (+ 16 KiB of scales)
    static constexpr std::size_t kPackBlocks = 4096;  // widened activations per chunk: 256 KiB (+ 16 KiB of scales)
    static constexpr std::size_t kChunkTokens = 16;
    struct Buffers {
        Pairs16 slab_q[kSlabBlocks];
        float slab_d[kSlabBlocks];
        Pairs16 pack_q[kPackBlocks];
        float pack_d[kPackBlocks];
        Slab slab() { return {slab_q, slab_d}; }
    };

    template <typename W>
    static void unpack_rows(const MatmulTask& task, std::size_t first, std::size_t count, const Slab& out) {
        const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
        for (std::size_t r = 0; r < count; ++r) {
            const auto* w = reinterpret_cast<const typename W::Block*>(task.weights + (first + r) * task.weight_row_bytes);
            for (std::size_t b = 0; b < n_blocks; ++b) {
                widen_values(W::values(w[b]), out.q[r * n_blocks + b]);
                out.d[r * n_blocks + b] = _cvtsh_ss(w[b].d);
            }
        }
    }

    static Pack pack_tokens(const MatmulTask& task, std::size_t first, std::size_t count, Buffers& buffers) {
        const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
        if (task.token_pairs) {
            // TokenPairs are Pairs16's bytes, written by pack_token_pairs below
            return {reinterpret_cast<const Pairs16*>(task.token_pairs + first * n_blocks),
                    task.token_pair_scales + first * n_blocks};
        }
        widen_tokens(task.acts + first * task.act_row_bytes, task.act_row_bytes, count, n_blocks, buffers.pack_q,
                     buffers.pack_d);
        return {buffers.pack_q, buffers.pack_d};
    }

    // The tile's scale products d_w * d_a for blocks [b0, b0 + n): product (r, t) of block
    // b0 + i at out[(r * T + t) * kScaleGroup + i]. Eight blocks a vmulps, so the block loop
    // reads each output's product with a broadcast load (load ports) instead of a vmulps on
    // the two pipes its madds, conversion and FMA already fill (measured on Zen 3).
    static constexpr std::size_t kScaleGroup = 32;
    template <int R, int T>
    static void scale_products(const float* const (&wd)[R], const float* const (&ad)[T], std::size_t b0,
                               std::size_t n, float* out) {
        std::size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            for (int r = 0; r < R; ++r) {
                const __m256 dw = _mm256_loadu_ps(wd[r] + b0 + i);
                for (int t = 0; t < T; ++t)
                    _mm256_store_ps(out + (r * T + t) * kScaleGroup + i, _mm256_mul_ps(dw, _mm256_loadu_ps(ad[t] + b0 + i)));
            }
        }
        for (; i < n; ++i)
            for (int r = 0; r < R; ++r)
                for (int t = 0; t < T; ++t) out[(r * T + t) * kScaleGroup + i] = wd[r][b0 + i] * ad[t][b0 + i];
    }

    // R widened rows (from slab row k) x T widened tokens (from chunk token j); the outputs
    // go to task row r0 + k.., token t0 + j...
    template <int R, int T>
    static void tile(const MatmulTask& task, const Slab& rows, std::size_t k, std::size_t r0, const Pack& tokens,
                     std::size_t j, std::size_t t0) {
        const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
        const Pairs16* w[R];
        const float* wd[R];
        const Pairs16* a[T];
        const float* ad[T];
        for (int r = 0; r < R; ++r) {
            w[r] = rows.q + (k + r) * n_blocks;
            wd[r] = rows.d + (k + r) * n_blocks;
        }
        for (int t = 0; t < T; ++t) {
            a[t] = tokens.q + (j + t) * n_blocks;
            ad[t] = tokens.d + (j + t) * n_blocks;
        }
        // Every loop over the tile is unrolled: one GCC leaves rolled keeps acc in memory,
        // stored every block (a fifth of the AVX2 Q8_0 prefill on Zen 3).
        __m256 acc[R][T];
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
            for (int t = 0; t < T; ++t) acc[r][t] = _mm256_setzero_ps();
        alignas(32) float scales[R * T * kScaleGroup];
        for (std::size_t b0 = 0; b0 < n_blocks; b0 += kScaleGroup) {
            const std::size_t n = n_blocks - b0 < kScaleGroup ? n_blocks - b0 : kScaleGroup;
            scale_products<R, T>(wd, ad, b0, n, scales);
            for (std::size_t i = 0; i < n; ++i) {
                const std::size_t b = b0 + i;
                __m256i w0[R], w1[R];
#pragma GCC unroll 8
                for (int r = 0; r < R; ++r) {
                    w0[r] = _mm256_load_si256(&w[r][b].q[0]);
                    w1[r] = _mm256_load_si256(&w[r][b].q[1]);
                }
#pragma GCC unroll 4
                for (int t = 0; t < T; ++t) {
                    const __m256i x0 = _mm256_load_si256(&a[t][b].q[0]);
                    const __m256i x1 = _mm256_load_si256(&a[t][b].q[1]);
#pragma GCC unroll 2
                    for (int r = 0; r < R; ++r) {
                        const __m256i s = _mm256_add_epi32(_mm256_madd_epi16(x0, w0[r]), _mm256_madd_epi16(x1, w1[r]));
                        const __m256 d = _mm256_broadcast_ss(scales + (r * T + t) * kScaleGroup + i);
                        acc[r][t] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc[r][t]);
                    }
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

void pack_token_pairs(const std::byte* acts, std::size_t row_bytes, std::size_t n_tokens, std::size_t n,
                      TokenPairs* pairs, float* scales) {
    static_assert(sizeof(TokenPairs) == sizeof(Pairs16) && alignof(TokenPairs) == alignof(Pairs16));
    widen_tokens(acts, row_bytes, n_tokens, n / kQ8_0BlockSize, reinterpret_cast<Pairs16*>(pairs), scales);
}

bool q8_0_prompt_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    return q8_0_prompt_walk<Widening, Q8_0Values>(task, row_begin, row_end);
}
bool q4_0_prompt_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    return q8_0_prompt_walk<Widening, Q4_0Values>(task, row_begin, row_end);
}
bool q5_0_prompt_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    return q8_0_prompt_walk<Widening, Q5_0Values>(task, row_begin, row_end);
}

}  // namespace ember::kernels::fast::avx2
