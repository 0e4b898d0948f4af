// The AVX-512 variant's activations (AVX-512 flags; see variant_kernels.hpp): llama.cpp's
// vector exp (vector_exp.hpp) sixteen lanes at a time, exactly as its AVX-512 build
// evaluates it (vscalefps for the final j * 2^n).
#include "kernels/fast/intrinsics.hpp"

#include <math.h>

#include "kernels/fast/avx512_exp.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx512 {

namespace c = exp_constants;

void swiglu_row(const float* gate, const float* up, float* out, std::size_t n) {
    std::size_t i = 0;
    for (; i + c::kGroup <= n; i += c::kGroup) {
        const __m512 g = _mm512_loadu_ps(gate + i);
        const __m512 e = vector_exp16(_mm512_sub_ps(_mm512_setzero_ps(), g));
        const __m512 silu = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
        _mm512_storeu_ps(out + i, _mm512_mul_ps(silu, _mm512_loadu_ps(up + i)));
    }
    for (; i < n; ++i) out[i] = gate[i] / (1.0f + expf(-gate[i])) * up[i];
}

void geglu_row(const float* gate, const float* up, float* out, std::size_t n, const float* table) {
    for (std::size_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - i)) - 1u);
        const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
        const __m512i index = _mm512_cvtepu16_epi32(_mm512_cvtps_ph(g, _MM_FROUND_TO_NEAREST_INT));
        __m512 gelu = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), m, index, table, 4);
        gelu = _mm512_mask_mov_ps(gelu, _mm512_cmp_ps_mask(g, _mm512_set1_ps(10.0f), _CMP_GE_OQ), g);
        const __m512 product = _mm512_mul_ps(gelu, _mm512_maskz_loadu_ps(m, up + i));  // exactly +0 below -10:
        _mm512_mask_storeu_ps(out + i, m, _mm512_mask_mov_ps(product, _mm512_cmp_ps_mask(g, _mm512_set1_ps(-10.0f), _CMP_LE_OQ),
                                                             _mm512_setzero_ps()));
    }
}

}  // namespace ember::kernels::fast::avx512
