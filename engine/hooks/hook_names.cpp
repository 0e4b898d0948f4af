#include "hooks/hook_names.hpp"

#include <fmt/format.h>

#include <array>
#include <charconv>

#include "common/error.hpp"

namespace ember::hooks {
namespace {

// One row per foreign name. `pattern` holds "{L}" where the layer index goes (at most
// once); a row with `refusal` set is a name Ember knows and cannot honour.
struct HookNameRow {
    std::string_view pattern;
    Stage stage;
    PostNormUse post_norm;
    std::string_view refusal;  // empty: the name maps onto `stage`
};

// clang-format off
constexpr std::array kHookNames = {
    // TransformerLens (HookedTransformer's hook points; resid_mid = resid_pre + attn_out)
    HookNameRow{"blocks.{L}.hook_resid_pre",     Stage::BeforeLayer,      PostNormUse::Same, ""},
    HookNameRow{"blocks.{L}.hook_attn_out",      Stage::AfterAttention,   PostNormUse::Same, ""},
    HookNameRow{"blocks.{L}.hook_resid_mid",     Stage::ResidualMid,      PostNormUse::Same, ""},
    HookNameRow{"blocks.{L}.hook_mlp_in",        Stage::ResidualMid,      PostNormUse::Same, ""},
    HookNameRow{"blocks.{L}.hook_mlp_out",       Stage::AfterMlp,         PostNormUse::Same, ""},
    HookNameRow{"blocks.{L}.hook_resid_post",    Stage::AfterLayer,       PostNormUse::Same, ""},
    HookNameRow{"blocks.{L}.attn.hook_z",        Stage::HeadOutputs,      PostNormUse::Same, ""},
    HookNameRow{"blocks.{L}.attn.hook_pattern",  Stage::AttentionPattern, PostNormUse::Same, ""},
    HookNameRow{"blocks.{L}.mlp.hook_post",      Stage::MlpActivation,    PostNormUse::Same, ""},
    HookNameRow{"blocks.{L}.ln2.hook_normalized", Stage::MlpInput,        PostNormUse::Same,
                "the MLP's input norm before its weight (TransformerLens folds the weight into the MLP's input "
                "weights); Ember's mlp_input is after the weight, so it is a different tensor"},
    HookNameRow{"blocks.{L}.mlp.hook_pre",       Stage::MlpActivation,    PostNormUse::Same,
                "the MLP's pre-activation, for which Ember has no stage (mlp.hook_post is mlp_activation)"},
    HookNameRow{"ln_final.hook_normalized",      Stage::BeforeLogits,     PostNormUse::Same,
                "the final norm before its weight (TransformerLens folds the weight into the unembedding); "
                "Ember's before_logits is after the weight, so it is a different tensor"},
    // Hugging Face module names (a module's output unless `.input` says otherwise)
    HookNameRow{"model.layers.{L}",              Stage::AfterLayer,       PostNormUse::Same, ""},
    HookNameRow{"model.layers.{L}.output",       Stage::AfterLayer,       PostNormUse::Same, ""},
    HookNameRow{"model.layers.{L}.input",        Stage::BeforeLayer,      PostNormUse::Same, ""},
    HookNameRow{"model.layers.{L}.self_attn",    Stage::AfterAttention,   PostNormUse::BeforePostNorm, ""},
    HookNameRow{"model.layers.{L}.self_attn.output", Stage::AfterAttention, PostNormUse::BeforePostNorm, ""},
    HookNameRow{"model.layers.{L}.self_attn.o_proj.input", Stage::HeadOutputs, PostNormUse::Same, ""},
    HookNameRow{"model.layers.{L}.post_attention_layernorm", Stage::AfterAttention,
                PostNormUse::AttentionPostNormOrMlpInput, ""},
    HookNameRow{"model.layers.{L}.post_attention_layernorm.output", Stage::AfterAttention,
                PostNormUse::AttentionPostNormOrMlpInput, ""},
    HookNameRow{"model.layers.{L}.pre_feedforward_layernorm", Stage::MlpInput, PostNormUse::Same, ""},
    HookNameRow{"model.layers.{L}.pre_feedforward_layernorm.output", Stage::MlpInput, PostNormUse::Same, ""},
    HookNameRow{"model.layers.{L}.mlp.input",    Stage::MlpInput,         PostNormUse::Same, ""},
    HookNameRow{"model.layers.{L}.mlp",          Stage::AfterMlp,         PostNormUse::BeforePostNorm, ""},
    HookNameRow{"model.layers.{L}.mlp.output",   Stage::AfterMlp,         PostNormUse::BeforePostNorm, ""},
    HookNameRow{"model.layers.{L}.mlp.down_proj.input", Stage::MlpActivation, PostNormUse::Same, ""},
    HookNameRow{"model.layers.{L}.post_feedforward_layernorm", Stage::AfterMlp, PostNormUse::PostNormOnly, ""},
    HookNameRow{"model.layers.{L}.post_feedforward_layernorm.output", Stage::AfterMlp, PostNormUse::PostNormOnly, ""},
    HookNameRow{"model.norm",                    Stage::BeforeLogits,     PostNormUse::Same, ""},
    HookNameRow{"model.norm.output",             Stage::BeforeLogits,     PostNormUse::Same, ""},
};
// clang-format on

// Gemma 3/4 checkpoints nest the text model one level deeper.
constexpr std::string_view kHfNestedPrefix = "model.language_model.";

// A layer index as the names spell it: decimal digits, no sign, no leading zero.
std::optional<std::uint32_t> parse_layer(std::string_view digits) {
    if (digits.empty() || digits.size() > 6 || (digits.size() > 1 && digits[0] == '0')) return std::nullopt;
    std::uint32_t value = 0;
    const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
    if (ec != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
    return value;
}

// The layer `name` has where `pattern` has "{L}" (or 0 for a pattern without one), or
// nothing when it does not match.
std::optional<std::uint32_t> match(std::string_view pattern, std::string_view name) {
    const std::size_t slot = pattern.find("{L}");
    if (slot == std::string_view::npos) return pattern == name ? std::optional<std::uint32_t>(0) : std::nullopt;
    const std::string_view prefix = pattern.substr(0, slot);
    const std::string_view suffix = pattern.substr(slot + 3);
    if (name.size() < prefix.size() + suffix.size() || !name.starts_with(prefix) || !name.ends_with(suffix))
        return std::nullopt;
    return parse_layer(name.substr(prefix.size(), name.size() - prefix.size() - suffix.size()));
}

// Ember's own spelling: "after_layer:12" for a layer stage, "before_logits" for a logits stage.
std::optional<HookSite> resolve_ember_site(std::string_view name) {
    const std::size_t colon = name.find(':');
    const std::string_view stage_part = name.substr(0, colon);
    for (Stage s : kTensorStages) {
        if (stage_name(s) != stage_part) continue;
        if (!is_layer_stage(s)) {
            if (colon != std::string_view::npos) return std::nullopt;
            return HookSite{s, std::nullopt, PostNormUse::Same};
        }
        if (colon == std::string_view::npos) return std::nullopt;
        const auto layer = parse_layer(name.substr(colon + 1));
        if (!layer) return std::nullopt;
        return HookSite{s, *layer, PostNormUse::Same};
    }
    return std::nullopt;
}

}  // namespace

HookSite resolve_hook_name(std::string_view name) {
    if (auto site = resolve_ember_site(name)) return *site;
    std::string nested;
    std::string_view plain = name;
    if (name.starts_with(kHfNestedPrefix)) {
        nested = "model." + std::string(name.substr(kHfNestedPrefix.size()));
        plain = nested;
    }
    for (const HookNameRow& row : kHookNames) {
        const auto layer = match(row.pattern, plain);
        if (!layer) continue;
        if (!row.refusal.empty()) throw Error(fmt::format("hook name '{}': {}", name, row.refusal));
        HookSite site{row.stage, std::nullopt, row.post_norm};
        if (is_layer_stage(row.stage)) site.layer = *layer;
        return site;
    }
    throw Error(fmt::format(
        "hook name '{}': not a site Ember knows; it reads TransformerLens names (blocks.L.hook_resid_post, "
        "blocks.L.hook_resid_mid, ...), Hugging Face module names (model.layers.L.output, model.layers.L.mlp, ...) "
        "and its own (after_layer:L); docs/features.md lists them",
        name));
}

HookSite fit_hook_site(std::string_view name, const HookSite& site, std::uint32_t n_layers, bool block_post_norms) {
    if (site.layer && *site.layer >= n_layers)
        throw Error(fmt::format("hook name '{}': layer {}, but the model has {} layers (0 to {})", name, *site.layer,
                                n_layers, n_layers - 1));
    if (site.post_norm == PostNormUse::BeforePostNorm && block_post_norms)
        throw Error(fmt::format(
            "hook name '{}': the block's output before its post-norm, but this model post-norms it and Ember's {} is "
            "after the post-norm; name the post-norm's output instead (docs/features.md)",
            name, stage_name(site.stage)));
    if (site.post_norm == PostNormUse::PostNormOnly && !block_post_norms)
        throw Error(fmt::format("hook name '{}': a block post-norm, which this model does not have", name));
    if (site.post_norm != PostNormUse::AttentionPostNormOrMlpInput) return site;
    if (block_post_norms) return HookSite{site.stage, site.layer, PostNormUse::PostNormOnly};
    return HookSite{Stage::MlpInput, site.layer, PostNormUse::Same};
}

std::string site_text(const HookSite& site) {
    if (!site.layer) return std::string(stage_name(site.stage));
    return fmt::format("{}:{}", stage_name(site.stage), *site.layer);
}

}  // namespace ember::hooks
