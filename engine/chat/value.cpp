#include "chat/value.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace ember::chat {

// ---- Text ----

void Text::append(const Text& other) {
    const auto shift = static_cast<std::uint32_t>(bytes.size());
    for (const auto& o : other.origins) {
        Origin moved{o.begin + shift, o.end + shift, o.message};
        // Pieces of one message put back together stay one origin.
        if (!origins.empty() && origins.back().end == moved.begin && origins.back().message == moved.message) {
            origins.back().end = moved.end;
        } else {
            origins.push_back(moved);
        }
    }
    bytes += other.bytes;
}

void Text::append(std::string_view plain) { bytes.append(plain.data(), plain.size()); }

Text Text::slice(std::size_t begin, std::size_t end) const {
    Text out;
    out.bytes = bytes.substr(begin, end - begin);
    for (const auto& o : origins) {
        const std::size_t b = std::max<std::size_t>(o.begin, begin), e = std::min<std::size_t>(o.end, end);
        if (b < e) out.origins.push_back({static_cast<std::uint32_t>(b - begin), static_cast<std::uint32_t>(e - begin), o.message});
    }
    return out;
}

void Text::truncate(std::size_t size) {
    bytes.resize(size);
    while (!origins.empty() && origins.back().begin >= size) origins.pop_back();
    if (!origins.empty() && origins.back().end > size) origins.back().end = static_cast<std::uint32_t>(size);
}

std::string_view kind_name(Kind kind) {
    switch (kind) {
        case Kind::Undefined: return "undefined";
        case Kind::Null: return "none";
        case Kind::Boolean: return "boolean";
        case Kind::Integer: return "integer";
        case Kind::Float: return "float";
        case Kind::String: return "string";
        case Kind::Array: return "list";
        case Kind::Tuple: return "tuple";
        case Kind::Object: return "mapping";
        case Kind::KeywordArgs: return "keyword arguments";
        case Kind::Namespace: return "namespace";
        case Kind::Function: return "function";
    }
    return "?";
}

// ---- constructors ----

Value Value::none() { Value v; v.kind = Kind::Null; return v; }
Value Value::from_bool(bool b) { Value v; v.kind = Kind::Boolean; v.boolean = b; return v; }
Value Value::from_int(std::int64_t i) { Value v; v.kind = Kind::Integer; v.integer = i; return v; }
Value Value::from_float(double f) { Value v; v.kind = Kind::Float; v.number = f; return v; }
Value Value::from_string(std::string s) {
    Value v;
    v.kind = Kind::String;
    v.text = std::make_shared<const Text>(Text{std::move(s), {}});
    return v;
}
Value Value::from_text(Text t) {
    Value v;
    v.kind = Kind::String;
    v.text = std::make_shared<const Text>(std::move(t));
    return v;
}
Value Value::from_array(Array a, Kind kind) {
    Value v;
    v.kind = kind;
    v.array = std::make_shared<const Array>(std::move(a));
    return v;
}
Value Value::from_object(std::shared_ptr<Object> o, Kind kind) {
    Value v;
    v.kind = kind;
    v.object = std::move(o);
    return v;
}

const Value* Object::find(std::string_view key) const {
    for (const auto& [k, v] : entries)
        if (k == key) return &v;
    return nullptr;
}

void Object::set(std::string_view key, Value value) {
    for (auto& [k, v] : entries) {
        if (k == key) {
            v = std::move(value);
            return;
        }
    }
    entries.emplace_back(std::string(key), std::move(value));
}

// ---- truth, printing ----

bool truthy(const Value& v) {
    switch (v.kind) {
        case Kind::Undefined: case Kind::Null: return false;
        case Kind::Boolean: return v.boolean;
        case Kind::Integer: return v.integer != 0;
        case Kind::Float: return v.number != 0.0 && !std::isnan(v.number);
        case Kind::String: return !v.str().empty();
        case Kind::Array: case Kind::Tuple: return !v.array->empty();
        case Kind::Object: case Kind::KeywordArgs: return !v.object->entries.empty();
        case Kind::Namespace: case Kind::Function: return true;
    }
    return false;
}

std::string js_number(double d) {
    if (std::isnan(d)) return "NaN";
    if (std::isinf(d)) return d > 0 ? "Infinity" : "-Infinity";
    if (d == 0) return "0";
    std::string sign = d < 0 ? "-" : "";
    char buf[64];
    const auto r = std::to_chars(buf, buf + sizeof buf, std::fabs(d), std::chars_format::scientific);
    const std::string_view sci(buf, static_cast<std::size_t>(r.ptr - buf));  // "d.ddde+XX"
    const auto e_at = sci.find('e');
    std::string digits;
    for (char c : sci.substr(0, e_at))
        if (c != '.') digits += c;
    const int n = std::atoi(std::string(sci.substr(e_at + 1)).c_str()) + 1;  // value = 0.digits * 10^n
    const int k = static_cast<int>(digits.size());
    if (k <= n && n <= 21) return sign + digits + std::string(static_cast<std::size_t>(n - k), '0');
    if (0 < n && n <= 21) return sign + digits.substr(0, static_cast<std::size_t>(n)) + "." + digits.substr(static_cast<std::size_t>(n));
    if (-6 < n && n <= 0) return sign + "0." + std::string(static_cast<std::size_t>(-n), '0') + digits;
    const int e = n - 1;
    std::string mantissa = digits.substr(0, 1);
    if (k > 1) mantissa += "." + digits.substr(1);
    return sign + mantissa + "e" + (e < 0 ? "-" : "+") + std::to_string(std::abs(e));
}

namespace {

// FloatValue.toString in the reference: 1.0 prints "1.0", -0.0 "-0.0".
std::string float_printed(double d) {
    if (d == 0 && std::signbit(d)) return "-0.0";
    if (std::isfinite(d) && std::fabs(d) < 1e21 && d == std::floor(d)) return fmt::format("{:.1f}", d);
    return js_number(d);
}

}  // namespace

void append_printed(Text& out, const Value& v) {
    switch (v.kind) {
        case Kind::Undefined: case Kind::Null: return;
        case Kind::Boolean: out.append(v.boolean ? "true" : "false"); return;
        case Kind::Integer: out.append(std::to_string(v.integer)); return;
        case Kind::Float: out.append(float_printed(v.number)); return;
        case Kind::String: out.append(*v.text); return;
        case Kind::Array: case Kind::Tuple: case Kind::Object: case Kind::KeywordArgs: case Kind::Namespace:
            out.append(to_json(v, {}, false));
            return;
        case Kind::Function: throw TemplateError("cannot print a function");
    }
}

Text primitive_text(const Value& v) {
    switch (v.kind) {
        case Kind::String: return *v.text;
        case Kind::Integer: return Text{std::to_string(v.integer), {}};
        case Kind::Float: return Text{js_number(v.number), {}};
        case Kind::Boolean: return Text{v.boolean ? "true" : "false", {}};
        default: throw TemplateError(fmt::format("cannot join a {} to a string", kind_name(v.kind)));
    }
}

// ---- equality and order ----

namespace {

bool numeric_like(const Value& v) { return v.is_number() || v.kind == Kind::Boolean; }
double numeric_value(const Value& v) { return v.kind == Kind::Boolean ? (v.boolean ? 1.0 : 0.0) : v.as_double(); }

// JavaScript's ToNumber for a string: decimal literals and Infinity, "" is 0, else NaN.
double js_string_to_number(std::string_view s) {
    const auto [b, e] = trimmed_range(s, true, true);
    s = s.substr(b, e - b);
    if (s.empty()) return 0.0;
    std::string_view body = s;
    if (body[0] == '+' || body[0] == '-') body.remove_prefix(1);
    if (body == "Infinity") return s[0] == '-' ? -INFINITY : INFINITY;
    bool digit = false, ok = true;
    std::size_t i = 0;
    while (i < body.size() && std::isdigit(static_cast<unsigned char>(body[i]))) ++i, digit = true;
    if (i < body.size() && body[i] == '.') {
        ++i;
        while (i < body.size() && std::isdigit(static_cast<unsigned char>(body[i]))) ++i, digit = true;
    }
    if (digit && i < body.size() && (body[i] == 'e' || body[i] == 'E')) {
        ++i;
        if (i < body.size() && (body[i] == '+' || body[i] == '-')) ++i;
        bool exp_digit = false;
        while (i < body.size() && std::isdigit(static_cast<unsigned char>(body[i]))) ++i, exp_digit = true;
        ok = exp_digit;
    }
    if (!digit || !ok || i != body.size()) return NAN;
    return std::strtod(std::string(s).c_str(), nullptr);
}

bool same_container(const Value& a, const Value& b) {
    if (a.kind != b.kind && !(a.is_list() && b.is_list()) && !(a.is_mapping() && b.is_mapping())) return false;
    if (a.is_list()) return a.array == b.array;
    if (a.kind == Kind::Function) return a.function == b.function;
    return a.object == b.object;
}

}  // namespace

bool loose_equal(const Value& a, const Value& b) {
    const bool a_nothing = a.kind == Kind::Undefined || a.kind == Kind::Null;
    const bool b_nothing = b.kind == Kind::Undefined || b.kind == Kind::Null;
    if (a_nothing || b_nothing) return a_nothing && b_nothing;
    if (numeric_like(a) && numeric_like(b)) return numeric_value(a) == numeric_value(b);
    if (a.kind == Kind::String && b.kind == Kind::String) return a.str() == b.str();
    if (a.kind == Kind::String && numeric_like(b)) return js_string_to_number(a.str()) == numeric_value(b);
    if (b.kind == Kind::String && numeric_like(a)) return js_string_to_number(b.str()) == numeric_value(a);
    if (a.kind == Kind::String || b.kind == Kind::String || numeric_like(a) || numeric_like(b)) return false;
    return same_container(a, b);
}

bool strict_equal(const Value& a, const Value& b) {
    if (a.is_number() && b.is_number()) return a.as_double() == b.as_double();
    if (a.kind != b.kind) {
        const bool a_nothing = a.kind == Kind::Undefined, b_nothing = b.kind == Kind::Undefined;
        return a_nothing && b_nothing;
    }
    switch (a.kind) {
        case Kind::Undefined: case Kind::Null: return true;
        case Kind::Boolean: return a.boolean == b.boolean;
        case Kind::String: return a.str() == b.str();
        default: return same_container(a, b);
    }
}

int compare_values(const Value& a, const Value& b, bool case_sensitive) {
    const auto refuse = [&] {
        throw TemplateError(fmt::format("cannot compare {} with {}", kind_name(a.kind), kind_name(b.kind)));
    };
    if (a.kind == Kind::Null || b.kind == Kind::Null) {
        if (a.kind == b.kind) return 0;
        refuse();
    }
    if (a.kind == Kind::Undefined || b.kind == Kind::Undefined) {
        if (a.kind == b.kind) return 0;
        refuse();
    }
    if (numeric_like(a) && numeric_like(b)) {
        const double x = numeric_value(a), y = numeric_value(b);
        return x < y ? -1 : x > y ? 1 : 0;
    }
    if (a.kind != Kind::String || b.kind != Kind::String) refuse();
    std::string x = a.str(), y = b.str();
    if (!case_sensitive) {
        for (auto& c : x) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        for (auto& c : y) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return x < y ? -1 : x > y ? 1 : 0;
}

// ---- JSON ----

namespace {

void append_json_string(std::string& out, std::string_view s, bool ensure_ascii) {
    out += '"';
    for (std::size_t i = 0; i < s.size();) {
        std::size_t length = 1;
        const char32_t c = decode_at(s, i, length);
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
                    out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
                } else if (ensure_ascii && c >= 0x7f) {
                    if (c > 0xFFFF) {  // the reference escapes UTF-16 code units: a surrogate pair
                        const char32_t v = c - 0x10000;
                        out += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
                    } else {
                        out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
                    }
                } else {
                    out.append(s.substr(i, length));
                }
        }
        i += length;
    }
    out += '"';
}

void json_into(std::string& out, const Value& v, const JsonOptions& o, int depth, bool undefined_as_null) {
    const std::string item_sep = o.has_separators ? o.item_separator : o.indent ? "," : ", ";
    const std::string key_sep = o.has_separators ? o.key_separator : ": ";
    switch (v.kind) {
        case Kind::Null: out += "null"; return;
        case Kind::Undefined: out += undefined_as_null ? "null" : "undefined"; return;
        case Kind::Boolean: out += v.boolean ? "true" : "false"; return;
        case Kind::Integer: out += std::to_string(v.integer); return;
        case Kind::Float: out += std::isfinite(v.number) ? js_number(v.number) : "null"; return;
        case Kind::String: append_json_string(out, v.str(), o.ensure_ascii); return;
        case Kind::Array: case Kind::Object: case Kind::Namespace: break;
        default: throw TemplateError(fmt::format("cannot convert a {} to JSON", kind_name(v.kind)));
    }
    const std::string indent(static_cast<std::size_t>(std::max(o.indent, 0)), ' ');
    std::string base = "\n";
    for (int i = 0; i < depth; ++i) base += indent;
    const std::string child = base + indent;
    const bool pretty = o.indent > 0;
    if (v.kind == Kind::Array) {
        out += '[';
        for (std::size_t i = 0; i < v.array->size(); ++i) {
            if (i) out += item_sep;
            if (pretty) out += child;
            json_into(out, (*v.array)[i], o, depth + 1, undefined_as_null);
        }
        if (pretty && !v.array->empty()) out += base;
        out += ']';
        return;
    }
    std::vector<const std::pair<std::string, Value>*> entries;
    for (const auto& e : v.object->entries) entries.push_back(&e);
    if (o.sort_keys) std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
    out += '{';
    for (std::size_t i = 0; i < entries.size(); ++i) {
        if (i) out += item_sep;
        if (pretty) out += child;
        append_json_string(out, entries[i]->first, o.ensure_ascii);
        out += key_sep;
        json_into(out, entries[i]->second, o, depth + 1, undefined_as_null);
    }
    if (pretty && !entries.empty()) out += base;
    out += '}';
}

}  // namespace

std::string to_json(const Value& v, const JsonOptions& options, bool undefined_as_null) {
    std::string out;
    json_into(out, v, options, 0, undefined_as_null);
    return out;
}

// ---- UTF-8 ----

char32_t decode_at(std::string_view s, std::size_t i, std::size_t& length) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    const std::size_t n = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) {
        length = 1;
        return b0;
    }
    char32_t c = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
    for (std::size_t k = 1; k < n; ++k) {
        const auto b = static_cast<unsigned char>(s[i + k]);
        if ((b & 0xC0) != 0x80) {
            length = 1;
            return b0;
        }
        c = (c << 6) | (b & 0x3F);
    }
    length = n;
    return c;
}

void append_utf8(std::string& out, char32_t c) {
    if (c < 0x80) {
        out += static_cast<char>(c);
    } else if (c < 0x800) {
        out += static_cast<char>(0xC0 | (c >> 6));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
        out += static_cast<char>(0xE0 | (c >> 12));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
        out += static_cast<char>(0xF0 | (c >> 18));
        out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
        out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (c & 0x3F));
    }
}

std::vector<std::size_t> code_point_offsets(std::string_view s) {
    std::vector<std::size_t> offsets;
    offsets.reserve(s.size() + 1);
    for (std::size_t i = 0; i < s.size();) {
        offsets.push_back(i);
        std::size_t length = 1;
        decode_at(s, i, length);
        i += length;
    }
    offsets.push_back(s.size());
    return offsets;
}

std::size_t code_point_count(std::string_view s) {
    std::size_t n = 0;
    for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    return n;
}

bool is_js_space(char32_t c) {
    switch (c) {
        case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0xA0: case 0x1680:
        case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000: case 0xFEFF:
            return true;
        default:
            return c >= 0x2000 && c <= 0x200A;
    }
}

std::pair<std::size_t, std::size_t> trimmed_range(std::string_view s, bool left, bool right) {
    std::size_t begin = 0, end = s.size();
    if (left) {
        while (begin < end) {
            std::size_t length = 1;
            if (!is_js_space(decode_at(s, begin, length))) break;
            begin += length;
        }
    }
    if (right) {
        while (end > begin) {
            std::size_t start = end - 1;
            while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
            std::size_t length = 1;
            const char32_t c = decode_at(s, start, length);
            if (start + length != end || !is_js_space(c)) break;
            end = start;
        }
    }
    return {begin, end};
}

}  // namespace ember::chat
