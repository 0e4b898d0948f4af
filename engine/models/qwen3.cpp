// The Qwen3 family (model-math §6.3): the shared decoder (llama_decoder.cpp) as Llama's,
// but with a per-head RMS norm of Q and K before RoPE (attn_q_norm, attn_k_norm), RoPE on
// half-split pairs (NEOX), no RoPE factors, and a head dimension read from the file
// (n_head * head_dim may differ from n_embd).
#include "models/qwen3.hpp"

#include <cmath>

#include "models/llama_decoder.hpp"

namespace ember::models {
namespace {

std::unique_ptr<Model> load_qwen3(const gguf::File& file, ModelConfig config) {
    return load_llama_decoder(file, std::move(config), {.head_norm = HeadNorm::QK, .rope_freqs = false});
}

// ---- the registry entry (models/family.hpp) ----

void read_config(const MetadataKeys& keys, ModelConfig& c, LayerGeometry& g) {
    c.rope_mode = RopeMode::Neox;
    require_full_rotation(keys, g, "qwen3");
}

void configure_layer(const ModelConfig&, const LayerGeometry&, std::uint32_t, LayerConfig& layer) {
    layer.attention_scale = 1.0f / std::sqrt(static_cast<float>(layer.head_dim));
}

}  // namespace

extern const FamilyInfo kQwen3Family{"qwen3", Family::Qwen3, read_config, configure_layer, load_qwen3};

}  // namespace ember::models
