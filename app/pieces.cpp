#include "pieces.hpp"

#include <cstdio>

#include "common/error.hpp"
#include "tokenizer/unicode.hpp"

namespace ember::app {

void append_escaped(fmt::memory_buffer& out, std::string_view piece) {
    const bool valid = tokenizer::unicode::is_valid_utf8(piece);
    out.push_back('"');
    for (const char ch : piece) {
        const auto c = static_cast<unsigned char>(ch);
        switch (c) {
            case '"': fmt::format_to(std::back_inserter(out), "\\\""); break;
            case '\\': fmt::format_to(std::back_inserter(out), "\\\\"); break;
            case '\n': fmt::format_to(std::back_inserter(out), "\\n"); break;
            case '\r': fmt::format_to(std::back_inserter(out), "\\r"); break;
            case '\t': fmt::format_to(std::back_inserter(out), "\\t"); break;
            default:
                if (c < 0x20 || c == 0x7F || (c >= 0x80 && !valid)) {
                    fmt::format_to(std::back_inserter(out), "\\x{:02x}", c);
                } else {
                    out.push_back(ch);
                }
        }
    }
    out.push_back('"');
}

void write_stdout_or_throw(const fmt::memory_buffer& buffer) {
    if (std::fwrite(buffer.data(), 1, buffer.size(), stdout) != buffer.size() || std::fflush(stdout) != 0) {
        throw Error("cannot write to standard output");
    }
}

}  // namespace ember::app
