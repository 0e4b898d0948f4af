#include "kernels/weight_format.hpp"

#include <fmt/format.h>

#include "common/error.hpp"
#include <cstddef>

#include "kernels/dequantize.hpp"
#include "kernels/quant_blocks.hpp"
#include "kernels/quantize_row.hpp"

namespace ember::kernels {
namespace {

using gguf::GgmlType;
using A = ActivationType;

// An activation format's name and block from the ggml type table.
constexpr ActivationFormat activation(ActivationType a, GgmlType type) {
    const gguf::TypeTraits t = gguf::traits_of(type);
    return {a, t.name, t.block_size, t.type_size};
}

constexpr std::array<ActivationFormat, kActivationTypeCount> kActivations = {{
    activation(A::f32, GgmlType::F32),
    activation(A::f16, GgmlType::F16),
    activation(A::bf16, GgmlType::BF16),
    activation(A::q8_0, GgmlType::Q8_0),
    activation(A::q8_1, GgmlType::Q8_1),
    activation(A::q8_K, GgmlType::Q8_K),
}};

// The F16 scales of each block layout, read from the structs themselves.
constexpr ScaleLayout kNoScales{};
template <std::size_t D>
constexpr ScaleLayout one_scale() {
    return {1, {static_cast<std::uint8_t>(D), 0}, {"d", ""}};
}
template <std::size_t D, std::size_t M>
constexpr ScaleLayout two_scales(std::string_view second) {
    return {2, {static_cast<std::uint8_t>(D), static_cast<std::uint8_t>(M)}, {"d", second}};
}

// A file rule on typed blocks as a QuantizeRowFn on the row's bytes.
template <class Block, void (*Rule)(const float*, Block*, std::size_t)>
void write_blocks(const float* x, std::byte* row, std::size_t n) {
    Rule(x, reinterpret_cast<Block*>(row), n);
}

// A row: name, block size and bytes from the ggml type table (model-math §1.5); the
// kernel suffix is the name in lower case (checked below).
constexpr WeightFormat row(std::size_t index, GgmlType type, std::string_view suffix, ActivationType a,
                           DequantizeRowFn dequantize, QuantizeRowFn quantize, ScaleLayout scales) {
    const gguf::TypeTraits t = gguf::traits_of(type);
    return {index, type, t.name, suffix, t.block_size, t.type_size, a, dequantize, quantize, scales};
}

// Activation types as type_traits_cpu's vec_dot_type (§2.9).
constexpr std::array<WeightFormat, kWeightFormatCount> kFormats = {{
    row(0, GgmlType::F32, "f32", A::f32, dequantize_row_f32, nullptr, kNoScales),
    row(1, GgmlType::F16, "f16", A::f16, dequantize_row_f16, quantize_row_f16, kNoScales),
    row(2, GgmlType::BF16, "bf16", A::bf16, dequantize_row_bf16, quantize_row_bf16, kNoScales),
    row(3, GgmlType::Q8_0, "q8_0", A::q8_0, dequantize_row_q8_0, write_blocks<BlockQ8_0, quantize_row_q8_0_file_rule>,
        one_scale<offsetof(BlockQ8_0, d)>()),
    row(4, GgmlType::Q4_0, "q4_0", A::q8_0, dequantize_row_q4_0, write_blocks<BlockQ4_0, quantize_row_q4_0_file_rule>,
        one_scale<offsetof(BlockQ4_0, d)>()),
    row(5, GgmlType::Q4_1, "q4_1", A::q8_1, dequantize_row_q4_1, write_blocks<BlockQ4_1, quantize_row_q4_1_file_rule>,
        two_scales<offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)>("m")),
    row(6, GgmlType::Q5_0, "q5_0", A::q8_0, dequantize_row_q5_0, nullptr, one_scale<offsetof(BlockQ5_0, d)>()),
    row(7, GgmlType::Q5_1, "q5_1", A::q8_1, dequantize_row_q5_1, write_blocks<BlockQ5_1, quantize_row_q5_1_file_rule>,
        two_scales<offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)>("m")),
    row(8, GgmlType::Q2_K, "q2_k", A::q8_K, dequantize_row_q2_K, write_blocks<BlockQ2_K, quantize_row_q2_K_file_rule>,
        two_scales<offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)>("dmin")),
    row(9, GgmlType::Q3_K, "q3_k", A::q8_K, dequantize_row_q3_K, write_blocks<BlockQ3_K, quantize_row_q3_K_file_rule>,
        one_scale<offsetof(BlockQ3_K, d)>()),
    row(10, GgmlType::Q4_K, "q4_k", A::q8_K, dequantize_row_q4_K, write_blocks<BlockQ4_K, quantize_row_q4_K_file_rule>,
        two_scales<offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)>("dmin")),
    row(11, GgmlType::Q5_K, "q5_k", A::q8_K, dequantize_row_q5_K, write_blocks<BlockQ5_K, quantize_row_q5_K_file_rule>,
        two_scales<offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)>("dmin")),
    row(12, GgmlType::Q6_K, "q6_k", A::q8_K, dequantize_row_q6_K, write_blocks<BlockQ6_K, quantize_row_q6_K_file_rule>,
        one_scale<offsetof(BlockQ6_K, d)>()),
}};

// The block layouts (quant_blocks.hpp) are as many bytes as the type table says.
template <class Block>
constexpr bool block_is(GgmlType type) {
    return sizeof(Block) == gguf::traits_of(type).type_size;
}
static_assert(block_is<BlockQ4_0>(GgmlType::Q4_0) && block_is<BlockQ4_1>(GgmlType::Q4_1) &&
              block_is<BlockQ5_0>(GgmlType::Q5_0) && block_is<BlockQ5_1>(GgmlType::Q5_1) &&
              block_is<BlockQ8_0>(GgmlType::Q8_0) && block_is<BlockQ8_1>(GgmlType::Q8_1) &&
              block_is<BlockQ2_K>(GgmlType::Q2_K) && block_is<BlockQ3_K>(GgmlType::Q3_K) &&
              block_is<BlockQ4_K>(GgmlType::Q4_K) && block_is<BlockQ5_K>(GgmlType::Q5_K) &&
              block_is<BlockQ6_K>(GgmlType::Q6_K) && block_is<BlockQ8_K>(GgmlType::Q8_K),
              "quant_blocks.hpp: a block layout's size differs from the ggml type table's");
static_assert(kQK == gguf::traits_of(GgmlType::Q8_0).block_size && kQK_K == gguf::traits_of(GgmlType::Q8_K).block_size,
              "quant_blocks.hpp: the block lengths are the ggml type table's");

// The kernel suffix is the name in lower case.
constexpr bool suffix_is_lower_name(const WeightFormat& f) {
    if (f.kernel_suffix.size() != f.name.size()) return false;
    for (std::size_t i = 0; i < f.name.size(); ++i) {
        const char c = f.name[i];
        const char lower = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
        if (f.kernel_suffix[i] != lower) return false;
    }
    return true;
}

constexpr bool rows_consistent() {
    for (std::size_t i = 0; i < kFormats.size(); ++i) {
        if (kFormats[i].index != i || !suffix_is_lower_name(kFormats[i])) return false;
    }
    for (std::size_t i = 0; i < kActivations.size(); ++i) {
        if (static_cast<std::size_t>(kActivations[i].type) != i) return false;
    }
    return true;
}
static_assert(rows_consistent(), "weight_format.cpp: a row's index must be its position, its suffix its name in lower case");

// Every block format (more than one element a block) names its scales, inside the block.
constexpr bool scales_consistent() {
    for (const WeightFormat& f : kFormats) {
        if ((f.block_size > 1) != (f.scales.count > 0)) return false;
        for (std::uint8_t i = 0; i < f.scales.count; ++i) {
            if (f.scales.offsets[i] + 2u > f.block_bytes) return false;
        }
    }
    return true;
}
static_assert(scales_consistent(), "weight_format.cpp: every block format lists its F16 scales inside its block");

}  // namespace

std::span<const WeightFormat, kWeightFormatCount> weight_formats() { return kFormats; }

const WeightFormat* find_weight_format(GgmlType type) {
    for (const WeightFormat& f : kFormats) {
        if (f.type == type) return &f;
    }
    return nullptr;
}

std::string supported_weight_format_names() {
    std::string names;
    for (const WeightFormat& f : kFormats) names += fmt::format("{}{}", names.empty() ? "" : ", ", f.name);
    return names;
}

const WeightFormat& weight_format(GgmlType type) {
    if (const WeightFormat* f = find_weight_format(type)) return *f;
    throw Error(fmt::format("Ember has no kernels for {} weights (it computes with {})", gguf::type_name(type),
                            supported_weight_format_names()));
}

const ActivationFormat& activation_format(ActivationType type) { return kActivations[static_cast<std::size_t>(type)]; }

}  // namespace ember::kernels
