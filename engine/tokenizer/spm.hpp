// SentencePiece-style tokenization (tokenizer.ggml.model = "llama"; model-math §8.4).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/token.hpp"
#include "tokenizer/vocab.hpp"

namespace ember::tokenizer {

class SpmModel {
public:
    // Notes which characters occur inside some token of two or more characters. Only
    // those can ever take part in a merge: any other character splits the text into runs
    // that merge independently, which keeps the merge queue small on long inputs.
    static SpmModel load(const Vocabulary& vocab);

    // Tokenizes the raw-text fragment input[start, end) and appends its tokens to `out`.
    // `space_prefix`: put a "▁" before the fragment (the tokenizer's own space, an empty
    // span). Throws ember::Error if a byte needs a byte-fallback token the vocabulary lacks.
    void encode(const Vocabulary& vocab, std::string_view input, std::size_t start, std::size_t end, bool space_prefix,
                std::vector<Token>& out) const;

    // Whether `character` (one lead-byte-delimited character) occurs inside a longer token.
    // Inline: the encoder asks it for every character of the text.
    bool can_merge(std::string_view character) const {
        if (const std::ptrdiff_t bit = short_bit(character); bit >= 0)
            return (short_mergeable_[static_cast<std::size_t>(bit) / 64] >> (bit % 64)) & 1;
        return can_merge_long(character);
    }

private:
    static std::uint64_t key_of(std::string_view character);
    // The bit of a 1- or 2-byte character in short_mergeable_ (its raw bytes: 256 one-byte
    // values, then a 2-byte lead 0xC0-0xDF with any second byte), or -1 for longer ones.
    static std::ptrdiff_t short_bit(std::string_view character) {
        const auto b0 = static_cast<unsigned char>(character[0]);
        if (character.size() == 1) return b0;
        if (character.size() == 2 && (b0 & 0xE0) == 0xC0)
            return 256 + ((b0 & 0x1F) << 8) + static_cast<unsigned char>(character[1]);
        return -1;
    }
    bool can_merge_long(std::string_view character) const;
    void insert(std::uint64_t key);

    // 1- and 2-byte characters (most of any text) in a bitmap, the others by key in an
    // open-addressing set; the same characters either way (their raw bytes decide).
    std::vector<std::uint64_t> short_mergeable_ = std::vector<std::uint64_t>((256 + 32 * 256) / 64, 0);
    std::vector<std::uint64_t> mergeable_;  // open-addressing set of character keys; 0 = empty
    std::size_t mask_ = 0;
    std::size_t count_ = 0;
};

}  // namespace ember::tokenizer
