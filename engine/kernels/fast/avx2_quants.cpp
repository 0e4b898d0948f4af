// The AVX2 products of the quantized formats (compiled with -mavx2 -mfma -mf16c; see
// variant_kernels.hpp for the rules of a variant translation unit): Q4_0, Q4_K and Q6_K,
// and Q5_0 below them (Q2_K, Q3_K, Q5_K, Q4_1, Q5_1: avx2_quants_low.cpp). They compute what scalar_quants.cpp
// computes, with llama.cpp's own instruction sequence
// (ggml_vec_dot_q4_0_q8_0, _q4_K_q8_K, _q6_K_q8_K, ..., AVX2 branch): maddubs / madd give lane
// i of each 32-byte chunk its elements 4i..4i+3 exactly in int32, then the per-block
// fused multiply-adds and the final folds in the same order. So every output has the
// portable variant's bits; backend_ops_test checks it for every shape.
//
// Products run in the tiles of avx2_quant_tiles.hpp: Q4_K streams its super-blocks, the
// others unpack a block once per tile and use it for the tile's T tokens.
#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/avx2_common.hpp"
#include "kernels/fast/avx2_quant_tiles.hpp"
#include "kernels/fast/avx2_quant_unpack.hpp"
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

// ---- Q4_K x Q8_K, streamed (avx2_quant_tiles.hpp): min_lanes = fma(dmin, m[2k] B[2k] +
// m[2k+1] B[2k+1], min_lanes) (four lanes), acc_i = fma(d, lane sums of scale * q, acc_i);
// fold(acc) + ((m0 + m2) + (m1 + m3))
struct Q4_K : K4Stream<BlockQ4_K> {
    static void begin(const Pre& p, const Block& b, const Act& a, Acc& acc) {
        const float dmin = -a.d * half(b.dmin);
        acc.min_lanes = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(k4_min_products(p.mins, a)), acc.min_lanes);
    }
    template <int c>
    static Chunk chunk(const Pre& p, const Block& b) {
        return {k4_nibbles<c>(b.qs), one_scale<c>(p.scales)};
    }
    static float finish(const Acc& acc) {
        __m128 m = _mm_add_ps(acc.min_lanes, _mm_movehl_ps(acc.min_lanes, acc.min_lanes));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        return avx2_fold8(acc.lanes) + _mm_cvtss_f32(m);
    }
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

}  // namespace

void q4_0_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) {
    if (t.n_tokens == 1 || !q4_0_prompt_rows(t, r0, r1)) quant_rows<Q4_0>(t, r0, r1);
}
void q4_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) {
    // streamed: a whole super-block's unpack spills AVX2's 16 registers
    if (t.n_tokens == 1 || !q4_k_prompt_rows(t, r0, r1)) stream_rows<Q4_K>(t, r0, r1);
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
