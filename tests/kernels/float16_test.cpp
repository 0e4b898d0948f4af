// Rung: below the ladder (kernel unit tests). The one F16/BF16 conversion header
// (kernels/float16.hpp) pinned bit for bit, and every place each route converts with it
// giving the same bits: the reference route's KV cache and F16/BF16 weight rows, the fast
// route's row rounding and KV cache in every kernel set this CPU runs, and the F16C
// instructions llama.cpp's CPU backend converts with. NaN payloads, infinities,
// subnormals and ties are pinned; the tolerance is zero.
#include <doctest/doctest.h>

#include <immintrin.h>

#include <cstring>
#include <ios>
#include <vector>

#include "kernel_test_support.hpp"
#include "kernels/dequantize.hpp"
#include "kernels/fast/row_ops.hpp"
#include "kernels/fast/thread_pool.hpp"
#include "kernels/float16.hpp"
#include "kernels/reference/kernels.hpp"

using namespace ember::test;
namespace kernels = ember::kernels;

namespace {

struct Encode {
    std::uint32_t f32;
    std::uint16_t f16;
    std::uint16_t bf16;
};

// F32 bits -> F16 and BF16 bits (model-math §2.1; NaN as vcvtps2ph and ggml_fp32_to_bf16).
constexpr Encode kEncodes[] = {
    {0x00000000u, 0x0000, 0x0000},  // +0
    {0x80000000u, 0x8000, 0x8000},  // -0
    {0x3F800000u, 0x3C00, 0x3F80},  // 1
    {0x3F801000u, 0x3C00, 0x3F80},  // 1 + 2^-11: an F16 tie, to the even 1.0
    {0x3F803000u, 0x3C02, 0x3F80},  // 1 + 3 * 2^-11: a tie, up to even
    {0x3F808000u, 0x3C04, 0x3F80},  // BF16 tie (low 16 bits 0x8000), kept part even
    {0x3F818000u, 0x3C0C, 0x3F82},  // BF16 tie, kept part odd: up
    {0x477FE000u, 0x7BFF, 0x4780},  // 65504, the largest half
    {0x477FEFFFu, 0x7BFF, 0x4780},  // just below 65520
    {0x477FF000u, 0x7C00, 0x4780},  // 65520: rounds to inf
    {0xC77FF000u, 0xFC00, 0xC780},  // -65520
    {0x7F7FFFFFu, 0x7C00, 0x7F80},  // FLT_MAX: F16 inf; BF16 rounds to inf too
    {0x7F800000u, 0x7C00, 0x7F80},  // +inf
    {0xFF800000u, 0xFC00, 0xFF80},  // -inf
    {0x38800000u, 0x0400, 0x3880},  // 2^-14, the smallest normal half
    {0x387FC000u, 0x03FF, 0x3880},  // the largest subnormal half, exact
    {0x387FF000u, 0x0400, 0x3880},  // between it and 2^-14: rounds up to 2^-14
    {0x33800000u, 0x0001, 0x3380},  // 2^-24, the smallest subnormal half
    {0x33000000u, 0x0000, 0x3300},  // 2^-25: a tie, to even (0)
    {0x33400000u, 0x0001, 0x3340},  // 1.5 * 2^-25: up
    {0x00000001u, 0x0000, 0x0000},  // the smallest F32 subnormal
    {0x007FFFFFu, 0x0000, 0x0080},  // the largest F32 subnormal: BF16 keeps subnormals
    {0x7FC00000u, 0x7E00, 0x7FC0},  // quiet NaN
    {0xFFC00000u, 0xFE00, 0xFFC0},  // negative quiet NaN
    {0x7F800001u, 0x7E00, 0x7FC0},  // signalling NaN, low payload: quieted, payload lost
    {0x7F802000u, 0x7E01, 0x7FC0},  // signalling NaN: quieted, top payload bit kept
    {0xFFA00000u, 0xFF00, 0xFFE0},  // negative signalling NaN
    {0x7FBFFFFFu, 0x7FFF, 0x7FFF},  // signalling NaN, full payload
};

struct Decode {
    std::uint16_t f16;
    std::uint32_t f32;
};

// F16 bits -> F32 bits: exact, NaN quieted with its payload (vcvtph2ps).
constexpr Decode kDecodes[] = {
    {0x0000, 0x00000000u}, {0x8000, 0x80000000u}, {0x0001, 0x33800000u}, {0x03FF, 0x387FC000u},
    {0x0400, 0x38800000u}, {0x3C00, 0x3F800000u}, {0x7BFF, 0x477FE000u}, {0x7C00, 0x7F800000u},
    {0xFC00, 0xFF800000u}, {0x7E00, 0x7FC00000u}, {0x7C01, 0x7FC02000u}, {0xFC01, 0xFFC02000u},
    {0x7D00, 0x7FE00000u}, {0x7FFF, 0x7FFFE000u},
};

std::vector<float> encode_inputs() {
    std::vector<float> v;
    for (const Encode& e : kEncodes) v.push_back(bits_float(e.f32));
    return v;
}

std::vector<std::byte> halves_bytes(const std::vector<std::uint16_t>& h) {
    std::vector<std::byte> bytes(h.size() * 2);
    std::memcpy(bytes.data(), h.data(), bytes.size());
    return bytes;
}

__attribute__((target("f16c"))) std::uint16_t f16c_encode(float f) { return _cvtss_sh(f, 0); }
__attribute__((target("f16c"))) float f16c_decode(std::uint16_t h) { return _cvtsh_ss(h); }

}  // namespace

TEST_CASE("float16: the header's conversions, pinned bit for bit") {
    for (const Encode& e : kEncodes) {
        CAPTURE(e.f32);
        CHECK(kernels::fp32_to_fp16(bits_float(e.f32)) == e.f16);
        CHECK(kernels::fp32_to_bf16(bits_float(e.f32)) == e.bf16);
    }
    for (const Decode& d : kDecodes) {
        CAPTURE(d.f16);
        CHECK(float_bits(kernels::fp16_to_fp32(d.f16)) == d.f32);
    }
    for (std::uint32_t h = 0; h < 0x10000; ++h)  // BF16 decode is the bits, NaNs included
        REQUIRE(float_bits(kernels::bf16_to_fp32(static_cast<std::uint16_t>(h))) == h << 16);
}

TEST_CASE("float16: the header is the F16C instructions llama.cpp converts with, NaN payloads included") {
    if (!__builtin_cpu_supports("f16c")) {
        MESSAGE("skipping: this CPU has no F16C");
        return;
    }
    for (std::uint32_t h = 0; h < 0x10000; ++h) {
        const auto half = static_cast<std::uint16_t>(h);
        REQUIRE_MESSAGE(float_bits(kernels::fp16_to_fp32(half)) == float_bits(f16c_decode(half)), "half 0x" << std::hex << h);
    }
    // Every F32 exponent, with mantissas that hit ties, neighbours and NaN payloads.
    for (std::uint32_t top = 0; top < 0x200; ++top) {
        for (std::uint32_t low : {0x000000u, 0x000001u, 0x000FFFu, 0x001000u, 0x001001u, 0x002000u, 0x003000u, 0x1FF000u,
                                  0x400000u, 0x401000u, 0x7FE000u, 0x7FF000u, 0x7FFFFFu}) {
            const float f = bits_float((top << 23) | low);
            REQUIRE_MESSAGE(kernels::fp32_to_fp16(f) == f16c_encode(f), "f32 0x" << std::hex << float_bits(f));
        }
    }
}

TEST_CASE("float16: the reference route's KV cache and F16/BF16 weight rows convert with the header") {
    const auto inputs = encode_inputs();
    std::vector<std::uint16_t> cached(inputs.size());
    kernels::ConstRows x{inputs.data(), 1, inputs.size(), inputs.size()};
    kernels::reference::store_kv(x, {kernels::KvType::f16, reinterpret_cast<std::byte*>(cached.data()), 1, inputs.size(),
                                     inputs.size() * 2});
    for (std::size_t i = 0; i < inputs.size(); ++i) CHECK(cached[i] == kEncodes[i].f16);

    std::vector<std::uint16_t> halves;
    for (const Decode& d : kDecodes) halves.push_back(d.f16);
    std::vector<float> out(halves.size());
    kernels::dequantize_row_f16(halves_bytes(halves).data(), out.data(), halves.size());
    for (std::size_t i = 0; i < halves.size(); ++i) CHECK(float_bits(out[i]) == kDecodes[i].f32);
    std::vector<std::uint16_t> bf16s;
    for (const Encode& e : kEncodes) bf16s.push_back(e.bf16);
    out.resize(bf16s.size());
    kernels::dequantize_row_bf16(halves_bytes(bf16s).data(), out.data(), bf16s.size());
    for (std::size_t i = 0; i < bf16s.size(); ++i) CHECK(float_bits(out[i]) == static_cast<std::uint32_t>(bf16s[i]) << 16);
}

TEST_CASE("float16: the fast route's row rounding and KV cache give the same bits in every kernel set") {
    const auto inputs = encode_inputs();
    auto pool = fast::ThreadPool::callers();
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        std::vector<std::uint16_t> h(inputs.size()), b(inputs.size()), cached(inputs.size());
        k.round_row_f16(inputs.data(), h.data(), inputs.size());
        k.round_row_bf16(inputs.data(), b.data(), inputs.size());
        fast::store_kv(k, pool, inputs.data(), inputs.size(), 1, inputs.size(), kernels::KvType::f16,
                       reinterpret_cast<std::byte*>(cached.data()), inputs.size() * 2);
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            CAPTURE(kEncodes[i].f32);
            CHECK(h[i] == kEncodes[i].f16);
            CHECK(b[i] == kEncodes[i].bf16);
            CHECK(cached[i] == kEncodes[i].f16);
        }
    }
}
