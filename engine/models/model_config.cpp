#include "models/model_config.hpp"

#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "common/error.hpp"
#include "models/family.hpp"

namespace ember::models {
namespace {

std::uint32_t checked_count(const MetadataKeys& keys, std::string_view what, std::int64_t value, std::uint32_t layer,
                            std::uint32_t max) {
    if (value <= 0 || value > static_cast<std::int64_t>(max)) {
        keys.fail(fmt::format("layer {}: {} = {} is out of range (1 to {})", layer, what, value, max));
    }
    return static_cast<std::uint32_t>(value);
}

std::uint32_t vocab_size(const gguf::File& file, const MetadataKeys& keys) {
    std::optional<std::uint64_t> from_tokens;
    if (const auto* tokens = file.find("tokenizer.ggml.tokens")) {
        if (tokens->value.type != gguf::ValueType::ARRAY) keys.fail("'tokenizer.ggml.tokens' is not an array");
        from_tokens = tokens->value.count;
    }
    std::optional<std::uint64_t> from_embd;
    if (const auto* embd = file.find_tensor("token_embd.weight")) from_embd = embd->ne[1];
    if (from_tokens && from_embd && *from_tokens != *from_embd) {
        keys.fail(fmt::format("the vocabulary has {} tokens but token_embd.weight has {} rows", *from_tokens, *from_embd));
    }
    const std::uint64_t n = from_embd ? *from_embd : from_tokens.value_or(0);
    if (n == 0 || n > ConfigLimits::max_vocab) keys.fail(fmt::format("vocabulary size {} is out of range", n));
    return static_cast<std::uint32_t>(n);
}

}  // namespace

std::string MetadataKeys::key(std::string_view suffix) const { return fmt::format("{}.{}", arch_, suffix); }

std::uint32_t MetadataKeys::required_u32(std::string_view suffix) const {
    const auto v = u32(suffix);
    if (!v) fail(fmt::format("required metadata key '{}' is missing", key(suffix)));
    return *v;
}

float MetadataKeys::required_f32(std::string_view suffix) const {
    const auto v = f32(suffix);
    if (!v) fail(fmt::format("required metadata key '{}' is missing", key(suffix)));
    return *v;
}

std::vector<std::int64_t> MetadataKeys::per_layer(std::string_view suffix, std::size_t n_layers,
                                                  std::optional<std::int64_t> fallback) const {
    if (auto v = file_.get_per_layer(key(suffix), n_layers)) return *v;
    if (!fallback) fail(fmt::format("required metadata key '{}' is missing", key(suffix)));
    return std::vector<std::int64_t>(n_layers, *fallback);
}

void MetadataKeys::require_finite_positive(std::string_view suffix, float v) const {
    if (!(std::isfinite(v) && v > 0)) fail(fmt::format("{} = {} must be a positive finite number", key(suffix), v));
}

void MetadataKeys::fail(const std::string& message) const { throw Error(fmt::format("{}: {}", file_.source(), message)); }

std::string model_name(const gguf::File& file) {
    if (auto name = file.get_string("general.name"); name && !name->empty()) return std::string(*name);
    std::filesystem::path p(file.source());
    std::string stem = p.filename().string();
    if (stem.size() > 5 && stem.ends_with(".gguf")) stem.resize(stem.size() - 5);
    return stem;
}

ModelConfig load_model_config(const gguf::File& file, std::optional<Family> expected) {
    const auto arch = file.get_string("general.architecture");
    if (!arch) throw Error(fmt::format("{}: required metadata key 'general.architecture' is missing", file.source()));
    const auto family = family_from_name(*arch);
    if (!family) {
        throw Error(fmt::format("{}: unsupported architecture '{}' (supported: {})", file.source(), *arch, family_names(", ")));
    }
    if (expected && *expected != *family) {
        throw Error(fmt::format("{}: --arch {} was requested but the file's architecture is '{}'", file.source(),
                                family_name(*expected), *arch));
    }

    ModelConfig c;
    c.family = *family;
    c.architecture = std::string(*arch);
    c.name = model_name(file);
    const MetadataKeys keys(file, c.architecture);

    c.n_ctx_train = keys.required_u32("context_length");
    c.n_embd = keys.required_u32("embedding_length");
    c.n_layers = keys.required_u32("block_count");
    if (c.n_ctx_train == 0) keys.fail(fmt::format("'{}' is 0", keys.key("context_length")));
    if (c.n_embd == 0 || c.n_embd > ConfigLimits::max_embd) {
        keys.fail(fmt::format("'{}' = {} is out of range (1 to {})", keys.key("embedding_length"), c.n_embd, ConfigLimits::max_embd));
    }
    if (c.n_layers == 0 || c.n_layers > ConfigLimits::max_layers) {
        keys.fail(fmt::format("'{}' = {} is out of range (1 to {})", keys.key("block_count"), c.n_layers, ConfigLimits::max_layers));
    }
    c.n_vocab = vocab_size(file, keys);
    c.rms_eps = keys.required_f32("attention.layer_norm_rms_epsilon");
    keys.require_finite_positive("attention.layer_norm_rms_epsilon", c.rms_eps);

    const std::size_t L = c.n_layers;
    const auto n_head = keys.per_layer("attention.head_count", L, 0);
    const auto n_ff = keys.per_layer("feed_forward_length", L, 0);
    // head_count_kv defaults to head_count, layer by layer.
    std::vector<std::int64_t> n_head_kv = n_head;
    if (file.has(keys.key("attention.head_count_kv"))) n_head_kv = keys.per_layer("attention.head_count_kv", L, std::nullopt);

    // Head geometry. key_length defaults to E / H (of layer 0, as llama.cpp does).
    if (n_head[0] <= 0 || n_head[0] > ConfigLimits::max_heads) {
        keys.fail(fmt::format("'{}' must be between 1 and {} (got {})", keys.key("attention.head_count"),
                              ConfigLimits::max_heads, n_head[0]));
    }
    const std::uint32_t default_head_dim = c.n_embd / static_cast<std::uint32_t>(n_head[0]);
    const std::uint32_t key_length = keys.u32("attention.key_length").value_or(default_head_dim);
    const std::uint32_t value_length = keys.u32("attention.value_length").value_or(default_head_dim);
    if (key_length != value_length) {
        keys.fail(fmt::format("key_length {} differs from value_length {}; Ember requires them equal", key_length, value_length));
    }
    LayerGeometry g;
    g.head_dim = key_length;
    g.n_rot = keys.u32("rope.dimension_count").value_or(key_length);

    // RoPE scaling (model-math §4).
    g.rope_base = keys.f32("rope.freq_base").value_or(10000.0f);
    keys.require_finite_positive("rope.freq_base", g.rope_base);
    c.rope_scaling_type = std::string(keys.string("rope.scaling.type").value_or("linear"));
    if (c.rope_scaling_type != "none" && c.rope_scaling_type != "linear" && c.rope_scaling_type != "yarn") {
        keys.fail(fmt::format("unsupported rope scaling type '{}' (supported: none, linear, yarn)", c.rope_scaling_type));
    }
    float factor = keys.f32("rope.scaling.factor").value_or(0.0f);
    if (factor == 0.0f) factor = keys.f32("rope.scale_linear").value_or(0.0f);
    if (!(std::isfinite(factor) && factor >= 0)) keys.fail(fmt::format("rope scaling factor {} is invalid", factor));
    g.rope_freq_scale = factor == 0.0f || c.rope_scaling_type == "none" ? 1.0f : 1.0f / factor;
    c.n_ctx_orig = keys.u32("rope.scaling.original_context_length").value_or(c.n_ctx_train);
    c.rope_attn_factor = keys.f32("rope.scaling.attn_factor").value_or(1.0f);
    c.yarn_ext_factor = c.rope_scaling_type == "yarn" ? 1.0f : 0.0f;

    g.has_rope_freqs = file.find_tensor("rope_freqs.weight") != nullptr;

    // Full-attention layers unless the family's keys say otherwise.
    g.sliding_window.assign(L, 0);
    g.head_dim_swa = g.head_dim;
    g.n_rot_swa = g.n_rot;
    const FamilyInfo& info = family_info(c.family);
    info.read_config(keys, c, g);

    // Per-layer geometry.
    c.layers.resize(L);
    for (std::uint32_t l = 0; l < c.n_layers; ++l) {
        LayerConfig& layer = c.layers[l];
        layer.n_head = checked_count(keys, "attention.head_count", n_head[l], l, ConfigLimits::max_heads);
        layer.n_head_kv = checked_count(keys, "attention.head_count_kv", n_head_kv[l], l, ConfigLimits::max_heads);
        layer.n_ff = checked_count(keys, "feed_forward_length", n_ff[l], l, ConfigLimits::max_ff);
        if (layer.n_head % layer.n_head_kv != 0) {
            keys.fail(fmt::format("layer {}: head_count {} is not a multiple of head_count_kv {}", l, layer.n_head, layer.n_head_kv));
        }
        layer.sliding_window = g.sliding_window[l] != 0;
        layer.head_dim = layer.sliding_window ? g.head_dim_swa : g.head_dim;
        layer.n_rot = layer.sliding_window ? g.n_rot_swa : g.n_rot;
        layer.rope_base = layer.sliding_window ? g.rope_base_swa : g.rope_base;
        layer.rope_freq_scale = layer.sliding_window ? 1.0f : g.rope_freq_scale;
        layer.kv_source = l;
        info.configure_layer(c, g, l, layer);
        if (layer.head_dim == 0 || layer.head_dim > ConfigLimits::max_head_dim) {
            keys.fail(fmt::format("layer {}: head dimension {} is out of range", l, layer.head_dim));
        }
        if (layer.n_rot == 0 || layer.n_rot > layer.head_dim || layer.n_rot % 2 != 0) {
            keys.fail(fmt::format("layer {}: rotary dimension count {} must be even and within the head dimension {}", l,
                                  layer.n_rot, layer.head_dim));
        }
    }
    // A shared layer reads its source's cache with its own geometry, so they must agree.
    for (std::uint32_t l = 0; l < c.n_layers; ++l) {
        const LayerConfig& layer = c.layers[l];
        const LayerConfig& src = c.layers[layer.kv_source];
        if (layer.kv_source != l && (src.head_dim != layer.head_dim || src.n_head_kv != layer.n_head_kv ||
                                     src.sliding_window != layer.sliding_window)) {
            keys.fail(fmt::format("layer {} shares the K/V of layer {} but their geometry differs", l, layer.kv_source));
        }
    }
    return c;
}

}  // namespace ember::models
