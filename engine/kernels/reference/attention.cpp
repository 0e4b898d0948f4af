// Softmax attention over the cached keys and values (model-math §3.4, §3.6, §3.7), in F32
// with double sums, one query head at a time.
#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/float16.hpp"
#include "kernels/reference/kernels.hpp"

namespace ember::kernels::reference {
namespace {

// The first cached position a query at `position` may see: causal, and within the
// sliding window (window keys including the query itself) when there is one.
std::size_t first_visible(std::size_t position, std::size_t window) {
    return (window == 0 || position < window) ? 0 : position - window + 1;
}

// Element i of a cached row of `type`, as F32.
float cached_value(KvType type, const std::byte* row, std::size_t i) {
    if (type == KvType::f16) {
        std::uint16_t h;
        std::memcpy(&h, row + 2 * i, 2);
        return fp16_to_fp32(h);
    }
    float f;
    std::memcpy(&f, row + 4 * i, 4);
    return f;
}

// q . (cached row from element `offset`), n elements, in double.
double dot(const float* q, ConstKvRows cache, std::size_t row, std::size_t offset, std::size_t n) {
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) sum += static_cast<double>(q[i]) * cached_value(cache.type, cache.row(row), offset + i);
    return sum;
}

}  // namespace

void store_kv(ConstRows x, KvRows dst) {
    assert(x.rows == dst.rows && x.cols == dst.cols);
    for (std::size_t t = 0; t < x.rows; ++t) {
        std::byte* row = dst.data + t * dst.row_bytes;
        for (std::size_t c = 0; c < x.cols; ++c) {
            if (dst.type == KvType::f16) {
                const std::uint16_t h = fp32_to_fp16(x.row(t)[c]);
                std::memcpy(row + 2 * c, &h, 2);
            } else {
                std::memcpy(row + 4 * c, x.row(t) + c, 4);
            }
        }
    }
}

// q: [T, n_head * D], keys/values: [n_kv, n_head_kv * D], out: [T, n_head * D].
// For query t (at position p = first_position + t) and head h, reading KV head
// h / (n_head / n_head_kv):
//   s_j = scale * q.k_j for visible j (masked keys contribute exactly 0 and are skipped)
//   p_j = exp(s_j - max s) / sum_j exp(s_j - max s)     (sum in double)
//   out = sum_j p_j v_j                                 (sum in double)
// pattern (when asked): row h * T + t holds p_j at column j, 0 at masked positions.
void attention(ConstRows q, ConstKvRows keys, ConstKvRows values, std::size_t first_position,
               const AttentionParams& params, std::span<float> scores, std::span<double> sums, Rows out,
               Rows pattern) {
    const std::size_t D = params.head_dim;
    const std::size_t n_kv = keys.rows;
    assert(q.cols == params.n_head * D && out.cols == q.cols && out.rows == q.rows);
    assert(keys.cols == params.n_head_kv * D && values.cols == keys.cols && values.rows == n_kv && values.type == keys.type);
    assert(first_position + q.rows <= n_kv);
    assert(scores.size() >= params.n_head * n_kv && sums.size() >= params.n_head * D);
    assert(!pattern.data || (pattern.rows == params.n_head * q.rows && pattern.cols == n_kv && pattern.contiguous()));
    const std::size_t group = params.n_head / params.n_head_kv;

    tbb::parallel_for(std::size_t{0}, params.n_head, [&](std::size_t h) {
        const std::size_t kv_head = h / group;
        float* s = scores.data() + h * n_kv;
        double* acc = sums.data() + h * D;
        for (std::size_t t = 0; t < q.rows; ++t) {
            const std::size_t position = first_position + t;
            const std::size_t begin = first_visible(position, params.window);
            const std::size_t end = position + 1;
            const float* qh = q.row(t) + h * D;

            float max_score = -std::numeric_limits<float>::infinity();
            for (std::size_t j = begin; j < end; ++j) {
                s[j] = static_cast<float>(dot(qh, keys, j, kv_head * D, D)) * params.scale;
                max_score = std::max(max_score, s[j]);
            }
            double total = 0.0;
            for (std::size_t j = begin; j < end; ++j) {
                s[j] = std::exp(s[j] - max_score);
                total += s[j];
            }
            const auto inverse_total = static_cast<float>(1.0 / total);

            float* pattern_row = pattern.data ? pattern.row(h * q.rows + t) : nullptr;
            if (pattern_row) std::fill(pattern_row, pattern_row + n_kv, 0.0f);
            std::fill(acc, acc + D, 0.0);
            for (std::size_t j = begin; j < end; ++j) {
                const float p = s[j] * inverse_total;
                if (pattern_row) pattern_row[j] = p;
                for (std::size_t d = 0; d < D; ++d) {
                    acc[d] += static_cast<double>(p) * cached_value(values.type, values.row(j), kv_head * D + d);
                }
            }
            float* oh = out.row(t) + h * D;
            for (std::size_t d = 0; d < D; ++d) oh[d] = static_cast<float>(acc[d]);
        }
    });
}

}  // namespace ember::kernels::reference
