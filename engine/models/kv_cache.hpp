// The key/value cache of one sequence (model-math §3.8), F32 by default or F16
// (--kv-type f16). Each layer with its own K/V stores, per position, the K and V rows
// after all their transforms (projection, norms, RoPE): [capacity, n_head_kv * head_dim]
// each. A Gemma 4 layer that shares K/V
// (LayerConfig::kv_source != itself) has no storage and reads its source layer's rows.
// Position p is row p; the session tracks how many rows are filled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/kv_rows.hpp"
#include "models/model_config.hpp"

namespace ember::models {

class KvCache {
public:
    KvCache(const ModelConfig& config, std::size_t capacity, kernels::KvType type = kernels::KvType::f32);

    std::size_t capacity() const { return capacity_; }
    kernels::KvType type() const { return type_; }
    std::size_t bytes() const;
    // What a cache of `capacity` positions of `type` takes for this model.
    static std::size_t bytes_for(const ModelConfig& config, std::size_t capacity, kernels::KvType type);

    // All rows of the keys / values that `layer` attends over (its source's when shared).
    kernels::KvRows keys(std::uint32_t layer);
    kernels::KvRows values(std::uint32_t layer);

private:
    kernels::KvRows view(std::vector<std::vector<std::byte>>& storage, std::uint32_t layer);

    std::size_t capacity_ = 0;
    kernels::KvType type_ = kernels::KvType::f32;
    std::vector<std::uint32_t> source_;         // per layer: whose storage it reads
    std::vector<std::size_t> width_;            // per layer: n_head_kv * head_dim
    std::vector<std::vector<std::byte>> keys_;  // per layer; empty for layers that share
    std::vector<std::vector<std::byte>> values_;
};

}  // namespace ember::models
