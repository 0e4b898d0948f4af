// Rung: smoke (unit). The reference kernels against hand-derivable cases: float format
// conversions, weight dequantization, RMS norm, both RoPE pairings and frequency
// factors, masking and head grouping in attention, the F16-table GELU, soft-capping.
// Their agreement with llama.cpp as a whole is the golden suites' job (tests/models).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/float16.hpp"
#include "kernels/reference/kernels.hpp"

namespace ember::kernels::reference {
namespace {

std::vector<std::byte> bytes_of(const void* p, std::size_t n) {
    std::vector<std::byte> out(n);
    std::memcpy(out.data(), p, n);
    return out;
}

WeightMatrix view(const std::vector<std::byte>& data, gguf::GgmlType type, std::size_t rows, std::size_t cols) {
    return {type, data.data(), rows, cols, data.size() / rows};
}

}  // namespace

TEST_CASE("F16 conversions: exact decode, round to nearest even, overflow to infinity") {
    for (std::uint32_t h = 0; h < 65536; ++h) {
        const float f = fp16_to_fp32(static_cast<std::uint16_t>(h));
        if (std::isnan(f)) continue;
        REQUIRE(fp32_to_fp16(f) == h);  // every half value round-trips
    }
    CHECK(fp16_to_fp32(0x3c00) == 1.0f);
    CHECK(fp16_to_fp32(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
    CHECK(fp16_to_fp32(0x7bff) == 65504.0f);
    CHECK(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)) == 0x3c00);      // a tie rounds to the even 1.0
    CHECK(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3c02);  // a tie rounds up to even
    CHECK(fp32_to_fp16(65519.0f) == 0x7bff);
    CHECK(fp32_to_fp16(65520.0f) == 0x7c00);
    CHECK(fp32_to_fp16(-1e10f) == 0xfc00);
    CHECK(fp32_to_fp16(std::ldexp(1.0f, -26)) == 0x0000);  // below half the smallest subnormal
    CHECK(bf16_to_fp32(0x3f80) == 1.0f);
    CHECK(bf16_to_fp32(0xc040) == -3.0f);
}

TEST_CASE("dequantization: Q8_0 blocks are q * d, F16 and BF16 rows decode exactly") {
    std::vector<std::byte> q8(34);
    const std::uint16_t d = 0x3800;  // 0.5
    std::memcpy(q8.data(), &d, 2);
    for (int j = 0; j < 32; ++j) q8[2 + j] = static_cast<std::byte>(static_cast<std::int8_t>(j - 16));
    std::vector<float> out(32);
    dequantize_row(gguf::GgmlType::Q8_0, q8.data(), out.data(), 32);
    for (int j = 0; j < 32; ++j) CHECK(out[j] == 0.5f * static_cast<float>(j - 16));

    const std::uint16_t halves[2] = {0x3c00, 0xc000};  // 1, -2
    dequantize_row(gguf::GgmlType::F16, bytes_of(halves, 4).data(), out.data(), 2);
    CHECK(out[0] == 1.0f);
    CHECK(out[1] == -2.0f);
    const std::uint16_t brains[2] = {0x3f80, 0x4040};  // 1, 3
    dequantize_row(gguf::GgmlType::BF16, bytes_of(brains, 4).data(), out.data(), 2);
    CHECK(out[0] == 1.0f);
    CHECK(out[1] == 3.0f);
}

TEST_CASE("matmul: y = W x per token, the same values for every stored type of W") {
    // W = [[1, 2], [3, -4], [0.5, 0]] as [3 outputs, 2 inputs]
    const float w32[6] = {1, 2, 3, -4, 0.5f, 0};
    const std::uint16_t w16[6] = {0x3c00, 0x4000, 0x4200, 0xc400, 0x3800, 0x0000};
    const auto f32 = bytes_of(w32, sizeof w32);
    const auto f16 = bytes_of(w16, sizeof w16);
    std::vector<float> x = {1, 10, -2, 0.25f};  // two tokens
    for (const auto& [data, type] : {std::pair{f32, gguf::GgmlType::F32}, std::pair{f16, gguf::GgmlType::F16}}) {
        std::vector<float> y(6);
        matmul(ConstRows(x.data(), 2, 2), view(data, type, 3, 2), Rows(y.data(), 2, 3));
        CHECK(y == std::vector<float>{21, -37, 0.5f, -1.5f, -7, -1});
    }
}

TEST_CASE("RMS norm: x / sqrt(mean(x^2) + eps) * w, in place or not") {
    std::vector<float> x = {3, 4, 0, 0};
    std::vector<float> y(4);
    const std::vector<float> w = {1, 2, 1, 1};
    rms_norm(ConstRows(x.data(), 1, 4), w, 0.0f, Rows(y.data(), 1, 4));
    const float scale = 1.0f / std::sqrt(6.25f);
    CHECK(y[0] == 3 * scale);
    CHECK(y[1] == (4 * scale) * 2);
    rms_norm(ConstRows(x.data(), 1, 4), {}, 0.0f, Rows(x.data(), 1, 4));
    CHECK(x[1] == 4 * scale);
}

TEST_CASE("RoPE: identity at position 0, adjacent vs half-split pairs, frequency factors") {
    RopeParams p;
    p.n_heads = 1;
    p.head_dim = 4;
    p.n_rot = 4;
    p.freq_base = 100.0f;
    std::vector<float> x = {1, 2, 3, 4};
    rope(Rows(x.data(), 1, 4), 0, p);
    CHECK(x == std::vector<float>{1, 2, 3, 4});

    // Position 1: pair 0 turns by 1 radian, pair 1 by 100^(-2/4) = 0.1 radian.
    const float a0 = 1.0f, a1 = std::pow(100.0f, -0.5f);
    auto turned = [](float u, float v, float angle) {
        return std::pair{u * std::cos(angle) - v * std::sin(angle), u * std::sin(angle) + v * std::cos(angle)};
    };
    p.pairing = RopePairing::Adjacent;  // pairs (0, 1), (2, 3)
    rope(Rows(x.data(), 1, 4), 1, p);
    CHECK(x[0] == doctest::Approx(turned(1, 2, a0).first).epsilon(1e-6));
    CHECK(x[1] == doctest::Approx(turned(1, 2, a0).second).epsilon(1e-6));
    CHECK(x[2] == doctest::Approx(turned(3, 4, a1).first).epsilon(1e-6));
    CHECK(x[3] == doctest::Approx(turned(3, 4, a1).second).epsilon(1e-6));

    x = {1, 2, 3, 4};
    p.pairing = RopePairing::HalfSplit;  // pairs (0, 2), (1, 3)
    rope(Rows(x.data(), 1, 4), 1, p);
    CHECK(x[0] == doctest::Approx(turned(1, 3, a0).first).epsilon(1e-6));
    CHECK(x[2] == doctest::Approx(turned(1, 3, a0).second).epsilon(1e-6));
    CHECK(x[1] == doctest::Approx(turned(2, 4, a1).first).epsilon(1e-6));
    CHECK(x[3] == doctest::Approx(turned(2, 4, a1).second).epsilon(1e-6));

    // A factor of 1e30 leaves its pair (nearly exactly) unrotated: proportional RoPE.
    x = {1, 2, 3, 4};
    const std::vector<float> factors = {1.0f, 1e30f};
    p.freq_factors = factors;
    rope(Rows(x.data(), 1, 4), 5, p);
    CHECK(x[1] == 2.0f);
    CHECK(x[3] == 4.0f);
    CHECK(x[0] != 1.0f);

    // Dims beyond n_rot are copied unchanged.
    x = {1, 2, 3, 4};
    p.freq_factors = {};
    p.n_rot = 2;
    rope(Rows(x.data(), 1, 4), 3, p);
    CHECK(x[2] == 3.0f);
    CHECK(x[3] == 4.0f);
}

TEST_CASE("attention: causal and sliding-window masks, grouped heads, softmax weights") {
    AttentionParams p;
    p.n_head = 2;
    p.n_head_kv = 1;  // both query heads read KV head 0
    p.head_dim = 1;
    p.scale = 1.0f;
    const std::vector<float> keys = {0, 0, std::log(3.0f)};  // positions 0..2
    const std::vector<float> values = {10, 20, 30};
    std::vector<float> q = {1, 1, 1, 1, 1, 1};  // 3 tokens x 2 heads at positions 0..2
    std::vector<float> out(6);
    std::vector<float> scores(2 * 3);
    std::vector<double> sums(2);
    attention(ConstRows(q.data(), 3, 2), f32_kv_rows(ConstRows(keys.data(), 3, 1)), f32_kv_rows(ConstRows(values.data(), 3, 1)), 0, p, scores, sums,
              Rows(out.data(), 3, 2));
    CHECK(out[0] == 10.0f);  // position 0 sees only itself
    CHECK(out[1] == 10.0f);  // the second head reads the same KV head
    CHECK(out[2] == doctest::Approx(15.0));           // equal scores: the mean of 10 and 20
    CHECK(out[4] == doctest::Approx((10 + 20 + 3 * 30) / 5.0));  // weights 1 : 1 : 3

    p.window = 2;  // position 2 sees positions 1 and 2
    attention(ConstRows(q.data(), 3, 2), f32_kv_rows(ConstRows(keys.data(), 3, 1)), f32_kv_rows(ConstRows(values.data(), 3, 1)), 0, p, scores, sums,
              Rows(out.data(), 3, 2));
    CHECK(out[4] == doctest::Approx((20 + 3 * 30) / 4.0));
    p.window = 1;  // only itself
    attention(ConstRows(q.data(), 3, 2), f32_kv_rows(ConstRows(keys.data(), 3, 1)), f32_kv_rows(ConstRows(values.data(), 3, 1)), 0, p, scores, sums,
              Rows(out.data(), 3, 2));
    CHECK(out[4] == 30.0f);
}

TEST_CASE("GELU through the F16 table: tanh approximation at F16 precision, linear tails") {
    CHECK(gelu_f16_table(0.0f) == 0.0f);
    CHECK(gelu_f16_table(10.0f) == 10.0f);
    CHECK(gelu_f16_table(12.5f) == 12.5f);
    CHECK(gelu_f16_table(-10.0f) == 0.0f);
    for (float x : {-3.0f, -1.0f, -0.1f, 0.3f, 1.0f, 2.5f, 7.0f}) {
        const double exact = 0.5 * x * (1 + std::tanh(0.7978845608 * x * (1 + 0.044715 * x * x)));
        CHECK(gelu_f16_table(x) == doctest::Approx(exact).epsilon(2e-3).scale(1e-3));
        // The result is an F16 value.
        CHECK(fp16_to_fp32(fp32_to_fp16(gelu_f16_table(x))) == gelu_f16_table(x));
    }
}

TEST_CASE("element-wise: SwiGLU, GEGLU, soft-capping") {
    std::vector<float> g = {0.0f, 2.0f};
    std::vector<float> u = {5.0f, 3.0f};
    std::vector<float> out(2);
    swiglu(ConstRows(g.data(), 1, 2), ConstRows(u.data(), 1, 2), Rows(out.data(), 1, 2));
    CHECK(out[0] == 0.0f);
    CHECK(out[1] == doctest::Approx(2.0 / (1 + std::exp(-2.0)) * 3));
    geglu(ConstRows(g.data(), 1, 2), ConstRows(u.data(), 1, 2), Rows(out.data(), 1, 2));
    CHECK(out[1] == gelu_f16_table(2.0f) * 3.0f);
    std::vector<float> z = {0.0f, 30.0f, -1000.0f};
    softcap(ConstRows(z.data(), 1, 3), 30.0f, Rows(z.data(), 1, 3));
    CHECK(z[0] == 0.0f);
    CHECK(z[1] == doctest::Approx(30 * std::tanh(1.0)));
    CHECK(z[2] == doctest::Approx(-30.0));
}

}  // namespace ember::kernels::reference
