// `ember quantize`: rewrite a GGUF model the way llama.cpp's llama-quantize does for its
// Q8_0, Q4_0, Q4_1, Q5_1, Q2_K, Q3_K_M, Q4_K_M, Q5_K_M and Q6_K file types
// (LLAMA_FTYPE_MOSTLY_*, no importance matrix), so that the same F32/F16/BF16 input gives
// the same bytes:
//   - metadata copied in order; general.quantization_version = 2 and
//     general.file_type (u32: 7, 2, 3, 9, 10, 12, 15, 17, 18) moved to / appended at the end;
//   - tensors written in llama.cpp's order: non-layer tensors first, then layer by layer
//     (by the number in "blk.N."), by name within each group;
//   - a tensor is quantized if it is a weight matrix (name ends in "weight", two or more
//     dimensions) and not one of the tensors llama.cpp keeps (norms, MoE router, ...);
//     others (1-D norms, rope_freqs) are copied unchanged;
//   - a quantized tensor gets the file type's base type (Q8_0, Q4_0, Q4_1, Q5_1, Q2_K,
//     Q3_K, Q4_K, Q5_K, Q6_K) with llama_tensor_get_type's changes for dense models: the
//     LM head (output.weight, or token_embd.weight when the output is tied) becomes Q6_K
//     (Q8_0 if its rows are not a multiple of 256) unless the base is Q8_0; for Q4_K_M
//     and Q5_K_M, attn_v and ffn_down of the layers use_more_bits picks (the first and
//     last eighth, every third between) become Q6_K; for Q2_K attn_v is Q4_K (n_gqa >= 4)
//     or Q3_K, ffn_down and attn_output Q3_K; for Q3_K_M attn_v is Q5_K in layers 0-1 and
//     Q4_K after, ffn_down Q5_K in the first sixteenth and Q4_K after, attn_output Q4_K;
//     a type whose block does not divide the rows takes tensor_type_fallback's (Q2_K,
//     Q3_K -> Q4_0, Q5_K -> Q5_1, Q6_K -> Q8_0; then F16 where 32 does not divide
//     either), except Q4_K, refused (llama.cpp writes Q5_0, which ember cannot write yet);
//   - values are quantized by the file rules of kernels/quantize_row.hpp.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string_view>

#include <cstdint>
#include <map>
#include <string>

#include "gguf/ggml_type.hpp"
#include "model_tools/quantize_rows.hpp"

namespace ember::gguf {
class File;
}

namespace ember::model_tools {

// The file types `ember quantize` writes, by the name llama-quantize gives them.
enum class FileType : std::uint32_t { q8_0 = 7, q4_0 = 2, q4_1 = 3, q5_1 = 9, q2_k = 10, q3_k_m = 12, q4_k_m = 15, q5_k_m = 17, q6_k = 18 };

// One of file_type_names() (case-insensitive); UsageError otherwise.
FileType parse_file_type(std::string_view name);
std::string_view file_type_name(FileType type);
// Every file type's name, in the table's order, joined by `separator` (for help texts).
std::string file_type_names(std::string_view separator);

// The type llama-quantize gives a quantizable tensor (see above). `layer` and `n_layers`
// locate it for use_more_bits; `has_output` says whether the file has output.weight;
// `n_gqa` is layer 0's head_count / head_count_kv (llama.cpp's n_gqa(), Q2_K's attn_v).
gguf::GgmlType target_type(FileType file_type, std::string_view name, std::uint64_t row_length, int layer,
                           int n_layers, bool has_output, int n_gqa);

// n_gqa() of a model file: layer 0's head_count / head_count_kv (1 without them).
int n_gqa_of(const gguf::File& file);

// The layer number in a tensor name "blk.N.<...>", or -1 (llama.cpp's ordering key).
int tensor_layer(std::string_view name);

// Whether llama-quantize quantizes a tensor of this name and dimensionality.
bool is_quantizable_weight(std::string_view name, std::size_t n_dims);

struct QuantizeSummary {
    std::map<std::string, std::size_t> written;  // tensors quantized or converted, by type name
    std::size_t copied = 0;                      // tensors kept as they were
    std::size_t output_bytes = 0;
};

// Reads `input` (F32, F16 or BF16 weights; tensors already in their target type are
// copied) and writes `output` atomically. ember::Error names the file and tensor for
// anything it cannot convert.
QuantizeSummary quantize_model(const std::filesystem::path& input, const std::filesystem::path& output, FileType type);

}  // namespace ember::model_tools
