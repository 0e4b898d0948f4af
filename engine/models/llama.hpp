// The Llama family (Llama 2, 3, 3.1, 3.2): model-math §5.
#pragma once

#include <memory>

#include "models/family.hpp"
#include "models/model.hpp"

namespace ember::models {

extern const FamilyInfo kLlamaFamily;  // its registry entry

}  // namespace ember::models
