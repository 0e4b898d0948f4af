// The AVX2 prompt products of Q4_K and Q6_K (compiled with -mavx2 -mfma -mf16c): the
// tiles of kquant_prompt_tiles.hpp with each chunk's scaled sum as a madd and an add.
#include "kernels/fast/kquant_prompt_tiles.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avx2 {

namespace {

struct MaddAdd {
    static __m256i add(__m256i sumi, __m256i scale, __m256i products) {
        return _mm256_add_epi32(sumi, _mm256_madd_epi16(scale, products));
    }
};

}  // namespace

bool q4_k_prompt_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    return kquant_prompt_rows<Q4_K, MaddAdd>(task, row_begin, row_end);
}
bool q6_k_prompt_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    return kquant_prompt_rows<Q6_K, MaddAdd>(task, row_begin, row_end);
}

}  // namespace ember::kernels::fast::avx2
