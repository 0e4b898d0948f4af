// The walk of the 256-bit prompt products (2 or more tokens) whose dot product takes Q8_0
// activations, shared by avx2_q8_0_prompt.cpp and avxvnni_q8_0_prompt.cpp: templates with
// internal linkage (see variant_kernels.hpp for the rules of a variant translation unit).
//
// The weights of a slab of rows are unpacked once per call (kept in L2 while every chunk
// of tokens is multiplied with them), the activations of each chunk of tokens once per
// slab, and 2x4 tiles of (rows, tokens) walk them. A kernel K says how its operands are
// stored and multiplied:
//   K::Slab, K::Pack                   views of the unpacked rows and the packed tokens
//   K::Buffers                         stack storage for a slab (slab()) and a pack
//   K::kSlabBlocks, K::kPackBlocks     their capacities in blocks; K::kChunkTokens
//   K::unpack_rows<W>(task, first, count, slab)
//   K::pack_tokens(task, first, count, buffers)   the chunk's tokens, packed into the
//                                      buffers or a view of the product's own packing
//   K::tile<R, T>(task, slab, k, r0, pack, j, t0)  rows k.. x tokens j.. of the chunk at t0
#pragma once

#include <cstddef>

#include "kernels/fast/kernel_types.hpp"

namespace ember::kernels::fast {
namespace {

constexpr std::size_t kMinChunkTokens = 4;  // rows too wide for four tokens' pack: the caller's fallback
constexpr int kWalkTileRows = 2;
constexpr int kWalkTileTokens = 4;

// Rows k.. of a slab (R of them) x the chunk's `count` tokens: whole tiles of
// kWalkTileTokens, then one tile of the remainder.
template <typename K, int R>
void q8_0_tile_row(const MatmulTask& task, const typename K::Slab& rows, std::size_t k, std::size_t r0,
                   const typename K::Pack& tokens, std::size_t count, std::size_t t0) {
    std::size_t j = 0;
    for (; j + kWalkTileTokens <= count; j += kWalkTileTokens)
        K::template tile<R, kWalkTileTokens>(task, rows, k, r0, tokens, j, t0);
    switch (count - j) {
        case 3: K::template tile<R, 3>(task, rows, k, r0, tokens, j, t0); break;
        case 2: K::template tile<R, 2>(task, rows, k, r0, tokens, j, t0); break;
        case 1: K::template tile<R, 1>(task, rows, k, r0, tokens, j, t0); break;
        default: break;
    }
}

// Rows [row_begin, row_end) x every token of weight format W; false (nothing computed)
// when the rows are too wide for a slab of one row or a chunk of kMinChunkTokens tokens.
template <typename K, typename W>
bool q8_0_prompt_walk(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    const std::size_t n_blocks = task.cols / kQ8_0BlockSize;
    if (n_blocks == 0 || n_blocks * kMinChunkTokens > K::kPackBlocks || n_blocks > K::kSlabBlocks) return false;
    const std::size_t slab_rows = K::kSlabBlocks / n_blocks;
    const std::size_t chunk = K::kPackBlocks / n_blocks < K::kChunkTokens ? K::kPackBlocks / n_blocks : K::kChunkTokens;
    typename K::Buffers buffers;
    const typename K::Slab rows = buffers.slab();
    for (std::size_t first = row_begin; first < row_end; first += slab_rows) {
        const std::size_t count = row_end - first < slab_rows ? row_end - first : slab_rows;
        K::template unpack_rows<W>(task, first, count, rows);
        for (std::size_t t0 = 0; t0 < task.n_tokens; t0 += chunk) {
            const std::size_t n = task.n_tokens - t0 < chunk ? task.n_tokens - t0 : chunk;
            const typename K::Pack tokens = K::pack_tokens(task, t0, n, buffers);
            std::size_t k = 0;
            for (; k + kWalkTileRows <= count; k += kWalkTileRows)
                q8_0_tile_row<K, kWalkTileRows>(task, rows, k, first, tokens, n, t0);
            for (; k < count; ++k) q8_0_tile_row<K, 1>(task, rows, k, first, tokens, n, t0);
        }
    }
    return true;
}

}  // namespace
}  // namespace ember::kernels::fast
