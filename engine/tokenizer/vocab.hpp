// The vocabulary of a GGUF tokenizer: token texts, types and scores, validated when loaded
// (model-math §8.1), with the lookups every tokenizer algorithm shares: text -> id, the
// byte-fallback tokens, the special tokens in splitting order and the end-of-generation set.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "tokenizer/string_table.hpp"
#include "tokenizer/token.hpp"
#include "tokenizer/tokenizer_info.hpp"

namespace ember::tokenizer {

std::string_view token_type_name(TokenType type);

// Bytes shown safely in an error message: printable ASCII as is, the rest as \xNN.
std::string printable(std::string_view bytes, std::size_t max_bytes = 48);

class Vocabulary {
public:
    static constexpr std::int32_t kNone = -1;

    // Reads and validates tokenizer.ggml.tokens / token_type / scores. Throws ember::Error
    // naming the file, key and token index on any malformed entry.
    static Vocabulary load(const gguf::File& file, const TokenizerInfo& info);

    std::size_t size() const { return types_.size(); }
    bool contains(std::int32_t id) const { return id >= 0 && static_cast<std::size_t>(id) < size(); }
    std::string_view text(std::int32_t id) const { return strings_.at(id); }
    TokenType type(std::int32_t id) const { return types_[static_cast<std::size_t>(id)]; }
    float score(std::int32_t id) const { return scores_.empty() ? 0.0f : scores_[static_cast<std::size_t>(id)]; }
    // The token whose text is exactly `text` (any type), or kNone.
    std::int32_t find(std::string_view text) const { return strings_.find(text); }
    const StringTable& strings() const { return strings_; }

    // Byte fallback (SPM, Gemma 4): the "<0xXX>" token for a byte, else the token whose text
    // is that single byte, else kNone.
    std::int32_t byte_token(unsigned char byte) const { return byte_tokens_[byte]; }
    // The byte a BYTE-type token stands for (its text was checked to be "<0xHH>").
    unsigned char byte_value(std::int32_t id) const;

    // CONTROL, USER_DEFINED and UNKNOWN tokens, longest text first: the order in which
    // llama.cpp splits them out of the input (model-math §8.3).
    std::span<const std::int32_t> special_tokens() const { return special_tokens_; }

    bool is_end_of_generation(std::int32_t id) const;
    std::span<const std::int32_t> end_of_generation() const { return end_of_generation_; }  // ascending
    std::optional<std::int32_t> eot_id() const { return eot_id_; }
    std::optional<std::int32_t> eom_id() const { return eom_id_; }

private:
    void read_types(const gguf::File& file);
    void read_scores(const gguf::File& file);
    void check_byte_tokens(const gguf::File& file) const;
    void find_end_of_generation(const TokenizerInfo& info);

    StringTable strings_;  // entry i is token i
    std::vector<TokenType> types_;
    std::vector<float> scores_;  // empty when the file has none (all 0)
    std::array<std::int32_t, 256> byte_tokens_{};
    std::vector<std::int32_t> special_tokens_;
    std::vector<std::int32_t> end_of_generation_;
    std::optional<std::int32_t> eot_id_;
    std::optional<std::int32_t> eom_id_;
};

}  // namespace ember::tokenizer
