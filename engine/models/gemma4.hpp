// The Gemma 4 family, dense text-only (31B, E2B, E4B): model-math §7.
#pragma once

#include <memory>

#include "models/family.hpp"
#include "models/model.hpp"

namespace ember::models {

extern const FamilyInfo kGemma4Family;  // its registry entry

}  // namespace ember::models
