// The fast route: kernels::Backend with the SIMD kernels of this directory for the
// operations that cost time (matrix products, RMS norm, attention, SwiGLU) and the
// reference kernels for the rest (embedding rows, RoPE, GELU/GEGLU through the F16
// table, element-wise ops), which are cheap and already llama.cpp's recipes.
//
// Numerics (docs/fast-path.md): activations are converted to each weight's llama.cpp
// dot-product type (Q8_0 / F16 / BF16) before a product, so the route is held to
// MODEL.golden.json, not to the F32 golden. Work runs in the caller's oneTBB arena (the
// session's, with exactly --threads threads); no result depends on the thread count.
// Scratch grows to the largest shapes seen and is then reused: after the first
// evaluation, evaluations of no more tokens allocate nothing.
#pragma once

#include <memory>

#include "kernels/backend.hpp"
#include "kernels/fast/kernel_set.hpp"

namespace ember::kernels::fast {

std::unique_ptr<Backend> make_fast_backend(const KernelSet& kernels = process_kernel_set());

}  // namespace ember::kernels::fast
