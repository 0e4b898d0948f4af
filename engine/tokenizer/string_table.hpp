// Interned byte strings with dense indices: entry i is the i-th distinct string added.
// The bytes live in one arena owned by the table; lookups hash a string_view and never
// allocate. Open addressing with linear probing, kept at most half full.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::tokenizer {

class StringTable {
public:
    static constexpr std::int32_t kAbsent = -1;

    void reserve(std::size_t entries, std::size_t bytes);
    // The index of `text`, adding it as a new entry if it is not present yet.
    std::int32_t intern(std::string_view text);
    // kAbsent when `text` is not in the table.
    std::int32_t find(std::string_view text) const { return find(text, hash(text)); }
    // The same with hash(text) computed by the caller, who may have prefetched its slot.
    std::int32_t find(std::string_view text, std::uint64_t text_hash) const;
    void prefetch(std::uint64_t text_hash) const {
        if (!slots_.empty()) __builtin_prefetch(&slots_[text_hash & mask_]);
    }
    static std::uint64_t hash(std::string_view text);
    std::string_view at(std::int32_t index) const {
        const Entry& e = entries_[static_cast<std::size_t>(index)];
        return {arena_.data() + e.offset, e.size};
    }
    std::size_t size() const { return entries_.size(); }

private:
    struct Entry {
        std::uint64_t hash;
        std::uint32_t offset;
        std::uint32_t size;
    };
    void rehash(std::size_t slot_count);

    std::string arena_;
    std::vector<Entry> entries_;
    std::vector<std::int32_t> slots_;  // entry index or kAbsent
    std::size_t mask_ = 0;
};

}  // namespace ember::tokenizer
