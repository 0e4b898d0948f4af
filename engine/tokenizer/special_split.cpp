#include "tokenizer/special_split.hpp"

#include <algorithm>
#include <cstring>

namespace ember::tokenizer {
namespace {

std::uint32_t pair_key(char a, char b) {
    return (static_cast<std::uint32_t>(static_cast<unsigned char>(a)) << 8) | static_cast<unsigned char>(b);
}

// Compressed rows from (key, value) pairs given in value order.
void build_rows(const std::vector<std::pair<std::uint32_t, std::uint32_t>>& items, std::size_t keys,
                std::vector<std::uint32_t>& row, std::vector<std::uint32_t>& entries) {
    row.assign(keys + 1, 0);
    for (const auto& [key, value] : items) ++row[key + 1];
    for (std::size_t k = 0; k < keys; ++k) row[k + 1] += row[k];
    entries.resize(items.size());
    std::vector<std::uint32_t> fill(row.begin(), row.end() - 1);
    for (const auto& [key, value] : items) entries[fill[key]++] = value;
}

}  // namespace

SpecialTokenSplitter::SpecialTokenSplitter(const Vocabulary& vocab) {
    std::vector<std::pair<std::uint32_t, std::uint32_t>> pairs, singles;
    const auto specials = vocab.special_tokens();
    for (std::size_t order = 0; order < specials.size(); ++order) {
        const std::string_view text = vocab.text(specials[order]);
        const auto o = static_cast<std::uint32_t>(order);
        if (!text.empty()) starts_[static_cast<unsigned char>(text[0])] = true;
        if (text.size() >= 2) {
            pairs.emplace_back(pair_key(text[0], text[1]), o);
        } else if (text.size() == 1) {
            singles.emplace_back(static_cast<unsigned char>(text[0]), o);
        }
    }
    build_rows(pairs, 1u << 16, pair_row_, pair_entries_);
    build_rows(singles, 1u << 8, single_row_, single_entries_);
}

void SpecialTokenSplitter::find_occurrences(const Vocabulary& vocab, std::string_view text, bool parse_special,
                                            std::vector<Occurrence>& found) const {
    const auto specials = vocab.special_tokens();
    auto allowed = [&](std::uint32_t order) {
        return parse_special || vocab.type(specials[order]) == TokenType::UserDefined;
    };
    const std::size_t n = text.size();
    for (std::size_t pos = 0; pos < n; ++pos) {
        const auto first = static_cast<unsigned char>(text[pos]);
        if (!starts_[first]) continue;
        for (std::uint32_t e = single_row_[first]; e < single_row_[first + 1]; ++e) {
            if (allowed(single_entries_[e])) found.push_back({single_entries_[e], pos});
        }
        if (pos + 1 >= n) continue;
        const std::uint32_t key = pair_key(text[pos], text[pos + 1]);
        for (std::uint32_t e = pair_row_[key]; e < pair_row_[key + 1]; ++e) {
            const std::uint32_t order = pair_entries_[e];
            const std::string_view candidate = vocab.text(specials[order]);
            if (candidate.size() > n - pos) continue;
            if (std::memcmp(text.data() + pos + 2, candidate.data() + 2, candidate.size() - 2) != 0) continue;
            if (allowed(order)) found.push_back({order, pos});
        }
    }
}

std::vector<Fragment> SpecialTokenSplitter::split(const Vocabulary& vocab, std::string_view text, bool parse_special) const {
    std::vector<Fragment> fragments;
    if (text.empty()) return fragments;
    fragments.push_back({0, text.size(), Vocabulary::kNone});

    std::vector<Occurrence> found;
    find_occurrences(vocab, text, parse_special, found);
    if (found.empty()) return fragments;
    std::sort(found.begin(), found.end(),
              [](const Occurrence& a, const Occurrence& b) { return a.order != b.order ? a.order < b.order : a.pos < b.pos; });

    // Token by token (longest first), cut every raw fragment at the leftmost occurrence
    // that fits, then continue after it.
    std::vector<Fragment> next;
    for (std::size_t group = 0; group < found.size();) {
        const std::uint32_t order = found[group].order;
        std::size_t group_end = group;
        while (group_end < found.size() && found[group_end].order == order) ++group_end;
        const std::int32_t id = vocab.special_tokens()[order];
        const std::size_t length = vocab.text(id).size();

        next.clear();
        std::size_t j = group;
        for (const Fragment& f : fragments) {
            if (f.token != Vocabulary::kNone) {
                next.push_back(f);
                continue;
            }
            while (j < group_end && found[j].pos < f.start) ++j;
            std::size_t base = f.start;
            for (; j < group_end && found[j].pos < f.end; ++j) {
                const std::size_t p = found[j].pos;
                if (p < base || p + length > f.end) continue;
                if (p > base) next.push_back({base, p, Vocabulary::kNone});
                next.push_back({p, p + length, id});
                base = p + length;
            }
            if (base < f.end) next.push_back({base, f.end, Vocabulary::kNone});
        }
        fragments.swap(next);
        group = group_end;
    }
    return fragments;
}

}  // namespace ember::tokenizer
