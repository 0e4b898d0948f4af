#include "model_tools/tensor_rows.hpp"

#include <fmt/format.h>

#include "common/error.hpp"
#include "kernels/weight_format.hpp"

namespace ember::model_tools {

// The weight-format table's reader for the type: the float formats only (ember quantize
// does not requantize a quantized tensor, as llama-quantize without --allow-requantize).
std::vector<float> tensor_as_f32(const gguf::File& file, const gguf::TensorInfo& tensor) {
    const kernels::WeightFormat* format = kernels::find_weight_format(tensor.type);
    if (!format || format->block_size != 1)
        throw Error(fmt::format("{}: tensor '{}' is {}; ember quantize converts F32, F16 and BF16 weights", file.source(),
                                tensor.name, gguf::type_name(tensor.type)));
    std::vector<float> values(tensor.n_elements);
    format->dequantize_row(file.tensor_data(tensor).data(), values.data(), values.size());
    return values;
}

}  // namespace ember::model_tools
