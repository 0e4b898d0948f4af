#include "gguf/ggml_type.hpp"

namespace ember::gguf {

std::string_view invalid_type_reason(std::uint32_t id) {
    if (id >= detail::kTable.size()) return "unknown (ids end at 42)";
    return detail::kTable[id].valid ? std::string_view{} : detail::kTable[id].invalid_reason;
}

std::string_view type_name(GgmlType type) {
    const auto traits = type_traits(static_cast<std::uint32_t>(type));
    return traits ? traits->name : std::string_view{"invalid"};
}

}  // namespace ember::gguf
