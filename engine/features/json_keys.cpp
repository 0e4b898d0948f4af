#include "features/json_keys.hpp"

#include <boost/json/parse.hpp>

#include <set>
#include <vector>

namespace ember::features {
namespace {

// The string starting at the quote `json[at]`, as raw text with its quotes; `at` moves past it.
std::string_view raw_string(std::string_view json, std::size_t& at) {
    const std::size_t begin = at++;
    while (at < json.size() && json[at] != '"') at += json[at] == '\\' ? 2 : 1;
    ++at;  // the closing quote (the text parsed, so it is there)
    return json.substr(begin, at - begin);
}

std::string decoded(std::string_view quoted) {
    if (quoted.find('\\') == std::string_view::npos) return std::string(quoted.substr(1, quoted.size() - 2));
    return std::string(boost::json::parse(quoted).as_string());
}

}  // namespace

std::optional<std::string> first_duplicate_key(std::string_view json) {
    // One entry per open container: the keys seen so far (arrays hold none).
    struct Open {
        bool object;
        std::set<std::string> keys;
    };
    std::vector<Open> open;
    std::size_t at = 0;
    while (at < json.size()) {
        const char c = json[at];
        if (c == '{' || c == '[') {
            open.push_back({c == '{', {}});
            ++at;
        } else if (c == '}' || c == ']') {
            if (!open.empty()) open.pop_back();
            ++at;
        } else if (c == '"') {
            const std::string_view quoted = raw_string(json, at);
            std::size_t next = at;
            while (next < json.size() && (json[next] == ' ' || json[next] == '\t' || json[next] == '\n' || json[next] == '\r'))
                ++next;
            const bool is_key = next < json.size() && json[next] == ':' && !open.empty() && open.back().object;
            if (is_key && !open.back().keys.insert(decoded(quoted)).second) return decoded(quoted);
        } else {
            ++at;
        }
    }
    return std::nullopt;
}

}  // namespace ember::features
