#include "kernels/weight_format.hpp"

#include <fmt/format.h>

#include "common/error.hpp"
#include <cstddef>

#include "kernels/dequantize.hpp"
#include "kernels/quant_blocks.hpp"

namespace ember::kernels {
namespace {

using gguf::GgmlType;
using A = ActivationType;

constexpr std::array<ActivationFormat, kActivationTypeCount> kActivations = {{
    {A::f32, "F32", 1, 4},
    {A::f16, "F16", 1, 2},
    {A::bf16, "BF16", 1, 2},
    {A::q8_0, "Q8_0", 32, 34},
    {A::q8_1, "Q8_1", 32, 36},
    {A::q8_K, "Q8_K", 256, 292},
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

// Block sizes and bytes as ggml's type_traits (model-math §1.5); activation types as
// type_traits_cpu's vec_dot_type (§2.9).
constexpr std::array<WeightFormat, kWeightFormatCount> kFormats = {{
    {0, GgmlType::F32, "F32", "f32", 1, 4, A::f32, dequantize_row_f32,
     kNoScales},
    {1, GgmlType::F16, "F16", "f16", 1, 2, A::f16, dequantize_row_f16,
     kNoScales},
    {2, GgmlType::BF16, "BF16", "bf16", 1, 2, A::bf16, dequantize_row_bf16,
     kNoScales},
    {3, GgmlType::Q8_0, "Q8_0", "q8_0", 32, 34, A::q8_0, dequantize_row_q8_0,
     one_scale<offsetof(BlockQ8_0, d)>()},
    {4, GgmlType::Q4_0, "Q4_0", "q4_0", 32, 18, A::q8_0, dequantize_row_q4_0,
     one_scale<offsetof(BlockQ4_0, d)>()},
    {5, GgmlType::Q4_1, "Q4_1", "q4_1", 32, 20, A::q8_1, dequantize_row_q4_1,
     two_scales<offsetof(BlockQ4_1, d), offsetof(BlockQ4_1, m)>("m")},
    {6, GgmlType::Q5_0, "Q5_0", "q5_0", 32, 22, A::q8_0, dequantize_row_q5_0,
     one_scale<offsetof(BlockQ5_0, d)>()},
    {7, GgmlType::Q5_1, "Q5_1", "q5_1", 32, 24, A::q8_1, dequantize_row_q5_1,
     two_scales<offsetof(BlockQ5_1, d), offsetof(BlockQ5_1, m)>("m")},
    {8, GgmlType::Q2_K, "Q2_K", "q2_k", 256, 84, A::q8_K, dequantize_row_q2_K,
     two_scales<offsetof(BlockQ2_K, d), offsetof(BlockQ2_K, dmin)>("dmin")},
    {9, GgmlType::Q3_K, "Q3_K", "q3_k", 256, 110, A::q8_K, dequantize_row_q3_K,
     one_scale<offsetof(BlockQ3_K, d)>()},
    {10, GgmlType::Q4_K, "Q4_K", "q4_k", 256, 144, A::q8_K, dequantize_row_q4_K,
     two_scales<offsetof(BlockQ4_K, d), offsetof(BlockQ4_K, dmin)>("dmin")},
    {11, GgmlType::Q5_K, "Q5_K", "q5_k", 256, 176, A::q8_K, dequantize_row_q5_K,
     two_scales<offsetof(BlockQ5_K, d), offsetof(BlockQ5_K, dmin)>("dmin")},
    {12, GgmlType::Q6_K, "Q6_K", "q6_k", 256, 210, A::q8_K, dequantize_row_q6_K,
     one_scale<offsetof(BlockQ6_K, d)>()},
}};

constexpr bool rows_consistent() {
    for (std::size_t i = 0; i < kFormats.size(); ++i) {
        if (kFormats[i].index != i) return false;
    }
    for (std::size_t i = 0; i < kActivations.size(); ++i) {
        if (static_cast<std::size_t>(kActivations[i].type) != i) return false;
    }
    return true;
}
static_assert(rows_consistent(), "weight_format.cpp: a row's index must be its position");

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
