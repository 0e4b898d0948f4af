// Weight access for the reference route: rows converted to F32 by the weight-format
// table's dequantizers (llama.cpp's dequantize_row_*, model-math §2), embedding lookups
// and matrix products.
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <algorithm>
#include <cassert>
#include <cstring>

#include "gguf/ggml_type.hpp"
#include "kernels/weight_format.hpp"
#include "kernels/reference/kernels.hpp"

namespace ember::kernels::reference {

using gguf::GgmlType;

namespace {

// Elements dequantized at a time by dot_row: a whole number of blocks of every format.
constexpr std::size_t kChunk = 256;

double dot_format_row(const WeightFormat& format, const std::byte* row, const float* x, std::size_t n) {
    assert(n % format.block_size == 0);
    float w[kChunk];
    double sum = 0.0;
    for (std::size_t j0 = 0; j0 < n; j0 += kChunk) {
        const std::size_t count = std::min(kChunk, n - j0);
        format.dequantize_row(row + format_row_bytes(format.block_size, format.block_bytes, j0), w, count);
        for (std::size_t j = 0; j < count; ++j) sum += static_cast<double>(w[j]) * x[j0 + j];
    }
    return sum;
}

}  // namespace

void dequantize_row(GgmlType type, const std::byte* row, float* out, std::size_t n) {
    weight_format(type).dequantize_row(row, out, n);
}

double dot_row(GgmlType type, const std::byte* row, const float* x, std::size_t n) {
    return dot_format_row(weight_format(type), row, x, n);
}

void get_rows(const WeightMatrix& table, std::span<const std::int32_t> ids, Rows out) {
    assert(out.rows == ids.size() && out.cols == table.cols);
    for (std::size_t t = 0; t < ids.size(); ++t) {
        assert(ids[t] >= 0 && static_cast<std::size_t>(ids[t]) < table.rows);
        dequantize_row(table.type, table.row(static_cast<std::size_t>(ids[t])), out.row(t), table.cols);
    }
}

// y[t][o] = sum_i W[o][i] * x[t][i]     x: [T, in], W: [out, in], y: [T, out]
// Split over output features; each value is computed by the same sequential loop
// whatever the split, so the result does not depend on the thread count.
void matmul(ConstRows x, const WeightMatrix& w, Rows y) {
    assert(x.cols == w.cols && y.rows == x.rows && y.cols == w.rows);
    const WeightFormat& format = weight_format(w.type);
    const std::size_t work_per_row = x.rows * w.cols;
    const std::size_t grain = std::max<std::size_t>(1, 16384 / std::max<std::size_t>(1, work_per_row));
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, w.rows, grain), [&](const tbb::blocked_range<std::size_t>& range) {
        for (std::size_t o = range.begin(); o != range.end(); ++o) {
            const std::byte* weights = w.row(o);
            for (std::size_t t = 0; t < x.rows; ++t) {
                y.row(t)[o] = static_cast<float>(dot_format_row(format, weights, x.row(t), w.cols));
            }
        }
    });
}

}  // namespace ember::kernels::reference
