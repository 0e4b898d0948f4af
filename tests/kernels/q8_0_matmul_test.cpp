// Rung: below the ladder (kernel unit tests). The Q8_0 products of every kernel set this
// CPU runs are bit-exact against a straightforward scalar implementation of
// model-math §2.9 (which reproduces llama.cpp's x86 matmul bit for bit): single dots,
// the matrix-vector path (1 token) and the tiled matrix-matrix paths (2..17 tokens; up to 20 on rows of
// up to 33792 columns; chunks of sixteen tokens with remainders, several column segments and row
// slabs), odd row counts, extreme values; and independent of the thread count. Tolerance: zero.
#include <doctest/doctest.h>

#include <cstring>

#include "common/error.hpp"
#include "kernel_test_support.hpp"
#include "kernels/fast/aligned_buffer.hpp"
#include "kernels/fast/matmul.hpp"
#include "kernels/fast/thread_pool.hpp"

using namespace ember::test;
namespace fast = ember::kernels::fast;
using ember::gguf::GgmlType;

namespace {

struct Q8Matrix {
    std::size_t rows, cols;
    std::vector<fast::BlockQ8_0> blocks;
    ember::kernels::WeightMatrix view() const {
        return {GgmlType::Q8_0, reinterpret_cast<const std::byte*>(blocks.data()), rows, cols, cols / 32 * sizeof(fast::BlockQ8_0)};
    }
    const fast::BlockQ8_0* row(std::size_t r) const { return blocks.data() + r * (cols / 32); }
};

Q8Matrix random_matrix(std::mt19937& rng, std::size_t rows, std::size_t cols) {
    return {rows, cols, random_q8_0(rng, rows * cols / 32)};
}

// out[t * rows + r] by the reference, for activations already quantized.
std::vector<float> reference_product(const Q8Matrix& w, const std::vector<fast::BlockQ8_0>& acts, std::size_t n_tokens) {
    const std::size_t nb = w.cols / 32;
    std::vector<float> out(n_tokens * w.rows);
    for (std::size_t t = 0; t < n_tokens; ++t)
        for (std::size_t r = 0; r < w.rows; ++r) out[t * w.rows + r] = ref_q8_0_dot(w.row(r), acts.data() + t * nb, nb);
    return out;
}

// Runs a kernel set's row function over all rows on already quantized activations.
std::vector<float> kernel_product(const fast::KernelSet& k, const Q8Matrix& w, const std::vector<fast::BlockQ8_0>& acts,
                                  std::size_t n_tokens) {
    std::vector<float> out(n_tokens * w.rows, -1.0f);
    const std::size_t row_bytes = w.cols / 32 * sizeof(fast::BlockQ8_0);
    const fast::MatmulTask task{reinterpret_cast<const std::byte*>(w.blocks.data()), row_bytes, w.cols,
                                reinterpret_cast<const std::byte*>(acts.data()), row_bytes, n_tokens, out.data(), w.rows};
    k.matmul(GgmlType::Q8_0)(task, 0, w.rows);
    return out;
}

void require_bitwise_equal(const std::vector<float>& got, const std::vector<float>& want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
        if (float_bits(got[i]) != float_bits(want[i])) {
            FAIL("output " << i << ": " << got[i] << " != " << want[i] << " (reference)");
        }
    }
}

}  // namespace

TEST_CASE("Q8_0 dot: bit-exact with the §2.9 recipe for 1..40 blocks") {
    std::mt19937 rng(1);
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        for (std::size_t nb = 1; nb <= 40; ++nb) {
            const auto w = random_q8_0(rng, nb);
            const auto a = random_q8_0_activations(rng, nb);
            const float got = fast::q8_0_dot(k, w.data(), a.data(), nb);
            const float want = ref_q8_0_dot(w.data(), a.data(), nb);
            REQUIRE_MESSAGE(float_bits(got) == float_bits(want), nb << " blocks: " << got << " vs " << want);
        }
    }
}

TEST_CASE("Q8_0 matrix products: bit-exact with the reference for 1..17 tokens and odd row counts") {
    std::mt19937 rng(2);
    const auto sets = runnable_kernel_sets();
    for (std::size_t rows : {1, 3, 5, 8, 13, 37}) {
        for (std::size_t cols : {32, 96, 256}) {
            const auto w = random_matrix(rng, rows, cols);
            for (std::size_t n_tokens = 1; n_tokens <= 17; ++n_tokens) {
                const auto acts = random_q8_0_activations(rng, n_tokens * cols / 32);
                const auto want = reference_product(w, acts, n_tokens);
                for (const auto& k : sets) {
                    CAPTURE(k.description);
                    CAPTURE(rows);
                    CAPTURE(cols);
                    CAPTURE(n_tokens);
                    require_bitwise_equal(kernel_product(k, w, acts, n_tokens), want);
                }
            }
        }
    }
}

// Wide rows change how a prefill kernel chunks its tokens (the AVX-512 VNNI kernel packs
// up to eight tokens of activations on the stack: fewer for rows over 8192 columns, and
// none, falling back to per-tile operands, over 32768).
TEST_CASE("Q8_0 matrix products: bit-exact with the reference for wide rows (token chunking)") {
    std::mt19937 rng(5);
    const auto sets = runnable_kernel_sets();
    for (std::size_t cols : {8192, 12288, 33792}) {
        const auto w = random_matrix(rng, 6, cols);
        for (std::size_t n_tokens : {2, 5, 9, 20}) {
            const auto acts = random_q8_0_activations(rng, n_tokens * cols / 32);
            const auto want = reference_product(w, acts, n_tokens);
            for (const auto& k : sets) {
                CAPTURE(k.description);
                CAPTURE(cols);
                CAPTURE(n_tokens);
                require_bitwise_equal(kernel_product(k, w, acts, n_tokens), want);
            }
        }
    }
}

// The AVX-512 VNNI kernel puts whole chunks of sixteen tokens in register lanes, sums each
// row a segment of 32 blocks at a time, and works through the rows in slabs (8192 rows x
// blocks; 128 rows at most); the remaining tokens go through packed pairs. These shapes
// reach every boundary: several chunks with and without a remainder, one and several
// segments (a partial last one), several slabs with an odd last row, the widest rows the
// lanes take (341 blocks) and the first they leave to the pairs.
TEST_CASE("Q8_0 matrix products: bit-exact with the reference across token chunks, segments and row slabs") {
    std::mt19937 rng(7);
    const auto sets = runnable_kernel_sets();
    struct Shape { std::size_t rows, cols; };
    for (const Shape shape : {Shape{131, 2048}, Shape{37, 8192}, Shape{5, 1056}, Shape{3, 10912}, Shape{3, 10944}}) {
        const auto w = random_matrix(rng, shape.rows, shape.cols);
        for (std::size_t n_tokens : {16, 31, 32, 35, 48}) {
            const auto acts = random_q8_0_activations(rng, n_tokens * shape.cols / 32);
            const auto want = reference_product(w, acts, n_tokens);
            for (const auto& k : sets) {
                CAPTURE(k.description);
                CAPTURE(shape.rows);
                CAPTURE(shape.cols);
                CAPTURE(n_tokens);
                require_bitwise_equal(kernel_product(k, w, acts, n_tokens), want);
            }
        }
    }
}

TEST_CASE("Q8_0 matrix products: extreme blocks (zero and largest scales, +-127, -128) match the reference") {
    std::mt19937 rng(5);
    const std::size_t rows = 9, cols = 128;
    for (std::size_t n_tokens : {5, 21}) {  // packed pairs; a chunk of sixteen in lanes and five in pairs
        auto w = random_matrix(rng, rows, cols);
        auto acts = random_q8_0_activations(rng, n_tokens * cols / 32);
        for (auto& q : w.blocks[0].qs) q = -128;
        for (auto& q : w.blocks[1].qs) q = 127;
        w.blocks[2].d = 0;                 // zero scale
        w.blocks[3].d = 0x7BFF;            // 65504: products overflow to inf in some outputs
        for (auto& q : acts[0].qs) q = -127;
        for (auto& q : acts[1].qs) q = 127;
        acts[2].d = 0;
        for (auto& q : acts[n_tokens * cols / 32 - 1].qs) q = 127;  // the last token's last block
        for (const auto& k : runnable_kernel_sets()) {
            CAPTURE(k.description);
            CAPTURE(n_tokens);
            require_bitwise_equal(kernel_product(k, w, acts, n_tokens), reference_product(w, acts, n_tokens));
        }
    }
}

TEST_CASE("Q8_0 matmul from F32 activations: quantize + product equal the reference, any thread count") {
    std::mt19937 rng(9);
    const std::size_t rows = 301, cols = 512;
    const auto w = random_matrix(rng, rows, cols);
    fast::ThreadPool one(1), two(2);
    for (std::size_t n_tokens : {1, 2, 7, 16, 17, 40}) {
        const auto x = random_floats(rng, n_tokens * cols, 2.0f);
        std::vector<fast::BlockQ8_0> acts(n_tokens * cols / 32);
        ref_quantize_q8_0(x.data(), acts.data(), x.size());
        const auto want = reference_product(w, acts, n_tokens);
        fast::AlignedBuffer workspace(fast::activation_workspace_bytes(GgmlType::Q8_0, cols, n_tokens));
        for (const auto& k : runnable_kernel_sets()) {
            CAPTURE(k.description);
            CAPTURE(n_tokens);
            std::vector<float> y1(n_tokens * rows), y2(n_tokens * rows);
            fast::matmul(k, one, w.view(), x.data(), n_tokens, y1.data(), workspace.span());
            fast::matmul(k, two, w.view(), x.data(), n_tokens, y2.data(), workspace.span());
            require_bitwise_equal(y1, want);
            require_bitwise_equal(y2, want);
            // each token alone through the matrix-vector path gives the same bits
            for (std::size_t t = 0; t < n_tokens; ++t) {
                std::vector<float> y(rows);
                fast::matmul(k, two, w.view(), x.data() + t * cols, 1, y.data(), workspace.span());
                CHECK(std::memcmp(y.data(), want.data() + t * rows, rows * sizeof(float)) == 0);
            }
        }
    }
}

TEST_CASE("Q8_0 matmul: bad inputs are named errors") {
    std::mt19937 rng(4);
    const auto w = random_matrix(rng, 4, 64);
    const auto& k = fast::process_kernel_set();
    fast::ThreadPool pool(1);
    std::vector<float> x(64), y(4);
    fast::AlignedBuffer small(16);
    CHECK_THROWS_WITH_AS(fast::matmul(k, pool, w.view(), x.data(), 1, y.data(), small.span()),
                         doctest::Contains("workspace too small"), ember::Error);
    auto odd = w.view();
    odd.cols = 48;
    fast::AlignedBuffer workspace(4096);
    CHECK_THROWS_WITH_AS(fast::matmul(k, pool, odd, x.data(), 1, y.data(), workspace.span()),
                         doctest::Contains("multiple of 32"), ember::Error);
    auto unsupported = w.view();  // a type without a row in the weight-format table
    unsupported.type = GgmlType::TQ2_0;
    CHECK_THROWS_WITH_AS(fast::matmul(k, pool, unsupported, x.data(), 1, y.data(), workspace.span()),
                         doctest::Contains("no matrix product for TQ2_0"), ember::Error);
}
