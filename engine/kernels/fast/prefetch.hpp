// Internal: software prefetch for matrix-vector products. The R rows of a tile are one
// contiguous run of memory and the next tile's rows follow it, so while one tile is
// computed the next tile's run is pulled into L1, a slice per loop iteration. Decode
// streams weights once; without this, eight short row streams leave the hardware
// prefetcher behind and the product runs at a third of memory speed.
// Internal linkage only (see variant_kernels.hpp); prefetch never faults, and the
// addresses are computed as integers because the next run may lie past the matrix.
#pragma once

#include <xmmintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/fast/kernel_types.hpp"

namespace ember::kernels::fast {
namespace {

class NextRowsPrefetch {
public:
    // Prefetches rows [next_row, next_row + rows) of `task` over `iterations` calls. With
    // `row_data_bytes` (the bytes a row's product reads) short of the row stride, the rows
    // are no contiguous run (attention's keys: one head of each cache row) and nothing is
    // prefetched: the whole stride per score was 32 prefetches, 47% of the scores' time.
    NextRowsPrefetch(const MatmulTask& task, std::size_t next_row, std::size_t rows, std::size_t iterations,
                     std::size_t row_data_bytes = SIZE_MAX)
        : base_(reinterpret_cast<std::uintptr_t>(task.weights) + next_row * task.weight_row_bytes),
          step_(iterations && row_data_bytes >= task.weight_row_bytes
                    ? (rows * task.weight_row_bytes / iterations + 63) & ~std::size_t{63}
                    : 0) {}

    void operator()(std::size_t iteration) const {
        for (std::size_t line = 0; line < step_; line += 64) {
            _mm_prefetch(reinterpret_cast<const char*>(base_ + iteration * step_ + line), _MM_HINT_T0);
        }
    }

private:
    std::uintptr_t base_;
    std::size_t step_;
};

}  // namespace
}  // namespace ember::kernels::fast
