#include "features/sae_splicer.hpp"

#include <fmt/format.h>

#include "common/error.hpp"

namespace ember::features {

SaeSplicer::SaeSplicer(std::vector<SplicedSae> saes, hooks::ActiveHooks* downstream) : downstream_(downstream) {
    for (const SplicedSae& s : saes) saes_.push_back(State{s, {}, {}, {}, {}, false});
}

bool SaeSplicer::at(const hooks::HookSite& site, hooks::Stage stage, std::uint32_t layer) {
    return site.stage == stage && (site.layer ? *site.layer == layer : layer == hooks::kNoLayer);
}

bool SaeSplicer::wants(hooks::Stage stage) const {
    if (downstream_ && downstream_->wants(stage)) return true;
    for (const State& s : saes_) {
        if (s.spliced.sae->site.stage == stage) return true;
        if (s.spliced.sae->output_site && s.spliced.sae->output_site->stage == stage) return true;
    }
    return false;
}

void SaeSplicer::read_site(State& s, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView tensor) {
    const Sae& sae = *s.spliced.sae;
    if (tensor.cols != sae.d_in)
        throw Error(fmt::format("SAE '{}' at {}: the site is {} wide, the SAE reads {}", sae.name,
                                hooks::site_text(sae.site), tensor.cols, sae.d_in));
    const std::size_t T = tensor.rows;
    s.features.resize(T * sae.d_sae);
    encode(sae, tensor.data, T, s.features.data(), s.norm);
    s.edited = s.features;
    if (downstream_) downstream_->stage(hooks::Stage::SaeFeatures, eval, layer, {s.edited.data(), T, sae.d_sae});
    s.delta.resize(T * sae.d_out);
    const bool changed = splice_delta(sae, s.features.data(), s.edited.data(), T, s.norm, s.delta.data());
    if (!changed) return;  // nothing edited: the site keeps every bit
    if (!s.spliced.splice)
        throw Error(fmt::format("SAE '{}': its features were edited, but it is loaded with splice = false (the edit "
                                "would change nothing)",
                                sae.name));
    if (sae.output_site) {
        s.pending = true;
        return;
    }
    for (std::size_t i = 0; i < T * sae.d_out; ++i) tensor.data[i] += s.delta[i];
}

void SaeSplicer::stage(hooks::Stage stage, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView tensor) {
    for (State& s : saes_) {
        if (!s.pending || !at(*s.spliced.sae->output_site, stage, layer)) continue;
        if (tensor.rows * tensor.cols != s.delta.size())
            throw Error(fmt::format("transcoder '{}': {} has {} values, the delta {}", s.spliced.sae->name,
                                    hooks::site_text(*s.spliced.sae->output_site), tensor.rows * tensor.cols,
                                    s.delta.size()));
        for (std::size_t i = 0; i < s.delta.size(); ++i) tensor.data[i] += s.delta[i];
        s.pending = false;
    }
    if (downstream_) downstream_->stage(stage, eval, layer, tensor);
    for (State& s : saes_)
        if (at(s.spliced.sae->site, stage, layer)) read_site(s, eval, layer, tensor);
}

}  // namespace ember::features
