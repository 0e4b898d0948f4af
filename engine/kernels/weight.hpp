// The one way kernels see a weight: a non-owning row-major [rows, cols] matrix in its
// stored type (usually a view into the memory-mapped GGUF). Row r (one output feature)
// starts at data + r * row_bytes and holds cols elements (cols / block_size blocks).
// Kernels know types and shapes, never tensor names or models.
#pragma once

#include <cstddef>

#include "gguf/ggml_type.hpp"

namespace ember::kernels {

struct WeightMatrix {
    gguf::GgmlType type = gguf::GgmlType::F32;
    const std::byte* data = nullptr;
    std::size_t rows = 0;       // output features
    std::size_t cols = 0;       // input features (the contiguous dimension)
    std::size_t row_bytes = 0;  // bytes of one row in `type`

    const std::byte* row(std::size_t r) const { return data + r * row_bytes; }
};

}  // namespace ember::kernels
