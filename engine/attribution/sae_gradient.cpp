#include "attribution/sae_gradient.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "common/error.hpp"

namespace ember::attribution {

namespace {

// The sites fit_sae_to_model placed are Ember's stages exactly; the gradient model reports
// every layer stage but the attention pattern (an SAE cannot read it anyway).
void check_reported(const features::Sae& sae, const hooks::HookSite& site, const std::string& name) {
    if (!site.layer || site.stage == hooks::Stage::AttentionPattern)
        throw Error(fmt::format("{}: its site '{}' is not one the gradient model reports (a layer's residual, block "
                                "output, mlp_input, head_outputs or mlp_activation)",
                                sae.path.string(), name));
}

bool at(const hooks::HookSite& where, const Site& site) { return site.stage == where.stage && site.layer == where.layer; }

}  // namespace

void check_sae_for_gradients(const features::Sae& sae) {
    check_reported(sae, sae.site, sae.hook_name);
    if (sae.output_site) check_reported(sae, *sae.output_site, *sae.output_hook_name);
}

bool sae_reads(const features::Sae& sae, const Site& site) { return at(sae.site, site); }

bool sae_writes(const features::Sae& sae, const Site& site) {
    return at(sae.output_site ? *sae.output_site : sae.site, site);
}

Matrix feature_gradient(const features::Sae& sae, kernels::ConstRows g, const std::vector<float>& out_scale) {
    const std::size_t T = g.rows, d_sae = sae.d_sae, d_in = sae.d_out;
    Matrix gradient = Matrix::zeros(T, d_sae);
    for (std::size_t t = 0; t < T; ++t) {
        const float* gt = g.row(t);
        for (std::size_t j = 0; j < d_sae; ++j) {
            const float* w = sae.W_dec.data() + j * d_in;
            double dot = 0.0;
            for (std::size_t k = 0; k < d_in; ++k) dot += static_cast<double>(w[k]) * gt[k];
            gradient.values[t * d_sae + j] = static_cast<float>(dot * out_scale[t]);
        }
    }
    return gradient;
}

SiteSink with_sae_features(const features::Sae* sae, SiteSink sink) {
    if (!sae) return sink;
    // A transcoder's output site comes first in the backward (it runs the layers and stages
    // in reverse): its gradient is kept until the input site's features are encoded.
    auto output_gradient = std::make_shared<Matrix>();
    return [sae, sink = std::move(sink), output_gradient](const Site& site) {
        sink(site);
        if (sae->is_transcoder() && site.gradient.data && sae_writes(*sae, site)) {
            Matrix& g = *output_gradient;
            g = Matrix::zeros(site.gradient.rows, site.gradient.cols);
            for (std::size_t r = 0; r < g.rows; ++r) std::copy_n(site.gradient.row(r), g.cols, g.values.data() + r * g.cols);
        }
        if (!sae_reads(*sae, site)) return;
        const std::size_t T = site.activation.rows, d_sae = sae->d_sae;
        Matrix f = Matrix::zeros(T, d_sae);  // [T, d_sae] f = encode(site)
        features::RowNorm norm;
        std::vector<float> x(site.activation.data, site.activation.data + T * site.activation.cols);
        features::encode(*sae, x.data(), T, f.values.data(), norm);
        Matrix gradient;
        if (site.gradient.data) {
            if (sae->is_transcoder() && output_gradient->rows != T)
                throw Error(fmt::format("{}: the backward reported no gradient at the transcoder's output site {}",
                                        sae->path.string(), *sae->output_hook_name));
            gradient = feature_gradient(*sae, sae->is_transcoder() ? output_gradient->view() : site.gradient,
                                        norm.out_scale);
        }
        sink({hooks::Stage::SaeFeatures, site.layer, f.view(), gradient.view()});
    };
}

}  // namespace ember::attribution
