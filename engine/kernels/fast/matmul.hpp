// Matrix products on packed weights straight from the mmap, parallel over output rows.
//
// Like llama.cpp on x86 (model-math §2.9), activations are first converted to the type
// the weight's dot product reads (the weight-format table's ActivationType), once per
// product (or once for several products that share an input, e.g. Q/K/V):
//   Q8_0, Q4_0, Q5_0 weights -> activations quantized to Q8_0 blocks (x86 runtime rule)
//   Q4_1, Q5_1 weights       -> Q8_1 blocks (the same rule, plus s = d * sum)
//   Q2_K ... Q6_K weights    -> Q8_K super-blocks (quantize_row_q8_K_ref)
//   F16 weights  -> activations rounded to F16 (round to nearest even)
//   BF16 weights -> activations rounded to BF16 (model-math §2.1)
//   F32 weights  -> activations used as they are (no copy)
// The converted rows live in a caller-provided workspace, so a product allocates
// nothing. Results do not depend on the thread count; they depend on n_tokens only
// through the summation order, as in llama.cpp (sum_order below, docs/fast-path.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "gguf/ggml_type.hpp"
#include "kernels/fast/kernel_set.hpp"
#include "kernels/fast/kernel_types.hpp"
#include "kernels/fast/thread_pool.hpp"
#include "kernels/weight.hpp"

namespace ember::kernels::fast {

// The summation order llama.cpp uses for a product of `n_tokens` activation rows with
// a [rows, cols] weight of `weight_type` (ggml_compute_forward_mul_mat: llamafile's
// tinyBLAS for 2+ tokens when cols is a multiple of 16 (BF16: 32) and rows of 4, else
// ggml_vec_dot per output). Q8_0 products have one order whatever this says.
SumOrder sum_order(gguf::GgmlType weight_type, std::size_t n_tokens, std::size_t rows, std::size_t cols);

// Whether the fast route has a product for weights of this type (a row of the table).
bool has_matmul(gguf::GgmlType weight_type);

// Bytes of one token's converted activations (rounded up to 64), and of the workspace
// that convert_activations needs for n_tokens of them (0 for F32 weights; for weights
// whose product takes Q8_0 activations, with room for their tokens packed in lanes and
// widened to pairs).
std::size_t activation_row_bytes(gguf::GgmlType weight_type, std::size_t cols);
std::size_t activation_workspace_bytes(gguf::GgmlType weight_type, std::size_t cols, std::size_t n_tokens);
// The largest of those over every format of the table, for products of up to `cols`.
std::size_t widest_activation_workspace_bytes(std::size_t cols, std::size_t n_tokens);

// Activations [n_tokens, cols] in the form a weight type's product reads.
struct ConvertedActivations {
    gguf::GgmlType weight_type = gguf::GgmlType::F32;
    const std::byte* data = nullptr;  // token t at data + t * row_bytes
    std::size_t row_bytes = 0;
    std::size_t n_tokens = 0;
    std::size_t cols = 0;
    // Q8_0 activations, when the kernel set packs them (KernelSet::pack_token_lanes): whole
    // chunks of sixteen tokens with the token in the lane, after the rows.
    const TokenLanes* token_lanes = nullptr;
    // Q8_0 activations of 2+ tokens, when the kernel set widens them
    // (KernelSet::pack_token_pairs): after the lanes.
    const TokenPairs* token_pairs = nullptr;
    const float* token_pair_scales = nullptr;
};

// Converts x [n_tokens, cols] (row-major F32) for products with `weight_type` weights.
// The result points into `workspace` (or at x itself for F32) and is valid while they
// are. ember::Error for a type without a row in the table, cols not a whole number of
// the format's (and its activation type's) blocks, or a workspace smaller than
// activation_workspace_bytes.
ConvertedActivations convert_activations(const KernelSet& kernels, ThreadPool& pool, gguf::GgmlType weight_type,
                                         const float* x, std::size_t n_tokens, std::size_t cols,
                                         std::span<std::byte> workspace);

// y [x.n_tokens, w.rows]: y[t * y_stride + r] = dot(row r of w, token t of x) in
// sum_order(w.type, x.n_tokens, w.rows, w.cols), with y_stride = w.rows when 0. ember::Error if x was converted for another type or has
// another column count.
void matmul(const KernelSet& kernels, ThreadPool& pool, const WeightMatrix& w, const ConvertedActivations& x, float* y,
            std::size_t y_stride = 0);

// Both steps at once: y [n_tokens, w.rows] = x [n_tokens, w.cols] times w transposed.
void matmul(const KernelSet& kernels, ThreadPool& pool, const WeightMatrix& w, const float* x, std::size_t n_tokens,
            float* y, std::span<std::byte> workspace);

// Single dot products of already converted rows (the 1 x 1 case of the products above,
// bit-identical to them: the vec_dot order).
float q8_0_dot(const KernelSet& kernels, const BlockQ8_0* w, const BlockQ8_0* a, std::size_t n_blocks);
float f16_dot(const KernelSet& kernels, const std::uint16_t* w, const std::uint16_t* a, std::size_t n);
float bf16_dot(const KernelSet& kernels, const std::uint16_t* w, const std::uint16_t* a, std::size_t n);
float f32_dot(const KernelSet& kernels, const float* w, const float* a, std::size_t n);

}  // namespace ember::kernels::fast
