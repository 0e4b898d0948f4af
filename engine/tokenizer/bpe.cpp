// Loading a BPE model: the merge list in integer form and the per-character id tables.
#include "tokenizer/bpe.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <limits>

#include "common/error.hpp"
#include "tokenizer/byte_encoding.hpp"
#include "tokenizer/unicode.hpp"

namespace ember::tokenizer {

void MergeTable::reserve(std::size_t count) {
    const std::size_t wanted = std::bit_ceil(count * 2 + 16);
    if (wanted <= slots_.size()) return;
    std::vector<Slot> old = std::move(slots_);
    slots_.assign(wanted, Slot{kEmpty, {}});
    mask_ = wanted - 1;
    count_ = 0;
    for (const Slot& s : old) {
        if (s.key != kEmpty) insert(std::int32_t(s.key >> 32), std::int32_t(s.key & 0xFFFFFFFFu), s.merge);
    }
}

void MergeTable::grow() { reserve(std::max<std::size_t>(slots_.size(), 16)); }

void MergeTable::insert(std::int32_t left, std::int32_t right, Merge merge) {
    if ((count_ + 1) * 2 > slots_.size()) grow();
    const std::uint64_t key = key_of(left, right);
    for (std::size_t s = hash(key) & mask_;; s = (s + 1) & mask_) {
        if (slots_[s].key == key) return;  // an earlier (lower-ranked) merge of the same pair wins
        if (slots_[s].key == kEmpty) {
            slots_[s] = {key, merge};
            ++count_;
            return;
        }
    }
}

const MergeTable::Merge* MergeTable::find(std::int32_t left, std::int32_t right) const {
    if (slots_.empty()) return nullptr;
    const std::uint64_t key = key_of(left, right);
    for (std::size_t s = hash(key) & mask_;; s = (s + 1) & mask_) {
        if (slots_[s].key == key) return &slots_[s].merge;
        if (slots_[s].key == kEmpty) return nullptr;
    }
}

std::int32_t BpeModel::symbol_id(const Vocabulary& vocab, std::string_view text) const {
    const std::int32_t token = vocab.find(text);
    if (token != Vocabulary::kNone) return token;
    const std::int32_t other = other_strings_.find(text);
    return other == StringTable::kAbsent ? Vocabulary::kNone : vocab_size_ + other;
}

std::int32_t BpeModel::intern(const Vocabulary& vocab, std::string_view text, std::uint64_t text_hash) {
    const std::int32_t token = vocab.strings().find(text, text_hash);
    if (token != Vocabulary::kNone) return token;
    const std::int32_t other = other_strings_.intern(text);
    if (other > std::numeric_limits<std::int32_t>::max() - vocab_size_) {
        throw Error("tokenizer: too many distinct merge strings for 32-bit ids");
    }
    return vocab_size_ + other;
}

std::int32_t BpeModel::character_id(char32_t cp) const {
    if (cp < bmp_ids_.size()) return bmp_ids_[cp];
    const auto it = astral_ids_.find(cp);
    return it == astral_ids_.end() ? Vocabulary::kNone : it->second;
}

BpeModel BpeModel::load(const gguf::File& file, const Vocabulary& vocab, const TokenizerInfo& info) {
    constexpr const char* kMergesKey = "tokenizer.ggml.merges";
    BpeModel m;
    m.byte_encoded_ = info.type == VocabType::Bpe;
    m.ignore_merges_ = info.ignore_merges;
    m.pre_ = info.pre_tokenizer;
    m.vocab_size_ = static_cast<std::int32_t>(vocab.size());

    const auto merges = file.get_string_array(kMergesKey);  // throws on a wrong type
    if (!merges) {
        throw Error(fmt::format("{}: required metadata key '{}' is missing (tokenizer.ggml.model '{}' merges by rank)",
                                file.source(), kMergesKey, info.model));
    }
    if (merges->size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
        throw Error(file.describe_error(file.find(kMergesKey)->value.offset, "too many merges for 32-bit ranks"));
    }
    m.merge_count_ = merges->size();
    m.merges_.reserve(merges->size());

    // Loading is bound by memory latency (three random vocabulary lookups per merge), so
    // each merge is split and hashed a few merges ahead and its table slots prefetched.
    struct Pending {
        std::string_view left, right;
        std::string merged;
        std::uint64_t left_hash = 0, right_hash = 0, merged_hash = 0;
    };
    constexpr std::size_t kLookahead = 16;
    std::array<Pending, kLookahead> ring;
    const StringTable& tokens = vocab.strings();
    auto prepare = [&](std::size_t rank) {
        const std::string_view line = (*merges)[rank];
        // Split at the first space after the first byte, so that a left part may itself be a space.
        const std::size_t space = line.size() > 1 ? line.find(' ', 1) : std::string_view::npos;
        if (space == std::string_view::npos) {
            throw Error(file.describe_error(
                file.find(kMergesKey)->value.offset,
                fmt::format("'{}': merge {} '{}' has no space separating its two parts", kMergesKey, rank, printable(line))));
        }
        Pending& p = ring[rank % kLookahead];
        p.left = line.substr(0, space);
        p.right = line.substr(space + 1);
        p.merged.assign(p.left).append(p.right);
        p.left_hash = StringTable::hash(p.left);
        p.right_hash = StringTable::hash(p.right);
        p.merged_hash = StringTable::hash(p.merged);
        tokens.prefetch(p.left_hash);
        tokens.prefetch(p.right_hash);
        tokens.prefetch(p.merged_hash);
    };
    for (std::size_t rank = 0; rank < std::min(kLookahead, merges->size()); ++rank) prepare(rank);
    // Inserts trail the lookups by a few merges for the same reason (in rank order, so
    // the first merge of a repeated pair still wins).
    struct Resolved {
        std::int32_t left, right;
        MergeTable::Merge merge;
    };
    constexpr std::size_t kInsertDelay = 8;
    std::array<Resolved, kInsertDelay> delayed;
    for (std::size_t rank = 0; rank < merges->size(); ++rank) {
        const Pending& p = ring[rank % kLookahead];
        const std::int32_t left_id = m.intern(vocab, p.left, p.left_hash);
        const std::int32_t right_id = m.intern(vocab, p.right, p.right_hash);
        const std::int32_t merged_id = m.intern(vocab, p.merged, p.merged_hash);
        if (rank + kLookahead < merges->size()) prepare(rank + kLookahead);
        Resolved& slot = delayed[rank % kInsertDelay];
        if (rank >= kInsertDelay) m.merges_.insert(slot.left, slot.right, slot.merge);
        slot = {left_id, right_id, {static_cast<std::int32_t>(rank), merged_id}};
        m.merges_.prefetch(left_id, right_id);
    }
    for (std::size_t rank = merges->size() - std::min(kInsertDelay, merges->size()); rank < merges->size(); ++rank) {
        const Resolved& slot = delayed[rank % kInsertDelay];
        m.merges_.insert(slot.left, slot.right, slot.merge);
    }

    if (m.byte_encoded_) {
        for (unsigned b = 0; b < 256; ++b) {
            std::string character;
            unicode::append_utf8(character, byte_encoding::codepoint_of(static_cast<unsigned char>(b)));
            m.byte_ids_[b] = m.symbol_id(vocab, character);
        }
        return m;
    }

    // Gemma 4: every token or merge string that is exactly one well-formed character.
    m.bmp_ids_.assign(0x10000, Vocabulary::kNone);
    std::string canonical;
    auto record_character = [&](std::string_view text, std::int32_t id) {
        if (text.empty() || text.size() > 4) return;
        const auto d = unicode::decode(text, 0);
        if (d.length != text.size()) return;
        canonical.clear();
        unicode::append_utf8(canonical, d.cp);
        if (canonical != text) return;
        if (d.cp < 0x10000) {
            m.bmp_ids_[d.cp] = id;
        } else {
            m.astral_ids_[d.cp] = id;
        }
    };
    for (std::int32_t id = 0; id < m.vocab_size_; ++id) record_character(vocab.text(id), id);
    for (std::size_t i = 0; i < m.other_strings_.size(); ++i) {
        const auto index = static_cast<std::int32_t>(i);
        record_character(m.other_strings_.at(index), m.vocab_size_ + index);
    }
    return m;
}

}  // namespace ember::tokenizer
