// Overflow-checked size arithmetic for everything computed from untrusted file contents.
#pragma once

#include <cstdint>
#include <optional>

namespace ember {

inline std::optional<std::uint64_t> checked_add(std::uint64_t a, std::uint64_t b) {
    std::uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
    return r;
}

inline std::optional<std::uint64_t> checked_mul(std::uint64_t a, std::uint64_t b) {
    std::uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
    return r;
}

// Rounds `value` up to a multiple of `alignment` (a power of two); nullopt on overflow.
inline std::optional<std::uint64_t> checked_align_up(std::uint64_t value, std::uint64_t alignment) {
    auto bumped = checked_add(value, alignment - 1);
    if (!bumped) return std::nullopt;
    return *bumped & ~(alignment - 1);
}

inline bool is_power_of_two(std::uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace ember
