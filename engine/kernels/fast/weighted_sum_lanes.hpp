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

// kWidth value elements from d: the chain of products of the positions in class `cls`
// modulo `modulus` (absolute positions), in order.
template <typename V>
typename V::Vector position_class_sum(const WeightedSumTask& t, const float* p, std::size_t d, std::size_t count,
                                      std::size_t cls, std::size_t modulus) {
    typename V::Vector acc = V::zero();
    for (std::size_t j = (cls + modulus - t.first_position % modulus) % modulus; j < t.n; j += modulus) {
        const float pj = t.round_p_to_f16 ? V::round_to_f16(p[j]) : p[j];
        acc = V::fmadd(V::set1(pj), V::load(t.v + j * t.v_row_bytes, d, count), acc);
    }
    return acc;
}

template <typename V>
void weighted_sum_in_order(const WeightedSumTask& t) {
    for (std::size_t h = 0; h < t.n_heads; ++h) {
        const float* p = t.p + h * t.p_stride;
        for (std::size_t d = 0; d < t.head_dim; d += V::kWidth) {
            const std::size_t count = t.head_dim - d < V::kWidth ? t.head_dim - d : V::kWidth;
            typename V::Vector lanes[16];
            for (std::size_t l = 0; l < 16; ++l) {
                if (t.order == SumOrder::tiled) {
                    lanes[l] = position_class_sum<V>(t, p, d, count, l, 16);
                } else {  // (acc0 + acc2) + (acc1 + acc3)
                    lanes[l] = V::add(V::add(position_class_sum<V>(t, p, d, count, l, 64), position_class_sum<V>(t, p, d, count, l + 32, 64)),
                                      V::add(position_class_sum<V>(t, p, d, count, l + 16, 64), position_class_sum<V>(t, p, d, count, l + 48, 64)));
                }
            }
            // reduce16, register-wise
            typename V::Vector half[8], quarter[4];
            for (int j = 0; j < 8; ++j) half[j] = V::add(lanes[j + 8], lanes[j]);
            for (int j = 0; j < 4; ++j) quarter[j] = V::add(half[j + 4], half[j]);
            V::store(t.out + h * t.out_stride + d, count, V::add(V::add(quarter[0], quarter[2]), V::add(quarter[1], quarter[3])));
        }
    }
}

}  // namespace
}  // namespace ember::kernels::fast
