// Tokens -> the template's statements, with the reference's grammar and precedence:
//   ternary < or < and < not < comparison (== != < > <= >= in, not in) < + - ~
//   < * / // % < ** < is (tests) < | (filters) < unary - + < calls, members, slices.
// `{% call %}` blocks and `*args` / `**kwargs` unpacking are refused by name.
#pragma once

#include <deque>
#include <vector>

#include "chat/ast.hpp"
#include "chat/lexer.hpp"

namespace ember::chat {

struct ParsedTemplate {
    std::deque<Node> pool;  // owns every node
    std::vector<const Node*> body;
};

// Nesting deeper than this (blocks in blocks, brackets in brackets) is refused: the
// parser and the evaluator recurse once per level.
inline constexpr int kMaxNesting = 200;

// Throws TemplateError with the offset of the token where the grammar broke.
ParsedTemplate parse(const std::vector<Token>& tokens, std::uint32_t end_offset);

}  // namespace ember::chat
