// `ember quantize`: rewrite a GGUF model with Q8_0 weights the way llama.cpp's
// llama-quantize does for its Q8_0 file type (LLAMA_FTYPE_MOSTLY_Q8_0), so that the same
// F32/F16/BF16 input gives the same bytes:
//   - metadata copied in order; general.quantization_version = 2 and
//     general.file_type = 7 (u32) moved to / appended at the end;
//   - tensors written in llama.cpp's order: non-layer tensors first, then layer by layer
//     (by the number in "blk.N."), by name within each group;
//   - a tensor is quantized if it is a weight matrix (name ends in "weight", two or more
//     dimensions) and not one of the tensors llama.cpp keeps (norms, MoE router, ...);
//     others (1-D norms, rope_freqs) are copied unchanged;
//   - a quantized tensor becomes Q8_0 if its rows are a multiple of 32 elements, F16
//     otherwise; Q8_0 uses the file rule of model-math §2.2 (d = amax / 127 stored as
//     fp16, id = 1 / d from the unrounded d, roundf: ties away from zero).
#pragma once

#include <cstddef>
#include <filesystem>
#include <string_view>

#include "kernels/fast/kernel_types.hpp"

namespace ember::model_tools {

// One row of n floats (n a multiple of 32) to Q8_0 blocks with the file rule.
void quantize_row_q8_0_file_rule(const float* x, kernels::fast::BlockQ8_0* y, std::size_t n);

// The layer number in a tensor name "blk.N.<...>", or -1 (llama.cpp's ordering key).
int tensor_layer(std::string_view name);

// Whether llama-quantize quantizes a tensor of this name and dimensionality.
bool is_quantizable_weight(std::string_view name, std::size_t n_dims);

struct QuantizeSummary {
    std::size_t to_q8_0 = 0;  // tensors written as Q8_0
    std::size_t to_f16 = 0;   // weight matrices whose rows are not a multiple of 32
    std::size_t copied = 0;   // tensors kept as they were
    std::size_t output_bytes = 0;
};

// Reads `input` (F32, F16 or BF16 weights; Q8_0 tensors are copied) and writes `output`
// atomically. ember::Error names the file and tensor for anything it cannot convert.
QuantizeSummary quantize_model_q8_0(const std::filesystem::path& input, const std::filesystem::path& output);

}  // namespace ember::model_tools
