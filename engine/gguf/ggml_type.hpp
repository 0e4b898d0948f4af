// The ggml tensor type-id table (model-math §1.5): the one base table of type names,
// block sizes and block bytes (the kernels' weight-format table and block layouts read
// theirs from here). Every valid id has a name, a block size and a byte size, so a file
// is described and bounds-checked correctly even for types Ember cannot compute with. Retired ids (4, 5, 31-33, 36-38) and ids >= 43 are
// invalid and have no traits.
#pragma once

#include <array>
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

namespace detail {

struct Entry {
    bool valid;
    TypeTraits traits;
    std::string_view invalid_reason;
};

inline constexpr Entry valid(std::string_view name, std::uint32_t block, std::uint32_t bytes) {
    return {true, {name, block, bytes}, {}};
}
inline constexpr Entry retired(std::string_view why) { return {false, {}, why}; }

// Indexed by type id. Block and byte sizes from ggml's type_traits (model-math §1.5).
inline constexpr std::array<Entry, 43> kTable = {
    valid("F32", 1, 4),          // 0
    valid("F16", 1, 2),          // 1
    valid("Q4_0", 32, 18),       // 2
    valid("Q4_1", 32, 20),       // 3
    retired("retired (was Q4_2)"),  // 4
    retired("retired (was Q4_3)"),  // 5
    valid("Q5_0", 32, 22),       // 6
    valid("Q5_1", 32, 24),       // 7
    valid("Q8_0", 32, 34),       // 8
    valid("Q8_1", 32, 36),       // 9
    valid("Q2_K", 256, 84),      // 10
    valid("Q3_K", 256, 110),     // 11
    valid("Q4_K", 256, 144),     // 12
    valid("Q5_K", 256, 176),     // 13
    valid("Q6_K", 256, 210),     // 14
    valid("Q8_K", 256, 292),     // 15
    valid("IQ2_XXS", 256, 66),   // 16
    valid("IQ2_XS", 256, 74),    // 17
    valid("IQ3_XXS", 256, 98),   // 18
    valid("IQ1_S", 256, 50),     // 19
    valid("IQ4_NL", 32, 18),     // 20
    valid("IQ3_S", 256, 110),    // 21
    valid("IQ2_S", 256, 82),     // 22
    valid("IQ4_XS", 256, 136),   // 23
    valid("I8", 1, 1),           // 24
    valid("I16", 1, 2),          // 25
    valid("I32", 1, 4),          // 26
    valid("I64", 1, 8),          // 27
    valid("F64", 1, 8),          // 28
    valid("IQ1_M", 256, 56),     // 29
    valid("BF16", 1, 2),         // 30
    retired("removed (was Q4_0_4_4; ggml repacks at run time now)"),  // 31
    retired("removed (was Q4_0_4_8; ggml repacks at run time now)"),  // 32
    retired("removed (was Q4_0_8_8; ggml repacks at run time now)"),  // 33
    valid("TQ1_0", 256, 54),     // 34
    valid("TQ2_0", 256, 66),     // 35
    retired("removed (was IQ4_NL_4_4)"),  // 36
    retired("removed (was IQ4_NL_4_8)"),  // 37
    retired("removed (was IQ4_NL_8_8)"),  // 38
    valid("MXFP4", 32, 17),      // 39
    valid("NVFP4", 64, 36),      // 40
    valid("Q1_0", 128, 18),      // 41
    valid("Q2_0", 64, 18),       // 42
};

}  // namespace detail

// Traits of a valid type id, or nullopt for a retired, removed or unknown id.
constexpr std::optional<TypeTraits> type_traits(std::uint32_t id) {
    if (id >= detail::kTable.size() || !detail::kTable[id].valid) return std::nullopt;
    return detail::kTable[id].traits;
}

// Traits of a type the enum names (all valid): for tables built at compile time.
constexpr TypeTraits traits_of(GgmlType type) { return *type_traits(static_cast<std::uint32_t>(type)); }

// Why an id is not valid, for error messages: "retired (was Q4_2)", "unknown", ...
std::string_view invalid_type_reason(std::uint32_t id);

std::string_view type_name(GgmlType type);  // traits must exist

// Which types Ember computes with is the kernels' weight-format table
// (kernels/weight_format.hpp), not this one.

}  // namespace ember::gguf
