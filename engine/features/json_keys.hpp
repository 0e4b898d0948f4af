// Boost.JSON keeps one of two equal keys silently; a file Ember reads (a safetensors
// header, an SAE's cfg.json) with a key twice is ambiguous and refused instead.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ember::features {

// The first key that appears twice in one object of `json` (text that already parsed as
// JSON), with escapes decoded; nothing when every object's keys are distinct.
std::optional<std::string> first_duplicate_key(std::string_view json);

}  // namespace ember::features
