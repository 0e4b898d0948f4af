// The AVX512_BF16 product (compiled with the AVX-512 flags plus -mavx512bf16; see
// variant_kernels.hpp for the rules of a variant translation unit): llama.cpp's own
// instruction for both of its summation orders (avx512_float_tiles.hpp), vdpbf16ps on
// 32 BF16 values at a time, elements 2j and 2j + 1 into lane j.
#include "kernels/fast/intrinsics.hpp"

#include "kernels/fast/avx512_float_tiles.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx512_bf16 {

namespace {

struct BF16Policy : Avx512Lanes {
    using Element = std::uint16_t;
    using Vector = __m512i;
    static constexpr std::size_t kChunk = 32;
    static __m512i load(const Element* p) { return avx512_load_bf16_pairs(p); }
    static __m512i load_partial(const Element* p, std::size_t count) { return avx512_load_bf16_pairs_partial(p, count); }
    static __m512 accumulate(__m512 acc, __m512i w, __m512i a) { return _mm512_dpbf16_ps(acc, (__m512bh)w, (__m512bh)a); }
    static float finish_vec_dot(const __m512* acc, const Element* w, const Element* a, std::size_t tail) {
        return avx512_finish_bf16_vec_dot(acc, w, a, tail);
    }
};

}  // namespace

void bf16_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    avx512_float_matmul_rows<BF16Policy>(task, row_begin, row_end);
}

}  // namespace ember::kernels::fast::avx512_bf16
