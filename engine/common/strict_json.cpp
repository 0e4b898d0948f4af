#include "common/strict_json.hpp"

#include <boost/json/serialize.hpp>

#include <cmath>

namespace ember {
namespace {

namespace json = boost::json;

// The length of the valid UTF-8 sequence at text[pos], or 0 (overlong forms, surrogates
// and code points above U+10FFFF are invalid).
std::size_t valid_sequence_length(std::string_view text, std::size_t pos) {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[pos + i]); };
    const unsigned char lead = byte(0);
    if (lead < 0x80) return 1;
    std::size_t length = 0;
    char32_t cp = 0;
    if (lead >= 0xC2 && lead <= 0xDF) length = 2, cp = lead & 0x1F;
    else if (lead >= 0xE0 && lead <= 0xEF) length = 3, cp = lead & 0x0F;
    else if (lead >= 0xF0 && lead <= 0xF4) length = 4, cp = lead & 0x07;
    else return 0;
    if (pos + length > text.size()) return 0;
    for (std::size_t i = 1; i < length; ++i) {
        if ((byte(i) & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (byte(i) & 0x3F);
    }
    const bool overlong = (length == 3 && cp < 0x800) || (length == 4 && cp < 0x10000);
    const bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
    if (overlong || surrogate || cp > 0x10FFFF) return 0;
    return length;
}

const char* nonfinite_name(double d) { return std::isnan(d) ? "nan" : d > 0 ? "inf" : "-inf"; }

bool nonfinite(const json::value& v) { return v.is_double() && !std::isfinite(v.get_double()); }
bool bad_string(const json::value& v) { return v.is_string() && !is_valid_utf8(v.get_string()); }

// What the sibling members of an array gather: index path -> hex / non-finite name.
struct Siblings {
    json::object hex;
    json::object nonfinite;
};

json::value strict_copy(const json::value& v, Siblings* siblings, const std::string& index);

json::array strict_array(const json::array& a, Siblings& siblings, const std::string& prefix) {
    json::array out;
    out.reserve(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        const std::string index = prefix.empty() ? std::to_string(i) : prefix + "." + std::to_string(i);
        out.push_back(strict_copy(a[i], &siblings, index));
    }
    return out;
}

json::object strict_object(const json::object& o) {
    json::object out;
    for (const auto& [key, value] : o) {
        const std::string name = replace_invalid_utf8(key);
        if (value.is_array()) {
            Siblings siblings;
            out[name] = strict_array(value.get_array(), siblings, "");
            if (!siblings.hex.empty() && !o.contains(name + "_hex")) out[name + "_hex"] = std::move(siblings.hex);
            if (!siblings.nonfinite.empty()) out[name + "_nonfinite"] = std::move(siblings.nonfinite);
        } else {
            out[name] = strict_copy(value, nullptr, "");
            if (bad_string(value) && !o.contains(name + "_hex")) out[name + "_hex"] = hex_bytes(value.get_string());
            if (nonfinite(value)) out[name + "_nonfinite"] = nonfinite_name(value.get_double());
        }
    }
    return out;
}

// `siblings`: where an array element's raw bytes or non-finite name go (null: not in an array).
json::value strict_copy(const json::value& v, Siblings* siblings, const std::string& index) {
    if (v.is_object()) return strict_object(v.get_object());
    if (v.is_array()) {
        Siblings local;
        return strict_array(v.get_array(), siblings ? *siblings : local, index);
    }
    if (bad_string(v)) {
        if (siblings) siblings->hex[index] = hex_bytes(v.get_string());
        return json::value(replace_invalid_utf8(v.get_string()));
    }
    if (nonfinite(v)) {
        if (siblings) siblings->nonfinite[index] = nonfinite_name(v.get_double());
        return nullptr;
    }
    return v;
}

}  // namespace

bool is_valid_utf8(std::string_view bytes) {
    for (std::size_t pos = 0; pos < bytes.size();) {
        const std::size_t n = valid_sequence_length(bytes, pos);
        if (n == 0) return false;
        pos += n;
    }
    return true;
}

std::string replace_invalid_utf8(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    for (std::size_t pos = 0; pos < bytes.size();) {
        const std::size_t n = valid_sequence_length(bytes, pos);
        if (n == 0) {
            out += "\xEF\xBF\xBD";
            pos += 1;
        } else {
            out += bytes.substr(pos, n);
            pos += n;
        }
    }
    return out;
}

std::string hex_bytes(std::string_view bytes) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char c : bytes) {
        out += kHex[static_cast<unsigned char>(c) >> 4];
        out += kHex[static_cast<unsigned char>(c) & 15];
    }
    return out;
}

json::value strict_value(const json::value& value) { return strict_copy(value, nullptr, ""); }

std::string strict_json(const json::value& value) { return json::serialize(strict_value(value)); }

}  // namespace ember
