// Rung: below the ladder (kernel unit tests). The fast route never turns a NaN into a
// number: a NaN (or an infinity) in one activation of a token makes every output of that
// token's product non-finite, for every row of the weight-format table and every kernel
// set this CPU runs (EMBER_CPU's variants: scalar, avx2, avxvnni, avx512, with and without
// VNNI/BF16), in decode (one token), pairs and token lanes (VNNI prefill), a whole NaN row
// included; the other tokens keep the bits they have without the NaN. The same for the
// activation functions and attention (a NaN query or cached key gives NaN heads).
// Before the fix, Q8_K activations (the K-quants' products) skipped a NaN when finding the
// block's scale and rounded it to an integer: a row of NaNs came out as exact zeros.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernel_test_support.hpp"
#include "kernels/fast/aligned_buffer.hpp"
#include "kernels/fast/attention.hpp"
#include "kernels/fast/matmul.hpp"
#include "kernels/fast/thread_pool.hpp"
#include "kernels/reference/kernels.hpp"
#include "kernels/weight_format.hpp"

using namespace ember::test;
namespace kernels = ember::kernels;
using kernels::WeightFormat;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Random blocks whose dequantized values are finite and moderate (the table's dequantizer
// is the judge), as in backend_ops_test.
std::vector<std::byte> random_weights(const WeightFormat& f, std::size_t rows, std::size_t cols, std::mt19937& rng) {
    const std::size_t blocks = cols / f.block_size;
    std::vector<std::byte> w(rows * blocks * f.block_bytes);
    std::uniform_int_distribution<int> byte(0, 255);
    std::vector<float> values(f.block_size);
    for (std::size_t b = 0; b < rows * blocks; ++b) {
        std::byte* block = w.data() + b * f.block_bytes;
        for (bool ok = false; !ok;) {
            for (std::size_t i = 0; i < f.block_bytes; ++i) block[i] = static_cast<std::byte>(byte(rng));
            f.dequantize_row(block, values.data(), f.block_size);
            ok = std::all_of(values.begin(), values.end(), [](float v) { return std::isfinite(v) && std::abs(v) <= 1000; });
        }
    }
    return w;
}

std::vector<float> product(const fast::KernelSet& k, fast::ThreadPool& pool, const kernels::WeightMatrix& m,
                           const std::vector<float>& x, std::size_t tokens) {
    fast::AlignedBuffer workspace(std::max<std::size_t>(64, fast::activation_workspace_bytes(m.type, m.cols, tokens)));
    const fast::ConvertedActivations a = fast::convert_activations(k, pool, m.type, x.data(), tokens, m.cols, workspace.span());
    std::vector<float> y(tokens * m.rows);
    fast::matmul(k, pool, m, a, y.data(), m.rows);
    return y;
}

struct Poison {
    const char* what;
    float value;
    bool whole_row;  // every activation of the token, or one
};

}  // namespace

TEST_CASE("nan propagation: a NaN or inf activation makes the token's every product output non-finite") {
    const auto sets = runnable_kernel_sets();
    fast::ThreadPool pool(2);
    std::mt19937 rng(24);
    const Poison poisons[] = {{"one NaN", kNaN, false}, {"a row of NaNs", kNaN, true}, {"one -NaN", -kNaN, false},
                              {"one +inf", kInf, false}, {"one -inf", -kInf, false}};
    for (const WeightFormat& f : kernels::weight_formats()) {
        const std::size_t block = std::max(f.block_size, kernels::activation_format(f.activation).block_size);
        const std::size_t cols = block == 1 ? 320 : 2 * block;
        const std::size_t rows = 12;
        const std::vector<std::byte> w = random_weights(f, rows, cols, rng);
        const kernels::WeightMatrix m{f.type, w.data(), rows, cols, cols / f.block_size * f.block_bytes};
        for (const std::size_t tokens : {std::size_t{1}, std::size_t{2}, std::size_t{19}}) {  // decode, pairs, lanes
            std::normal_distribution<float> dist(0.0f, 1.0f);
            std::vector<float> clean(tokens * cols);
            for (float& v : clean) v = dist(rng);
            for (const Poison& poison : poisons) {
                CAPTURE(f.name);
                CAPTURE(tokens);
                CAPTURE(std::string(poison.what));
                const std::size_t bad_token = tokens / 2;
                std::vector<float> x = clean;
                if (poison.whole_row) {
                    for (std::size_t j = 0; j < cols; ++j) x[bad_token * cols + j] = poison.value;
                } else {
                    x[bad_token * cols + (cols * 3) / 4 + 1] = poison.value;  // not the first element of a block
                }
                for (const fast::KernelSet& k : sets) {
                    CAPTURE(k.description);
                    const std::vector<float> want = product(k, pool, m, clean, tokens);
                    const std::vector<float> got = product(k, pool, m, x, tokens);
                    for (std::size_t t = 0; t < tokens; ++t) {
                        for (std::size_t r = 0; r < rows; ++r) {
                            const float y = got[t * rows + r];
                            if (t == bad_token) {
                                if (poison.value != poison.value) CHECK_MESSAGE(std::isnan(y), "row " << r << ": " << y);
                                else CHECK_MESSAGE(!std::isfinite(y), "row " << r << ": " << y);
                            } else {
                                CHECK(float_bits(y) == float_bits(want[t * rows + r]));
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("nan propagation: swiglu, geglu and softmax keep a NaN a NaN in every kernel set") {
    const float* table = kernels::reference::gelu_f16_table_values();
    for (const fast::KernelSet& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        for (const std::size_t n : {std::size_t{5}, std::size_t{16}, std::size_t{37}}) {
            CAPTURE(n);
            for (std::size_t at = 0; at < n; at += 3) {
                std::vector<float> gate(n, 0.5f), up(n, 2.0f), out(n);
                gate[at] = kNaN;
                k.swiglu_row(gate.data(), up.data(), out.data(), n);
                CHECK(std::isnan(out[at]));
                k.geglu_row(gate.data(), up.data(), out.data(), n, table);
                CHECK(std::isnan(out[at]));
                gate[at] = 0.5f;
                up[at] = kNaN;
                k.swiglu_row(gate.data(), up.data(), out.data(), n);
                CHECK(std::isnan(out[at]));
                k.geglu_row(gate.data(), up.data(), out.data(), n, table);
                CHECK(std::isnan(out[at]));
                std::vector<float> scores(n, 1.0f);
                scores[at] = kNaN;
                k.softmax_row(scores.data(), n, 0.125f);
                for (float p : scores) CHECK(std::isnan(p));
            }
        }
    }
}

TEST_CASE("nan propagation: a NaN query or key makes its heads NaN in attention, F32 and F16 caches") {
    const fast::AttentionShape s{4, 2, 16, 0.25f, 0};
    const std::size_t positions = 21, width = s.n_head * s.head_dim, kv_width = s.n_head_kv * s.head_dim;
    fast::ThreadPool pool(2);
    std::mt19937 rng(7);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    for (const kernels::KvType type : {kernels::KvType::f32, kernels::KvType::f16}) {
        const std::size_t element = type == kernels::KvType::f32 ? 4 : 2;
        std::vector<float> keys(positions * kv_width), values(positions * kv_width);
        for (float& v : keys) v = dist(rng);
        for (float& v : values) v = dist(rng);
        for (const bool poison_key : {false, true}) {
            std::vector<float> q(positions * width);
            for (float& v : q) v = dist(rng);
            std::vector<float> k_rows = keys;
            if (poison_key) k_rows[3 * kv_width + 5] = kNaN;  // position 3, KV head 0
            else q[7 * width + 2] = kNaN;                       // token 7, head 0
            std::vector<std::byte> k_bytes(positions * kv_width * element), v_bytes(k_bytes.size());
            for (std::size_t i = 0; i < k_rows.size(); ++i) {
                if (element == 4) {
                    std::memcpy(k_bytes.data() + 4 * i, &k_rows[i], 4);
                    std::memcpy(v_bytes.data() + 4 * i, &values[i], 4);
                } else {
                    const std::uint16_t kh = ref_float_to_half(k_rows[i]) | (std::isnan(k_rows[i]) ? 0x7E00 : 0);
                    const std::uint16_t vh = ref_float_to_half(values[i]);
                    std::memcpy(k_bytes.data() + 2 * i, &kh, 2);
                    std::memcpy(v_bytes.data() + 2 * i, &vh, 2);
                }
            }
            const fast::KvCacheView view{type, k_bytes.data(), v_bytes.data(), kv_width * element, positions};
            for (const fast::KernelSet& k : runnable_kernel_sets()) {
                CAPTURE(k.description);
                CAPTURE(poison_key);
                CAPTURE(element);
                fast::AlignedBuffer workspace(fast::attention_workspace_bytes(pool.threads(), s, positions));
                std::vector<float> out(positions * width);
                fast::attention(k, pool, q.data(), width, positions, view, 0, s, out.data(), width, workspace.span());
                // heads 0 and 1 read KV head 0: a NaN key at position 3 reaches every token from 3 on
                for (std::size_t t = 0; t < positions; ++t) {
                    for (std::size_t h = 0; h < s.n_head; ++h) {
                        const bool poisoned = poison_key ? h < 2 && t >= 3 : t == 7 && h == 0;
                        for (std::size_t d = 0; d < s.head_dim; ++d) {
                            const float y = out[t * width + h * s.head_dim + d];
                            if (poisoned) CHECK_MESSAGE(std::isnan(y), "token " << t << " head " << h << ": " << y);
                            else CHECK(std::isfinite(y));
                        }
                    }
                }
            }
        }
    }
}
