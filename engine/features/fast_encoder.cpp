#include "features/fast_encoder.hpp"

#include <algorithm>
#include <cmath>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define EMBER_SAE_X86 1
#endif

#include "kernels/fast/thread_pool.hpp"

namespace ember::features {
namespace {

// Rows per tile: their x_c (double, d_in each) stays in cache while every feature's
// encoder row streams past it once.
constexpr std::size_t kRowTile = 32;
// Features per parallel chunk.
constexpr std::size_t kFeatureGrain = 16;

// The summation every (row, feature) product gets, whichever kernel computes it: four
// lanes, lane k summing x[i] w[i] over i = k mod 4 below d_in - d_in mod 4 by fused
// multiply-add in double, then (lane0 + lane1) + (lane2 + lane3), then the tail by fused
// multiply-add. A float32 weight times a double is exact before the one rounding of each
// fma, so the only error is the double sum's: at most (d_in + 2) 2^-53 sum_i |x_c[i] w[i]|.
template <std::size_t R, std::size_t F>
void dot_block_scalar(const double* const* x, const float* const* w, std::size_t d_in, double (*out)[F]) {
    const std::size_t body = d_in & ~std::size_t{3};
    double acc[R][F][4] = {};
    for (std::size_t i = 0; i < body; i += 4)
        for (std::size_t r = 0; r < R; ++r)
            for (std::size_t f = 0; f < F; ++f)
                for (std::size_t k = 0; k < 4; ++k)
                    acc[r][f][k] = std::fma(x[r][i + k], static_cast<double>(w[f][i + k]), acc[r][f][k]);
    for (std::size_t r = 0; r < R; ++r)
        for (std::size_t f = 0; f < F; ++f) {
            double s = (acc[r][f][0] + acc[r][f][1]) + (acc[r][f][2] + acc[r][f][3]);
            for (std::size_t i = body; i < d_in; ++i) s = std::fma(x[r][i], static_cast<double>(w[f][i]), s);
            out[r][f] = s;
        }
}

#ifdef EMBER_SAE_X86
// The same operations, four lanes to a register.
template <std::size_t R, std::size_t F>
__attribute__((target("avx2,fma"))) void dot_block_avx2(const double* const* x, const float* const* w, std::size_t d_in,
                                                         double (*out)[F]) {
    const std::size_t body = d_in & ~std::size_t{3};
    __m256d acc[R][F];
    for (std::size_t r = 0; r < R; ++r)
        for (std::size_t f = 0; f < F; ++f) acc[r][f] = _mm256_setzero_pd();
    for (std::size_t i = 0; i < body; i += 4) {
        __m256d wv[F];
        for (std::size_t f = 0; f < F; ++f) wv[f] = _mm256_cvtps_pd(_mm_loadu_ps(w[f] + i));
        for (std::size_t r = 0; r < R; ++r) {
            const __m256d xv = _mm256_loadu_pd(x[r] + i);
            for (std::size_t f = 0; f < F; ++f) acc[r][f] = _mm256_fmadd_pd(xv, wv[f], acc[r][f]);
        }
    }
    for (std::size_t r = 0; r < R; ++r)
        for (std::size_t f = 0; f < F; ++f) {
            alignas(32) double lane[4];
            _mm256_store_pd(lane, acc[r][f]);
            double s = (lane[0] + lane[1]) + (lane[2] + lane[3]);
            for (std::size_t i = body; i < d_in; ++i) s = std::fma(x[r][i], static_cast<double>(w[f][i]), s);
            out[r][f] = s;
        }
}

bool has_avx2_fma() {
    static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return yes;
}
#endif

template <std::size_t R, std::size_t F>
void dot_block(const double* const* x, const float* const* w, std::size_t d_in, double (*out)[F]) {
#ifdef EMBER_SAE_X86
    if (has_avx2_fma()) return dot_block_avx2<R, F>(x, w, d_in, out);
#endif
    dot_block_scalar<R, F>(x, w, d_in, out);
}

// pre[t, j] for rows [0, T) of x and features [j0, j1): 4 rows x 2 features at a time,
// the rest one by one (the same operations for each (t, j): dot_block).
void products(const double* x, std::size_t T, const float* encoder, std::size_t d_in, std::size_t d_sae,
              std::size_t j0, std::size_t j1, double* pre) {
    std::size_t t = 0;
    const auto block = [&]<std::size_t R, std::size_t F>(std::size_t t0, std::size_t j) {
        const double* xs[R];
        const float* ws[F];
        for (std::size_t r = 0; r < R; ++r) xs[r] = x + (t0 + r) * d_in;
        for (std::size_t f = 0; f < F; ++f) ws[f] = encoder + (j + f) * d_in;
        double out[R][F];
        dot_block<R, F>(xs, ws, d_in, out);
        for (std::size_t r = 0; r < R; ++r)
            for (std::size_t f = 0; f < F; ++f) pre[(t0 + r) * d_sae + j + f] = out[r][f];
    };
    for (; t + 4 <= T; t += 4) {
        std::size_t j = j0;
        for (; j + 2 <= j1; j += 2) block.template operator()<4, 2>(t, j);
        for (; j < j1; ++j) block.template operator()<4, 1>(t, j);
    }
    for (; t < T; ++t) {
        std::size_t j = j0;
        for (; j + 2 <= j1; j += 2) block.template operator()<1, 2>(t, j);
        for (; j < j1; ++j) block.template operator()<1, 1>(t, j);
    }
}

}  // namespace

FastEncoder::FastEncoder(const Sae& sae) : sae_(sae), encoder_(sae.d_sae * sae.d_in) {
    const std::size_t d_in = sae.d_in, d_sae = sae.d_sae;
    for (std::size_t i = 0; i < d_in; ++i)  // W_enc [d_in, d_sae] -> [d_sae, d_in]
        for (std::size_t j = 0; j < d_sae; ++j) encoder_[j * d_in + i] = sae.W_enc[i * d_sae + j];
}

void FastEncoder::encode(const float* x, std::size_t T, float* features, RowNorm& norm,
                         kernels::fast::ThreadPool& pool) const {
    const std::size_t d_in = sae_.d_in, d_sae = sae_.d_sae;
    reset_norm(T, norm);
    std::vector<double> x_c(std::min(T, kRowTile) * d_in);     // a tile's encoder inputs, [rows, d_in]
    std::vector<double> pre(std::min(T, kRowTile) * d_sae);    // their products, [rows, d_sae]
    std::vector<double> row(d_sae);
    for (std::size_t t0 = 0; t0 < T; t0 += kRowTile) {
        const std::size_t rows = std::min(kRowTile, T - t0);
        for (std::size_t r = 0; r < rows; ++r) encoder_input(sae_, x + (t0 + r) * d_in, t0 + r, norm, x_c.data() + r * d_in);
        pool.for_chunks(d_sae, kFeatureGrain, [&](std::size_t j0, std::size_t j1) {
            products(x_c.data(), rows, encoder_.data(), d_in, d_sae, j0, j1, pre.data());
        });
        for (std::size_t r = 0; r < rows; ++r) {
            std::copy_n(pre.data() + r * d_sae, d_sae, row.data());
            features_from_product(sae_, row, features + (t0 + r) * d_sae);
        }
    }
}

}  // namespace ember::features
