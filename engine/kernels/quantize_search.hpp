// The search helpers of ggml-quants.c that several file rules share (quantize_row.cpp
// defines them; quantize_row_k.cpp uses them too), operation for operation as there.
#pragma once

#include <cstdint>

namespace ember::kernels::detail {

constexpr float kGroupMaxEps = 1e-15f;  // GROUP_MAX_EPS

// nearest_int: round half to even through the 1.5 * 2^23 trick.
int nearest_int(float x);

// make_qkx2_quants(n, nmax, x, weights, L, the_min, Laux, rmin, rdelta, nstep, use_mad):
// the scale of the best affine grid found, its negated minimum in *the_min.
float make_qkx2_quants(int n, int nmax, const float* x, const float* weights, std::uint8_t* L, float* the_min,
                       std::uint8_t* Laux, float rmin, float rdelta, int nstep, bool use_mad);

}  // namespace ember::kernels::detail
