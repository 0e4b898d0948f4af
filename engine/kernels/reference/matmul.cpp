// Weight access for the reference route: rows converted to F32 the way llama.cpp's
// dequantize_row_* does (model-math §2), embedding lookups and matrix products.
#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>

#include <cassert>
#include <cstring>

#include "common/error.hpp"
#include "gguf/ggml_type.hpp"
#include "kernels/reference/float_formats.hpp"
#include "kernels/reference/kernels.hpp"

namespace ember::kernels::reference {
namespace {

using gguf::GgmlType;

// Q8_0 (model-math §2.2): 34-byte blocks of an F16 scale d and 32 int8 values q;
// value j is q[j] * d.
constexpr std::size_t kQ8_0Block = 32;
constexpr std::size_t kQ8_0BlockBytes = 34;

std::uint16_t load_u16(const std::byte* p) {
    std::uint16_t v;
    std::memcpy(&v, p, sizeof v);
    return v;
}

float q8_0_scale(const std::byte* block) { return fp16_to_f32(load_u16(block)); }
float q8_0_value(const std::byte* block, std::size_t j, float d) {
    return static_cast<float>(static_cast<std::int8_t>(block[2 + j])) * d;
}

// The element conversion of each stored type, for the loops below.
template <class Visit>
void for_each_value(GgmlType type, const std::byte* row, std::size_t n, Visit&& visit) {
    switch (type) {
        case GgmlType::F32:
            for (std::size_t j = 0; j < n; ++j) {
                float v;
                std::memcpy(&v, row + j * 4, 4);
                visit(j, v);
            }
            return;
        case GgmlType::F16:
            for (std::size_t j = 0; j < n; ++j) visit(j, fp16_to_f32(load_u16(row + j * 2)));
            return;
        case GgmlType::BF16:
            for (std::size_t j = 0; j < n; ++j) visit(j, bf16_to_f32(load_u16(row + j * 2)));
            return;
        case GgmlType::Q8_0:
            for (std::size_t b = 0; b < n / kQ8_0Block; ++b) {
                const std::byte* block = row + b * kQ8_0BlockBytes;
                const float d = q8_0_scale(block);
                for (std::size_t j = 0; j < kQ8_0Block; ++j) visit(b * kQ8_0Block + j, q8_0_value(block, j, d));
            }
            return;
        default:
            // Models refuse such weights when they load; reaching this is a bug.
            throw Error(std::string("reference kernels cannot read weights of type ") + std::string(gguf::type_name(type)));
    }
}

}  // namespace

void dequantize_row(GgmlType type, const std::byte* row, float* out, std::size_t n) {
    for_each_value(type, row, n, [out](std::size_t j, float v) { out[j] = v; });
}

double dot_row(GgmlType type, const std::byte* row, const float* x, std::size_t n) {
    double sum = 0.0;
    for_each_value(type, row, n, [&sum, x](std::size_t j, float w) { sum += static_cast<double>(w) * x[j]; });
    return sum;
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
    const std::size_t work_per_row = x.rows * w.cols;
    const std::size_t grain = std::max<std::size_t>(1, 16384 / std::max<std::size_t>(1, work_per_row));
    tbb::parallel_for(tbb::blocked_range<std::size_t>(0, w.rows, grain), [&](const tbb::blocked_range<std::size_t>& range) {
        for (std::size_t o = range.begin(); o != range.end(); ++o) {
            const std::byte* weights = w.row(o);
            for (std::size_t t = 0; t < x.rows; ++t) {
                y.row(t)[o] = static_cast<float>(dot_row(w.type, weights, x.row(t), w.cols));
            }
        }
    });
}

}  // namespace ember::kernels::reference
