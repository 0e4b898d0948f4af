#include "chat/lexer.hpp"

#include <fmt/format.h>

#include <array>
#include <utility>

#include "chat/value.hpp"

namespace ember::chat {
namespace {

// The preprocessed source and, for each of its bytes, the offset in the original.
struct Preprocessed {
    std::string text;
    std::vector<std::uint32_t> origin;  // text.size() + 1 entries

    void push(char c, std::size_t from) {
        text += c;
        origin.push_back(static_cast<std::uint32_t>(from));
    }
};

bool is_line_terminator_at(std::string_view s, std::size_t i, std::size_t& length) {
    length = 1;
    if (s[i] == '\n' || s[i] == '\r') return true;
    // U+2028 and U+2029 end a line for JavaScript's multiline ^ too.
    if (i + 2 < s.size() && static_cast<unsigned char>(s[i]) == 0xE2 && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
        (static_cast<unsigned char>(s[i + 2]) == 0xA8 || static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
        length = 3;
        return true;
    }
    return false;
}

// The reference's regular expressions, one pass each:
//   lstrip_blocks  /^[ \t]*({[#%-])/gm -> "$1"   (spaces before a block at a line start)
//   trim_blocks    /([#%-]})\n/g -> "$1"          (the newline after a block)
Preprocessed preprocess(std::string_view source) {
    if (!source.empty() && source.back() == '\n') source.remove_suffix(1);
    Preprocessed lstripped;
    lstripped.text.reserve(source.size());
    bool line_start = true;
    for (std::size_t i = 0; i < source.size();) {
        if (line_start) {
            std::size_t j = i;
            while (j < source.size() && (source[j] == ' ' || source[j] == '\t')) ++j;
            if (j + 1 < source.size() && source[j] == '{' &&
                (source[j + 1] == '#' || source[j + 1] == '%' || source[j + 1] == '-'))
                i = j;
            line_start = false;
            if (i >= source.size()) break;
        }
        std::size_t length = 1;
        if (is_line_terminator_at(source, i, length)) line_start = true;
        for (std::size_t k = 0; k < length; ++k) lstripped.push(source[i + k], i + k);
        i += length;
    }
    lstripped.origin.push_back(static_cast<std::uint32_t>(source.size()));

    Preprocessed trimmed;
    const std::string& s = lstripped.text;
    trimmed.text.reserve(s.size());
    for (std::size_t i = 0; i < s.size();) {
        if (i + 2 < s.size() && (s[i] == '#' || s[i] == '%' || s[i] == '-') && s[i + 1] == '}' && s[i + 2] == '\n') {
            trimmed.push(s[i], lstripped.origin[i]);
            trimmed.push(s[i + 1], lstripped.origin[i + 1]);
            i += 3;
            continue;
        }
        trimmed.push(s[i], lstripped.origin[i]);
        ++i;
    }
    trimmed.origin.push_back(lstripped.origin.back());
    return trimmed;
}

constexpr std::array<std::pair<std::string_view, TokenType>, 29> kSymbols{{
    {"{%", TokenType::OpenStatement}, {"%}", TokenType::CloseStatement}, {"{{", TokenType::OpenExpression},
    {"}}", TokenType::CloseExpression}, {"(", TokenType::OpenParen}, {")", TokenType::CloseParen},
    {"{", TokenType::OpenCurlyBracket}, {"}", TokenType::CloseCurlyBracket}, {"[", TokenType::OpenSquareBracket},
    {"]", TokenType::CloseSquareBracket}, {",", TokenType::Comma}, {".", TokenType::Dot}, {":", TokenType::Colon},
    {"|", TokenType::Pipe}, {"<=", TokenType::ComparisonOperator}, {">=", TokenType::ComparisonOperator},
    {"==", TokenType::ComparisonOperator}, {"!=", TokenType::ComparisonOperator}, {"<", TokenType::ComparisonOperator},
    {">", TokenType::ComparisonOperator}, {"+", TokenType::AdditiveOperator}, {"-", TokenType::AdditiveOperator},
    {"~", TokenType::AdditiveOperator}, {"**", TokenType::ExponentiationOperator},
    {"*", TokenType::MultiplicativeOperator}, {"//", TokenType::MultiplicativeOperator},
    {"/", TokenType::MultiplicativeOperator}, {"%", TokenType::MultiplicativeOperator}, {"=", TokenType::Equals},
}};

bool is_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
public:
    explicit Lexer(Preprocessed p) : p_(std::move(p)), src_(p_.text) {}

    std::vector<Token> run() {
        while (at_ < src_.size()) step();
        return std::move(tokens_);
    }

private:
    Preprocessed p_;
    std::string_view src_;
    std::size_t at_ = 0;
    int curly_depth_ = 0;
    std::vector<Token> tokens_;

    [[noreturn]] void fail(const std::string& message, std::size_t at) const {
        throw TemplateError(message, p_.origin[std::min(at, src_.size())]);
    }
    std::uint32_t origin(std::size_t at) const { return p_.origin[at]; }
    bool starts(std::string_view s) const { return src_.substr(at_, s.size()) == s; }
    char peek(std::size_t ahead = 0) const { return at_ + ahead < src_.size() ? src_[at_ + ahead] : '\0'; }
    void push(TokenType type, std::string value, std::size_t at) { tokens_.push_back({type, std::move(value), origin(at)}); }

    bool space_at(std::size_t i, std::size_t& length) const { return is_js_space(decode_at(src_, i, length)); }
    void skip_space() {
        std::size_t length = 1;
        while (at_ < src_.size() && space_at(at_, length)) at_ += length;
    }
    // `{%-` / `{{-` / `{#-`: the text before loses its trailing whitespace.
    void strip_trailing_space() {
        if (tokens_.empty() || tokens_.back().type != TokenType::Text) return;
        auto& text = tokens_.back().value;
        text.resize(trimmed_range(text, false, true).second);
        if (text.empty()) tokens_.pop_back();
    }

    void step() {
        const auto last = tokens_.empty() ? TokenType::CloseStatement : tokens_.back().type;
        if (tokens_.empty() || last == TokenType::CloseStatement || last == TokenType::CloseExpression ||
            last == TokenType::Comment) {
            const std::size_t start = at_;
            while (at_ < src_.size() && !(src_[at_] == '{' && (peek(1) == '%' || peek(1) == '{' || peek(1) == '#'))) ++at_;
            if (at_ > start) {
                push(TokenType::Text, std::string(src_.substr(start, at_ - start)), start);
                return;
            }
        }
        if (starts("{#")) return comment();
        if (starts("{%-") || starts("{{-")) {
            strip_trailing_space();
            const bool statement = peek(1) == '%';
            push(statement ? TokenType::OpenStatement : TokenType::OpenExpression, statement ? "{%" : "{{", at_);
            if (!statement) curly_depth_ = 0;
            at_ += 3;
            return;
        }
        skip_space();
        if (at_ >= src_.size()) fail("unexpected end of template inside a tag", at_);
        if (starts("-%}") || starts("-}}")) {
            const bool statement = peek(1) == '%';
            push(statement ? TokenType::CloseStatement : TokenType::CloseExpression, statement ? "%}" : "}}", at_);
            at_ += 3;
            skip_space();
            return;
        }
        const char c = src_[at_];
        if ((c == '-' || c == '+') && sign_is_unary()) return signed_number();
        for (const auto& [symbol, type] : kSymbols) {
            if (symbol == "}}" && curly_depth_ > 0) continue;
            if (!starts(symbol)) continue;
            push(type, std::string(symbol), at_);
            if (type == TokenType::OpenExpression) curly_depth_ = 0;
            if (type == TokenType::OpenCurlyBracket) ++curly_depth_;
            if (type == TokenType::CloseCurlyBracket) --curly_depth_;
            at_ += symbol.size();
            return;
        }
        if (c == '\'' || c == '"') return string_literal(c);
        if (is_digit(c)) return number();
        if (is_word(c)) {
            const std::size_t start = at_;
            while (at_ < src_.size() && is_word(src_[at_])) ++at_;
            return push(TokenType::Identifier, std::string(src_.substr(start, at_ - start)), start);
        }
        std::size_t length = 1;
        decode_at(src_, at_, length);
        fail(fmt::format("unexpected character '{}'", src_.substr(at_, length)), at_);
    }

    // After a value (a name, a literal, `)` or `]`) `-` and `+` are binary operators.
    bool sign_is_unary() const {
        if (tokens_.empty()) return true;
        switch (tokens_.back().type) {
            case TokenType::Identifier: case TokenType::NumericLiteral: case TokenType::StringLiteral:
            case TokenType::CloseParen: case TokenType::CloseSquareBracket:
                return false;
            default:
                return true;
        }
    }

    std::string digits() {
        const std::size_t start = at_;
        while (at_ < src_.size() && is_digit(src_[at_])) ++at_;
        return std::string(src_.substr(start, at_ - start));
    }

    void signed_number() {
        const std::size_t start = at_;
        const char sign = src_[at_++];
        std::string num = digits();
        if (!num.empty() && peek() == '.' && is_digit(peek(1))) {
            ++at_;
            num += "." + digits();
        }
        const bool literal = !num.empty();
        push(literal ? TokenType::NumericLiteral : TokenType::UnaryOperator, std::string(1, sign) + num, start);
    }

    void number() {
        const std::size_t start = at_;
        std::string num = digits();
        const bool after_dot = !tokens_.empty() && tokens_.back().type == TokenType::Dot;
        if (!after_dot && peek() == '.' && is_digit(peek(1))) {
            ++at_;
            num += "." + digits();
        }
        push(TokenType::NumericLiteral, std::move(num), start);
    }

    void string_literal(char quote) {
        const std::size_t start = at_++;
        std::string value;
        while (true) {
            if (at_ >= src_.size()) fail("unterminated string literal", start);
            const char c = src_[at_];
            if (c == quote) break;
            if (c != '\\') {
                value += c;
                ++at_;
                continue;
            }
            if (++at_ >= src_.size()) fail("unterminated string literal", start);
            const char e = src_[at_++];
            if (e == 'x' || e == 'u') {
                const std::size_t n = e == 'x' ? 2 : 4;
                const std::string hex(src_.substr(at_, n));
                if (hex.size() != n || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
                    fail(fmt::format("invalid escape \\{}{}", e, hex), at_ - 2);
                const auto code = static_cast<char32_t>(std::stoul(hex, nullptr, 16));
                if (code >= 0xD800 && code <= 0xDFFF) fail("surrogate escapes are not supported", at_ - 2);
                append_utf8(value, code);
                at_ += n;
                continue;
            }
            switch (e) {
                case 'n': value += '\n'; break;
                case 't': value += '\t'; break;
                case 'r': value += '\r'; break;
                case 'b': value += '\b'; break;
                case 'f': value += '\f'; break;
                case 'v': value += '\v'; break;
                case '\'': case '"': case '\\': value += e; break;
                default: fail(fmt::format("unexpected escaped character '{}'", e), at_ - 2);
            }
        }
        ++at_;
        push(TokenType::StringLiteral, std::move(value), start);
    }

    void comment() {
        const std::size_t start = at_;
        at_ += 2;
        const bool strip_before = peek() == '-';
        if (strip_before) ++at_;
        const auto close = src_.find("#}", at_);
        if (close == std::string_view::npos) fail("comment without its closing #}", start);
        const bool strip_after = close > at_ && src_[close - 1] == '-';
        if (strip_before) strip_trailing_space();
        push(TokenType::Comment, "", start);
        at_ = close + 2;
        if (strip_after) skip_space();
    }
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(preprocess(source)).run(); }

LineColumn line_column(std::string_view source, std::size_t offset) {
    offset = std::min(offset, source.size());
    std::size_t line = 1, line_start = 0;
    for (std::size_t i = 0; i < offset; ++i) {
        if (source[i] == '\n') {
            ++line;
            line_start = i + 1;
        }
    }
    return {line, code_point_count(source.substr(line_start, offset - line_start)) + 1};
}

}  // namespace ember::chat
