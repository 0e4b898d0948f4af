#include "record/strict_parse.hpp"

#include <fmt/format.h>

#include <boost/json/basic_parser_impl.hpp>

#include <optional>
#include <vector>

#include "common/error.hpp"

namespace ember {
namespace {

namespace json = boost::json;

// Builds the value as Boost's own parser would, one event at a time, so that an object's
// keys can be checked as they arrive and a number's text is at hand.
class Builder {
public:
    static constexpr std::size_t max_array_size = static_cast<std::size_t>(-1);
    static constexpr std::size_t max_object_size = static_cast<std::size_t>(-1);
    static constexpr std::size_t max_string_size = static_cast<std::size_t>(-1);
    static constexpr std::size_t max_key_size = static_cast<std::size_t>(-1);

    bool on_document_begin(json::error_code&) { return true; }
    bool on_document_end(json::error_code&) { return true; }
    bool on_array_begin(json::error_code&) {
        open_.push_back({json::array(), std::nullopt, {}});
        return true;
    }
    bool on_array_end(std::size_t, json::error_code& ec) { return close(ec); }
    bool on_object_begin(json::error_code&) {
        open_.push_back({json::object(), std::nullopt, {}});
        return true;
    }
    bool on_object_end(std::size_t, json::error_code& ec) { return close(ec); }
    bool on_string_part(json::string_view s, std::size_t, json::error_code&) {
        text_.append(s.data(), s.size());
        return true;
    }
    bool on_string(json::string_view s, std::size_t, json::error_code& ec) {
        text_.append(s.data(), s.size());
        json::value v(json::string(text_.data(), text_.size()));
        text_.clear();
        return add(std::move(v), ec);
    }
    bool on_key_part(json::string_view s, std::size_t, json::error_code&) {
        text_.append(s.data(), s.size());
        return true;
    }
    bool on_key(json::string_view s, std::size_t, json::error_code& ec) {
        text_.append(s.data(), s.size());
        Open& top = open_.back();
        if (top.value.as_object().contains(text_)) {
            duplicate_ = text_;
            ec = json::error::syntax;
            return false;
        }
        top.key = std::move(text_);
        text_.clear();
        return true;
    }
    bool on_number_part(json::string_view s, json::error_code&) {
        text_.append(s.data(), s.size());
        return true;
    }
    bool on_int64(std::int64_t i, json::string_view, json::error_code& ec) { return number(json::value(i), ec); }
    bool on_uint64(std::uint64_t u, json::string_view, json::error_code& ec) { return number(json::value(u), ec); }
    bool on_double(double d, json::string_view s, json::error_code& ec) {
        text_.append(s.data(), s.size());
        // An integer literal Boost could only hold as a double: its digits, exactly.
        if (text_.find_first_of(".eE") == std::string::npos) return big_integer(json::value(json::string(text_)), ec);
        return number(json::value(d), ec);
    }
    bool on_bool(bool b, json::error_code& ec) { return add(json::value(b), ec); }
    bool on_null(json::error_code& ec) { return add(json::value(nullptr), ec); }
    bool on_comment_part(json::string_view, json::error_code&) { return true; }
    bool on_comment(json::string_view, json::error_code&) { return true; }

    json::value& result() { return result_; }
    const std::optional<std::string>& duplicate() const { return duplicate_; }

private:
    struct Open {
        json::value value;               // the array or object being filled
        std::optional<std::string> key;  // an object's key waiting for its value
        json::object big_integers;       // an object's "<key>_bigint" markers / an array's indices
    };

    // An integer beyond 64 bits: its digits as a string, marked as the writer marks a
    // non-finite number, so a reader tells it from a string of digits: "<key>_bigint" is
    // true, or for array elements maps the element's index ("3", "3.1" nested) to true.
    bool big_integer(json::value digits, json::error_code& ec) {
        text_.clear();
        if (!open_.empty()) {
            Open& top = open_.back();
            if (top.value.is_array()) top.big_integers[std::to_string(top.value.as_array().size())] = true;
            else top.big_integers[*top.key + "_bigint"] = true;
        }
        return add(std::move(digits), ec);
    }
    bool number(json::value v, json::error_code& ec) {
        text_.clear();
        return add(std::move(v), ec);
    }
    bool add(json::value v, json::error_code&) {
        if (open_.empty()) {
            result_ = std::move(v);
        } else if (Open& top = open_.back(); top.value.is_array()) {
            top.value.as_array().push_back(std::move(v));
        } else {
            top.value.as_object().emplace(*top.key, std::move(v));
            top.key.reset();
        }
        return true;
    }
    bool close(json::error_code& ec) {
        Open done = std::move(open_.back());
        open_.pop_back();
        if (done.value.is_object()) {
            // A marker never replaces a member the text has.
            for (auto& [name, marker] : done.big_integers)
                if (!done.value.as_object().contains(name)) done.value.as_object().emplace(name, std::move(marker));
        } else if (!done.big_integers.empty() && !open_.empty()) {
            Open& parent = open_.back();
            if (parent.value.is_array()) {  // nested: the indices gain this array's own
                const std::string at = std::to_string(parent.value.as_array().size());
                for (auto& [index, marker] : done.big_integers) parent.big_integers[at + "." + std::string(index)] = marker;
            } else {
                parent.big_integers[*parent.key + "_bigint"] = std::move(done.big_integers);
            }
        }
        return add(std::move(done.value), ec);
    }

    std::vector<Open> open_;
    std::string text_;
    json::value result_;
    std::optional<std::string> duplicate_;
};

}  // namespace

json::value parse_strict_json(std::string_view text, std::string_view where) {
    json::basic_parser<Builder> parser{json::parse_options{}};
    json::error_code ec;
    const std::size_t used = parser.write_some(false, text.data(), text.size(), ec);
    if (const auto& key = parser.handler().duplicate())
        throw Error(fmt::format("{}: the key \"{}\" appears twice in one object", where, *key));
    if (ec) throw Error(fmt::format("{}: not valid JSON ({} at byte {})", where, ec.message(), used));
    return std::move(parser.handler().result());
}

}  // namespace ember
