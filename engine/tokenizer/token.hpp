// A token of an encoded text with its byte span, and the token types; shared by the
// tokenizer algorithms and the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ember::tokenizer {

// tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum class TokenType : std::uint8_t {
    Undefined = 0,
    Normal = 1,
    Unknown = 2,
    Control = 3,
    UserDefined = 4,
    Unused = 5,
    Byte = 6,
};

// `id` with the bytes [start, end) of the input it came from. The spans of a text's tokens
// are in order and tile the input exactly; a token that covers no input byte (BOS, EOS, a
// space the tokenizer added) has start == end at its position.
struct Token {
    std::int32_t id;
    std::size_t start;
    std::size_t end;
};

// Appends the tokens of one stretch of input [start, end), giving each token the bytes
// from where the previous one stopped up to its own end. So the spans tile the stretch even
// where an algorithm drops a byte it has no token for (the next token absorbs it).
class SpanWriter {
public:
    SpanWriter(std::vector<Token>& out, std::size_t start) : out_(out), first_(out.size()), cursor_(start) {}

    void emit(std::int32_t id, std::size_t end) {
        if (end < cursor_) end = cursor_;
        out_.push_back({id, cursor_, end});
        cursor_ = end;
    }
    // Bytes after the last token's end (all dropped) are given to that token.
    void finish(std::size_t end) {
        if (out_.size() > first_ && cursor_ < end) out_.back().end = end;
        cursor_ = end;
    }

private:
    std::vector<Token>& out_;
    std::size_t first_;
    std::size_t cursor_;
};

}  // namespace ember::tokenizer
