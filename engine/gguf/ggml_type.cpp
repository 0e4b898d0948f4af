#include "gguf/ggml_type.hpp"

#include <array>

namespace ember::gguf {
namespace {

struct Entry {
    bool valid;
    TypeTraits traits;
    std::string_view invalid_reason;
};

constexpr Entry valid(std::string_view name, std::uint32_t block, std::uint32_t bytes) {
    return {true, {name, block, bytes}, {}};
}
constexpr Entry retired(std::string_view why) { return {false, {}, why}; }

// Indexed by type id. Block and byte sizes from ggml's type_traits (model-math §1.5).
constexpr std::array<Entry, 43> kTable = {
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

}  // namespace

std::optional<TypeTraits> type_traits(std::uint32_t id) {
    if (id >= kTable.size() || !kTable[id].valid) return std::nullopt;
    return kTable[id].traits;
}

std::string_view invalid_type_reason(std::uint32_t id) {
    if (id >= kTable.size()) return "unknown (ids end at 42)";
    return kTable[id].valid ? std::string_view{} : kTable[id].invalid_reason;
}

std::string_view type_name(GgmlType type) {
    const auto traits = type_traits(static_cast<std::uint32_t>(type));
    return traits ? traits->name : std::string_view{"invalid"};
}

}  // namespace ember::gguf
