// The family registry, as llama.cpp's per-architecture files: one FamilyInfo per family,
// defined at the end of the family's own file (llama.cpp, qwen3.cpp, gemma4.cpp) and
// listed once in family.cpp. Everything that names or switches on a family (the config
// reader, load_model, --arch, run configs, the plugin ABI's codes, capture) derives from
// this table or is checked against it (tests/models/family_registry_test.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "gguf/gguf_file.hpp"
#include "models/model_config.hpp"

namespace ember::models {

class Model;

struct FamilyInfo {
    std::string_view name;  // general.architecture, --arch and a run config's model.arch
    Family family;
    // Reads the family's own keys after the common ones (RoPE pairing, sliding window,
    // soft-cap, shared K/V...) and refines the layer geometry; fails naming the key.
    void (*read_config)(const MetadataKeys& keys, ModelConfig& config, LayerGeometry& geometry);
    // What the family decides for layer `l` once its common values are set (attention
    // scale, RoPE factors, the layer whose K/V it reads).
    void (*configure_layer)(const ModelConfig& config, const LayerGeometry& geometry, std::uint32_t l, LayerConfig& layer);
    // Finds and checks the weights (tensor_loader.hpp); `file` must outlive the model.
    std::unique_ptr<Model> (*load)(const gguf::File& file, ModelConfig config);
};

// Every family, in Family order (so families()[i]->family == Family(i)).
std::span<const FamilyInfo* const> families();
const FamilyInfo& family_info(Family family);
// The names joined: family_names(", ") is "llama, qwen3, gemma4".
std::string family_names(std::string_view separator);

// Shared by the readers of families whose RoPE rotates the whole head (Llama, Qwen3).
void require_full_rotation(const MetadataKeys& keys, const LayerGeometry& geometry, std::string_view family);

}  // namespace ember::models
