// Row-wise operations of the fast route, parallel over rows. Each takes [rows, cols]
// F32 matrices given by a pointer and a row stride (in floats); outputs may alias inputs.
#pragma once

#include <cstddef>

#include "kernels/fast/kernel_set.hpp"
#include "kernels/fast/thread_pool.hpp"
#include "kernels/kv_rows.hpp"

namespace ember::kernels::fast {

// y = x / sqrt(mean(x^2) + eps) * weight (weight == nullptr: no weight), llama.cpp's
// recipe bit for bit (model-math §3.1): the sum of float squares in double, in order.
void rms_norm(ThreadPool& pool, const float* x, std::size_t x_stride, const float* weight, float eps, float* y,
              std::size_t y_stride, std::size_t rows, std::size_t cols);

// out = silu(gate) * up with the kernel set's swiglu_row (bit-identical to llama.cpp's
// AVX-512 build on every variant).
void swiglu(const KernelSet& kernels, ThreadPool& pool, const float* gate, std::size_t gate_stride, const float* up,
            std::size_t up_stride, float* out, std::size_t out_stride, std::size_t rows, std::size_t cols);

// out = gelu(gate) * up with the kernel set's geglu_row and llama.cpp's F16 GELU table
// (bit-identical to the reference kernels and to llama.cpp).
void geglu(const KernelSet& kernels, ThreadPool& pool, const float* gate, std::size_t gate_stride, const float* up,
           std::size_t up_stride, float* out, std::size_t out_stride, std::size_t rows, std::size_t cols);

// x [rows, cols] into `rows` cached rows of `type` starting at dst, dst_row_bytes apart
// (F16: rounded to nearest even with the kernel set's round_row_f16).
void store_kv(const KernelSet& kernels, ThreadPool& pool, const float* x, std::size_t x_stride, std::size_t rows,
              std::size_t cols, KvType type, std::byte* dst, std::size_t dst_row_bytes);

}  // namespace ember::kernels::fast
