#include "tokenizer/vocab.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "common/error.hpp"

namespace ember::tokenizer {
namespace {

constexpr const char* kTokensKey = "tokenizer.ggml.tokens";
constexpr const char* kTypesKey = "tokenizer.ggml.token_type";
constexpr const char* kScoresKey = "tokenizer.ggml.scores";

// Texts that end generation wherever they occur in a vocabulary (model-math §8.7); llama.cpp
// also forces these tokens to CONTROL.
constexpr std::string_view kEndOfGenerationTexts[] = {
    "<|eot_id|>", "<|im_end|>",     "<|end|>", "<|return|>",      "<|call|>", "<end_of_turn>",
    "<|endoftext|>", "<|eom_id|>",  "<EOT>",   "_<EOT>",          "<|end_of_text|>", "<end_of_utterance>",
    "<eos>",      "<turn|>",        "<|tool_response>", "</s>",
};

// When the file names no end-of-turn token, the first of these texts present is taken.
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<EOT>", "_<EOT>", "<end_of_utterance>",
};

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

// "<0xHH>" -> the byte, or -1 when the text has any other form.
int parse_byte_token(std::string_view text) {
    if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
    const int hi = hex_digit(text[3]);
    const int lo = hex_digit(text[4]);
    if (hi < 0 || lo < 0) return -1;
    return hi * 16 + lo;
}

}  // namespace

std::string_view token_type_name(TokenType type) {
    switch (type) {
        case TokenType::Undefined: return "UNDEFINED";
        case TokenType::Normal: return "NORMAL";
        case TokenType::Unknown: return "UNKNOWN";
        case TokenType::Control: return "CONTROL";
        case TokenType::UserDefined: return "USER_DEFINED";
        case TokenType::Unused: return "UNUSED";
        case TokenType::Byte: return "BYTE";
    }
    return "?";
}

std::string printable(std::string_view bytes, std::size_t max_bytes) {
    std::string out;
    for (std::size_t i = 0; i < bytes.size() && i < max_bytes; ++i) {
        const auto c = static_cast<unsigned char>(bytes[i]);
        if (c >= 0x20 && c < 0x7F && c != '\\') {
            out.push_back(static_cast<char>(c));
        } else {
            out += fmt::format("\\x{:02x}", c);
        }
    }
    if (bytes.size() > max_bytes) out += "...";
    return out;
}

Vocabulary Vocabulary::load(const gguf::File& file, const TokenizerInfo& info) {
    Vocabulary v;
    const auto tokens = file.get_string_array(kTokensKey);
    if (!tokens) throw Error(fmt::format("{}: required metadata key '{}' is missing", file.source(), kTokensKey));
    const std::uint64_t offset = file.find(kTokensKey)->value.offset;
    if (tokens->empty()) throw Error(file.describe_error(offset, fmt::format("'{}' is empty", kTokensKey)));
    if (tokens->size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max())) {
        throw Error(file.describe_error(offset, fmt::format("'{}' has {} tokens, more than 32-bit ids can name",
                                                            kTokensKey, tokens->size())));
    }

    std::size_t bytes = 0;
    for (auto t : *tokens) bytes += t.size();
    v.strings_.reserve(tokens->size(), bytes + 64);
    for (std::size_t i = 0; i < tokens->size(); ++i) {
        std::string_view text = (*tokens)[i];
        std::string empty_name;
        if (text.empty()) {  // llama.cpp's name for an empty token, so that it stays unique
            empty_name = fmt::format("[EMPTY_{}]", i);
            text = empty_name;
        }
        const std::int32_t index = v.strings_.intern(text);
        if (static_cast<std::size_t>(index) != i) {
            throw Error(file.describe_error(offset, fmt::format("'{}': token {} '{}' has the same text as token {}",
                                                                kTokensKey, i, printable(text), index)));
        }
    }

    v.read_types(file);
    v.read_scores(file);
    v.check_byte_tokens(file);

    for (int b = 0; b < 256; ++b) {
        std::int32_t id = v.find(fmt::format("<0x{:02X}>", b));
        if (id == kNone) id = v.find(std::string(1, static_cast<char>(b)));
        v.byte_tokens_[static_cast<std::size_t>(b)] = id;
    }

    v.find_end_of_generation(info);

    for (std::size_t id = 0; id < v.size(); ++id) {
        const TokenType t = v.types_[id];
        if (t == TokenType::Control || t == TokenType::UserDefined || t == TokenType::Unknown) {
            v.special_tokens_.push_back(static_cast<std::int32_t>(id));
        }
    }
    // Longest first. std::sort (not stable_sort) from id order, as llama.cpp sorts: with
    // the same standard library the order among equal lengths is the same too.
    std::sort(v.special_tokens_.begin(), v.special_tokens_.end(),
              [&v](std::int32_t a, std::int32_t b) { return v.text(a).size() > v.text(b).size(); });
    return v;
}

void Vocabulary::read_types(const gguf::File& file) {
    const std::size_t n = strings_.size();
    const auto values = file.get_int_array(kTypesKey);  // throws on a non-integer element type
    if (!values) {
        types_.assign(n, TokenType::Normal);
        return;
    }
    const std::uint64_t offset = file.find(kTypesKey)->value.offset;
    // llama.cpp reads the types as INT32 (GGUFReader, llama-vocab); another integer type
    // is a file it would read differently or refuse, as it refuses UINT8 scores.
    if (const gguf::ValueType element = file.find(kTypesKey)->value.element_type; element != gguf::ValueType::INT32)
        throw Error(file.describe_error(offset, fmt::format("'{}' is an ARRAY of {}, expected an ARRAY of INT32",
                                                            kTypesKey, gguf::value_type_name(element))));
    if (values->size() != n) {
        throw Error(file.describe_error(offset, fmt::format("'{}' has {} entries, expected one per token ({})", kTypesKey,
                                                            values->size(), n)));
    }
    types_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t t = (*values)[i];
        if (t < 0 || t > static_cast<std::int64_t>(TokenType::Byte)) {
            throw Error(file.describe_error(
                offset, fmt::format("'{}': token {} '{}' has type {}, not a token type (0-6)", kTypesKey, i,
                                    printable(text(static_cast<std::int32_t>(i))), t)));
        }
        types_[i] = static_cast<TokenType>(t);
    }
}

void Vocabulary::read_scores(const gguf::File& file) {
    auto values = file.get_f32_array(kScoresKey);  // throws on a non-float element type
    if (!values) return;
    if (values->size() != strings_.size()) {
        throw Error(file.describe_error(file.find(kScoresKey)->value.offset,
                                        fmt::format("'{}' has {} entries, expected one per token ({})", kScoresKey,
                                                    values->size(), strings_.size())));
    }
    scores_ = std::move(*values);
}

void Vocabulary::check_byte_tokens(const gguf::File& file) const {
    for (std::size_t i = 0; i < types_.size(); ++i) {
        if (types_[i] != TokenType::Byte) continue;
        const auto id = static_cast<std::int32_t>(i);
        if (parse_byte_token(text(id)) < 0) {
            throw Error(file.describe_error(
                file.find(kTokensKey)->value.offset,
                fmt::format("'{}': token {} has type BYTE but its text '{}' is not of the form <0xHH>", kTokensKey, i,
                            printable(text(id)))));
        }
    }
}

unsigned char Vocabulary::byte_value(std::int32_t id) const {
    return static_cast<unsigned char>(parse_byte_token(text(id)));
}

void Vocabulary::find_end_of_generation(const TokenizerInfo& info) {
    auto force_control = [&](std::int32_t id) { types_[static_cast<std::size_t>(id)] = TokenType::Control; };

    if (info.eot_id) {
        eot_id_ = static_cast<std::int32_t>(*info.eot_id);
    } else {
        for (auto t : kEndOfTurnTexts) {
            if (const auto id = find(t); id != kNone) {
                eot_id_ = id;
                force_control(id);
                break;
            }
        }
    }
    if (info.eom_id) {
        eom_id_ = static_cast<std::int32_t>(*info.eom_id);
    } else if (const auto id = find("<|eom_id|>"); id != kNone) {
        eom_id_ = id;
        force_control(id);
    }

    std::vector<std::int32_t> eog;
    for (auto t : kEndOfGenerationTexts) {
        if (const auto id = find(t); id != kNone) {
            eog.push_back(id);
            force_control(id);
        }
    }
    for (const auto& id : {info.eos_id, info.fim_pad_id, info.fim_rep_id, info.fim_sep_id}) {
        if (id) eog.push_back(static_cast<std::int32_t>(*id));
    }
    if (eot_id_) eog.push_back(*eot_id_);
    if (eom_id_) eog.push_back(*eom_id_);

    // Gemma 4: a vocabulary with <|tool_response> uses </s> as ordinary text (llama.cpp's workaround).
    if (find("<|tool_response>") != kNone) {
        if (const auto id = find("</s>"); id != kNone) {
            std::erase(eog, id);
            types_[static_cast<std::size_t>(id)] = TokenType::Normal;
        }
    }
    std::sort(eog.begin(), eog.end());
    eog.erase(std::unique(eog.begin(), eog.end()), eog.end());
    end_of_generation_ = std::move(eog);
}

bool Vocabulary::is_end_of_generation(std::int32_t id) const {
    return std::binary_search(end_of_generation_.begin(), end_of_generation_.end(), id);
}

}  // namespace ember::tokenizer
