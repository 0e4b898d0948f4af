// The portable variant's activations (baseline flags): llama.cpp's vector exp evaluated
// one element at a time with correctly rounded fmaf, so every variant gives the same
// bits (vector_exp.hpp).
#include <math.h>

#include "kernels/float16.hpp"
#include "kernels/fast/vector_exp.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::scalar {

namespace c = exp_constants;

void swiglu_row(const float* gate, const float* up, float* out, std::size_t n) {
    const std::size_t grouped = n - n % c::kGroup;
    for (std::size_t i = 0; i < grouped; ++i) out[i] = gate[i] / (1.0f + vector_exp_scalar(0.0f - gate[i])) * up[i];
    for (std::size_t i = grouped; i < n; ++i) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

void geglu_row(const float* gate, const float* up, float* out, std::size_t n, const float* table) {
    for (std::size_t i = 0; i < n; ++i) {
        const float g = gate[i];
        if (g <= -10.0f) out[i] = 0.0f;
        else if (g >= 10.0f) out[i] = g * up[i];
        else out[i] = table[fp32_to_fp16(g)] * up[i];
    }
}

}  // namespace ember::kernels::fast::scalar
