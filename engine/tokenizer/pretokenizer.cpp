#include "tokenizer/pretokenizer.hpp"

#include "common/error.hpp"
#include "tokenizer/unicode.hpp"

namespace ember::tokenizer {
namespace {

// The llama3 / qwen2 expression, alternatives tried in this order at each position:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3} (qwen2: \p{N})
//   | ' '?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
// and one code point when none matches. Nothing reaches past the end of the text.
class RegexWordScanner {
public:
    RegexWordScanner(std::span<const char32_t> cps, bool digits_in_threes, std::vector<std::uint32_t>& word_ends)
        : cps_(cps), digits_in_threes_(digits_in_threes), word_ends_(word_ends) {}

    void run() {
        std::size_t pos = 0;
        while (pos < cps_.size()) pos = next_word(pos);
    }

private:
    static constexpr char32_t kOutside = 0xFFFFFFFF;

    char32_t at(std::size_t i) const { return i < cps_.size() ? cps_[i] : kOutside; }
    std::uint8_t flags_at(std::size_t i) const { return i < cps_.size() ? unicode::flags(cps_[i]) : 0; }
    bool letter(std::size_t i) const { return flags_at(i) & unicode::kLetter; }
    bool number(std::size_t i) const { return flags_at(i) & unicode::kNumber; }
    bool space(std::size_t i) const { return flags_at(i) & unicode::kWhitespace; }
    bool newline(std::size_t i) const { return at(i) == '\r' || at(i) == '\n'; }
    // [^\s\p{L}\p{N}]: anything inside the text that is not whitespace, letter or number
    // (unassigned code points included).
    bool other(std::size_t i) const {
        return i < cps_.size() && !(flags_at(i) & (unicode::kWhitespace | unicode::kLetter | unicode::kNumber));
    }
    // Case-insensitive match of the contraction letters. Only the ASCII capitals lowercase
    // to s t m d r v e l (unicode_gen checks this against UnicodeData.txt), so ASCII
    // lowercasing is exact.
    static char32_t lower(char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

    // Closes a word at `end` (no empty words). Returns `end`.
    std::size_t end_word(std::size_t end) {
        if (end > last_end_) {
            word_ends_.push_back(static_cast<std::uint32_t>(end));
            last_end_ = end;
        }
        return end;
    }

    std::size_t next_word(std::size_t pos) {
        const char32_t c = cps_[pos];

        if (c == '\'' && pos + 1 < cps_.size()) {
            const char32_t c1 = lower(cps_[pos + 1]);
            if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return end_word(pos + 2);
            if (pos + 2 < cps_.size()) {
                const char32_t c2 = lower(cps_[pos + 2]);
                if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
                    return end_word(pos + 3);
                }
            }
        }

        if (!newline(pos) && !number(pos) && (letter(pos) || letter(pos + 1))) {
            ++pos;
            while (letter(pos)) ++pos;
            return end_word(pos);
        }

        if (number(pos)) {
            if (!digits_in_threes_) return end_word(pos + 1);
            std::size_t group_start = pos;
            while (number(pos)) {
                ++pos;
                if (pos - group_start == 3) group_start = end_word(pos);
            }
            return end_word(pos);
        }

        const std::size_t symbols_start = c == ' ' ? pos + 1 : pos;
        if (other(symbols_start)) {
            pos = symbols_start;
            while (other(pos)) ++pos;
            while (newline(pos)) ++pos;
            return end_word(pos);
        }

        std::size_t run = 0;
        std::size_t after_last_newline = 0;
        while (space(pos + run)) {
            if (newline(pos + run)) after_last_newline = pos + run + 1;
            ++run;
        }
        if (after_last_newline > 0) return end_word(after_last_newline);    // \s*[\r\n]+
        if (run > 1 && pos + run < cps_.size()) return end_word(pos + run - 1);  // \s+(?!\S)
        if (run > 0) return end_word(pos + run);                             // \s+
        return end_word(pos + 1);
    }

    std::span<const char32_t> cps_;
    bool digits_in_threes_;
    std::vector<std::uint32_t>& word_ends_;
    std::size_t last_end_ = 0;
};

// [^\n]+|[\n]+
void split_newline_runs(std::span<const char32_t> cps, std::vector<std::uint32_t>& word_ends) {
    std::size_t pos = 0;
    while (pos < cps.size()) {
        const bool is_newline = cps[pos] == '\n';
        while (pos < cps.size() && (cps[pos] == '\n') == is_newline) ++pos;
        word_ends.push_back(static_cast<std::uint32_t>(pos));
    }
}

}  // namespace

void pre_tokenize(PreTokenizer kind, std::span<const char32_t> cps, std::vector<std::uint32_t>& word_ends) {
    switch (kind) {
        case PreTokenizer::Llama3: RegexWordScanner(cps, true, word_ends).run(); return;
        case PreTokenizer::Qwen2: RegexWordScanner(cps, false, word_ends).run(); return;
        case PreTokenizer::Newlines: split_newline_runs(cps, word_ends); return;
        case PreTokenizer::None:
        case PreTokenizer::Unsupported: break;
    }
    throw Error("internal: pre_tokenize called without a BPE pre-tokenizer");
}

}  // namespace ember::tokenizer
