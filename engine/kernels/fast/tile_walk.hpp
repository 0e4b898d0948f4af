// Internal: walking a matrix product in tiles of R rows x T tokens, for the SIMD variant
// translation units (internal linkage only, see variant_kernels.hpp). Tile::run<R, T>(
// task, first_row, first_token) computes one tile; remainders get smaller tiles.
#pragma once

#include <cstddef>

#include "kernels/fast/kernel_types.hpp"

namespace ember::kernels::fast {
namespace {

// The last `count` < T tokens of rows r0.. as one tile of exactly `count` tokens.
template <typename Tile, int R, int T>
void token_remainder(const MatmulTask& task, std::size_t r0, std::size_t t0, std::size_t count) {
    if constexpr (T > 0) {
        if (count == T) Tile::template run<R, T>(task, r0, t0);
        else token_remainder<Tile, R, T - 1>(task, r0, t0, count);
    }
}

template <typename Tile, int R, int T>
void tokens_of_rows(const MatmulTask& task, std::size_t r0) {
    std::size_t t = 0;
    for (; t + T <= task.n_tokens; t += T) Tile::template run<R, T>(task, r0, t);
    if (t < task.n_tokens) token_remainder<Tile, R, T - 1>(task, r0, t, task.n_tokens - t);
}

template <typename Tile, int R, int T>
void walk_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    std::size_t r = row_begin;
    for (; r + R <= row_end; r += R) tokens_of_rows<Tile, R, T>(task, r);
    for (; r < row_end; ++r) tokens_of_rows<Tile, 1, T>(task, r);
}

}  // namespace
}  // namespace ember::kernels::fast
