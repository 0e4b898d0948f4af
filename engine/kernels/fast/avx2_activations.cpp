// The AVX2 variant's activations (AVX2 flags; see variant_kernels.hpp), with llama.cpp's
// AVX-512 vector exp evaluated eight lanes at a time (avx2_exp.hpp).
#include "kernels/fast/intrinsics.hpp"

#include <math.h>

#include "kernels/fast/avx2_exp.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx2 {

namespace c = exp_constants;

void swiglu_row(const float* gate, const float* up, float* out, std::size_t n) {
    const std::size_t grouped = n - n % c::kGroup;  // whole groups of 16, as two halves
    for (std::size_t i = 0; i < grouped; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i);
        const __m256 e = vector_exp8(_mm256_sub_ps(_mm256_setzero_ps(), g));
        const __m256 silu = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
        _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
    }
    for (std::size_t i = grouped; i < n; ++i) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

void geglu_row(const float* gate, const float* up, float* out, std::size_t n, const float* table) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 g = _mm256_loadu_ps(gate + i);
        const __m256i index = _mm256_cvtepu16_epi32(_mm256_cvtps_ph(g, _MM_FROUND_TO_NEAREST_INT));
        __m256 gelu = _mm256_i32gather_ps(table, index, 4);
        gelu = _mm256_blendv_ps(gelu, g, _mm256_cmp_ps(g, _mm256_set1_ps(10.0f), _CMP_GE_OQ));
        const __m256 product = _mm256_mul_ps(gelu, _mm256_loadu_ps(up + i));  // exactly +0 below -10:
        _mm256_storeu_ps(out + i, _mm256_blendv_ps(product, _mm256_setzero_ps(), _mm256_cmp_ps(g, _mm256_set1_ps(-10.0f), _CMP_LE_OQ)));
    }
    for (; i < n; ++i) {
        const float g = gate[i];
        if (g <= -10.0f) out[i] = 0.0f;
        else if (g >= 10.0f) out[i] = g * up[i];
        else out[i] = table[_cvtss_sh(g, 0)] * up[i];
    }
}

}  // namespace ember::kernels::fast::avx2
