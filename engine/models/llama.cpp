// The Llama family (model-math §5.4): the shared decoder (llama_decoder.cpp) with RoPE on
// adjacent pairs (the converter permuted Q/K rows for llama.cpp's NORM mode), optional
// per-pair RoPE factors (rope_freqs: Llama 3 scaling baked into the file), no Q/K norms.
#include "models/llama.hpp"

#include <cmath>

#include "models/llama_decoder.hpp"

namespace ember::models {
namespace {

std::unique_ptr<Model> load_llama(const gguf::File& file, ModelConfig config) {
    return load_llama_decoder(file, std::move(config), {.head_norm = HeadNorm::None, .rope_freqs = true});
}

// ---- the registry entry (models/family.hpp) ----

void read_config(const MetadataKeys& keys, ModelConfig& c, LayerGeometry& g) {
    c.rope_mode = RopeMode::Norm;
    require_full_rotation(keys, g, "llama");
}

void configure_layer(const ModelConfig&, const LayerGeometry& g, std::uint32_t, LayerConfig& layer) {
    layer.uses_rope_freqs = g.has_rope_freqs;
    layer.attention_scale = 1.0f / std::sqrt(static_cast<float>(layer.head_dim));
}

}  // namespace

extern const FamilyInfo kLlamaFamily{"llama", Family::Llama, read_config, configure_layer, load_llama};

}  // namespace ember::models
