// The portable variant: plain C++ for any CPU, compiled with baseline flags. It follows
// the same numerics as the SIMD variants (kernel_set.hpp): the Q8_0 recipe of
// model-math §2.9 with a correctly rounded fmaf per lane, and for the float types
// llama.cpp's two summation orders lane by lane (float_sums.hpp).
#include "kernels/fast/float_sums.hpp"
#include "kernels/float16.hpp"
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

float identity(float x) { return x; }

// ---- llama.cpp's summation orders (kernel_types.hpp SumOrder, float_sums.hpp) ----

// ggml_vec_dot_f32 / ggml_vec_dot_f16: four 16-lane accumulators over 64-element blocks.
template <typename Element, typename Load>
float four_accumulators(const Element* w, const Element* a, std::size_t n_blocks, Load load) {
    float acc[4][16] = {};
    for (std::size_t b = 0; b < n_blocks; ++b) {
        for (int q = 0; q < 4; ++q) {
            for (int l = 0; l < 16; ++l) {
                const std::size_t i = 64 * b + 16 * q + l;
                acc[q][l] = __builtin_fmaf(load(w[i]), load(a[i]), acc[q][l]);
            }
        }
    }
    return combine_four(acc);
}

float f32_vec_dot(const float* w, const float* a, std::size_t n) {
    const std::size_t blocked = n - n % 64;
    return f32_dot_tail(four_accumulators(w, a, blocked / 64, identity), w + blocked, a + blocked, n - blocked);
}

float f16_vec_dot(const std::uint16_t* w, const std::uint16_t* a, std::size_t n) {
    const std::size_t blocked = n - n % 64;
    const double sum = four_accumulators(w, a, blocked / 64, fp16_to_fp32);
    return static_cast<float>(half_dot_tail(sum, w + blocked, a + blocked, n - blocked, fp16_to_fp32));
}

// ggml_vec_dot_bf16 (AVX512_BF16): per 64-element block, the first 32 into one
// accumulator and the next 32 into another, by pairs (vdpbf16ps).
float bf16_vec_dot(const std::uint16_t* w, const std::uint16_t* a, std::size_t n) {
    float acc[2][16] = {};
    const std::size_t blocked = n - n % 64;
    for (std::size_t i = 0; i < blocked; i += 32) {
        float* lanes = acc[(i / 32) % 2];
        for (int l = 0; l < 16; ++l) lanes[l] = dpbf16_lane(lanes[l], w + i + 2 * l, a + i + 2 * l);
    }
    double sum = 0.0 + static_cast<double>(reduce16(acc[0]));
    sum += static_cast<double>(reduce16(acc[1]));
    return static_cast<float>(half_dot_tail(sum, w + blocked, a + blocked, n - blocked, bf16_value));
}

// tinyBLAS F32 / F16: one 16-lane accumulator, element k in lane k % 16.
template <typename Element, typename Load>
float tiled_dot(const Element* w, const Element* a, std::size_t n, Load load) {
    float lanes[16] = {};
    for (std::size_t i = 0; i < n; ++i) lanes[i % 16] = __builtin_fmaf(load(w[i]), load(a[i]), lanes[i % 16]);
    return reduce16(lanes);
}
float f16_tiled_dot(const std::uint16_t* w, const std::uint16_t* a, std::size_t n) { return tiled_dot(w, a, n, fp16_to_fp32); }
float f32_tiled_dot(const float* w, const float* a, std::size_t n) { return tiled_dot(w, a, n, identity); }

// tinyBLAS BF16 (AVX512_BF16): one accumulator of pairs over 32-element chunks.
float bf16_tiled_dot(const std::uint16_t* w, const std::uint16_t* a, std::size_t n) {
    float lanes[16] = {};
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        for (int l = 0; l < 16; ++l) lanes[l] = dpbf16_lane(lanes[l], w + i + 2 * l, a + i + 2 * l);
    }
    if (i < n) {  // a partial chunk, zero-padded
        std::uint16_t wp[32] = {}, ap[32] = {};
        for (std::size_t j = 0; i + j < n; ++j) wp[j] = w[i + j], ap[j] = a[i + j];
        for (int l = 0; l < 16; ++l) lanes[l] = dpbf16_lane(lanes[l], wp + 2 * l, ap + 2 * l);
    }
    return reduce16(lanes);
}

template <typename Element, typename Dot>
void float_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end, Dot dot) {
    for (std::size_t r = row_begin; r < row_end; ++r) {
        const auto* w = reinterpret_cast<const Element*>(task.weights + r * task.weight_row_bytes);
        for (std::size_t t = 0; t < task.n_tokens; ++t) {
            const auto* a = reinterpret_cast<const Element*>(task.acts + t * task.act_row_bytes);
            task.out[t * task.out_stride + r] = dot(w, a, task.cols);
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
    if (task.order == SumOrder::tiled) float_matmul_rows<std::uint16_t>(task, row_begin, row_end, f16_tiled_dot);
    else float_matmul_rows<std::uint16_t>(task, row_begin, row_end, f16_vec_dot);
}

void bf16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.order == SumOrder::tiled) float_matmul_rows<std::uint16_t>(task, row_begin, row_end, bf16_tiled_dot);
    else float_matmul_rows<std::uint16_t>(task, row_begin, row_end, bf16_vec_dot);
}

void f32_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.order == SumOrder::tiled) float_matmul_rows<float>(task, row_begin, row_end, f32_tiled_dot);
    else float_matmul_rows<float>(task, row_begin, row_end, f32_vec_dot);
}

}  // namespace ember::kernels::fast::scalar
