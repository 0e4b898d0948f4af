#include "record/strict_json.hpp"

#include <ember/utf8.hpp>

#include <boost/json/serialize.hpp>

#include <cmath>

namespace ember {
namespace {

namespace json = boost::json;

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

bool is_valid_utf8(std::string_view bytes) { return utf8::is_valid(bytes); }

std::string replace_invalid_utf8(std::string_view bytes) { return utf8::replace_invalid(bytes); }

std::string hex_bytes(std::string_view bytes) { return utf8::hex(bytes); }

json::value strict_value(const json::value& value) { return strict_copy(value, nullptr, ""); }

std::string strict_json(const json::value& value) { return json::serialize(strict_value(value)); }

}  // namespace ember
