// Shared by the kernel tests: the kernel sets this CPU can run, and plain scalar
// references written straight from model-math (independent of the kernels' code).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "kernels/fast/cpu_features.hpp"
#include "kernels/fast/kernel_set.hpp"
#include "kernels/fast/kernel_types.hpp"

namespace ember::test {

namespace fast = ember::kernels::fast;

// Every kernel set this CPU can run: each variant, and for AVX-512 also the set without
// the optional VNNI / BF16 extensions (what an AVX-512 CPU without them would use).
inline std::vector<fast::KernelSet> runnable_kernel_sets() {
    const fast::CpuFeatures cpu = fast::detect_cpu_features();
    std::vector<fast::KernelSet> sets;
    for (fast::CpuVariant v : fast::kAllCpuVariants) {
        if (!fast::supports(cpu, v)) {
            MESSAGE("skipping the " << fast::variant_name(v) << " kernels: this CPU lacks them");
            continue;
        }
        sets.push_back(fast::make_kernel_set(v, cpu));
        if (v == fast::CpuVariant::avx512 && (cpu.avx512vnni || cpu.avx512bf16)) {
            fast::CpuFeatures plain = cpu;
            plain.avx512vnni = false;
            plain.avx512bf16 = false;
            sets.push_back(fast::make_kernel_set(v, plain));
        }
    }
    return sets;
}

inline std::uint32_t float_bits(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float bits_float(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// ---- references (model-math §2.1, §2.2, §2.9) ----

// IEEE half -> double, from the definition.
inline double ref_half_value(std::uint16_t h) {
    const int sign = (h & 0x8000) ? -1 : 1;
    const int exponent = (h >> 10) & 0x1F;
    const int mantissa = h & 0x3FF;
    if (exponent == 0) return sign * std::ldexp(mantissa, -24);
    if (exponent == 31) return mantissa ? NAN : sign * INFINITY;
    return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

// Nearest half to a finite or infinite float, ties to the even bit pattern, overflow to
// inf (the largest half, 65504, rounds up once the value reaches 65520).
inline std::uint16_t ref_float_to_half(float f) {
    const std::uint16_t sign = std::signbit(f) ? 0x8000 : 0;
    const double x = std::fabs(static_cast<double>(f));
    if (std::isinf(f) || x >= 65520.0) return sign | 0x7C00;
    // binary search the largest finite half <= x among the 0x7C00 non-negative finite ones
    int lo = 0, hi = 0x7BFF;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (ref_half_value(static_cast<std::uint16_t>(mid)) <= x) lo = mid;
        else hi = mid - 1;
    }
    const double below = ref_half_value(static_cast<std::uint16_t>(lo));
    const double above = lo == 0x7BFF ? 65536.0 : ref_half_value(static_cast<std::uint16_t>(lo + 1));
    int pick = lo;
    if (x - below > above - x || (x - below == above - x && (lo & 1))) pick = lo + 1;
    return static_cast<std::uint16_t>(sign | pick);
}

// Nearest bfloat16 (the top 16 bits of some float), ties to even, subnormals kept.
inline std::uint16_t ref_float_to_bf16(float f) {
    const std::uint32_t bits = float_bits(f);
    const std::uint16_t truncated = static_cast<std::uint16_t>(bits >> 16);
    if (std::isinf(f) || (bits & 0xFFFF) == 0) return truncated;
    const double x = std::fabs(static_cast<double>(f));
    const std::uint16_t mag = truncated & 0x7FFF;
    const double below = std::fabs(static_cast<double>(bits_float(static_cast<std::uint32_t>(mag) << 16)));
    const double above = mag == 0x7F7F ? std::ldexp(1.0, 128) : static_cast<double>(bits_float(static_cast<std::uint32_t>(mag + 1) << 16));
    const bool up = x - below > above - x || (x - below == above - x && (mag & 1));
    return static_cast<std::uint16_t>((truncated & 0x8000) | (up ? mag + 1 : mag));
}

inline float ref_half_to_float(std::uint16_t h) { return static_cast<float>(ref_half_value(h)); }
inline float ref_bf16_to_float(std::uint16_t h) { return bits_float(static_cast<std::uint32_t>(h) << 16); }

// cvtps2dq followed by the saturating packs to int8: round half to even; NaN and values
// beyond int32 become INT32_MIN ("integer indefinite"), hence -128.
inline std::int8_t ref_cvt_saturate_int8(float v) {
    const double r = std::nearbyint(static_cast<double>(v));
    const bool indefinite = std::isnan(v) || r >= 2147483648.0 || r < -2147483648.0;
    const double i = indefinite ? -2147483648.0 : r;
    return static_cast<std::int8_t>(std::clamp(i, -128.0, 127.0));
}

// Q8_0 activation quantization, x86 runtime rule (§2.2), for finite input.
inline void ref_quantize_q8_0(const float* x, fast::BlockQ8_0* y, std::size_t n) {
    for (std::size_t b = 0; b < n / 32; ++b) {
        float amax = 0.0f;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
        const float d = amax / 127.0f;
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        y[b].d = ref_float_to_half(d);
        for (int j = 0; j < 32; ++j) {
            y[b].qs[j] = ref_cvt_saturate_int8(x[32 * b + j] * id);
        }
    }
}

// Q8_0 x Q8_0 dot, x86 reduction order (§2.9).
inline float ref_q8_0_dot(const fast::BlockQ8_0* w, const fast::BlockQ8_0* a, std::size_t n_blocks) {
    float acc[8] = {};
    for (std::size_t b = 0; b < n_blocks; ++b) {
        const float dd = ref_half_to_float(w[b].d) * ref_half_to_float(a[b].d);
        for (int i = 0; i < 8; ++i) {
            std::int32_t s = 0;
            for (int k = 0; k < 4; ++k) s += static_cast<std::int32_t>(w[b].qs[4 * i + k]) * a[b].qs[4 * i + k];
            acc[i] = std::fma(dd, static_cast<float>(s), acc[i]);
        }
    }
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// ggml_v_expf, AVX-512 form, one lane (model-math §3.4): constants from the source.
inline float ref_vector_exp(float x) {
    const float shift = 0x1.8p23f;
    const float z = std::fma(x, 0x1.715476p+0f, shift);
    const float n = z - shift;
    const float b = std::fma(-n, 0x1.7f7d1cp-20f, std::fma(-n, 0x1.62e4p-1f, x));
    const float u = b * b;
    const float j = std::fma(std::fma(std::fma(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, std::fma(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)),
                             u, std::fma(0x1.ffffecp-1f, b, 1.0f));
    if (std::isnan(n)) return n;
    if (std::fabs(n) > 192.0f) return n <= 0.0f ? 0.0f : INFINITY;
    return static_cast<float>(std::ldexp(static_cast<double>(j), static_cast<int>(n)));  // exact, then one rounding
}

// ---- random data ----

inline std::vector<float> random_floats(std::mt19937& rng, std::size_t n, float scale = 1.0f) {
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
}

// Random Q8_0 weight blocks: scales in [lo, hi), values in [-128, 127] (files hold
// [-127, 127]; -128 is included because the kernels must multiply any byte right).
inline std::vector<fast::BlockQ8_0> random_q8_0(std::mt19937& rng, std::size_t n_blocks, float lo = 1e-3f, float hi = 0.1f,
                                                int min_value = -128) {
    std::uniform_real_distribution<float> scale(lo, hi);
    std::uniform_int_distribution<int> value(min_value, 127);
    std::vector<fast::BlockQ8_0> blocks(n_blocks);
    for (auto& b : blocks) {
        b.d = ref_float_to_half(scale(rng));
        for (auto& q : b.qs) q = static_cast<std::int8_t>(value(rng));
    }
    return blocks;
}

// Random quantized activations: what quantize_row_q8_0 produces for finite input has
// values in [-127, 127] (the AVX2 kernel relies on it, as llama.cpp's does).
inline std::vector<fast::BlockQ8_0> random_q8_0_activations(std::mt19937& rng, std::size_t n_blocks) {
    return random_q8_0(rng, n_blocks, 1e-3f, 5.0f, -127);
}

}  // namespace ember::test
