// Writing JSON text by hand for the built-ins' manifests (they cannot link a JSON library).
// Strict like everything Ember writes: invalid UTF-8 is replaced by U+FFFD (json_member
// keeps the raw bytes in a "<key>_hex" sibling).
#pragma once

#include <ember/utf8.hpp>

#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

namespace ember_plugins {

// `text` as a JSON string literal, quotes included.
inline std::string json_string(std::string_view raw) {
    const std::string text = ember::utf8::replace_invalid(raw);
    std::string out = "\"";
    for (char c : text) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (static_cast<unsigned char>(c) < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
                    out += buf;
                } else {
                    out += c;
                }
        }
    }
    return out + "\"";
}

// `"key": "text"`, and `, "key_hex": "..."` with the raw bytes when `text` is not valid UTF-8.
inline std::string json_member(std::string_view key, std::string_view text) {
    std::string out = json_string(key) + ": " + json_string(text);
    if (!ember::utf8::is_valid(text)) out += ", " + json_string(std::string(key) + "_hex") + ": " + json_string(ember::utf8::hex(text));
    return out;
}

// A byte span [start, end) as the JSON array [start, end].
inline std::string json_span(std::size_t start, std::size_t end) {
    return "[" + std::to_string(start) + ", " + std::to_string(end) + "]";
}

// A list of booleans as a JSON array.
template <class Range>
std::string json_bool_array(const Range& values) {
    std::string out = "[";
    bool first = true;
    for (bool v : values) {
        out += first ? "" : ", ";
        out += v ? "true" : "false";
        first = false;
    }
    return out + "]";
}

// A list of integers as a JSON array.
template <class Range>
std::string json_int_array(const Range& values) {
    std::string out = "[";
    bool first = true;
    for (auto v : values) {
        if (!first) out += ", ";
        out += std::to_string(v);
        first = false;
    }
    return out + "]";
}

}  // namespace ember_plugins
