// An experiment's configuration: the [experiment.config] table of the run config, which
// the host hands over as JSON text. Plugins cannot link a JSON library from ember, so a
// small strict JSON reader (RFC 8259) lives here, header-only.
//
//   ExperimentConfig config(json_text);
//   auto layers = config.get_int_list("layers", {});      // [1, 2] -> {1, 2}
//   auto stage = config.get_string("stage", "after_mlp");
//   double scale = config.get_double("scale", 1.0);       // integers are accepted
//
// A getter whose key is present with another type throws ConfigError naming the key;
// the helper reports that as a failure of `create`.
#pragma once

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember {

class ConfigError : public std::runtime_error {
public:
    explicit ConfigError(const std::string& message) : std::runtime_error(message) {}
};

// A parsed JSON value. Objects keep their keys in document order.
class JsonValue {
public:
    enum class Kind { Null, Bool, Integer, Number, String, Array, Object };

    Kind kind() const { return kind_; }
    bool is_null() const { return kind_ == Kind::Null; }
    bool is_bool() const { return kind_ == Kind::Bool; }
    bool is_integer() const { return kind_ == Kind::Integer; }
    bool is_number() const { return kind_ == Kind::Integer || kind_ == Kind::Number; }
    bool is_string() const { return kind_ == Kind::String; }
    bool is_array() const { return kind_ == Kind::Array; }
    bool is_object() const { return kind_ == Kind::Object; }

    bool as_bool() const { return bool_; }
    std::int64_t as_integer() const { return integer_; }
    double as_number() const { return kind_ == Kind::Integer ? static_cast<double>(integer_) : number_; }
    const std::string& as_string() const { return string_; }
    const std::vector<JsonValue>& items() const { return items_; }        // array elements or object values
    const std::vector<std::string>& keys() const { return keys_; }        // object keys, parallel to items()

    // The member named `key` of an object, or nullptr.
    const JsonValue* find(std::string_view key) const {
        for (std::size_t i = 0; i < keys_.size(); ++i)
            if (keys_[i] == key) return &items_[i];
        return nullptr;
    }

    static JsonValue parse(std::string_view text);

private:
    friend class JsonReader;
    Kind kind_ = Kind::Null;
    bool bool_ = false;
    std::int64_t integer_ = 0;
    double number_ = 0;
    std::string string_;
    std::vector<JsonValue> items_;
    std::vector<std::string> keys_;
};

class JsonReader {
public:
    explicit JsonReader(std::string_view text) : text_(text) {}

    JsonValue document() {
        JsonValue v = value(0);
        skip_space();
        if (pos_ != text_.size()) fail("unexpected text after the value");
        return v;
    }

private:
    static constexpr int kMaxDepth = 128;

    [[noreturn]] void fail(const std::string& what) const {
        throw ConfigError("config JSON: " + what + " at byte " + std::to_string(pos_));
    }
    void skip_space() {
        while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
                                       text_[pos_] == '\r'))
            ++pos_;
    }
    bool consume(std::string_view word) {
        if (text_.substr(pos_, word.size()) != word) return false;
        pos_ += word.size();
        return true;
    }

    JsonValue value(int depth) {
        if (depth > kMaxDepth) fail("nesting too deep");
        skip_space();
        if (pos_ >= text_.size()) fail("unexpected end of text");
        JsonValue v;
        const char c = text_[pos_];
        if (c == '{') {
            v.kind_ = JsonValue::Kind::Object;
            ++pos_;
            skip_space();
            if (pos_ < text_.size() && text_[pos_] == '}') { ++pos_; return v; }
            for (;;) {
                skip_space();
                if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a string key");
                v.keys_.push_back(string());
                skip_space();
                if (pos_ >= text_.size() || text_[pos_] != ':') fail("expected ':'");
                ++pos_;
                v.items_.push_back(value(depth + 1));
                skip_space();
                if (pos_ < text_.size() && text_[pos_] == ',') { ++pos_; continue; }
                if (pos_ < text_.size() && text_[pos_] == '}') { ++pos_; return v; }
                fail("expected ',' or '}'");
            }
        }
        if (c == '[') {
            v.kind_ = JsonValue::Kind::Array;
            ++pos_;
            skip_space();
            if (pos_ < text_.size() && text_[pos_] == ']') { ++pos_; return v; }
            for (;;) {
                v.items_.push_back(value(depth + 1));
                skip_space();
                if (pos_ < text_.size() && text_[pos_] == ',') { ++pos_; continue; }
                if (pos_ < text_.size() && text_[pos_] == ']') { ++pos_; return v; }
                fail("expected ',' or ']'");
            }
        }
        if (c == '"') {
            v.kind_ = JsonValue::Kind::String;
            v.string_ = string();
            return v;
        }
        if (consume("true")) { v.kind_ = JsonValue::Kind::Bool; v.bool_ = true; return v; }
        if (consume("false")) { v.kind_ = JsonValue::Kind::Bool; return v; }
        if (consume("null")) return v;
        return number();
    }

    JsonValue number() {
        const std::size_t start = pos_;
        bool integral = true;
        if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
        const std::size_t digits = pos_;
        while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
        if (pos_ == digits) fail("expected a value");
        if (text_[digits] == '0' && pos_ - digits > 1) fail("a number may not start with 0");
        if (pos_ < text_.size() && text_[pos_] == '.') {
            integral = false;
            const std::size_t frac = ++pos_;
            while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
            if (pos_ == frac) fail("expected digits after '.'");
        }
        if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
            integral = false;
            ++pos_;
            if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
            const std::size_t exp = pos_;
            while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
            if (pos_ == exp) fail("expected digits in the exponent");
        }
        const char* first = text_.data() + start;
        const char* last = text_.data() + pos_;
        JsonValue v;
        if (integral) {
            v.kind_ = JsonValue::Kind::Integer;
            if (std::from_chars(first, last, v.integer_).ec == std::errc()) return v;
        }
        v.kind_ = JsonValue::Kind::Number;
        const auto result = std::from_chars(first, last, v.number_);
        if (result.ec != std::errc()) fail("number out of range");
        return v;
    }

    unsigned hex4() {
        if (pos_ + 4 > text_.size()) fail("short \\u escape");
        unsigned code = 0;
        for (int i = 0; i < 4; ++i) {
            const char h = text_[pos_++];
            code <<= 4;
            if (h >= '0' && h <= '9') code |= static_cast<unsigned>(h - '0');
            else if (h >= 'a' && h <= 'f') code |= static_cast<unsigned>(h - 'a' + 10);
            else if (h >= 'A' && h <= 'F') code |= static_cast<unsigned>(h - 'A' + 10);
            else fail("bad hex digit in \\u escape");
        }
        return code;
    }

    static void append_utf8(std::string& out, unsigned code) {
        if (code < 0x80) {
            out += static_cast<char>(code);
        } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
        } else if (code < 0x10000) {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
        } else {
            out += static_cast<char>(0xF0 | (code >> 18));
            out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
        }
    }

    std::string string() {
        ++pos_;  // the opening quote
        std::string out;
        for (;;) {
            if (pos_ >= text_.size()) fail("unterminated string");
            const char c = text_[pos_++];
            if (c == '"') return out;
            if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
            if (c != '\\') { out += c; continue; }
            if (pos_ >= text_.size()) fail("unterminated escape");
            const char e = text_[pos_++];
            switch (e) {
                case '"': out += '"'; break;
                case '\\': out += '\\'; break;
                case '/': out += '/'; break;
                case 'b': out += '\b'; break;
                case 'f': out += '\f'; break;
                case 'n': out += '\n'; break;
                case 'r': out += '\r'; break;
                case 't': out += '\t'; break;
                case 'u': {
                    unsigned code = hex4();
                    if (code >= 0xD800 && code < 0xDC00) {
                        if (!consume("\\u")) fail("lone high surrogate");
                        const unsigned low = hex4();
                        if (low < 0xDC00 || low >= 0xE000) fail("bad low surrogate");
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                    } else if (code >= 0xDC00 && code < 0xE000) {
                        fail("lone low surrogate");
                    }
                    append_utf8(out, code);
                    break;
                }
                default: fail("unknown escape");
            }
        }
    }

    std::string_view text_;
    std::size_t pos_ = 0;
};

inline JsonValue JsonValue::parse(std::string_view text) { return JsonReader(text).document(); }

// The [experiment.config] table with typed getters. Absent keys give the fallback.
class ExperimentConfig {
public:
    explicit ExperimentConfig(std::string json_text = "{}")
        : raw_(std::move(json_text)), root_(JsonValue::parse(raw_)) {
        if (!root_.is_object()) throw ConfigError("config JSON: expected an object");
    }

    const std::string& raw_json() const { return raw_; }
    const JsonValue& json() const { return root_; }
    bool has(std::string_view key) const { return root_.find(key) != nullptr; }
    bool empty() const { return root_.keys().empty(); }
    const std::vector<std::string>& keys() const { return root_.keys(); }

    bool get_bool(std::string_view key, bool fallback) const {
        const JsonValue* v = root_.find(key);
        if (!v) return fallback;
        if (!v->is_bool()) wrong_type(key, "true or false");
        return v->as_bool();
    }
    std::int64_t get_int(std::string_view key, std::int64_t fallback) const {
        const JsonValue* v = root_.find(key);
        if (!v) return fallback;
        if (!v->is_integer()) wrong_type(key, "an integer");
        return v->as_integer();
    }
    double get_double(std::string_view key, double fallback) const {
        const JsonValue* v = root_.find(key);
        if (!v) return fallback;
        if (!v->is_number()) wrong_type(key, "a number");
        return v->as_number();
    }
    std::string get_string(std::string_view key, std::string_view fallback) const {
        const JsonValue* v = root_.find(key);
        if (!v) return std::string(fallback);
        if (!v->is_string()) wrong_type(key, "a string");
        return v->as_string();
    }
    std::vector<std::int64_t> get_int_list(std::string_view key, std::vector<std::int64_t> fallback) const {
        const JsonValue* v = root_.find(key);
        if (!v) return fallback;
        if (!v->is_array()) wrong_type(key, "a list of integers");
        std::vector<std::int64_t> out;
        for (const auto& item : v->items()) {
            if (!item.is_integer()) wrong_type(key, "a list of integers");
            out.push_back(item.as_integer());
        }
        return out;
    }
    std::vector<double> get_double_list(std::string_view key, std::vector<double> fallback) const {
        const JsonValue* v = root_.find(key);
        if (!v) return fallback;
        if (!v->is_array()) wrong_type(key, "a list of numbers");
        std::vector<double> out;
        for (const auto& item : v->items()) {
            if (!item.is_number()) wrong_type(key, "a list of numbers");
            out.push_back(item.as_number());
        }
        return out;
    }
    std::vector<std::string> get_string_list(std::string_view key, std::vector<std::string> fallback) const {
        const JsonValue* v = root_.find(key);
        if (!v) return fallback;
        if (!v->is_array()) wrong_type(key, "a list of strings");
        std::vector<std::string> out;
        for (const auto& item : v->items()) {
            if (!item.is_string()) wrong_type(key, "a list of strings");
            out.push_back(item.as_string());
        }
        return out;
    }

    // Throws ConfigError naming the first key not in `known` (catches typos).
    void expect_only(std::initializer_list<std::string_view> known) const {
        for (const auto& key : root_.keys()) {
            bool found = false;
            for (auto k : known) found = found || k == key;
            if (!found) {
                std::string list;
                for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
                throw ConfigError("unknown config key '" + key + "' (known: " + list + ")");
            }
        }
    }

private:
    [[noreturn]] static void wrong_type(std::string_view key, const char* expected) {
        throw ConfigError("config key '" + std::string(key) + "' must be " + expected);
    }

    std::string raw_;
    JsonValue root_;
};

}  // namespace ember
