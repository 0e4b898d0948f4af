// Rung: below the ladder (kernel unit tests). The fast route's attention pieces and the
// whole attention for every kernel set this CPU runs (causal and sliding-window masks,
// grouped KV heads, F32 and F16 caches), bit for bit against a transcription of what
// llama.cpp computes with flash attention off (model-math §3.4/§3.6/§3.7): scores row
// over its padded cache (a multiple of 256 positions, masked ones -inf), KQ and KQV
// products in the orders sum_order_references.hpp transcribes (decode: ggml_vec_dot;
// prefill: tinyBLAS where it accepts the shape), softmax with the vector exp and per-16
// sums in double; for an F16 cache Q and P rounded to F16. Decode and prefill of the
// same token therefore differ in the last bits, as in llama.cpp; 1 and 2 threads never
// do. As a check on the transcription, outputs are also within 2e-5 (of the row's
// largest |value|) of a double-precision reference, and the pieces within F32 bounds.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>

#include "kernel_test_support.hpp"
#include "sum_order_references.hpp"
#include "kernels/fast/aligned_buffer.hpp"
#include "kernels/fast/attention.hpp"
#include "common/error.hpp"
#include "kernels/float16.hpp"

using namespace ember::test;
namespace fast = ember::kernels::fast;

namespace {

struct Cache {
    fast::KvType type;
    std::size_t positions, width;  // width = n_head_kv * head_dim
    std::vector<std::byte> keys, values;
    std::vector<double> key_values, value_values;  // exact stored values

    fast::KvCacheView view() const {
        const std::size_t element = type == fast::KvType::f32 ? 4 : 2;
        return {type, keys.data(), values.data(), width * element, positions};
    }
};

Cache random_cache(std::mt19937& rng, fast::KvType type, std::size_t positions, std::size_t width) {
    Cache c{type, positions, width, {}, {}, {}, {}};
    const std::size_t element = type == fast::KvType::f32 ? 4 : 2;
    for (auto* pair : {&c.keys, &c.values}) pair->resize(positions * width * element);
    c.key_values.resize(positions * width);
    c.value_values.resize(positions * width);
    const auto k = random_floats(rng, positions * width, 1.0f);
    const auto v = random_floats(rng, positions * width, 1.0f);
    for (std::size_t i = 0; i < positions * width; ++i) {
        if (type == fast::KvType::f32) {
            std::memcpy(c.keys.data() + 4 * i, &k[i], 4);
            std::memcpy(c.values.data() + 4 * i, &v[i], 4);
            c.key_values[i] = k[i];
            c.value_values[i] = v[i];
        } else {
            const std::uint16_t hk = ref_float_to_half(k[i]), hv = ref_float_to_half(v[i]);
            std::memcpy(c.keys.data() + 2 * i, &hk, 2);
            std::memcpy(c.values.data() + 2 * i, &hv, 2);
            c.key_values[i] = ref_half_value(hk);
            c.value_values[i] = ref_half_value(hv);
        }
    }
    return c;
}

// out [T, H * D] in double, and per output the sum of |p_j v_j| (rounding P to F16 for
// an F16 cache moves an output by at most 2^-12 of it).
struct DoubleAttention {
    std::vector<double> out, magnitude;
};
DoubleAttention reference_attention(const std::vector<float>& q, std::size_t n_tokens, const Cache& c,
                                    std::size_t first_position, const fast::AttentionShape& s) {
    const std::size_t D = s.head_dim, G = s.n_head / s.n_head_kv;
    std::vector<double> out(n_tokens * s.n_head * D, 0.0), magnitude(out.size(), 0.0);
    for (std::size_t t = 0; t < n_tokens; ++t) {
        const std::size_t p = first_position + t;
        const std::size_t begin = s.window == 0 || p < s.window ? 0 : p - s.window + 1;
        for (std::size_t h = 0; h < s.n_head; ++h) {
            const std::size_t g = h / G;
            std::vector<double> w(p + 1 - begin);
            double max = -INFINITY;
            for (std::size_t j = begin; j <= p; ++j) {
                double dot = 0;
                for (std::size_t d = 0; d < D; ++d) {
                    const float qv = q[t * s.n_head * D + h * D + d];
                    const double qd = c.type == fast::KvType::f16 ? ref_half_value(ref_float_to_half(qv)) : qv;
                    dot += qd * c.key_values[j * c.width + g * D + d];
                }
                w[j - begin] = static_cast<double>(static_cast<float>(dot) * s.scale);
                max = std::max(max, w[j - begin]);
            }
            double total = 0;
            for (auto& x : w) total += (x = std::exp(x - max));
            for (std::size_t j = begin; j <= p; ++j) {
                for (std::size_t d = 0; d < D; ++d) {
                    const double term = w[j - begin] / total * c.value_values[j * c.width + g * D + d];
                    out[t * s.n_head * D + h * D + d] += term;
                    magnitude[t * s.n_head * D + h * D + d] += std::fabs(term);
                }
            }
        }
    }
    return {out, magnitude};
}

// llama.cpp's output [T, H * D] (-fa off), for T tokens evaluated together.
std::vector<float> llama_attention(const std::vector<float>& q, std::size_t n_tokens, const Cache& c,
                                   std::size_t first_position, const fast::AttentionShape& s) {
    const std::size_t D = s.head_dim, G = s.n_head / s.n_head_kv;
    const bool f16 = c.type == fast::KvType::f16;
    const bool prefill = n_tokens >= 2;
    std::vector<float> out(n_tokens * s.n_head * D);
    for (std::size_t t = 0; t < n_tokens; ++t) {
        const std::size_t p = first_position + t;
        const std::size_t n_kv = (p + 1 + 255) / 256 * 256;
        const std::size_t begin = s.window == 0 || p < s.window ? 0 : p - s.window + 1;
        for (std::size_t h = 0; h < s.n_head; ++h) {
            const std::size_t g = h / G;
            const float* qh = q.data() + t * s.n_head * D + h * D;
            std::vector<std::uint16_t> q16(D);
            for (std::size_t d = 0; d < D; ++d) q16[d] = ref_float_to_half(qh[d]);
            // KQ, scaled and masked
            std::vector<float> w(n_kv, -INFINITY);
            for (std::size_t j = begin; j <= p; ++j) {
                float dot;
                if (f16) {
                    const auto* k16 = reinterpret_cast<const std::uint16_t*>(c.keys.data()) + j * c.width + g * D;
                    dot = prefill && D % 16 == 0 ? ref_tinyblas16(k16, q16.data(), static_cast<int>(D), ref_half)
                                                 : ref_vec_dot_f16(k16, q16.data(), static_cast<int>(D));
                } else {
                    const auto* k32 = reinterpret_cast<const float*>(c.keys.data()) + j * c.width + g * D;
                    dot = ref_vec_dot_f32(k32, qh, static_cast<int>(D));
                }
                w[j] = dot * s.scale;
            }
            // ggml_vec_soft_max_f32 (AVX-512), then the scale by (float)(1/sum)
            float max = -INFINITY;
            for (float x : w) max = std::max(max, x);
            double sum = 0;
            for (std::size_t i = 0; i < n_kv; i += 16) {
                for (std::size_t l = 0; l < 16; ++l) w[i + l] = ref_vector_exp(w[i + l] - max);
                sum += static_cast<double>(ref_reduce_add_ps(&w[i]));
            }
            const auto inverse = static_cast<float>(1.0 / sum);
            for (auto& x : w) x *= inverse;
            // KQV: row d of V^T (zeros where the cache is empty) times P
            std::vector<std::uint16_t> p16(n_kv);
            for (std::size_t j = 0; j < n_kv; ++j) p16[j] = ref_float_to_half(w[j]);
            for (std::size_t d = 0; d < D; ++d) {
                const bool tiled = prefill && D % 4 == 0;
                float value;
                if (f16) {
                    std::vector<std::uint16_t> row(n_kv, 0);
                    for (std::size_t j = 0; j <= p; ++j) {
                        row[j] = reinterpret_cast<const std::uint16_t*>(c.values.data())[j * c.width + g * D + d];
                    }
                    value = tiled ? ref_tinyblas16(row.data(), p16.data(), static_cast<int>(n_kv), ref_half)
                                  : ref_vec_dot_f16(row.data(), p16.data(), static_cast<int>(n_kv));
                } else {
                    std::vector<float> row(n_kv, 0.0f);
                    for (std::size_t j = 0; j <= p; ++j) row[j] = reinterpret_cast<const float*>(c.values.data())[j * c.width + g * D + d];
                    value = tiled ? ref_tinyblas16(row.data(), w.data(), static_cast<int>(n_kv), ref_identity)
                                  : ref_vec_dot_f32(row.data(), w.data(), static_cast<int>(n_kv));
                }
                out[t * s.n_head * D + h * D + d] = value;
            }
        }
    }
    return out;
}

}  // namespace

TEST_CASE("softmax_row: ggml_vec_soft_max_f32's bits, within 8 ulps, summing to 1, in every kernel set") {
    std::mt19937 rng(41);
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        for (std::size_t n : {1, 2, 7, 16, 17, 100, 1000}) {
            auto scores = random_floats(rng, n, 8.0f);
            if (n > 4) scores[1] = scores[3] = -INFINITY;  // masked positions
            std::vector<float> p = scores;
            k.softmax_row(p.data(), n, 0.125f);
            // llama.cpp: w = s * scale; exp(w - max) in groups of 16; sum of each group's
            // _mm512_reduce_add_ps in double; p = e * (float)(1 / sum)
            std::vector<float> e((n + 15) / 16 * 16, 0.0f);
            float fmax = -INFINITY;
            for (std::size_t i = 0; i < n; ++i) fmax = std::max(fmax, scores[i] * 0.125f);
            double group_sum = 0;
            for (std::size_t i = 0; i < n; ++i) e[i] = ref_vector_exp(scores[i] * 0.125f - fmax);
            for (std::size_t i = 0; i < e.size(); i += 16) group_sum += static_cast<double>(ref_reduce_add_ps(&e[i]));
            const auto inverse = static_cast<float>(1.0 / group_sum);
            double max = -INFINITY, total = 0, sum = 0;
            for (float s : scores) max = std::max(max, static_cast<double>(s * 0.125f));
            for (float s : scores) total += std::exp(s * 0.125f - max);
            for (std::size_t i = 0; i < n; ++i) {
                CHECK(float_bits(p[i]) == float_bits(e[i] * inverse));
                const double want = std::exp(scores[i] * 0.125f - max) / total;
                CHECK(std::fabs(p[i] - want) <= 8 * std::ldexp(1.0, -24) * want + 1e-37);
                sum += p[i];
            }
            CHECK(sum == doctest::Approx(1.0).epsilon(1e-6));
        }
    }
}

TEST_CASE("weighted sums of F32 and F16 value rows: llama.cpp's P.V orders bit for bit, within the summation bound") {
    std::mt19937 rng(42);
    for (const auto& k : runnable_kernel_sets()) {
        CAPTURE(k.description);
        for (fast::KvType type : {fast::KvType::f32, fast::KvType::f16}) {
            for (std::size_t D : {8, 16, 24, 64, 100, 256}) {
                for (std::size_t heads : {1, 3, 4}) {
                    for (std::size_t first : {0, 5, 16, 70}) {
                        for (fast::SumOrder order : {fast::SumOrder::vec_dot, fast::SumOrder::tiled}) {
                            const std::size_t n = 37;
                            const Cache c = random_cache(rng, type, n, D);
                            const auto p = random_floats(rng, heads * n, 0.1f);
                            std::vector<float> out(heads * D, -7.0f);
                            fast::WeightedSumTask task{p.data(), n, heads, n, c.values.data(), c.view().row_bytes, D, out.data(), D};
                            task.first_position = first;
                            task.order = order;
                            task.round_p_to_f16 = type == fast::KvType::f16;
                            (type == fast::KvType::f32 ? k.weighted_sum_f32 : k.weighted_sum_f16)(task);
                            // the transposed values and P at absolute positions, zero-padded
                            const int length = static_cast<int>((first + n + 63) / 64 * 64);
                            for (std::size_t h = 0; h < heads; ++h) {
                                std::vector<float> prob(length, 0.0f);
                                for (std::size_t j = 0; j < n; ++j) {
                                    const float pj = p[h * n + j];
                                    prob[first + j] = task.round_p_to_f16 ? ref_half_to_float(ref_float_to_half(pj)) : pj;
                                }
                                for (std::size_t d = 0; d < D; ++d) {
                                    std::vector<float> row(length, 0.0f);
                                    double want = 0, magnitude = 0;
                                    for (std::size_t j = 0; j < n; ++j) {
                                        row[first + j] = static_cast<float>(c.value_values[j * D + d]);
                                        const double term = static_cast<double>(prob[first + j]) * c.value_values[j * D + d];
                                        want += term;
                                        magnitude += std::fabs(term);
                                    }
                                    const float llama = order == fast::SumOrder::tiled
                                                            ? ref_tinyblas16(row.data(), prob.data(), length, ref_identity)
                                                            : ref_vec_dot_f32(row.data(), prob.data(), length);
                                    CHECK(float_bits(out[h * D + d]) == float_bits(llama));
                                    CHECK(std::fabs(out[h * D + d] - want) <= (n + 2) * std::ldexp(1.0, -24) * magnitude);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("attention: llama.cpp's bits for decode and prefill, masks, grouped heads, F32 and F16 caches, any thread count") {
    std::mt19937 rng(43);
    const auto sets = runnable_kernel_sets();
    fast::ThreadPool one(1), two(2);
    struct Case {
        std::size_t n_head, n_head_kv, head_dim, window;
    };
    for (const Case& shape_case : {Case{8, 4, 8, 0}, Case{32, 8, 64, 0}, Case{4, 4, 32, 0}, Case{4, 2, 64, 4}, Case{2, 1, 256, 3},
                                   Case{2, 2, 6, 0}, Case{4, 2, 64, 20}}) {
        const fast::AttentionShape s{shape_case.n_head, shape_case.n_head_kv, shape_case.head_dim,
                                     1.0f / std::sqrt(static_cast<float>(shape_case.head_dim)), shape_case.window};
        for (fast::KvType type : {fast::KvType::f32, fast::KvType::f16}) {
            const std::size_t first = 3, n_tokens = 17, positions = first + n_tokens;
            const Cache c = random_cache(rng, type, positions, s.n_head_kv * s.head_dim);
            const std::size_t width = s.n_head * s.head_dim;
            const auto q = random_floats(rng, n_tokens * width, 1.0f);
            const auto want = reference_attention(q, n_tokens, c, first, s);
            const auto llama_prefill = llama_attention(q, n_tokens, c, first, s);
            fast::AlignedBuffer workspace(fast::attention_workspace_bytes(2, s, positions));
            for (const auto& k : sets) {
                CAPTURE(k.description);
                CAPTURE(s.n_head);
                CAPTURE(s.head_dim);
                CAPTURE(s.window);
                CAPTURE(static_cast<int>(type));
                std::vector<float> out1(n_tokens * width), out2(n_tokens * width);
                fast::attention(k, one, q.data(), width, n_tokens, c.view(), first, s, out1.data(), width, workspace.span());
                fast::attention(k, two, q.data(), width, n_tokens, c.view(), first, s, out2.data(), width, workspace.span());
                REQUIRE(std::memcmp(out1.data(), out2.data(), out1.size() * 4) == 0);
                REQUIRE(std::memcmp(out1.data(), llama_prefill.data(), out1.size() * 4) == 0);
                for (std::size_t t = 0; t < n_tokens; ++t) {
                    for (std::size_t h = 0; h < s.n_head; ++h) {
                        double largest = 0;
                        for (std::size_t d = 0; d < s.head_dim; ++d) largest = std::max(largest, std::fabs(want.out[t * width + h * s.head_dim + d]));
                        for (std::size_t d = 0; d < s.head_dim; ++d) {
                            const std::size_t i = t * width + h * s.head_dim + d;
                            const double p_rounding = type == fast::KvType::f16 ? std::ldexp(want.magnitude[i], -11) : 0.0;
                            if (!(std::fabs(out1[i] - want.out[i]) <= 2e-5 * largest + p_rounding)) {
                                FAIL("token " << t << " head " << h << " dim " << d << ": " << out1[i] << " vs " << want.out[i]);
                            }
                        }
                    }
                    // the same token decoded alone: llama.cpp's decode orders
                    const std::vector<float> q_t(q.begin() + t * width, q.begin() + (t + 1) * width);
                    std::vector<float> single(width);
                    fast::attention(k, two, q_t.data(), width, 1, c.view(), first + t, s, single.data(), width, workspace.span());
                    const auto llama_decode = llama_attention(q_t, 1, c, first + t, s);
                    REQUIRE(std::memcmp(single.data(), llama_decode.data(), width * 4) == 0);
                }
            }
        }
    }
}

TEST_CASE("attention: positions beyond the cache and a short workspace are named errors") {
    const fast::AttentionShape s{4, 2, 8, 1.0f, 0};
    std::mt19937 rng(44);
    const Cache c = random_cache(rng, fast::KvType::f32, 4, 16);
    std::vector<float> q(32 * 2), out(32 * 2);
    fast::ThreadPool pool(1);
    fast::AlignedBuffer workspace(fast::attention_workspace_bytes(1, s, 8));
    CHECK_THROWS_WITH_AS(fast::attention(fast::process_kernel_set(), pool, q.data(), 32, 2, c.view(), 3, s, out.data(), 32, workspace.span()),
                         doctest::Contains("cache holds 4"), ember::Error);
    fast::AlignedBuffer small(8);
    CHECK_THROWS_WITH_AS(fast::attention(fast::process_kernel_set(), pool, q.data(), 32, 2, c.view(), 0, s, out.data(), 32, small.span()),
                         doctest::Contains("workspace too small"), ember::Error);
    const fast::AttentionShape bad{6, 4, 8, 1.0f, 0};
    CHECK_THROWS_AS(fast::attention_workspace_bytes(1, bad, 8), ember::Error);
}
