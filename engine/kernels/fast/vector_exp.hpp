// The constants of llama.cpp's vector exp (ggml_v_expf, AVX-512 form; model-math §3.4,
// §3.5). The same algorithm is evaluated by every variant, so exp and everything built on
// it (SiLU, softmax) give the same bits in the scalar, AVX2 and AVX-512 kernels and in
// llama.cpp's AVX-512 build:
//   z = fma(x, log2(e), 1.5 * 2^23);  n = z - 1.5 * 2^23        (x / ln 2 rounded)
//   b = fma(-n, ln2_lo, fma(-n, ln2_hi, x))                      (reduced argument)
//   u = b * b
//   j = fma(fma(fma(c5, b, c4), u, fma(c3, b, c2)), u, fma(c1, b, 1))
//   exp(x) = j * 2^n (one rounding); |n| > 192: 0 if n <= 0, else +inf
// The scalar evaluation below has internal linkage and uses builtins only (see
// variant_kernels.hpp); the AVX2 and AVX-512 forms live in their variants' headers.
#pragma once

namespace ember::kernels::fast::exp_constants {

inline constexpr float kShift = 0x1.8p23f;
inline constexpr float kLog2e = 0x1.715476p+0f;
inline constexpr float kLn2Hi = 0x1.62e4p-1f;
inline constexpr float kLn2Lo = 0x1.7f7d1cp-20f;
inline constexpr float kC1 = 0x1.ffffecp-1f;
inline constexpr float kC2 = 0x1.fffdb6p-2f;
inline constexpr float kC3 = 0x1.555e66p-3f;
inline constexpr float kC4 = 0x1.573e2ep-5f;
inline constexpr float kC5 = 0x1.0e4020p-7f;
inline constexpr float kOverflowN = 192.0f;

// SwiGLU and softmax process a row in groups of this many elements with the vector exp
// and the rest with the C library's expf, as llama.cpp's AVX-512 build does.
inline constexpr int kGroup = 16;

}  // namespace ember::kernels::fast::exp_constants

namespace ember::kernels::fast {
namespace {

// j * 2^n with one rounding, for integral |n| <= 192: the first factor keeps j * 2^n1
// exact and normal, the second rounds once (as vscalefps does).
inline float scale_by_power_of_two(float j, float n) {
    const int n1 = static_cast<int>(n) / 2;
    const int n2 = static_cast<int>(n) - n1;
    return j * __builtin_bit_cast(float, static_cast<unsigned>(n1 + 127) << 23) *
           __builtin_bit_cast(float, static_cast<unsigned>(n2 + 127) << 23);
}

// llama.cpp's vector exp for one value, with correctly rounded fmaf.
inline float vector_exp_scalar(float x) {
    namespace c = exp_constants;
    const float z = __builtin_fmaf(x, c::kLog2e, c::kShift);
    const float n = z - c::kShift;
    const float b = __builtin_fmaf(-n, c::kLn2Lo, __builtin_fmaf(-n, c::kLn2Hi, x));
    const float u = b * b;
    const float j = __builtin_fmaf(__builtin_fmaf(__builtin_fmaf(c::kC5, b, c::kC4), u, __builtin_fmaf(c::kC3, b, c::kC2)), u,
                                   __builtin_fmaf(c::kC1, b, 1.0f));
    if (n != n) return n;  // NaN in, NaN out
    if (__builtin_fabsf(n) > c::kOverflowN) return n <= 0.0f ? 0.0f : __builtin_inff();
    return scale_by_power_of_two(j, n);
}

}  // namespace
}  // namespace ember::kernels::fast
