// Softmax attention over a contiguous KV cache (F32, or F16 with `--kv-type f16`), the
// fast route's version of the reference's attention (same contract):
//   for query token t at position p = first_position + t and head h, reading KV head
//   g = h / (n_head / n_head_kv), over the visible cached positions j (causal, and
//   p - j < window when window > 0):
//     s_j = q_h . k_j;   p_j = exp(scale * s_j - max) / sum;   out_h = sum_j p_j v_j
// computed as llama.cpp computes it with flash attention off (model-math §3.4, §3.6):
// the scores with the kernel set's matrix product (keys as weight rows, the heads as
// tokens; for F16 keys the queries are rounded to F16), the softmax with the vector exp
// and per-16 sums in double, and the weighted sum in llama.cpp's order over positions
// (for an F16 cache the probabilities are rounded to F16). Its summation orders depend
// on n_tokens as llama.cpp's do (decode vs prefill; docs/fast-path.md), never on the
// thread count.
#pragma once

#include <cstddef>
#include <span>

#include "kernels/fast/kernel_set.hpp"
#include "kernels/kv_rows.hpp"
#include "kernels/fast/thread_pool.hpp"

namespace ember::kernels::fast {

using kernels::KvType;

struct AttentionShape {
    std::size_t n_head = 0;
    std::size_t n_head_kv = 0;
    std::size_t head_dim = 0;
    float scale = 1.0f;
    std::size_t window = 0;  // 0: causal only
};

// The cache of one layer: row j (position j) holds n_head_kv * head_dim values of `type`.
struct KvCacheView {
    KvType type = KvType::f32;
    const std::byte* keys = nullptr;
    const std::byte* values = nullptr;
    std::size_t row_bytes = 0;  // from one position to the next
    std::size_t n_positions = 0;
};

// Scratch for attention() with `threads` threads and up to `max_positions` cached rows.
std::size_t attention_workspace_bytes(int threads, const AttentionShape& shape, std::size_t max_positions);

// q: [n_tokens, n_head * head_dim] (row stride q_stride floats); out: the same shape
// (row stride out_stride); the cache must hold positions up to first_position + n_tokens - 1.
// pattern: null, or [n_head * n_tokens, first_position + n_tokens] (contiguous) receiving
// the softmax probabilities: row h * n_tokens + t, column j = position j, 0 where masked
// (the F32 probabilities, before an F16 cache's rounding of them). Copying them out is
// the only extra work, and only when asked.
// ember::Error for inconsistent shapes or a workspace that is too small.
void attention(const KernelSet& kernels, ThreadPool& pool, const float* q, std::size_t q_stride, std::size_t n_tokens,
               const KvCacheView& kv, std::size_t first_position, const AttentionShape& shape, float* out,
               std::size_t out_stride, std::span<std::byte> workspace, float* pattern = nullptr);

}  // namespace ember::kernels::fast
