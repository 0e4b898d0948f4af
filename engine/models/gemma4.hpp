// The Gemma 4 family, dense text-only (31B, E2B, E4B): model-math §7.
#pragma once

#include <memory>

#include "models/model.hpp"

namespace ember::models {

std::unique_ptr<Model> load_gemma4(const gguf::File& file, ModelConfig config);

}  // namespace ember::models
