// Unicode facts the tokenizers need: general-category classes and White_Space per code
// point (tables generated at build time from Debian's unicode-data, see docs/tokenizer.md),
// and UTF-8 decoding with llama.cpp's rules for malformed input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ember::tokenizer::unicode {

// One byte of flags per code point. The first seven are the general-category classes
// (\p{L}, \p{N}, \p{M}, \p{P}, \p{S}, \p{Z}, \p{C} other than Cn); unassigned code points
// (Cn) and values above U+10FFFF have no category flag at all.
enum Flag : std::uint8_t {
    kLetter = 0x01,
    kNumber = 0x02,
    kMark = 0x04,
    kPunctuation = 0x08,
    kSymbol = 0x10,
    kSeparator = 0x20,
    kOther = 0x40,
    kWhitespace = 0x80,  // the White_Space property (PropList.txt)
};

std::uint8_t flags(char32_t cp);
inline bool is_letter(char32_t cp) { return flags(cp) & kLetter; }
inline bool is_number(char32_t cp) { return flags(cp) & kNumber; }
inline bool is_whitespace(char32_t cp) { return flags(cp) & kWhitespace; }

// The Unicode version of the tables ("15.0.0").
const char* data_version();

inline constexpr char32_t kReplacementCharacter = 0xFFFD;
inline constexpr char32_t kMaxCodepoint = 0x10FFFF;

// Length of the UTF-8 sequence a byte starts, judged from its high nibble alone:
// 1 for ASCII and for stray continuation bytes, 2 for 0xC0-0xDF, 3 for 0xE0-0xEF and
// 4 for 0xF0-0xFF. The SentencePiece tokenizer splits its input into characters this way.
inline std::size_t sequence_length(unsigned char lead) {
    static constexpr std::uint8_t kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return kByHighNibble[lead >> 4];
}

// One decoding step. The structure of the sequence is checked (lead byte, the right number
// of continuation bytes present), but not overlong forms or surrogates: C0 80 decodes to
// U+0000 and ED A0 80 to U+D800, as llama.cpp does. A malformed sequence, or one that
// decodes above U+10FFFF, yields U+FFFD for its first byte only (`length` 1), so decoding
// resumes at the next byte.
struct Decoded {
    char32_t cp;
    std::uint32_t length;  // input bytes consumed
};
Decoded decode(std::string_view text, std::size_t pos);

// Appends the UTF-8 encoding of cp (cp <= U+10FFFF; surrogates are encoded as they are).
void append_utf8(std::string& out, char32_t cp);
inline std::size_t utf8_length(char32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

// Strict validity (no overlongs, no surrogates, nothing above U+10FFFF), e.g. before
// putting bytes into JSON.
bool is_valid_utf8(std::string_view text);

}  // namespace ember::tokenizer::unicode
