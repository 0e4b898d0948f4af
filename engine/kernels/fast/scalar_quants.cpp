// The quantized products of the legacy formats (Q4_0, Q4_1, Q5_0, Q5_1) and the K-quants
// (Q2_K ... Q6_K), and the Q8_1 / Q8_K activation quantizers, in portable code that
// reproduces llama.cpp's x86 numerics bit for bit (docs/fast-path.md "Quantized
// formats"). Every variant's KernelSet uses these, so every variant gives these bits.
//
// llama.cpp's AVX2 ggml_vec_dot_*_q8_* (ggml-cpu/arch/x86/quants.c) keep eight float
// lanes per output. Integer arithmetic inside a block is exact, so only two things
// decide the float result, and both are reproduced here:
//   - which elements a lane's integer sum holds: lane i of a 32-element chunk holds its
//     elements 4i..4i+3 (maddubs/madd or dpbusd group them so), over every chunk of a
//     block (a 256-element super-block for the K-quants);
//   - the float operations per block and at the end, written out per format below
//     (acc_i = fma(d, (float)sum_i, acc_i), the min terms, the final fold).
// Compiled with -ffp-contract=off: every fused multiply-add is the explicit fmaf where
// llama.cpp's compiled code has one.
#include "kernels/float16.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::scalar {

namespace {

// hsum_float_8: ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)).
float fold8(const float* l) { return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])); }

float fmaf_(float a, float b, float c) { return __builtin_fmaf(a, b, c); }

// Lane sums of a block: sum[i] = sum over chunks c, k < 4 of w[32c + 4i + k] * a[32c + 4i + k].
template <int N, typename W>
void lane_sums(const W* w, const std::int8_t* a, int* sum) {
    for (int i = 0; i < 8; ++i) sum[i] = 0;
    for (int c = 0; c < N / 32; ++c) {
        for (int i = 0; i < 8; ++i) {
            int s = 0;
            for (int k = 0; k < 4; ++k) s += static_cast<int>(w[32 * c + 4 * i + k]) * a[32 * c + 4 * i + k];
            sum[i] += s;
        }
    }
}

// Per output: eight lanes, the Q4_K min lanes, and the scalar sum of the other min terms.
struct Acc {
    float lanes[8];
    float min_lanes[4];
    float mins;
};

// ---- legacy formats: 32-element blocks with Q8_0 or Q8_1 activations ----
// acc_i = fma(d_w * d_a, (float)sum_i, acc_i); the Q4_1/Q5_1 offset m * s is summed on
// the side (m_w * s_a, one fused multiply-add per block) and added after the fold.

void legacy_lanes(const std::int8_t* q, std::uint16_t d_w, std::uint16_t d_a, const std::int8_t* a, Acc& acc) {
    int s[8];
    lane_sums<32>(q, a, s);
    const float dd = fp16_to_fp32(d_w) * fp16_to_fp32(d_a);
    for (int i = 0; i < 8; ++i) acc.lanes[i] = fmaf_(dd, static_cast<float>(s[i]), acc.lanes[i]);
}

void legacy_offset(std::uint16_t m_w, std::uint16_t s_a, Acc& acc) { acc.mins = fmaf_(fp16_to_fp32(m_w), fp16_to_fp32(s_a), acc.mins); }

std::uint32_t load_qh(const std::uint8_t* qh) {
    return static_cast<std::uint32_t>(qh[0]) | (static_cast<std::uint32_t>(qh[1]) << 8) |
           (static_cast<std::uint32_t>(qh[2]) << 16) | (static_cast<std::uint32_t>(qh[3]) << 24);
}

struct Q4_0 {
    using Weight = BlockQ4_0;
    using Act = BlockQ8_0;
    static constexpr int kBlock = 32;
    struct Unpacked { std::int8_t q[32]; };
    static void unpack(const Weight& w, Unpacked& u) {
        for (int j = 0; j < 16; ++j) {
            u.q[j] = static_cast<std::int8_t>((w.qs[j] & 0xF) - 8);
            u.q[j + 16] = static_cast<std::int8_t>((w.qs[j] >> 4) - 8);
        }
    }
    static void accumulate(const Unpacked& u, const Weight& w, const Act& a, Acc& acc) { legacy_lanes(u.q, w.d, a.d, a.qs, acc); }
    static float finish(const Acc& acc) { return fold8(acc.lanes); }
};

struct Q5_0 {
    using Weight = BlockQ5_0;
    using Act = BlockQ8_0;
    static constexpr int kBlock = 32;
    struct Unpacked { std::int8_t q[32]; };
    static void unpack(const Weight& w, Unpacked& u) {
        const std::uint32_t qh = load_qh(w.qh);
        for (int j = 0; j < 16; ++j) {
            u.q[j] = static_cast<std::int8_t>(((w.qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - 16);
            u.q[j + 16] = static_cast<std::int8_t>(((w.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16);
        }
    }
    static void accumulate(const Unpacked& u, const Weight& w, const Act& a, Acc& acc) { legacy_lanes(u.q, w.d, a.d, a.qs, acc); }
    static float finish(const Acc& acc) { return fold8(acc.lanes); }
};

struct Q4_1 {
    using Weight = BlockQ4_1;
    using Act = BlockQ8_1;
    static constexpr int kBlock = 32;
    struct Unpacked { std::int8_t q[32]; };
    static void unpack(const Weight& w, Unpacked& u) {
        for (int j = 0; j < 16; ++j) {
            u.q[j] = static_cast<std::int8_t>(w.qs[j] & 0xF);
            u.q[j + 16] = static_cast<std::int8_t>(w.qs[j] >> 4);
        }
    }
    static void accumulate(const Unpacked& u, const Weight& w, const Act& a, Acc& acc) {
        legacy_offset(w.m, a.s, acc);
        legacy_lanes(u.q, w.d, a.d, a.qs, acc);
    }
    static float finish(const Acc& acc) { return fold8(acc.lanes) + acc.mins; }
};

struct Q5_1 {
    using Weight = BlockQ5_1;
    using Act = BlockQ8_1;
    static constexpr int kBlock = 32;
    struct Unpacked { std::int8_t q[32]; };
    static void unpack(const Weight& w, Unpacked& u) {
        const std::uint32_t qh = load_qh(w.qh);
        for (int j = 0; j < 16; ++j) {
            u.q[j] = static_cast<std::int8_t>((w.qs[j] & 0xF) | (((qh >> j) & 1) << 4));
            u.q[j + 16] = static_cast<std::int8_t>((w.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4));
        }
    }
    static void accumulate(const Unpacked& u, const Weight& w, const Act& a, Acc& acc) {
        legacy_offset(w.m, a.s, acc);
        legacy_lanes(u.q, w.d, a.d, a.qs, acc);  // fma(s, d_w d_a) there: the same product
    }
    static float finish(const Acc& acc) { return fold8(acc.lanes) + acc.mins; }
};

// ---- K-quants: 256-element super-blocks with Q8_K activations ----
// Unpacked: each element's quant times its sub-block scale (exact in int16); lane sums
// of those times the activation quants; then per super-block, with d = d_a * d_w and
// dmin = -d_a * dmin_w:
//   Q2_K  acc_i = fma(dmin, m[2i] bsum[2i] + m[2i+1] bsum[2i+1], acc_i), then fma(d, sum_i)
//   Q3_K  acc_i = fma(d, sum_i, acc_i)
//   Q6_K  acc_i = fma(d, sum_i - 32 (sc[2i] bsum[2i] + sc[2i+1] bsum[2i+1]), acc_i)
//   Q4_K  min_lane_j = fma(dmin, m[2j] b[2j] + m[2j+1] b[2j+1], min_lane_j) with b[k] the
//         sum of 32-element sub-block k; result fold(acc) + ((ml0 + ml2) + (ml1 + ml3))
//   Q5_K  mins = fma(dmin, (float)sum_k m[k] b[k], mins); result fold(acc) + mins

struct KUnpacked {
    std::int16_t sq[256];  // scale * quant per element
    int mins[16];          // sub-block mins (Q2_K: 16, Q4_K / Q5_K: 8)
};

int sub_block_sum32(const BlockQ8_K& a, int k) { return a.bsums[2 * k] + a.bsums[2 * k + 1]; }

struct Q2_K {
    using Weight = BlockQ2_K;
    using Act = BlockQ8_K;
    static constexpr int kBlock = 256;
    using Unpacked = KUnpacked;
    static void unpack(const Weight& w, Unpacked& u) {
        for (int e = 0; e < 256; ++e) {
            const int q = (w.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            u.sq[e] = static_cast<std::int16_t>((w.scales[e / 16] & 0xF) * q);
        }
        for (int k = 0; k < 16; ++k) u.mins[k] = w.scales[k] >> 4;
    }
    static void accumulate(const Unpacked& u, const Weight& w, const Act& a, Acc& acc) {
        const float d = a.d * fp16_to_fp32(w.d);
        const float dmin = -a.d * fp16_to_fp32(w.dmin);
        for (int i = 0; i < 8; ++i) {
            const int prod = u.mins[2 * i] * a.bsums[2 * i] + u.mins[2 * i + 1] * a.bsums[2 * i + 1];
            acc.lanes[i] = fmaf_(dmin, static_cast<float>(prod), acc.lanes[i]);
        }
        int s[8];
        lane_sums<256>(u.sq, a.qs, s);
        for (int i = 0; i < 8; ++i) acc.lanes[i] = fmaf_(d, static_cast<float>(s[i]), acc.lanes[i]);
    }
    static float finish(const Acc& acc) { return fold8(acc.lanes); }
};

struct Q3_K {
    using Weight = BlockQ3_K;
    using Act = BlockQ8_K;
    static constexpr int kBlock = 256;
    using Unpacked = KUnpacked;
    static void unpack(const Weight& w, Unpacked& u) {
        for (int e = 0; e < 256; ++e) {
            const int low = (w.qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            const int q = low - ((w.hmask[e % 32] >> (e / 32)) & 1 ? 0 : 4);
            u.sq[e] = static_cast<std::int16_t>((q3_k_scale(w.scales, e / 16) - 32) * q);
        }
    }
    static void accumulate(const Unpacked& u, const Weight& w, const Act& a, Acc& acc) {
        const float d = a.d * fp16_to_fp32(w.d);
        int s[8];
        lane_sums<256>(u.sq, a.qs, s);
        for (int i = 0; i < 8; ++i) acc.lanes[i] = fmaf_(d, static_cast<float>(s[i]), acc.lanes[i]);
    }
    static float finish(const Acc& acc) { return fold8(acc.lanes); }
};

// Q4_K and Q5_K: element e is in 32-element sub-block e / 32, the low nibble of
// qs[32 (e / 64) + e % 32] for an even sub-block, the high one for an odd one.
void unpack_k4(const std::uint8_t* scales, const std::uint8_t* qs, const std::uint8_t* qh, KUnpacked& u) {
    int sc[8];
    for (int k = 0; k < 8; ++k) k4_scale_min(scales, k, sc[k], u.mins[k]);
    for (int e = 0; e < 256; ++e) {
        int q = (qs[32 * (e / 64) + e % 32] >> (4 * ((e / 32) % 2))) & 0xF;
        if (qh && ((qh[e % 32] >> (e / 32)) & 1)) q += 16;
        u.sq[e] = static_cast<std::int16_t>(sc[e / 32] * q);
    }
}

struct Q4_K {
    using Weight = BlockQ4_K;
    using Act = BlockQ8_K;
    static constexpr int kBlock = 256;
    using Unpacked = KUnpacked;
    static void unpack(const Weight& w, Unpacked& u) { unpack_k4(w.scales, w.qs, nullptr, u); }
    static void accumulate(const Unpacked& u, const Weight& w, const Act& a, Acc& acc) {
        const float d = a.d * fp16_to_fp32(w.d);
        const float dmin = -a.d * fp16_to_fp32(w.dmin);
        for (int j = 0; j < 4; ++j) {
            const int prod = u.mins[2 * j] * sub_block_sum32(a, 2 * j) + u.mins[2 * j + 1] * sub_block_sum32(a, 2 * j + 1);
            acc.min_lanes[j] = fmaf_(dmin, static_cast<float>(prod), acc.min_lanes[j]);
        }
        int s[8];
        lane_sums<256>(u.sq, a.qs, s);
        for (int i = 0; i < 8; ++i) acc.lanes[i] = fmaf_(d, static_cast<float>(s[i]), acc.lanes[i]);
    }
    static float finish(const Acc& acc) {
        const float* m = acc.min_lanes;
        return fold8(acc.lanes) + ((m[0] + m[2]) + (m[1] + m[3]));
    }
};

struct Q5_K {
    using Weight = BlockQ5_K;
    using Act = BlockQ8_K;
    static constexpr int kBlock = 256;
    using Unpacked = KUnpacked;
    static void unpack(const Weight& w, Unpacked& u) { unpack_k4(w.scales, w.qs, w.qh, u); }
    static void accumulate(const Unpacked& u, const Weight& w, const Act& a, Acc& acc) {
        const float d = a.d * fp16_to_fp32(w.d);
        const float dmin = -a.d * fp16_to_fp32(w.dmin);
        int prod = 0;
        for (int k = 0; k < 8; ++k) prod += u.mins[k] * sub_block_sum32(a, k);
        acc.mins = fmaf_(dmin, static_cast<float>(prod), acc.mins);
        int s[8];
        lane_sums<256>(u.sq, a.qs, s);
        for (int i = 0; i < 8; ++i) acc.lanes[i] = fmaf_(d, static_cast<float>(s[i]), acc.lanes[i]);
    }
    static float finish(const Acc& acc) { return fold8(acc.lanes) + acc.mins; }
};

// Q6_K: the lanes hold scale * q with q the unsigned 6-bit value; the offset -32 is taken
// out of lane i as 32 (sc[2i] bsum[2i] + sc[2i+1] bsum[2i+1]) (the q8sclsub of llama.cpp's
// current AVX2 kernel), so the lanes differ from those of scale * (q - 32) per element.
struct Q6_K {
    using Weight = BlockQ6_K;
    using Act = BlockQ8_K;
    static constexpr int kBlock = 256;
    using Unpacked = KUnpacked;
    static void unpack(const Weight& w, Unpacked& u) {
        for (int e = 0; e < 256; ++e) {
            const int half = e / 128, quarter = (e % 128) / 32, l = e % 32;
            const int low = (w.ql[64 * half + l + 32 * (quarter % 2)] >> (4 * (quarter / 2))) & 0xF;
            const int high = (w.qh[32 * half + l] >> (2 * quarter)) & 3;
            u.sq[e] = static_cast<std::int16_t>(w.scales[e / 16] * (low | (high << 4)));
        }
    }
    static void accumulate(const Unpacked& u, const Weight& w, const Act& a, Acc& acc) {
        const float d = a.d * fp16_to_fp32(w.d);
        int s[8];
        lane_sums<256>(u.sq, a.qs, s);
        for (int i = 0; i < 8; ++i) {
            const int offset = w.scales[2 * i] * a.bsums[2 * i] + w.scales[2 * i + 1] * a.bsums[2 * i + 1];
            acc.lanes[i] = fmaf_(d, static_cast<float>(s[i] - 32 * offset), acc.lanes[i]);
        }
    }
    static float finish(const Acc& acc) { return fold8(acc.lanes); }
};

// Rows [r0, r1) of the product, tokens in groups of kTokens: each weight block is
// unpacked once per group. Every output's operations are those of one vec_dot call, in
// its order, whatever the grouping.
template <typename F>
void quant_matmul_rows(const MatmulTask& task, std::size_t r0, std::size_t r1) {
    constexpr std::size_t kTokens = 16;
    const std::size_t n_blocks = task.cols / F::kBlock;
    for (std::size_t r = r0; r < r1; ++r) {
        const auto* w = reinterpret_cast<const typename F::Weight*>(task.weights + r * task.weight_row_bytes);
        for (std::size_t t0 = 0; t0 < task.n_tokens; t0 += kTokens) {
            const std::size_t nt = task.n_tokens - t0 < kTokens ? task.n_tokens - t0 : kTokens;
            Acc acc[kTokens] = {};
            typename F::Unpacked u;
            for (std::size_t b = 0; b < n_blocks; ++b) {
                F::unpack(w[b], u);
                for (std::size_t t = 0; t < nt; ++t) {
                    const auto* a = reinterpret_cast<const typename F::Act*>(task.acts + (t0 + t) * task.act_row_bytes);
                    F::accumulate(u, w[b], a[b], acc[t]);
                }
            }
            for (std::size_t t = 0; t < nt; ++t) task.out[(t0 + t) * task.out_stride + r] = F::finish(acc[t]);
        }
    }
}

// llama.cpp's nearest_int: round half to even through the 1.5 * 2^23 trick (|x| < 2^22).
int nearest_int(float x) {
    const float shifted = x + 12582912.0f;
    return static_cast<int>(__builtin_bit_cast(std::uint32_t, shifted) & 0x007FFFFFu) - 0x00400000;
}

// cvtps2dq of x * id as the x86 quantize_row_q8_0/_q8_1 use it (round half to even),
// saturated to int8 as packs does; NaN and out-of-range give -128.
int quantize_q8(float v) {
    if (v != v || v >= 2147483648.0f) return -128;
    const float r = __builtin_nearbyintf(v);
    if (r <= -128.0f) return -128;
    if (r >= 127.0f) return 127;
    return static_cast<int>(r);
}

}  // namespace

void quantize_row_q8_1(const float* x, BlockQ8_1* y, std::size_t n) {
    for (std::size_t b = 0; b < n / 32; ++b) {
        const float* xb = x + 32 * b;
        std::uint32_t amax_bits = 0;  // max |x| on the bit patterns (see quantize_row_q8_0)
        for (int j = 0; j < 32; ++j) {
            const std::uint32_t bits = __builtin_bit_cast(std::uint32_t, xb[j]) & 0x7FFFFFFFu;
            if (bits > amax_bits) amax_bits = bits;
        }
        const float amax = __builtin_bit_cast(float, amax_bits);
        const float d = amax / 127.0f;
        y[b].d = fp32_to_fp16(d);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        int sum = 0;
        for (int j = 0; j < 32; ++j) {
            const int q = quantize_q8(xb[j] * id);
            y[b].qs[j] = static_cast<std::int8_t>(q);
            sum += q;
        }
        y[b].s = fp32_to_fp16(d * static_cast<float>(sum));
    }
}

void quantize_row_q8_K(const float* x, BlockQ8_K* y, std::size_t n) {
    for (std::size_t b = 0; b < n / 256; ++b) {
        const float* xb = x + 256 * b;
        float max = 0.0f, amax = 0.0f;  // the first element of largest magnitude, with its sign
        bool has_nan = false;
        for (int j = 0; j < 256; ++j) {
            const float ax = __builtin_fabsf(xb[j]);
            has_nan |= ax != ax;
            if (ax > amax) {
                amax = ax;
                max = xb[j];
            }
        }
        if (has_nan) {
            // llama.cpp's quantize_row_q8_K_ref skips a NaN when it looks for the largest
            // magnitude and then rounds it to an integer (a block of NaNs becomes d = 0 and
            // exact zeros): a NaN would turn into a number. Here the block's scale is NaN,
            // so every product with it is NaN, as on the reference route. Finite blocks are
            // untouched (the same bits as llama.cpp).
            y[b].d = __builtin_nanf("");
            for (int j = 0; j < 256; ++j) y[b].qs[j] = 0;
            for (int k = 0; k < 16; ++k) y[b].bsums[k] = 0;
            continue;
        }
        if (amax == 0.0f) {
            y[b].d = 0.0f;
            for (int j = 0; j < 256; ++j) y[b].qs[j] = 0;
            for (int k = 0; k < 16; ++k) y[b].bsums[k] = 0;
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < 256; ++j) {
            const int v = nearest_int(iscale * xb[j]);
            y[b].qs[j] = static_cast<std::int8_t>(v < 127 ? v : 127);
        }
        for (int k = 0; k < 16; ++k) {
            int sum = 0;
            for (int j = 0; j < 16; ++j) sum += y[b].qs[16 * k + j];
            y[b].bsums[k] = static_cast<std::int16_t>(sum);
        }
        y[b].d = 1.0f / iscale;
    }
}

void q4_0_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { quant_matmul_rows<Q4_0>(t, r0, r1); }
void q4_1_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { quant_matmul_rows<Q4_1>(t, r0, r1); }
void q5_0_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { quant_matmul_rows<Q5_0>(t, r0, r1); }
void q5_1_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { quant_matmul_rows<Q5_1>(t, r0, r1); }
void q2_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { quant_matmul_rows<Q2_K>(t, r0, r1); }
void q3_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { quant_matmul_rows<Q3_K>(t, r0, r1); }
void q4_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { quant_matmul_rows<Q4_K>(t, r0, r1); }
void q5_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { quant_matmul_rows<Q5_K>(t, r0, r1); }
void q6_k_matmul_rows(const MatmulTask& t, std::size_t r0, std::size_t r1) { quant_matmul_rows<Q6_K>(t, r0, r1); }

}  // namespace ember::kernels::fast::scalar
