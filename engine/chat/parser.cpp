#include "chat/parser.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <initializer_list>

#include "chat/value.hpp"

namespace ember::chat {
namespace {

std::string_view describe(TokenType t) {
    switch (t) {
        case TokenType::Text: return "text";
        case TokenType::NumericLiteral: return "a number";
        case TokenType::StringLiteral: return "a string";
        case TokenType::Identifier: return "a name";
        case TokenType::Equals: return "'='";
        case TokenType::OpenParen: return "'('";
        case TokenType::CloseParen: return "')'";
        case TokenType::OpenStatement: return "'{%'";
        case TokenType::CloseStatement: return "'%}'";
        case TokenType::OpenExpression: return "'{{'";
        case TokenType::CloseExpression: return "'}}'";
        case TokenType::OpenSquareBracket: return "'['";
        case TokenType::CloseSquareBracket: return "']'";
        case TokenType::OpenCurlyBracket: return "'{'";
        case TokenType::CloseCurlyBracket: return "'}'";
        case TokenType::Comma: return "','";
        case TokenType::Dot: return "'.'";
        case TokenType::Colon: return "':'";
        case TokenType::Pipe: return "'|'";
        case TokenType::Comment: return "a comment";
        default: return "an operator";
    }
}

class Parser {
public:
    Parser(const std::vector<Token>& tokens, std::uint32_t end_offset) : tokens_(tokens), end_offset_(end_offset) {}

    ParsedTemplate run() {
        while (at_ < tokens_.size()) {
            if (const Node* n = any()) out_.body.push_back(n);
        }
        return std::move(out_);
    }

private:
    const std::vector<Token>& tokens_;
    std::uint32_t end_offset_;
    std::size_t at_ = 0;
    int depth_ = 0;
    ParsedTemplate out_;

    // Counts nesting for the duration of one recursive step.
    struct Nest {
        Parser& p;
        explicit Nest(Parser& parser) : p(parser) {
            if (++p.depth_ > kMaxNesting)
                throw TemplateError(fmt::format("nesting deeper than {} levels", kMaxNesting), p.offset());
        }
        ~Nest() { --p.depth_; }
    };

    std::uint32_t offset() const { return at_ < tokens_.size() ? tokens_[at_].offset : end_offset_; }
    [[noreturn]] void fail(const std::string& message) const { throw TemplateError(message, offset()); }
    const Token& token() const {
        if (at_ >= tokens_.size()) fail("unexpected end of template");
        return tokens_[at_];
    }
    bool is(TokenType t, std::size_t ahead = 0) const {
        return at_ + ahead < tokens_.size() && tokens_[at_ + ahead].type == t;
    }
    bool is_name(std::string_view name, std::size_t ahead = 0) const {
        return is(TokenType::Identifier, ahead) && tokens_[at_ + ahead].value == name;
    }
    bool is_statement(std::initializer_list<std::string_view> names) const {
        if (!is(TokenType::OpenStatement) || !is(TokenType::Identifier, 1)) return false;
        for (auto n : names)
            if (tokens_[at_ + 1].value == n) return true;
        return false;
    }
    const Token& expect(TokenType t, std::string_view what) {
        if (!is(t)) {
            if (at_ >= tokens_.size()) fail(fmt::format("unexpected end of template: expected {}", what));
            fail(fmt::format("expected {}, found {}", what, describe(tokens_[at_].type)));
        }
        return tokens_[at_++];
    }
    void expect_name(std::string_view name) {
        if (!is_name(name)) fail(fmt::format("expected '{}'", name));
        ++at_;
    }
    Node* make(NodeKind kind, std::uint32_t offset) {
        Node& n = out_.pool.emplace_back();
        n.kind = kind;
        n.offset = offset;
        return &n;
    }

    // A block's statements until one of `ends` (not consumed); `opened` names the block
    // for the error at the end of the template.
    std::vector<const Node*> block(std::initializer_list<std::string_view> ends, std::string_view opened, std::uint32_t at) {
        std::vector<const Node*> body;
        while (!is_statement(ends)) {
            if (at_ >= tokens_.size()) {
                std::string_view closing;
                for (auto e : ends)
                    if (e.substr(0, 3) == "end") closing = e;
                throw TemplateError(fmt::format("unexpected end of template: the {} has no {{% {} %}}", opened, closing), at);
            }
            if (const Node* n = any()) body.push_back(n);
        }
        return body;
    }
    void end_block(std::string_view name) {
        expect(TokenType::OpenStatement, "'{%'");
        expect_name(name);
        expect(TokenType::CloseStatement, "'%}'");
    }

    const Node* any() {
        Nest nest(*this);
        const Token& t = token();
        switch (t.type) {
            case TokenType::Comment: ++at_; return nullptr;
            case TokenType::Text: {
                Node* n = make(NodeKind::StringLiteral, t.offset);
                n->name = t.value;
                ++at_;
                return n;
            }
            case TokenType::OpenStatement: return statement();
            case TokenType::OpenExpression: {
                ++at_;
                const Node* e = expression();
                expect(TokenType::CloseExpression, "'}}'");
                return e;
            }
            default: fail(fmt::format("unexpected {}", describe(t.type)));
        }
    }

    const Node* statement() {
        const std::uint32_t at = token().offset;
        ++at_;
        if (!is(TokenType::Identifier)) fail("expected a statement name after '{%'");
        const std::string name = tokens_[at_++].value;
        if (name == "set") return set_statement(at);
        if (name == "if") {
            const Node* n = if_statement(at);
            end_block("endif");
            return n;
        }
        if (name == "for") return for_statement(at);
        if (name == "macro") return macro_statement(at);
        if (name == "filter") return filter_block(at);
        if (name == "break" || name == "continue") {
            expect(TokenType::CloseStatement, "'%}'");
            return make(name == "break" ? NodeKind::Break : NodeKind::Continue, at);
        }
        if (name == "call") throw TemplateError("the {% call %} block is not supported", at);
        throw TemplateError(fmt::format("unknown statement '{}'", name), at);
    }

    const Node* set_statement(std::uint32_t at) {
        Node* n = make(NodeKind::Set, at);
        n->a = sequence(false);
        if (is(TokenType::Equals)) {
            ++at_;
            n->b = sequence(false);
        } else {
            expect(TokenType::CloseStatement, "'%}' or '='");
            n->body = block({"endset"}, "set block", at);
            expect(TokenType::OpenStatement, "'{%'");
            expect_name("endset");
        }
        expect(TokenType::CloseStatement, "'%}'");
        return n;
    }

    const Node* if_statement(std::uint32_t at) {
        Node* n = make(NodeKind::If, at);
        n->a = expression();
        expect(TokenType::CloseStatement, "'%}'");
        n->body = block({"elif", "else", "endif"}, "if", at);
        if (is_statement({"elif"})) {
            const std::uint32_t elif_at = token().offset;
            at_ += 2;
            n->alternate.push_back(if_statement(elif_at));
        } else if (is_statement({"else"})) {
            at_ += 2;
            expect(TokenType::CloseStatement, "'%}'");
            n->alternate = block({"endif"}, "if", at);
        }
        return n;
    }

    const Node* for_statement(std::uint32_t at) {
        Node* n = make(NodeKind::For, at);
        n->a = sequence(true);
        if (n->a->kind != NodeKind::Identifier && n->a->kind != NodeKind::TupleLiteral)
            fail("expected a name or names for the loop variable");
        if (!is_name("in")) fail("expected 'in' after the loop variable");
        ++at_;
        n->b = expression();
        expect(TokenType::CloseStatement, "'%}'");
        n->body = block({"endfor", "else"}, "for", at);
        if (is_statement({"else"})) {
            at_ += 2;
            expect(TokenType::CloseStatement, "'%}'");
            n->alternate = block({"endfor"}, "for", at);
        }
        end_block("endfor");
        return n;
    }

    const Node* macro_statement(std::uint32_t at) {
        Node* n = make(NodeKind::Macro, at);
        if (!is(TokenType::Identifier)) fail("expected the macro's name");
        n->name = tokens_[at_++].value;
        n->list = arguments(true);
        expect(TokenType::CloseStatement, "'%}'");
        n->body = block({"endmacro"}, "macro", at);
        end_block("endmacro");
        return n;
    }

    const Node* filter_block(std::uint32_t at) {
        Node* n = make(NodeKind::FilterBlock, at);
        n->a = filter_call(nullptr);
        expect(TokenType::CloseStatement, "'%}'");
        n->body = block({"endfilter"}, "filter block", at);
        end_block("endfilter");
        return n;
    }

    // `a, b, c` -> a TupleLiteral (loop targets, set targets and values).
    const Node* sequence(bool primary_only) {
        const std::uint32_t at = token().offset;
        const Node* first = primary_only ? primary() : expression();
        if (!is(TokenType::Comma)) return first;
        Node* tuple = make(NodeKind::TupleLiteral, at);
        tuple->list.push_back(first);
        while (is(TokenType::Comma)) {
            ++at_;
            tuple->list.push_back(primary_only ? primary() : expression());
        }
        return tuple;
    }

    // ---- expressions, loosest first ----

    const Node* expression() {
        Nest nest(*this);
        const Node* value = logical_or();
        if (!is_name("if")) return value;
        const std::uint32_t at = token().offset;
        ++at_;
        const Node* condition = logical_or();
        if (is_name("else")) {
            ++at_;
            Node* n = make(NodeKind::Ternary, at);
            n->a = condition;
            n->b = value;
            n->c = expression();
            return n;
        }
        Node* n = make(NodeKind::Select, at);
        n->a = value;
        n->b = condition;
        return n;
    }

    Node* binary(std::string op, const Node* left, const Node* right, std::uint32_t at) {
        Node* n = make(NodeKind::Binary, at);
        n->name = std::move(op);
        n->a = left;
        n->b = right;
        return n;
    }

    const Node* logical_or() {
        const Node* left = logical_and();
        while (is_name("or")) {
            const std::uint32_t at = tokens_[at_++].offset;
            left = binary("or", left, logical_and(), at);
        }
        return left;
    }
    const Node* logical_and() {
        const Node* left = logical_not();
        while (is_name("and")) {
            const std::uint32_t at = tokens_[at_++].offset;
            left = binary("and", left, logical_not(), at);
        }
        return left;
    }
    const Node* logical_not() {
        if (!is_name("not")) return comparison();
        Nest nest(*this);
        Node* n = make(NodeKind::Unary, tokens_[at_++].offset);
        n->name = "not";
        n->a = logical_not();
        return n;
    }
    const Node* comparison() {
        const Node* left = additive();
        while (true) {
            const std::uint32_t at = offset();
            std::string op;
            if (is_name("not") && is_name("in", 1)) {
                op = "not in";
                at_ += 2;
            } else if (is_name("in") || is(TokenType::ComparisonOperator)) {
                op = tokens_[at_++].value;
            } else {
                return left;
            }
            left = binary(std::move(op), left, additive(), at);
        }
    }
    const Node* additive() {
        const Node* left = multiplicative();
        while (is(TokenType::AdditiveOperator)) {
            const Token& t = tokens_[at_++];
            left = binary(t.value, left, multiplicative(), t.offset);
        }
        return left;
    }
    const Node* multiplicative() {
        const Node* left = power();
        while (is(TokenType::MultiplicativeOperator)) {
            const Token& t = tokens_[at_++];
            left = binary(t.value, left, power(), t.offset);
        }
        return left;
    }
    const Node* power() {
        const Node* left = test();
        while (is(TokenType::ExponentiationOperator)) {
            const Token& t = tokens_[at_++];
            left = binary(t.value, left, test(), t.offset);
        }
        return left;
    }
    const Node* test() {
        const Node* operand = filter();
        while (is_name("is")) {
            Node* n = make(NodeKind::Test, tokens_[at_++].offset);
            n->negate = is_name("not");
            if (n->negate) ++at_;
            if (!is(TokenType::Identifier)) fail("expected a test name after 'is'");
            n->name = tokens_[at_++].value;
            n->a = operand;
            operand = n;
        }
        return operand;
    }
    const Node* filter() {
        const Node* operand = unary_sign();
        while (is(TokenType::Pipe)) {
            ++at_;
            operand = filter_call(operand);
        }
        return operand;
    }
    Node* filter_call(const Node* operand) {
        if (!is(TokenType::Identifier)) fail("expected a filter name");
        Node* n = make(NodeKind::Filter, tokens_[at_].offset);
        n->name = tokens_[at_++].value;
        n->a = operand;
        if (is(TokenType::OpenParen)) {
            n->call = true;
            n->list = arguments(false);
        }
        return n;
    }
    const Node* unary_sign() {
        if ((is(TokenType::UnaryOperator) || is(TokenType::AdditiveOperator)) &&
            (token().value == "-" || token().value == "+")) {
            Nest nest(*this);
            Node* n = make(NodeKind::Unary, token().offset);
            n->name = tokens_[at_++].value;
            n->a = unary_sign();
            return n;
        }
        return call_member(primary());
    }

    // Members, slices and calls after a primary, in any order: a.b[c](d).e
    const Node* call_member(const Node* object) {
        while (true) {
            if (is(TokenType::Dot) || is(TokenType::OpenSquareBracket)) {
                const bool computed = is(TokenType::OpenSquareBracket);
                Node* n = make(NodeKind::Member, tokens_[at_++].offset);
                n->a = object;
                n->computed = computed;
                if (computed) {
                    n->b = subscript();
                    expect(TokenType::CloseSquareBracket, "']'");
                } else {
                    n->b = primary();
                    if (n->b->kind != NodeKind::Identifier && n->b->kind != NodeKind::IntegerLiteral)
                        fail("expected a name or an integer after '.'");
                }
                object = n;
            } else if (is(TokenType::OpenParen)) {
                Node* n = make(NodeKind::Call, object->offset);
                n->a = object;
                n->list = arguments(false);
                object = n;
            } else {
                return object;
            }
        }
    }

    // Inside [...]: an index, or a slice start:stop:step with parts left out.
    const Node* subscript() {
        const std::uint32_t at = offset();
        std::vector<const Node*> parts;
        bool slice = false;
        while (!is(TokenType::CloseSquareBracket)) {
            if (at_ >= tokens_.size()) fail("unexpected end of template: expected ']'");
            if (is(TokenType::Colon)) {
                parts.push_back(nullptr);
                ++at_;
                slice = true;
            } else {
                parts.push_back(expression());
                if (is(TokenType::Colon)) {
                    ++at_;
                    slice = true;
                }
            }
        }
        if (parts.empty()) fail("expected an index or a slice inside []");
        if (!slice) return parts[0];
        if (parts.size() > 3) fail("a slice has at most three parts");
        Node* n = make(NodeKind::Slice, at);
        n->a = parts[0];
        n->b = parts.size() > 1 ? parts[1] : nullptr;
        n->c = parts.size() > 2 ? parts[2] : nullptr;
        return n;
    }

    // (a, b, key=value): `parameters` for a macro's declaration (names, defaults).
    std::vector<const Node*> arguments(bool parameters) {
        Nest nest(*this);
        expect(TokenType::OpenParen, "'('");
        std::vector<const Node*> args;
        bool keyword_seen = false;
        while (!is(TokenType::CloseParen)) {
            if (at_ >= tokens_.size()) fail("unexpected end of template: expected ')'");
            if (is(TokenType::ExponentiationOperator) || (is(TokenType::MultiplicativeOperator) && token().value == "*"))
                fail("argument unpacking (*args, **kwargs) is not supported");
            const Node* arg = expression();
            if (is(TokenType::Equals)) {
                if (arg->kind != NodeKind::Identifier) fail("expected a name before '='");
                ++at_;
                Node* kw = make(NodeKind::KeywordArgument, arg->offset);
                kw->name = arg->name;
                kw->a = expression();
                arg = kw;
                keyword_seen = true;
            } else if (keyword_seen) {
                throw TemplateError(parameters ? "a parameter without default after one with a default"
                                               : "a positional argument after a keyword argument", arg->offset);
            }
            if (parameters && arg->kind != NodeKind::Identifier && arg->kind != NodeKind::KeywordArgument)
                throw TemplateError("expected a parameter name", arg->offset);
            args.push_back(arg);
            if (is(TokenType::Comma)) ++at_;
        }
        ++at_;
        return args;
    }

    const Node* primary() {
        Nest nest(*this);
        const Token& t = token();
        ++at_;
        switch (t.type) {
            case TokenType::NumericLiteral: {
                const bool is_float = t.value.find('.') != std::string::npos;
                Node* n = make(is_float ? NodeKind::FloatLiteral : NodeKind::IntegerLiteral, t.offset);
                if (is_float) {
                    n->number = std::strtod(t.value.c_str(), nullptr);
                } else {
                    errno = 0;
                    n->integer = std::strtoll(t.value.c_str(), nullptr, 10);
                    if (errno == ERANGE) throw TemplateError(fmt::format("integer {} is too large", t.value), t.offset);
                }
                return n;
            }
            case TokenType::StringLiteral: {
                Node* n = make(NodeKind::StringLiteral, t.offset);
                n->name = t.value;
                while (is(TokenType::StringLiteral)) n->name += tokens_[at_++].value;  // 'a' 'b' is 'ab'
                return n;
            }
            case TokenType::Identifier: {
                Node* n = make(NodeKind::Identifier, t.offset);
                n->name = t.value;
                return n;
            }
            case TokenType::OpenParen: {
                const Node* e = sequence(false);
                expect(TokenType::CloseParen, "')'");
                return e;
            }
            case TokenType::OpenSquareBracket: {
                Node* n = make(NodeKind::ArrayLiteral, t.offset);
                while (!is(TokenType::CloseSquareBracket)) {
                    if (at_ >= tokens_.size()) fail("unexpected end of template: expected ']'");
                    n->list.push_back(expression());
                    if (is(TokenType::Comma)) ++at_;
                }
                ++at_;
                return n;
            }
            case TokenType::OpenCurlyBracket: {
                Node* n = make(NodeKind::ObjectLiteral, t.offset);
                while (!is(TokenType::CloseCurlyBracket)) {
                    if (at_ >= tokens_.size()) fail("unexpected end of template: expected '}'");
                    n->list.push_back(expression());
                    expect(TokenType::Colon, "':' between a key and its value");
                    n->list.push_back(expression());
                    if (is(TokenType::Comma)) ++at_;
                }
                ++at_;
                return n;
            }
            default:
                --at_;
                fail(fmt::format("unexpected {}", describe(t.type)));
        }
    }
};

}  // namespace

ParsedTemplate parse(const std::vector<Token>& tokens, std::uint32_t end_offset) {
    return Parser(tokens, end_offset).run();
}

}  // namespace ember::chat
