// Template source -> tokens, as the reference's lexer makes them: the source is first
// preprocessed the way Hugging Face sets Jinja up (one trailing newline dropped,
// lstrip_blocks, trim_blocks, {% generation %} tags removed), then cut into text,
// `{% %}` / `{{ }}` delimiters and the tokens of expressions, with `-` whitespace control
// applied. Every token keeps the byte offset in the original source where it starts, so
// errors can say line:column.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ember::chat {

enum class TokenType : std::uint8_t {
    Text, NumericLiteral, StringLiteral, Identifier, Equals, OpenParen, CloseParen, OpenStatement, CloseStatement,
    OpenExpression, CloseExpression, OpenSquareBracket, CloseSquareBracket, OpenCurlyBracket, CloseCurlyBracket,
    Comma, Dot, Colon, Pipe, AdditiveOperator, MultiplicativeOperator, ExponentiationOperator, ComparisonOperator,
    UnaryOperator, Comment,
};

struct Token {
    TokenType type;
    std::string value;    // the text, a string literal's value (escapes resolved), an operator
    std::uint32_t offset; // where it starts in the original source
};

// Throws TemplateError (with the offset) on a character no token starts with, an
// unterminated string or comment, a bad escape.
std::vector<Token> tokenize(std::string_view source);

// 1-based line and column (in code points) of a byte offset.
struct LineColumn {
    std::size_t line, column;
};
LineColumn line_column(std::string_view source, std::size_t offset);

}  // namespace ember::chat
