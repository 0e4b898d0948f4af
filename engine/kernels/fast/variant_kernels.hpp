// Internal: the kernels each variant translation unit defines. kernel_set.cpp takes
// their addresses; nothing else calls them directly. Each namespace's functions are
// compiled with exactly the instruction-set flags that namespace needs (CMakeLists.txt)
// and must only run on a CPU that has them.
//
// Rule for the variant translation units: intrinsics, compiler builtins and plain code
// only — no standard-library templates or inline functions with external linkage, which
// the linker could merge with copies built for a different instruction set.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/fast/kernel_types.hpp"

namespace ember::kernels::fast {

namespace scalar {  // baseline flags
void quantize_row_q8_0(const float* x, BlockQ8_0* y, std::size_t n);
void round_row_f16(const float* x, std::uint16_t* y, std::size_t n);
void round_row_bf16(const float* x, std::uint16_t* y, std::size_t n);
void q8_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void f16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void bf16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void f32_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void swiglu_row(const float* gate, const float* up, float* out, std::size_t n);
void geglu_row(const float* gate, const float* up, float* out, std::size_t n, const float* table);
void softmax_row(float* scores, std::size_t n, float scale);

void weighted_sum_f32(const WeightedSumTask& task);
void weighted_sum_f16(const WeightedSumTask& task);

// scalar_quants.cpp: the legacy and K-quant products (used by every variant) and the
// Q8_1 / Q8_K activation quantizers
void quantize_row_q8_1(const float* x, BlockQ8_1* y, std::size_t n);
void quantize_row_q8_K(const float* x, BlockQ8_K* y, std::size_t n);
void q4_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q4_1_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q5_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q5_1_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q2_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q3_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q4_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q5_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q6_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
}  // namespace scalar

namespace avx2 {  // -mavx2 -mfma -mf16c
void quantize_row_q8_0(const float* x, BlockQ8_0* y, std::size_t n);
void quantize_row_q8_1(const float* x, BlockQ8_1* y, std::size_t n);
void quantize_row_q8_K(const float* x, BlockQ8_K* y, std::size_t n);
void pack_token_pairs(const std::byte* acts, std::size_t row_bytes, std::size_t n_tokens, std::size_t n, TokenPairs* pairs,
                      float* scales);
void round_row_f16(const float* x, std::uint16_t* y, std::size_t n);
void round_row_bf16(const float* x, std::uint16_t* y, std::size_t n);
void q8_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void f16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void bf16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void f32_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void swiglu_row(const float* gate, const float* up, float* out, std::size_t n);
void geglu_row(const float* gate, const float* up, float* out, std::size_t n, const float* table);
void softmax_row(float* scores, std::size_t n, float scale);

void weighted_sum_f32(const WeightedSumTask& task);
void weighted_sum_f16(const WeightedSumTask& task);

// avx2_quants.cpp (Q4_0, Q4_K, Q6_K, Q5_0) and avx2_quants_low.cpp (Q4_1, Q5_1, Q2_K,
// Q3_K, Q5_K): the same bits as the scalar products of these formats
void q4_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q4_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q6_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q4_1_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q5_1_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q2_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q3_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q5_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q5_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
// avx2_q8_0_prompt.cpp: the prompt (2+ tokens) products of Q8_0, Q4_0 and Q5_0 on int16
// operands widened once per slab; false (nothing computed) for rows too wide for them
bool q8_0_prompt_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
bool q4_0_prompt_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
bool q5_0_prompt_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
// avx2_kquant_prompt.cpp: the prompt products of Q4_K and Q6_K on rows unpacked once per
// slab; false (nothing computed) for rows too wide for a slab
bool q4_k_prompt_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
bool q6_k_prompt_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
}  // namespace avx2

namespace avx512 {  // avx2 flags + -mavx512f -mavx512bw -mavx512vl -mavx512dq
void quantize_row_q8_0(const float* x, BlockQ8_0* y, std::size_t n);
void round_row_f16(const float* x, std::uint16_t* y, std::size_t n);
void round_row_bf16(const float* x, std::uint16_t* y, std::size_t n);
void f16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void bf16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void f32_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void swiglu_row(const float* gate, const float* up, float* out, std::size_t n);
void geglu_row(const float* gate, const float* up, float* out, std::size_t n, const float* table);
void softmax_row(float* scores, std::size_t n, float scale);

void weighted_sum_f32(const WeightedSumTask& task);
void weighted_sum_f16(const WeightedSumTask& task);
}  // namespace avx512

namespace avx512_vnni {  // avx512 flags + -mavx512vnni
void pack_token_lanes(const std::byte* acts, std::size_t row_bytes, std::size_t n, TokenLanes* out);
void q8_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q4_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q5_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
// avx512_vnni_kquants.cpp: the same bits as the scalar products of these formats
void q4_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q6_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q2_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q3_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q5_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
}  // namespace avx512_vnni

namespace avxvnni {  // avx2 flags + -mavxvnni
// avxvnni_q8_0_prompt.cpp: prompts by vpdpbusd, decode by the avx2 kernels; avx2's bits
void q8_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q4_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q5_0_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
// avxvnni_kquant_prompt.cpp: prompts by vpdpwssd, decode by the avx2 kernels; avx2's bits
void q4_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
void q6_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
}  // namespace avxvnni

namespace avx512_bf16 {  // avx512 flags + -mavx512bf16
void bf16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end);
}  // namespace avx512_bf16

}  // namespace ember::kernels::fast
