// llama.cpp's summation orders for F32, F16 and BF16 dot products (docs/fast-path.md
// "Summation orders"), transcribed as plain loops from its CPU backend built for
// AVX-512 + VNNI + BF16 (ggml-cpu/vec.cpp ggml_vec_dot_f32/f16/bf16 with
// simd-mappings.h's AVX-512 macros, llamafile/sgemm.cpp tinyBLAS, and the compiled
// tail of ggml_vec_dot_f32), independently of the kernels' code.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernel_test_support.hpp"

namespace ember::test {

// GCC's _mm512_reduce_add_ps: 256-bit halves, 128-bit halves, then (0 + 2) + (1 + 3).
inline float ref_reduce_add_ps(const float* v) {
    float t3[8], t6[4];
    for (int j = 0; j < 8; ++j) t3[j] = v[8 + j] + v[j];
    for (int j = 0; j < 4; ++j) t6[j] = t3[4 + j] + t3[j];
    const float t8_0 = t6[0] + t6[2], t8_1 = t6[1] + t6[3];
    return t8_0 + t8_1;
}

// GGML_F32_VEC_REDUCE with GGML_F32_ARR = 4: sum[0] += sum[2], sum[1] += sum[3],
// sum[0] += sum[1], then the 16-lane reduction.
inline float ref_f32_vec_reduce(float (&sum)[4][16]) {
    for (int l = 0; l < 16; ++l) sum[0][l] += sum[2][l], sum[1][l] += sum[3][l];
    for (int l = 0; l < 16; ++l) sum[0][l] += sum[1][l];
    return ref_reduce_add_ps(sum[0]);
}

// ggml_vec_dot_f32 / f16: GGML_F32_STEP = GGML_F16_STEP = 64, EPR 16, FMA per lane.
template <typename T, typename ToFloat>
float ref_step64_sum(const T* x, const T* y, int np, ToFloat f) {
    float sum[4][16] = {};
    for (int i = 0; i < np; i += 64)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 16; ++l) sum[j][l] = std::fma(f(x[i + 16 * j + l]), f(y[i + 16 * j + l]), sum[j][l]);
    return ref_f32_vec_reduce(sum);
}

inline float ref_identity(float v) { return v; }
inline float ref_half(std::uint16_t h) { return ref_half_to_float(h); }
inline float ref_bf16(std::uint16_t h) { return ref_bf16_to_float(h); }

// The leftovers `sumf += x[i]*y[i]` as GCC compiled them for that build (objdump of
// libggml-cpu-zen4.so): runs of 16, then of 8, multiplied as vectors and added one by
// one; the last (count mod 8) contracted into fused multiply-adds.
inline float ref_vec_dot_f32(const float* x, const float* y, int n) {
    const int np = n & ~63;
    float sumf = ref_step64_sum(x, y, np, ref_identity);
    const int vector_part = np + (n - np) / 8 * 8;
    for (int i = np; i < vector_part; ++i) {
        const float product = x[i] * y[i];
        sumf = sumf + product;
    }
    for (int i = vector_part; i < n; ++i) sumf = std::fma(x[i], y[i], sumf);
    return sumf;
}

inline float ref_vec_dot_f16(const std::uint16_t* x, const std::uint16_t* y, int n) {
    const int np = n & ~63;
    double sumf = ref_step64_sum(x, y, np, ref_half);
    for (int i = np; i < n; ++i) sumf += static_cast<double>(ref_half(x[i]) * ref_half(y[i]));
    return static_cast<float>(sumf);
}

// vdpbf16ps, one lane, as measured on this CPU: DAZ inputs, the odd pair first, FTZ.
// FTZ is x86's: tininess after rounding with an unbounded exponent, so a sum whose exact
// value lies in [2^-126 - 2^-150, 2^-126 - 2^-151) becomes zero although it rounds to the
// smallest normal (decided here from the exact sum in long double arithmetic).
inline float ref_ftz(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; }
inline float ref_ftz_fma(float x, float y, float acc) {
    const float r = std::fma(x, y, acc);
    const long double exact = static_cast<long double>(x) * y + acc;
    const bool tiny = std::fpclassify(r) == FP_SUBNORMAL ||
                      (std::fabs(r) == 0x1p-126f && std::fabs(exact) < 0x1p-126L - 0x1p-151L);
    return tiny ? std::copysign(0.0f, r) : r;
}
inline float ref_dpbf16_lane(float acc, const std::uint16_t* x, const std::uint16_t* y) {
    acc = ref_ftz_fma(ref_ftz(ref_bf16(x[1])), ref_ftz(ref_bf16(y[1])), ref_ftz(acc));
    return ref_ftz_fma(ref_ftz(ref_bf16(x[0])), ref_ftz(ref_bf16(y[0])), acc);
}

// ggml_vec_dot_bf16 (__AVX512BF16__): c1 and c2 over i + 64 <= n, then the tail in double.
inline float ref_vec_dot_bf16(const std::uint16_t* x, const std::uint16_t* y, int n) {
    float c1[16] = {}, c2[16] = {};
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        for (int l = 0; l < 16; ++l) c1[l] = ref_dpbf16_lane(c1[l], x + i + 2 * l, y + i + 2 * l);
        for (int l = 0; l < 16; ++l) c2[l] = ref_dpbf16_lane(c2[l], x + i + 32 + 2 * l, y + i + 32 + 2 * l);
    }
    double sumf = 0;
    sumf += static_cast<double>(ref_reduce_add_ps(c1));
    sumf += static_cast<double>(ref_reduce_add_ps(c2));
    for (; i < n; ++i) sumf += static_cast<double>(ref_bf16(x[i]) * ref_bf16(y[i]));
    return static_cast<float>(sumf);
}

// tinyBLAS<16, __m512, __m512, T, T, float>::gemm_bloc for one output (k % 16 == 0).
template <typename T, typename ToFloat>
float ref_tinyblas16(const T* a, const T* b, int k, ToFloat f) {
    float c[16] = {};
    for (int l = 0; l < k; l += 16)
        for (int lane = 0; lane < 16; ++lane) c[lane] = std::fma(f(a[l + lane]), f(b[l + lane]), c[lane]);
    return ref_reduce_add_ps(c);
}

// tinyBLAS<32, __m512, __m512bh, bf16, bf16, float> (k % 32 == 0): madd = vdpbf16ps.
inline float ref_tinyblas_bf16(const std::uint16_t* a, const std::uint16_t* b, int k) {
    float c[16] = {};
    for (int l = 0; l < k; l += 32)
        for (int lane = 0; lane < 16; ++lane) c[lane] = ref_dpbf16_lane(c[lane], a + l + 2 * lane, b + l + 2 * lane);
    return ref_reduce_add_ps(c);
}

}  // namespace ember::test
