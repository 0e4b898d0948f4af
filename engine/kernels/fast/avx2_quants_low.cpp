// The AVX2 products of Q2_K, Q3_K and Q5_K (and, at the end, Q4_1 and Q5_1), compiled
// with -mavx2 -mfma -mf16c (see variant_kernels.hpp for the rules of a variant
// translation unit). They compute what scalar_quants.cpp computes, with llama.cpp's own
// instruction sequence (ggml_vec_dot_q2_K_q8_K, _q3_K_q8_K, _q5_K_q8_K, _q4_1_q8_1,
// _q5_1_q8_1, AVX2 branch): maddubs / madd give lane i of each 32-byte chunk its
// elements 4i..4i+3 exactly in int32, the chunks of a super-block are added as exact
// int32, then the per-block fused multiply-adds and the final folds in the same order.
// So every output has the portable variant's bits; backend_ops_test checks it.
//
// The K-quants stream one 32-element chunk at a time, Q4_1 and Q5_1 unpack a block once per
// tile (avx2_quant_tiles.hpp). The per-output operations do not depend on the tile.
#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/avx2_common.hpp"
#include "kernels/fast/avx2_quant_tiles.hpp"
#include "kernels/fast/avx2_quant_unpack.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx2 {

namespace {

// Chunk c of Q2_K / Q3_K's 2-bit quants: qs[32 (c / 4) + l] >> 2 (c % 4), 0..3
template <int c>
__m256i two_bit_chunk(const std::uint8_t* qs) {
    return _mm256_and_si256(_mm256_srli_epi16(load256(qs + 32 * (c / 4)), 2 * (c % 4)), _mm256_set1_epi8(3));
}

// ---- Q2_K x Q8_K: acc_i = fma(dmin, m[2i] bsum[2i] + m[2i+1] bsum[2i+1], acc_i), then
// acc_i = fma(d, lane sums of scale * q, acc_i)
struct Q2_K {
    using Block = BlockQ2_K;
    using Act = BlockQ8_K;
    static constexpr std::size_t kBlock = 256;
    struct Pre {
        __m256i scales[2];  // sub-blocks 0-7, 8-15 as int16, in both halves
        __m256i mins16;     // the sixteen mins as int16
    };
    struct Chunk {
        __m256i q, scale;
    };
    static void prepare(const Block& b, Pre& p) {
        const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
        const __m256i s16 = _mm256_cvtepu8_epi16(_mm_and_si128(sc, _mm_set1_epi8(0xF)));
        p.scales[0] = broadcast_half<false>(s16);
        p.scales[1] = broadcast_half<true>(s16);
        p.mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), _mm_set1_epi8(0xF)));
    }
    static void begin(const Pre& p, const Block& b, const Act& a, Acc& acc) {
        const float dmin = -a.d * half(b.dmin);
        const __m256i prod = _mm256_madd_epi16(p.mins16, load256(a.bsums));
        acc.lanes = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(prod), acc.lanes);
    }
    template <int c>
    static Chunk chunk(const Pre& p, const Block& b) {
        return {two_bit_chunk<c>(b.qs), pair_scales<c % 4>(p.scales[c / 4])};
    }
    static __m256i dot(const Chunk& k, const std::int8_t* a) {
        return _mm256_madd_epi16(k.scale, _mm256_maddubs_epi16(k.q, load256(a)));
    }
    static void end(const Block& b, const Act& a, __m256i sumi, Acc& acc) {
        const float d = a.d * half(b.d);
        acc.lanes = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc.lanes);
    }
    static float finish(const Acc& acc) { return avx2_fold8(acc.lanes); }
};

// ---- Q3_K x Q8_K: acc_i = fma(d, lane sums of (scale - 32) (q - 4 !hbit), acc_i); the
// pair sums as maddubs(q, a) - maddubs(4 !hbit, a), as llama.cpp forms them
struct Q3_K {
    using Block = BlockQ3_K;
    using Act = BlockQ8_K;
    static constexpr std::size_t kBlock = 256;
    struct Pre {
        __m256i scales[2];  // (scale - 32) of sub-blocks 0-7, 8-15 as int16, in both halves
    };
    struct Chunk {
        __m256i low, minus, scale;  // the 2-bit quants, 4 where the high bit is clear
    };
    static void prepare(const Block& b, Pre& p) {
        // the sixteen 6-bit scales (q3_k_scale) as llama.cpp's kmask shuffle forms them
        std::uint32_t aux[3];
        __builtin_memcpy(aux, b.scales, 12);
        const std::uint32_t m2 = 0x0f0f0f0f, m1 = 0x03030303;
        const __m128i s = _mm_set_epi32(static_cast<int>(((aux[1] >> 4) & m2) | (((aux[2] >> 6) & m1) << 4)),
                                        static_cast<int>(((aux[0] >> 4) & m2) | (((aux[2] >> 4) & m1) << 4)),
                                        static_cast<int>((aux[1] & m2) | (((aux[2] >> 2) & m1) << 4)),
                                        static_cast<int>((aux[0] & m2) | ((aux[2] & m1) << 4)));
        const __m256i s16 = _mm256_cvtepi8_epi16(_mm_sub_epi8(s, _mm_set1_epi8(32)));
        p.scales[0] = broadcast_half<false>(s16);
        p.scales[1] = broadcast_half<true>(s16);
    }
    static void begin(const Pre&, const Block&, const Act&, Acc&) {}
    template <int c>
    static Chunk chunk(const Pre& p, const Block& b) {
        const __m256i clear = _mm256_andnot_si256(_mm256_srli_epi16(load256(b.hmask), c), _mm256_set1_epi8(1));
        return {two_bit_chunk<c>(b.qs), _mm256_slli_epi16(clear, 2), pair_scales<c % 4>(p.scales[c / 4])};
    }
    static __m256i dot(const Chunk& k, const std::int8_t* a) {
        const __m256i qa = load256(a);
        const __m256i pairs = _mm256_sub_epi16(_mm256_maddubs_epi16(k.low, qa), _mm256_maddubs_epi16(k.minus, qa));
        return _mm256_madd_epi16(k.scale, pairs);
    }
    static void end(const Block& b, const Act& a, __m256i sumi, Acc& acc) {
        const float d = a.d * half(b.d);
        acc.lanes = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc.lanes);
    }
    static float finish(const Acc& acc) { return avx2_fold8(acc.lanes); }
};

// ---- Q5_K x Q8_K: mins = fma(dmin, (float)sum_k m[k] B[k], mins) (B: 32-element sums,
// an exact int), acc_i = fma(d, lane sums of scale * q, acc_i); fold(acc) + mins
struct Q5_K : K4Stream<BlockQ5_K> {
    static void begin(const Pre& p, const Block& b, const Act& a, Acc& acc) {
        const float dmin = -a.d * half(b.dmin);
        __m128i prod = k4_min_products(p.mins, a);
        prod = _mm_hadd_epi32(prod, prod);
        prod = _mm_hadd_epi32(prod, prod);
        acc.mins = __builtin_fmaf(dmin, static_cast<float>(_mm_cvtsi128_si32(prod)), acc.mins);
    }
    template <int c>
    static Chunk chunk(const Pre& p, const Block& b) {
        const __m256i high = _mm256_and_si256(_mm256_srli_epi16(load256(b.qh), c), _mm256_set1_epi8(1));
        return {_mm256_or_si256(k4_nibbles<c>(b.qs), _mm256_slli_epi16(high, 4)), one_scale<c>(p.scales)};
    }
    static float finish(const Acc& acc) { return avx2_fold8(acc.lanes) + acc.mins; }
};

// ---- Q4_1 / Q5_1 x Q8_1: acc = fma(d_w * d_a, (float)lane sums, acc) on unsigned quants,
// and the offset mins = fma(m_w, s_a, mins), added after the fold. A block is one
// register, so tiles of several rows hold their blocks unpacked.
template <typename B, bool kFifthBit>
struct Legacy1 {
    using Block = B;
    using Act = BlockQ8_1;
    static constexpr std::size_t kBlock = 32;
    struct W {
        __m256i q;  // elements 0..31, unsigned (0..15 or 0..31)
        float d, m;
    };
    static void load(const Block& b, W& u) {
        u.q = legacy_nibbles(b.qs);
        if constexpr (kFifthBit) {
            u.q = _mm256_or_si256(u.q, _mm256_and_si256(bytes_from_bits_32(b.qh), _mm256_set1_epi8(0x10)));
        }
        u.d = half(b.d);
        u.m = half(b.m);
    }
    static void step(const W& u, const Block&, const Act& a, Acc& acc) {
        acc.mins = __builtin_fmaf(u.m, half(a.s), acc.mins);
        const __m256i qa = load256(a.qs);
        const __m256 s = _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_maddubs_epi16(u.q, qa), _mm256_set1_epi16(1)));
        acc.lanes = _mm256_fmadd_ps(_mm256_set1_ps(u.d * half(a.d)), s, acc.lanes);
    }
    static float finish(const Acc& acc) { return avx2_fold8(acc.lanes) + acc.mins; }
};
using Q4_1 = Legacy1<BlockQ4_1, false>;
using Q5_1 = Legacy1<BlockQ5_1, true>;

}  // namespace

void q2_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { stream_rows<Q2_K>(t, r0, r1); }
void q3_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { stream_rows<Q3_K>(t, r0, r1); }
void q5_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { stream_rows<Q5_K>(t, r0, r1); }
void q4_1_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { quant_rows<Q4_1>(t, r0, r1); }
void q5_1_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { quant_rows<Q5_1>(t, r0, r1); }

}  // namespace ember::kernels::fast::avx2
