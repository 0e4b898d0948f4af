// Byte-pair encoding by merge rank (model-math §8.5), for two kinds of vocabulary:
//   gpt2:   byte-level BPE; symbols are GPT-2 byte characters (byte_encoding.hpp), words
//           come from the llama3 or qwen2 pre-tokenizer.
//   gemma4: BPE over UTF-8 characters with "▁" for spaces, words are lines and runs of
//           newlines, and characters without a token fall back to <0xXX> byte tokens.
//
// Merges are loaded once into integer form: every string that takes part in a merge gets
// an id (the token id when it is a token), and a pair of ids maps to (rank, merged id). The
// merge loop then never touches strings.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "tokenizer/string_table.hpp"
#include "tokenizer/token.hpp"
#include "tokenizer/tokenizer_info.hpp"
#include "tokenizer/vocab.hpp"

namespace ember::tokenizer {

// (left id, right id) -> (rank, merged id); open addressing over 64-bit keys.
class MergeTable {
public:
    struct Merge {
        std::int32_t rank;
        std::int32_t merged;
    };
    void reserve(std::size_t count);
    // Keeps the first merge given for a pair (the lowest rank), as llama.cpp does.
    void insert(std::int32_t left, std::int32_t right, Merge merge);
    const Merge* find(std::int32_t left, std::int32_t right) const;
    void prefetch(std::int32_t left, std::int32_t right) const {
        if (!slots_.empty()) __builtin_prefetch(&slots_[hash(key_of(left, right)) & mask_]);
    }

private:
    static constexpr std::uint64_t kEmpty = ~std::uint64_t{0};
    struct Slot {
        std::uint64_t key;
        Merge merge;
    };
    static std::uint64_t key_of(std::int32_t left, std::int32_t right) {
        return (std::uint64_t(std::uint32_t(left)) << 32) | std::uint32_t(right);
    }
    static std::uint64_t hash(std::uint64_t key) {
        key ^= key >> 31;
        key *= 0x9E3779B97F4A7C15ull;
        key ^= key >> 29;
        return key;
    }
    void grow();

    std::vector<Slot> slots_;
    std::size_t mask_ = 0;
    std::size_t count_ = 0;
};

class BpeModel {
public:
    // Reads tokenizer.ggml.merges ("left right", rank = index). Throws ember::Error naming
    // the key and index for a missing key, a wrong type or a merge without a separating space.
    static BpeModel load(const gguf::File& file, const Vocabulary& vocab, const TokenizerInfo& info);

    // Tokenizes the raw-text fragment input[start, end), appending to `out`.
    void encode(const Vocabulary& vocab, std::string_view input, std::size_t start, std::size_t end,
                std::vector<Token>& out) const;

    std::size_t merge_count() const { return merge_count_; }

private:
    friend class BpeSession;

    // The id of a string taking part in merges: its token id, else vocab size + its index
    // among the other such strings; kNone if it takes part in none and is no token.
    std::int32_t symbol_id(const Vocabulary& vocab, std::string_view text) const;
    std::int32_t intern(const Vocabulary& vocab, std::string_view text, std::uint64_t text_hash);
    // The symbol id of one character (gemma4) or one byte (gpt2), from tables built at load.
    std::int32_t character_id(char32_t cp) const;

    bool byte_encoded_ = false;
    bool ignore_merges_ = false;
    PreTokenizer pre_ = PreTokenizer::Unsupported;
    std::int32_t vocab_size_ = 0;
    std::size_t merge_count_ = 0;
    StringTable other_strings_;  // merge sides and results that are not tokens
    MergeTable merges_;
    std::array<std::int32_t, 256> byte_ids_{};  // gpt2: id of each byte's character
    std::vector<std::int32_t> bmp_ids_;         // gemma4: id of each BMP character (or kNone)
    std::unordered_map<char32_t, std::int32_t> astral_ids_;
};

}  // namespace ember::tokenizer
