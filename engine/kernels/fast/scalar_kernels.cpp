// The portable variant: plain C++ for any CPU, compiled with baseline flags. It follows
// the same numerics as the SIMD variants (kernel_set.hpp): the Q8_0 recipe of
// model-math §2.9 with a correctly rounded fmaf per lane, and for the float types eight
// accumulation lanes (element k goes to lane k % 8, multiply then add) folded by the
// same tree as the AVX2 variant.
#include "kernels/fast/half_precision.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::scalar {

namespace {

// ((l0+l4) + (l2+l6)) + ((l1+l5) + (l3+l7)): the final fold of every eight-lane sum.
float fold_lanes(const float* l) { return ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7])); }

// x * id as cvtps2dq would turn it into an int32 (round half to even; NaN and values
// outside the int32 range become INT32_MIN), then saturated to int8 as packs does.
std::int8_t quantize_value(float v) {
    if (v != v || v >= 2147483648.0f) return -128;
    const float r = __builtin_nearbyintf(v);
    if (r <= -128.0f) return -128;
    if (r >= 127.0f) return 127;
    return static_cast<std::int8_t>(r);
}

float q8_0_dot(const BlockQ8_0* w, const BlockQ8_0* a, std::size_t n_blocks) {
    float lanes[8] = {};
    for (std::size_t b = 0; b < n_blocks; ++b) {
        const float dd = fp16_to_fp32(w[b].d) * fp16_to_fp32(a[b].d);
        for (int i = 0; i < 8; ++i) {
            int s = 0;
            for (int k = 0; k < 4; ++k) s += w[b].qs[4 * i + k] * a[b].qs[4 * i + k];
            lanes[i] = __builtin_fmaf(dd, static_cast<float>(s), lanes[i]);
        }
    }
    return fold_lanes(lanes);
}

// The eight-lane float dot over `n` elements, each converted by `load`.
template <typename Weight, typename Act, typename LoadW, typename LoadA>
float lane_dot(const Weight* w, const Act* a, std::size_t n, LoadW load_w, LoadA load_a) {
    float lanes[8] = {};
    std::size_t k = 0;
    for (; k + 8 <= n; k += 8) {
        for (int l = 0; l < 8; ++l) lanes[l] = lanes[l] + load_w(w[k + l]) * load_a(a[k + l]);
    }
    for (int l = 0; k + l < n; ++l) lanes[l] = lanes[l] + load_w(w[k + l]) * load_a(a[k + l]);
    return fold_lanes(lanes);
}

float identity(float x) { return x; }

template <typename Element, typename Load>
void float_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end, Load load) {
    for (std::size_t r = row_begin; r < row_end; ++r) {
        const auto* w = reinterpret_cast<const Element*>(task.weights + r * task.weight_row_bytes);
        for (std::size_t t = 0; t < task.n_tokens; ++t) {
            const auto* a = reinterpret_cast<const Element*>(task.acts + t * task.act_row_bytes);
            task.out[t * task.out_stride + r] = lane_dot(w, a, task.cols, load, load);
        }
    }
}

}  // namespace

void quantize_row_q8_0(const float* x, BlockQ8_0* y, std::size_t n) {
    for (std::size_t b = 0; b < n / kQ8_0BlockSize; ++b) {
        const float* xb = x + b * kQ8_0BlockSize;
        // max |x| on the bit patterns: equal to the float maximum for finite values, and
        // a NaN anywhere wins (the same in every variant, whatever the lane order)
        std::uint32_t amax_bits = 0;
        for (std::size_t j = 0; j < kQ8_0BlockSize; ++j) {
            const std::uint32_t bits = __builtin_bit_cast(std::uint32_t, xb[j]) & 0x7FFFFFFFu;
            if (bits > amax_bits) amax_bits = bits;
        }
        const float amax = __builtin_bit_cast(float, amax_bits);
        y[b].d = fp32_to_fp16(amax / 127.0f);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (std::size_t j = 0; j < kQ8_0BlockSize; ++j) y[b].qs[j] = quantize_value(xb[j] * id);
    }
}

void round_row_f16(const float* x, std::uint16_t* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = fp32_to_fp16(x[i]);
}

void round_row_bf16(const float* x, std::uint16_t* y, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) y[i] = fp32_to_bf16(x[i]);
}

void q8_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
    for (std::size_t r = row_begin; r < row_end; ++r) {
        const auto* w = reinterpret_cast<const BlockQ8_0*>(task.weights + r * task.weight_row_bytes);
        for (std::size_t t = 0; t < task.n_tokens; ++t) {
            const auto* a = reinterpret_cast<const BlockQ8_0*>(task.acts + t * task.act_row_bytes);
            task.out[t * task.out_stride + r] = q8_0_dot(w, a, n_blocks);
        }
    }
}

void f16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    float_matmul_rows<std::uint16_t>(task, row_begin, row_end, fp16_to_fp32);
}

void bf16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    float_matmul_rows<std::uint16_t>(task, row_begin, row_end, bf16_to_fp32);
}

void f32_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    float_matmul_rows<float>(task, row_begin, row_end, identity);
}

}  // namespace ember::kernels::fast::scalar
