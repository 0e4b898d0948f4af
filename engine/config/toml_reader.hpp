// Reading one TOML table with exact errors. Each section parser of a config file wraps
// its table in a TableReader, asks for every key it knows with the type it expects, and
// calls finish(): any key nobody asked for is reported as unknown. Every error is an
// ember::Error that starts with `file:line:column:` of the offending key or value.
//
//   TableReader t(table, "model", file);
//   if (auto v = t.integer("threads", 0, 1024)) model.threads = *v;
//   t.finish();
//
// Adding a key to a section is one getter call; nothing else needs to know.
#pragma once

#include <toml++/toml.h>

#include <boost/json/value.hpp>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace ember::config {

// `file:line:column: message` for a place in a TOML document.
std::string located(const std::string& file, const toml::source_region& where, std::string_view message);

// "string", "integer", "float", "boolean", "table", "array", "date", "time", "date-time".
std::string_view toml_type_name(toml::node_type type);

class TableReader {
public:
    // `prefix` is the table's dotted name ("model", "experiment"; "" for the top level):
    // messages name keys as `model.threads`.
    TableReader(const toml::table& table, std::string prefix, std::string file);

    std::optional<std::string> string(std::string_view key);
    // One of `allowed` (a string); anything else is an error listing them.
    std::optional<std::string> choice(std::string_view key, std::initializer_list<std::string_view> allowed);
    std::optional<std::int64_t> integer(std::string_view key, std::int64_t min, std::int64_t max);
    // A float; an integer is accepted and converted. Non-finite values are refused.
    std::optional<double> number(std::string_view key, double min, double max);
    std::optional<bool> boolean(std::string_view key);
    // An array of strings, each one of `allowed`, none twice.
    std::optional<std::vector<std::string>> choice_list(std::string_view key,
                                                        std::initializer_list<std::string_view> allowed);
    std::optional<std::vector<std::string>> choice_list(std::string_view key, std::span<const std::string_view> allowed);
    // Either one of `words` (a string) or an array of distinct integers in [0, max].
    struct WordOrIndices {
        std::string word;                   // empty when the value is an array
        std::vector<std::int64_t> indices;  // in the order written
    };
    std::optional<WordOrIndices> word_or_indices(std::string_view key, std::initializer_list<std::string_view> words,
                                                 std::int64_t max);
    // A path string, resolved against `base` when relative, lexically normalized.
    std::optional<std::filesystem::path> path(std::string_view key, const std::filesystem::path& base);
    const toml::table* table(std::string_view key);
    // Any node (the caller checks its type); marks the key as known.
    const toml::node* node(std::string_view key);

    // Reports the first key that no getter asked for.
    void finish() const;

    [[noreturn]] void fail(const toml::node& at, std::string_view message) const;
    [[noreturn]] void fail_here(std::string_view message) const;  // at the table itself

    const std::string& file() const { return file_; }
    std::string qualified(std::string_view key) const;  // "model.threads"

private:
    [[noreturn]] void wrong_type(std::string_view key, const toml::node& node, std::string_view expected) const;

    const toml::table& table_;
    std::string prefix_;
    std::string file_;
    std::vector<std::string> known_;
};

// Converts a TOML table to JSON: integers stay integers, floats become numbers (NaN and
// infinities are refused), dates and times become RFC 3339 strings.
boost::json::value toml_to_json(const toml::node& node, const std::string& file);

// Serializes JSON canonically: object keys sorted by byte value, no whitespace, numbers
// as Boost.JSON writes them (-0.0 as 0.0). Equal values give equal text.
std::string canonical_json(const boost::json::value& value);

}  // namespace ember::config
