// The Q2_K, Q3_K and Q5_K file rules (quantize_row_q2_K_ref, _q3_K_ref, _q5_K_ref of
// ggml-quants.c), line by line as there (the same float operations in the same order;
// built with -ffp-contract=off like llama.cpp's baseline ggml-base), no importance matrix.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/float16.hpp"
#include "kernels/quantize_row.hpp"
#include "kernels/quantize_search.hpp"

namespace ember::kernels {

using detail::kGroupMaxEps;
using detail::make_qkx2_quants;
using detail::nearest_int;

namespace {

// make_q3_quants(n, nmax, x, L, do_rmse = true): the weights are x^2.
float make_q3_quants_rmse(int n, int nmax, const float* x, std::int8_t* L) {
    float max = 0, amax = 0;
    for (int i = 0; i < n; ++i) {
        const float ax = std::fabs(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < kGroupMaxEps) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.f;
    }
    const float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = std::max(-nmax, std::min(nmax - 1, l));
        L[i] = static_cast<std::int8_t>(l);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * static_cast<float>(l);
        suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    for (int itry = 0; itry < 5; ++itry) {
        int n_changed = 0;
        for (int i = 0; i < n; ++i) {
            const float w = x[i] * x[i];
            const float li = static_cast<float>(L[i]);
            float slx = sumlx - w * x[i] * li;
            if (slx > 0) {
                float sl2 = suml2 - w * li * li;
                int new_l = nearest_int(x[i] * sl2 / slx);
                new_l = std::max(-nmax, std::min(nmax - 1, new_l));
                if (new_l != L[i]) {
                    slx += w * x[i] * static_cast<float>(new_l);
                    sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
                    if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
                        L[i] = static_cast<std::int8_t>(new_l);
                        sumlx = slx;
                        suml2 = sl2;
                        ++n_changed;
                    }
                }
            }
        }
        if (!n_changed) break;
    }
    for (int i = 0; i < n; ++i) L[i] = static_cast<std::int8_t>(L[i] + nmax);
    return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Four 2-bit values of elements j + l, +32, +64, +96 of each 128 per byte (Q2_K, Q3_K).
void pack_2bit(const std::uint8_t* L, std::uint8_t* qs) {
    for (std::size_t j = 0; j < kQK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            qs[j / 4 + l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
        }
    }
}

}  // namespace

void quantize_row_q2_K_file_rule(const float* x, BlockQ2_K* y, std::size_t n) {
    constexpr float q4scale = 15.f;
    for (std::size_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        std::uint8_t L[kQK_K], Laux[16];
        float weights[16], mins[16], scales[16];
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 16; ++j) {
            for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
            scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        if (max_scale > 0) {
            const float iscale = q4scale / max_scale;
            for (int j = 0; j < 16; ++j) y[i].scales[j] = static_cast<std::uint8_t>(nearest_int(iscale * scales[j]));
            y[i].d = fp32_to_fp16(max_scale / q4scale);
        } else {
            for (int j = 0; j < 16; ++j) y[i].scales[j] = 0;
            y[i].d = fp32_to_fp16(0.f);
        }
        if (max_min > 0) {
            const float iscale = q4scale / max_min;
            for (int j = 0; j < 16; ++j) y[i].scales[j] |= static_cast<std::uint8_t>(nearest_int(iscale * mins[j]) << 4);
            y[i].dmin = fp32_to_fp16(max_min / q4scale);
        } else {
            y[i].dmin = fp32_to_fp16(0.f);
        }
        for (int j = 0; j < 16; ++j) {
            const float d = fp16_to_fp32(y[i].d) * static_cast<float>(y[i].scales[j] & 0xF);
            if (!d) continue;
            const float dm = fp16_to_fp32(y[i].dmin) * static_cast<float>(y[i].scales[j] >> 4);
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int((x[16 * j + ii] + dm) / d);
                L[16 * j + ii] = static_cast<std::uint8_t>(std::max(0, std::min(3, l)));
            }
        }
        pack_2bit(L, y[i].qs);
    }
}

void quantize_row_q3_K_file_rule(const float* x, BlockQ3_K* y, std::size_t n) {
    for (std::size_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        std::int8_t L[kQK_K];
        float scales[16];
        float max_scale = 0, amax = 0;
        for (int j = 0; j < 16; ++j) {
            scales[j] = make_q3_quants_rmse(16, 4, x + 16 * j, L + 16 * j);
            const float scale = std::fabs(scales[j]);
            if (scale > amax) {
                amax = scale;
                max_scale = scales[j];
            }
        }
        std::memset(y[i].scales, 0, 12);
        if (max_scale) {
            const float iscale = -32.f / max_scale;
            for (int j = 0; j < 16; ++j) {
                auto l = static_cast<std::int8_t>(nearest_int(iscale * scales[j]));
                l = static_cast<std::int8_t>(std::max<int>(-32, std::min<int>(31, l)) + 32);
                if (j < 8) y[i].scales[j] = static_cast<std::uint8_t>(l & 0xF);
                else y[i].scales[j - 8] |= static_cast<std::uint8_t>((l & 0xF) << 4);
                l = static_cast<std::int8_t>(l >> 4);
                y[i].scales[j % 4 + 8] |= static_cast<std::uint8_t>(l << (2 * (j / 4)));
            }
            y[i].d = fp32_to_fp16(1 / iscale);
        } else {
            y[i].d = fp32_to_fp16(0.f);
        }
        for (int j = 0; j < 16; ++j) {
            const int sc = kernels::q3_k_scale(y[i].scales, j) - 32;
            const float d = fp16_to_fp32(y[i].d) * static_cast<float>(sc);
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = static_cast<std::int8_t>(std::max(-4, std::min(3, l)) + 4);
            }
        }
        // the high bit of the first 8 quants in bit 0 of hmask[0..31], the next 8 in bit 1, ...
        std::memset(y[i].hmask, 0, kQK_K / 8);
        std::uint8_t Lu[kQK_K];
        int m = 0;
        std::uint8_t hm = 1;
        for (std::size_t j = 0; j < kQK_K; ++j) {
            int l = L[j];
            if (l > 3) {
                y[i].hmask[m] |= hm;
                l -= 4;
            }
            Lu[j] = static_cast<std::uint8_t>(l);
            if (++m == kQK_K / 8) {
                m = 0;
                hm = static_cast<std::uint8_t>(hm << 1);
            }
        }
        pack_2bit(Lu, y[i].qs);
    }
}

void quantize_row_q5_K_file_rule(const float* x, BlockQ5_K* y, std::size_t n) {
    for (std::size_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        std::uint8_t L[kQK_K], Laux[32];
        float weights[32], mins[8], scales[8];
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; ++j) {
            float sum_x2 = 0;
            for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
            const float av_x = std::sqrt(sum_x2 / 32);
            for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
            scales[j] = make_qkx2_quants(32, 31, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -0.5f, 0.1f, 15, false);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
        const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
        for (int j = 0; j < 8; ++j) {
            const std::uint8_t ls = std::min<std::uint8_t>(63, static_cast<std::uint8_t>(nearest_int(inv_scale * scales[j])));
            const std::uint8_t lm = std::min<std::uint8_t>(63, static_cast<std::uint8_t>(nearest_int(inv_min * mins[j])));
            if (j < 4) {
                y[i].scales[j] = ls;
                y[i].scales[j + 4] = lm;
            } else {
                y[i].scales[j + 4] = static_cast<std::uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
                y[i].scales[j - 4] |= static_cast<std::uint8_t>((ls >> 4) << 6);
                y[i].scales[j] |= static_cast<std::uint8_t>((lm >> 4) << 6);
            }
        }
        y[i].d = fp32_to_fp16(max_scale / 63.f);
        y[i].dmin = fp32_to_fp16(max_min / 63.f);
        for (int j = 0; j < 8; ++j) {
            int sc, m;
            kernels::k4_scale_min(y[i].scales, j, sc, m);
            const float d = fp16_to_fp32(y[i].d) * static_cast<float>(sc);
            if (!d) continue;
            const float dm = fp16_to_fp32(y[i].dmin) * static_cast<float>(m);
            for (int ii = 0; ii < 32; ++ii) {
                const int l = nearest_int((x[32 * j + ii] + dm) / d);
                L[32 * j + ii] = static_cast<std::uint8_t>(std::max(0, std::min(31, l)));
            }
        }
        std::memset(y[i].qh, 0, kQK_K / 8);
        std::uint8_t* ql = y[i].qs;
        std::uint8_t m1 = 1, m2 = 2;
        for (std::size_t nn = 0; nn < kQK_K; nn += 64, ql += 32) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[nn + j], l2 = L[nn + j + 32];
                if (l1 > 15) {
                    l1 -= 16;
                    y[i].qh[j] |= m1;
                }
                if (l2 > 15) {
                    l2 -= 16;
                    y[i].qh[j] |= m2;
                }
                ql[j] = static_cast<std::uint8_t>(l1 | (l2 << 4));
            }
            m1 = static_cast<std::uint8_t>(m1 << 2);
            m2 = static_cast<std::uint8_t>(m2 << 2);
        }
    }
}

}  // namespace ember::kernels
