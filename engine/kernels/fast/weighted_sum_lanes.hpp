// Internal: the weighted sum of value rows in attention, in llama.cpp's order
// (kernel_types.hpp WeightedSumTask), written once for the SIMD variants; a policy V
// supplies the instructions. Internal linkage only (see variant_kernels.hpp).
//
// llama.cpp sums over positions with value element d fixed; here a register holds kWidth
// consecutive value elements, so lane l of llama.cpp's accumulators is one register and
// the reduction across lanes is the same tree applied register-wise.
//
// Policy V: Vector, kWidth (value elements per register), zero(), set1(x), fmadd(a, b, c)
// (a * b + c, fused), add(a, b), load(row, d, count) (`count` <= kWidth elements of a
// value row from d, zero-padded), store(out, count, v), round_to_f16(x) (x rounded to F16
// and back).
#pragma once

#include <cstddef>

#include "kernels/fast/kernel_types.hpp"

namespace ember::kernels::fast {
namespace {

// Value vectors i < n_vec (kWidth elements each from d0 + i * kWidth; `head_dim` bounds the
// last) summed over the positions of class `cls` modulo `modulus` (absolute positions): one
// chain of products per vector, in position order. A position's vectors are one run of
// its value row, read once with one broadcast of its probability; the chains of different
// vectors interleave, so no FMA waits on the one before (one chain at a time, and one
// vector per pass over the rows, were 9% of a 512-token prompt).
template <typename V, int K>
void position_class_run(const WeightedSumTask& t, const float* p, std::size_t d0, std::size_t n_vec, std::size_t cls,
                        std::size_t modulus, typename V::Vector* out) {
    // locals, not t's fields: stores through `out` would make GCC reload them
    const std::size_t n = t.n;
    const std::byte* v = t.v;
    const std::size_t v_row_bytes = t.v_row_bytes;
    const bool round_p = t.round_p_to_f16;
    std::size_t count[K];
    typename V::Vector acc[K];
#pragma GCC unroll 16
    for (int k = 0; k < K; ++k) {
        const std::size_t d = d0 + k * V::kWidth;
        count[k] = d >= t.head_dim ? 0 : t.head_dim - d < V::kWidth ? t.head_dim - d : V::kWidth;
        acc[k] = V::zero();
    }
    for (std::size_t j = (cls + modulus - t.first_position % modulus) % modulus; j < n; j += modulus) {
        const typename V::Vector pj = V::set1(round_p ? V::round_to_f16(p[j]) : p[j]);
        const std::byte* row = v + j * v_row_bytes;
#pragma GCC unroll 16
        for (int k = 0; k < K; ++k)
            if (static_cast<std::size_t>(k) < n_vec) acc[k] = V::fmadd(pj, V::load(row, d0 + k * V::kWidth, count[k]), acc[k]);
    }
#pragma GCC unroll 16
    for (int k = 0; k < K; ++k) out[k] = acc[k];
}

template <typename V>
void weighted_sum_in_order(const WeightedSumTask& t) {
    constexpr std::size_t kGroup = 8;  // value vectors per run
    const std::size_t modulus = t.order == SumOrder::tiled ? 16 : 64;
    for (std::size_t h = 0; h < t.n_heads; ++h) {
        const float* p = t.p + h * t.p_stride;
        for (std::size_t d0 = 0; d0 < t.head_dim; d0 += kGroup * V::kWidth) {
            const std::size_t left = (t.head_dim - d0 + V::kWidth - 1) / V::kWidth;
            const std::size_t n_vec = left < kGroup ? left : kGroup;
            typename V::Vector classes[64][kGroup];  // [class][vector]
            for (std::size_t c = 0; c < modulus; ++c) position_class_run<V, kGroup>(t, p, d0, n_vec, c, modulus, classes[c]);
            for (std::size_t i = 0; i < n_vec; ++i) {
                const std::size_t d = d0 + i * V::kWidth;
                const std::size_t count = t.head_dim - d < V::kWidth ? t.head_dim - d : V::kWidth;
                typename V::Vector lanes[16];
                for (int l = 0; l < 16; ++l) {
                    if (t.order == SumOrder::tiled) lanes[l] = classes[l][i];
                    else  // (acc0 + acc2) + (acc1 + acc3), accumulator q holding class l + 16 q
                        lanes[l] = V::add(V::add(classes[l][i], classes[l + 32][i]), V::add(classes[l + 16][i], classes[l + 48][i]));
                }
                // reduce16, register-wise
                typename V::Vector half[8], quarter[4];
                for (int j = 0; j < 8; ++j) half[j] = V::add(lanes[j + 8], lanes[j]);
                for (int j = 0; j < 4; ++j) quarter[j] = V::add(half[j + 4], half[j]);
                V::store(t.out + h * t.out_stride + d, count, V::add(V::add(quarter[0], quarter[2]), V::add(quarter[1], quarter[3])));
            }
        }
    }
}

}  // namespace
}  // namespace ember::kernels::fast
