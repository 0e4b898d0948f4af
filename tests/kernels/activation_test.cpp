// Rung: below the ladder (kernel unit tests). SwiGLU with llama.cpp's vector exp, GEGLU
// through its F16 GELU table (against the reference kernel, itself checked against the
// table's definition), and RMS norm, for every kernel set this CPU runs, bit-exact against straightforward scalar
// transcriptions of model-math §3.1 / §3.4-3.5 (llama.cpp's AVX-512 build computes the
// same bits: whole groups of 16 through the vector exp, the rest through expf). Also the
// vector exp's accuracy against a double-precision exp: llama.cpp's comment says "1.45358
// plus 0.5 ulps"; measured in ulps of the result's binade, the worst case found is 2.23
// (x = -4.55289), so the check is 2.5 ulps: it catches a wrong constant, not a last bit.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernel_test_support.hpp"
#include "kernels/fast/row_ops.hpp"
#include "kernels/fast/thread_pool.hpp"
#include "kernels/reference/kernels.hpp"

using namespace ember::test;
namespace fast = ember::kernels::fast;

namespace {

// ggml_vec_swiglu_f32 on an AVX-512 build.
void ref_swiglu_row(const float* g, const float* u, float* out, std::size_t n) {
    const std::size_t grouped = n - n % 16;
    for (std::size_t i = 0; i < n; ++i) {
        const float e = i < grouped ? ref_vector_exp(0.0f - g[i]) : std::exp(-g[i]);
        out[i] = g[i] / (1.0f + e) * u[i];
    }
}

bool same_bits(float a, float b) { return float_bits(a) == float_bits(b) || (std::isnan(a) && std::isnan(b)); }

}  // namespace

TEST_CASE("vector exp: within 2.5 ulp of exp over the whole useful range") {
    double worst = 0;
    for (float x = -103.0f; x < 88.7f; x += 0.0013f) {
        const float got = ref_vector_exp(x);
        const double want = std::exp(static_cast<double>(x));
        if (want < std::numeric_limits<float>::min()) continue;  // subnormal results lose relative precision
        const double ulp = std::ldexp(1.0, std::ilogb(want) - 23);
        worst = std::max(worst, std::fabs(got - want) / ulp);
    }
    MESSAGE("vector exp: worst error " << worst << " ulp");
    CHECK(worst <= 2.5);
    CHECK(ref_vector_exp(-200.0f) == 0.0f);
    CHECK(std::isinf(ref_vector_exp(200.0f)));
    CHECK(ref_vector_exp(0.0f) == 1.0f);
}

TEST_CASE("swiglu: bit-exact with llama.cpp's recipe in every kernel set, every length") {
    std::mt19937 rng(31);
    std::vector<float> g = random_floats(rng, 8192 + 40, 4.0f);
    std::vector<float> u = random_floats(rng, g.size(), 1.0f);
    // edges: signed zeros, exp overflow / underflow of -g, infinities, NaN, subnormals
    const float specials[] = {0.0f, -0.0f, 90.0f, -90.0f, 110.0f, -110.0f, 1e-40f, -1e-40f, INFINITY, -INFINITY, NAN, 88.7f, -88.7f};
    for (std::size_t i = 0; i < std::size(specials); ++i) g[3 * i + 1] = specials[i];
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        for (std::size_t n : {1, 5, 15, 16, 17, 31, 32, 33, 47, 172, 8192, 8192 + 40}) {
            CAPTURE(n);
            std::vector<float> want(n), got(n);
            ref_swiglu_row(g.data(), u.data(), want.data(), n);
            k.swiglu_row(g.data(), u.data(), got.data(), n);
            for (std::size_t i = 0; i < n; ++i) {
                if (!same_bits(got[i], want[i])) FAIL("element " << i << " (gate " << g[i] << "): " << got[i] << " vs " << want[i]);
            }
        }
    }
}

TEST_CASE("geglu: llama.cpp's F16-table GELU times up, bit for bit in every kernel set, every length") {
    std::mt19937 rng(33);
    std::vector<float> g = random_floats(rng, 4096 + 40, 6.0f);
    std::vector<float> u = random_floats(rng, g.size(), 1.0f);
    const float specials[] = {0.0f, -0.0f, 10.0f, -10.0f, 9.999f, -9.999f, 1e-40f, 65520.0f, -65520.0f, INFINITY, -INFINITY, NAN};
    for (std::size_t i = 0; i < std::size(specials); ++i) g[3 * i + 1] = specials[i];
    const float* table = ember::kernels::reference::gelu_f16_table_values();
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        for (std::size_t n : {1, 5, 15, 16, 17, 33, 172, 4096 + 40}) {
            CAPTURE(n);
            std::vector<float> got(n);
            k.geglu_row(g.data(), u.data(), got.data(), n, table);
            for (std::size_t i = 0; i < n; ++i) {
                // ggml_vec_geglu_f32: exactly 0 below -10, gate * up from 10, else the table
                const float want = g[i] <= -10.0f ? 0.0f : ember::kernels::reference::gelu_f16_table(g[i]) * u[i];
                if (!same_bits(got[i], want)) FAIL("element " << i << " (gate " << g[i] << "): " << got[i] << " vs " << want);
            }
        }
    }
}

TEST_CASE("swiglu and rms_norm front ends: strided rows, in place, 1 and 2 threads") {
    std::mt19937 rng(32);
    const std::size_t rows = 37, cols = 200, stride = 203;
    const auto x = random_floats(rng, rows * stride, 3.0f);
    const auto w = random_floats(rng, cols, 1.0f);
    const float eps = 1e-5f;
    // llama.cpp's recipe, written out
    std::vector<float> want_norm(rows * stride, 0.0f), want_plain(rows * stride, 0.0f);
    for (std::size_t r = 0; r < rows; ++r) {
        double sum = 0;
        for (std::size_t c = 0; c < cols; ++c) sum += static_cast<double>(x[r * stride + c] * x[r * stride + c]);
        const float scale = 1.0f / std::sqrt(static_cast<float>(sum / cols) + eps);
        for (std::size_t c = 0; c < cols; ++c) {
            want_plain[r * stride + c] = x[r * stride + c] * scale;
            want_norm[r * stride + c] = want_plain[r * stride + c] * w[c];
        }
    }
    const auto& k = fast::process_kernel_set();
    for (int threads : {1, 2}) {
        fast::ThreadPool pool(threads);
        std::vector<float> y(rows * stride, 0.0f), plain(rows * stride, 0.0f);
        fast::rms_norm(pool, x.data(), stride, w.data(), eps, y.data(), stride, rows, cols);
        fast::rms_norm(pool, x.data(), stride, nullptr, eps, plain.data(), stride, rows, cols);
        CHECK(std::memcmp(y.data(), want_norm.data(), y.size() * 4) == 0);
        CHECK(std::memcmp(plain.data(), want_plain.data(), y.size() * 4) == 0);
        std::vector<float> in_place = x;
        fast::rms_norm(pool, in_place.data(), stride, w.data(), eps, in_place.data(), stride, rows, cols);
        for (std::size_t r = 0; r < rows; ++r) CHECK(std::memcmp(&in_place[r * stride], &want_norm[r * stride], cols * 4) == 0);

        std::vector<float> s(rows * stride, 0.0f), want_s(rows * stride, 0.0f);
        for (std::size_t r = 0; r < rows; ++r) ref_swiglu_row(&x[r * stride], &y[r * stride], &want_s[r * stride], cols);
        fast::swiglu(k, pool, x.data(), stride, y.data(), stride, s.data(), stride, rows, cols);
        CHECK(std::memcmp(s.data(), want_s.data(), s.size() * 4) == 0);
    }
}
