// The one set of conversions between F32 and the 16-bit float formats (F16, BF16), for
// both routes, the quantizer and the readers (model-math §2.1). One behaviour: the x86
// instructions llama.cpp's CPU backend converts with (F16C vcvtps2ph / vcvtph2ps, which
// the fast route's SIMD kernels use too), so a scalar loop and a vector loop agree bit
// for bit on every input:
//   F32 -> F16:  round to nearest, ties to even; overflow to +-inf; subnormals kept;
//                NaN stays NaN with its sign, the quiet bit set and the top 10 payload
//                bits kept (0x7F802000 -> 0x7E01; ggml's portable fallback, without
//                F16C, writes 0x7E00 for every NaN).
//   F16 -> F32:  exact for every number and infinity; NaN keeps sign and payload with the
//                quiet bit set (0x7C01 -> 0x7FC02000), as vcvtph2ps does.
//   F32 -> BF16: (bits + 0x7FFF + lsb) >> 16, subnormals kept; NaN -> (bits >> 16) | 0x40.
//   BF16 -> F32: bits << 16 (exact, payload and all).
// tests/kernels/float16_test.cpp pins NaN, infinity, subnormal and rounding behaviour.
//
// Everything has internal linkage (an unnamed namespace) and uses compiler builtins, not
// std:: inline functions: translation units built for different instruction sets include
// this, and an inline function with external linkage could be merged across them by the
// linker, running AVX-512 code on a CPU without it.
#pragma once

#include <cstdint>

namespace ember::kernels {
namespace {

inline float fp16_to_fp32(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1Fu;
    const std::uint32_t mantissa = h & 0x3FFu;
    if (exponent == 0) {
        // zero or subnormal: mantissa * 2^-24, exact in F32
        const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
        return __builtin_bit_cast(float, sign | __builtin_bit_cast(std::uint32_t, magnitude));
    }
    if (exponent == 31) {
        const std::uint32_t quiet = mantissa != 0 ? 0x00400000u : 0u;  // NaN: quieted, as vcvtph2ps
        return __builtin_bit_cast(float, sign | 0x7F800000u | quiet | (mantissa << 13));
    }
    return __builtin_bit_cast(float, sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline std::uint16_t fp32_to_fp16(float f) {
    const std::uint32_t bits = __builtin_bit_cast(std::uint32_t, f);
    const std::uint16_t sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
    const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
    if (magnitude > 0x7F800000u) {  // NaN: quiet it, keep the top payload bits (vcvtps2ph)
        return static_cast<std::uint16_t>(sign | 0x7E00u | ((magnitude >> 13) & 0x3FFu));
    }
    if (magnitude >= 0x477FF000u) return static_cast<std::uint16_t>(sign | 0x7C00u);  // >= 65520 rounds to inf
    if (magnitude < 0x38800000u) {
        // below the smallest normal half (2^-14): a multiple of 2^-24, rounded to even
        const float scaled = __builtin_bit_cast(float, magnitude) * 0x1p24f;  // exact
        return static_cast<std::uint16_t>(sign | static_cast<std::uint16_t>(__builtin_nearbyintf(scaled)));
    }
    // round the 13 dropped mantissa bits to nearest even, then rebias the exponent 127 -> 15
    const std::uint32_t rounded = magnitude + 0xFFFu + ((magnitude >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
}

inline float bf16_to_fp32(std::uint16_t h) { return __builtin_bit_cast(float, static_cast<std::uint32_t>(h) << 16); }

inline std::uint16_t fp32_to_bf16(float f) {
    const std::uint32_t bits = __builtin_bit_cast(std::uint32_t, f);
    if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
    return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace
}  // namespace ember::kernels
