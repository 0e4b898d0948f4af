#include "kernels/fast/attention.hpp"

#include <fmt/format.h>

#include "common/error.hpp"
#include "kernels/fast/aligned_buffer.hpp"

namespace ember::kernels::fast {

namespace {

std::size_t group_size(const AttentionShape& s) { return s.n_head / s.n_head_kv; }

// Per thread: the scores of one task's heads, then its queries rounded to F16.
std::size_t scores_bytes(const AttentionShape& s, std::size_t max_positions) {
    return AlignedBuffer::round_up(group_size(s) * max_positions * sizeof(float));
}
std::size_t per_thread_bytes(const AttentionShape& s, std::size_t max_positions) {
    return scores_bytes(s, max_positions) + AlignedBuffer::round_up(group_size(s) * s.head_dim * sizeof(std::uint16_t));
}

void check_shape(const AttentionShape& s) {
    if (s.n_head == 0 || s.n_head_kv == 0 || s.head_dim == 0 || s.n_head % s.n_head_kv != 0) {
        throw Error(fmt::format("attention: {} query heads cannot share {} KV heads (head dim {})", s.n_head, s.n_head_kv,
                                s.head_dim));
    }
}

}  // namespace

std::size_t attention_workspace_bytes(int threads, const AttentionShape& shape, std::size_t max_positions) {
    check_shape(shape);
    return static_cast<std::size_t>(threads) * per_thread_bytes(shape, max_positions);
}

void attention(const KernelSet& k, ThreadPool& pool, const float* q, std::size_t q_stride, std::size_t n_tokens,
               const KvCacheView& kv, std::size_t first_position, const AttentionShape& shape, float* out,
               std::size_t out_stride, std::span<std::byte> workspace, float* pattern) {
    check_shape(shape);
    const std::size_t D = shape.head_dim;
    const std::size_t G = group_size(shape);
    const std::size_t element = kv.type == KvType::f32 ? 4 : 2;
    if (first_position + n_tokens > kv.n_positions) {
        throw Error(fmt::format("attention: queries reach position {} but the cache holds {}", first_position + n_tokens,
                                kv.n_positions));
    }
    if (kv.row_bytes < shape.n_head_kv * D * element || q_stride < shape.n_head * D || out_stride < shape.n_head * D) {
        throw Error("attention: a row stride is shorter than its heads");
    }
    const std::size_t max_positions = first_position + n_tokens;
    const std::size_t slot = per_thread_bytes(shape, max_positions);
    if (workspace.size() < static_cast<std::size_t>(pool.threads()) * slot) {
        throw Error(fmt::format("attention workspace too small: {} bytes, need {}", workspace.size(),
                                static_cast<std::size_t>(pool.threads()) * slot));
    }
    const MatmulRowsFn scores_fn = kv.type == KvType::f32 ? k.matmul(gguf::GgmlType::F32) : k.matmul(gguf::GgmlType::F16);
    const WeightedSumFn weighted_sum = kv.type == KvType::f32 ? k.weighted_sum_f32 : k.weighted_sum_f16;
    // llama.cpp (-fa off): KQ = mul_mat(K, Q) and KQV = mul_mat(V^T, P) over its padded
    // cache (a multiple of 256 positions). Q is not contiguous there, so an F32 K·Q is
    // always ggml_vec_dot_f32; an F16 one converts Q and goes through tinyBLAS for 2+
    // tokens when D % 16 == 0. P is contiguous: tinyBLAS for 2+ tokens when D % 4 == 0.
    const SumOrder scores_order =
        kv.type == KvType::f16 && n_tokens >= 2 && D % 16 == 0 ? SumOrder::tiled : SumOrder::vec_dot;
    const SumOrder values_order = n_tokens >= 2 && D % 4 == 0 ? SumOrder::tiled : SumOrder::vec_dot;

    // One task per (token, KV head): its G query heads together.
    auto run_task = [&](std::size_t task, std::byte* scratch) {
        const std::size_t t = task / shape.n_head_kv;
        const std::size_t g = task % shape.n_head_kv;
        const std::size_t position = first_position + t;
        const std::size_t begin = shape.window == 0 || position < shape.window ? 0 : position - shape.window + 1;
        // llama.cpp's score rows start at position 0 and its softmax sums groups of 16:
        // the row here starts at a multiple of 16, positions before `begin` masked.
        const std::size_t row_start = begin - begin % 16;
        const std::size_t n_row = position + 1 - row_start;
        float* scores = reinterpret_cast<float*>(scratch);  // [G, n_row]

        const float* q_heads = q + t * q_stride + g * G * D;  // [G, D]
        const std::byte* queries = reinterpret_cast<const std::byte*>(q_heads);
        if (kv.type == KvType::f16) {
            auto* rounded = reinterpret_cast<std::uint16_t*>(scratch + scores_bytes(shape, max_positions));
            k.round_row_f16(q_heads, rounded, G * D);
            queries = reinterpret_cast<const std::byte*>(rounded);
        }
        const std::size_t head_offset = g * D * element;
        const MatmulTask score_task{kv.keys + row_start * kv.row_bytes + head_offset, kv.row_bytes, D, queries, D * element,
                                    G, scores, n_row, scores_order};
        scores_fn(score_task, 0, n_row);
        for (std::size_t h = 0; h < G; ++h) {
            float* row = scores + h * n_row;
            for (std::size_t j = 0; j < begin - row_start; ++j) row[j] = -__builtin_inff();
            k.softmax_row(row, n_row, shape.scale);
            if (pattern) {
                // [n_head * n_tokens, max_positions]: zeros, then the visible positions.
                float* out_row = pattern + ((g * G + h) * n_tokens + t) * max_positions;
                for (std::size_t j = 0; j < max_positions; ++j) out_row[j] = 0.0f;
                for (std::size_t j = begin; j <= position; ++j) out_row[j] = row[j - row_start];
            }
        }
        WeightedSumTask sum_task{scores, n_row, G, n_row, kv.values + row_start * kv.row_bytes + head_offset,
                                 kv.row_bytes, D, out + t * out_stride + g * G * D, D};
        sum_task.first_position = row_start;
        sum_task.order = values_order;
        sum_task.round_p_to_f16 = kv.type == KvType::f16;
        weighted_sum(sum_task);
    };
    pool.for_chunks_indexed(n_tokens * shape.n_head_kv, 1, [&](std::size_t begin, std::size_t end, int worker) {
        std::byte* scratch = workspace.data() + static_cast<std::size_t>(worker) * slot;
        for (std::size_t task = begin; task < end; ++task) run_task(task, scratch);
    });
}

}  // namespace ember::kernels::fast
