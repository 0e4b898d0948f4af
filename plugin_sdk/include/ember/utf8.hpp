// UTF-8 validity, header-only: shared by the host's strict JSON writer and by plugins
// that write JSON text themselves, so that every JSON file Ember writes is RFC 8259.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace ember::utf8 {

// The length of the valid UTF-8 sequence at text[pos], or 0 (overlong forms, surrogates
// and code points above U+10FFFF are invalid).
inline std::size_t valid_sequence_length(std::string_view text, std::size_t pos) {
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

inline bool is_valid(std::string_view bytes) {
    for (std::size_t pos = 0; pos < bytes.size();) {
        const std::size_t n = valid_sequence_length(bytes, pos);
        if (n == 0) return false;
        pos += n;
    }
    return true;
}

// `bytes` with every byte that does not start a valid sequence replaced by U+FFFD.
inline std::string replace_invalid(std::string_view bytes) {
    std::string out;
    out.reserve(bytes.size());
    for (std::size_t pos = 0; pos < bytes.size();) {
        const std::size_t n = valid_sequence_length(bytes, pos);
        out += n == 0 ? std::string_view("\xEF\xBF\xBD") : bytes.substr(pos, n);
        pos += n == 0 ? 1 : n;
    }
    return out;
}

// Lowercase hex of raw bytes.
inline std::string hex(std::string_view bytes) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(bytes.size() * 2);
    for (const char c : bytes) {
        out += kHex[static_cast<unsigned char>(c) >> 4];
        out += kHex[static_cast<unsigned char>(c) & 15];
    }
    return out;
}

}  // namespace ember::utf8
