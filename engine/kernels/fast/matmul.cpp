#include "kernels/fast/matmul.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "common/error.hpp"
#include "kernels/fast/aligned_buffer.hpp"

namespace ember::kernels::fast {

namespace {

using gguf::GgmlType;

// Row chunks handed to threads are multiples of this (every tile height divides it).
constexpr std::size_t kRowGroup = 8;

MatmulRowsFn rows_function(const KernelSet& k, GgmlType type) {
    switch (type) {
        case GgmlType::Q8_0: return k.q8_0_matmul_rows;
        case GgmlType::F16: return k.f16_matmul_rows;
        case GgmlType::BF16: return k.bf16_matmul_rows;
        case GgmlType::F32: return k.f32_matmul_rows;
        default: break;
    }
    throw Error(fmt::format("the fast route has no matrix product for {} weights", gguf::type_name(type)));
}

std::size_t packed_row_bytes(GgmlType type, std::size_t cols) {
    switch (type) {
        case GgmlType::Q8_0: return cols / kQ8_0BlockSize * sizeof(BlockQ8_0);
        case GgmlType::F16:
        case GgmlType::BF16: return cols * 2;
        case GgmlType::F32: return cols * 4;
        default: break;
    }
    throw Error(fmt::format("the fast route has no matrix product for {} weights", gguf::type_name(type)));
}

void check_columns(GgmlType type, std::size_t cols) {
    if (type == GgmlType::Q8_0 && cols % kQ8_0BlockSize != 0) {
        throw Error(fmt::format("a Q8_0 product needs a multiple of 32 columns, got {}", cols));
    }
}

// Tokens per parallel chunk when converting: enough work to be worth a task.
std::size_t conversion_grain(std::size_t cols) { return std::max<std::size_t>(1, 16384 / std::max<std::size_t>(cols, 1)); }

}  // namespace

SumOrder sum_order(GgmlType weight_type, std::size_t n_tokens, std::size_t rows, std::size_t cols) {
    const std::size_t chunk = weight_type == GgmlType::BF16 ? 32 : 16;
    return n_tokens >= 2 && cols % chunk == 0 && rows % 4 == 0 ? SumOrder::tiled : SumOrder::vec_dot;
}

bool has_matmul(GgmlType type) {
    return type == GgmlType::Q8_0 || type == GgmlType::F16 || type == GgmlType::BF16 || type == GgmlType::F32;
}

std::size_t activation_row_bytes(GgmlType weight_type, std::size_t cols) {
    return AlignedBuffer::round_up(packed_row_bytes(weight_type, cols));
}

std::size_t activation_workspace_bytes(GgmlType weight_type, std::size_t cols, std::size_t n_tokens) {
    if (weight_type == GgmlType::F32) return 0;
    return activation_row_bytes(weight_type, cols) * n_tokens;
}

ConvertedActivations convert_activations(const KernelSet& k, ThreadPool& pool, GgmlType weight_type, const float* x,
                                         std::size_t n_tokens, std::size_t cols, std::span<std::byte> workspace) {
    check_columns(weight_type, cols);
    ConvertedActivations out{weight_type, nullptr, activation_row_bytes(weight_type, cols), n_tokens, cols};
    if (weight_type == GgmlType::F32) {
        out.data = reinterpret_cast<const std::byte*>(x);
        out.row_bytes = cols * sizeof(float);
        return out;
    }
    const std::size_t needed = activation_workspace_bytes(weight_type, cols, n_tokens);
    if (workspace.size() < needed) {
        throw Error(fmt::format("activation workspace too small for {} x {} {} activations: {} bytes, need {}", n_tokens,
                                cols, gguf::type_name(weight_type), workspace.size(), needed));
    }
    std::byte* base = workspace.data();
    const std::size_t stride = out.row_bytes;
    pool.for_chunks(n_tokens, conversion_grain(cols), [&](std::size_t t0, std::size_t t1) {
        for (std::size_t t = t0; t < t1; ++t) {
            const float* row = x + t * cols;
            std::byte* dst = base + t * stride;
            switch (weight_type) {
                case GgmlType::Q8_0: k.quantize_row_q8_0(row, reinterpret_cast<BlockQ8_0*>(dst), cols); break;
                case GgmlType::F16: k.round_row_f16(row, reinterpret_cast<std::uint16_t*>(dst), cols); break;
                default: k.round_row_bf16(row, reinterpret_cast<std::uint16_t*>(dst), cols); break;
            }
        }
    });
    out.data = base;
    return out;
}

void matmul(const KernelSet& k, ThreadPool& pool, const WeightMatrix& w, const ConvertedActivations& x, float* y,
            std::size_t y_stride) {
    const MatmulRowsFn rows_fn = rows_function(k, w.type);
    if (x.weight_type != w.type) {
        throw Error(fmt::format("activations converted for {} weights used with {} weights",
                                gguf::type_name(x.weight_type), gguf::type_name(w.type)));
    }
    if (x.cols != w.cols) throw Error(fmt::format("matmul: weight has {} columns, activations {}", w.cols, x.cols));
    check_columns(w.type, w.cols);
    if (w.row_bytes < packed_row_bytes(w.type, w.cols)) {
        throw Error(fmt::format("matmul: {} rows of {} columns need {} bytes each, the weight has {}",
                                gguf::type_name(w.type), w.cols, packed_row_bytes(w.type, w.cols), w.row_bytes));
    }
    const MatmulTask task{w.data, w.row_bytes, w.cols, x.data, x.row_bytes, x.n_tokens, y, y_stride ? y_stride : w.rows,
                          sum_order(w.type, x.n_tokens, w.rows, w.cols)};
    const std::size_t groups = (w.rows + kRowGroup - 1) / kRowGroup;
    // About eight chunks per thread: small enough to balance, large enough to stream.
    const std::size_t grain = std::max<std::size_t>(1, groups / (8 * static_cast<std::size_t>(pool.threads())));
    pool.for_chunks(groups, grain, [&](std::size_t g0, std::size_t g1) {
        rows_fn(task, g0 * kRowGroup, std::min(g1 * kRowGroup, w.rows));
    });
}

void matmul(const KernelSet& k, ThreadPool& pool, const WeightMatrix& w, const float* x, std::size_t n_tokens, float* y,
            std::span<std::byte> workspace) {
    matmul(k, pool, w, convert_activations(k, pool, w.type, x, n_tokens, w.cols, workspace), y);
}

namespace {

float single_dot(MatmulRowsFn fn, const void* w, const void* a, std::size_t row_bytes, std::size_t cols) {
    float result = 0.0f;
    const MatmulTask task{static_cast<const std::byte*>(w), row_bytes, cols, static_cast<const std::byte*>(a), row_bytes,
                          1, &result, 1, SumOrder::vec_dot};
    fn(task, 0, 1);
    return result;
}

}  // namespace

float q8_0_dot(const KernelSet& k, const BlockQ8_0* w, const BlockQ8_0* a, std::size_t n_blocks) {
    return single_dot(k.q8_0_matmul_rows, w, a, n_blocks * sizeof(BlockQ8_0), n_blocks * kQ8_0BlockSize);
}
float f16_dot(const KernelSet& k, const std::uint16_t* w, const std::uint16_t* a, std::size_t n) {
    return single_dot(k.f16_matmul_rows, w, a, n * 2, n);
}
float bf16_dot(const KernelSet& k, const std::uint16_t* w, const std::uint16_t* a, std::size_t n) {
    return single_dot(k.bf16_matmul_rows, w, a, n * 2, n);
}
float f32_dot(const KernelSet& k, const float* w, const float* a, std::size_t n) {
    return single_dot(k.f32_matmul_rows, w, a, n * 4, n);
}

}  // namespace ember::kernels::fast
