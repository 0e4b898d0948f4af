// Finds a NaN or infinite F16 scale in a block format's blocks, reading the scale bytes
// only (where they are comes from the weight-format table's ScaleLayout). A non-finite
// d or dmin makes every value of its block NaN or infinite on the reference route; on the
// fast route it would reach the products; so the model loader refuses such a file
// (models/block_scales.hpp) before anything runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

#include "kernels/weight_format.hpp"

namespace ember::kernels {

struct NonFiniteScale {
    std::size_t block = 0;   // index of the block in the span
    std::size_t scale = 0;   // which of the format's scales (ScaleLayout::names)
    std::uint16_t bits = 0;  // its F16 bits
};

// The first non-finite scale in `blocks` (whole blocks of `format`; a trailing partial
// block is not read), or nullopt. Formats without scales have none.
std::optional<NonFiniteScale> find_non_finite_scale(const WeightFormat& format, std::span<const std::byte> blocks);

// "NaN", "+inf" or "-inf" for non-finite F16 bits.
const char* non_finite_half_name(std::uint16_t bits);

}  // namespace ember::kernels
