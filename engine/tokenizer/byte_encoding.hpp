// GPT-2's reversible byte <-> character map (model-math §8.5 step 3): byte-level BPE
// vocabularies spell every byte as one printable code point. Bytes 0x21-0x7E, 0xA1-0xAC
// and 0xAE-0xFF stand for themselves; the other 68 bytes become U+0100, U+0101, ... in
// increasing byte order (space -> U+0120 'Ġ', '\n' -> U+010A 'Ċ').
#pragma once

#include <array>
#include <cstdint>

namespace ember::tokenizer::byte_encoding {

constexpr bool stands_for_itself(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

constexpr std::array<char32_t, 256> make_byte_to_codepoint() {
    std::array<char32_t, 256> table{};
    char32_t next = 0x100;
    for (unsigned b = 0; b < 256; ++b) table[b] = stands_for_itself(b) ? char32_t(b) : next++;
    return table;
}
inline constexpr std::array<char32_t, 256> kByteToCodepoint = make_byte_to_codepoint();

constexpr char32_t codepoint_of(unsigned char byte) { return kByteToCodepoint[byte]; }

// The byte a code point spells, or -1 when it is not one of the 256.
constexpr int byte_of(char32_t cp) {
    if (cp < 0x100) return stands_for_itself(cp) ? static_cast<int>(cp) : -1;
    if (cp >= 0x100 + 68) return -1;
    unsigned index = static_cast<unsigned>(cp - 0x100);
    for (unsigned b = 0; b < 256; ++b) {
        if (!stands_for_itself(b) && index-- == 0) return static_cast<int>(b);
    }
    return -1;
}

}  // namespace ember::tokenizer::byte_encoding
