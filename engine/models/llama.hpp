// The Llama family (Llama 2, 3, 3.1, 3.2): model-math §5.
#pragma once

#include <memory>

#include "models/model.hpp"

namespace ember::models {

std::unique_ptr<Model> load_llama(const gguf::File& file, ModelConfig config);

}  // namespace ember::models
