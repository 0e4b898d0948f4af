// Unpacking shared by the AVX2 quant products (avx2_quants.cpp, avx2_quants_low.cpp,
// avx2_q8_0_prompt.cpp, avx2_kquant_prompt.cpp; compiled with -mavx2 -mfma -mf16c) and
// the AVX-VNNI ones (avxvnni_q8_0_prompt.cpp, the same flags and -mavxvnni). Internal
// linkage only: see variant_kernels.hpp.
#pragma once

#include "kernels/fast/intrinsics.hpp"

#include <cstdint>

#include "kernels/quant_blocks.hpp"

namespace ember::kernels::fast {
namespace {

// The 32 nibbles of a legacy block (Q4_0/Q4_1/Q5_0/Q5_1), elements 0..31: low nibbles, then high.
inline __m256i legacy_nibbles(const std::uint8_t* qs) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(bytes, 4), bytes), _mm256_set1_epi8(0xF));
}

// Byte j is 0xFF when bit j of the 32 bits at `bits` is set (llama.cpp's bytes_from_bits_32).
inline __m256i bytes_from_bits_32(const std::uint8_t* bits) {
    std::uint32_t x32;
    __builtin_memcpy(&x32, bits, 4);
    const __m256i spread = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(x32)),
                                               _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202,
                                                                 0x0101010101010101, 0x0000000000000000));
    const __m256i one_bit_clear = _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe);
    return _mm256_cmpeq_epi8(_mm256_or_si256(spread, one_bit_clear), _mm256_set1_epi64x(-1));
}

// A Q6_K super-block's eight 32-element chunks as unsigned 6-bit values (ql's nibble | qh's
// two bits << 4), and per chunk its two 16-element scales as int16 (low half, high half).
inline void unpack_q6_k(const BlockQ6_K& b, __m256i q[8], __m256i scale[8]) {
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; ++h) {
        const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h));
        const __m256i l2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.ql + 64 * h + 32));
        const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h));
        q[4 * h + 0] = _mm256_or_si256(_mm256_and_si256(l1, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4));
        q[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(l2, m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m3), 4));
        q[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m3), 4));
        q[4 * h + 3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l2, 4), m4),
                                       _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m3), 4));
    }
    for (int c = 0; c < 8; ++c)
        scale[c] = _mm256_set_m128i(_mm_set1_epi16(b.scales[2 * c + 1]), _mm_set1_epi16(b.scales[2 * c]));
}

inline __m256i load_bytes(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

// The formats whose dot product takes Q8_0 activations: a block's 32 values as int8
// (element order).
struct Q8_0Values {
    using Block = BlockQ8_0;
    static __m256i values(const Block& b) { return load_bytes(b.qs); }
};

struct Q4_0Values {
    using Block = BlockQ4_0;
    static __m256i values(const Block& b) { return _mm256_sub_epi8(legacy_nibbles(b.qs), _mm256_set1_epi8(8)); }
};

// Q5_0: nibble + 16 * (fifth bit) - 16, i.e. nibble | 0xF0 where the fifth bit is clear.
struct Q5_0Values {
    using Block = BlockQ5_0;
    static __m256i values(const Block& b) {
        const __m256i bit_set = bytes_from_bits_32(b.qh);
        return _mm256_or_si256(legacy_nibbles(b.qs),
                               _mm256_andnot_si256(bit_set, _mm256_set1_epi8(static_cast<char>(0xF0))));
    }
};

}  // namespace
}  // namespace ember::kernels::fast
