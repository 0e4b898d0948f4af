// The AVX-VNNI prompt products of Q4_K and Q6_K (compiled with -mavx2 -mfma -mf16c
// -mavxvnni): the tiles of kquant_prompt_tiles.hpp with each chunk's scaled sum as one
// vpdpwssd (AVX2's madd and add in one instruction; the same exact int32 sums, so the
// avx2 set's bits). Decode, and rows too wide for a slab, run the avx2 kernels.
#include "kernels/fast/kquant_prompt_tiles.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast::avxvnni {

namespace {

struct Dpwssd {
    static __m256i add(__m256i sumi, __m256i scale, __m256i products) {
        return _mm256_dpwssd_avx_epi32(sumi, scale, products);
    }
};

}  // namespace

void q4_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.n_tokens == 1 || !kquant_prompt_rows<Q4_K, Dpwssd>(task, row_begin, row_end))
        avx2::q4_k_matmul_rows(task, row_begin, row_end);
}
void q6_k_matmul_rows(const MatmulTask& task, std::size_t row_begin, std::size_t row_end) {
    if (task.n_tokens == 1 || !kquant_prompt_rows<Q6_K, Dpwssd>(task, row_begin, row_end))
        avx2::q6_k_matmul_rows(task, row_begin, row_end);
}

}  // namespace ember::kernels::fast::avxvnni
