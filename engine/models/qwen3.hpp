// The Qwen3 family (dense): model-math §6.
#pragma once

#include <memory>

#include "models/family.hpp"
#include "models/model.hpp"

namespace ember::models {

extern const FamilyInfo kQwen3Family;  // its registry entry

}  // namespace ember::models
