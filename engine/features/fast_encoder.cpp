#include "features/fast_encoder.hpp"

#include <span>

#include "kernels/fast/kernel_set.hpp"
#include "kernels/fast/matmul.hpp"
#include "kernels/fast/thread_pool.hpp"

namespace ember::features {

FastEncoder::FastEncoder(const Sae& sae) : sae_(sae), encoder_(sae.d_sae * sae.d_in) {
    const std::size_t d_in = sae.d_in, d_sae = sae.d_sae;
    for (std::size_t i = 0; i < d_in; ++i)  // W_enc [d_in, d_sae] -> [d_sae, d_in]
        for (std::size_t j = 0; j < d_sae; ++j) encoder_[j * d_in + i] = sae.W_enc[i * d_sae + j];
}

void FastEncoder::encode(const float* x, std::size_t T, float* features, RowNorm& norm,
                         kernels::fast::ThreadPool& pool) const {
    const std::size_t d_in = sae_.d_in, d_sae = sae_.d_sae;
    reset_norm(T, norm);
    std::vector<double> row_c(d_in);
    std::vector<float> x_c(T * d_in);  // [T, d_in]
    for (std::size_t t = 0; t < T; ++t) {
        encoder_input(sae_, x + t * d_in, t, norm, row_c.data());
        for (std::size_t i = 0; i < d_in; ++i) x_c[t * d_in + i] = static_cast<float>(row_c[i]);
    }
    const kernels::WeightMatrix w{gguf::GgmlType::F32, reinterpret_cast<const std::byte*>(encoder_.data()), d_sae, d_in,
                                  d_in * sizeof(float)};
    std::vector<float> product(T * d_sae);  // [T, d_sae] = x_c W_enc
    // F32 weights read the activations as they are: no conversion, no workspace.
    kernels::fast::matmul(kernels::fast::process_kernel_set(), pool, w, x_c.data(), T, product.data(), {});
    std::vector<double> pre(d_sae);
    for (std::size_t t = 0; t < T; ++t) {
        for (std::size_t j = 0; j < d_sae; ++j) pre[j] = product[t * d_sae + j];
        features_from_product(sae_, pre, features + t * d_sae);
    }
}

}  // namespace ember::features
