#include "gguf/layout.hpp"

#include <fmt/format.h>

#include "common/error.hpp"

namespace ember::gguf {

std::uint64_t row_bytes(GgmlType type, std::uint64_t cols) {
    const auto traits = type_traits(static_cast<std::uint32_t>(type));
    return cols / traits->block_size * traits->type_size;
}

MatrixLayout matrix_layout(const File& file, const TensorInfo& tensor) {
    if (tensor.ne[2] != 1 || tensor.ne[3] != 1) {
        throw Error(file.describe_error(tensor.info_offset,
                                        fmt::format("tensor '{}' has {} dimensions [{}, {}, {}, {}], expected a matrix",
                                                    tensor.name, tensor.n_dims, tensor.ne[0], tensor.ne[1],
                                                    tensor.ne[2], tensor.ne[3])));
    }
    return {tensor.ne[1], tensor.ne[0], row_bytes(tensor.type, tensor.ne[0])};
}

std::string describe_layout(const TensorInfo& tensor) {
    if (tensor.n_dims == 1) return fmt::format("vector [{}]", tensor.ne[0]);
    std::string s = fmt::format("row-major [{}, {}] (ne[0]={} contiguous)", tensor.ne[1], tensor.ne[0], tensor.ne[0]);
    if (tensor.ne[2] != 1 || tensor.ne[3] != 1) s += fmt::format(" x [{}, {}]", tensor.ne[2], tensor.ne[3]);
    return s;
}

}  // namespace ember::gguf
