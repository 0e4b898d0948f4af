#include "models/tensor_loader.hpp"

#include <fmt/format.h>

#include <charconv>

#include "common/error.hpp"
#include "gguf/layout.hpp"
#include "kernels/reference/kernels.hpp"
#include "kernels/weight_format.hpp"

namespace ember::models {
namespace {

// The block index of "blk.N.anything", if the name has that form.
std::optional<std::uint32_t> block_of(std::string_view name) {
    constexpr std::string_view prefix = "blk.";
    if (!name.starts_with(prefix)) return std::nullopt;
    name.remove_prefix(prefix.size());
    std::uint32_t block = 0;
    const auto [end, ec] = std::from_chars(name.data(), name.data() + name.size(), block);
    if (ec != std::errc() || end == name.data() || end == name.data() + name.size() || *end != '.') return std::nullopt;
    return block;
}

std::string shape_text(const gguf::TensorInfo& t) {
    std::string s = "[";
    for (std::uint32_t d = 0; d < std::max<std::uint32_t>(t.n_dims, 1); ++d) s += fmt::format("{}{}", d ? ", " : "", t.ne[d]);
    return s + "]";
}

}  // namespace

TensorLoader::TensorLoader(const gguf::File& file, const ModelConfig& config) : file_(file), config_(config) {
    for (const auto& t : file.tensors()) {
        if (auto block = block_of(t.name)) {
            last_block_present_ = std::max(last_block_present_.value_or(0), *block);
        }
    }
}

std::string TensorLoader::layer_weight(std::uint32_t layer, std::string_view name) {
    return fmt::format("blk.{}.{}.weight", layer, name);
}

void TensorLoader::fail(const std::string& message) const { throw Error(fmt::format("{}: {}", file_.source(), message)); }

const gguf::TensorInfo& TensorLoader::find(const std::string& name) const {
    if (const auto* t = file_.find_tensor(name)) return *t;
    const auto block = block_of(name);
    if (block && (!last_block_present_ || *block > *last_block_present_)) {
        const std::string present = last_block_present_ ? fmt::format("blocks 0-{} only", *last_block_present_) : "no blocks";
        fail(fmt::format("tensor '{}' is missing ({}.block_count = {} but the file has tensors for {})", name,
                         config_.architecture, config_.n_layers, present));
    }
    fail(fmt::format("tensor '{}' is missing", name));
}

void TensorLoader::check_computable(const gguf::TensorInfo& tensor) const {
    if (!kernels::find_weight_format(tensor.type)) {
        fail(fmt::format("tensor '{}' has type {}; Ember computes with {} weights only", tensor.name,
                         gguf::type_name(tensor.type), kernels::supported_weight_format_names()));
    }
}

kernels::WeightMatrix TensorLoader::matrix(const std::string& name, std::size_t rows, std::size_t cols) const {
    const gguf::TensorInfo& t = find(name);
    if (t.n_dims > 2 || t.ne[0] != cols || t.ne[1] != rows) {
        fail(fmt::format("tensor '{}' has shape {}, expected [{}, {}] ([inputs, outputs], ne[0] first)", name,
                         shape_text(t), cols, rows));
    }
    check_computable(t);
    const gguf::MatrixLayout layout = gguf::matrix_layout(file_, t);
    kernels::WeightMatrix m;
    m.type = t.type;
    m.data = file_.tensor_data(t).data();
    m.rows = layout.rows;
    m.cols = layout.cols;
    m.row_bytes = layout.row_bytes;
    return m;
}

std::optional<kernels::WeightMatrix> TensorLoader::optional_matrix(const std::string& name, std::size_t rows,
                                                                   std::size_t cols) const {
    if (!file_.find_tensor(name)) return std::nullopt;
    return matrix(name, rows, cols);
}

std::vector<float> TensorLoader::vector(const std::string& name, std::size_t n) const {
    const gguf::TensorInfo& t = find(name);
    if (t.n_elements != n || t.ne[0] != n) {
        fail(fmt::format("tensor '{}' has shape {}, expected [{}]", name, shape_text(t), n));
    }
    check_computable(t);
    std::vector<float> values(n);
    kernels::reference::dequantize_row(t.type, file_.tensor_data(t).data(), values.data(), n);
    return values;
}

std::optional<std::vector<float>> TensorLoader::optional_vector(const std::string& name, std::size_t n) const {
    if (!file_.find_tensor(name)) return std::nullopt;
    return vector(name, n);
}

void TensorLoader::refuse_if_present(const std::string& name, std::string_view what) const {
    if (file_.find_tensor(name)) fail(fmt::format("tensor '{}' ({}) is not supported by Ember", name, what));
}

}  // namespace ember::models
