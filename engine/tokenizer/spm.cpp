#include "tokenizer/spm.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

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
    std::vector<std::uint32_t> origin;  // inputs are below 2^30 bytes (tokenizer.cpp): half the bytes of size_t
};

EscapedText escape_spaces(std::string_view input, std::size_t start, std::size_t end, bool space_prefix) {
    EscapedText e;
    const std::size_t n = end - start;
    e.text.reserve(n + n / 4 + 3);
    e.origin.reserve(n + n / 4 + 4);
    const auto at = [](std::size_t offset) { return static_cast<std::uint32_t>(offset); };
    if (space_prefix) {
        e.text += kSpaceMark;
        e.origin.insert(e.origin.end(), 3, at(start));
    }
    for (std::size_t p = start; p < end; ++p) {
        if (input[p] == ' ') {
            e.text += kSpaceMark;
            e.origin.push_back(at(p));
            e.origin.push_back(at(p + 1));
            e.origin.push_back(at(p + 1));
        } else {
            e.text.push_back(input[p]);
            e.origin.push_back(at(p));
        }
    }
    e.origin.push_back(at(end));
    return e;
}

// A run of the escaped text; merged symbols leave len 0 behind.
struct SpmSymbol {
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

// Heap order: the highest score first; among equal scores the leftmost pair. A function
// object, so that the heap operations inline it.
struct LowerPriority {
    bool operator()(const Bigram& a, const Bigram& b) const {
        return a.score < b.score || (a.score == b.score && a.left > b.left);
    }
};
constexpr LowerPriority lower_priority;

// Vocabulary lookups of pair texts up to 7 bytes, remembered in a direct-mapped table: a
// long text asks for the same short pairs (two letters, "▁" and a letter) again and again.
// Only a cache of Vocabulary::find, so it changes no token.
class ShortPairCache {
public:
    static constexpr std::size_t kMaxBytes = 7;
    static constexpr std::size_t kMinText = 4096;  // shorter fragments look every pair up

    explicit ShortPairCache(std::size_t text_bytes) : slots_(text_bytes >= kMinText ? kSlots : 0) {}

    std::int32_t find(const Vocabulary& vocab, std::string_view text) {
        if (slots_.empty() || text.size() > kMaxBytes) return vocab.find(text);
        const std::uint64_t key = pack(text);
        Slot& slot = slots_[((key + text.size()) * 0x9E3779B97F4A7C15ull) >> (64 - kSlotBits)];
        if (slot.size == text.size() && slot.key == key) return slot.token;
        slot = {key, vocab.find(text), static_cast<std::uint32_t>(text.size())};
        return slot.token;
    }

private:
    static constexpr std::size_t kSlotBits = 12;
    static constexpr std::size_t kSlots = std::size_t{1} << kSlotBits;
    struct Slot {
        std::uint64_t key = 0;
        std::int32_t token = 0;
        std::uint32_t size = 0;  // 0: empty
    };
    // 1-7 bytes as one word that, with the size, determines them: two overlapping 4-byte
    // reads, or the first, middle and last byte.
    static std::uint64_t pack(std::string_view t) {
        const auto byte = [&](std::size_t i) { return std::uint64_t{static_cast<unsigned char>(t[i])}; };
        if (t.size() < 4) return byte(0) | (byte(t.size() / 2) << 8) | (byte(t.size() - 1) << 16);
        std::uint32_t low, high;
        std::memcpy(&low, t.data(), 4);
        std::memcpy(&high, t.data() + t.size() - 4, 4);
        return (std::uint64_t{high} << 32) | low;
    }
    std::vector<Slot> slots_;
};

class SpmSession {
public:
    SpmSession(const SpmModel& model, const Vocabulary& vocab, const EscapedText& escaped)
        : model_(model), vocab_(vocab), e_(escaped), pairs_(escaped.text.size()) {}

    // Runs of characters that can merge go through the merge queue one run at a time; a
    // character that cannot merge is a run of its own.
    void run(SpanWriter& writer) {
        const std::string_view t = e_.text;
        std::size_t pos = 0;
        while (pos < t.size()) {
            symbols_.clear();
            while (pos < t.size()) {
                const std::size_t len = character_length(pos);
                if (!model_.can_merge(t.substr(pos, len))) break;
                add_symbol(pos, len);
                pos += len;
            }
            if (symbols_.empty()) {
                const std::size_t len = character_length(pos);
                add_symbol(pos, len);
                pos += len;
            }
            symbols_.back().next = -1;
            for (std::size_t i = 1; i < symbols_.size(); ++i) {
                try_bigram(static_cast<std::int32_t>(i - 1), static_cast<std::int32_t>(i));
            }
            merge_best_pairs();
            emit(writer);
        }
    }

private:
    // Characters are split by their lead byte alone, clipped at the end of the text.
    std::size_t character_length(std::size_t pos) const {
        return std::min(unicode::sequence_length(static_cast<unsigned char>(e_.text[pos])), e_.text.size() - pos);
    }

    void add_symbol(std::size_t start, std::size_t len) {
        const auto index = static_cast<std::int32_t>(symbols_.size());
        symbols_.push_back({static_cast<std::uint32_t>(start), static_cast<std::uint32_t>(len), index - 1, index + 1,
                            Vocabulary::kNone});
    }

    void try_bigram(std::int32_t left, std::int32_t right) {
        if (left < 0 || right < 0) return;
        const SpmSymbol& l = symbols_[static_cast<std::size_t>(left)];
        const SpmSymbol& r = symbols_[static_cast<std::size_t>(right)];
        const std::uint32_t size = l.len + r.len;
        const std::int32_t token = pairs_.find(vocab_, std::string_view(e_.text).substr(l.start, size));
        if (token == Vocabulary::kNone) return;
        queue_.push_back({vocab_.score(token), left, right, size, token});
        std::push_heap(queue_.begin(), queue_.end(), lower_priority);
    }

    void merge_best_pairs() {
        while (!queue_.empty()) {
            std::pop_heap(queue_.begin(), queue_.end(), lower_priority);
            const Bigram best = queue_.back();
            queue_.pop_back();
            SpmSymbol& left = symbols_[static_cast<std::size_t>(best.left)];
            SpmSymbol& right = symbols_[static_cast<std::size_t>(best.right)];
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
    void emit(SpanWriter& writer) {
        if (symbols_.empty()) return;
        for (std::int32_t i = 0; i != -1; i = symbols_[static_cast<std::size_t>(i)].next) {
            const SpmSymbol& s = symbols_[static_cast<std::size_t>(i)];
            std::int32_t token = s.token;
            if (token == Vocabulary::kNone) token = pairs_.find(vocab_, std::string_view(e_.text).substr(s.start, s.len));
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

    const SpmModel& model_;
    const Vocabulary& vocab_;
    const EscapedText& e_;
    ShortPairCache pairs_;
    std::vector<SpmSymbol> symbols_;
    std::vector<Bigram> queue_;
};

}  // namespace

std::uint64_t SpmModel::key_of(std::string_view character) {
    std::uint32_t bytes = 0;
    for (std::size_t i = 0; i < character.size(); ++i) bytes |= std::uint32_t(static_cast<unsigned char>(character[i])) << (8 * i);
    return (std::uint64_t(character.size()) << 32) | bytes;  // never 0: characters are 1-4 bytes
}

void SpmModel::insert(std::uint64_t key) {
    if ((count_ + 1) * 2 > mergeable_.size()) {
        std::vector<std::uint64_t> old = std::move(mergeable_);
        mergeable_.assign(std::max<std::size_t>(64, old.size() * 2), 0);
        mask_ = mergeable_.size() - 1;
        count_ = 0;
        for (const std::uint64_t k : old) {
            if (k) insert(k);
        }
    }
    for (std::size_t s = (key * 0x9E3779B97F4A7C15ull >> 20) & mask_;; s = (s + 1) & mask_) {
        if (mergeable_[s] == key) return;
        if (mergeable_[s] == 0) {
            mergeable_[s] = key;
            ++count_;
            return;
        }
    }
}

bool SpmModel::can_merge_long(std::string_view character) const {
    if (mergeable_.empty()) return false;
    const std::uint64_t key = key_of(character);
    for (std::size_t s = (key * 0x9E3779B97F4A7C15ull >> 20) & mask_;; s = (s + 1) & mask_) {
        if (mergeable_[s] == key) return true;
        if (mergeable_[s] == 0) return false;
    }
}

SpmModel SpmModel::load(const Vocabulary& vocab) {
    SpmModel m;
    const auto length_at = [](std::string_view text, std::size_t pos) {
        return std::min(unicode::sequence_length(static_cast<unsigned char>(text[pos])), text.size() - pos);
    };
    for (std::size_t id = 0; id < vocab.size(); ++id) {
        const std::string_view text = vocab.text(static_cast<std::int32_t>(id));
        if (text.empty() || length_at(text, 0) == text.size()) continue;  // one character: it merges nothing
        for (std::size_t pos = 0; pos < text.size();) {
            const std::string_view character = text.substr(pos, length_at(text, pos));
            if (const std::ptrdiff_t bit = short_bit(character); bit >= 0) {
                m.short_mergeable_[static_cast<std::size_t>(bit) / 64] |= std::uint64_t{1} << (bit % 64);
            } else {
                m.insert(key_of(character));
            }
            pos += character.size();
        }
    }
    return m;
}

void SpmModel::encode(const Vocabulary& vocab, std::string_view input, std::size_t start, std::size_t end,
                      bool space_prefix, std::vector<Token>& out) const {
    const EscapedText escaped = escape_spaces(input, start, end, space_prefix);
    SpanWriter writer(out, start);
    SpmSession(*this, vocab, escaped).run(writer);
    writer.finish(end);
}

}  // namespace ember::tokenizer
