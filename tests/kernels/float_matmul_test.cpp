// Rung: below the ladder (kernel unit tests). F16, BF16 and F32 products of every kernel
// set this CPU runs. Activations are rounded to the weight type first (bit-exact, see
// conversion_test); every output must equal, bit for bit, llama.cpp's sum in the order
// it uses for that shape (sum_order_references.hpp): ggml_vec_dot for 1 token, tinyBLAS
// for 2+ tokens when the columns are a multiple of 16 (BF16: 32) and the rows of 4,
// ggml_vec_dot again otherwise. So a matrix-vector and a matrix-matrix product agree
// bitwise exactly where llama.cpp's do. Any thread count gives the same bits. As a check
// on the references themselves, 1-token results are also held to the classic bound for
// F32 summation against an exact (double) sum:
//   |error| <= (n / 8 + 8) * 2^-24 * sum |w_k * a_k|
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernel_test_support.hpp"
#include "sum_order_references.hpp"
#include "kernels/fast/aligned_buffer.hpp"
#include "kernels/fast/matmul.hpp"
#include "kernels/fast/thread_pool.hpp"

using namespace ember::test;
namespace fast = ember::kernels::fast;
using ember::gguf::GgmlType;

namespace {

// Weights of one float type, stored as that type, with their exact values.
struct FloatMatrix {
    GgmlType type;
    std::size_t rows, cols;
    std::vector<std::byte> bytes;
    std::vector<double> values;  // [rows, cols], the stored values exactly

    std::size_t element_bytes() const { return type == GgmlType::F32 ? 4 : 2; }
    ember::kernels::WeightMatrix view() const { return {type, bytes.data(), rows, cols, cols * element_bytes()}; }
};

// x rounded to `type` exactly as the reference says (the kernels' rounding is tested
// bit for bit elsewhere).
double rounded(GgmlType type, float x) {
    switch (type) {
        case GgmlType::F16: return ref_half_value(ref_float_to_half(x));
        case GgmlType::BF16: return ref_bf16_to_float(ref_float_to_bf16(x));
        default: return x;
    }
}

FloatMatrix random_matrix(std::mt19937& rng, GgmlType type, std::size_t rows, std::size_t cols) {
    FloatMatrix m{type, rows, cols, {}, {}};
    const auto raw = random_floats(rng, rows * cols, 0.5f);
    m.bytes.resize(raw.size() * m.element_bytes());
    m.values.resize(raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) {
        if (type == GgmlType::F32) {
            std::memcpy(m.bytes.data() + 4 * i, &raw[i], 4);
        } else {
            const std::uint16_t h = type == GgmlType::F16 ? ref_float_to_half(raw[i]) : ref_float_to_bf16(raw[i]);
            std::memcpy(m.bytes.data() + 2 * i, &h, 2);
        }
        m.values[i] = rounded(type, raw[i]);
    }
    return m;
}

void check_product(const FloatMatrix& w, const std::vector<float>& x, std::size_t n_tokens, const std::vector<float>& y) {
    for (std::size_t t = 0; t < n_tokens; ++t) {
        for (std::size_t r = 0; r < w.rows; ++r) {
            double exact = 0, magnitude = 0;
            for (std::size_t c = 0; c < w.cols; ++c) {
                const double p = w.values[r * w.cols + c] * rounded(w.type, x[t * w.cols + c]);
                exact += p;
                magnitude += std::fabs(p);
            }
            const double bound = (static_cast<double>(w.cols) / 8 + 8) * std::ldexp(1.0, -24) * magnitude;
            const double got = y[t * w.rows + r];
            if (!(std::fabs(got - exact) <= bound)) {
                FAIL("row " << r << " token " << t << ": " << got << " vs exact " << exact << " (bound " << bound << ")");
            }
        }
    }
}

// llama.cpp's result for row r of w times activation row x (F32 values, rounded here
// to the weight's type), in `order`.
float expected_dot(const FloatMatrix& w, std::size_t r, const float* x, fast::SumOrder order) {
    const int n = static_cast<int>(w.cols);
    const std::byte* row = w.bytes.data() + r * w.cols * w.element_bytes();
    if (w.type == GgmlType::F32) {
        const auto* wf = reinterpret_cast<const float*>(row);
        return order == fast::SumOrder::tiled ? ref_tinyblas16(wf, x, n, ref_identity) : ref_vec_dot_f32(wf, x, n);
    }
    std::vector<std::uint16_t> a(w.cols);
    for (std::size_t c = 0; c < w.cols; ++c) a[c] = w.type == GgmlType::F16 ? ref_float_to_half(x[c]) : ref_float_to_bf16(x[c]);
    const auto* wh = reinterpret_cast<const std::uint16_t*>(row);
    if (w.type == GgmlType::F16) {
        return order == fast::SumOrder::tiled ? ref_tinyblas16(wh, a.data(), n, ref_half) : ref_vec_dot_f16(wh, a.data(), n);
    }
    return order == fast::SumOrder::tiled ? ref_tinyblas_bf16(wh, a.data(), n) : ref_vec_dot_bf16(wh, a.data(), n);
}

// y [n_tokens, rows] against llama.cpp's sums for x [n_tokens, cols].
void check_llama_order(const FloatMatrix& w, const float* x, std::size_t n_tokens, const float* y) {
    const fast::SumOrder order = fast::sum_order(w.type, n_tokens, w.rows, w.cols);
    for (std::size_t t = 0; t < n_tokens; ++t) {
        for (std::size_t r = 0; r < w.rows; ++r) {
            const float want = expected_dot(w, r, x + t * w.cols, order);
            if (float_bits(y[t * w.rows + r]) != float_bits(want)) {
                FAIL(n_tokens << " tokens (" << (order == fast::SumOrder::tiled ? "tiled" : "vec_dot") << "), row " << r
                               << " token " << t << ": " << y[t * w.rows + r] << " vs llama.cpp's " << want);
            }
        }
    }
}

// One BF16 row times one BF16 activation row in `order`, through the kernel set.
float bf16_dot_in_order(const fast::KernelSet& k, const std::vector<std::uint16_t>& w, const std::vector<std::uint16_t>& a,
                        fast::SumOrder order) {
    float result = 0;
    const std::size_t bytes = w.size() * 2;
    const fast::MatmulTask task{reinterpret_cast<const std::byte*>(w.data()), bytes, w.size(),
                                reinterpret_cast<const std::byte*>(a.data()), bytes, 1, &result, 1, order};
    k.matmul(GgmlType::BF16)(task, 0, 1);
    return result;
}

}  // namespace

TEST_CASE("sum_order: llama.cpp's choice between tinyBLAS and ggml_vec_dot") {
    using fast::SumOrder;
    CHECK(fast::sum_order(GgmlType::F16, 1, 64, 64) == SumOrder::vec_dot);
    CHECK(fast::sum_order(GgmlType::F16, 2, 64, 64) == SumOrder::tiled);
    CHECK(fast::sum_order(GgmlType::F32, 7, 172, 64) == SumOrder::tiled);
    CHECK(fast::sum_order(GgmlType::F16, 7, 64, 172) == SumOrder::vec_dot);  // stories260K's ffn_down
    CHECK(fast::sum_order(GgmlType::F16, 7, 66, 64) == SumOrder::vec_dot);   // rows not a multiple of 4
    CHECK(fast::sum_order(GgmlType::BF16, 7, 64, 48) == SumOrder::vec_dot);  // BF16 needs 32
    CHECK(fast::sum_order(GgmlType::BF16, 7, 64, 96) == SumOrder::tiled);
}

TEST_CASE("F16 / BF16 / F32 products: llama.cpp's sums bit for bit, in any thread count") {
    std::mt19937 rng(21);
    fast::ThreadPool one(1), two(2);
    const auto sets = runnable_kernel_sets();
    for (GgmlType type : {GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
        for (std::size_t cols : {1, 7, 15, 16, 17, 31, 32, 33, 64, 100, 128, 172, 515, 576}) {
            for (std::size_t rows : {1, 3, 4, 9, 20}) {
                const auto w = random_matrix(rng, type, rows, cols);
                const std::size_t max_tokens = 9;
                const auto x = random_floats(rng, max_tokens * cols, 1.5f);
                fast::AlignedBuffer workspace(fast::activation_workspace_bytes(type, cols, max_tokens));
                for (const auto& k : sets) {
                    CAPTURE(k.description);
                    CAPTURE(ember::gguf::type_name(type));
                    CAPTURE(cols);
                    CAPTURE(rows);
                    // every token alone: the matrix-vector path
                    std::vector<float> single(max_tokens * rows);
                    for (std::size_t t = 0; t < max_tokens; ++t) {
                        fast::matmul(k, one, w.view(), x.data() + t * cols, 1, single.data() + t * rows, workspace.span());
                        check_llama_order(w, x.data() + t * cols, 1, single.data() + t * rows);
                    }
                    check_product(w, x, max_tokens, single);
                    for (std::size_t n_tokens = 2; n_tokens <= max_tokens; ++n_tokens) {
                        std::vector<float> y1(n_tokens * rows), y2(n_tokens * rows);
                        fast::matmul(k, one, w.view(), x.data(), n_tokens, y1.data(), workspace.span());
                        fast::matmul(k, two, w.view(), x.data(), n_tokens, y2.data(), workspace.span());
                        check_llama_order(w, x.data(), n_tokens, y1.data());
                        REQUIRE_MESSAGE(std::memcmp(y2.data(), y1.data(), y1.size() * 4) == 0, n_tokens << " tokens, 2 threads");
                    }
                }
            }
        }
    }
}

TEST_CASE("BF16 products: vdpbf16ps's subnormal handling (DAZ inputs, FTZ results) in every kernel set") {
    // Tiny weights (some subnormal) times activations near 1: products and partial sums
    // around 2^-126, where an emulation that forgot DAZ/FTZ would differ from the instruction
    // (the avx512+bf16 set runs the instruction itself).
    std::mt19937 rng(23);
    std::uniform_int_distribution<int> exponent(0, 14), mantissa(0, 127), sign(0, 1);
    auto bf16 = [&](int biased_exponent) {
        return static_cast<std::uint16_t>(sign(rng) << 15 | biased_exponent << 7 | mantissa(rng));
    };
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        for (int n : {32, 64, 96, 128}) {
            for (int trial = 0; trial < 50; ++trial) {
                std::vector<std::uint16_t> w(n), a(n);
                for (int i = 0; i < n; ++i) w[i] = bf16(exponent(rng)), a[i] = bf16(113 + exponent(rng));
                CHECK(float_bits(bf16_dot_in_order(k, w, a, fast::SumOrder::vec_dot)) ==
                      float_bits(ref_vec_dot_bf16(w.data(), a.data(), n)));
                CHECK(float_bits(bf16_dot_in_order(k, w, a, fast::SumOrder::tiled)) ==
                      float_bits(ref_tinyblas_bf16(w.data(), a.data(), n)));
            }
        }
    }
}

TEST_CASE("BF16 products around 2^-126: prompt tiles and matrix-vector, both orders, every kernel set") {
    // Column c's weights and activations have exponents that sum to about 2^-126 for their
    // product: BF16 operands with exponent 0 (subnormal) on both sides, F32-subnormal
    // products, partial sums that land on subnormals or just above 2^-126, in matrices of
    // several rows and tokens (the prompt tiles, their row and token remainders, the
    // matrix-vector tiles). Row 0 x token 0 is one pair sum (by vdpbf16ps unless the
    // columns are all ggml_vec_dot_bf16's double tail) whose exact value is
    // 2^-126 - 2^-150: FTZ flushes it (x86 detects tininess after rounding with an
    // unbounded exponent), though rounding it to F32 gives 2^-126. Dropping DAZ or FTZ
    // from an emulation, or flushing on the F32-rounded result, fails this test.
    std::mt19937 rng(29);
    std::uniform_int_distribution<int> column_exponent(1, 127), spread(-3, 3), mantissa(0, 127), sign(0, 1), coin(0, 5);
    auto bf16 = [&](int biased_exponent) {
        const int e = coin(rng) == 0 ? 0 : std::clamp(biased_exponent, 0, 254);
        return static_cast<std::uint16_t>(sign(rng) << 15 | e << 7 | mantissa(rng));
    };
    const auto sets = runnable_kernel_sets();
    const std::size_t rows = 9;
    for (std::size_t cols : {32, 96, 320}) {
        for (std::size_t tokens : {1, 2, 7, 13}) {
            std::vector<int> exponent(cols);
            for (int& e : exponent) e = column_exponent(rng);
            std::vector<std::uint16_t> w(rows * cols), a(tokens * cols);
            for (std::size_t i = 0; i < w.size(); ++i) w[i] = bf16(exponent[i % cols] + spread(rng));
            for (std::size_t i = 0; i < a.size(); ++i) a[i] = bf16(128 - exponent[i % cols] + spread(rng));
            std::fill(w.begin(), w.begin() + cols, 0);
            w[0] = 0x9A00, a[0] = 0x1A00;  // -2^-75 x 2^-75, added second
            w[1] = 0x0080, a[1] = 0x3F80;  // 2^-126 x 1, added first
            for (fast::SumOrder order : {fast::SumOrder::vec_dot, fast::SumOrder::tiled}) {
                const bool tiled = order == fast::SumOrder::tiled;
                CAPTURE(cols);
                CAPTURE(tokens);
                CAPTURE(tiled);
                std::vector<float> want(tokens * rows);
                for (std::size_t t = 0; t < tokens; ++t) {
                    for (std::size_t r = 0; r < rows; ++r) {
                        const std::uint16_t* wr = w.data() + r * cols;
                        const std::uint16_t* at = a.data() + t * cols;
                        const int n = static_cast<int>(cols);
                        want[t * rows + r] = tiled ? ref_tinyblas_bf16(wr, at, n) : ref_vec_dot_bf16(wr, at, n);
                    }
                }
                if (tiled || cols >= 64) CHECK(float_bits(want[0]) == 0u);  // (else all in ggml's double tail)
                for (const auto& k : sets) {
                    CAPTURE(k.description);
                    std::vector<float> y(tokens * rows, -7.0f);
                    const fast::MatmulTask task{reinterpret_cast<const std::byte*>(w.data()), cols * 2, cols,
                                                reinterpret_cast<const std::byte*>(a.data()), cols * 2, tokens,
                                                y.data(), rows, order};
                    k.matmul(GgmlType::BF16)(task, 0, 5);
                    k.matmul(GgmlType::BF16)(task, 5, rows);
                    for (std::size_t i = 0; i < y.size(); ++i) {
                        if (float_bits(y[i]) != float_bits(want[i])) {
                            FAIL("row " << i % rows << " token " << i / rows << ": " << y[i] << " (0x" << std::hex
                                        << float_bits(y[i]) << ") vs 0x" << float_bits(want[i]) << std::dec);
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("F16 / BF16 / F32 single dots: ggml_vec_dot bit for bit, within the bound") {
    std::mt19937 rng(22);
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        for (std::size_t n : {1, 8, 16, 31, 32, 33, 64, 71, 130, 2048}) {
            const auto wf = random_floats(rng, n);
            const auto af = random_floats(rng, n);
            std::vector<std::uint16_t> wh(n), ah(n), wb(n), ab(n);
            double exact_h = 0, exact_b = 0, exact_f = 0, mag_h = 0, mag_b = 0, mag_f = 0;
            for (std::size_t i = 0; i < n; ++i) {
                wh[i] = ref_float_to_half(wf[i]);
                ah[i] = ref_float_to_half(af[i]);
                wb[i] = ref_float_to_bf16(wf[i]);
                ab[i] = ref_float_to_bf16(af[i]);
                const double ph = ref_half_value(wh[i]) * ref_half_value(ah[i]);
                const double pb = static_cast<double>(ref_bf16_to_float(wb[i])) * ref_bf16_to_float(ab[i]);
                const double pf = static_cast<double>(wf[i]) * af[i];
                exact_h += ph, exact_b += pb, exact_f += pf;
                mag_h += std::fabs(ph), mag_b += std::fabs(pb), mag_f += std::fabs(pf);
            }
            const double u = (static_cast<double>(n) / 8 + 8) * std::ldexp(1.0, -24);
            CHECK(std::fabs(fast::f16_dot(k, wh.data(), ah.data(), n) - exact_h) <= u * mag_h);
            CHECK(std::fabs(fast::bf16_dot(k, wb.data(), ab.data(), n) - exact_b) <= u * mag_b);
            CHECK(std::fabs(fast::f32_dot(k, wf.data(), af.data(), n) - exact_f) <= u * mag_f);
            const int m = static_cast<int>(n);
            CHECK(float_bits(fast::f16_dot(k, wh.data(), ah.data(), n)) == float_bits(ref_vec_dot_f16(wh.data(), ah.data(), m)));
            CHECK(float_bits(fast::bf16_dot(k, wb.data(), ab.data(), n)) == float_bits(ref_vec_dot_bf16(wb.data(), ab.data(), m)));
            CHECK(float_bits(fast::f32_dot(k, wf.data(), af.data(), n)) == float_bits(ref_vec_dot_f32(wf.data(), af.data(), m)));
        }
    }
}
