// The AVX2 products of the quantized formats (compiled with -mavx2 -mfma -mf16c; see
// variant_kernels.hpp for the rules of a variant translation unit): Q4_0, Q4_K and Q6_K,
// and Q5_0 below them (Q2_K, Q3_K, Q5_K, Q4_1, Q5_1: avx2_quants_low.cpp). They compute what scalar_quants.cpp
// computes, with llama.cpp's own instruction sequence
// (ggml_vec_dot_q4_0_q8_0, _q4_K_q8_K, _q6_K_q8_K, ..., AVX2 branch): maddubs / madd give lane
// i of each 32-byte chunk its elements 4i..4i+3 exactly in int32, then the per-block
// fused multiply-adds and the final folds in the same order. So every output has the
// portable variant's bits; backend_ops_test checks it for every shape.
//
// Products run in tiles of R weight rows x T tokens: a weight block is unpacked once per
// tile and used for T tokens; each output's operations do not depend on the tile.
#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/avx2_common.hpp"
#include "kernels/fast/avx2_kquant_stream.hpp"
#include "kernels/fast/avx2_quant_unpack.hpp"
#include "kernels/fast/prefetch.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx2 {

namespace {

// ---- Q4_0 x Q8_0: acc = fma(d_w * d_a, (float)lane sums, acc)
struct Q4_0 {
    using Block = BlockQ4_0;
    using Act = BlockQ8_0;
    static constexpr std::size_t kBlock = 32;
    struct W {
        __m256i q, abs_q;
        float d;
    };
    static void load(const Block& b, W& u) {
        u.q = _mm256_sub_epi8(legacy_nibbles(b.qs), _mm256_set1_epi8(8));
        u.abs_q = _mm256_sign_epi8(u.q, u.q);
        u.d = half(b.d);
    }
    static void step(const W& u, const Block&, const Act& a, Acc& acc) {
        const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
        const __m256i pairs = _mm256_maddubs_epi16(u.abs_q, _mm256_sign_epi8(qa, u.q));
        const __m256 s = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
        acc.lanes = _mm256_fmadd_ps(_mm256_set1_ps(u.d * half(a.d)), s, acc.lanes);
    }
    static float finish(const Acc& acc) { return avx2_fold8(acc.lanes); }
};

// ---- Q4_K x Q8_K
struct Q4_K {
    using Block = BlockQ4_K;
    using Act = BlockQ8_K;
    static constexpr std::size_t kBlock = 256;
    struct W {
        __m256i low[4], high[4];            // nibbles of the 64-element groups
        __m256i scale_low[4], scale_high[4];  // each group's two sub-block scales, as int16
        __m128i mins;                        // the eight mins, as int16
    };
    static void load(const Block& b, W& u) {
        std::int16_t sc[8], mn[8];
        for (int k = 0; k < 8; ++k) {
            int s, m;
            k4_scale_min(b.scales, k, s, m);
            sc[k] = static_cast<std::int16_t>(s);
            mn[k] = static_cast<std::int16_t>(m);
        }
        u.mins = _mm_loadu_si128(reinterpret_cast<const __m128i*>(mn));
        const __m256i m4 = _mm256_set1_epi8(0xF);
        for (int j = 0; j < 4; ++j) {
            const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * j));
            u.low[j] = _mm256_and_si256(bits, m4);
            u.high[j] = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m4);
            u.scale_low[j] = _mm256_set1_epi16(sc[2 * j]);
            u.scale_high[j] = _mm256_set1_epi16(sc[2 * j + 1]);
        }
    }
    static void step(const W& u, const Block& b, const Act& a, Acc& acc) {
        const float d = a.d * half(b.d);
        const float dmin = -a.d * half(b.dmin);
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
        const __m128i sub_sums = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
        const __m128i prod = _mm_madd_epi16(u.mins, sub_sums);
        acc.min_lanes = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc.min_lanes);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < 4; ++j) {
            const __m256i ql = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 64 * j));
            const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 64 * j + 32));
            const __m256i pl = _mm256_madd_epi16(u.scale_low[j], _mm256_maddubs_epi16(u.low[j], ql));
            const __m256i ph = _mm256_madd_epi16(u.scale_high[j], _mm256_maddubs_epi16(u.high[j], qh));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(pl, ph));
        }
        acc.lanes = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc.lanes);
    }
    static float finish(const Acc& acc) {
        __m128 m = _mm_add_ps(acc.min_lanes, _mm_movehl_ps(acc.min_lanes, acc.min_lanes));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        return avx2_fold8(acc.lanes) + _mm_cvtss_f32(m);
    }
};

// ---- Q4_K x Q8_K, streamed for decode (avx2_kquant_stream.hpp): Q4_K's operations per
// output, one 32-element chunk (sub-block c: nibbles of qs[32 (c / 2)..], low or high) at a time
struct Q4_KStream {
    using Block = BlockQ4_K;
    using Act = BlockQ8_K;
    static constexpr std::size_t kBlock = 256;
    struct Pre {
        __m256i scales;  // the eight scales as int16, in both halves
        __m128i mins;    // the eight mins as int16
    };
    struct Chunk {
        __m256i q, scale;
    };
    static void prepare(const Block& b, Pre& p) {
        const __m256i both = k4_scales_mins(b.scales);
        p.scales = broadcast_half<false>(both);
        p.mins = _mm256_extracti128_si256(both, 1);
    }
    static void begin(const Pre& p, const Block& b, const Act& a, Acc& acc) {
        const float dmin = -a.d * half(b.dmin);
        const __m256i bsums = load256(a.bsums);
        const __m128i sub_sums = _mm_hadd_epi16(_mm256_castsi256_si128(bsums), _mm256_extracti128_si256(bsums, 1));
        const __m128i prod = _mm_madd_epi16(p.mins, sub_sums);
        acc.min_lanes = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(prod), acc.min_lanes);
    }
    template <int c>
    static Chunk chunk(const Pre& p, const Block& b) {
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(load256(b.qs + 32 * (c / 2)), 4 * (c % 2)),
                                           _mm256_set1_epi8(0xF));
        return {q, one_scale<c>(p.scales)};
    }
    static __m256i dot(const Chunk& k, const std::int8_t* a) {
        return _mm256_madd_epi16(k.scale, _mm256_maddubs_epi16(k.q, load256(a)));
    }
    static void end(const Block& b, const Act& a, __m256i sumi, Acc& acc) {
        const float d = a.d * half(b.d);
        acc.lanes = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc.lanes);
    }
    static float finish(const Acc& acc) { return Q4_K::finish(acc); }
};

// ---- Q6_K x Q8_K: lanes of scale * q (q unsigned), minus 32 (sc bsum) per lane pair
struct Q6_K {
    using Block = BlockQ6_K;
    using Act = BlockQ8_K;
    static constexpr std::size_t kBlock = 256;
    struct W {
        __m256i q[8];      // 32-element chunks, 6-bit values
        __m256i scale[8];  // int16: the chunk's first 16 with one scale, the next 16 with the next
        __m256i scales16;  // all 16 scales as int16
    };
    static void load(const Block& b, W& u) {
        unpack_q6_k(b, u.q, u.scale);
        u.scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
    }
    static void step(const W& u, const Block& b, const Act& a, Acc& acc) {
        const float d = a.d * half(b.d);
        const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.bsums));
        const __m256i offset = _mm256_slli_epi32(_mm256_madd_epi16(bsums, u.scales16), 5);
        __m256i sumi = _mm256_setzero_si256();
        for (int c = 0; c < 8; ++c) {
            const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs + 32 * c));
            sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(u.scale[c], _mm256_maddubs_epi16(u.q[c], qa)));
        }
        sumi = _mm256_sub_epi32(sumi, offset);
        acc.lanes = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc.lanes);
    }
    static float finish(const Acc& acc) { return avx2_fold8(acc.lanes); }
};

// ---- Q5_0 x Q8_0: Q4_0's product on q = nibble | 0xF0 where the fifth bit is clear
// (nibble + 16 * bit - 16 as int8), as llama.cpp forms it
struct Q5_0 {
    using Block = BlockQ5_0;
    using Act = BlockQ8_0;
    static constexpr std::size_t kBlock = 32;
    using W = Q4_0::W;
    static void load(const Block& b, W& u) {
        const __m256i high = _mm256_andnot_si256(bytes_from_bits_32(b.qh), _mm256_set1_epi8(static_cast<char>(0xF0)));
        u.q = _mm256_or_si256(legacy_nibbles(b.qs), high);
        u.abs_q = _mm256_sign_epi8(u.q, u.q);
        u.d = half(b.d);
    }
    static void step(const W& u, const Block&, const Act& a, Acc& acc) {
        const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.qs));
        const __m256i pairs = _mm256_maddubs_epi16(u.abs_q, _mm256_sign_epi8(qa, u.q));
        const __m256 s = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
        acc.lanes = _mm256_fmadd_ps(_mm256_set1_ps(u.d * half(a.d)), s, acc.lanes);
    }
    static float finish(const Acc& acc) { return avx2_fold8(acc.lanes); }
};

template <typename F>
struct QuantTile {
    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        const std::size_t n_blocks = task.cols / F::kBlock;
        const typename F::Block* w[R];
        const typename F::Act* a[T];
        for (int r = 0; r < R; ++r) w[r] = reinterpret_cast<const typename F::Block*>(task.weights + (r0 + r) * task.weight_row_bytes);
        for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const typename F::Act*>(task.acts + (t0 + t) * task.act_row_bytes);
        Acc acc[R][T];
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) acc[r][t] = {_mm256_setzero_ps(), _mm_setzero_ps(), 0.0f};
        // decode streams each row once: the next tile's rows are pulled into L1 meanwhile
        const NextRowsPrefetch prefetch(task, r0 + R, T == 1 ? R : 0, n_blocks);
        for (std::size_t b = 0; b < n_blocks; ++b) {
            prefetch(b);
            typename F::W u[R];
            for (int r = 0; r < R; ++r) F::load(w[r][b], u[r]);
            for (int t = 0; t < T; ++t)
                for (int r = 0; r < R; ++r) F::step(u[r], w[r][b], a[t][b], acc[r][t]);
        }
        for (int r = 0; r < R; ++r)
            for (int t = 0; t < T; ++t) task.out[(t0 + t) * task.out_stride + r0 + r] = F::finish(acc[r][t]);
    }
};

template <typename F>
void quant_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.n_tokens == 1) walk_rows<QuantTile<F>, 4, 1>(task, row_begin, row_end);
    else walk_rows<QuantTile<F>, 2, 4>(task, row_begin, row_end);
}

}  // namespace

void q4_0_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) {
    if (t.n_tokens == 1 || !q4_0_prompt_rows(t, r0, r1)) quant_rows<Q4_0>(t, r0, r1);
}
void q4_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) {
    // decode: a row at a time, chunk by chunk (a whole super-block's unpack spills AVX2's 16 registers)
    if (t.n_tokens == 1) walk_rows<StreamTile<Q4_KStream>, kStreamDecodeRows, 1>(t, r0, r1);
    else if (!q4_k_prompt_rows(t, r0, r1)) quant_rows<Q4_K>(t, r0, r1);
}
void q6_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) {
    // decode: 2-row tiles (a super-block's unpack of 4 rows spills AVX2's 16 registers)
    if (t.n_tokens == 1) walk_rows<QuantTile<Q6_K>, 2, 1>(t, r0, r1);
    else if (!q6_k_prompt_rows(t, r0, r1)) quant_rows<Q6_K>(t, r0, r1);
}
void q5_0_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) {
    if (t.n_tokens == 1 || !q5_0_prompt_rows(t, r0, r1)) quant_rows<Q5_0>(t, r0, r1);
}

}  // namespace ember::kernels::fast::avx2
