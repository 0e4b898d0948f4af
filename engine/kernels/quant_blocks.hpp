// The quantized block layouts of GGUF files and of llama.cpp's run-time activation
// types, byte for byte as ggml-common.h defines them (model-math §2.2-§2.8). Scales are
// IEEE half bits (uint16_t) except Q8_K's float. Plain structs only: this header is
// included by translation units compiled for different instruction sets.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::kernels {

inline constexpr std::size_t kQK = 32;    // elements per legacy block (Q4_0 ... Q8_1)
inline constexpr std::size_t kQK_K = 256; // elements per K-quant super-block

// ---- legacy formats: 32 elements, one or two F16 scales
struct BlockQ4_0 { std::uint16_t d; std::uint8_t qs[16]; };                          // (q - 8) d
struct BlockQ4_1 { std::uint16_t d, m; std::uint8_t qs[16]; };                       // q d + m
struct BlockQ5_0 { std::uint16_t d; std::uint8_t qh[4]; std::uint8_t qs[16]; };      // (q - 16) d
struct BlockQ5_1 { std::uint16_t d, m; std::uint8_t qh[4]; std::uint8_t qs[16]; };   // q d + m
struct BlockQ8_0 { std::uint16_t d; std::int8_t qs[32]; };                           // q d
struct BlockQ8_1 { std::uint16_t d, s; std::int8_t qs[32]; };                        // s = d * sum(q)

// ---- K-quants: 256-element super-blocks of 16 or 32-element sub-blocks
struct BlockQ2_K { std::uint8_t scales[16]; std::uint8_t qs[64]; std::uint16_t d, dmin; };
struct BlockQ3_K { std::uint8_t hmask[32]; std::uint8_t qs[64]; std::uint8_t scales[12]; std::uint16_t d; };
struct BlockQ4_K { std::uint16_t d, dmin; std::uint8_t scales[12]; std::uint8_t qs[128]; };
struct BlockQ5_K { std::uint16_t d, dmin; std::uint8_t scales[12]; std::uint8_t qh[32]; std::uint8_t qs[128]; };
struct BlockQ6_K { std::uint8_t ql[128]; std::uint8_t qh[64]; std::int8_t scales[16]; std::uint16_t d; };
struct BlockQ8_K { float d; std::int8_t qs[256]; std::int16_t bsums[16]; };           // activations only

// Every layout's size, and kQK / kQK_K, are checked against the ggml type table (the one
// source of block sizes and bytes) in weight_format.cpp.

// Internal linkage: translation units built for different instruction sets include this.
namespace {

// The 6-bit scale and min of sub-block j (0..7) of Q4_K / Q5_K (get_scale_min_k4).
inline void k4_scale_min(const std::uint8_t* q, int j, int& scale, int& min) {
    if (j < 4) {
        scale = q[j] & 63;
        min = q[j + 4] & 63;
    } else {
        scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// All eight 6-bit scales (bytes 0-7) and mins (bytes 8-15) of Q4_K / Q5_K at once, as
// llama.cpp's kmask shuffle of the 12 bytes forms them: k4_scale_min for every j.
inline void k4_scales_mins_bytes(const std::uint8_t* q, std::uint32_t out[4]) {
    std::uint32_t u[3];
    __builtin_memcpy(u, q, 12);
    const std::uint32_t k1 = 0x3f3f3f3f, k2 = 0x0f0f0f0f, k3 = 0x03030303;
    out[0] = u[0] & k1;
    out[1] = (u[2] & k2) | (((u[0] >> 6) & k3) << 4);
    out[2] = u[1] & k1;
    out[3] = ((u[2] >> 4) & k2) | (((u[1] >> 6) & k3) << 4);
}

// The 6-bit scale of sub-block j (0..15) of Q3_K, before subtracting 32: low four bits
// from scales[0..7] (nibble j / 8), high two bits from scales[8..11].
inline int q3_k_scale(const std::uint8_t* s, int j) {
    const int low = (s[j % 8] >> (4 * (j / 8))) & 0xF;
    const int high = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
    return low | (high << 4);
}

}  // namespace
}  // namespace ember::kernels
