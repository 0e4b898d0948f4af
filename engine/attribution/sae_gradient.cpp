#include "attribution/sae_gradient.hpp"

#include <fmt/format.h>

#include "common/error.hpp"

namespace ember::attribution {

void check_sae_for_gradients(const features::Sae& sae) {
    if (sae.is_transcoder())
        throw Error(fmt::format("{}: a transcoder writes {}, another site than it reads; its features' gradient is not "
                                "built (an SAE reading and writing one site is)",
                                sae.path.string(), *sae.output_hook_name));
    if (sae.site.post_norm != hooks::PostNormUse::Same || !sae.site.layer || sae.site.stage == hooks::Stage::AttentionPattern)
        throw Error(fmt::format("{}: its site '{}' is not one the gradient model reports as it is (a layer's residual, "
                                "block output, head_outputs or mlp_activation)",
                                sae.path.string(), sae.hook_name));
}

bool sae_reads(const features::Sae& sae, const Site& site) {
    return site.stage == sae.site.stage && site.layer == sae.site.layer;
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
    return [sae, sink = std::move(sink)](const Site& site) {
        sink(site);
        if (!sae_reads(*sae, site)) return;
        const std::size_t T = site.activation.rows, d_sae = sae->d_sae;
        Matrix f = Matrix::zeros(T, d_sae);  // [T, d_sae] f = encode(site)
        features::RowNorm norm;
        std::vector<float> x(site.activation.data, site.activation.data + T * site.activation.cols);
        features::encode(*sae, x.data(), T, f.values.data(), norm);
        const Matrix gradient = site.gradient.data ? feature_gradient(*sae, site.gradient, norm.out_scale) : Matrix{};
        sink({hooks::Stage::SaeFeatures, site.layer, f.view(), gradient.view()});
    };
}

}  // namespace ember::attribution
