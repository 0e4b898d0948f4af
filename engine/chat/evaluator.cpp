// Statements, expressions and operators, as the reference's interpreter evaluates them.
#include "chat/evaluator.hpp"

#include <fmt/format.h>

#include <cmath>
#include <limits>

namespace ember::chat {

// ---- scopes and arguments ----

Value Scope::lookup(std::string_view name) const {
    for (const Scope* s = this; s; s = s->parent)
        for (const auto& [k, v] : s->vars)
            if (k == name) return v;
    return Value::undefined();
}

void Scope::set(std::string_view name, Value value) {
    for (auto& [k, v] : vars) {
        if (k == name) {
            v = std::move(value);
            return;
        }
    }
    vars.emplace_back(std::string(name), std::move(value));
}

const Value* CallArgs::keyword(std::string_view name) const {
    for (const auto& [k, v] : keywords)
        if (k == name) return &v;
    return nullptr;
}

const Value* CallArgs::get(std::size_t i, std::string_view name) const {
    if (i < positional.size()) return &positional[i];
    return keyword(name);
}

Value CallArgs::keywords_value() const {
    auto o = std::make_shared<Object>();
    for (const auto& [k, v] : keywords) o->set(k, v);
    return Value::from_object(std::move(o), Kind::KeywordArgs);
}

// ---- limits ----

void Renderer::charge(std::uint64_t n) {
    steps_ += n;
    if (steps_ > limits_.max_steps)
        throw TemplateError(fmt::format("the template evaluated more than {} expressions (a loop that does not end?)",
                                        limits_.max_steps));
}

void Renderer::check_string(std::size_t bytes) {
    charge(bytes / 256);
    if (bytes > limits_.max_string_bytes)
        throw TemplateError(fmt::format("a string of {} bytes, more than the limit of {}", bytes, limits_.max_string_bytes));
}

void Renderer::check_list(std::size_t items) const {
    if (items > limits_.max_list_items)
        throw TemplateError(fmt::format("a list of {} items, more than the limit of {}", items, limits_.max_list_items));
}

// ---- statements ----

void Renderer::render_block(const std::vector<const Node*>& block, Scope& scope, Text& out) {
    for (const Node* node : block) {
        exec(node, scope, out);
        if (out.bytes.size() > limits_.max_output_bytes)
            throw TemplateError(fmt::format("the rendered text is over the limit of {} bytes", limits_.max_output_bytes),
                                node->offset);
        if (flow_ != Flow::Normal) return;
    }
}

void Renderer::exec(const Node* node, Scope& scope, Text& out) {
    charge();
    try {
        switch (node->kind) {
            case NodeKind::Set: return exec_set(node, scope);
            case NodeKind::If: {
                const bool taken = truthy(eval(node->a, scope));
                return render_block(taken ? node->body : node->alternate, scope, out);
            }
            case NodeKind::For: return exec_for(node, scope, out);
            case NodeKind::Macro: {
                auto f = std::make_shared<Function>(Function{Function::Type::Macro, node->name, {}, node});
                Value v;
                v.kind = Kind::Function;
                v.function = std::move(f);
                return scope.set(node->name, std::move(v));
            }
            case NodeKind::FilterBlock: {
                Text body;
                render_block(node->body, scope, body);
                return append_printed(out, apply_filter(*this, Value::from_text(std::move(body)), *node->a, scope));
            }
            case NodeKind::Break: flow_ = Flow::Break; return;
            case NodeKind::Continue: flow_ = Flow::Continue; return;
            case NodeKind::StringLiteral: return out.append(node->name);  // template text
            default: return append_printed(out, eval(node, scope));
        }
    } catch (TemplateError& e) {
        if (e.offset == TemplateError::npos) e.offset = node->offset;
        throw;
    }
}

void Renderer::exec_set(const Node* node, Scope& scope) {
    Value value;
    if (node->b) {
        value = eval(node->b, scope);
    } else {
        Text body;
        render_block(node->body, scope, body);
        value = Value::from_text(std::move(body));
    }
    const Node* target = node->a;
    if (target->kind == NodeKind::Identifier) return scope.set(target->name, std::move(value));
    if (target->kind == NodeKind::TupleLiteral) {
        if (!value.is_list()) throw TemplateError(fmt::format("cannot unpack a {} in set", kind_name(value.kind)));
        if (value.array->size() != target->list.size())
            throw TemplateError(fmt::format("set unpacks {} names from {} items", target->list.size(), value.array->size()));
        for (std::size_t i = 0; i < target->list.size(); ++i) {
            if (target->list[i]->kind != NodeKind::Identifier) throw TemplateError("set can unpack only into names");
            scope.set(target->list[i]->name, (*value.array)[i]);
        }
        return;
    }
    if (target->kind == NodeKind::Member && !target->computed && target->b->kind == NodeKind::Identifier) {
        const Value object = eval(target->a, scope);
        if (object.kind != Kind::Namespace)
            throw TemplateError(fmt::format("cannot set an attribute of a {}: only of a namespace()", kind_name(object.kind)));
        return object.object->set(target->b->name, std::move(value));
    }
    throw TemplateError("set needs a name, names, or a namespace attribute on its left");
}

namespace {

void bind_loop_target(const Node* target, const Value& item, Scope& scope) {
    if (target->kind == NodeKind::Identifier) return scope.set(target->name, item);
    if (!item.is_list()) throw TemplateError(fmt::format("cannot unpack a {} into loop variables", kind_name(item.kind)));
    if (item.array->size() != target->list.size())
        throw TemplateError(fmt::format("the loop unpacks {} names from {} items", target->list.size(), item.array->size()));
    for (std::size_t j = 0; j < target->list.size(); ++j) {
        if (target->list[j]->kind != NodeKind::Identifier) throw TemplateError("loop variables must be names");
        scope.set(target->list[j]->name, (*item.array)[j]);
    }
}

Value loop_object(const std::vector<Value>& items, std::size_t i) {
    const auto n = static_cast<std::int64_t>(items.size()), k = static_cast<std::int64_t>(i);
    auto o = std::make_shared<Object>();
    o->entries.reserve(9);
    o->entries.emplace_back("index", Value::from_int(k + 1));
    o->entries.emplace_back("index0", Value::from_int(k));
    o->entries.emplace_back("revindex", Value::from_int(n - k));
    o->entries.emplace_back("revindex0", Value::from_int(n - k - 1));
    o->entries.emplace_back("first", Value::from_bool(k == 0));
    o->entries.emplace_back("last", Value::from_bool(k == n - 1));
    o->entries.emplace_back("length", Value::from_int(n));
    o->entries.emplace_back("previtem", i > 0 ? items[i - 1] : Value::undefined());
    o->entries.emplace_back("nextitem", k < n - 1 ? items[i + 1] : Value::undefined());
    return Value::from_object(std::move(o));
}

}  // namespace

void Renderer::exec_for(const Node* node, Scope& scope, Text& out) {
    Scope loop_scope{&scope, {}};
    const Node* iterable_node = node->b;
    const Node* condition = nullptr;
    if (iterable_node->kind == NodeKind::Select) {  // for x in xs if cond
        condition = iterable_node->b;
        iterable_node = iterable_node->a;
    }
    Value iterable = eval(iterable_node, loop_scope);
    if (iterable.is_mapping()) {
        Array keys;
        for (const auto& [k, v] : iterable.object->entries) keys.push_back(Value::from_string(k));
        iterable = Value::from_array(std::move(keys));
    }
    if (!iterable.is_list()) throw TemplateError(fmt::format("cannot loop over a {}", kind_name(iterable.kind)));

    std::vector<Value> items;
    for (const Value& item : *iterable.array) {
        charge();
        if (condition) {
            Scope test_scope{&loop_scope, {}};
            bind_loop_target(node->a, item, test_scope);
            if (!truthy(eval(condition, test_scope))) continue;
        }
        items.push_back(item);
    }
    bool iterated = false;
    for (std::size_t i = 0; i < items.size(); ++i) {
        charge();
        loop_scope.set("loop", loop_object(items, i));
        bind_loop_target(node->a, items[i], loop_scope);
        const std::size_t mark = out.bytes.size();
        render_block(node->body, loop_scope, out);
        if (flow_ != Flow::Normal) {
            // The reference drops what an iteration printed before its break or continue.
            out.truncate(mark);
            const bool stop = flow_ == Flow::Break;
            flow_ = Flow::Normal;
            if (stop) break;
            continue;
        }
        iterated = true;
    }
    if (!iterated) render_block(node->alternate, loop_scope, out);
}

// ---- expressions ----

Value Renderer::eval(const Node* node, Scope& scope) {
    charge();
    try {
        return eval_node(node, scope);
    } catch (TemplateError& e) {
        if (e.offset == TemplateError::npos) e.offset = node->offset;
        throw;
    }
}

Value Renderer::eval_node(const Node* node, Scope& scope) {
    switch (node->kind) {
        case NodeKind::Identifier: return scope.lookup(node->name);
        case NodeKind::IntegerLiteral: return Value::from_int(node->integer);
        case NodeKind::FloatLiteral: return Value::from_float(node->number);
        case NodeKind::StringLiteral: return Value::from_string(node->name);
        case NodeKind::ArrayLiteral: case NodeKind::TupleLiteral: {
            Array items;
            items.reserve(node->list.size());
            for (const Node* n : node->list) items.push_back(eval(n, scope));
            return Value::from_array(std::move(items), node->kind == NodeKind::ArrayLiteral ? Kind::Array : Kind::Tuple);
        }
        case NodeKind::ObjectLiteral: {
            auto o = std::make_shared<Object>();
            for (std::size_t i = 0; i + 1 < node->list.size(); i += 2) {
                const Value key = eval(node->list[i], scope);
                if (key.kind != Kind::String)
                    throw TemplateError(fmt::format("a mapping key must be a string, not a {}", kind_name(key.kind)),
                                        node->list[i]->offset);
                o->set(key.str(), eval(node->list[i + 1], scope));
            }
            return Value::from_object(std::move(o));
        }
        case NodeKind::Member: return eval_member(node, scope);
        case NodeKind::Call: {
            const CallArgs args = eval_arguments(node->list, scope);
            return call(eval(node->a, scope), args, scope);
        }
        case NodeKind::Unary: return eval_unary(node, scope);
        case NodeKind::Binary: return eval_binary(node, scope);
        case NodeKind::Filter: return apply_filter(*this, eval(node->a, scope), *node, scope);
        case NodeKind::Test: {
            const bool result = apply_test(node->name, eval(node->a, scope), nullptr);
            return Value::from_bool(node->negate ? !result : result);
        }
        case NodeKind::Select:
            return truthy(eval(node->b, scope)) ? eval(node->a, scope) : Value::undefined();
        case NodeKind::Ternary:
            return truthy(eval(node->a, scope)) ? eval(node->b, scope) : eval(node->c, scope);
        case NodeKind::KeywordArgument: throw TemplateError("a keyword argument outside a call");
        case NodeKind::Slice: throw TemplateError("a slice outside []");
        default: throw TemplateError("a statement where an expression belongs");
    }
}

CallArgs Renderer::eval_arguments(const std::vector<const Node*>& args, Scope& scope) {
    CallArgs out;
    for (const Node* a : args) {
        if (a->kind != NodeKind::KeywordArgument) {
            out.positional.push_back(eval(a, scope));
            continue;
        }
        if (out.keyword(a->name)) throw TemplateError(fmt::format("keyword argument '{}' given twice", a->name), a->offset);
        out.keywords.emplace_back(a->name, eval(a->a, scope));
    }
    return out;
}

Value Renderer::eval_member(const Node* node, Scope& scope) {
    const Value object = eval(node->a, scope);
    const Node* p = node->b;
    if (node->computed && p->kind == NodeKind::Slice) {
        const Value start = p->a ? eval(p->a, scope) : Value::undefined();
        const Value stop = p->b ? eval(p->b, scope) : Value::undefined();
        const Value step = p->c ? eval(p->c, scope) : Value::undefined();
        if (object.is_list()) {
            Array items;
            for (std::size_t i : slice_indices(object.array->size(), start, stop, step)) items.push_back((*object.array)[i]);
            return Value::from_array(std::move(items));
        }
        if (object.kind != Kind::String) throw TemplateError(fmt::format("cannot slice a {}", kind_name(object.kind)));
        const auto offsets = code_point_offsets(object.str());
        Text out;
        const auto indices = slice_indices(offsets.size() - 1, start, stop, step);
        for (std::size_t i : indices) out.append(object.text->slice(offsets[i], offsets[i + 1]));
        return Value::from_text(std::move(out));
    }
    Value property;
    if (node->computed) {
        property = eval(p, scope);
    } else if (p->kind == NodeKind::IntegerLiteral) {
        property = Value::from_int(p->integer);
    } else {
        property = Value::from_string(p->name);
    }
    return member_of(object, property);
}

Value Renderer::eval_unary(const Node* node, Scope& scope) {
    const Value v = eval(node->a, scope);
    if (node->name == "not") return Value::from_bool(!truthy(v));
    const double sign = node->name == "-" ? -1.0 : 1.0;
    if (v.kind == Kind::Float) return Value::from_float(sign * v.number);
    if (v.kind == Kind::Integer || v.kind == Kind::Boolean) {
        const std::int64_t i = v.kind == Kind::Boolean ? (v.boolean ? 1 : 0) : v.integer;
        if (i == std::numeric_limits<std::int64_t>::min()) throw TemplateError("integer overflow");
        return Value::from_int(node->name == "-" ? -i : i);
    }
    throw TemplateError(fmt::format("unary {} on a {}", node->name, kind_name(v.kind)));
}

namespace {

Value arithmetic(std::string_view op, const Value& l, const Value& r) {
    const bool is_float = l.kind == Kind::Float || r.kind == Kind::Float;
    if (op == "/") {
        if (r.as_double() == 0) throw TemplateError("division by zero");
        return Value::from_float(l.as_double() / r.as_double());
    }
    if (is_float) {
        const double a = l.as_double(), b = r.as_double();
        if (op == "+") return Value::from_float(a + b);
        if (op == "-") return Value::from_float(a - b);
        if (op == "*") return Value::from_float(a * b);
        if (b == 0) throw TemplateError("division by zero");
        if (op == "//") return Value::from_float(std::floor(a / b));
        return Value::from_float(std::fmod(a, b));  // %: the sign of the dividend, as in JavaScript
    }
    const std::int64_t a = l.integer, b = r.integer;
    std::int64_t out = 0;
    if (op == "+" && !__builtin_add_overflow(a, b, &out)) return Value::from_int(out);
    if (op == "-" && !__builtin_sub_overflow(a, b, &out)) return Value::from_int(out);
    if (op == "*" && !__builtin_mul_overflow(a, b, &out)) return Value::from_int(out);
    if (op == "//" || op == "%") {
        if (b == 0) throw TemplateError("division by zero");
        if (op == "%") return Value::from_int(a % b);
        return Value::from_int(static_cast<std::int64_t>(std::floor(static_cast<double>(a) / static_cast<double>(b))));
    }
    throw TemplateError("integer overflow");
}

Value compare_numbers(std::string_view op, double a, double b) {
    if (op == "<") return Value::from_bool(a < b);
    if (op == ">") return Value::from_bool(a > b);
    if (op == "<=") return Value::from_bool(a <= b);
    return Value::from_bool(a >= b);
}

}  // namespace

Value Renderer::eval_binary(const Node* node, Scope& scope) {
    const std::string_view op = node->name;
    const Value l = eval(node->a, scope);
    if (op == "and") return truthy(l) ? eval(node->b, scope) : l;
    if (op == "or") return truthy(l) ? l : eval(node->b, scope);
    const Value r = eval(node->b, scope);
    if (op == "==") return Value::from_bool(loose_equal(l, r));
    if (op == "!=") return Value::from_bool(!loose_equal(l, r));
    const bool membership = op == "in" || op == "not in";
    if (l.kind == Kind::Undefined || r.kind == Kind::Undefined) {
        if (r.kind == Kind::Undefined && membership) return Value::from_bool(op == "not in");
        throw TemplateError(fmt::format("'{}' on an undefined value", op));
    }
    if (l.kind == Kind::Null || r.kind == Kind::Null) throw TemplateError(fmt::format("'{}' on none", op));
    if (op == "~") {
        Text t = primitive_text(l);
        t.append(primitive_text(r));
        check_string(t.bytes.size());
        return Value::from_text(std::move(t));
    }
    const auto numeric_like = [](const Value& v) { return v.is_number() || v.kind == Kind::Boolean; };
    if (op == "**" && numeric_like(l) && numeric_like(r)) {
        const double a = l.kind == Kind::Boolean ? l.boolean : l.as_double();
        const double b = r.kind == Kind::Boolean ? r.boolean : r.as_double();
        if (a == 0 && b < 0) throw TemplateError("0.0 cannot be raised to a negative power");
        const double p = std::pow(a, b);
        if (!std::isfinite(p)) throw TemplateError("exponentiation result is not a finite number");
        const bool is_float = l.kind == Kind::Float || r.kind == Kind::Float || b < 0;
        if (!is_float && std::fabs(p) > 9.007199254740992e15) throw TemplateError("integer overflow");
        return is_float ? Value::from_float(p) : Value::from_int(static_cast<std::int64_t>(p));
    }
    if (l.is_number() && r.is_number()) {
        if (op == "+" || op == "-" || op == "*" || op == "/" || op == "//" || op == "%") return arithmetic(op, l, r);
        if (op == "<" || op == ">" || op == "<=" || op == ">=") return compare_numbers(op, l.as_double(), r.as_double());
    } else if (l.is_list() && r.is_list()) {
        if (op == "+") {
            check_list(l.array->size() + r.array->size());
            Array items = *l.array;
            items.insert(items.end(), r.array->begin(), r.array->end());
            return Value::from_array(std::move(items));
        }
    } else if (r.is_list()) {
        if (membership) {
            bool found = false;
            for (const Value& x : *r.array) found = found || strict_equal(x, l);
            return Value::from_bool(found == (op == "in"));
        }
    }
    if ((l.kind == Kind::String || r.kind == Kind::String) && op == "+") {
        Text t = primitive_text(l);
        t.append(primitive_text(r));
        check_string(t.bytes.size());
        return Value::from_text(std::move(t));
    }
    if (l.kind == Kind::String && r.kind == Kind::String && membership)
        return Value::from_bool((r.str().find(l.str()) != std::string::npos) == (op == "in"));
    if (l.kind == Kind::String && r.is_mapping() && membership)
        return Value::from_bool((r.object->find(l.str()) != nullptr) == (op == "in"));
    throw TemplateError(fmt::format("unsupported operator '{}' between a {} and a {}", op, kind_name(l.kind), kind_name(r.kind)));
}

// ---- calls ----

Value Renderer::call(const Value& callee, const CallArgs& args, Scope& caller) {
    if (callee.kind != Kind::Function)
        throw TemplateError(fmt::format("cannot call a {}", kind_name(callee.kind)));
    const Function& f = *callee.function;
    switch (f.type) {
        case Function::Type::Macro: return call_macro(f, args, caller);
        case Function::Type::Method: return call_method(*this, f, args);
        case Function::Type::Global: return call_global(*this, f, args);
    }
    return {};
}

Value Renderer::call_macro(const Function& f, const CallArgs& args, Scope& caller) {
    const Node* macro = f.macro;
    if (++call_depth_ > limits_.max_call_depth) {
        call_depth_ = 0;
        throw TemplateError(fmt::format("macro calls nested deeper than {} (a recursion that does not end?)",
                                        limits_.max_call_depth));
    }
    if (args.positional.size() > macro->list.size())
        throw TemplateError(fmt::format("macro '{}' takes at most {} argument(s), given {}", macro->name,
                                        macro->list.size(), args.positional.size()));
    Scope scope{&caller, {}};
    std::vector<const Node*> defaults;
    std::size_t keywords_used = 0;
    for (std::size_t i = 0; i < macro->list.size(); ++i) {
        const Node* param = macro->list[i];
        const Value* given = i < args.positional.size() ? &args.positional[i] : args.keyword(param->name);
        if (i >= args.positional.size() && given) ++keywords_used;
        if (!given && param->kind == NodeKind::KeywordArgument) defaults.push_back(param);
        scope.set(param->name, given ? *given : Value::undefined());
    }
    if (keywords_used != args.keywords.size()) {
        for (const auto& [k, v] : args.keywords) {
            bool known = false;
            for (const Node* param : macro->list) known = known || param->name == k;
            if (!known) throw TemplateError(fmt::format("macro '{}' has no parameter '{}'", macro->name, k));
        }
    }
    for (const Node* param : defaults) scope.set(param->name, eval(param->a, scope));
    Text out;
    render_block(macro->body, scope, out);
    if (flow_ != Flow::Normal) throw TemplateError("{% break %} or {% continue %} outside a loop", macro->offset);
    --call_depth_;
    return Value::from_text(std::move(out));
}

}  // namespace ember::chat
