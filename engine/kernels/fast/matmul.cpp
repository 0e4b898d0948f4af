#include "kernels/fast/matmul.hpp"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "common/error.hpp"
#include "kernels/fast/aligned_buffer.hpp"
#include "kernels/weight_format.hpp"

namespace ember::kernels::fast {

namespace {

using gguf::GgmlType;

// Row chunks handed to threads are multiples of this (every tile height divides it).
constexpr std::size_t kRowGroup = 8;

const WeightFormat& fast_format(GgmlType type) {
    const WeightFormat* f = find_weight_format(type);
    if (!f) throw Error(fmt::format("the fast route has no matrix product for {} weights", gguf::type_name(type)));
    return *f;
}

MatmulRowsFn rows_function(const KernelSet& k, const WeightFormat& f) {
    const MatmulRowsFn fn = k.matmul_rows[f.index];
    if (!fn) throw Error(fmt::format("the fast route's {} kernels have no {} product", k.description, f.name));
    return fn;
}

// Bytes of `cols` weights, or of `cols` activations converted for them.
std::size_t weight_row_bytes(const WeightFormat& f, std::size_t cols) { return format_row_bytes(f.block_size, f.block_bytes, cols); }
std::size_t packed_row_bytes(const WeightFormat& f, std::size_t cols) {
    const ActivationFormat& a = activation_format(f.activation);
    return format_row_bytes(a.block_size, a.block_bytes, cols);
}

void check_columns(const WeightFormat& f, std::size_t cols) {
    const std::size_t block = std::max(f.block_size, activation_format(f.activation).block_size);
    if (cols % block != 0) {
        throw Error(fmt::format("a {} product needs a multiple of {} columns, got {}", f.name, block, cols));
    }
}

// One activation row converted to what `f`'s product reads (F32 is used in place).
void convert_row(const KernelSet& k, ActivationType type, const float* x, std::byte* dst, std::size_t cols) {
    switch (type) {
        case ActivationType::f32: std::memcpy(dst, x, cols * sizeof(float)); return;
        case ActivationType::f16: k.round_row_f16(x, reinterpret_cast<std::uint16_t*>(dst), cols); return;
        case ActivationType::bf16: k.round_row_bf16(x, reinterpret_cast<std::uint16_t*>(dst), cols); return;
        case ActivationType::q8_0: k.quantize_row_q8_0(x, reinterpret_cast<BlockQ8_0*>(dst), cols); return;
        case ActivationType::q8_1: k.quantize_row_q8_1(x, reinterpret_cast<BlockQ8_1*>(dst), cols); return;
        case ActivationType::q8_K: k.quantize_row_q8_K(x, reinterpret_cast<BlockQ8_K*>(dst), cols); return;
    }
}

// Tokens per parallel chunk when converting: enough work to be worth a task.
std::size_t conversion_grain(std::size_t cols) { return std::max<std::size_t>(1, 16384 / std::max<std::size_t>(cols, 1)); }

}  // namespace

SumOrder sum_order(GgmlType weight_type, std::size_t n_tokens, std::size_t rows, std::size_t cols) {
    const std::size_t chunk = weight_type == GgmlType::BF16 ? 32 : 16;
    return n_tokens >= 2 && cols % chunk == 0 && rows % 4 == 0 ? SumOrder::tiled : SumOrder::vec_dot;
}

bool has_matmul(GgmlType type) { return find_weight_format(type) != nullptr; }

std::size_t activation_row_bytes(GgmlType weight_type, std::size_t cols) {
    return AlignedBuffer::round_up(packed_row_bytes(fast_format(weight_type), cols));
}

namespace {

// Q8_0 activations' whole chunks of sixteen tokens in lanes (TokenLanes), for the products
// that read them; in a workspace they follow the rows (whose bytes are a multiple of 64).
std::size_t token_lanes_bytes(const WeightFormat& f, std::size_t cols, std::size_t n_tokens) {
    if (f.activation != ActivationType::q8_0) return 0;
    return n_tokens / kLaneTokens * (cols / kQ8_0BlockSize) * sizeof(TokenLanes);
}

// Q8_0 activations of 2+ tokens widened to pairs (TokenPairs, then their F32 scales), for
// the products that read them; in a workspace they follow the lanes.
std::size_t token_pairs_bytes(const WeightFormat& f, std::size_t cols, std::size_t n_tokens) {
    if (f.activation != ActivationType::q8_0 || n_tokens < 2) return 0;
    const std::size_t blocks = n_tokens * (cols / kQ8_0BlockSize);
    return blocks * sizeof(TokenPairs) + AlignedBuffer::round_up(blocks * sizeof(float));
}

}  // namespace

std::size_t activation_workspace_bytes(GgmlType weight_type, std::size_t cols, std::size_t n_tokens) {
    if (weight_type == GgmlType::F32) return 0;
    const WeightFormat& f = fast_format(weight_type);
    return activation_row_bytes(weight_type, cols) * n_tokens + token_lanes_bytes(f, cols, n_tokens) +
           token_pairs_bytes(f, cols, n_tokens);
}

std::size_t widest_activation_workspace_bytes(std::size_t cols, std::size_t n_tokens) {
    std::size_t widest = 0;
    for (const WeightFormat& f : weight_formats()) {
        const std::size_t block = std::max(f.block_size, activation_format(f.activation).block_size);
        widest = std::max(widest, activation_workspace_bytes(f.type, cols / block * block, n_tokens));
    }
    return widest;
}

ConvertedActivations convert_activations(const KernelSet& k, ThreadPool& pool, GgmlType weight_type, const float* x,
                                         std::size_t n_tokens, std::size_t cols, std::span<std::byte> workspace) {
    const WeightFormat& format = fast_format(weight_type);
    check_columns(format, cols);
    ConvertedActivations out{weight_type, nullptr, activation_row_bytes(weight_type, cols), n_tokens, cols};
    if (format.activation == ActivationType::f32) {
        out.data = reinterpret_cast<const std::byte*>(x);
        out.row_bytes = cols * sizeof(float);
        return out;
    }
    const std::size_t needed = activation_workspace_bytes(weight_type, cols, n_tokens);
    if (workspace.size() < needed) {
        throw Error(fmt::format("activation workspace too small for {} x {} {} activations: {} bytes, need {}", n_tokens,
                                cols, activation_format(format.activation).name, workspace.size(), needed));
    }
    std::byte* base = workspace.data();
    const std::size_t stride = out.row_bytes;
    pool.for_chunks(n_tokens, conversion_grain(cols), [&](std::size_t t0, std::size_t t1) {
        for (std::size_t t = t0; t < t1; ++t) convert_row(k, format.activation, x + t * cols, base + t * stride, cols);
    });
    out.data = base;
    if (k.pack_token_lanes && token_lanes_bytes(format, cols, n_tokens) > 0) {
        auto* lanes = reinterpret_cast<TokenLanes*>(base + stride * n_tokens);
        const std::size_t n_blocks = cols / kQ8_0BlockSize;
        pool.for_chunks(n_tokens / kLaneTokens, 1, [&](std::size_t c0, std::size_t c1) {
            for (std::size_t c = c0; c < c1; ++c) k.pack_token_lanes(base + c * kLaneTokens * stride, stride, cols, lanes + c * n_blocks);
        });
        out.token_lanes = lanes;
    }
    if (k.pack_token_pairs && token_pairs_bytes(format, cols, n_tokens) > 0) {
        auto* pairs = reinterpret_cast<TokenPairs*>(base + stride * n_tokens + token_lanes_bytes(format, cols, n_tokens));
        const std::size_t n_blocks = cols / kQ8_0BlockSize;
        float* scales = reinterpret_cast<float*>(pairs + n_tokens * n_blocks);
        pool.for_chunks(n_tokens, conversion_grain(cols), [&](std::size_t t0, std::size_t t1) {
            k.pack_token_pairs(base + t0 * stride, stride, t1 - t0, cols, pairs + t0 * n_blocks, scales + t0 * n_blocks);
        });
        out.token_pairs = pairs;
        out.token_pair_scales = scales;
    }
    return out;
}

void matmul(const KernelSet& k, ThreadPool& pool, const WeightMatrix& w, const ConvertedActivations& x, float* y,
            std::size_t y_stride) {
    const WeightFormat& format = fast_format(w.type);
    const MatmulRowsFn rows_fn = rows_function(k, format);
    if (x.weight_type != w.type) {
        throw Error(fmt::format("activations converted for {} weights used with {} weights",
                                gguf::type_name(x.weight_type), gguf::type_name(w.type)));
    }
    if (x.cols != w.cols) throw Error(fmt::format("matmul: weight has {} columns, activations {}", w.cols, x.cols));
    check_columns(format, w.cols);
    if (w.row_bytes < weight_row_bytes(format, w.cols)) {
        throw Error(fmt::format("matmul: {} rows of {} columns need {} bytes each, the weight has {}", format.name, w.cols,
                                weight_row_bytes(format, w.cols), w.row_bytes));
    }
    const MatmulTask task{w.data, w.row_bytes, w.cols, x.data, x.row_bytes, x.n_tokens, y, y_stride ? y_stride : w.rows,
                          sum_order(w.type, x.n_tokens, w.rows, w.cols), x.token_lanes, x.token_pairs,
                          x.token_pair_scales};
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
    return single_dot(k.matmul(GgmlType::Q8_0), w, a, n_blocks * sizeof(BlockQ8_0), n_blocks * kQ8_0BlockSize);
}
float f16_dot(const KernelSet& k, const std::uint16_t* w, const std::uint16_t* a, std::size_t n) {
    return single_dot(k.matmul(GgmlType::F16), w, a, n * 2, n);
}
float bf16_dot(const KernelSet& k, const std::uint16_t* w, const std::uint16_t* a, std::size_t n) {
    return single_dot(k.matmul(GgmlType::BF16), w, a, n * 2, n);
}
float f32_dot(const KernelSet& k, const float* w, const float* a, std::size_t n) {
    return single_dot(k.matmul(GgmlType::F32), w, a, n * 4, n);
}

}  // namespace ember::kernels::fast
