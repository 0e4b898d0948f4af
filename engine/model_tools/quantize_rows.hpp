// Whole tensors written in a stored type, through the weight-format table's writers
// (kernels/quantize_row.hpp: llama-quantize's file rules, F16 and BF16 rounding).
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "gguf/ggml_type.hpp"

namespace ember::model_tools {

// Whether the type's row in the weight-format table has a writer.
bool can_write_type(gguf::GgmlType type);

// A [rows, row_length] tensor of F32 values in `type` (one can_write_type accepts);
// row_length is a multiple of the type's block size.
std::vector<std::byte> quantize_rows(gguf::GgmlType type, std::span<const float> values, std::size_t row_length);

}  // namespace ember::model_tools
