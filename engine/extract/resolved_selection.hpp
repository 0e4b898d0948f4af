// What an extraction records, resolved against one model and one prompt: the stages, the
// layers (ascending), the prompt positions (ascending; from a selection spec when the
// request has one, ember/selection.hpp), the logits dump and the logit lens width. Built from the [output] section of a run config (config::OutputSection),
// which `ember extract` fills from its options with the parse_* functions below.
#pragma once

#include <ember/selection.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/run_config.hpp"
#include "hooks/hook_names.hpp"
#include "hooks/hooks.hpp"
#include "models/model_config.hpp"
#include "tokenizer/token.hpp"

namespace ember::extract {

// The stages an extraction can take, in firing order: every tensor stage the model fires
// (ember/stages.h), which is all of them but sae_features (an SAE's, fired by the splice,
// its width the SAE's: docs/features.md).
inline constexpr auto kStages = [] {
    std::array<hooks::Stage, hooks::kTensorStageCount - 1> out{};
    std::size_t n = 0;
    for (hooks::Stage s : hooks::kTensorStages)
        if (s != hooks::Stage::SaeFeatures) out[n++] = s;
    return out;
}();
using hooks::is_layer_stage;

struct Selection {
    std::array<bool, hooks::kStageCount> stages{};  // indexed by hooks::index_of
    std::vector<std::uint32_t> layers;   // ascending
    std::vector<std::size_t> positions;  // ascending prompt positions
    std::vector<bool> partial;           // per position: the token reaches outside the anchored bytes
    std::string spec;                    // the selection spec's text form ("all", "last", "0,5", "substring:...")
    std::size_t n_tokens = 0;            // the prompt's length
    config::LogitsDump logits = config::LogitsDump::None;
    std::uint32_t lens_top_k = 0;        // 0: no logit lens
    // The sites of the run's SAEs (extract --sae): their rows at `positions` are kept for
    // the encoders (Extractor::sae_site_rows), not written as stages. Layer stages only.
    std::vector<hooks::HookSite> sae_sites;

    bool has(hooks::Stage s) const { return stages[hooks::index_of(s)]; }
    bool has_layer(std::uint32_t layer) const;
    // Whether the prefill must compute the logits (and final norm) of every position: the
    // logits dump asks for all of them, or a logits stage wants more than the last.
    bool needs_all_logits() const;
};

// Checks the request against the model and the prompt; ember::Error naming the key
// (output.layers, output.positions, output.logit_lens) for a layer or position that does
// not exist or a lens wider than the vocabulary.
Selection resolve(const config::OutputSection& output, const models::ModelConfig& model, std::size_t n_tokens);
// The same for a prompt whose text and tokens are known, which a selection spec
// (output.positions of Kind::Spec, or `spec` when given: a dataset sample's own) needs.
// An empty selection is an ember::Error saying why. A message scope (role:user:-1/...)
// needs `conversation`, a chat prompt's messages: without one it is an ember::Error naming it.
Selection resolve(const config::OutputSection& output, const models::ModelConfig& model, std::string_view text,
                  std::span<const tokenizer::Token> tokens, const selection::Spec* spec = nullptr,
                  const selection::Conversation* conversation = nullptr);

// The spec's positions in a prompt; `rows` empty (and `why_empty` set) when none.
selection::Resolved select_positions(const selection::Spec& spec, std::string_view text,
                                     std::span<const tokenizer::Token> tokens,
                                     const selection::Conversation* conversation = nullptr);
// A spec's text form, parsed; UsageError naming `option` otherwise.
selection::Spec parse_spec(const std::string& text, const char* option);

// Command-line forms (ember extract), into `output`. UsageError naming the option.
void parse_stages(const std::string& text, config::OutputSection& output);     // "after_layer,after_mlp"
void parse_layers(const std::string& text, config::OutputSection& output);     // "all" | "0,3"
void parse_positions(const std::string& text, config::OutputSection& output);  // "all" | "last" | "0,5"
void parse_select(const std::string& text, config::OutputSection& output);     // any selection spec
void parse_logits(const std::string& text, config::OutputSection& output);     // "none" | "last" | "all"

}  // namespace ember::extract
