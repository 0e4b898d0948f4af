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
// f = encode(site), as the stage shows it. A transcoder reads one site and splices into a
// later one (out' = out + ((f' - f) W_dec) · out_scale): the same formula with the
// gradient at its output site, which the backward reports before it reaches the input.
//
// Integrated gradients on sae_features (atp.cpp) moves the features along the path by the
// splice itself: at step alpha the site gets ((f + alpha (f_corrupt - f)) - f) W_dec ·
// out_scale added (features::splice_delta, the route's arithmetic for a hook's edit), and
// the features' gradient there is feature_gradient of the site's, out_scale the clean site's
// (a transcoder: encoded at its input site, the delta added and the gradient read at its
// output site).
#pragma once

#include "attribution/gradient_model.hpp"
#include "features/sae.hpp"

namespace ember::attribution {

// ember::Error naming the SAE when the gradient model cannot take it (a site the gradient
// model does not report).
void check_sae_for_gradients(const features::Sae& sae);

// Whether `site` is the one the SAE reads / the one its reconstruction is spliced into
// (a transcoder's output site, an SAE's own).
bool sae_reads(const features::Sae& sae, const Site& site);
bool sae_writes(const features::Sae& sae, const Site& site);

// dM/df' [T, d_sae] = out_scale[t] · W_dec[j] · g[t], g = dM/dsite' [T, d_out] (sums in double).
Matrix feature_gradient(const features::Sae& sae, kernels::ConstRows g, const std::vector<float>& out_scale);

// Wraps `sink`: every site passes through, and after the SAE's site the sae_features site
// (layer = the site's), with its gradient when the site has one (the forward's observe
// calls have none).
SiteSink with_sae_features(const features::Sae* sae, SiteSink sink);

}  // namespace ember::attribution
