#include "experiments/log_line.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace ember::experiments {
namespace {

// The length of the valid UTF-8 sequence at `s` (1-4), or 0 when it is not one
// (overlong forms, surrogates and code points above U+10FFFF are invalid).
std::size_t utf8_length(std::string_view s, char32_t& code_point) {
    const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    const unsigned char lead = b(0);
    if (lead < 0x80) {
        code_point = lead;
        return 1;
    }
    std::size_t n = 0;
    char32_t min = 0;
    if ((lead & 0xE0) == 0xC0) n = 2, code_point = lead & 0x1F, min = 0x80;
    else if ((lead & 0xF0) == 0xE0) n = 3, code_point = lead & 0x0F, min = 0x800;
    else if ((lead & 0xF8) == 0xF0) n = 4, code_point = lead & 0x07, min = 0x10000;
    else return 0;
    if (s.size() < n) return 0;
    for (std::size_t i = 1; i < n; ++i) {
        if ((b(i) & 0xC0) != 0x80) return 0;
        code_point = (code_point << 6) | (b(i) & 0x3F);
    }
    if (code_point < min || code_point > 0x10FFFF || (code_point >= 0xD800 && code_point <= 0xDFFF)) return 0;
    return n;
}

}  // namespace

std::string sanitize_plugin_text(std::string_view text) {
    std::string out;
    out.reserve(std::min(text.size(), kMaxPluginLineBytes) + 16);
    std::size_t at = 0;
    while (at < text.size()) {
        char32_t cp = 0;
        const std::size_t n = utf8_length(text.substr(at), cp);
        std::string piece;
        if (n == 0) piece = "\xEF\xBF\xBD";  // U+FFFD
        else if (cp < 0x20 || cp == 0x7F) piece = fmt::format("\\x{:02x}", static_cast<unsigned>(cp));
        else if (cp >= 0x80 && cp <= 0x9F) piece = fmt::format("\\u{:04x}", static_cast<unsigned>(cp));
        else piece.assign(text.substr(at, n));
        if (out.size() + piece.size() > kMaxPluginLineBytes) {
            out += fmt::format(" [... {} more bytes]", text.size() - at);
            return out;
        }
        out += piece;
        at += n == 0 ? 1 : n;
    }
    return out;
}

}  // namespace ember::experiments
