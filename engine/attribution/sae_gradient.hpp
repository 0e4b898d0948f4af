// The sae_features stage in the backward (docs/attribution.md, "SAE features"): an SAE
// loaded at a site is spliced there (features/sae_splicer.hpp),
//
//   site' = site + ((f' - f) W_dec) · out_scale          [T, d_in], f' the features as edited
//
// so the features f' are a tensor every later activation depends on through site' alone,
// and at f' = f (an unedited splice, bit for bit the run without the SAE)
//
//   dM/df'[t, j] = out_scale[t] · sum_k W_dec[j, k] · dM/dsite'[t, k]
//
// the decoder rows dotted with the site's gradient (dM/dsite' is the gradient the backward
// reports at the site: the splice is the last change the site gets). The activation is
// f = encode(site), as the stage shows it. Transcoders (another output site) are refused.
#pragma once

#include "attribution/gradient_model.hpp"
#include "features/sae.hpp"

namespace ember::attribution {

// ember::Error naming the SAE when the gradient model cannot take it (a transcoder, a
// site the gradient model does not report).
void check_sae_for_gradients(const features::Sae& sae);

// Whether `site` is the one the SAE reads.
bool sae_reads(const features::Sae& sae, const Site& site);

// Wraps `sink`: every site passes through, and after the SAE's site the sae_features site
// (layer = the site's), with its gradient when the site has one (the forward's observe
// calls have none).
SiteSink with_sae_features(const features::Sae* sae, SiteSink sink);

}  // namespace ember::attribution
