// The Qwen3 family (dense): model-math §6.
#pragma once

#include <memory>

#include "models/model.hpp"

namespace ember::models {

std::unique_ptr<Model> load_qwen3(const gguf::File& file, ModelConfig config);

}  // namespace ember::models
