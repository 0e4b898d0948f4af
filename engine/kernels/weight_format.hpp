// The weight-format table: one row per stored weight type Ember computes with. Every
// site that depends on a weight's type (the tensor loader's check, the reference route's
// dequantization, the fast route's activation conversion, product slots and workspace
// sizes, kernel names in traces) reads this table; a type without a row is refused by
// name, never computed by a default.
//
// Each row says how the format is stored (its name, block size and bytes, read from the
// ggml type table gguf/ggml_type.hpp: one base table, not two), which activation type
// its dot product reads (llama.cpp's vec_dot_type, model-math §2.9), how a row is
// dequantized to F32 (llama.cpp's dequantize_row_*, bit for bit), how F32 values are
// written in it (llama-quantize's file rule, quantize_row.hpp; none for the types Ember
// does not write), and its index: the slot of its product in every fast KernelSet
// (kernels/fast/kernel_set.hpp). The model tools read source tensors and write quantized
// ones through these rows.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "gguf/ggml_type.hpp"

namespace ember::kernels {

// What a product with a weight format reads as its other operand.
enum class ActivationType : std::uint8_t { f32, f16, bf16, q8_0, q8_1, q8_K };
inline constexpr std::size_t kActivationTypeCount = 6;

struct ActivationFormat {
    ActivationType type;
    std::string_view name;     // "Q8_K"
    std::uint32_t block_size;  // elements per block; a row is a whole number of blocks
    std::uint32_t block_bytes;
};

// Where a block keeps its F16 scales (d, and dmin or m for the formats with a minimum):
// byte offsets inside the block, from quant_blocks.hpp's layouts. F32, F16 and BF16 have
// none. What the load-time finiteness check reads (kernels/scale_check.hpp).
struct ScaleLayout {
    std::uint8_t count = 0;                     // 0, 1 or 2 F16 scales per block
    std::array<std::uint8_t, 2> offsets{};      // byte offset of each scale in the block
    std::array<std::string_view, 2> names{};    // "d", "dmin" (K-quants) or "m" (Q4_1, Q5_1)
};

// n elements (a multiple of the block size) of one stored row into F32.
using DequantizeRowFn = void (*)(const std::byte* row, float* out, std::size_t n);
// n F32 values (a multiple of the block size) into one stored row.
using QuantizeRowFn = void (*)(const float* x, std::byte* row, std::size_t n);

struct WeightFormat {
    std::size_t index;              // position in weight_formats()
    gguf::GgmlType type;
    std::string_view name;          // ggml's name: "Q4_K"
    std::string_view kernel_suffix; // in kernel names: "q4_k" ("fast.matmul.q4_k")
    std::uint32_t block_size;       // elements per block
    std::uint32_t block_bytes;
    ActivationType activation;      // what its dot product reads
    DequantizeRowFn dequantize_row;
    QuantizeRowFn quantize_row;     // nullptr: Ember does not write this type (F32, Q5_0)
    ScaleLayout scales;             // its F16 scales, if it is a block format
};

inline constexpr std::size_t kWeightFormatCount = 13;

// Every row, in a fixed order (index == position).
std::span<const WeightFormat, kWeightFormatCount> weight_formats();

// The row of a type, or nullptr if Ember has no kernels for it.
const WeightFormat* find_weight_format(gguf::GgmlType type);

// The row of a type; ember::Error naming the type and the supported ones otherwise.
const WeightFormat& weight_format(gguf::GgmlType type);

const ActivationFormat& activation_format(ActivationType type);

// "F32, F16, BF16, Q8_0, ..." for error messages.
std::string supported_weight_format_names();

// Whether a product with this format gives each output the same bits at any number of
// activation rows. The integer-block formats do (one order per output); F32, F16 and BF16
// follow llama.cpp's two orders, tinyBLAS for 2+ rows and vec_dot for one.
inline bool same_bits_at_any_row_count(const WeightFormat& f) {
    return f.activation != ActivationType::f32 && f.activation != ActivationType::f16 &&
           f.activation != ActivationType::bf16;
}

// Bytes of n elements in a block format (n a multiple of block_size).
inline std::size_t format_row_bytes(std::uint32_t block_size, std::uint32_t block_bytes, std::size_t n) {
    return n / block_size * block_bytes;
}

}  // namespace ember::kernels
