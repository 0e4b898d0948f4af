// The SAE encoder for the fast route, parallel over features:
//
//   x_c  [T, d_in]  = normalize(x) - b_dec·apply   (features::encoder_input, kept in double)
//   pre  [T, d_sae] = x_c · encoder_ᵀ              (double fused multiply-adds, AVX2 where the CPU has it)
//   f    [T, d_sae] = features_from_product(pre)   (the bias and the activation, as the reference)
//
// encoder_ is W_enc transposed ([d_sae, d_in], one contiguous row per feature), in F32
// whatever the file stored (F16 and BF16 are exact in F32). Each product sums in double
// in one fixed order (fast_encoder.cpp, dot_block: four lanes, then the tail), whatever the
// row count, the tile or the CPU (the scalar kernel does the same operations), so a row's
// features are the same bits encoded alone or with any other rows, and they are within the
// double sum's error, (d_in + 2) 2^-53 sum_i |x_c[i] W_enc[i, j]|, of the exact product:
// the plain 1e-5 relative of the reference holds (tests/features/sae_reference_test,
// sae_extract_test). Why not the fast route's F32 product: a float32 sum's error is
// (d_in + 2) 2^-24 sum_i |x_c[i] W_enc[i, j]|, which for a feature whose terms cancel is
// more than 1e-5 of the feature (docs/features.md, "The encoder").
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
