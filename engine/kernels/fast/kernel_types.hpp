// The data the fast kernels exchange: the quantized blocks (kernels/quant_blocks.hpp, as
// stored in GGUF files and as activations are quantized at run time), and the
// description of one matrix product.
// Plain structs only: this header is included by translation units compiled for
// different instruction sets, so it must not define any non-inline-safe code.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/quant_blocks.hpp"

namespace ember::kernels::fast {

inline constexpr std::size_t kQ8_0BlockSize = kQK;
using kernels::BlockQ8_0;
using kernels::BlockQ8_1;
using kernels::BlockQ8_K;

// The order in which an F32, F16 or BF16 product sums its terms: llama.cpp's two
// (docs/fast-path.md "Summation orders"; Q8_0 products have a single order).
//   vec_dot  ggml_vec_dot_f32/f16/bf16: 64-element blocks into four 16-lane accumulators
//            (BF16: two, of 32-element pairs), combined and reduced, the tail element by
//            element (F32 in float, F16/BF16 in double). Decode, and prefill shapes
//            tinyBLAS refuses.
//   tiled    llamafile's tinyBLAS: one 16-lane accumulator per output (BF16: vdpbf16ps
//            over 32-element chunks), reduced once. Prefill of 2+ tokens when the
//            columns are a multiple of 16 (BF16: 32) and the rows of 4.
enum class SumOrder : std::uint8_t { vec_dot, tiled };

// Q8_0 activations of sixteen tokens for one block, with the token in the lane, as the
// AVX-512 VNNI Q8_0 product reads them (KernelSet::pack_token_lanes):
// q[i][4j .. 4j+3] = token j's values 4i .. 4i+3, each + 128 as an unsigned byte;
// d[j] = token j's scale.
inline constexpr std::size_t kLaneTokens = 16;
struct alignas(64) TokenLanes {
    std::uint8_t q[8][64];
    float d[kLaneTokens];
};

// Q8_0 activations widened to int16 once per product for the AVX2 prompt products
// (KernelSet::pack_token_pairs): one token's block of 32 values in the order those
// products read them (avx2_q8_0_prompt.cpp), 64-byte aligned.
struct alignas(64) TokenPairs {
    std::int16_t q[32];
};

// One matrix product out = W * A for a range of weight rows, all tokens:
//   out[t * out_stride + r] = dot(W row r, activation row t)
// Weights are in their stored type; activations are already converted to the type the
// weight's dot product reads (kernels/weight_format.hpp: Q8_0 blocks for Q8_0, Q4_0 and
// Q5_0, Q8_1 for Q4_1 and Q5_1, Q8_K for the K-quants, F16 bits for F16, BF16 bits for
// BF16, F32 for F32; see matmul.hpp). Q8_0 activation values lie in [-127, 127], as
// quantize_row_q8_0 produces them for finite input (the AVX2 kernel, like llama.cpp's,
// relies on it; weights may hold any byte).
struct MatmulTask {
    const std::byte* weights = nullptr;  // row r starts at weights + r * weight_row_bytes
    std::size_t weight_row_bytes = 0;
    std::size_t cols = 0;                // elements per row (a whole number of the format's blocks)
    const std::byte* acts = nullptr;     // token t starts at acts + t * act_row_bytes
    std::size_t act_row_bytes = 0;
    std::size_t n_tokens = 0;
    float* out = nullptr;
    std::size_t out_stride = 0;          // floats between consecutive tokens of `out`
    SumOrder order = SumOrder::vec_dot;  // F32 / F16 / BF16 only
    // Q8_0 activations only, optional: their whole chunks of sixteen tokens packed once per
    // product, chunk c's block b at token_lanes[c * (cols / 32) + b]. Without it a kernel
    // that reads them packs its own.
    const TokenLanes* token_lanes = nullptr;
    // Q8_0 activations only, optional: every token widened once per product, token t block
    // b at token_pairs[t * (cols / 32) + b], its scale as F32 at token_pair_scales[..].
    // Without them a kernel that reads them widens its own.
    const TokenPairs* token_pairs = nullptr;
    const float* token_pair_scales = nullptr;
};

// Computes task rows [row_begin, row_end) for every token. Each output is computed
// entirely inside one call in the task's order, so results never depend on how rows are
// split between calls or threads, nor on n_tokens.
using MatmulRowsFn = void (*)(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);

// out[h * out_stride + d] = sum over j < n of p[h * p_stride + j] * v_j[d], for heads
// h < n_heads and d < head_dim; v_j starts at v + j * v_row_bytes (F32 or F16 values).
// The weighted sum of values in attention, for query heads that share one KV head, summed
// as llama.cpp's product of the transposed values and the probabilities: over positions,
// position first_position + j in lane (first_position + j) mod 16 (tiled) or in
// accumulator and lane (first_position + j) mod 64 (vec_dot; positions llama.cpp pads
// with zero probabilities add nothing). With round_p_to_f16 each p is rounded to F16
// first (llama.cpp converts P for an F16 cache).
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
    std::size_t first_position = 0;
    SumOrder order = SumOrder::vec_dot;
    bool round_p_to_f16 = false;
};

using WeightedSumFn = void (*)(const WeightedSumTask& task);

}  // namespace ember::kernels::fast
