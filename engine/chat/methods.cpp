// Members and methods of values (message.content.split(...), message.get('x')), and the
// global functions: namespace(), range(), raise_exception(), strftime_now().
#include <fmt/format.h>

#include <algorithm>
#include <ctime>

#include "chat/evaluator.hpp"

namespace ember::chat {
namespace {

constexpr std::string_view kStringMethods[] = {"upper", "lower", "strip", "title", "capitalize", "rstrip",
                                               "lstrip", "startswith", "endswith", "split", "replace"};
constexpr std::string_view kMappingMethods[] = {"get", "items", "keys", "values", "dictsort"};

template <std::size_t N>
bool one_of(std::string_view name, const std::string_view (&names)[N]) {
    return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

bool is_ascii_word(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

Value string_at(const Value& s, std::int64_t index) {
    const auto offsets = code_point_offsets(s.str());
    const auto n = static_cast<std::int64_t>(offsets.size()) - 1;
    if (index < 0) index += n;
    if (index < 0 || index >= n) return Value::undefined();
    const auto i = static_cast<std::size_t>(index);
    return Value::from_text(s.text->slice(offsets[i], offsets[i + 1]));
}

// startswith / endswith: a string or a tuple/list of strings.
bool affix_matches(const Value& self, const CallArgs& args, bool prefix) {
    const char* name = prefix ? "startswith" : "endswith";
    if (args.positional.empty()) throw TemplateError(fmt::format("{}() needs an argument", name));
    const std::string& s = self.str();
    const auto test = [&](const Value& p) {
        if (p.kind != Kind::String) throw TemplateError(fmt::format("{}() takes strings", name));
        const std::string& a = p.str();
        return a.size() <= s.size() && (prefix ? s.compare(0, a.size(), a) == 0 : s.compare(s.size() - a.size(), a.size(), a) == 0);
    };
    const Value& p = args.positional[0];
    if (!p.is_list()) return test(p);
    for (const Value& item : *p.array)
        if (test(item)) return true;
    return false;
}

// Python's str.split(sep=None, maxsplit=-1), as the reference has it.
Value split(const Value& self, const CallArgs& args) {
    const Value* sep = args.get(0, "sep");
    const Value* maxsplit = args.get(1, "maxsplit");
    if (sep && sep->kind != Kind::String && sep->kind != Kind::Null) throw TemplateError("split: sep must be a string or none");
    if (maxsplit && maxsplit->kind != Kind::Integer) throw TemplateError("split: maxsplit must be a number");
    const std::int64_t max = maxsplit ? maxsplit->integer : -1;
    const std::string& s = self.str();
    Array parts;
    if (!sep || sep->kind == Kind::Null) {
        std::size_t i = trimmed_range(s, true, false).first;
        while (i < s.size()) {
            if (max != -1 && static_cast<std::int64_t>(parts.size()) >= max) {
                parts.push_back(Value::from_text(self.text->slice(i, s.size())));
                break;
            }
            std::size_t end = i, length = 1;
            while (end < s.size() && !is_js_space(decode_at(s, end, length))) end += length;
            parts.push_back(Value::from_text(self.text->slice(i, end)));
            i = end;
            while (i < s.size() && is_js_space(decode_at(s, i, length))) i += length;
        }
        return Value::from_array(std::move(parts));
    }
    const std::string& d = sep->str();
    if (d.empty()) throw TemplateError("split: empty separator");
    std::size_t start = 0;
    while (true) {
        const bool limited = max != -1 && static_cast<std::int64_t>(parts.size()) >= max;
        const auto at = limited ? std::string::npos : s.find(d, start);
        if (at == std::string::npos) {
            parts.push_back(Value::from_text(self.text->slice(start, s.size())));
            break;
        }
        parts.push_back(Value::from_text(self.text->slice(start, at)));
        start = at + d.size();
    }
    return Value::from_array(std::move(parts));
}

Value replace(Renderer& r, const Value& self, const CallArgs& args) {
    if (args.positional.size() < 2) throw TemplateError("replace() needs two arguments");
    const Value& old_value = args.positional[0];
    const Value& new_value = args.positional[1];
    if (old_value.kind != Kind::String || new_value.kind != Kind::String) throw TemplateError("replace() takes strings");
    const Value* count = args.get(2, "count");
    if (count && count->kind != Kind::Integer && count->kind != Kind::Null)
        throw TemplateError("replace(): count must be a number or none");
    std::int64_t remaining = count && count->kind == Kind::Integer && count->integer >= 0 ? count->integer : -1;
    const std::string& s = self.str();
    const std::string& o = old_value.str();
    Text out;
    std::size_t at = 0;
    if (o.empty()) {  // between every two code points, and at both ends
        const auto offsets = code_point_offsets(s);
        for (std::size_t i = 0; i < offsets.size(); ++i) {
            if (remaining != 0) {
                out.append(*new_value.text);
                if (remaining > 0) --remaining;
            }
            if (i + 1 < offsets.size()) out.append(self.text->slice(offsets[i], offsets[i + 1]));
            r.check_string(out.bytes.size());
        }
        return Value::from_text(std::move(out));
    }
    while (remaining != 0) {
        const auto found = s.find(o, at);
        if (found == std::string::npos) break;
        out.append(self.text->slice(at, found));
        out.append(*new_value.text);
        r.check_string(out.bytes.size());
        at = found + o.size();
        if (remaining > 0) --remaining;
    }
    out.append(self.text->slice(at, s.size()));
    r.check_string(out.bytes.size());
    return Value::from_text(std::move(out));
}

Value string_method(Renderer& r, const Function& f, const CallArgs& args) {
    const Value& self = f.self;
    const std::string& s = self.str();
    const std::string_view name = f.name;
    if (name == "upper") return Value::from_string(ascii_upper(s));
    if (name == "lower") return Value::from_string(ascii_lower(s));
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
        // The reference ignores strip's argument: it always strips whitespace.
        const auto [b, e] = trimmed_range(s, name != "rstrip", name != "lstrip");
        return Value::from_text(self.text->slice(b, e));
    }
    if (name == "title") {  // JavaScript's /\b\w/g: a word character after a non-word one
        std::string out = s;
        for (std::size_t i = 0; i < out.size(); ++i)
            if (is_ascii_word(out[i]) && (i == 0 || !is_ascii_word(out[i - 1])))
                out[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[i])));
        return Value::from_string(std::move(out));
    }
    if (name == "capitalize") {
        std::string out = s;
        if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
        return Value::from_string(std::move(out));
    }
    if (name == "startswith" || name == "endswith") return Value::from_bool(affix_matches(self, args, name == "startswith"));
    if (name == "split") return split(self, args);
    return replace(r, self, args);
}

std::string strftime_now(std::string_view format, std::int64_t now) {
    static constexpr const char* kShort[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                             "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    static constexpr const char* kLong[] = {"January", "February", "March", "April", "May", "June", "July",
                                            "August", "September", "October", "November", "December"};
    const std::time_t t = now >= 0 ? static_cast<std::time_t>(now) : std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    std::string out;
    for (std::size_t i = 0; i < format.size(); ++i) {
        if (format[i] != '%' || i + 1 >= format.size()) {
            out += format[i];
            continue;
        }
        const char c = format[++i];
        switch (c) {  // the reference's directives; any other is kept as written
            case 'Y': out += std::to_string(tm.tm_year + 1900); break;
            case 'm': out += fmt::format("{:02}", tm.tm_mon + 1); break;
            case 'd': out += fmt::format("{:02}", tm.tm_mday); break;
            case 'b': out += kShort[tm.tm_mon]; break;
            case 'B': out += kLong[tm.tm_mon]; break;
            case 'H': out += fmt::format("{:02}", tm.tm_hour); break;
            case 'M': out += fmt::format("{:02}", tm.tm_min); break;
            case '%': out += '%'; break;
            default: out += '%'; out += c;
        }
    }
    return out;
}

Value make_global(std::string_view name) {
    Value v;
    v.kind = Kind::Function;
    v.function = std::make_shared<const Function>(Function{Function::Type::Global, std::string(name), {}, nullptr});
    return v;
}

Value range(Renderer& r, const CallArgs& args) {
    std::vector<std::int64_t> n;
    for (const Value& v : args.positional) {
        if (v.kind != Kind::Integer) throw TemplateError(fmt::format("range() takes integers, not a {}", kind_name(v.kind)));
        n.push_back(v.integer);
    }
    if (n.empty() || n.size() > 3 || !args.keywords.empty()) throw TemplateError("range() takes 1 to 3 integers");
    const std::int64_t start = n.size() == 1 ? 0 : n[0], stop = n.size() == 1 ? n[0] : n[1], step = n.size() == 3 ? n[2] : 1;
    if (step == 0) throw TemplateError("range() step must not be zero");
    const double count = std::max(0.0, std::ceil((static_cast<double>(stop) - static_cast<double>(start)) / static_cast<double>(step)));
    r.check_list(static_cast<std::size_t>(std::min(count, 1e18)));
    r.charge(static_cast<std::uint64_t>(count));
    Array out;
    for (std::int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(Value::from_int(i));
    return Value::from_array(std::move(out));
}

Value make_namespace(const CallArgs& args) {
    if (args.positional.size() > 1) throw TemplateError("namespace() takes at most one positional argument");
    auto o = std::make_shared<Object>();
    if (!args.positional.empty()) {
        const Value& source = args.positional[0];
        if (source.is_mapping()) {
            for (const auto& [k, v] : source.object->entries) o->set(k, v);
        } else if (source.is_list()) {
            for (const Value& pair : *source.array) {
                if (!pair.is_list() || pair.array->size() != 2 || (*pair.array)[0].kind != Kind::String)
                    throw TemplateError("namespace() takes a mapping or a list of [name, value] pairs");
                o->set((*pair.array)[0].str(), (*pair.array)[1]);
            }
        } else {
            throw TemplateError(fmt::format("namespace() cannot take a {}", kind_name(source.kind)));
        }
    }
    for (const auto& [k, v] : args.keywords) o->set(k, v);
    return Value::from_object(std::move(o), Kind::Namespace);
}

}  // namespace

std::string ascii_upper(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
}

std::string ascii_lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

Value make_method(const Value& self, std::string_view name) {
    Value v;
    v.kind = Kind::Function;
    v.function = std::make_shared<const Function>(Function{Function::Type::Method, std::string(name), self, nullptr});
    return v;
}

Value member_of(const Value& object, const Value& property) {
    if (object.is_attribute_container()) {
        if (property.kind != Kind::String)
            throw TemplateError(fmt::format("a {} is indexed by strings, not by a {}", kind_name(object.kind), kind_name(property.kind)));
        if (const Value* v = object.object->find(property.str())) return *v;
        if (object.is_mapping() && one_of(property.str(), kMappingMethods)) return make_method(object, property.str());
        return Value::undefined();
    }
    if (object.is_list() || object.kind == Kind::String) {
        if (property.kind == Kind::Integer) {
            if (object.kind == Kind::String) return string_at(object, property.integer);
            const auto n = static_cast<std::int64_t>(object.array->size());
            const std::int64_t i = property.integer < 0 ? property.integer + n : property.integer;
            return i >= 0 && i < n ? (*object.array)[static_cast<std::size_t>(i)] : Value::undefined();
        }
        if (property.kind != Kind::String)
            throw TemplateError(fmt::format("a {} is indexed by integers, not by a {}", kind_name(object.kind), kind_name(property.kind)));
        if (property.str() == "length") {
            const std::size_t n = object.kind == Kind::String ? code_point_count(object.str()) : object.array->size();
            return Value::from_int(static_cast<std::int64_t>(n));
        }
        if (object.kind == Kind::String && one_of(property.str(), kStringMethods)) return make_method(object, property.str());
        return Value::undefined();
    }
    if (property.kind != Kind::String)
        throw TemplateError(fmt::format("cannot index a {} by a {}", kind_name(object.kind), kind_name(property.kind)));
    return Value::undefined();  // undefined.x and none.x are undefined, as in the reference
}

Value mapping_items(const Value& mapping) {
    Array items;
    for (const auto& [k, v] : mapping.object->entries) items.push_back(Value::from_array({Value::from_string(k), v}));
    return Value::from_array(std::move(items));
}

Value dictsort(const Value& mapping, const CallArgs& args) {
    const Value* case_sensitive = args.get(0, "case_sensitive");
    const Value* by = args.get(1, "by");
    const Value* reverse = args.get(2, "reverse");
    if ((case_sensitive && case_sensitive->kind != Kind::Boolean) || (reverse && reverse->kind != Kind::Boolean))
        throw TemplateError("dictsort: case_sensitive and reverse must be booleans");
    if (by && (by->kind != Kind::String || (by->str() != "key" && by->str() != "value")))
        throw TemplateError("dictsort: by must be 'key' or 'value'");
    const std::size_t index = by && by->str() == "value" ? 1 : 0;
    const bool cs = case_sensitive && case_sensitive->boolean, rev = reverse && reverse->boolean;
    Array items = *mapping_items(mapping).array;
    std::stable_sort(items.begin(), items.end(), [&](const Value& a, const Value& b) {
        const int c = compare_values((*a.array)[index], (*b.array)[index], cs);
        return rev ? c > 0 : c < 0;
    });
    return Value::from_array(std::move(items));
}

Value call_method(Renderer& r, const Function& f, const CallArgs& args) {
    if (f.self.kind == Kind::String) return string_method(r, f, args);
    const Value& self = f.self;
    if (f.name == "get") {
        if (args.positional.empty() || args.positional[0].kind != Kind::String)
            throw TemplateError("get() takes a string key");
        if (const Value* v = self.object->find(args.positional[0].str())) return *v;
        return args.positional.size() > 1 ? args.positional[1] : Value::none();
    }
    if (f.name == "items") return mapping_items(self);
    if (f.name == "keys" || f.name == "values") {
        Array out;
        for (const auto& [k, v] : self.object->entries) out.push_back(f.name == "keys" ? Value::from_string(k) : v);
        return Value::from_array(std::move(out));
    }
    return dictsort(self, args);
}

Value call_global(Renderer& r, const Function& f, const CallArgs& args) {
    if (f.name == "namespace") return make_namespace(args);
    if (f.name == "range") return range(r, args);
    if (f.name == "strftime_now") {
        if (args.positional.empty() || args.positional[0].kind != Kind::String)
            throw TemplateError("strftime_now() takes a format string");
        return Value::from_string(strftime_now(args.positional[0].str(), r.now_seconds()));
    }
    // raise_exception(message): the template refuses these variables.
    Text message;
    for (std::size_t i = 0; i < args.positional.size(); ++i) {
        if (i) message.append(",");
        append_printed(message, args.positional[i]);
    }
    throw TemplateError("raise_exception: " + message.bytes);
}

void install_globals(Scope& globals) {
    globals.set("false", Value::from_bool(false));
    globals.set("true", Value::from_bool(true));
    globals.set("none", Value::none());
    globals.set("False", Value::from_bool(false));
    globals.set("True", Value::from_bool(true));
    globals.set("None", Value::none());
    for (std::string_view name : {"namespace", "range", "raise_exception", "strftime_now"})
        globals.set(name, make_global(name));
}

std::vector<std::size_t> slice_indices(std::size_t size, const Value& start_v, const Value& stop_v, const Value& step_v) {
    for (const Value* v : {&start_v, &stop_v, &step_v})
        if (v->kind != Kind::Integer && v->kind != Kind::Undefined) throw TemplateError("slice bounds must be integers");
    const auto n = static_cast<std::int64_t>(size);
    const std::int64_t step = step_v.kind == Kind::Integer ? step_v.integer : 1;
    const bool has_start = start_v.kind == Kind::Integer, has_stop = stop_v.kind == Kind::Integer;
    std::int64_t start = 0, stop = 0;
    if (step >= 0) {
        start = has_start ? start_v.integer : 0;
        start = start < 0 ? std::max<std::int64_t>(n + start, 0) : std::min(start, n);
        stop = has_stop ? stop_v.integer : n;
        stop = stop < 0 ? std::max<std::int64_t>(n + stop, 0) : std::min(stop, n);
    } else {
        start = has_start ? start_v.integer : n - 1;
        start = start < 0 ? std::max<std::int64_t>(n + start, -1) : std::min(start, n - 1);
        stop = has_stop ? stop_v.integer : -1;
        stop = stop < -1 ? std::max<std::int64_t>(n + stop, -1) : std::min(stop, n - 1);
    }
    std::vector<std::size_t> out;
    const std::int64_t direction = step > 0 ? 1 : step < 0 ? -1 : 0;
    for (std::int64_t i = start; direction * i < direction * stop; i += step) out.push_back(static_cast<std::size_t>(i));
    return out;
}

}  // namespace ember::chat
