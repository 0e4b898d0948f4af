// How kernels see a KV cache: a non-owning matrix of cached K (or V) rows, one per
// position, in the cache's element type. F32 is the default; F16 halves the cache (and
// its memory traffic), as llama.cpp's --cache-type-k/v f16 does (model-math §3.8).
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kernels/rows.hpp"

namespace ember::kernels {

enum class KvType : std::uint8_t { f32, f16 };

inline std::string_view kv_type_name(KvType type) { return type == KvType::f32 ? "f32" : "f16"; }
inline std::optional<KvType> kv_type_from_name(std::string_view name) {
    if (name == "f32") return KvType::f32;
    if (name == "f16") return KvType::f16;
    return std::nullopt;
}
inline std::size_t kv_element_bytes(KvType type) { return type == KvType::f32 ? 4 : 2; }

// `rows` positions of `cols` values; row r starts at data + r * row_bytes.
struct KvRows {
    KvType type = KvType::f32;
    std::byte* data = nullptr;
    std::size_t rows = 0;
    std::size_t cols = 0;
    std::size_t row_bytes = 0;

    KvRows slice(std::size_t first, std::size_t count) const {
        assert(first + count <= rows);
        return {type, data + first * row_bytes, count, cols, row_bytes};
    }
};

struct ConstKvRows {
    KvType type = KvType::f32;
    const std::byte* data = nullptr;
    std::size_t rows = 0;
    std::size_t cols = 0;
    std::size_t row_bytes = 0;

    ConstKvRows() = default;
    ConstKvRows(KvType type_, const std::byte* data_, std::size_t rows_, std::size_t cols_, std::size_t row_bytes_)
        : type(type_), data(data_), rows(rows_), cols(cols_), row_bytes(row_bytes_) {}
    ConstKvRows(const KvRows& r) : type(r.type), data(r.data), rows(r.rows), cols(r.cols), row_bytes(r.row_bytes) {}  // NOLINT: implicit on purpose

    const std::byte* row(std::size_t r) const { return data + r * row_bytes; }
    ConstKvRows slice(std::size_t first, std::size_t count) const {
        assert(first + count <= rows);
        return {type, data + first * row_bytes, count, cols, row_bytes};
    }
    std::size_t bytes() const { return rows * cols * kv_element_bytes(type); }
};

// F32 rows seen as cached rows (tests, benchmarks).
inline ConstKvRows f32_kv_rows(ConstRows r) {
    return {KvType::f32, reinterpret_cast<const std::byte*>(r.data), r.rows, r.cols, r.stride * sizeof(float)};
}

}  // namespace ember::kernels
