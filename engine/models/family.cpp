#include "models/family.hpp"

#include <fmt/format.h>

#include <iterator>

#include "common/error.hpp"
#include "models/gemma4.hpp"
#include "models/llama.hpp"
#include "models/qwen3.hpp"

namespace ember::models {
namespace {

// In Family order; family_info() checks each entry's place.
constexpr const FamilyInfo* kFamilies[] = {&kLlamaFamily, &kQwen3Family, &kGemma4Family};
static_assert(std::size(kFamilies) == kFamilyCount, "one registry entry per models::Family");

}  // namespace

std::span<const FamilyInfo* const> families() { return kFamilies; }

const FamilyInfo& family_info(Family family) {
    const auto index = static_cast<std::size_t>(family);
    if (index >= std::size(kFamilies) || kFamilies[index]->family != family) {
        throw Error(fmt::format("no registry entry for model family {}", index));
    }
    return *kFamilies[index];
}

std::string_view family_name(Family family) { return family_info(family).name; }

std::optional<Family> family_from_name(std::string_view name) {
    for (const FamilyInfo* info : kFamilies) {
        if (info->name == name) return info->family;
    }
    return std::nullopt;
}

std::string family_names(std::string_view separator) {
    std::string out;
    for (const FamilyInfo* info : kFamilies) out += fmt::format("{}{}", out.empty() ? "" : separator, info->name);
    return out;
}

void require_full_rotation(const MetadataKeys& keys, const LayerGeometry& g, std::string_view family) {
    if (g.n_rot != g.head_dim) {
        keys.fail(fmt::format("'{}' = {} must equal the head dimension {} for {}", keys.key("rope.dimension_count"), g.n_rot,
                              g.head_dim, family));
    }
}

}  // namespace ember::models
