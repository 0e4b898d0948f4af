// How kernels see activations: a non-owning F32 matrix of `rows` rows of `cols` values,
// row r starting at data + r * stride (stride = cols when contiguous). Model code
// allocates the buffers (a per-session workspace) and hands views to the kernels.
#pragma once

#include <cassert>
#include <cstddef>
#include <span>

namespace ember::kernels {

struct Rows {
    float* data = nullptr;
    std::size_t rows = 0;
    std::size_t cols = 0;
    std::size_t stride = 0;  // elements from one row to the next

    Rows() = default;
    Rows(float* data_, std::size_t rows_, std::size_t cols_) : data(data_), rows(rows_), cols(cols_), stride(cols_) {}
    Rows(float* data_, std::size_t rows_, std::size_t cols_, std::size_t stride_)
        : data(data_), rows(rows_), cols(cols_), stride(stride_) {}

    float* row(std::size_t r) const { return data + r * stride; }
    bool contiguous() const { return stride == cols || rows <= 1; }

    // Rows [first, first + count).
    Rows slice(std::size_t first, std::size_t count) const {
        assert(first + count <= rows);
        return {data + first * stride, count, cols, stride};
    }
    // The same contiguous values seen as [new_rows, new_cols], e.g. [T, H*D] as [T*H, D].
    Rows reshape(std::size_t new_rows, std::size_t new_cols) const {
        assert(contiguous() && new_rows * new_cols == rows * cols);
        return {data, new_rows, new_cols};
    }
    std::span<float> values() const {
        assert(contiguous());
        return {data, rows * cols};
    }
};

struct ConstRows {
    const float* data = nullptr;
    std::size_t rows = 0;
    std::size_t cols = 0;
    std::size_t stride = 0;

    ConstRows() = default;
    ConstRows(const Rows& r) : data(r.data), rows(r.rows), cols(r.cols), stride(r.stride) {}  // NOLINT: implicit on purpose
    ConstRows(const float* data_, std::size_t rows_, std::size_t cols_)
        : data(data_), rows(rows_), cols(cols_), stride(cols_) {}
    ConstRows(const float* data_, std::size_t rows_, std::size_t cols_, std::size_t stride_)
        : data(data_), rows(rows_), cols(cols_), stride(stride_) {}

    const float* row(std::size_t r) const { return data + r * stride; }
    bool contiguous() const { return stride == cols || rows <= 1; }

    ConstRows slice(std::size_t first, std::size_t count) const {
        assert(first + count <= rows);
        return {data + first * stride, count, cols, stride};
    }
    ConstRows reshape(std::size_t new_rows, std::size_t new_cols) const {
        assert(contiguous() && new_rows * new_cols == rows * cols);
        return {data, new_rows, new_cols};
    }
    std::span<const float> values() const {
        assert(contiguous());
        return {data, rows * cols};
    }
};

}  // namespace ember::kernels
