// Loading SAEs and transcoders from the layouts their tools write:
//
//   SAELens (SAE.save_model)   DIR/cfg.json + DIR/sae_weights.safetensors; 5.x keeps the hook
//                              name at the top level of cfg.json, 6.x under "metadata"
//   Gemma Scope                DIR/params.npz (or the file itself): W_enc, W_dec, b_enc, b_dec,
//                              threshold (JumpReLU, no b_dec on the input); the file names no
//                              site, so one must be given (`site`)
//   Gemma Scope 2              DIR/config.json (hf_hook_point_in / _out: Hugging Face module
//                              names) + DIR/params.safetensors (w_enc, w_dec, b_enc, b_dec,
//                              threshold; JumpReLU); a transcoder when _out differs from _in
//
// Every option that changes the computation is read and checked; a value Ember does not
// implement (an unknown architecture, a hook_head_index, finetuning_scaling_factor, topk's
// rescale_acts_by_decoder_norm, ...) is refused by name. Keys that only describe the
// training run (dataset_path, context_size, ...) are ignored. Every file read is hashed
// into Sae::inputs. Errors name the file and the key.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "features/sae.hpp"
#include "models/model_config.hpp"

namespace ember::features {

struct SaeLoadOptions {
    // Overrides the file's hook name ("after_layer:12", "blocks.12.hook_resid_post"); required
    // for Gemma Scope's params.npz.
    std::optional<std::string> site;
};

Sae load_sae(const std::filesystem::path& path, const SaeLoadOptions& options = {});

// The width of the tensor at a stage of a layer: n_embd for the residual and block stages,
// n_head * head_dim for head_outputs, n_ff for mlp_activation; nothing for a stage an SAE
// cannot read (attention_pattern, after_logits).
struct SiteWidths {
    std::size_t n_embd = 0;
    std::uint32_t n_layers = 0;
    bool block_post_norms = false;            // Gemma 4
    std::vector<std::size_t> head_width;      // per layer
    std::vector<std::size_t> ff_width;        // per layer
};

// The widths of `model`'s sites.
SiteWidths site_widths(const models::ModelConfig& model);

// Places the SAE's sites in the model (a Hugging Face name may stand for another stage in
// another family: hooks::fit_hook_site) and checks them (layer, family, width = d_in /
// d_out). Throws ember::Error naming the SAE's path and its hook name.
void fit_sae_to_model(Sae& sae, const SiteWidths& widths);

}  // namespace ember::features
