// Row-wise operations of the fast route, parallel over rows. Each takes [rows, cols]
// F32 matrices given by a pointer and a row stride (in floats); outputs may alias inputs.
#pragma once

#include <cstddef>

#include "kernels/fast/kernel_set.hpp"
#include "kernels/fast/thread_pool.hpp"

namespace ember::kernels::fast {

// y = x / sqrt(mean(x^2) + eps) * weight (weight == nullptr: no weight), llama.cpp's
// recipe bit for bit (model-math §3.1): the sum of float squares in double, in order.
void rms_norm(ThreadPool& pool, const float* x, std::size_t x_stride, const float* weight, float eps, float* y,
              std::size_t y_stride, std::size_t rows, std::size_t cols);

// out = silu(gate) * up with the kernel set's swiglu_row (bit-identical to llama.cpp's
// AVX-512 build on every variant).
void swiglu(const KernelSet& kernels, ThreadPool& pool, const float* gate, std::size_t gate_stride, const float* up,
            std::size_t up_stride, float* out, std::size_t out_stride, std::size_t rows, std::size_t cols);

}  // namespace ember::kernels::fast
