#include "record/json_pretty.hpp"

#include "record/strict_json.hpp"

#include <boost/json/serialize.hpp>

#include <algorithm>

namespace ember {
namespace {

void pretty(std::string& out, const boost::json::value& v, std::size_t indent) {
    const std::string pad(indent, ' ');
    if (v.is_object()) {
        const auto& obj = v.get_object();
        if (obj.empty()) {
            out += "{}";
            return;
        }
        out += "{\n";
        std::size_t i = 0;
        for (const auto& kv : obj) {
            out += pad + "  " + boost::json::serialize(kv.key()) + ": ";
            pretty(out, kv.value(), indent + 2);
            out += ++i < obj.size() ? ",\n" : "\n";
        }
        out += pad + "}";
    } else if (v.is_array()) {
        const auto& arr = v.get_array();
        const bool flat = std::all_of(arr.begin(), arr.end(), [](const auto& e) { return !e.is_object() && !e.is_array(); });
        if (arr.empty() || flat) {
            out += boost::json::serialize(v);
            return;
        }
        out += "[\n";
        for (std::size_t i = 0; i < arr.size(); ++i) {
            out += pad + "  ";
            pretty(out, arr[i], indent + 2);
            out += i + 1 < arr.size() ? ",\n" : "\n";
        }
        out += pad + "]";
    } else {
        out += boost::json::serialize(v);
    }
}

}  // namespace

std::string pretty_json(const boost::json::value& value) {
    std::string out;
    pretty(out, strict_value(value), 0);
    return out;
}

}  // namespace ember
