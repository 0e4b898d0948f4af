// The AVX-512 variant's attention pieces (AVX-512 flags; see variant_kernels.hpp).
// Softmax: sixteen lanes, llama.cpp's vector exp, each group's sum folded in F32 and
// added to a double. Weighted sum: up to four query heads at a time share each loaded
// value row; each output element accumulates p_j * v_j[d] with one FMA per j, in order.
#include "kernels/fast/avx512_common.hpp"
#include "kernels/fast/avx512_exp.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx512 {

namespace {

__mmask16 tail_mask(std::size_t count) {
    return count >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << count) - 1u);
}

struct F32Values {
    static __m512 load(const std::byte* row, std::size_t d, __mmask16 m) {
        return _mm512_maskz_loadu_ps(m, reinterpret_cast<const float*>(row) + d);
    }
};
struct F16Values {
    static __m512 load(const std::byte* row, std::size_t d, __mmask16 m) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, reinterpret_cast<const std::uint16_t*>(row) + d));
    }
};

// Heads [h0, h0 + H) and elements [d0, d0 + 16 V) (the last vector masked by `last`).
template <typename Values, int H, int V>
void weighted_sum_block(const WeightedSumTask& t, std::size_t h0, std::size_t d0, __mmask16 last) {
    __m512 acc[H][V];
    for (int h = 0; h < H; ++h)
        for (int i = 0; i < V; ++i) acc[h][i] = _mm512_setzero_ps();
    for (std::size_t j = 0; j < t.n; ++j) {
        const std::byte* row = t.v + j * t.v_row_bytes;
        __m512 v[V];
        for (int i = 0; i < V; ++i) v[i] = Values::load(row, d0 + 16 * i, i == V - 1 ? last : static_cast<__mmask16>(0xFFFF));
        for (int h = 0; h < H; ++h) {
            const __m512 p = _mm512_set1_ps(t.p[(h0 + h) * t.p_stride + j]);
            for (int i = 0; i < V; ++i) acc[h][i] = _mm512_fmadd_ps(p, v[i], acc[h][i]);
        }
    }
    for (int h = 0; h < H; ++h) {
        float* out = t.out + (h0 + h) * t.out_stride + d0;
        for (int i = 0; i < V; ++i) _mm512_mask_storeu_ps(out + 16 * i, i == V - 1 ? last : static_cast<__mmask16>(0xFFFF), acc[h][i]);
    }
}

template <typename Values, int H>
void weighted_sum_heads(const WeightedSumTask& t, std::size_t h0) {
    for (std::size_t d0 = 0; d0 < t.head_dim; d0 += 64) {
        const std::size_t width = t.head_dim - d0 < 64 ? t.head_dim - d0 : 64;
        const __mmask16 last = tail_mask(width - (width - 1) / 16 * 16);
        switch ((width + 15) / 16) {
            case 1: weighted_sum_block<Values, H, 1>(t, h0, d0, last); break;
            case 2: weighted_sum_block<Values, H, 2>(t, h0, d0, last); break;
            case 3: weighted_sum_block<Values, H, 3>(t, h0, d0, last); break;
            default: weighted_sum_block<Values, H, 4>(t, h0, d0, last); break;
        }
    }
}

template <typename Values>
void weighted_sum(const WeightedSumTask& t) {
    std::size_t h = 0;
    for (; h + 4 <= t.n_heads; h += 4) weighted_sum_heads<Values, 4>(t, h);
    switch (t.n_heads - h) {
        case 3: weighted_sum_heads<Values, 3>(t, h); break;
        case 2: weighted_sum_heads<Values, 2>(t, h); break;
        case 1: weighted_sum_heads<Values, 1>(t, h); break;
        default: break;
    }
}

}  // namespace

void softmax_row(float* s, std::size_t n, float scale) {
    if (n == 0) return;
    const __m512 factor = _mm512_set1_ps(scale);
    __m512 max = _mm512_set1_ps(-__builtin_inff());
    for (std::size_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + i), factor);
        _mm512_mask_storeu_ps(s + i, m, v);
        max = _mm512_mask_max_ps(max, m, max, v);
    }
    const __m512 row_max = _mm512_set1_ps(_mm512_reduce_max_ps(max));
    double sum = 0.0;
    for (std::size_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        const __m512 e = _mm512_maskz_mov_ps(m, vector_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, s + i), row_max)));
        _mm512_mask_storeu_ps(s + i, m, e);
        sum += avx512_fold16(e);
    }
    const __m512 inverse = _mm512_set1_ps(static_cast<float>(1.0 / sum));
    for (std::size_t i = 0; i < n; i += 16) {
        const __mmask16 m = tail_mask(n - i);
        _mm512_mask_storeu_ps(s + i, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, s + i), inverse));
    }
}

void weighted_sum_f32(const WeightedSumTask& task) { weighted_sum<F32Values>(task); }
void weighted_sum_f16(const WeightedSumTask& task) { weighted_sum<F16Values>(task); }

}  // namespace ember::kernels::fast::avx512
