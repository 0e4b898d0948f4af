// The SAE encoder through the fast route's float kernels (kernels/fast/matmul.hpp):
//
//   x_c  [T, d_in]  = normalize(x) - b_dec·apply   (features::encoder_input, rounded to F32)
//   pre  [T, d_sae] = x_c · encoder_ᵀ              (fast::matmul, F32 weights, llama.cpp's orders)
//   f    [T, d_sae] = features_from_product(pre)   (the bias and the activation, as the reference)
//
// encoder_ is W_enc transposed ([d_sae, d_in], one contiguous row per feature: the
// [out, in] layout every fast product reads), in F32 whatever the file stored: the F16 and
// BF16 products of the fast route round their activations to 16 bits (llama.cpp's rule),
// about 1e-3 relative, which an SAE's features (held to 1e-5 of the reference) cannot
// afford; F16 and BF16 weights are exact in F32. The F32 product sums in F32: features
// agree with the double-summing reference encoder (features::encode) within 1e-5
// relative, and the active sets except within 1e-6 of a boundary (tests/features/
// sae_extract_test, fast_encoder_test). A row's features depend on the row count only
// through the product's summation order (fast::sum_order), never on the other rows.
#pragma once

#include <cstddef>
#include <vector>

#include "features/sae.hpp"

namespace ember::kernels::fast {
class ThreadPool;
}

namespace ember::features {

class FastEncoder {
public:
    explicit FastEncoder(const Sae& sae);  // keeps a reference: the SAE outlives it

    // features [T, d_sae] of x [T, d_in]; `norm` as features::encode fills it.
    void encode(const float* x, std::size_t T, float* features, RowNorm& norm, kernels::fast::ThreadPool& pool) const;

private:
    const Sae& sae_;
    std::vector<float> encoder_;  // [d_sae, d_in]: W_enc transposed
};

}  // namespace ember::features
