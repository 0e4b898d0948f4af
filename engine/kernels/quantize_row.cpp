// Each function follows its ggml-quants.c counterpart line by line (the same float
// operations in the same order; built with -ffp-contract=off like llama.cpp's baseline
// ggml-base), so the bytes agree.
#include "kernels/quantize_row.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "kernels/float16.hpp"
#include "kernels/quantize_search.hpp"

namespace ember::kernels {


namespace detail {

int nearest_int(float x) {
    const float shifted = x + 12582912.0f;
    std::uint32_t bits;
    std::memcpy(&bits, &shifted, 4);
    return static_cast<int>(bits & 0x007FFFFFu) - 0x00400000;
}

// The error is |diff| with use_mad (Q2_K), diff^2 without (Q4_K, Q5_K).
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, std::uint8_t* L, float* the_min,
                       std::uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad) {
    float min = x[0], max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        const float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.f;
    }
    float iscale = static_cast<float>(nmax) / (max - min);
    float scale = 1 / iscale;
    float best_error = 0;
    for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * (x[i] - min));
        L[i] = static_cast<std::uint8_t>(std::max(0, std::min(nmax, l)));
        float diff = scale * static_cast<float>(L[i]) + min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        best_error += weights[i] * diff;
    }
    if (nstep < 1) {
        *the_min = -min;
        return scale;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * (x[i] - min));
            l = std::max(0, std::min(nmax, l));
            Laux[i] = static_cast<std::uint8_t>(l);
            const float w = weights[i];
            const float fl = static_cast<float>(l);
            sum_l += w * fl;
            sum_l2 += w * fl * fl;
            sum_xl += w * fl * x[i];
        }
        const float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float cur_error = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
                diff = use_mad ? std::fabs(diff) : diff * diff;
                cur_error += weights[i] * diff;
            }
            if (cur_error < best_error) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

}  // namespace detail

namespace {

using detail::kGroupMaxEps;
using detail::make_qkx2_quants;
using detail::nearest_int;


// make_qx_quants(n, nmax, x, L, rmse_type = 1, qw = NULL): the weights are x^2.
float make_qx_quants_rmse1(int n, int nmax, const float* x, std::int8_t* L) {
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
    float iscale = -nmax / max;
    float sumlx = 0, suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int l = nearest_int(iscale * x[i]);
        l = std::max(-nmax, std::min(nmax - 1, l));
        L[i] = static_cast<std::int8_t>(l + nmax);
        const float w = x[i] * x[i];
        sumlx += w * x[i] * static_cast<float>(l);
        suml2 += w * static_cast<float>(l) * static_cast<float>(l);
    }
    float scale = suml2 ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int l = nearest_int(iscale * x[i]);
            l = std::max(-nmax, std::min(nmax - 1, l));
            const float w = x[i] * x[i];
            sumlx += w * x[i] * static_cast<float>(l);
            suml2 += w * static_cast<float>(l) * static_cast<float>(l);
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                const int l = nearest_int(iscale * x[i]);
                L[i] = static_cast<std::int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

}  // namespace

void quantize_row_q8_0_file_rule(const float* x, BlockQ8_0* y, std::size_t n) {
    for (std::size_t b = 0; b < n / kQK; ++b) {
        const float* xb = x + b * kQK;
        float amax = 0.0f;
        for (std::size_t j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        for (std::size_t j = 0; j < kQK; ++j) y[b].qs[j] = static_cast<std::int8_t>(std::round(xb[j] * id));
    }
}

// quantize_row_q4_0_ref: d = (the signed value of largest magnitude) / -8,
// q = min(15, (int8)(x / d + 8.5)) (truncation).
void quantize_row_q4_0_file_rule(const float* x, BlockQ4_0* y, std::size_t n) {
    for (std::size_t b = 0; b < n / kQK; ++b) {
        const float* xb = x + b * kQK;
        float amax = 0.0f, max = 0.0f;
        for (std::size_t j = 0; j < kQK; ++j) {
            if (amax < std::fabs(xb[j])) {
                amax = std::fabs(xb[j]);
                max = xb[j];
            }
        }
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        for (int j = 0; j < 16; ++j) {
            const float x0 = xb[j] * id;
            const float x1 = xb[j + 16] * id;
            const int q0 = std::min(15, static_cast<int>(static_cast<std::int8_t>(x0 + 8.5f)));
            const int q1 = std::min(15, static_cast<int>(static_cast<std::int8_t>(x1 + 8.5f)));
            y[b].qs[j] = static_cast<std::uint8_t>((q0 & 0xFF) | (q1 << 4));
        }
    }
}

// quantize_row_q4_1_ref / quantize_row_q5_1_ref: d = (max - min) / (2^bits - 1), m = min,
// q = (x - min) / d + 0.5 truncated (Q4_1 capped at 15 through an int8 cast).
void quantize_row_q4_1_file_rule(const float* x, BlockQ4_1* y, std::size_t n) {
    for (std::size_t b = 0; b < n / kQK; ++b) {
        const float* xb = x + b * kQK;
        float min = FLT_MAX, max = -FLT_MAX;
        for (std::size_t j = 0; j < kQK; ++j) {
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        y[b].m = fp32_to_fp16(min);
        for (int j = 0; j < 16; ++j) {
            const float x0 = (xb[j] - min) * id;
            const float x1 = (xb[j + 16] - min) * id;
            const auto q0 = static_cast<std::uint8_t>(std::min(15, static_cast<int>(static_cast<std::int8_t>(x0 + 0.5f))));
            const auto q1 = static_cast<std::uint8_t>(std::min(15, static_cast<int>(static_cast<std::int8_t>(x1 + 0.5f))));
            y[b].qs[j] = static_cast<std::uint8_t>(q0 | (q1 << 4));
        }
    }
}

void quantize_row_q5_1_file_rule(const float* x, BlockQ5_1* y, std::size_t n) {
    for (std::size_t b = 0; b < n / kQK; ++b) {
        const float* xb = x + b * kQK;
        float min = FLT_MAX, max = -FLT_MAX;
        for (std::size_t j = 0; j < kQK; ++j) {
            if (xb[j] < min) min = xb[j];
            if (xb[j] > max) max = xb[j];
        }
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[b].d = fp32_to_fp16(d);
        y[b].m = fp32_to_fp16(min);
        std::uint32_t qh = 0;
        for (int j = 0; j < 16; ++j) {
            const auto q0 = static_cast<std::uint8_t>((xb[j] - min) * id + 0.5f);
            const auto q1 = static_cast<std::uint8_t>((xb[j + 16] - min) * id + 0.5f);
            y[b].qs[j] = static_cast<std::uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
            qh |= ((q0 & 0x10u) >> 4) << j;
            qh |= ((q1 & 0x10u) >> 4) << (j + 16);
        }
        std::memcpy(y[b].qh, &qh, sizeof qh);
    }
}

// quantize_row_q4_K_ref
void quantize_row_q4_K_file_rule(const float* x, BlockQ4_K* y, std::size_t n) {
    for (std::size_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        std::uint8_t L[kQK_K], Laux[32];
        float weights[32], mins[8], scales[8];
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; ++j) {
            float sum_x2 = 0;
            for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
            const float av_x = std::sqrt(sum_x2 / 32);
            for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
            scales[j] = make_qkx2_quants(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.f, 0.1f, 20, false);
            if (scales[j] > max_scale) max_scale = scales[j];
            if (mins[j] > max_min) max_min = mins[j];
        }
        const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
        const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
        std::memset(y[i].scales, 0, sizeof y[i].scales);
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
                L[32 * j + ii] = static_cast<std::uint8_t>(std::max(0, std::min(15, l)));
            }
        }
        std::uint8_t* q = y[i].qs;
        for (std::size_t j = 0; j < kQK_K; j += 64, q += 32) {
            for (int l = 0; l < 32; ++l) q[l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 4));
        }
    }
}

// quantize_row_q6_K_ref
void quantize_row_q6_K_file_rule(const float* x, BlockQ6_K* y, std::size_t n) {
    for (std::size_t i = 0; i < n / kQK_K; ++i, x += kQK_K) {
        std::int8_t L[kQK_K];
        float scales[16];
        float max_scale = 0, max_abs_scale = 0;
        for (int ib = 0; ib < 16; ++ib) {
            const float scale = make_qx_quants_rmse1(16, 32, x + 16 * ib, L + 16 * ib);
            scales[ib] = scale;
            const float abs_scale = std::fabs(scale);
            if (abs_scale > max_abs_scale) {
                max_abs_scale = abs_scale;
                max_scale = scale;
            }
        }
        if (max_abs_scale < kGroupMaxEps) {
            std::memset(&y[i], 0, sizeof(BlockQ6_K));
            y[i].d = fp32_to_fp16(0.f);
            continue;
        }
        const float iscale = -128.f / max_scale;
        y[i].d = fp32_to_fp16(1 / iscale);
        for (int ib = 0; ib < 16; ++ib) y[i].scales[ib] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
        for (int j = 0; j < 16; ++j) {
            const float d = fp16_to_fp32(y[i].d) * static_cast<float>(y[i].scales[j]);
            if (!d) continue;
            for (int ii = 0; ii < 16; ++ii) {
                const int l = nearest_int(x[16 * j + ii] / d);
                L[16 * j + ii] = static_cast<std::int8_t>(std::max(-32, std::min(31, l)) + 32);
            }
        }
        std::uint8_t* ql = y[i].ql;
        std::uint8_t* qh = y[i].qh;
        for (std::size_t j = 0; j < kQK_K; j += 128, ql += 64, qh += 32) {
            for (int l = 0; l < 32; ++l) {
                const int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF, q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
                ql[l] = static_cast<std::uint8_t>(q1 | (q3 << 4));
                ql[l + 32] = static_cast<std::uint8_t>(q2 | (q4 << 4));
                qh[l] = static_cast<std::uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                                  ((L[j + l + 96] >> 4) << 6));
            }
        }
    }
}

void quantize_row_f16(const float* x, std::byte* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t h = fp32_to_fp16(x[i]);
        std::memcpy(y + 2 * i, &h, 2);
    }
}

void quantize_row_bf16(const float* x, std::byte* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
        const std::uint16_t h = fp32_to_bf16(x[i]);
        std::memcpy(y + 2 * i, &h, 2);
    }
}

}  // namespace ember::kernels
