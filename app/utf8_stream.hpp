// Streaming generated text to a terminal: token pieces can end inside a UTF-8 character
// (byte-fallback tokens, BPE byte pieces), so bytes are held back until the character
// they start is complete. Bytes that can never form a character are passed on as they are.
#pragma once

#include <string>
#include <string_view>
#include <utility>

namespace ember::app {

class Utf8Stream {
public:
    // Appends `bytes` and returns what can be printed now.
    std::string push(std::string_view bytes) {
        pending_ += bytes;
        const std::size_t n = complete_prefix(pending_);
        std::string ready = pending_.substr(0, n);
        pending_.erase(0, n);
        return ready;
    }
    // Whatever is still held back (an incomplete character at the end of the output).
    std::string finish() { return std::exchange(pending_, {}); }

private:
    // The length of the longest prefix that does not end in the middle of a character.
    static std::size_t complete_prefix(std::string_view s) {
        const std::size_t n = s.size();
        for (std::size_t back = 1; back <= 3 && back <= n; ++back) {
            const auto c = static_cast<unsigned char>(s[n - back]);
            if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
            const std::size_t length = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            return back < length ? n - back : n;
        }
        return n;
    }

    std::string pending_;
};

// `bytes` with every byte that is not part of a valid UTF-8 character replaced by U+FFFD
// (for JSON strings; the exact bytes are given in hex beside them).
std::string valid_utf8(std::string_view bytes);

}  // namespace ember::app
