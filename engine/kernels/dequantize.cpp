// Each loop below follows llama.cpp's dequantize_row_* for the format: the same products
// in the same order (d * sc first, then times the quant; minus the min last), so every
// value is the bit-identical float. Compiled with -ffp-contract=off: no fused
// multiply-add that llama.cpp's baseline build does not have.
#include "kernels/dequantize.hpp"

#include <cstdint>
#include <cstring>

#include "kernels/quant_blocks.hpp"
#include "kernels/float16.hpp"

namespace ember::kernels {
namespace {


template <class Block>
const Block* blocks(const std::byte* row) {
    return reinterpret_cast<const Block*>(row);
}

std::uint16_t load_u16(const std::byte* p) {
    std::uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

std::uint32_t load_u32(const std::uint8_t* p) {
    std::uint32_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

// Group g of Q4_K / Q5_K: d * scale and dmin * min of its two sub-blocks 2g and 2g + 1.
struct K4Group {
    float d1, m1, d2, m2;
};
K4Group k4_group(const std::uint8_t* scales, int g, float d, float min) {
    int sc1, m1, sc2, m2;
    k4_scale_min(scales, 2 * g, sc1, m1);
    k4_scale_min(scales, 2 * g + 1, sc2, m2);
    return {d * static_cast<float>(sc1), min * static_cast<float>(m1), d * static_cast<float>(sc2), min * static_cast<float>(m2)};
}

}  // namespace

void dequantize_row_f32(const std::byte* row, float* out, std::size_t n) { std::memcpy(out, row, n * sizeof(float)); }

void dequantize_row_f16(const std::byte* row, float* out, std::size_t n) {
    for (std::size_t j = 0; j < n; ++j) out[j] = fp16_to_fp32(load_u16(row + 2 * j));
}

void dequantize_row_bf16(const std::byte* row, float* out, std::size_t n) {
    for (std::size_t j = 0; j < n; ++j) out[j] = bf16_to_fp32(load_u16(row + 2 * j));
}

// y[j] = q[j] * d
void dequantize_row_q8_0(const std::byte* row, float* out, std::size_t n) {
    const auto* x = blocks<BlockQ8_0>(row);
    for (std::size_t i = 0; i < n / kQK; ++i, out += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        for (std::size_t j = 0; j < kQK; ++j) out[j] = static_cast<float>(x[i].qs[j]) * d;
    }
}

// y[j] = (low nibble of qs[j] - 8) * d, y[j + 16] = (high nibble - 8) * d
void dequantize_row_q4_0(const std::byte* row, float* out, std::size_t n) {
    const auto* x = blocks<BlockQ4_0>(row);
    for (std::size_t i = 0; i < n / kQK; ++i, out += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        for (int j = 0; j < 16; ++j) {
            out[j] = static_cast<float>((x[i].qs[j] & 0x0F) - 8) * d;
            out[j + 16] = static_cast<float>((x[i].qs[j] >> 4) - 8) * d;
        }
    }
}

// y = q * d + m
void dequantize_row_q4_1(const std::byte* row, float* out, std::size_t n) {
    const auto* x = blocks<BlockQ4_1>(row);
    for (std::size_t i = 0; i < n / kQK; ++i, out += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        for (int j = 0; j < 16; ++j) {
            out[j] = static_cast<float>(x[i].qs[j] & 0x0F) * d + m;
            out[j + 16] = static_cast<float>(x[i].qs[j] >> 4) * d + m;
        }
    }
}

// The fifth bit of element j is bit j of qh; y = (q - 16) * d
void dequantize_row_q5_0(const std::byte* row, float* out, std::size_t n) {
    const auto* x = blocks<BlockQ5_0>(row);
    for (std::size_t i = 0; i < n / kQK; ++i, out += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        const std::uint32_t qh = load_u32(x[i].qh);
        for (int j = 0; j < 16; ++j) {
            const int h0 = ((qh >> j) << 4) & 0x10;
            const int h1 = (qh >> (j + 12)) & 0x10;
            out[j] = static_cast<float>(((x[i].qs[j] & 0x0F) | h0) - 16) * d;
            out[j + 16] = static_cast<float>(((x[i].qs[j] >> 4) | h1) - 16) * d;
        }
    }
}

// y = q * d + m with the fifth bit as in Q5_0
void dequantize_row_q5_1(const std::byte* row, float* out, std::size_t n) {
    const auto* x = blocks<BlockQ5_1>(row);
    for (std::size_t i = 0; i < n / kQK; ++i, out += kQK) {
        const float d = fp16_to_fp32(x[i].d);
        const float m = fp16_to_fp32(x[i].m);
        const std::uint32_t qh = load_u32(x[i].qh);
        for (int j = 0; j < 16; ++j) {
            const int h0 = ((qh >> j) << 4) & 0x10;
            const int h1 = (qh >> (j + 12)) & 0x10;
            out[j] = static_cast<float>((x[i].qs[j] & 0x0F) | h0) * d + m;
            out[j + 16] = static_cast<float>((x[i].qs[j] >> 4) | h1) * d + m;
        }
    }
}

// 16 sub-blocks of 16: scale (low nibble) and min (high nibble) of scales[s];
// y = (d * scale) * q - (dmin * min), q the 2-bit value at shift 2 * ((e / 32) % 4).
void dequantize_row_q2_K(const std::byte* row, float* out, std::size_t n) {
    const auto* x = blocks<BlockQ2_K>(row);
    for (std::size_t i = 0; i < n / kQK_K; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        const std::uint8_t* q = x[i].qs;
        int is = 0;
        for (int half = 0; half < 2; ++half, q += 32) {
            for (int shift = 0; shift < 8; shift += 2) {
                for (int part = 0; part < 2; ++part) {
                    const std::uint8_t sc = x[i].scales[is++];
                    const float dl = d * static_cast<float>(sc & 0xF);
                    const float ml = min * static_cast<float>(sc >> 4);
                    for (int l = 0; l < 16; ++l) *out++ = dl * static_cast<float>((q[l + 16 * part] >> shift) & 3) - ml;
                }
            }
        }
    }
}

// 16 sub-blocks of 16 with 6-bit scales (minus 32); q = 2 low bits - (high bit clear ? 4 : 0).
void dequantize_row_q3_K(const std::byte* row, float* out, std::size_t n) {
    const auto* x = blocks<BlockQ3_K>(row);
    for (std::size_t i = 0; i < n / kQK_K; ++i) {
        const float d_all = fp16_to_fp32(x[i].d);
        const std::uint8_t* q = x[i].qs;
        const std::uint8_t* hm = x[i].hmask;
        std::uint8_t m = 1;
        int is = 0;
        for (int half = 0; half < 2; ++half, q += 32) {
            for (int shift = 0; shift < 8; shift += 2, m = static_cast<std::uint8_t>(m << 1)) {
                for (int part = 0; part < 2; ++part) {
                    const float dl = d_all * static_cast<float>(q3_k_scale(x[i].scales, is++) - 32);
                    for (int l = 16 * part; l < 16 * part + 16; ++l) {
                        const int value = ((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4);
                        *out++ = dl * static_cast<float>(value);
                    }
                }
            }
        }
    }
}

// 4 groups of 64: 32 low nibbles with sub-block 2g's scale and min, 32 high nibbles with
// sub-block 2g + 1's; y = (d * scale) * q - (dmin * min).
void dequantize_row_q4_K(const std::byte* row, float* out, std::size_t n) {
    const auto* x = blocks<BlockQ4_K>(row);
    for (std::size_t i = 0; i < n / kQK_K; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        const std::uint8_t* q = x[i].qs;
        for (int g = 0; g < 4; ++g, q += 32) {
            const K4Group k = k4_group(x[i].scales, g, d, min);
            for (int l = 0; l < 32; ++l) *out++ = k.d1 * static_cast<float>(q[l] & 0xF) - k.m1;
            for (int l = 0; l < 32; ++l) *out++ = k.d2 * static_cast<float>(q[l] >> 4) - k.m2;
        }
    }
}

// Q4_K plus a fifth bit: bit 2g (low nibbles) or 2g + 1 (high) of qh[l] adds 16.
void dequantize_row_q5_K(const std::byte* row, float* out, std::size_t n) {
    const auto* x = blocks<BlockQ5_K>(row);
    for (std::size_t i = 0; i < n / kQK_K; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const float min = fp16_to_fp32(x[i].dmin);
        const std::uint8_t* ql = x[i].qs;
        const std::uint8_t* qh = x[i].qh;
        unsigned u1 = 1, u2 = 2;
        for (int g = 0; g < 4; ++g, ql += 32, u1 <<= 2, u2 <<= 2) {
            const K4Group k = k4_group(x[i].scales, g, d, min);
            for (int l = 0; l < 32; ++l) *out++ = k.d1 * static_cast<float>((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - k.m1;
            for (int l = 0; l < 32; ++l) *out++ = k.d2 * static_cast<float>((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - k.m2;
        }
    }
}

// Two halves of 128: four 32-element quarters from ql's nibbles and qh's bit pairs,
// 16-element sub-blocks with int8 scales; y = (d * scale) * (q - 32).
void dequantize_row_q6_K(const std::byte* row, float* out, std::size_t n) {
    const auto* x = blocks<BlockQ6_K>(row);
    for (std::size_t i = 0; i < n / kQK_K; ++i) {
        const float d = fp16_to_fp32(x[i].d);
        const std::uint8_t* ql = x[i].ql;
        const std::uint8_t* qh = x[i].qh;
        const std::int8_t* sc = x[i].scales;
        for (int half = 0; half < 2; ++half, out += 128, ql += 64, qh += 32, sc += 8) {
            for (int l = 0; l < 32; ++l) {
                const int is = l / 16;
                const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
                const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
                const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
                const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
                out[l] = d * static_cast<float>(sc[is + 0]) * static_cast<float>(q1);
                out[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
                out[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
                out[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
            }
        }
    }
}

}  // namespace ember::kernels
