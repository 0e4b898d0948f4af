// Rung: below the ladder (kernel unit tests), in the manner of llama.cpp's
// test-backend-ops: every operation that reads weights x every row of the weight-format
// table x several shapes x every kernel set this CPU runs, against the reference route.
// Generated from the table: a new format row is tested here without a new test.
//
// Operations and their tolerances:
//   matmul    the fast product (activations converted by the kernel set, as in a model)
//             against an exact sum (double) of the dequantized weights times the
//             dequantized converted activations: |error| <= tol * sum |w_j a_j|, with
//             tol 1e-5 (F32 accumulation), or 1e-3 for Q8_1 activations, whose offset
//             term uses s = d * sum(q) rounded to F16 (ggml_vec_dot_q4_1/q5_1_q8_1).
//   bits      every kernel set's matmul gives the scalar set's bits, and one token at a
//             time gives the bits of all tokens at once (tiling never changes an output;
//             the float types' tiled order is llama.cpp's for 2+ tokens only).
//   get_rows  the fast backend's embedding lookup equals the reference dequantization.
// Shapes: 1 and several rows (odd counts, and a multiple of 4), 1 and several tokens (odd
// counts, more than a tile), one and three blocks of columns, and a strided case (padded weight rows, an
// output row stride wider than the product).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernel_test_support.hpp"
#include "kernels/fast/aligned_buffer.hpp"
#include "kernels/fast/fast_backend.hpp"
#include "kernels/fast/matmul.hpp"
#include "kernels/fast/thread_pool.hpp"
#include "kernels/reference/kernels.hpp"
#include "kernels/dequantize.hpp"
#include "kernels/weight_format.hpp"

using namespace ember::test;
namespace kernels = ember::kernels;
using kernels::ActivationType;
using kernels::WeightFormat;

namespace {

struct Shape {
    std::size_t rows, cols, tokens;
    std::size_t row_padding = 0;  // bytes after each weight row
    std::size_t out_extra = 0;    // output row stride = rows + out_extra
};

// Columns that are a whole number of the format's and its activation type's blocks.
std::vector<Shape> shapes_for(const WeightFormat& f) {
    const std::size_t block = std::max(f.block_size, kernels::activation_format(f.activation).block_size);
    std::vector<std::size_t> cols = {block, 3 * block};
    if (block == 1) cols = {1, 3, 37, 300, 320};  // 320: the tiled order (F16/F32: 16s, BF16: 32s)
    std::vector<Shape> shapes;
    for (std::size_t c : cols) {
        shapes.push_back({1, c, 1});
        shapes.push_back({5, c, 1});
        shapes.push_back({19, c, 7});
        shapes.push_back({3, c, 19});
        shapes.push_back({12, c, 13});  // rows of 4: F16/BF16/F32 take the tiled order (prompt tiles)
    }
    shapes.push_back({9, cols.back(), 5, 64, 3});
    shapes.push_back({7, cols.back(), 37, 64, 3});  // Q8_0/Q4_0/Q5_0 with VNNI: two chunks of sixteen tokens in lanes, five in pairs
    shapes.push_back({67, 2048, 35});  // and two column segments, two row slabs (Q4_0/Q5_0: 64 rows), an odd last row
    return shapes;
}

// Random stored rows whose dequantized values are finite and moderate: each block is
// random bytes, drawn again until it dequantizes to values within +-1000 (the table's
// dequantizer is the judge, so no format-specific layout knowledge is needed). With
// `all_ones` > 0 that share of the bytes is 0xFF: quants at their largest (every bit set),
// the case where an int16 pair sum of a SIMD kernel would saturate if one could.
std::vector<std::byte> random_weights(const WeightFormat& f, const Shape& s, std::mt19937& rng, double all_ones = 0) {
    const std::size_t blocks = s.cols / f.block_size;
    const std::size_t row_bytes = blocks * f.block_bytes + s.row_padding;
    std::vector<std::byte> w(s.rows * row_bytes);
    std::uniform_int_distribution<int> byte(0, 255);
    std::bernoulli_distribution ones(all_ones);
    std::vector<float> values(f.block_size);
    for (std::size_t r = 0; r < s.rows; ++r) {
        for (std::size_t b = 0; b < blocks; ++b) {
            std::byte* block = w.data() + r * row_bytes + b * f.block_bytes;
            for (bool ok = false; !ok;) {
                for (std::size_t i = 0; i < f.block_bytes; ++i) block[i] = static_cast<std::byte>(ones(rng) ? 0xFF : byte(rng));
                f.dequantize_row(block, values.data(), f.block_size);
                ok = std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v) && std::abs(v) <= 1000; });
            }
        }
    }
    return w;
}

// One converted activation row back to F32 (what the product multiplies by).
std::vector<double> dequantize_activations(ActivationType type, const std::byte* row, std::size_t n) {
    std::vector<double> out(n);
    std::vector<float> tmp(n);
    switch (type) {
        case ActivationType::f32: kernels::dequantize_row_f32(row, tmp.data(), n); break;
        case ActivationType::f16: kernels::dequantize_row_f16(row, tmp.data(), n); break;
        case ActivationType::bf16: kernels::dequantize_row_bf16(row, tmp.data(), n); break;
        case ActivationType::q8_0: kernels::dequantize_row_q8_0(row, tmp.data(), n); break;
        case ActivationType::q8_1: {
            const auto* b = reinterpret_cast<const kernels::BlockQ8_1*>(row);
            for (std::size_t j = 0; j < n; ++j) tmp[j] = b[j / 32].qs[j % 32] * static_cast<float>(ref_half_value(b[j / 32].d));
            break;
        }
        case ActivationType::q8_K: {
            const auto* b = reinterpret_cast<const kernels::BlockQ8_K*>(row);
            for (std::size_t j = 0; j < n; ++j) tmp[j] = b[j / 256].qs[j % 256] * b[j / 256].d;
            break;
        }
    }
    for (std::size_t j = 0; j < n; ++j) out[j] = tmp[j];
    return out;
}

double tolerance(ActivationType type) { return type == ActivationType::q8_1 ? 1e-3 : 1e-5; }

std::vector<float> random_activations(std::size_t n, std::mt19937& rng) {
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> x(n);
    for (float& v : x) v = dist(rng);
    return x;
}

kernels::WeightMatrix matrix_of(const WeightFormat& f, const Shape& s, const std::vector<std::byte>& w) {
    return {f.type, w.data(), s.rows, s.cols, s.cols / f.block_size * f.block_bytes + s.row_padding};
}

// y [tokens, rows + out_extra] from the fast product with kernel set k.
std::vector<float> fast_product(const fast::KernelSet& k, fast::ThreadPool& pool, const kernels::WeightMatrix& m,
                                const Shape& s, const std::vector<float>& x, fast::ConvertedActivations* converted,
                                fast::AlignedBuffer& workspace) {
    const std::size_t stride = s.rows + s.out_extra;
    std::vector<float> y(s.tokens * stride, -7.0f);
    const fast::ConvertedActivations a =
        fast::convert_activations(k, pool, m.type, x.data(), s.tokens, s.cols, workspace.span());
    fast::matmul(k, pool, m, a, y.data(), stride);
    if (converted) *converted = a;
    return y;
}

// The matmul, bits and one-token-at-a-time checks of one format and shape on every set.
void check_matmul(const WeightFormat& f, const Shape& s, const std::vector<std::byte>& w, const std::vector<float>& x,
                  const std::vector<fast::KernelSet>& sets, fast::ThreadPool& pool) {
    CAPTURE(f.name);
    CAPTURE(s.rows);
    CAPTURE(s.cols);
    CAPTURE(s.tokens);
    CAPTURE(s.row_padding);
    const kernels::WeightMatrix m = matrix_of(f, s, w);
    fast::AlignedBuffer workspace(std::max<std::size_t>(64, fast::activation_workspace_bytes(f.type, s.cols, s.tokens)));
    std::vector<float> first;
    for (const fast::KernelSet& k : sets) {
        CAPTURE(k.description);
        fast::ConvertedActivations a;
        const std::vector<float> y = fast_product(k, pool, m, s, x, &a, workspace);
        const std::size_t stride = s.rows + s.out_extra;
        for (std::size_t t = 0; t < s.tokens; ++t) {
            const std::vector<double> act = dequantize_activations(f.activation, a.data + t * a.row_bytes, s.cols);
            std::vector<float> wrow(s.cols);
            for (std::size_t r = 0; r < s.rows; ++r) {
                f.dequantize_row(m.row(r), wrow.data(), s.cols);
                double exact = 0, magnitude = 0;
                for (std::size_t j = 0; j < s.cols; ++j) {
                    exact += wrow[j] * act[j];
                    magnitude += std::abs(wrow[j] * act[j]);
                }
                const double error = std::abs(y[t * stride + r] - exact);
                CHECK_MESSAGE(error <= tolerance(f.activation) * magnitude + 1e-30,
                              "token " << t << " row " << r << ": " << y[t * stride + r] << " vs " << exact);
            }
            for (std::size_t r = s.rows; r < stride; ++r) CHECK(y[t * stride + r] == -7.0f);  // untouched
        }
        // bits: the same in every kernel set
        if (first.empty()) first = y;
        CHECK_MESSAGE(std::memcmp(first.data(), y.data(), y.size() * sizeof(float)) == 0,
                      k.description << " differs from " << sets.front().description);
        // bits: one token at a time equals all tokens at once (but for the float
        // types' tiled order, which llama.cpp uses for 2+ tokens only)
        const bool float_type = f.activation == ActivationType::f32 || f.activation == ActivationType::f16 ||
                                f.activation == ActivationType::bf16;
        const bool tiled = float_type && fast::sum_order(f.type, s.tokens, s.rows, s.cols) == fast::SumOrder::tiled;
        for (std::size_t t = 0; t < s.tokens && s.tokens > 1 && !tiled; ++t) {
            const Shape one{s.rows, s.cols, 1, s.row_padding, s.out_extra};
            const std::vector<float> xt(x.begin() + t * s.cols, x.begin() + (t + 1) * s.cols);
            const std::vector<float> yt = fast_product(k, pool, m, one, xt, nullptr, workspace);
            CHECK_MESSAGE(std::memcmp(yt.data(), y.data() + t * stride, s.rows * sizeof(float)) == 0,
                          "token " << t << " alone differs from the batch");
        }
    }
}

}  // namespace

TEST_CASE("backend ops: matmul of every weight format, shape and kernel set against the reference") {
    const auto sets = runnable_kernel_sets();
    fast::ThreadPool pool(2);
    std::mt19937 rng(15);
    for (const WeightFormat& f : kernels::weight_formats()) {
        for (const Shape& s : shapes_for(f)) {
            const std::vector<std::byte> w = random_weights(f, s, rng);
            const std::vector<float> x = random_activations(s.tokens * s.cols, rng);
            check_matmul(f, s, w, x, sets, pool);
        }
    }
}

// Extreme blocks: most weight bytes 0xFF (the largest quants and scales a format holds,
// where the dequantized values stay within +-1000) times activations of one magnitude and
// random signs, which every activation type quantizes to +-127: the largest integer pair
// and lane sums a SIMD kernel forms, in decode and prompt shapes.
TEST_CASE("backend ops: extreme blocks (all-ones quants, activations at +-127) on every format and kernel set") {
    const auto sets = runnable_kernel_sets();
    fast::ThreadPool pool(2);
    std::mt19937 rng(17);
    std::bernoulli_distribution sign(0.5);
    for (const WeightFormat& f : kernels::weight_formats()) {
        const std::size_t block = std::max(f.block_size, kernels::activation_format(f.activation).block_size);
        for (const Shape& s : {Shape{9, 3 * block, 1}, Shape{12, 2 * block, 13}, Shape{7, block, 37}}) {
            const std::vector<std::byte> w = random_weights(f, s, rng, 0.75);
            std::vector<float> x(s.tokens * s.cols);
            for (float& v : x) v = sign(rng) ? 1.0f : -1.0f;
            check_matmul(f, s, w, x, sets, pool);
        }
    }
}

TEST_CASE("backend ops: get_rows of every weight format on the fast backend is the reference dequantization") {
    std::mt19937 rng(16);
    const auto backend = fast::make_fast_backend(fast::process_kernel_set());
    for (const WeightFormat& f : kernels::weight_formats()) {
        CAPTURE(f.name);
        const Shape s{7, f.block_size == 1 ? 37 : 2 * f.block_size, 1};
        const std::vector<std::byte> w = random_weights(f, s, rng);
        const kernels::WeightMatrix m = matrix_of(f, s, w);
        const std::vector<std::int32_t> ids = {6, 0, 3, 3};
        std::vector<float> got(ids.size() * s.cols), want(s.cols);
        backend->get_rows(m, ids, kernels::Rows{got.data(), ids.size(), s.cols, s.cols});
        for (std::size_t t = 0; t < ids.size(); ++t) {
            kernels::reference::dequantize_row(f.type, m.row(static_cast<std::size_t>(ids[t])), want.data(), s.cols);
            CHECK(std::memcmp(want.data(), got.data() + t * s.cols, s.cols * sizeof(float)) == 0);
        }
    }
}

TEST_CASE("backend ops: a type without a row is refused by name on both routes") {
    using ember::gguf::GgmlType;
    CHECK(kernels::find_weight_format(GgmlType::IQ4_XS) == nullptr);
    CHECK_THROWS_WITH(kernels::weight_format(GgmlType::IQ4_XS),
                      doctest::Contains("Ember has no kernels for IQ4_XS weights"));
    CHECK_FALSE(fast::has_matmul(GgmlType::TQ2_0));
    for (const WeightFormat& f : kernels::weight_formats()) {
        CHECK(kernels::find_weight_format(f.type) == &f);
        CHECK(f.name == ember::gguf::type_name(f.type));
        CHECK(f.block_size == ember::gguf::type_traits(static_cast<std::uint32_t>(f.type))->block_size);
        CHECK(f.block_bytes == ember::gguf::type_traits(static_cast<std::uint32_t>(f.type))->type_size);
    }
}
