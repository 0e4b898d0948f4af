// Filters (`x | name`, `x | name(args)`) and tests (`x is name`), the ones the reference
// has, with its behaviour. A filter the reference does not have for a type is refused
// with the filter's and the type's names.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "chat/evaluator.hpp"

namespace ember::chat {
namespace {

[[noreturn]] void unknown_filter(std::string_view name, const Value& operand) {
    throw TemplateError(fmt::format("unknown filter '{}' for a {}", name, kind_name(operand.kind)));
}

const Value* attribute_path(const Value& item, std::string_view path, Value& holder) {
    holder = item;
    while (true) {
        const auto dot = path.find('.');
        const std::string_view part = path.substr(0, dot);
        if (holder.is_attribute_container()) {
            const Value* v = holder.object->find(part);
            if (!v) return nullptr;
            holder = *v;
        } else if (holder.is_list()) {
            char* end = nullptr;
            const std::string p(part);
            const long index = std::strtol(p.c_str(), &end, 10);
            if (p.empty() || index < 0 || static_cast<std::size_t>(index) >= holder.array->size()) return nullptr;
            holder = (*holder.array)[static_cast<std::size_t>(index)];
        } else {
            return nullptr;
        }
        if (dot == std::string_view::npos) return &holder;
        path.remove_prefix(dot + 1);
    }
}

// JavaScript's parseInt(s, 10) / parseFloat(s): a leading number, or nothing.
bool parse_leading_number(std::string_view s, bool integer, double& out) {
    const auto [b, e] = trimmed_range(s, true, false);
    const std::string rest(s.substr(b, e - b));
    char* end = nullptr;
    if (integer) {
        const long long v = std::strtoll(rest.c_str(), &end, 10);
        if (end == rest.c_str()) return false;
        out = static_cast<double>(v);
    } else {
        if (rest.empty() || !(std::isdigit(static_cast<unsigned char>(rest[0])) || rest[0] == '.' || rest[0] == '-' ||
                              rest[0] == '+'))
            return false;
        out = std::strtod(rest.c_str(), &end);
        if (end == rest.c_str()) return false;
    }
    return true;
}

Value join(Renderer& r, const Value& operand, std::string_view separator) {
    Text out;
    const auto add = [&](const Value& v) {
        if (v.kind == Kind::Undefined || v.kind == Kind::Null) return;  // as JavaScript's join
        out.append(primitive_text(v));
    };
    if (operand.kind == Kind::String) {
        const auto offsets = code_point_offsets(operand.str());
        for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
            if (i) out.append(separator);
            out.append(operand.text->slice(offsets[i], offsets[i + 1]));
        }
    } else {
        for (std::size_t i = 0; i < operand.array->size(); ++i) {
            if (i) out.append(separator);
            add((*operand.array)[i]);
            r.check_string(out.bytes.size());
        }
    }
    r.check_string(out.bytes.size());
    return Value::from_text(std::move(out));
}

Value indent(const Value& operand, int width, bool first, bool blank) {
    const std::string pad(static_cast<std::size_t>(std::max(width, 0)), ' ');
    Text out;
    const std::string& s = operand.str();
    std::size_t line_start = 0, line = 0;
    while (true) {
        const auto nl = s.find('\n', line_start);
        const std::size_t end = nl == std::string::npos ? s.size() : nl;
        if (line) out.append("\n");
        if (!((!first && line == 0) || (!blank && end == line_start))) out.append(pad);
        out.append(operand.text->slice(line_start, end));
        if (nl == std::string::npos) break;
        line_start = nl + 1;
        ++line;
    }
    return Value::from_text(std::move(out));
}

Value sorted(const Value& operand, const CallArgs& args) {
    const Value* reverse = args.get(0, "reverse");
    const Value* case_sensitive = args.get(1, "case_sensitive");
    const Value* attribute = args.get(2, "attribute");
    if ((reverse && reverse->kind != Kind::Boolean) || (case_sensitive && case_sensitive->kind != Kind::Boolean))
        throw TemplateError("sort: reverse and case_sensitive must be booleans");
    const bool rev = reverse && reverse->boolean, cs = case_sensitive && case_sensitive->boolean;
    std::string path;
    if (attribute && attribute->kind == Kind::String) path = attribute->str();
    else if (attribute && attribute->kind == Kind::Integer) path = std::to_string(attribute->integer);
    else if (attribute && attribute->kind != Kind::Null) throw TemplateError("sort: attribute must be a string or an integer");
    Array items = *operand.array;
    const auto key = [&](const Value& v) {
        if (path.empty()) return v;
        Value holder;
        const Value* found = attribute_path(v, path, holder);
        return found ? *found : Value::undefined();
    };
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
        const int c = compare_values(key(a), key(b), cs);
        return rev ? c > 0 : c < 0;
    });
    return Value::from_array(std::move(items));
}

Value tojson(const Value& operand, const CallArgs& args) {
    JsonOptions o;
    if (const Value* v = args.keyword("indent")) {
        if (v->kind == Kind::Integer) o.indent = static_cast<int>(std::clamp<std::int64_t>(v->integer, -1, 64));
        else if (v->kind != Kind::Null) throw TemplateError("tojson: indent must be a number");
    }
    if (const Value* v = args.keyword("ensure_ascii")) {
        if (v->kind != Kind::Boolean) throw TemplateError("tojson: ensure_ascii must be a boolean");
        o.ensure_ascii = v->boolean;
    }
    if (const Value* v = args.keyword("sort_keys")) {
        if (v->kind != Kind::Boolean) throw TemplateError("tojson: sort_keys must be a boolean");
        o.sort_keys = v->boolean;
    }
    if (const Value* v = args.keyword("separators"); v && v->kind != Kind::Null) {
        if (!v->is_list() || v->array->size() != 2 || (*v->array)[0].kind != Kind::String ||
            (*v->array)[1].kind != Kind::String)
            throw TemplateError("tojson: separators must be two strings");
        o.has_separators = true;
        o.item_separator = (*v->array)[0].str();
        o.key_separator = (*v->array)[1].str();
    }
    return Value::from_string(to_json(operand, o));
}

Value select_attr(Renderer& r, const Value& operand, const Node& filter, Scope& scope, bool select) {
    for (const Value& item : *operand.array)
        if (!item.is_attribute_container())
            throw TemplateError(fmt::format("{} works on a list of mappings", filter.name));
    for (const Node* a : filter.list)
        if (a->kind != NodeKind::StringLiteral) throw TemplateError(fmt::format("{} takes string arguments", filter.name));
    const CallArgs args = r.eval_arguments(filter.list, scope);
    if (args.positional.empty()) throw TemplateError(fmt::format("{} needs an attribute name", filter.name));
    const std::string attr = args.positional[0].str();
    const Value* test_arg = args.positional.size() > 2 ? &args.positional[2] : nullptr;
    Array out;
    for (const Value& item : *operand.array) {
        const Value* a = item.object->find(attr);
        bool result = false;
        if (a) result = args.positional.size() > 1 ? apply_test(args.positional[1].str(), *a, test_arg) : truthy(*a);
        if (result == select) out.push_back(item);
    }
    return Value::from_array(std::move(out));
}

Value map_attribute(const Value& operand, const CallArgs& args) {
    const Value* attr = args.keyword("attribute");
    if (!attr) throw TemplateError("map without attribute= is not supported (nor is it by the reference)");
    if (attr->kind != Kind::String) throw TemplateError("map: attribute must be a string");
    const Value* fallback = args.keyword("default");
    Array out;
    for (const Value& item : *operand.array) {
        if (!item.is_attribute_container()) throw TemplateError("map: the items must be mappings");
        Value holder;
        const Value* v = attribute_path(item, attr->str(), holder);
        out.push_back(v && v->kind != Kind::Undefined ? *v : fallback ? *fallback : Value::undefined());
    }
    return Value::from_array(std::move(out));
}

// `x | name` without parentheses.
Value plain_filter(Renderer& r, const Value& x, std::string_view name) {
    if (name == "safe") return x;
    if (name == "tojson") return Value::from_string(to_json(x, {}));
    if (x.is_list()) {
        const Array& a = *x.array;
        if (name == "list") return x;
        if (name == "first") return a.empty() ? Value::undefined() : a.front();
        if (name == "last") return a.empty() ? Value::undefined() : a.back();
        if (name == "length") return Value::from_int(static_cast<std::int64_t>(a.size()));
        if (name == "reverse") return Value::from_array(Array(a.rbegin(), a.rend()));
        if (name == "sort") return sorted(x, {});
        if (name == "join") return join(r, x, "");
        if (name == "string") return Value::from_string(to_json(x, {}, false));
        if (name == "unique") {
            Array out;
            for (const Value& v : a) {
                bool seen = false;
                for (const Value& o : out) seen = seen || strict_equal(o, v);
                if (!seen) out.push_back(v);
            }
            return Value::from_array(std::move(out));
        }
    } else if (x.kind == Kind::String) {
        const std::string& s = x.str();
        if (name == "length") return Value::from_int(static_cast<std::int64_t>(code_point_count(s)));
        if (name == "upper" || name == "lower" || name == "title" || name == "capitalize")
            return call_method(r, Function{Function::Type::Method, std::string(name), x, nullptr}, {});
        if (name == "trim") {
            const auto [b, e] = trimmed_range(s, true, true);
            return Value::from_text(x.text->slice(b, e));
        }
        if (name == "indent") return indent(x, 4, false, false);
        if (name == "join" || name == "string") return x;
        double v = 0;
        if (name == "int") return Value::from_int(parse_leading_number(s, true, v) ? static_cast<std::int64_t>(v) : 0);
        if (name == "float") return Value::from_float(parse_leading_number(s, false, v) ? v : 0.0);
    } else if (x.is_number()) {
        if (name == "abs") return x.kind == Kind::Integer ? Value::from_int(std::llabs(x.integer)) : Value::from_float(std::fabs(x.number));
        if (name == "int") return Value::from_int(x.kind == Kind::Integer ? x.integer : static_cast<std::int64_t>(std::floor(x.number)));
        if (name == "float") return Value::from_float(x.as_double());
        if (name == "string") {
            Text t;
            append_printed(t, x);
            return Value::from_text(std::move(t));
        }
    } else if (x.is_mapping()) {
        if (name == "items") return mapping_items(x);
        if (name == "length") return Value::from_int(static_cast<std::int64_t>(x.object->entries.size()));
        if (name == "keys" || name == "values" || name == "dictsort" || name == "get")
            return call_method(r, Function{Function::Type::Method, std::string(name), x, nullptr}, {});
    } else if (x.kind == Kind::Boolean) {
        if (name == "bool") return x;
        if (name == "int") return Value::from_int(x.boolean ? 1 : 0);
        if (name == "float") return Value::from_float(x.boolean ? 1.0 : 0.0);
        if (name == "string") return Value::from_string(x.boolean ? "true" : "false");
    }
    unknown_filter(name, x);
}

}  // namespace

Value apply_filter(Renderer& r, const Value& x, const Node& filter, Scope& scope) {
    const std::string_view name = filter.name;
    if (!filter.call) return plain_filter(r, x, name);
    if (name == "selectattr" || name == "rejectattr") {
        if (!x.is_list()) unknown_filter(name, x);
        return select_attr(r, x, filter, scope, name == "selectattr");
    }
    const CallArgs args = r.eval_arguments(filter.list, scope);
    if (name == "tojson") return tojson(x, args);
    if (name == "join") {
        if (x.kind != Kind::String && !x.is_list()) unknown_filter(name, x);
        const Value* sep = args.get(0, "separator");
        if (sep && sep->kind != Kind::String) throw TemplateError("join: the separator must be a string");
        return join(r, x, sep ? std::string_view(sep->str()) : std::string_view());
    }
    if (name == "int" || name == "float") {
        const bool integer = name == "int";
        const Value* fallback = args.get(0, "default");
        const Value zero = integer ? Value::from_int(0) : Value::from_float(0.0);
        if (x.kind == Kind::String) {
            double v = 0;
            if (!parse_leading_number(x.str(), integer, v)) return fallback ? *fallback : zero;
            return integer ? Value::from_int(static_cast<std::int64_t>(v)) : Value::from_float(v);
        }
        if (x.is_number()) return x;
        if (x.kind == Kind::Boolean) return integer ? Value::from_int(x.boolean) : Value::from_float(x.boolean);
        unknown_filter(name, x);
    }
    if (name == "default") {
        const Value fallback = args.positional.empty() ? Value::from_string("") : args.positional[0];
        const Value* boolean = args.get(1, "boolean");
        if (boolean && boolean->kind != Kind::Boolean) throw TemplateError("default: boolean must be a boolean");
        if (x.kind == Kind::Undefined || (boolean && boolean->boolean && !truthy(x))) return fallback;
        return x;
    }
    if (x.is_list()) {
        if (name == "sort") return sorted(x, args);
        if (name == "map") return map_attribute(x, args);
    } else if (x.kind == Kind::String) {
        if (name == "indent") {
            const Value* width = args.get(0, "width");
            const Value* first = args.get(1, "first");
            const Value* blank = args.get(2, "blank");
            if (width && width->kind != Kind::Integer) throw TemplateError("indent: width must be a number");
            return indent(x, width ? static_cast<int>(std::clamp<std::int64_t>(width->integer, 0, 1024)) : 4,
                          first && truthy(*first), blank && truthy(*blank));
        }
        if (name == "replace") {
            CallArgs call = args;
            return call_method(r, Function{Function::Type::Method, "replace", x, nullptr}, call);
        }
    } else if (x.is_mapping()) {
        if (name == "dictsort" || name == "get" || name == "items" || name == "keys" || name == "values")
            return call_method(r, Function{Function::Type::Method, std::string(name), x, nullptr}, args);
    }
    unknown_filter(name, x);
}

bool apply_test(std::string_view name, const Value& x, const Value* arg) {
    if (name == "defined") return x.kind != Kind::Undefined;
    if (name == "undefined") return x.kind == Kind::Undefined;
    if (name == "none") return x.kind == Kind::Null;
    if (name == "boolean") return x.kind == Kind::Boolean;
    if (name == "true") return x.kind == Kind::Boolean && x.boolean;
    if (name == "false") return x.kind == Kind::Boolean && !x.boolean;
    if (name == "string") return x.kind == Kind::String;
    if (name == "number") return x.is_number();
    if (name == "integer") return x.kind == Kind::Integer;
    if (name == "callable") return x.kind == Kind::Function;
    if (name == "mapping") return x.is_mapping();
    if (name == "iterable") return x.kind == Kind::Array || x.kind == Kind::String;  // not a tuple, as in the reference
    if (name == "sequence") return x.is_list() || x.is_mapping() || x.kind == Kind::String;
    if (name == "lower") return x.kind == Kind::String && x.str() == ascii_lower(x.str());
    if (name == "upper") return x.kind == Kind::String && x.str() == ascii_upper(x.str());
    if (name == "odd" || name == "even") {
        if (x.kind != Kind::Integer) throw TemplateError(fmt::format("test '{}' on a {}", name, kind_name(x.kind)));
        return (x.integer % 2 != 0) == (name == "odd");
    }
    if (name == "equalto" || name == "eq") return strict_equal(x, arg ? *arg : Value::undefined());
    throw TemplateError(fmt::format("unknown test '{}'", name));
}

}  // namespace ember::chat
