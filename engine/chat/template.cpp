#include "chat/template.hpp"

#include <boost/json.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "chat/evaluator.hpp"
#include "chat/lexer.hpp"
#include "chat/parser.hpp"

namespace ember::chat {
namespace {

namespace json = boost::json;

// JavaScript orders an object's keys that are array indices first, ascending.
bool is_array_index(std::string_view key, std::uint64_t& index) {
    if (key.empty() || key.size() > 10 || (key.size() > 1 && key[0] == '0')) return false;
    index = 0;
    for (char c : key) {
        if (c < '0' || c > '9') return false;
        index = index * 10 + static_cast<std::uint64_t>(c - '0');
    }
    return index < 0xFFFFFFFFull;
}

std::size_t first_invalid_utf8(std::string_view s) {
    for (std::size_t i = 0; i < s.size();) {
        const auto b = static_cast<unsigned char>(s[i]);
        const std::size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
        if (n == 0 || i + n > s.size() || (n == 2 && b < 0xC2)) return i;
        for (std::size_t k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return i;
        i += n;
    }
    return std::string_view::npos;
}

[[noreturn]] void fail_at(const std::string& name, std::string_view source, std::size_t offset, const std::string& what) {
    if (offset == TemplateError::npos) throw Error(fmt::format("{}: {}", name, what));
    const auto lc = line_column(source, offset);
    throw Error(fmt::format("{}:{}:{}: {}", name, lc.line, lc.column, what));
}

}  // namespace

Value value_from_json(const json::value& j, std::int32_t message) {
    switch (j.kind()) {
        case json::kind::null: return Value::none();
        case json::kind::bool_: return Value::from_bool(j.get_bool());
        case json::kind::int64: return Value::from_int(j.get_int64());
        case json::kind::uint64: {
            const std::uint64_t u = j.get_uint64();
            if (u > static_cast<std::uint64_t>(INT64_MAX)) return Value::from_float(static_cast<double>(u));
            return Value::from_int(static_cast<std::int64_t>(u));
        }
        case json::kind::double_: {
            const double d = j.get_double();
            if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) <= 9007199254740992.0)
                return Value::from_int(static_cast<std::int64_t>(d));
            return Value::from_float(d);
        }
        case json::kind::string: {
            Text t;
            t.bytes = std::string(j.get_string());
            if (message >= 0 && !t.bytes.empty())
                t.origins.push_back({0, static_cast<std::uint32_t>(t.bytes.size()), message});
            return Value::from_text(std::move(t));
        }
        case json::kind::array: {
            Array items;
            for (const auto& v : j.get_array()) items.push_back(value_from_json(v, message));
            return Value::from_array(std::move(items));
        }
        case json::kind::object: {
            auto o = std::make_shared<Object>();
            std::vector<std::pair<std::uint64_t, const json::key_value_pair*>> indexed;
            std::vector<const json::key_value_pair*> named;
            for (const auto& kv : j.get_object()) {
                std::uint64_t index = 0;
                if (is_array_index(kv.key(), index)) indexed.emplace_back(index, &kv);
                else named.push_back(&kv);
            }
            std::sort(indexed.begin(), indexed.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
            for (const auto& [index, kv] : indexed) o->set(kv->key(), value_from_json(kv->value(), message));
            for (const auto* kv : named) o->set(kv->key(), value_from_json(kv->value(), message));
            return Value::from_object(std::move(o));
        }
    }
    return {};
}

Variables variables_from_json(const json::object& vars) {
    Variables out;
    for (const auto& kv : vars) {
        if (kv.key() != "messages" || !kv.value().is_array()) {
            out.emplace_back(std::string(kv.key()), value_from_json(kv.value()));
            continue;
        }
        Array messages;
        const auto& list = kv.value().get_array();
        for (std::size_t i = 0; i < list.size(); ++i) {
            if (!list[i].is_object()) {
                messages.push_back(value_from_json(list[i]));
                continue;
            }
            // Every string of messages[i] but its role is the message's text.
            const json::value* role = list[i].get_object().if_contains("role");
            Value m = value_from_json(list[i], static_cast<std::int32_t>(i));
            if (role) m.object->set("role", value_from_json(*role));
            messages.push_back(std::move(m));
        }
        out.emplace_back("messages", Value::from_array(std::move(messages)));
    }
    return out;
}

Template Template::parse(std::string name, std::string source) {
    if (source.size() > kMaxSourceBytes)
        throw Error(fmt::format("{}: the template is {} bytes, more than the limit of {} bytes", name, source.size(),
                                kMaxSourceBytes));
    if (const auto bad = first_invalid_utf8(source); bad != std::string_view::npos)
        fail_at(name, source, bad, fmt::format("the template is not valid UTF-8 (byte {})", bad));
    Template t;
    try {
        const auto tokens = tokenize(source);
        t.parsed_ = std::make_shared<const ParsedTemplate>(chat::parse(tokens, static_cast<std::uint32_t>(source.size())));
    } catch (const TemplateError& e) {
        fail_at(name, source, e.offset, e.what());
    }
    t.name_ = std::move(name);
    t.source_ = std::move(source);
    return t;
}

Text Template::render(const Variables& vars, const Limits& limits, std::int64_t now_seconds) const {
    Scope globals;
    install_globals(globals);
    for (const auto& [name, value] : vars) {
        if (globals.lookup(name).kind != Kind::Undefined)
            throw Error(fmt::format("{}: variable '{}' would hide the built-in of that name", name_, name));
        globals.vars.emplace_back(name, value);
    }
    Renderer renderer(limits, now_seconds);
    Text out;
    try {
        renderer.render_block(parsed_->body, globals, out);
        if (renderer.pending_break_or_continue()) throw TemplateError("{% break %} or {% continue %} outside a loop");
    } catch (const TemplateError& e) {
        fail_at(name_, source_, e.offset, e.what());
    }
    return out;
}

}  // namespace ember::chat
