// The ggml tensor type-id table (model-math §1.5). Every valid id has a name, a block
// size and a byte size, so a file is described and bounds-checked correctly even for
// types Ember cannot compute with. Retired ids (4, 5, 31-33, 36-38) and ids >= 43 are
// invalid and have no traits.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ember::gguf {

enum class GgmlType : std::uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
    IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
    TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39, NVFP4 = 40, Q1_0 = 41, Q2_0 = 42,
};

struct TypeTraits {
    std::string_view name;     // as ggml prints it: "F32", "Q8_0", "Q4_K", ...
    std::uint32_t block_size;  // elements per block
    std::uint32_t type_size;   // bytes per block
};

// Traits of a valid type id, or nullopt for a retired, removed or unknown id.
std::optional<TypeTraits> type_traits(std::uint32_t id);

// Why an id is not valid, for error messages: "retired (was Q4_2)", "unknown", ...
std::string_view invalid_type_reason(std::uint32_t id);

std::string_view type_name(GgmlType type);  // traits must exist

// Which types Ember computes with is the kernels' weight-format table
// (kernels/weight_format.hpp), not this one.

}  // namespace ember::gguf
