#include "config/command_line_config.hpp"

#include <fmt/format.h>

#include <toml++/toml.h>

#include <boost/json.hpp>

#include <string_view>

#include "common/error.hpp"
#include "config/toml_limits.hpp"
#include "config/toml_reader.hpp"

namespace ember::config {
namespace {

namespace json = boost::json;

constexpr std::string_view kOption = "--experiment-config";

bool is_bare_key_part(std::string_view part) {
    if (part.empty()) return false;
    for (const char c : part)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
    return true;
}

// "a.b" -> {"a", "b"}; UsageError when a part is not a bare TOML key.
std::vector<std::string> key_path(std::string_view key, std::string_view item) {
    std::vector<std::string> parts;
    std::size_t start = 0;
    while (true) {
        const std::size_t dot = std::min(key.find('.', start), key.size());
        const std::string_view part = key.substr(start, dot - start);
        if (!is_bare_key_part(part))
            throw UsageError(fmt::format("{} '{}': '{}' is not a key (letters, digits, _ and -; dotted for a table in a table)",
                                         kOption, item, key));
        parts.emplace_back(part);
        if (dot == key.size()) return parts;
        start = dot + 1;
    }
}

// VALUE as TOML types it, or the text itself when it is no TOML value.
json::value typed_value(const std::string& text, std::string_view key, std::string_view item) {
    if (text.find('\n') == std::string::npos && text.find('\r') == std::string::npos) {
        try {
            const toml::table t = toml::parse("value = " + text, std::string_view("--experiment-config"));
            if (t.size() == 1 && t.contains("value")) {
                try {
                    return toml_to_json(*t.get("value"), std::string(kOption));
                } catch (const Error& e) {
                    throw UsageError(fmt::format("{} '{}': key {}: {}", kOption, item, key, e.what()));
                }
            }
        } catch (const toml::parse_error&) {
        }
    }
    return json::value(text);
}

// Sets `value` at `path` in `table`; UsageError naming the key when it is there already.
void set_key(json::object& table, const std::vector<std::string>& path, json::value value, std::string_view item) {
    json::object* at = &table;
    std::string key;
    for (std::size_t i = 0; i + 1 < path.size(); ++i) {
        key += (key.empty() ? "" : ".") + path[i];
        json::value& next = (*at)[path[i]];
        if (next.is_null()) next = json::object();
        if (!next.is_object())
            throw UsageError(fmt::format("{} '{}': key {} is set already, and not to a table", kOption, item, key));
        at = &next.as_object();
    }
    key += (key.empty() ? "" : ".") + path.back();
    if (at->contains(path.back())) throw UsageError(fmt::format("{} '{}': key {} is set twice", kOption, item, key));
    (*at)[path.back()] = std::move(value);
}

// Every key of `from` (a file's table) into `into`, naming a key both set.
void merge_table(json::object& into, const json::object& from, const std::vector<std::string>& prefix, std::string_view item) {
    for (const auto& [k, v] : from) {
        std::vector<std::string> path = prefix;
        path.emplace_back(k);
        if (v.is_object() && into.contains(k) && into.at(k).is_object()) {
            merge_table(into.at(k).as_object(), v.as_object(), path, item);
            continue;
        }
        std::string dotted;
        for (const std::string& part : path) dotted += (dotted.empty() ? "" : ".") + part;
        if (into.contains(k))
            throw UsageError(fmt::format("{} '{}': key {} is set twice", kOption, item, dotted));
        into[k] = v;
    }
}

}  // namespace

std::string experiment_config_from_items(const std::vector<std::string>& items) {
    json::object table;
    for (const std::string& item : items) {
        const std::size_t eq = item.find('=');
        if (eq == std::string::npos) {
            if (!item.ends_with(".toml"))
                throw UsageError(fmt::format("{} '{}': give KEY=VALUE or a FILE.toml", kOption, item));
            const toml::table file = parse_toml_file_within_limits(item);
            merge_table(table, toml_to_json(file, item).as_object(), {}, item);
            continue;
        }
        const std::string key = item.substr(0, eq);
        const std::string value = item.substr(eq + 1);
        const std::vector<std::string> path = key_path(key, item);
        if (value.empty()) throw UsageError(fmt::format("{} '{}': key {} has no value (write {}=\"\" for an empty string)",
                                                        kOption, item, key, key));
        set_key(table, path, typed_value(value, key, item), item);
    }
    return canonical_json(json::value(std::move(table)));
}

}  // namespace ember::config
