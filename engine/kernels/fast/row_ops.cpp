#include "kernels/fast/row_ops.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/reference/kernels.hpp"

namespace ember::kernels::fast {

namespace {

// Rows per parallel chunk: about 16K values of work.
std::size_t row_grain(std::size_t cols) { return std::max<std::size_t>(1, 16384 / std::max<std::size_t>(cols, 1)); }

}  // namespace

void rms_norm(ThreadPool& pool, const float* x, std::size_t x_stride, const float* weight, float eps, float* y,
              std::size_t y_stride, std::size_t rows, std::size_t cols) {
    pool.for_chunks(rows, row_grain(cols), [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) {
            const float* in = x + r * x_stride;
            float* out = y + r * y_stride;
            double sum = 0.0;
            for (std::size_t c = 0; c < cols; ++c) sum += static_cast<double>(in[c] * in[c]);
            const auto mean = static_cast<float>(sum / static_cast<double>(cols));
            const float scale = 1.0f / std::sqrt(mean + eps);
            for (std::size_t c = 0; c < cols; ++c) out[c] = in[c] * scale;
            if (weight != nullptr) {
                for (std::size_t c = 0; c < cols; ++c) out[c] = out[c] * weight[c];
            }
        }
    });
}

void swiglu(const KernelSet& k, ThreadPool& pool, const float* gate, std::size_t gate_stride, const float* up,
            std::size_t up_stride, float* out, std::size_t out_stride, std::size_t rows, std::size_t cols) {
    pool.for_chunks(rows, row_grain(cols), [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) k.swiglu_row(gate + r * gate_stride, up + r * up_stride, out + r * out_stride, cols);
    });
}

void geglu(const KernelSet& k, ThreadPool& pool, const float* gate, std::size_t gate_stride, const float* up,
           std::size_t up_stride, float* out, std::size_t out_stride, std::size_t rows, std::size_t cols) {
    const float* table = reference::gelu_f16_table_values();
    pool.for_chunks(rows, row_grain(cols), [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) {
            k.geglu_row(gate + r * gate_stride, up + r * up_stride, out + r * out_stride, cols, table);
        }
    });
}

void store_kv(const KernelSet& k, ThreadPool& pool, const float* x, std::size_t x_stride, std::size_t rows,
              std::size_t cols, KvType type, std::byte* dst, std::size_t dst_row_bytes) {
    pool.for_chunks(rows, row_grain(cols), [&](std::size_t r0, std::size_t r1) {
        for (std::size_t r = r0; r < r1; ++r) {
            std::byte* row = dst + r * dst_row_bytes;
            if (type == KvType::f16) k.round_row_f16(x + r * x_stride, reinterpret_cast<std::uint16_t*>(row), cols);
            else std::memcpy(row, x + r * x_stride, cols * sizeof(float));
        }
    });
}

}  // namespace ember::kernels::fast
