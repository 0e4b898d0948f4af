// Reading a tensor's values as F32, for the model tools.
#pragma once

#include <vector>

#include "gguf/gguf_file.hpp"

namespace ember::model_tools {

// Every element of an F32, F16 or BF16 tensor, converted exactly to F32. ember::Error
// naming the file and tensor for any other type.
std::vector<float> tensor_as_f32(const gguf::File& file, const gguf::TensorInfo& tensor);

}  // namespace ember::model_tools
