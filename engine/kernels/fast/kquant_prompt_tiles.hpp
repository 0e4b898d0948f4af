// The prompt products (2 or more tokens) of Q4_K and Q6_K on 256-bit vectors, shared by
// the avx2 set (avx2_kquant_prompt.cpp, -mavx2 -mfma -mf16c) and the avxvnni set
// (avxvnni_kquant_prompt.cpp, the same and -mavxvnni), each instantiating it with its own
// chunk sum: a header of templates with internal linkage (see variant_kernels.hpp for the
// rules of a variant translation unit).
//
// Each output's operations are those of avx2_quants.cpp's Q4_K / Q6_K step and finish
// (llama.cpp's ggml_vec_dot_q4_K_q8_K / _q6_K_q8_K, AVX2 branch): per super-block the
// exact int32 lanes of scale * maddubs(q, a) summed over the eight 32-element chunks, one
// fused multiply-add with d; Q4_K's min terms in four lanes, Q6_K's 32 * madd(bsums,
// scales) offset; the same folds. Only the register blocking differs. The decode tiles
// unpack a whole super-block of each row into registers (8 value and 8 scale registers
// per row: more than AVX2's 16, so every step spills). Here
//   - a slab of rows (up to kSlabBlocks super-blocks, ~300 KiB, kept in L2 while every
//     token is multiplied with it) is unpacked once per call into RowBlock entries: the
//     eight chunks' unsigned values and int16 scale vectors, the mins or scales, the F32 d;
//   - a tile of 2 rows x 4 tokens keeps only its eight int32 lane sums in registers,
//     with each chunk's value and scale register of its two rows: per chunk and output a
//     maddubs (activations as its memory operand), then the set's ChunkSum: AVX2's madd
//     and add, or AVX-VNNI's vpdpwssd, the two in one (int16 pairs times int16 scales
//     added to int32 lanes, wrapping as the add does: the same exact sums).
#pragma once

#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/avx2_common.hpp"
#include "kernels/fast/avx2_quant_unpack.hpp"
#include "kernels/fast/kernel_types.hpp"

namespace ember::kernels::fast {
namespace {

// One row's super-block, unpacked: chunk c's 32 unsigned values (elements 32c..32c+31)
// and the int16 scales its maddubs pairs take; `extra` the mins (Q4_K, eight int16 in the
// low half) or the sixteen scales as int16 (Q6_K); d (and dmin) as F32.
struct alignas(32) RowBlock {
    __m256i q[8];
    __m256i scale[8];
    __m256i extra;
    float d, dmin;
};

// ---- Q4_K x Q8_K (avx2_quants.cpp Q4_K)
struct Q4_K {
    using Block = BlockQ4_K;
    static void unpack(const Block& b, RowBlock& u) {
        std::int16_t mn[16] = {};
        const __m256i m4 = _mm256_set1_epi8(0xF);
        for (int k = 0; k < 8; ++k) {
            int s, m;
            k4_scale_min(b.scales, k, s, m);
            mn[k] = mn[k + 8] = static_cast<std::int16_t>(m);  // both halves: two tokens' min terms at once
            u.scale[k] = _mm256_set1_epi16(static_cast<short>(s));
        }
        for (int j = 0; j < 4; ++j) {
            const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * j));
            u.q[2 * j] = _mm256_and_si256(bits, m4);
            u.q[2 * j + 1] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
        }
        u.extra = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(mn));
        u.d = _cvtsh_ss(b.d);
        u.dmin = _cvtsh_ss(b.dmin);
    }
    // Output (r, t): eight lanes, and the four min lanes in half `t % 2` of mins[r][t / 2]
    // (two tokens' min terms share one 256-bit madd, conversion and FMA: the same lanes'
    // operations as the 128-bit ones of the decode step).
    template <int R, int T>
    struct Acc {
        __m256 lanes[R][T];
        __m256 mins[R][(T + 1) / 2];
    };
    template <int R, int T>
    static void zero(Acc<R, T>& acc) {
        for (int r = 0; r < R; ++r) {
            for (int t = 0; t < T; ++t) acc.lanes[r][t] = _mm256_setzero_ps();
            for (int p = 0; p < (T + 1) / 2; ++p) acc.mins[r][p] = _mm256_setzero_ps();
        }
    }
    // Super-block b of the tile: lanes += (d_a * d_w) * sumi; min lanes -= (d_a * dmin_w) *
    // madd(mins, sub_sums(a)), the decode step's fma with -d_a * dmin_w (negation is exact).
    template <int R, int T>
    static void add_blocks(const RowBlock* const* w, const BlockQ8_K* const* a, std::size_t b,
                           const __m256i (&sumi)[R][T], Acc<R, T>& acc) {
        constexpr int P = (T + 1) / 2;
        __m128i sub[2 * P];
        __m128 da[2 * P];
        for (int t = 0; t < 2 * P; ++t) {
            if (t < T) {
                const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].bsums));
                sub[t] = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
                da[t] = _mm_broadcast_ss(&a[t][b].d);
            } else {
                sub[t] = _mm_setzero_si128();
                da[t] = _mm_setzero_ps();
            }
        }
        __m256i sub_pair[P];
        __m256 da_pair[P];
        for (int p = 0; p < P; ++p) {
            sub_pair[p] = _mm256_setr_m128i(sub[2 * p], sub[2 * p + 1]);
            da_pair[p] = _mm256_setr_m128(da[2 * p], da[2 * p + 1]);
        }
        for (int r = 0; r < R; ++r) {
            const RowBlock& u = w[r][b];
            const __m256 d = _mm256_broadcast_ss(&u.d);
            const __m256 dmin = _mm256_broadcast_ss(&u.dmin);
            for (int t = 0; t < T; ++t) {
                const __m256 scale = _mm256_mul_ps(_mm256_broadcast_ss(&a[t][b].d), d);
                acc.lanes[r][t] = _mm256_fmadd_ps(scale, _mm256_cvtepi32_ps(sumi[r][t]), acc.lanes[r][t]);
            }
            for (int p = 0; p < P; ++p) {
                const __m256i prod = _mm256_madd_epi16(u.extra, sub_pair[p]);
                acc.mins[r][p] = _mm256_fnmadd_ps(_mm256_mul_ps(da_pair[p], dmin), _mm256_cvtepi32_ps(prod), acc.mins[r][p]);
            }
        }
    }
    template <int R, int T>
    static float finish(const Acc<R, T>& acc, int r, int t) {
        const __m256 pair = acc.mins[r][t / 2];
        __m128 m = t % 2 == 0 ? _mm256_castps256_ps128(pair) : _mm256_extractf128_ps(pair, 1);
        m = _mm_add_ps(m, _mm_movehl_ps(m, m));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        return avx2_fold8(acc.lanes[r][t]) + _mm_cvtss_f32(m);
    }
};

// ---- Q6_K x Q8_K (avx2_quants.cpp Q6_K)
struct Q6_K {
    using Block = BlockQ6_K;
    static void unpack(const Block& b, RowBlock& u) {
        unpack_q6_k(b, u.q, u.scale);
        u.extra = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
        u.d = _cvtsh_ss(b.d);
        u.dmin = 0.0f;
    }
    template <int R, int T>
    struct Acc {
        __m256 lanes[R][T];
    };
    template <int R, int T>
    static void zero(Acc<R, T>& acc) {
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) acc.lanes[r][t] = _mm256_setzero_ps();
    }
    template <int R, int T>
    static void add_blocks(const RowBlock* const* w, const BlockQ8_K* const* a, std::size_t b,
                           const __m256i (&sumi)[R][T], Acc<R, T>& acc) {
        for (int t = 0; t < T; ++t) {
            const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].bsums));
            for (int r = 0; r < R; ++r) {
                const RowBlock& u = w[r][b];
                const float d = a[t][b].d * u.d;
                const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, u.extra), 5);
                acc.lanes[r][t] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi[r][t], offset)),
                                                  acc.lanes[r][t]);
            }
        }
    }
    template <int R, int T>
    static float finish(const Acc<R, T>& acc, int r, int t) {
        return avx2_fold8(acc.lanes[r][t]);
    }
};

constexpr std::size_t kSlabBlocks = 512;  // RowBlock entries per slab: 304 KiB on the stack
constexpr int kTileRows = 2;
constexpr int kTileTokens = 4;
constexpr std::size_t kChunkTokens = 16;

// The int32 lane sums of super-block b for the tile's R rows x T tokens. Not inlined: on its
// own, GCC keeps the R x T sums in registers; inlined into the walk, it spilled them every chunk.
template <typename S, int R, int T>
[[gnu::noinline]] void kquant_block_sums(const RowBlock* const* w, const BlockQ8_K* const* a, std::size_t b,
                                         __m256i (&sumi)[R][T]) {
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) sumi[r][t] = _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int c = 0; c < 8; ++c) {
        __m256i q[R], scale[R];
        for (int r = 0; r < R; ++r) {
            q[r] = _mm256_load_si256(&w[r][b].q[c]);
            scale[r] = _mm256_load_si256(&w[r][b].scale[c]);
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; ++t) {
            const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs + 32 * c));
#pragma GCC unroll 2
            for (int r = 0; r < R; ++r) {
                sumi[r][t] = S::add(sumi[r][t], scale[r], _mm256_maddubs_epi16(q[r], x));
            }
        }
    }
}

// R unpacked rows (slab entries from row k) x T tokens (from t0) of rows r0 + k...; S::add
// (sumi, scale, products) returns sumi + madd(scale, products).
template <typename F, typename S, int R, int T>
void kquant_tile(const MatmulTask& task, const RowBlock* slab, std::size_t k, std::size_t r0, std::size_t t0) {
    const std::size_t n_blocks = task.cols / 256;
    const RowBlock* w[R];
    const BlockQ8_K* a[T];
    for (int r = 0; r < R; ++r) w[r] = slab + (k + r) * n_blocks;
    for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const BlockQ8_K*>(task.acts + (t0 + t) * task.act_row_bytes);
    typename F::template Acc<R, T> acc;
    F::zero(acc);
    for (std::size_t b = 0; b < n_blocks; ++b) {
        __m256i sumi[R][T];
        kquant_block_sums<S, R, T>(w, a, b, sumi);
        F::add_blocks(w, a, b, sumi, acc);
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t) task.out[(t0 + t) * task.out_stride + r0 + k + r] = F::finish(acc, r, t);
}

// Tokens [t, t_end) of slab rows k.. (R of them).
template <typename F, typename S, int R>
void kquant_tile_row(const MatmulTask& task, const RowBlock* slab, std::size_t k, std::size_t r0, std::size_t t,
                     std::size_t t_end) {
    for (; t + kTileTokens <= t_end; t += kTileTokens) kquant_tile<F, S, R, kTileTokens>(task, slab, k, r0, t);
    switch (t_end - t) {
        case 3: kquant_tile<F, S, R, 3>(task, slab, k, r0, t); break;
        case 2: kquant_tile<F, S, R, 2>(task, slab, k, r0, t); break;
        case 1: kquant_tile<F, S, R, 1>(task, slab, k, r0, t); break;
        default: break;
    }
}

// Rows [row_begin, row_end) x every token; false (nothing computed) for rows over
// kSlabBlocks super-blocks.
template <typename F, typename S>
bool kquant_prompt_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    const std::size_t n_blocks = task.cols / 256;
    if (n_blocks == 0 || n_blocks > kSlabBlocks) return false;
    const std::size_t slab_rows = kSlabBlocks / n_blocks;
    RowBlock slab[kSlabBlocks];
    for (std::size_t first = row_begin; first < row_end; first += slab_rows) {
        const std::size_t count = row_end - first < slab_rows ? row_end - first : slab_rows;
        for (std::size_t r = 0; r < count; ++r) {
            const auto* w = reinterpret_cast<const typename F::Block*>(task.weights + (first + r) * task.weight_row_bytes);
            for (std::size_t b = 0; b < n_blocks; ++b) F::unpack(w[b], slab[r * n_blocks + b]);
        }
        // a chunk of tokens' activations (up to 150 KiB) stays in L2 with the slab
        for (std::size_t t0 = 0; t0 < task.n_tokens; t0 += kChunkTokens) {
            const std::size_t t1 = task.n_tokens - t0 < kChunkTokens ? task.n_tokens : t0 + kChunkTokens;
            std::size_t k = 0;
            for (; k + kTileRows <= count; k += kTileRows) kquant_tile_row<F, S, kTileRows>(task, slab, k, first, t0, t1);
            for (; k < count; ++k) kquant_tile_row<F, S, 1>(task, slab, k, first, t0, t1);
        }
    }
    return true;
}

}  // namespace
}  // namespace ember::kernels::fast
