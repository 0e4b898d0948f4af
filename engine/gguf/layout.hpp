// How a GGUF tensor maps to the row-major [out, in] matrices the kernels use
// (model-math §1.4). ggml lists dimensions fastest-first: a weight stored with
// ne = [in, out] is, byte for byte, a row-major [out, in] matrix whose row o (one output
// feature) is the contiguous run of `in` elements starting at o * row_bytes.
#pragma once

#include <cstdint>
#include <string>

#include "gguf/gguf_file.hpp"

namespace ember::gguf {

struct MatrixLayout {
    std::uint64_t rows = 0;       // out features = ne[1]
    std::uint64_t cols = 0;       // in features = ne[0], the contiguous dimension
    std::uint64_t row_bytes = 0;  // bytes of one row in the stored type
};

// The [out, in] layout of a 1-D or 2-D tensor (a 1-D tensor is one row). Throws
// ember::Error naming the tensor if it has more than two non-trivial dimensions.
MatrixLayout matrix_layout(const File& file, const TensorInfo& tensor);

// Bytes of one row of `cols` elements in `type` (cols must be a multiple of the block).
std::uint64_t row_bytes(GgmlType type, std::uint64_t cols);

// For `inspect`: "row-major [512, 64] (ne[0]=64 contiguous)" and, for the tied LM head,
// a note that token_embd serves as the output projection.
std::string describe_layout(const TensorInfo& tensor);

}  // namespace ember::gguf
