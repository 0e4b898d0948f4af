// Finds a model's weights in a GGUF file and checks them against the hyperparameters
// before anything runs. Every failure is an ember::Error naming the file and tensor:
//   "model.gguf: tensor 'blk.0.attn_q.weight' has shape [64, 32], expected [64, 64] ..."
//   "model.gguf: tensor 'blk.5.attn_norm.weight' is missing (llama.block_count = 6 but the
//    file has tensors for blocks 0-4 only)"
// Shapes are written as GGUF stores them, ne[0] first: a matrix with `rows` output
// features of `cols` inputs is [cols, rows].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "kernels/weight.hpp"
#include "models/model_config.hpp"

namespace ember::models {

class TensorLoader {
public:
    TensorLoader(const gguf::File& file, const ModelConfig& config);

    // "blk.3.attn_q.weight" for (3, "attn_q").
    static std::string layer_weight(std::uint32_t layer, std::string_view name);

    // A [rows = outputs, cols = inputs] matrix in a type the kernels compute with.
    kernels::WeightMatrix matrix(const std::string& name, std::size_t rows, std::size_t cols) const;
    std::optional<kernels::WeightMatrix> optional_matrix(const std::string& name, std::size_t rows,
                                                         std::size_t cols) const;

    // A vector of n values (norm weights, RoPE factors, scales), converted to F32.
    std::vector<float> vector(const std::string& name, std::size_t n) const;
    std::optional<std::vector<float>> optional_vector(const std::string& name, std::size_t n) const;

    // Refuses a file that carries a tensor Ember does not implement (biases, fused QKV,
    // mixture-of-experts routers), rather than silently ignoring it.
    void refuse_if_present(const std::string& name, std::string_view what) const;

private:
    const gguf::TensorInfo& find(const std::string& name) const;
    void check_computable(const gguf::TensorInfo& tensor) const;
    [[noreturn]] void fail(const std::string& message) const;

    const gguf::File& file_;
    const ModelConfig& config_;
    std::optional<std::uint32_t> last_block_present_;  // highest N of any "blk.N." tensor
};

}  // namespace ember::models
