// The data the fast kernels exchange: the Q8_0 block as stored in GGUF files and as
// activations are quantized at run time, and the description of one matrix product.
// Plain structs only: this header is included by translation units compiled for
// different instruction sets, so it must not define any non-inline-safe code.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::kernels::fast {

inline constexpr std::size_t kQ8_0BlockSize = 32;

// block_q8_0 (model-math §2.2): an fp16 scale, then 32 signed bytes; value = qs[j] * d.
struct BlockQ8_0 {
    std::uint16_t d;      // IEEE half bits
    std::int8_t qs[32];
};
static_assert(sizeof(BlockQ8_0) == 34 && alignof(BlockQ8_0) == 2, "block_q8_0 is 34 bytes, packed");

// One matrix product out = W * A for a range of weight rows, all tokens:
//   out[t * out_stride + r] = dot(W row r, activation row t)
// Weights are in their stored type; activations are already converted to the type the
// weight's dot product reads (Q8_0 blocks for Q8_0, F16 bits for F16, BF16 bits for
// BF16, F32 for F32; see matmul.hpp). Q8_0 activation values lie in [-127, 127], as
// quantize_row_q8_0 produces them for finite input (the AVX2 kernel, like llama.cpp's,
// relies on it; weights may hold any byte).
struct MatmulTask {
    const std::byte* weights = nullptr;  // row r starts at weights + r * weight_row_bytes
    std::size_t weight_row_bytes = 0;
    std::size_t cols = 0;                // elements per row (a multiple of 32 for Q8_0)
    const std::byte* acts = nullptr;     // token t starts at acts + t * act_row_bytes
    std::size_t act_row_bytes = 0;
    std::size_t n_tokens = 0;
    float* out = nullptr;
    std::size_t out_stride = 0;          // floats between consecutive tokens of `out`
};

// Computes task rows [row_begin, row_end) for every token. Each output is computed
// entirely inside one call with a fixed reduction order, so results never depend on how
// rows are split between calls or threads, nor on n_tokens.
using MatmulRowsFn = void (*)(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);

// out[h * out_stride + d] = sum over j < n of p[h * p_stride + j] * v_j[d], for heads
// h < n_heads and d < head_dim; v_j starts at v + j * v_row_bytes (F32 or F16 values).
// The weighted sum of values in attention, for query heads that share one KV head.
struct WeightedSumTask {
    const float* p = nullptr;
    std::size_t p_stride = 0;
    std::size_t n_heads = 0;
    std::size_t n = 0;
    const std::byte* v = nullptr;
    std::size_t v_row_bytes = 0;
    std::size_t head_dim = 0;
    float* out = nullptr;
    std::size_t out_stride = 0;
};

using WeightedSumFn = void (*)(const WeightedSumTask& task);

}  // namespace ember::kernels::fast
