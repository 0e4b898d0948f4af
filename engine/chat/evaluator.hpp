// The evaluator's insides, shared by evaluator.cpp (statements, expressions, operators,
// macros), filters.cpp (filters and tests) and methods.cpp (string and mapping methods,
// the global functions). Not part of the public interface (chat/template.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat/ast.hpp"
#include "chat/template.hpp"
#include "chat/value.hpp"

namespace ember::chat {

// Variables of one level: the globals and the template's variables, a for loop, a macro
// call. A lookup walks outwards; a macro's scope sits inside its caller's, as in the
// reference (macros see the variables of where they are called).
struct Scope {
    const Scope* parent = nullptr;
    std::vector<std::pair<std::string, Value>> vars;

    Value lookup(std::string_view name) const;
    void set(std::string_view name, Value value);
};

struct Function {
    enum class Type : std::uint8_t { Macro, Global, Method };
    Type type;
    std::string name;           // the global's or method's name
    Value self;                 // a method's string or mapping
    const Node* macro = nullptr;
};

struct CallArgs {
    std::vector<Value> positional;
    std::vector<std::pair<std::string, Value>> keywords;  // in the order written

    const Value* keyword(std::string_view name) const;
    // Positional i, else keyword `name`, else nullptr.
    const Value* get(std::size_t i, std::string_view name) const;
    Value keywords_value() const;  // as a KeywordArgs mapping
};

class Renderer {
public:
    Renderer(const Limits& limits, std::int64_t now_seconds) : limits_(limits), now_seconds_(now_seconds) {}

    // Renders statements into `out`; stops early at {% break %} / {% continue %}.
    void render_block(const std::vector<const Node*>& block, Scope& scope, Text& out);
    Value eval(const Node* node, Scope& scope);
    Value call(const Value& callee, const CallArgs& args, Scope& caller);
    CallArgs eval_arguments(const std::vector<const Node*>& args, Scope& scope);
    bool pending_break_or_continue() const { return flow_ != Flow::Normal; }

    // Every string, list and output growth goes through these so that a hostile template
    // is refused instead of eating the machine.
    void check_string(std::size_t bytes);  // also charges a step per 256 bytes made
    void check_list(std::size_t items) const;
    std::int64_t now_seconds() const { return now_seconds_; }
    // Counts `n` steps of work against the limit (every expression, statement and loop
    // iteration; a list made by range() counts its items).
    void charge(std::uint64_t n = 1);

private:
    enum class Flow : std::uint8_t { Normal, Break, Continue };
    const Limits& limits_;
    std::int64_t now_seconds_;
    std::uint64_t steps_ = 0;
    int call_depth_ = 0;
    Flow flow_ = Flow::Normal;

    void exec(const Node* node, Scope& scope, Text& out);
    void exec_for(const Node* node, Scope& scope, Text& out);
    void exec_set(const Node* node, Scope& scope);
    Value eval_node(const Node* node, Scope& scope);
    Value eval_member(const Node* node, Scope& scope);
    Value eval_binary(const Node* node, Scope& scope);
    Value eval_unary(const Node* node, Scope& scope);
    Value call_macro(const Function& f, const CallArgs& args, Scope& caller);
};

// ---- filters.cpp ----
Value apply_filter(Renderer& r, const Value& operand, const Node& filter, Scope& scope);
// `x is NAME` (with `arg` for selectattr's `equalto`); throws for an unknown test.
bool apply_test(std::string_view name, const Value& operand, const Value* arg);

// ---- methods.cpp ----
// object.property / object[property], the reference's way: a mapping's key, else its
// methods (get, items, keys, values, dictsort); a string's or list's index, `length`, or a
// string's methods; anything missing is undefined.
Value member_of(const Value& object, const Value& property);
Value call_method(Renderer& r, const Function& f, const CallArgs& args);
Value call_global(Renderer& r, const Function& f, const CallArgs& args);
// namespace, range, raise_exception, strftime_now, true/false/none and their capitals.
void install_globals(Scope& globals);
// The reference's slice: [start:stop:step] over n items -> the indices taken.
std::vector<std::size_t> slice_indices(std::size_t n, const Value& start, const Value& stop, const Value& step);
Value make_method(const Value& self, std::string_view name);
// A mapping's items as [key, value] lists, and its dictsort.
Value mapping_items(const Value& mapping);
Value dictsort(const Value& mapping, const CallArgs& args);
// A string's upper / lower case (ASCII letters; other characters are kept).
std::string ascii_upper(std::string_view s);
std::string ascii_lower(std::string_view s);

}  // namespace ember::chat
