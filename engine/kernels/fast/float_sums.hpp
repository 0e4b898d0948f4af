// Internal: the scalar pieces of llama.cpp's summation orders for F32, F16 and BF16
// dot products (docs/fast-path.md "Summation orders"), shared by every variant: the
// portable variant is built from them, the SIMD variants use them for the parts llama.cpp
// itself computes one element at a time (the tails of ggml_vec_dot_*).
//
// The orders are those of llama.cpp's CPU backend built for AVX-512 + VNNI + BF16 (the
// "zen4" build it loads on the machine that produced the goldens), read from its
// sources (ggml-cpu/vec.cpp, simd-mappings.h, llamafile/sgemm.cpp) and its compiled code:
//   reduce16            GCC's _mm512_reduce_add_ps: lane j+8 onto j, then j+4 onto j,
//                       then (0 + 2) + (1 + 3)
//   vdpbf16ps lane      acc = ftz(fma(x_odd, y_odd, daz(acc))), then
//                       acc = ftz(fma(x_even, y_even, acc)); inputs are DAZ (measured on
//                       this CPU: 0 mismatches in 3.2M random lanes, subnormals included).
//                       ftz is x86's (the SDM's "FP32 FMA with DAZ in, FTZ out"): a result
//                       is tiny after rounding to 24 bits with an unbounded exponent, so an
//                       exact value in [2^-126 - 2^-150, 2^-126 - 2^-151) is flushed,
//                       though rounding it to F32 gives 2^-126 (ftz_fma)
//   f32_dot_tail        ggml_vec_dot_f32's elements after the 64-element blocks: added
//                       in order to the float sum, multiplied-then-added except the last
//                       (count mod 8), which GCC contracted into fused multiply-adds
//   half_dot_tail       ggml_vec_dot_f16/bf16's tail: sum in double of float products
//
// Internal linkage, builtins only (see variant_kernels.hpp), and the library is built
// with -ffp-contract=off: every fused multiply-add here is written out.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::kernels::fast {
namespace {

inline float reduce16(const float* lanes) {
    float half[8], quarter[4];
    for (int j = 0; j < 8; ++j) half[j] = lanes[j + 8] + lanes[j];
    for (int j = 0; j < 4; ++j) quarter[j] = half[j + 4] + half[j];
    return (quarter[0] + quarter[2]) + (quarter[1] + quarter[3]);
}

// ggml_vec_dot_f32/f16's 64-element blocks go to four 16-lane accumulators; they are
// combined as (acc0 + acc2) + (acc1 + acc3), lane by lane, then reduced.
inline float combine_four(const float (*acc)[16]) {
    float lanes[16];
    for (int l = 0; l < 16; ++l) lanes[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    return reduce16(lanes);
}

inline float f32_dot_tail(float sum, const float* x, const float* y, std::size_t n) {
    const std::size_t fused_from = n - n % 8;
    std::size_t i = 0;
    for (; i < fused_from; ++i) sum = sum + x[i] * y[i];
    for (; i < n; ++i) sum = __builtin_fmaf(x[i], y[i], sum);
    return sum;
}

template <typename Element, typename Load>
double half_dot_tail(double sum, const Element* x, const Element* y, std::size_t n, Load load) {
    for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(load(x[i]) * load(y[i]));
    return sum;
}

// Subnormal -> zero of the same sign (DAZ on inputs).
inline float flush_subnormal(float x) {
    const std::uint32_t bits = __builtin_bit_cast(std::uint32_t, x);
    return (bits & 0x7F800000u) == 0 ? __builtin_bit_cast(float, bits & 0x80000000u) : x;
}

inline float bf16_value(std::uint16_t h) { return __builtin_bit_cast(float, static_cast<std::uint32_t>(h) << 16); }

// fma(x, y, acc) with MXCSR's FTZ, for x * y exact in double (BF16 values): a result
// below 2^-126 after rounding to 24 bits with an unbounded exponent becomes zero of its
// sign. That is every subnormal F32 result, and a result of +-2^-126 whose exact value
// lies below 2^-126 - 2^-151 (the tie rounds up); the double sum decides, as it is
// within 2^-179 of the exact value, which is never that close to the threshold.
inline float ftz_fma(float x, float y, float acc) {
    const float r = __builtin_fmaf(x, y, acc);
    const std::uint32_t bits = __builtin_bit_cast(std::uint32_t, r);
    const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
    const bool tiny = magnitude < 0x00800000u ||
                      (magnitude == 0x00800000u &&
                       __builtin_fabs(static_cast<double>(x) * y + static_cast<double>(acc)) < 0x1p-126 - 0x1p-151);
    return tiny ? __builtin_bit_cast(float, bits & 0x80000000u) : r;
}

// One lane of vdpbf16ps: the pair (x[0], x[1]) times (y[0], y[1]) into acc.
inline float dpbf16_lane(float acc, const std::uint16_t* x, const std::uint16_t* y) {
    acc = ftz_fma(flush_subnormal(bf16_value(x[1])), flush_subnormal(bf16_value(y[1])), flush_subnormal(acc));
    return ftz_fma(flush_subnormal(bf16_value(x[0])), flush_subnormal(bf16_value(y[0])), acc);
}

}  // namespace
}  // namespace ember::kernels::fast
