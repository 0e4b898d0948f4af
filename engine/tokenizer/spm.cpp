#include "tokenizer/spm.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.hpp"
#include "tokenizer/unicode.hpp"

namespace ember::tokenizer {
namespace {

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 '▁', SentencePiece's space

// The fragment as the algorithm sees it ("▁" for every space, maybe one more in front),
// with origin[k] = the input offset of byte boundary k (text.size() + 1 entries). Inside a
// "▁" that stands for a space at p the boundaries map to p, p+1, p+1; all boundaries of
// the added prefix map to the fragment start.
struct EscapedText {
    std::string text;
    std::vector<std::size_t> origin;
};

EscapedText escape_spaces(std::string_view input, std::size_t start, std::size_t end, bool space_prefix) {
    EscapedText e;
    const std::size_t n = end - start;
    e.text.reserve(n + n / 4 + 3);
    e.origin.reserve(n + n / 4 + 4);
    if (space_prefix) {
        e.text += kSpaceMark;
        e.origin.insert(e.origin.end(), 3, start);
    }
    for (std::size_t p = start; p < end; ++p) {
        if (input[p] == ' ') {
            e.text += kSpaceMark;
            e.origin.push_back(p);
            e.origin.push_back(p + 1);
            e.origin.push_back(p + 1);
        } else {
            e.text.push_back(input[p]);
            e.origin.push_back(p);
        }
    }
    e.origin.push_back(end);
    return e;
}

// A run of the escaped text; merged symbols leave len 0 behind.
struct Symbol {
    std::uint32_t start;
    std::uint32_t len;
    std::int32_t prev;
    std::int32_t next;
    std::int32_t token;  // known once the symbol was formed by a merge; otherwise looked up at the end
};

// Two neighbouring symbols whose concatenation is a token.
struct Bigram {
    float score;
    std::int32_t left;
    std::int32_t right;
    std::uint32_t size;
    std::int32_t token;
};

// Heap order: the highest score first; among equal scores the leftmost pair.
bool lower_priority(const Bigram& a, const Bigram& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
}

class SpmSession {
public:
    SpmSession(const Vocabulary& vocab, const EscapedText& escaped) : vocab_(vocab), e_(escaped) {}

    void run(SpanWriter& writer) {
        split_characters();
        for (std::size_t i = 1; i < symbols_.size(); ++i) {
            try_bigram(static_cast<std::int32_t>(i - 1), static_cast<std::int32_t>(i));
        }
        merge_best_pairs();
        emit(writer);
    }

private:
    void split_characters() {
        const std::string& t = e_.text;
        symbols_.reserve(t.size());
        std::size_t pos = 0;
        while (pos < t.size()) {
            const std::size_t len = std::min(unicode::sequence_length(static_cast<unsigned char>(t[pos])), t.size() - pos);
            const auto index = static_cast<std::int32_t>(symbols_.size());
            pos += len;
            symbols_.push_back({static_cast<std::uint32_t>(pos - len), static_cast<std::uint32_t>(len), index - 1,
                                pos == t.size() ? -1 : index + 1, Vocabulary::kNone});
        }
    }

    void try_bigram(std::int32_t left, std::int32_t right) {
        if (left < 0 || right < 0) return;
        const Symbol& l = symbols_[static_cast<std::size_t>(left)];
        const Symbol& r = symbols_[static_cast<std::size_t>(right)];
        const std::uint32_t size = l.len + r.len;
        const std::int32_t token = vocab_.find(std::string_view(e_.text).substr(l.start, size));
        if (token == Vocabulary::kNone) return;
        queue_.push_back({vocab_.score(token), left, right, size, token});
        std::push_heap(queue_.begin(), queue_.end(), lower_priority);
    }

    void merge_best_pairs() {
        while (!queue_.empty()) {
            std::pop_heap(queue_.begin(), queue_.end(), lower_priority);
            const Bigram best = queue_.back();
            queue_.pop_back();
            Symbol& left = symbols_[static_cast<std::size_t>(best.left)];
            Symbol& right = symbols_[static_cast<std::size_t>(best.right)];
            // Stale: one side was merged away, or grew since this pair was queued.
            if (left.len == 0 || right.len == 0 || left.len + right.len != best.size) continue;
            left.len += right.len;
            left.token = best.token;
            right.len = 0;
            left.next = right.next;
            if (right.next >= 0) symbols_[static_cast<std::size_t>(right.next)].prev = best.left;
            try_bigram(left.prev, best.left);
            try_bigram(best.left, left.next);
        }
    }

    // Every merged symbol is a token by construction; a single character may not be, and
    // then each of its bytes becomes a byte-fallback token.
    void emit(SpanWriter& writer) const {
        if (symbols_.empty()) return;
        for (std::int32_t i = 0; i != -1; i = symbols_[static_cast<std::size_t>(i)].next) {
            const Symbol& s = symbols_[static_cast<std::size_t>(i)];
            std::int32_t token = s.token;
            if (token == Vocabulary::kNone) token = vocab_.find(std::string_view(e_.text).substr(s.start, s.len));
            if (token != Vocabulary::kNone) {
                writer.emit(token, e_.origin[s.start + s.len]);
                continue;
            }
            for (std::uint32_t k = s.start; k < s.start + s.len; ++k) {
                const auto byte = static_cast<unsigned char>(e_.text[k]);
                const std::int32_t byte_token = vocab_.byte_token(byte);
                if (byte_token == Vocabulary::kNone) {
                    throw Error(fmt::format("the vocabulary has no byte-fallback token <0x{:02X}> for byte {} of the input",
                                            byte, e_.origin[k]));
                }
                writer.emit(byte_token, e_.origin[k + 1]);
            }
        }
    }

    const Vocabulary& vocab_;
    const EscapedText& e_;
    std::vector<Symbol> symbols_;
    std::vector<Bigram> queue_;
};

}  // namespace

void encode_spm(const Vocabulary& vocab, std::string_view input, std::size_t start, std::size_t end, bool space_prefix,
                std::vector<Token>& out) {
    const EscapedText escaped = escape_spaces(input, start, end, space_prefix);
    SpanWriter writer(out, start);
    SpmSession(vocab, escaped).run(writer);
    writer.finish(end);
}

}  // namespace ember::tokenizer
