// llama-quantize's file rules for one row (no importance matrix), operation for
// operation as ggml-quants.c's quantize_row_*_ref, so the same F32 input gives the same
// bytes: Q8_0 (model-math §2.2 file rule), Q4_0 (§2.3), Q4_K (make_qkx2_quants per
// 32-element sub-block, 6-bit scales and mins) and Q6_K (make_qx_quants per 16-element
// sub-block, int8 scales), and the five below; F16 and BF16 round each value
// (float16.hpp). n is a multiple of the block size (32, or 256 for the K-quants).
// The weight-format table (weight_format.hpp) holds each as its row's quantize_row.
#pragma once

#include <cstddef>

#include "kernels/quant_blocks.hpp"

namespace ember::kernels {

void quantize_row_q8_0_file_rule(const float* x, BlockQ8_0* y, std::size_t n);
void quantize_row_q4_0_file_rule(const float* x, BlockQ4_0* y, std::size_t n);
void quantize_row_q4_K_file_rule(const float* x, BlockQ4_K* y, std::size_t n);
void quantize_row_q6_K_file_rule(const float* x, BlockQ6_K* y, std::size_t n);
// Q4_1, Q5_1 (quantize_row_q4_1_ref, _q5_1_ref: min and max of each block); Q2_K, Q3_K,
// Q5_K (quantize_row_q2_K_ref with make_qkx2_quants and |error|, _q3_K_ref with
// make_q3_quants, _q5_K_ref as Q4_K with 31 levels): quantize_row_k.cpp.
void quantize_row_q4_1_file_rule(const float* x, BlockQ4_1* y, std::size_t n);
void quantize_row_q5_1_file_rule(const float* x, BlockQ5_1* y, std::size_t n);
void quantize_row_q2_K_file_rule(const float* x, BlockQ2_K* y, std::size_t n);
void quantize_row_q3_K_file_rule(const float* x, BlockQ3_K* y, std::size_t n);
void quantize_row_q5_K_file_rule(const float* x, BlockQ5_K* y, std::size_t n);

// n values rounded one by one to F16 or BF16, 2 bytes each.
void quantize_row_f16(const float* x, std::byte* y, std::size_t n);
void quantize_row_bf16(const float* x, std::byte* y, std::size_t n);

}  // namespace ember::kernels
