// Hook names other tools use, mapped onto Ember's stages: one table (hook_names.cpp)
// read by the SAE loaders (an SAE's cfg.json names the site it was trained on), the run
// configs' `site` keys and docs/features.md.
//
// Three spellings are understood, each `L` a zero-based layer index:
//   TransformerLens   blocks.L.hook_resid_pre, blocks.L.hook_resid_mid, blocks.L.hook_resid_post,
//                     blocks.L.hook_attn_out, blocks.L.hook_mlp_out, blocks.L.attn.hook_z,
//                     blocks.L.attn.hook_pattern, blocks.L.mlp.hook_post
//   Hugging Face      model.layers.L (its output), model.layers.L.output, model.layers.L.input,
//                     model.layers.L.self_attn, model.layers.L.mlp (their outputs),
//                     model.layers.L.self_attn.o_proj.input, model.layers.L.mlp.down_proj.input,
//                     model.layers.L.mlp.input and pre_feedforward_layernorm (the MLP's normed
//                     input), model.layers.L.post_attention_layernorm (Gemma's attention
//                     post-norm; in Llama and Qwen3 checkpoints the MLP's input norm),
//                     model.layers.L.post_feedforward_layernorm (Gemma's only), model.norm;
//                     `model.language_model.` may stand for `model.` (Gemma 3/4 checkpoints)
//   Ember             STAGE:L for a layer stage ("after_layer:12"), STAGE for a logits stage
//
// A name the table knows but Ember cannot honour (TransformerLens's ln_final.hook_normalized
// is before the final norm's weight, which TransformerLens folds into the unembedding;
// Ember's before_logits is after it) is refused with the reason, never mapped to a near miss.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "hooks/hooks.hpp"

namespace ember::hooks {

// How a name relates to the post-norms some families put on their block outputs
// (Gemma 4: after_attention and after_mlp are post-normed, as llama.cpp computes them).
enum class PostNormUse {
    Same,             // the same tensor in every family
    BeforePostNorm,   // a block module's raw output: Ember's stage only where the family has no post-norm
    PostNormOnly,     // names the post-norm itself: only a family with block post-norms has it
    // Hugging Face's post_attention_layernorm: the attention block's post-norm where the
    // family has block post-norms (Gemma), else the MLP's input norm (Llama, Qwen3: mlp_input).
    AttentionPostNormOrMlpInput,
};

struct HookSite {
    Stage stage = Stage::AfterLayer;
    std::optional<std::uint32_t> layer;  // set for a layer stage, empty for a logits stage
    PostNormUse post_norm = PostNormUse::Same;
};

// The stage and layer `name` stands for. Throws ember::Error naming `name` (and, for a
// name the table refuses, why) when it is not a hook name Ember understands.
HookSite resolve_hook_name(std::string_view name);

// A resolved site in a model: checks that the layer exists and that the name means the
// same tensor in this family (`block_post_norms`: its attention and MLP outputs are
// post-normed before the residual add), and returns the stage the name stands for there
// (only AttentionPostNormOrMlpInput differs by family). Throws ember::Error naming `name`.
HookSite fit_hook_site(std::string_view name, const HookSite& site, std::uint32_t n_layers, bool block_post_norms);

// "after_layer:12" / "before_logits": Ember's own spelling of a site.
std::string site_text(const HookSite& site);

}  // namespace ember::hooks
