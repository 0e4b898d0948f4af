// The parsed template: one node type for statements and expressions, owned by the
// template (a pool), children by pointer. What each field means, per kind:
//
//   Identifier      name
//   IntegerLiteral  integer          FloatLiteral number          StringLiteral name (the value)
//   ArrayLiteral / TupleLiteral      list = elements
//   ObjectLiteral   list = key0, value0, key1, value1...
//   Member          a = object, b = property (an expression if computed, else Identifier /
//                   IntegerLiteral), computed
//   Slice           a, b, c = start, stop, step (each may be null); only as a Member's b
//   Call            a = callee, list = arguments (KeywordArgument nodes for key=value)
//   KeywordArgument name = key, a = value
//   Unary           name = "not" / "-" / "+", a
//   Binary          name = operator, a, b
//   Filter          a = operand (null in a filter block), name, list = arguments, call
//                   (whether written with parentheses)
//   Test            a = operand, name, negate
//   Select          a = value, b = condition      (`a if b`, undefined when false)
//   Ternary         a = condition, b = if true, c = if false
//   Set             a = target (Identifier, Tuple of them, Member), b = value, or body
//   If              a = condition, body, alternate (an elif is an If alone in alternate)
//   For             a = target (Identifier / TupleLiteral), b = iterable (may be a Select:
//                   `for x in xs if cond`), body, alternate = the else block
//   Macro           name, list = parameters (Identifier or KeywordArgument with default), body
//   FilterBlock     a = a Filter node without operand, body
//   Break, Continue
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ember::chat {

enum class NodeKind : std::uint8_t {
    Identifier, IntegerLiteral, FloatLiteral, StringLiteral, ArrayLiteral, TupleLiteral, ObjectLiteral, Member,
    Slice, Call, KeywordArgument, Unary, Binary, Filter, Test, Select, Ternary,
    Set, If, For, Macro, FilterBlock, Break, Continue,
};

struct Node {
    NodeKind kind;
    std::uint32_t offset = 0;  // where it starts in the template source
    std::string name;
    std::int64_t integer = 0;
    double number = 0.0;
    bool computed = false;
    bool negate = false;
    bool call = false;
    const Node* a = nullptr;
    const Node* b = nullptr;
    const Node* c = nullptr;
    std::vector<const Node*> list;
    std::vector<const Node*> body;
    std::vector<const Node*> alternate;

    bool is_statement() const { return kind >= NodeKind::Set; }
};

}  // namespace ember::chat
