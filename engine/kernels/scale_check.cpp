#include "kernels/scale_check.hpp"

#include <algorithm>
#include <cstring>

namespace ember::kernels {
namespace {

// An F16 value is NaN or infinite exactly when its five exponent bits are all ones.
constexpr std::uint16_t kHalfExponent = 0x7C00;

std::uint16_t half_at(const std::byte* p) {
    std::uint16_t h;
    std::memcpy(&h, p, sizeof h);
    return h;
}

// Whether any of blocks [first, last) has a non-finite scale: no branch per block, so
// the pass runs at the speed of reading one cache line a block.
bool any_non_finite(const WeightFormat& f, const std::byte* data, std::size_t first, std::size_t last) {
    unsigned bad = 0;
    for (std::size_t b = first; b < last; ++b) {
        const std::byte* block = data + b * f.block_bytes;
        for (std::uint8_t i = 0; i < f.scales.count; ++i)
            bad |= (half_at(block + f.scales.offsets[i]) & kHalfExponent) == kHalfExponent;
    }
    return bad != 0;
}

}  // namespace

std::optional<NonFiniteScale> find_non_finite_scale(const WeightFormat& f, std::span<const std::byte> blocks) {
    if (f.scales.count == 0) return std::nullopt;
    const std::size_t n_blocks = blocks.size() / f.block_bytes;
    constexpr std::size_t kChunk = 4096;  // blocks scanned without a branch, then searched if one is bad
    for (std::size_t first = 0; first < n_blocks; first += kChunk) {
        const std::size_t last = std::min(n_blocks, first + kChunk);
        if (!any_non_finite(f, blocks.data(), first, last)) continue;
        for (std::size_t b = first; b < last; ++b) {
            for (std::uint8_t i = 0; i < f.scales.count; ++i) {
                const std::uint16_t h = half_at(blocks.data() + b * f.block_bytes + f.scales.offsets[i]);
                if ((h & kHalfExponent) == kHalfExponent) return NonFiniteScale{b, i, h};
            }
        }
    }
    return std::nullopt;
}

const char* non_finite_half_name(std::uint16_t bits) {
    if ((bits & 0x03FF) != 0) return "NaN";
    return (bits & 0x8000) != 0 ? "-inf" : "+inf";
}

}  // namespace ember::kernels
