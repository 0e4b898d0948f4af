// SAEs in the forward pass: an ActiveHooks that sits in front of the run's own hooks
// (experiments, extraction), encodes each SAE's site as it fires, fires the sae_features
// stage on the features, and splices what the stage left back into the site:
//
//   site' = site + (decode(f') - decode(f))       (features::splice_delta)
//
// computed as (f' - f) W_dec times the row's output scale, so an unedited splice adds
// nothing and leaves every bit of the run unchanged (the error term x - decode(f) is kept
// exactly, never recomputed in float). A transcoder reads one site and adds its delta to
// the later site it writes.
//
// Order at a site: a pending transcoder delta is added first; then the run's hooks see the
// site (experiments may edit it, extraction records it); then the SAEs reading the site
// encode it, sae_features fires, and the splice changes the site for everything after.
#pragma once

#include <vector>

#include "features/sae.hpp"
#include "hooks/hooks.hpp"

namespace ember::features {

struct SplicedSae {
    const Sae* sae = nullptr;
    // false: the features are computed and shown to the run's hooks, and the site is never
    // changed; an edit of them is then an error (it would do nothing).
    bool splice = true;
};

class SaeSplicer final : public hooks::ActiveHooks {
public:
    // `downstream` may be null (an SAE alone, as `ember generate --sae` runs it).
    SaeSplicer(std::vector<SplicedSae> saes, hooks::ActiveHooks* downstream);

    void stage(hooks::Stage stage, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView tensor) override;
    bool wants(hooks::Stage stage) const override;

private:
    struct State {
        SplicedSae spliced;
        std::vector<float> features, edited, delta;  // [T, d_sae], [T, d_sae], [T, d_out]
        RowNorm norm;
        bool pending = false;  // a transcoder's delta waiting for its output site
    };
    static bool at(const hooks::HookSite& site, hooks::Stage stage, std::uint32_t layer);
    void read_site(State& s, const hooks::EvalInfo& eval, std::uint32_t layer, hooks::TensorView tensor);

    std::vector<State> saes_;
    hooks::ActiveHooks* downstream_;
};

}  // namespace ember::features
