// The hyperparameters of a model, read from GGUF metadata with llama.cpp's defaults
// (model-math §4-§7) and validated. Configs are data: the family code reads these
// fields and never looks at metadata keys itself. Per-layer values live in `layers`,
// so Gemma 4's mixed sliding-window / full geometry needs no special cases.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.hpp"

namespace ember::models {

// The families Ember runs; each has one entry in the registry (models/family.hpp), and
// plugin.h's EMBER_FAMILY_* codes are these values (checked where the runner passes them).
enum class Family { Llama, Qwen3, Gemma4 };
inline constexpr std::size_t kFamilyCount = 3;

// From the registry: the entry's name ("llama", "qwen3", "gemma4").
std::string_view family_name(Family family);
std::optional<Family> family_from_name(std::string_view name);

// RoPE pairing: Norm rotates adjacent pairs (x[2i], x[2i+1]); Neox rotates
// (x[i], x[i + n_rot/2]) (model-math §3.2).
enum class RopeMode { Norm, Neox };

struct LayerConfig {
    std::uint32_t n_head = 0;
    std::uint32_t n_head_kv = 0;
    std::uint32_t head_dim = 0;  // D for Q, K and V (llama.cpp requires K and V to agree)
    std::uint32_t n_rot = 0;     // rotated dims per head (<= head_dim)
    std::uint32_t n_ff = 0;
    float rope_base = 10000.0f;
    float rope_freq_scale = 1.0f;
    bool sliding_window = false;   // Gemma 4: masked to the last n_swa positions
    bool uses_rope_freqs = false;  // divide each pair's angle by rope_freqs.weight
    float attention_scale = 1.0f;  // multiplies q.k before softmax
    std::uint32_t kv_source = 0;   // the layer whose K/V cache this layer reads (itself unless shared)

    bool has_own_kv(std::uint32_t self) const { return kv_source == self; }
};

struct ModelConfig {
    Family family = Family::Llama;
    std::string architecture;  // general.architecture as stored
    std::string name;          // general.name, else the file name without .gguf
    std::uint32_t n_layers = 0;
    std::uint32_t n_embd = 0;
    std::uint32_t n_vocab = 0;
    std::uint32_t n_ctx_train = 0;
    float rms_eps = 0;
    RopeMode rope_mode = RopeMode::Norm;

    // RoPE scaling (model-math §3.2, §4). ext_factor != 0 only for YaRN.
    std::string rope_scaling_type = "linear";
    float rope_attn_factor = 1.0f;
    float yarn_ext_factor = 0.0f;
    float yarn_beta_fast = 32.0f;
    float yarn_beta_slow = 1.0f;
    std::uint32_t n_ctx_orig = 0;

    float embedding_scale = 1.0f;       // Gemma 4: sqrtf(n_embd)
    float final_logit_softcap = 0.0f;   // 0 = off
    std::uint32_t n_swa = 0;            // Gemma 4 sliding window (tokens, self included)
    std::uint32_t n_embd_per_layer = 0; // Gemma 4 per-layer embedding width (0 = none)
    std::uint32_t n_shared_kv_layers = 0;

    std::vector<LayerConfig> layers;
};

// Limits no real model comes near; beyond them the file is refused as hostile.
struct ConfigLimits {
    static constexpr std::uint32_t max_layers = 1024;
    static constexpr std::uint32_t max_embd = 1u << 17;
    static constexpr std::uint32_t max_heads = 4096;
    static constexpr std::uint32_t max_head_dim = 4096;
    static constexpr std::uint32_t max_ff = 1u << 20;
    static constexpr std::uint32_t max_vocab = 1u << 24;
};

// Reads "<architecture>.<suffix>" keys of a file, failing with "PATH: message".
class MetadataKeys {
public:
    MetadataKeys(const gguf::File& file, std::string arch) : file_(file), arch_(std::move(arch)) {}

    const gguf::File& file() const { return file_; }
    std::string key(std::string_view suffix) const;

    std::optional<std::uint32_t> u32(std::string_view suffix) const { return file_.get_u32(key(suffix)); }
    std::optional<float> f32(std::string_view suffix) const { return file_.get_f32(key(suffix)); }
    std::optional<std::string_view> string(std::string_view suffix) const { return file_.get_string(key(suffix)); }
    std::uint32_t required_u32(std::string_view suffix) const;
    float required_f32(std::string_view suffix) const;
    // A per-layer value (scalar broadcast or array of n_layers), or `fallback` if absent.
    std::vector<std::int64_t> per_layer(std::string_view suffix, std::size_t n_layers,
                                        std::optional<std::int64_t> fallback) const;
    void require_finite_positive(std::string_view suffix, float value) const;

    [[noreturn]] void fail(const std::string& message) const;

private:
    const gguf::File& file_;
    std::string arch_;
};

// The layer geometry read from the keys every family shares, which a family's reader
// (FamilyInfo::read_config) may refine before each LayerConfig is filled in.
struct LayerGeometry {
    std::uint32_t head_dim = 0;      // attention.key_length (= value_length)
    std::uint32_t n_rot = 0;         // rope.dimension_count
    float rope_base = 10000.0f;      // rope.freq_base
    float rope_freq_scale = 1.0f;    // 1 / the RoPE scaling factor
    bool has_rope_freqs = false;     // the file has rope_freqs.weight
    // Sliding-window layers (Gemma 4): which ones (0 or 1 per layer) and their geometry.
    std::vector<std::int64_t> sliding_window;
    std::uint32_t head_dim_swa = 0;
    std::uint32_t n_rot_swa = 0;
    float rope_base_swa = 10000.0f;
};

// Reads and validates the config. `expected` is an explicit --arch: a file of another
// architecture is an error. Unsupported architectures are named in the error.
ModelConfig load_model_config(const gguf::File& file, std::optional<Family> expected = std::nullopt);

// The model name rule: general.name, else the file name without ".gguf".
std::string model_name(const gguf::File& file);

}  // namespace ember::models
