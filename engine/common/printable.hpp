// Text from a file name, a file or a user made safe to print on one line of a terminal or
// a script: every control byte (below 0x20, and 0x7f) written as \xNN and a backslash as
// \\, everything else (UTF-8 included) as it is. A name holding "\n#SBATCH" or an escape
// sequence then prints as what it is instead of acting.
#pragma once

#include <string>
#include <string_view>

namespace ember {

inline bool is_control_byte(char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7f;
}

inline std::string printable(std::string_view text) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        if (c == '\\') {
            out += "\\\\";
        } else if (is_control_byte(c)) {
            const auto u = static_cast<unsigned char>(c);
            out += "\\x";
            out += kHex[u >> 4];
            out += kHex[u & 15];
        } else {
            out += c;
        }
    }
    return out;
}

}  // namespace ember
