#include "config/toml_reader.hpp"

#include <fmt/format.h>

#include <boost/json/serialize.hpp>

#include <algorithm>
#include <cmath>

#include "common/error.hpp"

namespace ember::config {

std::string located(const std::string& file, const toml::source_region& where, std::string_view message) {
    return fmt::format("{}:{}:{}: {}", file, where.begin.line, where.begin.column, message);
}

std::string_view toml_type_name(toml::node_type type) {
    switch (type) {
        case toml::node_type::string: return "string";
        case toml::node_type::integer: return "integer";
        case toml::node_type::floating_point: return "float";
        case toml::node_type::boolean: return "boolean";
        case toml::node_type::table: return "table";
        case toml::node_type::array: return "array";
        case toml::node_type::date: return "date";
        case toml::node_type::time: return "time";
        case toml::node_type::date_time: return "date-time";
        case toml::node_type::none: break;
    }
    return "nothing";
}

TableReader::TableReader(const toml::table& table, std::string prefix, std::string file)
    : table_(table), prefix_(std::move(prefix)), file_(std::move(file)) {}

std::string TableReader::qualified(std::string_view key) const {
    return prefix_.empty() ? std::string(key) : fmt::format("{}.{}", prefix_, key);
}

const toml::node* TableReader::node(std::string_view key) {
    known_.emplace_back(key);
    return table_.get(key);
}

void TableReader::fail(const toml::node& at, std::string_view message) const {
    throw Error(located(file_, at.source(), message));
}

void TableReader::fail_here(std::string_view message) const { throw Error(located(file_, table_.source(), message)); }

void TableReader::wrong_type(std::string_view key, const toml::node& node, std::string_view expected) const {
    const std::string_view got = toml_type_name(node.type());
    const bool vowel = got.front() == 'a' || got.front() == 'i';
    fail(node, fmt::format("{} must be {}, not {} {}", qualified(key), expected, vowel ? "an" : "a", got));
}

std::optional<std::string> TableReader::string(std::string_view key) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    if (!n->is_string()) wrong_type(key, *n, "a string");
    return n->as_string()->get();
}

std::optional<std::string> TableReader::choice(std::string_view key, std::initializer_list<std::string_view> allowed) {
    auto value = string(key);
    if (!value) return std::nullopt;
    if (std::find(allowed.begin(), allowed.end(), *value) != allowed.end()) return value;
    std::string list;
    for (auto a : allowed) list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", a);
    fail(*table_.get(key), fmt::format("{} = \"{}\" is not one of {}", qualified(key), *value, list));
}

std::optional<std::int64_t> TableReader::integer(std::string_view key, std::int64_t min, std::int64_t max) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    if (!n->is_integer()) wrong_type(key, *n, "an integer");
    const std::int64_t v = n->as_integer()->get();
    if (v < min || v > max) fail(*n, fmt::format("{} = {} is outside [{}, {}]", qualified(key), v, min, max));
    return v;
}

std::optional<double> TableReader::number(std::string_view key, double min, double max) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    double v;
    if (n->is_floating_point()) v = n->as_floating_point()->get();
    else if (n->is_integer()) v = static_cast<double>(n->as_integer()->get());
    else wrong_type(key, *n, "a number");
    if (!std::isfinite(v) || v < min || v > max)
        fail(*n, fmt::format("{} = {} is outside [{}, {}]", qualified(key), v, min, max));
    return v;
}

std::optional<bool> TableReader::boolean(std::string_view key) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    if (!n->is_boolean()) wrong_type(key, *n, "true or false");
    return n->as_boolean()->get();
}

std::optional<std::vector<std::string>> TableReader::choice_list(std::string_view key,
                                                                 std::initializer_list<std::string_view> allowed) {
    return choice_list(key, std::span<const std::string_view>(allowed.begin(), allowed.size()));
}

std::optional<std::vector<std::string>> TableReader::choice_list(std::string_view key,
                                                                 std::span<const std::string_view> allowed) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    std::string list;
    for (auto a : allowed) list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", a);
    if (!n->is_array()) wrong_type(key, *n, fmt::format("an array of strings ({})", list));
    std::vector<std::string> out;
    for (const toml::node& item : *n->as_array()) {
        if (!item.is_string()) fail(item, fmt::format("{} must hold only strings ({})", qualified(key), list));
        const std::string value = item.as_string()->get();
        if (std::find(allowed.begin(), allowed.end(), value) == allowed.end())
            fail(item, fmt::format("{}: \"{}\" is not one of {}", qualified(key), value, list));
        if (std::find(out.begin(), out.end(), value) != out.end())
            fail(item, fmt::format("{}: \"{}\" is given twice", qualified(key), value));
        out.push_back(value);
    }
    return out;
}

std::optional<TableReader::WordOrIndices> TableReader::word_or_indices(std::string_view key,
                                                                       std::initializer_list<std::string_view> words,
                                                                       std::int64_t max) {
    const toml::node* n = node(key);
    if (!n) return std::nullopt;
    std::string list;
    for (auto w : words) list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", w);
    WordOrIndices out;
    if (n->is_string()) {
        out.word = n->as_string()->get();
        if (std::find(words.begin(), words.end(), out.word) == words.end())
            fail(*n, fmt::format("{} = \"{}\" is not one of {} or an array of integers", qualified(key), out.word, list));
        return out;
    }
    if (!n->is_array()) wrong_type(key, *n, fmt::format("{} or an array of integers", list));
    for (const toml::node& item : *n->as_array()) {
        if (!item.is_integer()) fail(item, fmt::format("{} must hold only integers", qualified(key)));
        const std::int64_t v = item.as_integer()->get();
        if (v < 0 || v > max) fail(item, fmt::format("{}: {} is outside [0, {}]", qualified(key), v, max));
        if (std::find(out.indices.begin(), out.indices.end(), v) != out.indices.end())
            fail(item, fmt::format("{}: {} is given twice", qualified(key), v));
        out.indices.push_back(v);
    }
    if (out.indices.empty()) fail(*n, fmt::format("{} is an empty array", qualified(key)));
    return out;
}

std::optional<std::filesystem::path> TableReader::path(std::string_view key, const std::filesystem::path& base) {
    auto text = string(key);
    if (!text) return std::nullopt;
    if (text->empty()) fail(*table_.get(key), fmt::format("{} is an empty path", qualified(key)));
    std::filesystem::path p(*text);
    if (p.is_relative()) p = base / p;
    p = p.lexically_normal();
    if (p.has_relative_path() && !p.has_filename()) p = p.parent_path();  // "out/" means "out"
    return p;
}

const toml::table* TableReader::table(std::string_view key) {
    const toml::node* n = node(key);
    if (!n) return nullptr;
    if (!n->is_table()) wrong_type(key, *n, "a table");
    return n->as_table();
}

void TableReader::finish() const {
    for (const auto& [key, value] : table_) {
        if (std::find(known_.begin(), known_.end(), key.str()) != known_.end()) continue;
        std::string list;
        for (const auto& k : known_) list += fmt::format("{}{}", list.empty() ? "" : ", ", k);
        throw Error(located(file_, key.source(),
                            fmt::format("unknown key '{}'{} (known keys: {})", key.str(),
                                        prefix_.empty() ? "" : fmt::format(" in [{}]", prefix_), list)));
    }
}

namespace {

std::string rfc3339_date(const toml::date& d) { return fmt::format("{:04}-{:02}-{:02}", d.year, d.month, d.day); }

std::string rfc3339_time(const toml::time& t) {
    std::string out = fmt::format("{:02}:{:02}:{:02}", t.hour, t.minute, t.second);
    if (t.nanosecond != 0) {
        std::string frac = fmt::format("{:09}", t.nanosecond);
        while (frac.back() == '0') frac.pop_back();
        out += "." + frac;
    }
    return out;
}

std::string rfc3339_offset(const toml::time_offset& o) {
    if (o.minutes == 0) return "Z";
    const int m = o.minutes < 0 ? -o.minutes : o.minutes;
    return fmt::format("{}{:02}:{:02}", o.minutes < 0 ? '-' : '+', m / 60, m % 60);
}

}  // namespace

boost::json::value toml_to_json(const toml::node& node, const std::string& file) {
    switch (node.type()) {
        case toml::node_type::string: return boost::json::value(node.as_string()->get());
        case toml::node_type::integer: return boost::json::value(node.as_integer()->get());
        case toml::node_type::floating_point: {
            const double v = node.as_floating_point()->get();
            if (!std::isfinite(v))
                throw Error(located(file, node.source(), fmt::format("{} cannot be passed to an experiment (JSON has "
                                                                     "no NaN or infinity)",
                                                                     v)));
            return boost::json::value(v);
        }
        case toml::node_type::boolean: return boost::json::value(node.as_boolean()->get());
        case toml::node_type::date: return boost::json::value(rfc3339_date(node.as_date()->get()));
        case toml::node_type::time: return boost::json::value(rfc3339_time(node.as_time()->get()));
        case toml::node_type::date_time: {
            const toml::date_time& dt = node.as_date_time()->get();
            std::string text = rfc3339_date(dt.date) + "T" + rfc3339_time(dt.time);
            if (dt.offset) text += rfc3339_offset(*dt.offset);
            return boost::json::value(text);
        }
        case toml::node_type::array: {
            boost::json::array out;
            for (const toml::node& item : *node.as_array()) out.push_back(toml_to_json(item, file));
            return out;
        }
        case toml::node_type::table: {
            boost::json::object out;
            for (const auto& [key, value] : *node.as_table()) out[key.str()] = toml_to_json(value, file);
            return out;
        }
        case toml::node_type::none: break;
    }
    return nullptr;
}

namespace {

void write_canonical(std::string& out, const boost::json::value& value) {
    if (value.is_object()) {
        const auto& object = value.get_object();
        std::vector<const boost::json::key_value_pair*> members;
        for (const auto& kv : object) members.push_back(&kv);
        std::sort(members.begin(), members.end(), [](auto* a, auto* b) { return a->key() < b->key(); });
        out += '{';
        for (std::size_t i = 0; i < members.size(); ++i) {
            if (i) out += ',';
            out += boost::json::serialize(boost::json::value(members[i]->key()));
            out += ':';
            write_canonical(out, members[i]->value());
        }
        out += '}';
    } else if (value.is_array()) {
        const auto& array = value.get_array();
        out += '[';
        for (std::size_t i = 0; i < array.size(); ++i) {
            if (i) out += ',';
            write_canonical(out, array[i]);
        }
        out += ']';
    } else if (value.is_double() && value.get_double() == 0.0) {
        out += boost::json::serialize(boost::json::value(0.0));  // -0.0 means 0.0 everywhere a config is read
    } else {
        out += boost::json::serialize(value);
    }
}

}  // namespace

std::string canonical_json(const boost::json::value& value) {
    std::string out;
    write_canonical(out, value);
    return out;
}

}  // namespace ember::config
