#include "tokenizer/string_table.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <functional>
#include <limits>

#include "common/error.hpp"

namespace ember::tokenizer {

// A multiply-xorshift hash over 8-byte words: fast on the short strings of a vocabulary.
std::uint64_t StringTable::hash(std::string_view text) {
    constexpr std::uint64_t kMul = 0x9E3779B97F4A7C15ull;
    std::uint64_t h = 0xC2B2AE3D27D4EB4Full ^ (text.size() * kMul);
    const char* p = text.data();
    std::size_t n = text.size();
    while (n >= 8) {
        std::uint64_t word;
        std::memcpy(&word, p, 8);
        h = (h ^ (word * 0xFF51AFD7ED558CCDull)) * kMul;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    if (n > 0) {
        // The last 1-7 bytes without a variable-length copy: two overlapping 4-byte reads,
        // or the first, middle and last byte (the length is already in h).
        std::uint64_t word;
        if (n >= 4) {
            std::uint32_t low, high;
            std::memcpy(&low, p, 4);
            std::memcpy(&high, p + n - 4, 4);
            word = (std::uint64_t{high} << 32) | low;
        } else {
            word = std::uint64_t{static_cast<unsigned char>(p[0])} | (std::uint64_t{static_cast<unsigned char>(p[n / 2])} << 8) |
                   (std::uint64_t{static_cast<unsigned char>(p[n - 1])} << 16);
        }
        h = (h ^ (word * 0xFF51AFD7ED558CCDull)) * kMul;
    }
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    h ^= h >> 32;
    return h;
}

void StringTable::reserve(std::size_t entries, std::size_t bytes) {
    arena_.reserve(bytes);
    entries_.reserve(entries);
    if (entries * 2 > slots_.size()) rehash(std::bit_ceil(entries * 2 + 1));
}

void StringTable::rehash(std::size_t slot_count) {
    slots_.assign(slot_count, kAbsent);
    mask_ = slot_count - 1;
    for (std::size_t i = 0; i < entries_.size(); ++i) {
        std::size_t s = entries_[i].hash & mask_;
        while (slots_[s] != kAbsent) s = (s + 1) & mask_;
        slots_[s] = static_cast<std::int32_t>(i);
    }
}

std::int32_t StringTable::find(std::string_view text, std::uint64_t h) const {
    if (slots_.empty()) return kAbsent;
    for (std::size_t s = h & mask_;; s = (s + 1) & mask_) {
        const std::int32_t index = slots_[s];
        if (index == kAbsent) return kAbsent;
        const Entry& e = entries_[static_cast<std::size_t>(index)];
        if (e.hash == h && e.size == text.size() && std::memcmp(arena_.data() + e.offset, text.data(), e.size) == 0) {
            return index;
        }
    }
}

std::int32_t StringTable::intern(std::string_view text) {
    if ((entries_.size() + 1) * 2 > slots_.size()) rehash(std::max<std::size_t>(64, slots_.size() * 2));
    const std::uint64_t h = hash(text);
    std::size_t s = h & mask_;
    for (;; s = (s + 1) & mask_) {
        const std::int32_t index = slots_[s];
        if (index == kAbsent) break;
        const Entry& e = entries_[static_cast<std::size_t>(index)];
        if (e.hash == h && e.size == text.size() && std::memcmp(arena_.data() + e.offset, text.data(), e.size) == 0) {
            return index;
        }
    }
    if (arena_.size() + text.size() > std::numeric_limits<std::uint32_t>::max() ||
        entries_.size() >= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
        throw Error("tokenizer string table is full (more than 4 GiB of token text)");
    }
    const auto index = static_cast<std::int32_t>(entries_.size());
    const std::less<const char*> before;
    const bool inside_arena = !before(text.data(), arena_.data()) && before(text.data(), arena_.data() + arena_.size());
    const std::string copy = inside_arena ? std::string(text) : std::string();  // append may reallocate the arena
    entries_.push_back({h, static_cast<std::uint32_t>(arena_.size()), static_cast<std::uint32_t>(text.size())});
    arena_.append(inside_arena ? std::string_view(copy) : text);
    slots_[s] = index;
    return index;
}

}  // namespace ember::tokenizer
