#include "model_tools/quantize_rows.hpp"

#include <fmt/format.h>

#include "common/error.hpp"
#include "kernels/weight_format.hpp"

namespace ember::model_tools {

namespace {

const kernels::WeightFormat* writable_format(gguf::GgmlType type) {
    const kernels::WeightFormat* format = kernels::find_weight_format(type);
    return format && format->quantize_row ? format : nullptr;
}

}  // namespace

bool can_write_type(gguf::GgmlType type) { return writable_format(type) != nullptr; }

std::vector<std::byte> quantize_rows(gguf::GgmlType type, std::span<const float> values, std::size_t row_length) {
    const kernels::WeightFormat* format = writable_format(type);
    if (!format) throw Error(fmt::format("ember cannot write {} tensors", gguf::type_name(type)));
    if (row_length == 0 || row_length % format->block_size != 0 || values.size() % row_length != 0)
        throw Error(fmt::format("cannot write {} values in rows of {} as {} (blocks of {})", values.size(), row_length,
                                format->name, format->block_size));
    const std::size_t rows = values.size() / row_length;
    const std::size_t row_bytes = kernels::format_row_bytes(format->block_size, format->block_bytes, row_length);
    std::vector<std::byte> out(rows * row_bytes);
    for (std::size_t r = 0; r < rows; ++r)
        format->quantize_row(values.data() + r * row_length, out.data() + r * row_bytes, row_length);
    return out;
}

}  // namespace ember::model_tools
