// Rung: below the ladder (kernel unit tests). Activation conversions of every kernel set
// this CPU runs against plain references: F32 -> F16 and F32 -> BF16 rounding (model-math
// §2.1) and the x86 runtime Q8_0 quantizer (§2.2), over random values and edge cases
// (exact ties, subnormals, overflow, infinities, NaN, signed zeros, every tail length),
// its Q8_1 variant (the sum's s), and the Q8_K quantizer of the K-quant products
// (quantize_row_q8_K_ref, §2.8).
// All of these must be bit-exact: the tolerance is zero.
#include <doctest/doctest.h>

#include <cmath>
#include <ios>
#include <limits>

#include "kernel_test_support.hpp"
#include "kernels/float16.hpp"

using namespace ember::test;
namespace fast = ember::kernels::fast;

namespace {

// Finite values that stress rounding to half: random magnitudes across the half range
// and beyond, every exact midpoint between neighbouring halves near a few exponents,
// values one float ulp either side of those midpoints, and the overflow boundary.
std::vector<float> half_rounding_inputs() {
    std::mt19937 rng(7);
    std::vector<float> v;
    std::uniform_real_distribution<float> exponent(-30.0f, 17.0f);
    std::uniform_real_distribution<float> mantissa(1.0f, 2.0f);
    for (int i = 0; i < 20000; ++i) {
        const float x = std::ldexp(mantissa(rng), static_cast<int>(exponent(rng)));
        v.push_back(i % 2 ? x : -x);
    }
    for (std::uint16_t h : {0x0000, 0x0001, 0x0002, 0x03FF, 0x0400, 0x0401, 0x3BFF, 0x3C00, 0x3C01, 0x7BFE}) {
        const float mid = static_cast<float>((ref_half_value(h) + ref_half_value(static_cast<std::uint16_t>(h + 1))) / 2);
        v.insert(v.end(), {mid, -mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e9f)});
    }
    v.insert(v.end(), {0.0f, -0.0f, 65504.0f, 65519.996f, 65520.0f, -65520.0f, 1e30f, -1e30f,
                       std::numeric_limits<float>::denorm_min(), -std::numeric_limits<float>::denorm_min(),
                       std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                       std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()});
    return v;
}

std::vector<float> bf16_rounding_inputs() {
    std::mt19937 rng(11);
    std::vector<float> v;
    std::uniform_int_distribution<std::uint32_t> any_bits(0, 0xFFFFFFFFu);
    for (int i = 0; i < 20000; ++i) {
        const float x = bits_float(any_bits(rng));
        if (!std::isnan(x)) v.push_back(x);
    }
    // exact ties (low 16 bits 0x8000) with odd and even kept parts, subnormal ties, near max
    for (std::uint32_t kept : {0x3F80u, 0x3F81u, 0x0001u, 0x0002u, 0x007Fu, 0x7F7Eu, 0x7F7Fu, 0xBF80u, 0xBF81u}) {
        for (std::uint32_t low : {0x7FFFu, 0x8000u, 0x8001u}) v.push_back(bits_float((kept << 16) | low));
    }
    v.insert(v.end(), {0.0f, -0.0f, std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()});
    return v;
}

}  // namespace

TEST_CASE("conversions: F16 decode is exact for all 65536 bit patterns") {
    for (std::uint32_t h = 0; h < 0x10000; ++h) {
        const float got = ember::kernels::fp16_to_fp32(static_cast<std::uint16_t>(h));
        const double want = ref_half_value(static_cast<std::uint16_t>(h));
        if (std::isnan(want)) {
            REQUIRE(std::isnan(got));
            CHECK(std::signbit(got) == ((h & 0x8000) != 0));
        } else {
            REQUIRE_MESSAGE(got == want, "half 0x" << std::hex << h);
            CHECK(std::signbit(got) == ((h & 0x8000) != 0));
        }
    }
}

TEST_CASE("conversions: F32 -> F16 rounds to nearest even in every kernel set, every tail length") {
    const auto inputs = half_rounding_inputs();
    std::vector<std::uint16_t> want(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) want[i] = ref_float_to_half(inputs[i]);
    for (std::size_t i = 0; i < inputs.size(); ++i) REQUIRE(ember::kernels::fp32_to_fp16(inputs[i]) == want[i]);
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        std::vector<std::uint16_t> got(inputs.size());
        k.round_row_f16(inputs.data(), got.data(), inputs.size());
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            REQUIRE_MESSAGE(got[i] == want[i], "input " << inputs[i] << " (bits 0x" << std::hex << float_bits(inputs[i]) << ")");
        }
        for (std::size_t n = 1; n <= 40; ++n) {  // tails: nothing written past n, same values
            std::vector<std::uint16_t> part(n + 1, 0xABCD);
            k.round_row_f16(inputs.data(), part.data(), n);
            for (std::size_t i = 0; i < n; ++i) REQUIRE(part[i] == want[i]);
            REQUIRE(part[n] == 0xABCD);
        }
    }
}

TEST_CASE("conversions: NaN stays NaN with its sign in F16 and BF16, the same bits in every kernel set") {
    const std::vector<float> nans = {bits_float(0x7FC00000u), bits_float(0xFFC00000u), bits_float(0x7F800001u),
                                     bits_float(0xFFA5A5A5u), bits_float(0x7FFFFFFFu)};
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        std::vector<std::uint16_t> h(nans.size()), b(nans.size());
        k.round_row_f16(nans.data(), h.data(), nans.size());
        k.round_row_bf16(nans.data(), b.data(), nans.size());
        for (std::size_t i = 0; i < nans.size(); ++i) {
            const bool negative = (float_bits(nans[i]) >> 31) != 0;
            CHECK(std::isnan(ember::kernels::fp16_to_fp32(h[i])));
            CHECK(((h[i] & 0x8000) != 0) == negative);
            CHECK((h[i] & 0x0200) != 0);  // quiet
            CHECK(h[i] == ember::kernels::fp32_to_fp16(nans[i]));
            CHECK(std::isnan(ref_bf16_to_float(b[i])));
            CHECK(((b[i] & 0x8000) != 0) == negative);
            CHECK(b[i] == ((float_bits(nans[i]) >> 16) | 0x40));  // model-math §2.1
        }
    }
}

TEST_CASE("conversions: F32 -> BF16 rounds to nearest even (subnormals kept) in every kernel set") {
    const auto inputs = bf16_rounding_inputs();
    std::vector<std::uint16_t> want(inputs.size());
    for (std::size_t i = 0; i < inputs.size(); ++i) want[i] = ref_float_to_bf16(inputs[i]);
    for (std::size_t i = 0; i < inputs.size(); ++i) REQUIRE(ember::kernels::fp32_to_bf16(inputs[i]) == want[i]);
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        std::vector<std::uint16_t> got(inputs.size());
        k.round_row_bf16(inputs.data(), got.data(), inputs.size());
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            REQUIRE_MESSAGE(got[i] == want[i], "input bits 0x" << std::hex << float_bits(inputs[i]));
        }
        for (std::size_t n = 1; n <= 40; ++n) {
            std::vector<std::uint16_t> part(n + 1, 0xABCD);
            k.round_row_bf16(inputs.data(), part.data(), n);
            for (std::size_t i = 0; i < n; ++i) REQUIRE(part[i] == want[i]);
            REQUIRE(part[n] == 0xABCD);
        }
    }
}

TEST_CASE("quantize Q8_0: x86 runtime rule, bit-exact in every kernel set") {
    std::mt19937 rng(3);
    std::vector<float> x;
    auto add_block = [&](const std::vector<float>& block) { x.insert(x.end(), block.begin(), block.end()); };
    for (int b = 0; b < 64; ++b) add_block(random_floats(rng, 32, b % 2 ? 3.0f : 0.01f));
    add_block(std::vector<float>(32, 0.0f));   // all zero: d = 0, id = 0
    add_block(std::vector<float>(32, -0.0f));
    // amax 127 makes id exactly 1: x.5 values are exact ties and must go to even
    std::vector<float> ties = {127.0f, -14.5f, -12.5f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 126.5f, -126.5f, 3.5f, 4.5f};
    ties.resize(32, 0.25f);
    add_block(ties);
    std::vector<float> spike(32, 1e-6f);       // one large value, the rest round to zero
    spike[17] = -5e3f;
    add_block(spike);
    std::vector<float> tiny(32);                // subnormal and smallest normal magnitudes
    for (int j = 0; j < 32; ++j) tiny[j] = (j % 3 - 1) * std::numeric_limits<float>::min() * static_cast<float>(j) / 64.0f;
    add_block(tiny);
    std::vector<float> big(32, 3e38f);          // d overflows F16 to inf; q stays finite
    big[0] = -3.4e38f;
    add_block(big);

    const std::size_t n = x.size();
    std::vector<fast::BlockQ8_0> want(n / 32);
    ref_quantize_q8_0(x.data(), want.data(), n);
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        std::vector<fast::BlockQ8_0> got(n / 32);
        k.quantize_row_q8_0(x.data(), got.data(), n);
        for (std::size_t b = 0; b < got.size(); ++b) {
            CAPTURE(b);
            REQUIRE(got[b].d == want[b].d);
            for (int j = 0; j < 32; ++j) REQUIRE(got[b].qs[j] == want[b].qs[j]);
        }
    }
    // the tie block, spelled out: -14.5 -> -14, -12.5 -> -12, 0.5 -> 0, 1.5 -> 2, 2.5 -> 2
    const auto& t = want[66];
    CHECK(t.d == 0x3C00);
    CHECK((t.qs[0] == 127 && t.qs[1] == -14 && t.qs[2] == -12 && t.qs[3] == 0 && t.qs[4] == 2 && t.qs[5] == 2));
    CHECK((t.qs[6] == 0 && t.qs[7] == -2 && t.qs[8] == 126 && t.qs[9] == -126 && t.qs[10] == 4 && t.qs[11] == 4));
}

TEST_CASE("quantize Q8_1: the Q8_0 rule's bytes and s = fp16(d * sum) in every kernel set") {
    std::mt19937 rng(5);
    std::vector<float> x;
    for (int b = 0; b < 64; ++b) {
        const auto block = random_floats(rng, 32, b % 2 ? 3.0f : 0.01f);
        x.insert(x.end(), block.begin(), block.end());
    }
    x.insert(x.end(), 32, 0.0f);  // all zero: d = 0, s = 0
    std::vector<float> ties = {127.0f, -14.5f, -12.5f, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 126.5f, -126.5f};
    ties.resize(32, 0.25f);  // amax 127: id 1, exact ties to even
    x.insert(x.end(), ties.begin(), ties.end());
    std::vector<float> odd(32, 0.0f);  // s of a non-zero sum
    for (int j = 0; j < 32; ++j) odd[j] = static_cast<float>(j % 7) - 1.25f;
    x.insert(x.end(), odd.begin(), odd.end());
    const std::size_t n = x.size();
    std::vector<fast::BlockQ8_0> want(n / 32);
    ref_quantize_q8_0(x.data(), want.data(), n);
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        std::vector<fast::BlockQ8_1> got(n / 32);
        k.quantize_row_q8_1(x.data(), got.data(), n);
        for (std::size_t b = 0; b < got.size(); ++b) {
            CAPTURE(b);
            float amax = 0.0f;
            int sum = 0;
            for (int j = 0; j < 32; ++j) {
                amax = std::max(amax, std::fabs(x[32 * b + j]));
                sum += want[b].qs[j];
            }
            REQUIRE(got[b].d == want[b].d);
            for (int j = 0; j < 32; ++j) REQUIRE(got[b].qs[j] == want[b].qs[j]);
            REQUIRE(got[b].s == ref_float_to_half(amax / 127.0f * static_cast<float>(sum)));
        }
    }
}

TEST_CASE("quantize Q8_0: non-finite blocks give the same bytes in every kernel set") {
    std::vector<float> x(96, 1.0f);
    x[5] = std::numeric_limits<float>::infinity();         // block 0: d = inf
    x[32 + 9] = std::numeric_limits<float>::quiet_NaN();  // block 1: d = NaN, q = -128
    x[64 + 3] = -std::numeric_limits<float>::infinity();  // block 2
    std::vector<std::vector<fast::BlockQ8_0>> results;
    for (const auto& k : runnable_kernel_sets()) {
        std::vector<fast::BlockQ8_0> got(3);
        k.quantize_row_q8_0(x.data(), got.data(), x.size());
        CHECK(got[0].d == 0x7C00);
        CHECK(std::isnan(ember::kernels::fp16_to_fp32(got[1].d)));
        for (int j = 0; j < 32; ++j) CHECK(got[1].qs[j] == -128);
        results.push_back(got);
    }
    for (const auto& r : results) CHECK(std::memcmp(r.data(), results.front().data(), 3 * sizeof(fast::BlockQ8_0)) == 0);
}

TEST_CASE("quantize Q8_1: non-finite blocks give the same bytes in every kernel set") {
    std::vector<float> x(96, 1.0f);
    x[5] = std::numeric_limits<float>::infinity();
    x[32 + 9] = std::numeric_limits<float>::quiet_NaN();
    x[64 + 3] = -std::numeric_limits<float>::infinity();
    std::vector<std::vector<fast::BlockQ8_1>> results;
    for (const auto& k : runnable_kernel_sets()) {
        std::vector<fast::BlockQ8_1> got(3);
        k.quantize_row_q8_1(x.data(), got.data(), x.size());
        for (int j = 0; j < 32; ++j) CHECK(got[1].qs[j] == -128);
        results.push_back(got);
    }
    for (const auto& r : results) CHECK(std::memcmp(r.data(), results.front().data(), 3 * sizeof(fast::BlockQ8_1)) == 0);
}

namespace {

// quantize_row_q8_K_ref (ggml-quants.c) on one finite super-block, written out plainly:
// the first element of largest magnitude, iscale = -127 / it, nearest_int by the
// 1.5 * 2^23 trick, q capped at 127, the sixteen sums, d = 1 / iscale.
fast::BlockQ8_K ref_quantize_q8_K(const float* x) {
    fast::BlockQ8_K y{};
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < 256; ++j) {
        if (std::fabs(x[j]) > amax) {
            amax = std::fabs(x[j]);
            max = x[j];
        }
    }
    if (amax == 0.0f) return y;
    const float iscale = -127.0f / max;
    for (int j = 0; j < 256; ++j) {
        const int v = static_cast<int>(float_bits(iscale * x[j] + 12582912.0f) & 0x007FFFFF) - 0x00400000;
        y.qs[j] = static_cast<std::int8_t>(std::min(127, v));
    }
    for (int k = 0; k < 16; ++k) {
        int sum = 0;
        for (int j = 0; j < 16; ++j) sum += y.qs[16 * k + j];
        y.bsums[k] = static_cast<std::int16_t>(sum);
    }
    y.d = 1.0f / iscale;
    return y;
}

}  // namespace

TEST_CASE("quantize Q8_K: quantize_row_q8_K_ref's bytes in every kernel set") {
    std::mt19937 rng(11);
    std::vector<float> x;
    auto add_block = [&](const std::vector<float>& block) { x.insert(x.end(), block.begin(), block.end()); };
    for (int b = 0; b < 32; ++b) add_block(random_floats(rng, 256, b % 2 ? 4.0f : 0.003f));
    add_block(std::vector<float>(256, 0.0f));  // all zero: d = 0
    add_block(std::vector<float>(256, -0.0f));
    std::vector<float> signs = random_floats(rng, 256, 1.0f);  // the largest magnitude twice: the first (negative) wins
    signs[40] = -2.0f;
    signs[200] = 2.0f;
    add_block(signs);
    std::vector<float> late(256, 0.5f);  // the largest magnitude last
    late[255] = -3.0f;
    add_block(late);
    std::vector<float> ties(256, 0.0f);  // iscale = 1: x.5 values are exact ties, to even
    ties[0] = -127.0f;
    for (int j = 1; j < 256; ++j) ties[j] = static_cast<float>(j % 17) - 8.5f;
    add_block(ties);
    std::vector<float> tiny(256);  // subnormal magnitudes
    for (int j = 0; j < 256; ++j) tiny[j] = static_cast<float>(j % 5 - 2) * std::numeric_limits<float>::denorm_min() * 3.0f;
    add_block(tiny);
    const std::size_t n_blocks = x.size() / 256;
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        std::vector<fast::BlockQ8_K> got(n_blocks);
        k.quantize_row_q8_K(x.data(), got.data(), x.size());
        for (std::size_t b = 0; b < n_blocks; ++b) {
            CAPTURE(b);
            const fast::BlockQ8_K want = ref_quantize_q8_K(x.data() + 256 * b);
            REQUIRE(float_bits(got[b].d) == float_bits(want.d));
            for (int j = 0; j < 256; ++j) REQUIRE(got[b].qs[j] == want.qs[j]);
            for (int j = 0; j < 16; ++j) REQUIRE(got[b].bsums[j] == want.bsums[j]);
        }
    }
}

TEST_CASE("quantize Q8_K: non-finite blocks give the same bytes in every kernel set") {
    std::vector<float> x(768, 1.0f);
    x[7] = std::numeric_limits<float>::infinity();          // block 0: iscale -0, d = -inf
    x[256 + 99] = std::numeric_limits<float>::quiet_NaN();  // block 1: d = NaN (scalar_quants.cpp)
    x[512 + 3] = -std::numeric_limits<float>::infinity();   // block 2
    std::vector<std::vector<fast::BlockQ8_K>> results;
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        std::vector<fast::BlockQ8_K> got(3);
        k.quantize_row_q8_K(x.data(), got.data(), x.size());
        CHECK(std::isinf(got[0].d));
        CHECK(std::isnan(got[1].d));
        results.push_back(got);
    }
    for (const auto& r : results) CHECK(std::memcmp(r.data(), results.front().data(), 3 * sizeof(fast::BlockQ8_K)) == 0);
}
