#include "utf8_stream.hpp"

#include "tokenizer/unicode.hpp"

namespace ember::app {

std::string valid_utf8(std::string_view bytes) {
    std::string out;
    std::size_t i = 0;
    while (i < bytes.size()) {
        const std::size_t length = tokenizer::unicode::sequence_length(static_cast<unsigned char>(bytes[i]));
        if (length > 0 && i + length <= bytes.size() && tokenizer::unicode::is_valid_utf8(bytes.substr(i, length))) {
            out += bytes.substr(i, length);
            i += length;
        } else {
            out += "\xEF\xBF\xBD";
            i += 1;
        }
    }
    return out;
}

}  // namespace ember::app
