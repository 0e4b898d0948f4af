#include "models/kv_cache.hpp"

#include "common/checked.hpp"
#include "common/error.hpp"

namespace ember::models {

KvCache::KvCache(const ModelConfig& config, std::size_t capacity) : capacity_(capacity) {
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
        const auto n = checked_mul(capacity, width_[l]);
        if (!n) throw Error("the KV cache size overflows");
        keys_[l].assign(*n, 0.0f);
        values_[l].assign(*n, 0.0f);
    }
}

std::size_t KvCache::bytes() const {
    std::size_t total = 0;
    for (std::size_t l = 0; l < keys_.size(); ++l) total += (keys_[l].size() + values_[l].size()) * sizeof(float);
    return total;
}

kernels::Rows KvCache::keys(std::uint32_t layer) {
    return {keys_[source_[layer]].data(), capacity_, width_[layer]};
}

kernels::Rows KvCache::values(std::uint32_t layer) {
    return {values_[source_[layer]].data(), capacity_, width_[layer]};
}

}  // namespace ember::models
