// Forwarding include only: the conversions are kernels/float16.hpp (one header for both
// routes). Kept for the SIMD files (avx2_*.cpp) that still include this name; delete it
// when they include kernels/float16.hpp.
#pragma once

#include "kernels/float16.hpp"
