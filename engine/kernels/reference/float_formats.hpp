// Conversions between F32 and the 16-bit float formats stored in GGUF files
// (model-math §2.1): exact decodes, and F32 -> F16 rounding to nearest, ties to even,
// as the F16C instructions llama.cpp uses do (F32 -> BF16 as ggml_fp32_to_bf16).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace ember::kernels::reference {

inline float fp16_to_f32(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1fu;
    const std::uint32_t mantissa = h & 0x3ffu;
    if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
        const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
        return sign ? -magnitude : magnitude;
    }
    if (exponent == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));  // inf, NaN
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline std::uint16_t f32_to_fp16(float f) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
    const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
    const std::uint32_t magnitude = bits & 0x7fffffffu;
    if (magnitude > 0x7f800000u) return sign | 0x7e00u;   // NaN
    if (magnitude >= 0x477ff000u) return sign | 0x7c00u;  // rounds beyond 65504: infinity
    if (magnitude < 0x38800000u) {
        // Below the smallest normal half (2^-14): a multiple of 2^-24, rounded to even.
        const float units = std::bit_cast<float>(magnitude) * 16777216.0f;  // exact
        return sign | static_cast<std::uint16_t>(std::nearbyint(units));
    }
    // Round the 13 dropped mantissa bits to nearest even, then rebias the exponent 127 -> 15.
    const std::uint32_t rounded = magnitude + 0xfffu + ((magnitude >> 13) & 1u);
    return sign | static_cast<std::uint16_t>((rounded - (112u << 23)) >> 13);
}

inline float bf16_to_f32(std::uint16_t h) { return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16); }

// §2.1: round to nearest even on the 16 dropped bits; NaN stays NaN (quieted). The fast
// kernels keep their own copy (kernels/fast/half_precision.hpp): code compiled for a
// SIMD variant must not share inline functions with the rest of the program.
inline std::uint16_t f32_to_bf16(float f) {
    const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
    return static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

}  // namespace ember::kernels::reference
