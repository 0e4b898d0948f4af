// The AVX2 variant's attention pieces (AVX2 flags; see variant_kernels.hpp). Softmax:
// eight lanes, llama.cpp's vector exp, each group's sum folded in F32 and added to a
// double. Weighted sum: two query heads at a time share each loaded value row; each
// output element accumulates p_j * v_j[d] with one FMA per j, in order.
#include "kernels/fast/avx2_exp.hpp"
#include "kernels/fast/half_precision.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx2 {

namespace {

float fold8(__m256 v) {
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    const __m128 pairs = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(pairs, _mm_movehdup_ps(pairs)));
}

// Lanes [0, count) set, for maskload / maskstore.
__m256i lane_mask(std::size_t count) {
    const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(count < 8 ? count : 8)), index);
}

struct F32Values {
    static __m256 load(const std::byte* row, std::size_t d, std::size_t count) {
        const float* p = reinterpret_cast<const float*>(row) + d;
        return count >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, lane_mask(count));
    }
};
struct F16Values {
    static __m256 load(const std::byte* row, std::size_t d, std::size_t count) {
        const std::uint16_t* p = reinterpret_cast<const std::uint16_t*>(row) + d;
        if (count >= 8) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
        std::uint16_t padded[8] = {};
        for (std::size_t i = 0; i < count; ++i) padded[i] = p[i];
        return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(padded)));
    }
};

// Heads [h0, h0 + H), elements [d0, d0 + width), width <= 32.
template <typename Values, int H>
void weighted_sum_block(const WeightedSumTask& t, std::size_t h0, std::size_t d0, std::size_t width) {
    const int vectors = static_cast<int>((width + 7) / 8);
    __m256 acc[H][4];
    for (int h = 0; h < H; ++h)
        for (int i = 0; i < 4; ++i) acc[h][i] = _mm256_setzero_ps();
    for (std::size_t j = 0; j < t.n; ++j) {
        const std::byte* row = t.v + j * t.v_row_bytes;
        __m256 v[4];
        for (int i = 0; i < 4; ++i) v[i] = i < vectors ? Values::load(row, d0 + 8 * i, width - 8 * i) : _mm256_setzero_ps();
        for (int h = 0; h < H; ++h) {
            const __m256 p = _mm256_set1_ps(t.p[(h0 + h) * t.p_stride + j]);
            for (int i = 0; i < 4; ++i) acc[h][i] = _mm256_fmadd_ps(p, v[i], acc[h][i]);
        }
    }
    for (int h = 0; h < H; ++h) {
        float* out = t.out + (h0 + h) * t.out_stride + d0;
        for (int i = 0; i < vectors; ++i) {
            const std::size_t count = width - 8 * i;
            if (count >= 8) _mm256_storeu_ps(out + 8 * i, acc[h][i]);
            else _mm256_maskstore_ps(out + 8 * i, lane_mask(count), acc[h][i]);
        }
    }
}

template <typename Values>
void weighted_sum(const WeightedSumTask& t) {
    for (std::size_t d0 = 0; d0 < t.head_dim; d0 += 32) {
        const std::size_t width = t.head_dim - d0 < 32 ? t.head_dim - d0 : 32;
        std::size_t h = 0;
        for (; h + 2 <= t.n_heads; h += 2) weighted_sum_block<Values, 2>(t, h, d0, width);
        if (h < t.n_heads) weighted_sum_block<Values, 1>(t, h, d0, width);
    }
}

}  // namespace

void softmax_row(float* s, std::size_t n, float scale) {
    if (n == 0) return;
    const __m256 factor = _mm256_set1_ps(scale);
    float max = -__builtin_inff();
    std::size_t i = 0;
    __m256 vmax = _mm256_set1_ps(max);
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(s + i), factor);
        _mm256_storeu_ps(s + i, v);
        vmax = _mm256_max_ps(vmax, v);
    }
    for (; i < n; ++i) {
        s[i] = s[i] * scale;
        if (s[i] > max) max = s[i];
    }
    float lanes[8];
    _mm256_storeu_ps(lanes, vmax);
    for (float l : lanes) max = l > max ? l : max;

    const __m256 row_max = _mm256_set1_ps(max);
    double sum = 0.0;
    for (i = 0; i + 8 <= n; i += 8) {
        const __m256 e = vector_exp8(_mm256_sub_ps(_mm256_loadu_ps(s + i), row_max));
        _mm256_storeu_ps(s + i, e);
        sum += fold8(e);
    }
    for (; i < n; ++i) {
        s[i] = vector_exp_scalar(s[i] - max);
        sum += s[i];
    }
    const auto inverse = static_cast<float>(1.0 / sum);
    for (i = 0; i < n; ++i) s[i] = s[i] * inverse;
}

void weighted_sum_f32(const WeightedSumTask& task) { weighted_sum<F32Values>(task); }
void weighted_sum_f16(const WeightedSumTask& task) { weighted_sum<F16Values>(task); }

}  // namespace ember::kernels::fast::avx2
