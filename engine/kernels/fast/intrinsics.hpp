// <immintrin.h> for the variant translation units. GCC 12 reports false
// "uninitialized" warnings from inside the AVX-512 headers (their _mm512_undefined_*
// helpers, GCC bug 105593); the warnings are silenced for the header's own lines only.
#pragma once

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
