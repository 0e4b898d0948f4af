// The reference kernels: plain scalar loops that define what the engine computes
// (model-math §2-§3). Weights are converted to F32 element by element exactly as
// llama.cpp dequantizes them; dot products and softmax sums accumulate in double, so
// results are as accurate as F32 inputs allow and independent of the thread count.
// Shapes are in each declaration; see kernels/backend.hpp for the contracts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "kernels/backend.hpp"

namespace ember::kernels::reference {

// One stored row of `n` elements (any format of kernels/weight_format.hpp) converted to F32.
void dequantize_row(gguf::GgmlType type, const std::byte* row, float* out, std::size_t n);

// sum_j dequantized(row)[j] * x[j], accumulated in double.
double dot_row(gguf::GgmlType type, const std::byte* row, const float* x, std::size_t n);

void get_rows(const WeightMatrix& table, std::span<const std::int32_t> ids, Rows out);
void matmul(ConstRows x, const WeightMatrix& w, Rows y);
void rms_norm(ConstRows x, std::span<const float> weight, float eps, Rows y);
void rope(Rows x, std::size_t first_position, const RopeParams& params);

// x [T, dst.cols] into T cached rows of dst's type (F16: rounded to nearest even).
void store_kv(ConstRows x, KvRows dst);

// scores: at least n_head * keys.rows floats; sums: at least n_head * head_dim doubles.
// Cached F16 values are used as they are stored (exactly, widened to F32).
// pattern: empty, or [n_head * T, keys.rows] for the probabilities (Backend::attention).
void attention(ConstRows q, ConstKvRows keys, ConstKvRows values, std::size_t first_position,
               const AttentionParams& params, std::span<float> scores, std::span<double> sums, Rows out,
               Rows pattern = {});

// llama.cpp's tanh-approximation GELU through its F16 table (model-math §3.5).
float gelu_f16_table(float x);
// The table itself: 65536 F16 results (widened to F32) indexed by the F16 bits of the
// input; built on first use, immutable, valid for the whole process.
const float* gelu_f16_table_values();

void swiglu(ConstRows gate, ConstRows up, Rows out);
void geglu(ConstRows gate, ConstRows up, Rows out);
void gelu(ConstRows x, Rows out);
void add(ConstRows a, ConstRows b, Rows out);
void mul(ConstRows a, ConstRows b, Rows out);
void scale(ConstRows x, float factor, Rows out);
void softcap(ConstRows x, float cap, Rows out);
void copy(ConstRows x, Rows out);

}  // namespace ember::kernels::reference
