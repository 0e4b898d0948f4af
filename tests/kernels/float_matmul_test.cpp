// Rung: below the ladder (kernel unit tests). F16, BF16 and F32 products of every kernel
// set this CPU runs. Activations are rounded to the weight type first (bit-exact, see
// conversion_test); the dot products accumulate in F32 in a per-variant order, so they
// are checked against an exact (double) sum of the same rounded operands within the
// classic bound for F32 summation of n terms split over at least 8 lanes:
//   |error| <= (n / 8 + 8) * 2^-24 * sum |w_k * a_k|
// Within a kernel set, the matrix-vector path (1 token), the tiled matrix-matrix path
// (2..17 tokens) and any thread count give bit-identical results.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "kernel_test_support.hpp"
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

}  // namespace

TEST_CASE("F16 / BF16 / F32 products: within the F32 summation bound, bit-identical across paths and threads") {
    std::mt19937 rng(21);
    fast::ThreadPool one(1), two(2);
    const auto sets = runnable_kernel_sets();
    for (GgmlType type : {GgmlType::F16, GgmlType::BF16, GgmlType::F32}) {
        for (std::size_t cols : {1, 7, 15, 16, 17, 31, 33, 64, 100, 172, 515}) {
            for (std::size_t rows : {1, 3, 9, 20}) {
                const auto w = random_matrix(rng, type, rows, cols);
                const std::size_t max_tokens = 17;
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
                    }
                    check_product(w, x, max_tokens, single);
                    for (std::size_t n_tokens = 2; n_tokens <= max_tokens; ++n_tokens) {
                        std::vector<float> y1(n_tokens * rows), y2(n_tokens * rows);
                        fast::matmul(k, one, w.view(), x.data(), n_tokens, y1.data(), workspace.span());
                        fast::matmul(k, two, w.view(), x.data(), n_tokens, y2.data(), workspace.span());
                        REQUIRE_MESSAGE(std::memcmp(y1.data(), single.data(), y1.size() * 4) == 0, n_tokens << " tokens");
                        REQUIRE_MESSAGE(std::memcmp(y2.data(), y1.data(), y1.size() * 4) == 0, n_tokens << " tokens, 2 threads");
                    }
                }
            }
        }
    }
}

TEST_CASE("F16 / BF16 / F32 single dots agree with the matrix path and the bound") {
    std::mt19937 rng(22);
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        for (std::size_t n : {1, 8, 16, 31, 32, 33, 2048}) {
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
        }
    }
}
