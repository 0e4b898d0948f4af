// Stored rows to F32, one function per weight format, each computing exactly what
// llama.cpp's dequantize_row_* (ggml-quants.c) computes, operation for operation
// (model-math §2): the reference route's weights and every embedding lookup. n is a
// multiple of the format's block size. weight_format.hpp lists them by type.
#pragma once

#include <cstddef>

namespace ember::kernels {

void dequantize_row_f32(const std::byte* row, float* out, std::size_t n);
void dequantize_row_f16(const std::byte* row, float* out, std::size_t n);
void dequantize_row_bf16(const std::byte* row, float* out, std::size_t n);
void dequantize_row_q8_0(const std::byte* row, float* out, std::size_t n);
void dequantize_row_q4_0(const std::byte* row, float* out, std::size_t n);
void dequantize_row_q4_1(const std::byte* row, float* out, std::size_t n);
void dequantize_row_q5_0(const std::byte* row, float* out, std::size_t n);
void dequantize_row_q5_1(const std::byte* row, float* out, std::size_t n);
void dequantize_row_q2_K(const std::byte* row, float* out, std::size_t n);
void dequantize_row_q3_K(const std::byte* row, float* out, std::size_t n);
void dequantize_row_q4_K(const std::byte* row, float* out, std::size_t n);
void dequantize_row_q5_K(const std::byte* row, float* out, std::size_t n);
void dequantize_row_q6_K(const std::byte* row, float* out, std::size_t n);

}  // namespace ember::kernels
