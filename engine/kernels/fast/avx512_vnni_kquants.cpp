// The AVX-512 VNNI K-quant products, Q4_K and Q6_K, then Q2_K, Q3_K and Q5_K (compiled with the AVX-512 flags plus
// -mavx512vnni; see variant_kernels.hpp for the rules of a variant translation unit).
// They give the bits of scalar_quants.cpp and avx2_quants.cpp: only the way the exact
// int32 lane sums are obtained differs, never a float operation.
//
// Per output and super-block, llama.cpp's AVX2 kernels (ggml_vec_dot_q4_K_q8_K,
// _q6_K_q8_K) keep eight float lanes; lane i gets the int32 sum, over the super-block's
// eight 32-element chunks, of scale * (elements 4i..4i+3 of the chunk), and then one
// fused multiply-add with d (Q6_K first subtracts 32 (sc[2i] bsum[2i] + sc[2i+1]
// bsum[2i+1]); Q4_K adds its min terms in four separate lanes). Here
//   - one 512-bit maddubs covers two chunks (the same byte pairs as two 256-bit ones, so
//     the same int16 values, none saturating: 15 * 127 * 2 and 63 * 127 * 2), and one
//     vpdpwssd multiplies them by their sub-block scale and adds them into sixteen int32
//     lanes (the madd / add of AVX2 in one exact instruction);
//   - the two halves of those sixteen lanes are added (lane i of chunk c plus lane i of
//     chunk c + 1: integer sums, so any order gives the same int32);
//   - two outputs share a register for the float work: low eight lanes output A, high
//     eight output B. In the matrix-vector product A and B are two weight rows of the one
//     token; in the tiles they are two tokens of one weight row. Each lane's float
//     operations are exactly those of the AVX2 kernel for its output.
#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/avx512_common.hpp"
#include "kernels/fast/prefetch.hpp"
#include "kernels/fast/variant_kernels.hpp"

#include <cstdint>
#include <cstring>

namespace ember::kernels::fast::avx512_vnni {

namespace {

float half(std::uint16_t h) { return _cvtsh_ss(h); }

__m512i concat(__m256i low, __m256i high) { return _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1); }
__m512 pair_ps(float low, float high) { return _mm512_insertf32x8(_mm512_set1_ps(low), _mm256_set1_ps(high), 1); }
__m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
__m512i load512(const void* p) { return _mm512_loadu_si512(p); }

// Sixteen lanes of output A and of output B (lane i and i + 8 from two chunks) to
// [A lanes 0-7 | B lanes 0-7]: lane i of each is the sum of its two chunk lanes.
__m512i fold_pair(__m512i a, __m512i b) {
    const __m512i low = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i high = _mm512_shuffle_i64x2(a, b, _MM_SHUFFLE(3, 2, 3, 2));
    return _mm512_add_epi32(low, high);
}

// int32 lanes += scale16 * (the int16 pair sums of w * x), exactly
__m512i scaled_dot(__m512i acc, __m512i w_u8, __m512i x_s8, __m512i scale16) {
    return _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(w_u8, x_s8), scale16);
}

// int16 lane k of a two-chunk register takes the scale of sub-block first(k); these
// tables are the vpermw indices into the block's scales.
struct alignas(64) Index16 {
    std::int16_t lane[32];
};

// Q6_K: register g holds elements 64g..64g+63, element pair k in sub-block 4g + k / 8.
constexpr Index16 q6_scale_index(int g) {
    Index16 ix{};
    for (int k = 0; k < 32; ++k) ix.lane[k] = static_cast<std::int16_t>(4 * g + k / 8);
    return ix;
}
constexpr Index16 kQ6ScaleIndex[4] = {q6_scale_index(0), q6_scale_index(1), q6_scale_index(2), q6_scale_index(3)};

// Q4_K: register g holds two 32-element sub-blocks, q4_first[g] and q4_first[g] + 2 (the
// low or high nibbles of 64 bytes of qs).
constexpr int kQ4First[4] = {0, 1, 4, 5};
constexpr Index16 q4_scale_index(int g) {
    Index16 ix{};
    for (int k = 0; k < 32; ++k) ix.lane[k] = static_cast<std::int16_t>(kQ4First[g] + (k < 16 ? 0 : 2));
    return ix;
}
constexpr Index16 kQ4ScaleIndex[4] = {q4_scale_index(0), q4_scale_index(1), q4_scale_index(2), q4_scale_index(3)};

__m512i scale_for(const Index16& ix, __m512i scales16) { return _mm512_permutexvar_epi16(_mm512_load_si512(ix.lane), scales16); }

// Sixteen int32 lanes of one super-block: the unpacked weights u (q[g], scale[g]) times
// 256 activation quants laid out as u's registers read them (64 bytes per register).
template <typename W>
__m512i lanes_of(const W& u, const std::int8_t* q) {
    __m512i s = _mm512_setzero_si512();
    for (int g = 0; g < 4; ++g) s = scaled_dot(s, u.q[g], load512(q + 64 * g), u.scale[g]);
    return s;
}

// Two tokens' activations for one super-block, packed once per chunk of tokens for the
// prefill tiles (see "Prefill" below): the quants in the format's register order, the
// scales ready for the pair's float lanes and the integer sums of the offset / min terms.
struct alignas(64) PairAct {
    std::int8_t q[2][256];
    float d[16];            // the first token's d in lanes 0-7, the second's in 8-15
    std::int16_t sums[32];  // per token F::kSums values (Q6_K: bsums, Q4_K: 32-element sums)
    float neg_d[8];         // -d: lanes 0-3 the first token, 4-7 the second (Q4_K's min terms)
};

// ---- Q6_K x Q8_K: lanes of scale * q (q unsigned 6-bit), minus 32 (sc bsum) per lane
struct Q6_K {
    using Block = BlockQ6_K;
    struct W {
        __m512i q[4];      // elements 64g..64g+63, the unsigned 6-bit values
        __m512i scale[4];  // int16, each element pair's sub-block scale
        __m256i scales16;  // the sixteen scales as int16
    };
    struct Acc {
        __m512 lanes;
    };
    static void unpack(const Block& b, W& u) {
        const __m512i m4 = _mm512_set1_epi8(0x0F), m3 = _mm512_set1_epi8(0x03), m30 = _mm512_set1_epi8(0x30);
        // qh shifted by 0 for the first 32 elements of a register, by 2 for the next 32
        const __m512i qh_shift = concat(_mm256_setzero_si256(), _mm256_set1_epi16(2));
        for (int h = 0; h < 2; ++h) {
            const __m512i low = load512(b.ql + 64 * h);
            const __m512i high = _mm512_srlv_epi16(_mm512_broadcast_i64x4(load256(b.qh + 32 * h)), qh_shift);
            u.q[2 * h] = _mm512_or_si512(_mm512_and_si512(low, m4), _mm512_slli_epi16(_mm512_and_si512(high, m3), 4));
            u.q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(low, 4), m4), _mm512_and_si512(high, m30));
        }
        u.scales16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));
        const __m512i scales = _mm512_castsi256_si512(u.scales16);
        for (int g = 0; g < 4; ++g) u.scale[g] = scale_for(kQ6ScaleIndex[g], scales);
    }
    static __m512i lanes(const W& u, const BlockQ8_K& x) { return lanes_of(u, x.qs); }
    // One super-block of output A (weights wa, activations xa) and output B.
    static void step(const W& wa, const Block& ba, const BlockQ8_K& xa, const W& wb, const Block& bb, const BlockQ8_K& xb,
                     Acc& acc) {
        const __m512 d = pair_ps(xa.d * half(ba.d), xb.d * half(bb.d));
        const __m512i sums = fold_pair(lanes(wa, xa), lanes(wb, xb));
        const __m512i bsums = concat(load256(xa.bsums), load256(xb.bsums));
        const __m512i offset = _mm512_slli_epi32(_mm512_madd_epi16(bsums, concat(wa.scales16, wb.scales16)), 5);
        acc.lanes = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(sums, offset)), acc.lanes);
    }
    static constexpr int kSums = 16;
    static void pack_token(const BlockQ8_K& x, std::int8_t* q, std::int16_t* sums) {
        std::memcpy(q, x.qs, 256);
        std::memcpy(sums, x.bsums, 32);
    }
    // The same operations as step() for one weight row and the pair's two tokens.
    static void packed_step(const W& u, const Block& b, const PairAct& a, Acc& acc) {
        const __m512 d = _mm512_mul_ps(_mm512_set1_ps(half(b.d)), _mm512_load_ps(a.d));
        const __m512i sums = fold_pair(lanes_of(u, a.q[0]), lanes_of(u, a.q[1]));
        const __m512i scales = _mm512_broadcast_i64x4(u.scales16);
        const __m512i offset = _mm512_slli_epi32(_mm512_madd_epi16(_mm512_load_si512(a.sums), scales), 5);
        acc.lanes = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(sums, offset)), acc.lanes);
    }
    static void zero(Acc& acc) { acc.lanes = _mm512_setzero_ps(); }
    static float finish_low(const Acc& acc) { return avx512_fold8(_mm512_castps512_ps256(acc.lanes)); }
    static float finish_high(const Acc& acc) { return avx512_fold8(_mm512_extractf32x8_ps(acc.lanes, 1)); }
};

// ---- Q4_K x Q8_K: lanes of scale * q, the min terms in four separate lanes per output
struct Q4_K {
    using Block = BlockQ4_K;
    struct W {
        __m512i q[4];      // nibbles of sub-blocks (kQ4First[g], kQ4First[g] + 2)
        __m512i scale[4];  // int16, each element pair's sub-block scale
        __m128i mins;      // the eight mins as int16
    };
    struct Acc {
        __m512 lanes;
        __m256 min_lanes;  // output A's four min lanes, then output B's
    };
    static void unpack(const Block& b, W& u) { unpack_k4(b.scales, b.qs, u); }
    // Q4_K's and Q5_K's shared layout: 12 bytes of scales and mins, 128 bytes of nibbles.
    static void unpack_k4(const std::uint8_t* scale_bytes, const std::uint8_t* qs, W& u) {
        std::uint32_t s[4];
        k4_scales_mins_bytes(scale_bytes, s);
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
        const __m512i scales = _mm512_castsi128_si512(_mm_cvtepu8_epi16(bytes));
        u.mins = _mm_cvtepu8_epi16(_mm_srli_si128(bytes, 8));
        const __m512i m4 = _mm512_set1_epi8(0x0F);
        for (int h = 0; h < 2; ++h) {
            const __m512i bits = load512(qs + 64 * h);
            u.q[2 * h] = _mm512_and_si512(bits, m4);
            u.q[2 * h + 1] = _mm512_and_si512(_mm512_srli_epi16(bits, 4), m4);
        }
        for (int g = 0; g < 4; ++g) u.scale[g] = scale_for(kQ4ScaleIndex[g], scales);
    }
    static __m512i lanes(const W& u, const BlockQ8_K& x) {
        __m512i s = _mm512_setzero_si512();
        for (int g = 0; g < 4; ++g) {
            const __m512i xq = concat(load256(x.qs + 32 * kQ4First[g]), load256(x.qs + 32 * (kQ4First[g] + 2)));
            s = scaled_dot(s, u.q[g], xq, u.scale[g]);
        }
        return s;
    }
    // The eight 32-element sub-block sums of the activations, as int16.
    static __m128i sub_sums(const BlockQ8_K& x) {
        return _mm_hadd_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x.bsums)),
                              _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.bsums + 8)));
    }
    static void step(const W& wa, const Block& ba, const BlockQ8_K& xa, const W& wb, const Block& bb, const BlockQ8_K& xb,
                     Acc& acc) {
        const __m256 dmin = _mm256_insertf128_ps(_mm256_castps128_ps256(_mm_set1_ps(-xa.d * half(ba.dmin))),
                                                 _mm_set1_ps(-xb.d * half(bb.dmin)), 1);
        const __m256i prod = _mm256_madd_epi16(_mm256_set_m128i(wb.mins, wa.mins), _mm256_set_m128i(sub_sums(xb), sub_sums(xa)));
        acc.min_lanes = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(prod), acc.min_lanes);
        const __m512 d = pair_ps(xa.d * half(ba.d), xb.d * half(bb.d));
        const __m512i sums = fold_pair(lanes(wa, xa), lanes(wb, xb));
        acc.lanes = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc.lanes);
    }
    static constexpr int kSums = 8;
    static void pack_token(const BlockQ8_K& x, std::int8_t* q, std::int16_t* sums) {
        for (int g = 0; g < 4; ++g) {
            std::memcpy(q + 64 * g, x.qs + 32 * kQ4First[g], 32);
            std::memcpy(q + 64 * g + 32, x.qs + 32 * (kQ4First[g] + 2), 32);
        }
        _mm_storeu_si128(reinterpret_cast<__m128i*>(sums), sub_sums(x));
    }
    static void packed_step(const W& u, const Block& b, const PairAct& a, Acc& acc) {
        const __m256 dmin = _mm256_mul_ps(_mm256_set1_ps(half(b.dmin)), _mm256_load_ps(a.neg_d));
        const __m256i prod = _mm256_madd_epi16(_mm256_broadcastsi128_si256(u.mins), _mm256_load_si256(reinterpret_cast<const __m256i*>(a.sums)));
        acc.min_lanes = _mm256_fmadd_ps(dmin, _mm256_cvtepi32_ps(prod), acc.min_lanes);
        const __m512 d = _mm512_mul_ps(_mm512_set1_ps(half(b.d)), _mm512_load_ps(a.d));
        const __m512i sums = fold_pair(lanes_of(u, a.q[0]), lanes_of(u, a.q[1]));
        acc.lanes = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc.lanes);
    }
    static void zero(Acc& acc) {
        acc.lanes = _mm512_setzero_ps();
        acc.min_lanes = _mm256_setzero_ps();
    }
    // (m0 + m2) + (m1 + m3), as the AVX2 kernel folds its four min lanes
    static float fold_mins(__m128 m) {
        const __m128 pairs = _mm_add_ps(m, _mm_movehl_ps(m, m));
        return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
    }
    static float finish_low(const Acc& acc) {
        return avx512_fold8(_mm512_castps512_ps256(acc.lanes)) + fold_mins(_mm256_castps256_ps128(acc.min_lanes));
    }
    static float finish_high(const Acc& acc) {
        return avx512_fold8(_mm512_extractf32x8_ps(acc.lanes, 1)) + fold_mins(_mm256_extractf128_ps(acc.min_lanes, 1));
    }
};

// ---- Q2_K, Q3_K, Q5_K: the same pair framework, each lane's float operations those of
// the format's AVX2 kernel (avx2_quants.cpp, scalar_quants.cpp).

__m512 negate(__m512 v) { return _mm512_xor_ps(v, _mm512_set1_ps(-0.0f)); }

// Register g of Q2_K / Q3_K's 2-bit quants: elements 64g..64g+63 (chunks 2g and 2g + 1),
// qs[32 (c / 4) + l] >> 2 (c % 4) for chunk c, 0..3.
__m512i two_bit_pair(const std::uint8_t* qs, int g) {
    const __m512i bits = _mm512_broadcast_i64x4(load256(qs + 32 * (g / 2)));
    const __m512i shift = concat(_mm256_set1_epi16(static_cast<short>(4 * (g % 2))), _mm256_set1_epi16(static_cast<short>(4 * (g % 2) + 2)));
    return _mm512_and_si512(_mm512_srlv_epi16(bits, shift), _mm512_set1_epi8(3));
}

// ---- Q2_K x Q8_K: lanes = fma(dmin, m[2i] bsum[2i] + m[2i+1] bsum[2i+1], lanes), then
// lanes = fma(d, scale * q lane sums, lanes)
struct Q2_K {
    using Block = BlockQ2_K;
    struct W {
        __m512i q[4];      // elements 64g..64g+63, 0..3
        __m512i scale[4];  // int16, each element pair's sub-block scale
        __m256i mins16;    // the sixteen mins as int16
    };
    struct Acc {
        __m512 lanes;
    };
    static void unpack(const Block& b, W& u) {
        const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales));
        const __m128i m4 = _mm_set1_epi8(0x0F);
        const __m512i scales = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(_mm_and_si128(bytes, m4)));
        u.mins16 = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(bytes, 4), m4));
        for (int g = 0; g < 4; ++g) {
            u.q[g] = two_bit_pair(b.qs, g);
            u.scale[g] = scale_for(kQ6ScaleIndex[g], scales);
        }
    }
    static void step(const W& wa, const Block& ba, const BlockQ8_K& xa, const W& wb, const Block& bb, const BlockQ8_K& xb,
                     Acc& acc) {
        const __m512 dmin = pair_ps(-xa.d * half(ba.dmin), -xb.d * half(bb.dmin));
        const __m512i prod = _mm512_madd_epi16(concat(wa.mins16, wb.mins16), concat(load256(xa.bsums), load256(xb.bsums)));
        acc.lanes = _mm512_fmadd_ps(dmin, _mm512_cvtepi32_ps(prod), acc.lanes);
        const __m512 d = pair_ps(xa.d * half(ba.d), xb.d * half(bb.d));
        const __m512i sums = fold_pair(lanes_of(wa, xa.qs), lanes_of(wb, xb.qs));
        acc.lanes = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc.lanes);
    }
    static constexpr int kSums = 16;
    static void pack_token(const BlockQ8_K& x, std::int8_t* q, std::int16_t* sums) { Q6_K::pack_token(x, q, sums); }
    static void packed_step(const W& u, const Block& b, const PairAct& a, Acc& acc) {
        const __m512 d_a = _mm512_load_ps(a.d);
        const __m512 dmin = _mm512_mul_ps(_mm512_set1_ps(half(b.dmin)), negate(d_a));
        const __m512i prod = _mm512_madd_epi16(_mm512_broadcast_i64x4(u.mins16), _mm512_load_si512(a.sums));
        acc.lanes = _mm512_fmadd_ps(dmin, _mm512_cvtepi32_ps(prod), acc.lanes);
        const __m512 d = _mm512_mul_ps(_mm512_set1_ps(half(b.d)), d_a);
        const __m512i sums = fold_pair(lanes_of(u, a.q[0]), lanes_of(u, a.q[1]));
        acc.lanes = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc.lanes);
    }
    static void zero(Acc& acc) { acc.lanes = _mm512_setzero_ps(); }
    static float finish_low(const Acc& acc) { return avx512_fold8(_mm512_castps512_ps256(acc.lanes)); }
    static float finish_high(const Acc& acc) { return avx512_fold8(_mm512_extractf32x8_ps(acc.lanes, 1)); }
};

// ---- Q3_K x Q8_K: lanes = fma(d, (scale - 32) (q - 4 !hbit) lane sums, lanes); the
// pair sums as maddubs(q, x) - maddubs(4 !hbit, x), as the AVX2 kernel forms them
struct Q3_K {
    using Block = BlockQ3_K;
    struct W {
        __m512i low[4];    // elements 64g..64g+63: the 2-bit quants, 0..3
        __m512i minus[4];  // 4 where the element's high bit is clear, else 0
        __m512i scale[4];  // int16 (scale - 32) of each element pair's sub-block
    };
    using Acc = Q2_K::Acc;
    static void unpack(const Block& b, W& u) {
        // the sixteen 6-bit scales (q3_k_scale) at once, as llama.cpp's AVX2 kernel forms them
        std::uint32_t aux[3];
        std::memcpy(aux, b.scales, 12);
        const std::uint32_t k1 = 0x03030303, k2 = 0x0f0f0f0f;
        const std::uint32_t s3 = ((aux[1] >> 4) & k2) | (((aux[2] >> 6) & k1) << 4);
        const std::uint32_t s2 = ((aux[0] >> 4) & k2) | (((aux[2] >> 4) & k1) << 4);
        const std::uint32_t s1 = (aux[1] & k2) | (((aux[2] >> 2) & k1) << 4);
        const std::uint32_t s0 = (aux[0] & k2) | ((aux[2] & k1) << 4);
        const __m128i bytes = _mm_sub_epi8(_mm_set_epi32(static_cast<int>(s3), static_cast<int>(s2), static_cast<int>(s1), static_cast<int>(s0)),
                                           _mm_set1_epi8(32));
        const __m512i scales = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(bytes));
        const __m512i hbits = _mm512_broadcast_i64x4(load256(b.hmask));
        for (int g = 0; g < 4; ++g) {
            u.low[g] = two_bit_pair(b.qs, g);
            // chunk c's high bits are bit c of hmask[0..31]
            const __m512i shift = concat(_mm256_set1_epi16(static_cast<short>(2 * g)), _mm256_set1_epi16(static_cast<short>(2 * g + 1)));
            const __m512i clear = _mm512_andnot_si512(_mm512_srlv_epi16(hbits, shift), _mm512_set1_epi8(1));
            u.minus[g] = _mm512_slli_epi16(clear, 2);
            u.scale[g] = scale_for(kQ6ScaleIndex[g], scales);
        }
    }
    static __m512i lanes_q(const W& u, const std::int8_t* q) {
        __m512i s = _mm512_setzero_si512();
        for (int g = 0; g < 4; ++g) {
            const __m512i x = load512(q + 64 * g);
            const __m512i pairs = _mm512_sub_epi16(_mm512_maddubs_epi16(u.low[g], x), _mm512_maddubs_epi16(u.minus[g], x));
            s = _mm512_dpwssd_epi32(s, pairs, u.scale[g]);
        }
        return s;
    }
    static void step(const W& wa, const Block& ba, const BlockQ8_K& xa, const W& wb, const Block& bb, const BlockQ8_K& xb,
                     Acc& acc) {
        const __m512 d = pair_ps(xa.d * half(ba.d), xb.d * half(bb.d));
        const __m512i sums = fold_pair(lanes_q(wa, xa.qs), lanes_q(wb, xb.qs));
        acc.lanes = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc.lanes);
    }
    static constexpr int kSums = 16;
    static void pack_token(const BlockQ8_K& x, std::int8_t* q, std::int16_t* sums) { Q6_K::pack_token(x, q, sums); }
    static void packed_step(const W& u, const Block& b, const PairAct& a, Acc& acc) {
        const __m512 d = _mm512_mul_ps(_mm512_set1_ps(half(b.d)), _mm512_load_ps(a.d));
        const __m512i sums = fold_pair(lanes_q(u, a.q[0]), lanes_q(u, a.q[1]));
        acc.lanes = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc.lanes);
    }
    static void zero(Acc& acc) { Q2_K::zero(acc); }
    static float finish_low(const Acc& acc) { return Q2_K::finish_low(acc); }
    static float finish_high(const Acc& acc) { return Q2_K::finish_high(acc); }
};

// ---- Q5_K x Q8_K: Q4_K's registers with the fifth bit; mins = fma(dmin, (float)sum_k
// m[k] B[k], mins) per output (an exact int sum; lane 0 output A, lane 1 output B), and
// lanes = fma(d, scale * q lane sums, lanes); result fold(lanes) + mins
struct Q5_K {
    using Block = BlockQ5_K;
    using W = Q4_K::W;
    struct Acc {
        __m512 lanes;
        __m128 mins;
    };
    static void unpack(const Block& b, W& u) {
        Q4_K::unpack_k4(b.scales, b.qs, u);
        const __m512i hbits = _mm512_broadcast_i64x4(load256(b.qh));
        for (int g = 0; g < 4; ++g) {
            // register g holds sub-blocks kQ4First[g] and kQ4First[g] + 2: bit k of qh[l]
            const __m512i shift = concat(_mm256_set1_epi16(static_cast<short>(kQ4First[g])), _mm256_set1_epi16(static_cast<short>(kQ4First[g] + 2)));
            const __m512i high = _mm512_and_si512(_mm512_srlv_epi16(hbits, shift), _mm512_set1_epi8(1));
            u.q[g] = _mm512_or_si512(u.q[g], _mm512_slli_epi16(high, 4));
        }
    }
    // [sum_k m[k] B[k] of output A, of output B, A, B] from A's four int32 partial sums
    // (lanes 0-3 of prod) and B's (lanes 4-7)
    static __m128 min_totals(__m256i prod) {
        const __m128i t = _mm_hadd_epi32(_mm256_castsi256_si128(prod), _mm256_extracti128_si256(prod, 1));
        return _mm_cvtepi32_ps(_mm_hadd_epi32(t, t));
    }
    static void step(const W& wa, const Block& ba, const BlockQ8_K& xa, const W& wb, const Block& bb, const BlockQ8_K& xb,
                     Acc& acc) {
        const __m128 dmin = _mm_setr_ps(-xa.d * half(ba.dmin), -xb.d * half(bb.dmin), 0.0f, 0.0f);
        const __m256i prod = _mm256_madd_epi16(_mm256_set_m128i(wb.mins, wa.mins), _mm256_set_m128i(Q4_K::sub_sums(xb), Q4_K::sub_sums(xa)));
        acc.mins = _mm_fmadd_ps(dmin, min_totals(prod), acc.mins);
        const __m512 d = pair_ps(xa.d * half(ba.d), xb.d * half(bb.d));
        const __m512i sums = fold_pair(Q4_K::lanes(wa, xa), Q4_K::lanes(wb, xb));
        acc.lanes = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc.lanes);
    }
    static constexpr int kSums = Q4_K::kSums;
    static void pack_token(const BlockQ8_K& x, std::int8_t* q, std::int16_t* sums) { Q4_K::pack_token(x, q, sums); }
    static void packed_step(const W& u, const Block& b, const PairAct& a, Acc& acc) {
        const __m128 dmin = _mm_mul_ps(_mm_set1_ps(half(b.dmin)), _mm_setr_ps(a.neg_d[0], a.neg_d[4], 0.0f, 0.0f));
        const __m256i prod = _mm256_madd_epi16(_mm256_broadcastsi128_si256(u.mins), _mm256_load_si256(reinterpret_cast<const __m256i*>(a.sums)));
        acc.mins = _mm_fmadd_ps(dmin, min_totals(prod), acc.mins);
        const __m512 d = _mm512_mul_ps(_mm512_set1_ps(half(b.d)), _mm512_load_ps(a.d));
        const __m512i sums = fold_pair(lanes_of(u, a.q[0]), lanes_of(u, a.q[1]));
        acc.lanes = _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(sums), acc.lanes);
    }
    static void zero(Acc& acc) {
        acc.lanes = _mm512_setzero_ps();
        acc.mins = _mm_setzero_ps();
    }
    static float finish_low(const Acc& acc) { return avx512_fold8(_mm512_castps512_ps256(acc.lanes)) + _mm_cvtss_f32(acc.mins); }
    static float finish_high(const Acc& acc) {
        return avx512_fold8(_mm512_extractf32x8_ps(acc.lanes, 1)) + _mm_cvtss_f32(_mm_movehdup_ps(acc.mins));
    }
};

template <typename F>
const typename F::Block* weight_row(const MatmulTask& task, std::size_t r) {
    return reinterpret_cast<const typename F::Block*>(task.weights + r * task.weight_row_bytes);
}
const BlockQ8_K* act_row(const MatmulTask& task, std::size_t t) {
    return reinterpret_cast<const BlockQ8_K*>(task.acts + t * task.act_row_bytes);
}

// Tile of R rows x T tokens, tokens in pairs (one register per row and pair); an odd last
// token is paired with itself and its duplicate is not stored.
template <typename F>
struct PairTile {
    template <int R, int T>
    static void run(const MatmulTask& task, std::size_t r0, std::size_t t0) {
        constexpr int P = (T + 1) / 2;
        const std::size_t n_blocks = task.cols / 256;
        const typename F::Block* w[R];
        const BlockQ8_K* x[2 * P];
        for (int r = 0; r < R; ++r) w[r] = weight_row<F>(task, r0 + r);
        for (int t = 0; t < 2 * P; ++t) x[t] = act_row(task, t0 + (t < T ? t : T - 1));
        typename F::Acc acc[R][P];
        for (int r = 0; r < R; ++r)
            for (int p = 0; p < P; ++p) F::zero(acc[r][p]);
        for (std::size_t b = 0; b < n_blocks; ++b) {
            typename F::W u[R];
            for (int r = 0; r < R; ++r) F::unpack(w[r][b], u[r]);
            for (int p = 0; p < P; ++p)
                for (int r = 0; r < R; ++r) F::step(u[r], w[r][b], x[2 * p][b], u[r], w[r][b], x[2 * p + 1][b], acc[r][p]);
        }
        for (int r = 0; r < R; ++r) {
            for (int p = 0; p < P; ++p) {
                float* out = task.out + r0 + r;
                out[(t0 + 2 * p) * task.out_stride] = F::finish_low(acc[r][p]);
                if (2 * p + 1 < T) out[(t0 + 2 * p + 1) * task.out_stride] = F::finish_high(acc[r][p]);
            }
        }
    }
};

// The matrix-vector product (one token), eight rows at a time, rows in pairs; the next
// eight rows are prefetched meanwhile (prefetch.hpp).
template <typename F>
void gemv8(const MatmulTask& task, std::size_t r0) {
    const std::size_t n_blocks = task.cols / 256;
    const typename F::Block* w[8];
    for (int r = 0; r < 8; ++r) w[r] = weight_row<F>(task, r0 + r);
    const BlockQ8_K* x = act_row(task, 0);
    typename F::Acc acc[4];
    for (int q = 0; q < 4; ++q) F::zero(acc[q]);
    const NextRowsPrefetch prefetch(task, r0 + 8, 8, n_blocks);
    for (std::size_t b = 0; b < n_blocks; ++b) {
        prefetch(b);
        for (int q = 0; q < 4; ++q) {
            typename F::W ua, ub;
            F::unpack(w[2 * q][b], ua);
            F::unpack(w[2 * q + 1][b], ub);
            F::step(ua, w[2 * q][b], x[b], ub, w[2 * q + 1][b], x[b], acc[q]);
        }
    }
    for (int q = 0; q < 4; ++q) {
        task.out[r0 + 2 * q] = F::finish_low(acc[q]);
        task.out[r0 + 2 * q + 1] = F::finish_high(acc[q]);
    }
}

// ---- Prefill: activations packed once per chunk of token pairs, read by every row ----
//
// Each weight super-block is unpacked once per row and chunk and used for the chunk's
// pairs; the pairs come from the pack (aligned, in register order, with their scales and
// sums ready). Per output the operations are those of step(): the same bits.

constexpr std::size_t kChunkPairs = 4;
constexpr std::size_t kPackBytes = 192 * 1024;  // on the stack (oneTBB workers have 4 MiB)
constexpr std::size_t kPackBlocks = kPackBytes / sizeof(PairAct);

// Tokens [t0, t0 + tokens) as pairs into pack[p * n_blocks + b]; an odd last token is
// paired with itself.
template <typename F>
void pack_pairs(const MatmulTask& task, std::size_t t0, std::size_t tokens, PairAct* pack) {
    const std::size_t n_blocks = task.cols / 256;
    for (std::size_t p = 0; 2 * p < tokens; ++p) {
        const BlockQ8_K* x[2] = {act_row(task, t0 + 2 * p), act_row(task, t0 + (2 * p + 1 < tokens ? 2 * p + 1 : 2 * p))};
        for (std::size_t b = 0; b < n_blocks; ++b) {
            PairAct& out = pack[p * n_blocks + b];
            for (int i = 0; i < 2; ++i) {
                F::pack_token(x[i][b], out.q[i], out.sums + i * F::kSums);
                for (int l = 0; l < 8; ++l) out.d[8 * i + l] = x[i][b].d;
                for (int l = 0; l < 4; ++l) out.neg_d[4 * i + l] = -x[i][b].d;
            }
        }
    }
}

// One weight row x P packed pairs (`tokens` counts the chunk's real tokens).
template <typename F, int P>
void packed_row(const MatmulTask& task, const PairAct* pack, std::size_t r, std::size_t t0, std::size_t tokens) {
    const std::size_t n_blocks = task.cols / 256;
    const typename F::Block* w = weight_row<F>(task, r);
    typename F::Acc acc[P];
    for (int p = 0; p < P; ++p) F::zero(acc[p]);
    for (std::size_t b = 0; b < n_blocks; ++b) {
        typename F::W u;
        F::unpack(w[b], u);
        for (int p = 0; p < P; ++p) F::packed_step(u, w[b], pack[p * n_blocks + b], acc[p]);
    }
    for (int p = 0; p < P; ++p) {
        task.out[(t0 + 2 * p) * task.out_stride + r] = F::finish_low(acc[p]);
        if (static_cast<std::size_t>(2 * p + 1) < tokens) task.out[(t0 + 2 * p + 1) * task.out_stride + r] = F::finish_high(acc[p]);
    }
}

template <typename F, int P>
void packed_rows_up_to(std::size_t pairs, const MatmulTask& task, const PairAct* pack, std::size_t row_begin,
                       std::size_t row_end, std::size_t t0, std::size_t tokens) {
    if constexpr (P > 1) {
        if (pairs < static_cast<std::size_t>(P)) return packed_rows_up_to<F, P - 1>(pairs, task, pack, row_begin, row_end, t0, tokens);
    }
    for (std::size_t r = row_begin; r < row_end; ++r) packed_row<F, P>(task, pack, r, t0, tokens);
}

// Rows [row_begin, row_end) for every token, a chunk of pairs at a time; false when one
// pair would not fit the pack (rows of more than 70000 columns or so).
template <typename F>
bool packed_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    const std::size_t n_blocks = task.cols / 256;
    const std::size_t fit = kPackBlocks / n_blocks;
    if (fit == 0) return false;
    const std::size_t chunk_tokens = 2 * (fit < kChunkPairs ? fit : kChunkPairs);
    PairAct pack[kPackBlocks];
    for (std::size_t t0 = 0; t0 < task.n_tokens; t0 += chunk_tokens) {
        const std::size_t tokens = task.n_tokens - t0 < chunk_tokens ? task.n_tokens - t0 : chunk_tokens;
        pack_pairs<F>(task, t0, tokens, pack);
        packed_rows_up_to<F, static_cast<int>(kChunkPairs)>((tokens + 1) / 2, task, pack, row_begin, row_end, t0, tokens);
    }
    return true;
}

template <typename F>
void kquant_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.n_tokens == 1) {
        std::size_t r = row_begin;
        for (; r + 8 <= row_end; r += 8) gemv8<F>(task, r);
        for (; r < row_end; ++r) PairTile<F>::template run<1, 1>(task, r, 0);
        return;
    }
    if (!packed_matmul_rows<F>(task, row_begin, row_end)) walk_rows<PairTile<F>, 4, 6>(task, row_begin, row_end);
}

}  // namespace

void q4_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { kquant_rows<Q4_K>(t, r0, r1); }
void q6_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { kquant_rows<Q6_K>(t, r0, r1); }
void q2_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { kquant_rows<Q2_K>(t, r0, r1); }
void q3_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { kquant_rows<Q3_K>(t, r0, r1); }
void q5_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { kquant_rows<Q5_K>(t, r0, r1); }

}  // namespace ember::kernels::fast::avx512_vnni
