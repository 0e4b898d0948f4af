#include "model_tools/tensor_rows.hpp"

#include <fmt/format.h>

#include <cstring>

#include "common/error.hpp"
#include "kernels/fast/half_precision.hpp"

namespace ember::model_tools {

std::vector<float> tensor_as_f32(const gguf::File& file, const gguf::TensorInfo& tensor) {
    const auto data = file.tensor_data(tensor);
    std::vector<float> values(tensor.n_elements);
    switch (tensor.type) {
        case gguf::GgmlType::F32:
            std::memcpy(values.data(), data.data(), values.size() * 4);
            break;
        case gguf::GgmlType::F16:
        case gguf::GgmlType::BF16:
            for (std::size_t i = 0; i < values.size(); ++i) {
                std::uint16_t h;
                std::memcpy(&h, data.data() + 2 * i, 2);
                values[i] = tensor.type == gguf::GgmlType::F16 ? kernels::fast::fp16_to_fp32(h) : kernels::fast::bf16_to_fp32(h);
            }
            break;
        default:
            throw Error(fmt::format("{}: tensor '{}' is {}; ember quantize converts F32, F16 and BF16 weights", file.source(),
                                    tensor.name, gguf::type_name(tensor.type)));
    }
    return values;
}

}  // namespace ember::model_tools
