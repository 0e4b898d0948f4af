#include "tokenizer/unicode.hpp"

namespace ember::tokenizer::unicode {
namespace {
#include "tokenizer/unicode_tables.inc"

bool is_continuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }
}  // namespace

std::uint8_t flags(char32_t cp) {
    if (cp > kMaxCodepoint) return 0;
    return kBlocks[kBlockIndex[cp / kBlockSize]][cp % kBlockSize];
}

const char* data_version() { return kUnicodeVersion; }

Decoded decode(std::string_view text, std::size_t pos) {
    const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[pos + i]); };
    const unsigned char lead = byte(0);
    if (lead < 0x80) return {lead, 1};
    std::size_t length = 0;
    char32_t cp = 0;
    if (lead < 0xC0) return {kReplacementCharacter, 1};  // a continuation byte cannot start a character
    if (lead < 0xE0) {
        length = 2;
        cp = lead & 0x1F;
    } else if (lead < 0xF0) {
        length = 3;
        cp = lead & 0x0F;
    } else if (lead < 0xF8) {
        length = 4;
        cp = lead & 0x07;
    } else {
        return {kReplacementCharacter, 1};
    }
    if (text.size() - pos < length) return {kReplacementCharacter, 1};
    for (std::size_t i = 1; i < length; ++i) {
        if (!is_continuation(byte(i))) return {kReplacementCharacter, 1};
        cp = (cp << 6) | (byte(i) & 0x3F);
    }
    if (cp > kMaxCodepoint) return {kReplacementCharacter, 1};
    return {cp, static_cast<std::uint32_t>(length)};
}

void append_utf8(std::string& out, char32_t cp) {
    if (cp < 0x80) {
        out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
        out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
}

bool is_valid_utf8(std::string_view text) {
    std::size_t pos = 0;
    while (pos < text.size()) {
        const auto lead = static_cast<unsigned char>(text[pos]);
        if (lead < 0x80) {
            ++pos;
            continue;
        }
        const Decoded d = decode(text, pos);
        if (d.length == 1) return false;  // multi-byte leads either decode to >1 byte or fail
        const bool overlong = (d.length == 2 && d.cp < 0x80) || (d.length == 3 && d.cp < 0x800) ||
                              (d.length == 4 && d.cp < 0x10000);
        const bool surrogate = d.cp >= 0xD800 && d.cp <= 0xDFFF;
        if (overlong || surrogate) return false;
        pos += d.length;
    }
    return true;
}

}  // namespace ember::tokenizer::unicode
