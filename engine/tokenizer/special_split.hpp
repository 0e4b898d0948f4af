// Splitting special-token texts out of the input before tokenization (model-math §8.3).
//
// llama.cpp takes the special tokens longest first and, for each, cuts every remaining
// raw-text fragment at each left-to-right, non-overlapping occurrence of its text. This
// gives the same fragments with one scan of the input: all occurrences of all candidate
// texts are found first (indexed by their first two bytes), then applied token by token.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/vocab.hpp"

namespace ember::tokenizer {

struct Fragment {
    std::size_t start;
    std::size_t end;
    std::int32_t token;  // Vocabulary::kNone for raw text
};

class SpecialTokenSplitter {
public:
    explicit SpecialTokenSplitter(const Vocabulary& vocab);

    // The fragments of `text` in order, tiling it. With parse_special false only
    // USER_DEFINED tokens are split out (as llama.cpp does); with true, CONTROL and
    // UNKNOWN tokens too.
    std::vector<Fragment> split(const Vocabulary& vocab, std::string_view text, bool parse_special) const;

private:
    struct Occurrence {
        std::uint32_t order;  // position of the token in Vocabulary::special_tokens()
        std::size_t pos;
    };
    void find_occurrences(const Vocabulary& vocab, std::string_view text, bool parse_special,
                          std::vector<Occurrence>& found) const;

    // Candidates by their first two bytes (texts of two or more bytes) or their one byte.
    // Compressed rows: the candidates with key k are entries [row_[k], row_[k + 1]).
    std::vector<std::uint32_t> pair_row_;
    std::vector<std::uint32_t> pair_entries_;
    std::vector<std::uint32_t> single_row_;
    std::vector<std::uint32_t> single_entries_;
    // Whether a byte starts any candidate: the scan passes over the others without the
    // row look-ups (most of a text, whose specials start with '<' or '[').
    std::array<bool, 256> starts_{};
};

}  // namespace ember::tokenizer
