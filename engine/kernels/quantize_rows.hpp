// llama-quantize's file rules for one row (no importance matrix), operation for
// operation as ggml-quants.c's quantize_row_*_ref, so the same F32 input gives the same
// bytes: Q8_0 (model-math §2.2 file rule), Q4_0 (§2.3), Q4_K (make_qkx2_quants per
// 32-element sub-block, 6-bit scales and mins) and Q6_K (make_qx_quants per 16-element
// sub-block, int8 scales). n is a multiple of the block size (32, or 256 for the K-quants).
// F16 and BF16 rows are rounded value by value (kernels/float16.hpp).
//
// Each writer is a row of the weight-format table (weight_format.hpp's quantize_row):
// quantize_rows and can_write_type read the table, never a list of their own.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "gguf/ggml_type.hpp"
#include "kernels/quant_blocks.hpp"

namespace ember::kernels {

void quantize_row_q8_0_file_rule(const float* x, BlockQ8_0* y, std::size_t n);
void quantize_row_q4_0_file_rule(const float* x, BlockQ4_0* y, std::size_t n);
void quantize_row_q4_K_file_rule(const float* x, BlockQ4_K* y, std::size_t n);
void quantize_row_q6_K_file_rule(const float* x, BlockQ6_K* y, std::size_t n);

// The table's writers: n F32 values (a multiple of the block size) into a stored row.
void quantize_row_f16(const float* x, std::byte* out, std::size_t n);
void quantize_row_bf16(const float* x, std::byte* out, std::size_t n);
void quantize_row_q8_0(const float* x, std::byte* out, std::size_t n);
void quantize_row_q4_0(const float* x, std::byte* out, std::size_t n);
void quantize_row_q4_K(const float* x, std::byte* out, std::size_t n);
void quantize_row_q6_K(const float* x, std::byte* out, std::size_t n);

// Whether the weight-format table has a writer for `type`.
bool can_write_type(gguf::GgmlType type);

// A [rows, row_length] tensor of F32 values in `type`, with the table's writer;
// ember::Error for a type without one.
std::vector<std::byte> quantize_rows(gguf::GgmlType type, std::span<const float> values, std::size_t row_length);

}  // namespace ember::kernels
