#include "models/kv_cache.hpp"

#include "common/checked.hpp"
#include "common/error.hpp"

namespace ember::models {

KvCache::KvCache(const ModelConfig& config, std::size_t capacity, kernels::KvType type) : capacity_(capacity), type_(type) {
    const std::size_t n_layers = config.layers.size();
    source_.resize(n_layers);
    width_.resize(n_layers);
    keys_.resize(n_layers);
    values_.resize(n_layers);
    for (std::uint32_t l = 0; l < n_layers; ++l) {
        const LayerConfig& layer = config.layers[l];
        source_[l] = layer.kv_source;
        width_[l] = std::size_t{layer.n_head_kv} * layer.head_dim;
        if (!layer.has_own_kv(l)) continue;
        const auto n = checked_mul(capacity, width_[l] * kernels::kv_element_bytes(type));
        if (!n) throw Error("the KV cache size overflows");
        keys_[l].assign(*n, std::byte{0});
        values_[l].assign(*n, std::byte{0});
    }
}

std::size_t KvCache::bytes() const {
    std::size_t total = 0;
    for (std::size_t l = 0; l < keys_.size(); ++l) total += keys_[l].size() + values_[l].size();
    return total;
}

std::size_t KvCache::bytes_for(const ModelConfig& config, std::size_t capacity, kernels::KvType type) {
    std::size_t total = 0;
    for (std::uint32_t l = 0; l < config.layers.size(); ++l) {
        const LayerConfig& layer = config.layers[l];
        if (layer.has_own_kv(l)) total += 2 * capacity * layer.n_head_kv * layer.head_dim * kernels::kv_element_bytes(type);
    }
    return total;
}

kernels::KvRows KvCache::view(std::vector<std::vector<std::byte>>& storage, std::uint32_t layer) {
    const std::size_t row_bytes = width_[layer] * kernels::kv_element_bytes(type_);
    return {type_, storage[source_[layer]].data(), capacity_, width_[layer], row_bytes};
}

kernels::KvRows KvCache::keys(std::uint32_t layer) { return view(keys_, layer); }
kernels::KvRows KvCache::values(std::uint32_t layer) { return view(values_, layer); }

}  // namespace ember::models
