// Encoding with a BPE model: decode the fragment to code points (U+FFFD for malformed
// bytes), cut it into words, merge each word by rank, and map every token back to the
// input bytes it came from.
#include <fmt/format.h>

#include <algorithm>

#include "common/error.hpp"
#include "tokenizer/bpe.hpp"
#include "tokenizer/byte_encoding.hpp"
#include "tokenizer/pretokenizer.hpp"
#include "tokenizer/unicode.hpp"

namespace ember::tokenizer {
namespace {

constexpr char32_t kSpaceMarkCodepoint = 0x2581;  // '▁', Gemma 4's spelling of a space

// A run of the word's bytes; merged symbols leave len 0 behind.
struct BpeSymbol {
    std::uint32_t start;
    std::uint32_t len;
    std::int32_t prev;
    std::int32_t next;
    std::int32_t id;  // symbol id (BpeModel), kNone if it is no token and in no merge
};

// Two neighbouring symbols that a merge joins.
struct Pair {
    std::int32_t rank;
    std::int32_t left;
    std::int32_t right;
    std::int32_t left_id;
    std::int32_t right_id;
    std::int32_t merged;
};

// Heap order: the lowest rank first; among equal ranks the leftmost pair.
bool lower_priority(const Pair& a, const Pair& b) { return a.rank > b.rank || (a.rank == b.rank && a.left > b.left); }

}  // namespace

class BpeSession {
public:
    BpeSession(const BpeModel& model, const Vocabulary& vocab, std::string_view input)
        : model_(model), vocab_(vocab), input_(input) {}

    void encode_fragment(std::size_t start, std::size_t end, std::vector<Token>& out) {
        decode(start, end);
        word_ends_.clear();
        pre_tokenize(model_.pre_, cps_, word_ends_);
        SpanWriter writer(out, start);
        std::size_t first = 0;
        for (const std::uint32_t word_end : word_ends_) {
            encode_word(first, word_end, writer);
            first = word_end;
        }
        writer.finish(end);
    }

private:
    // cps_[i] is the i-th code point of input[start, end), which began at byte cp_start_[i].
    void decode(std::size_t start, std::size_t end) {
        cps_.clear();
        cp_start_.clear();
        const std::string_view fragment = input_.substr(0, end);
        for (std::size_t pos = start; pos < end;) {
            const auto d = unicode::decode(fragment, pos);
            const bool escape_space = !model_.byte_encoded_ && d.cp == ' ';
            cps_.push_back(escape_space ? kSpaceMarkCodepoint : d.cp);
            cp_start_.push_back(pos);
            pos += d.length;
        }
        cp_start_.push_back(end);
    }

    // The word's bytes as the vocabulary spells them before byte encoding (UTF-8 of its
    // code points), origin_[k] = input offset of byte boundary k, and one symbol per byte
    // (gpt2) or per character (gemma4). A character whose bytes differ from the input's
    // (U+FFFD for a bad byte, '▁' for a space) maps its inner boundaries to
    // min(start + k, end) of the input bytes it replaced.
    void build_word(std::size_t first, std::size_t last) {
        word_.clear();
        origin_.clear();
        symbols_.clear();
        for (std::size_t i = first; i < last; ++i) {
            const auto char_start = static_cast<std::uint32_t>(word_.size());
            unicode::append_utf8(word_, cps_[i]);
            const auto char_len = static_cast<std::uint32_t>(word_.size()) - char_start;
            for (std::uint32_t k = 0; k < char_len; ++k) origin_.push_back(std::min(cp_start_[i] + k, cp_start_[i + 1]));
            if (model_.byte_encoded_) {
                for (std::uint32_t k = char_start; k < char_start + char_len; ++k) {
                    add_symbol(k, 1, model_.byte_ids_[static_cast<unsigned char>(word_[k])]);
                }
            } else {
                add_symbol(char_start, char_len, model_.character_id(cps_[i]));
            }
        }
        origin_.push_back(cp_start_[last]);
        if (!symbols_.empty()) symbols_.back().next = -1;
    }

    void add_symbol(std::uint32_t start, std::uint32_t len, std::int32_t id) {
        const auto index = static_cast<std::int32_t>(symbols_.size());
        symbols_.push_back({start, len, index - 1, index + 1, id});
    }

    // The shortcuts llama.cpp takes before merging: with ignore_merges (llama3) a word that
    // is a token as a whole; in Gemma 4 a run of newlines that is a token.
    std::int32_t whole_word_token() {
        if (model_.byte_encoded_) {
            if (!model_.ignore_merges_) return Vocabulary::kNone;
            encoded_.clear();
            for (const char c : word_) unicode::append_utf8(encoded_, byte_encoding::codepoint_of(static_cast<unsigned char>(c)));
            return vocab_.find(encoded_);
        }
        if (word_.find_first_not_of('\n') != std::string::npos) return Vocabulary::kNone;
        return vocab_.find(word_);
    }

    void encode_word(std::size_t first, std::size_t last, SpanWriter& writer) {
        build_word(first, last);
        if (const std::int32_t token = whole_word_token(); token != Vocabulary::kNone) {
            writer.emit(token, origin_.back());
            return;
        }
        queue_.clear();
        for (std::size_t i = 1; i < symbols_.size(); ++i) add_pair(static_cast<std::int32_t>(i - 1), static_cast<std::int32_t>(i));
        merge();
        emit(writer);
    }

    void add_pair(std::int32_t left, std::int32_t right) {
        if (left < 0 || right < 0) return;
        const std::int32_t left_id = symbols_[static_cast<std::size_t>(left)].id;
        const std::int32_t right_id = symbols_[static_cast<std::size_t>(right)].id;
        if (left_id == Vocabulary::kNone || right_id == Vocabulary::kNone) return;
        const MergeTable::Merge* merge = model_.merges_.find(left_id, right_id);
        if (!merge) return;
        queue_.push_back({merge->rank, left, right, left_id, right_id, merge->merged});
        std::push_heap(queue_.begin(), queue_.end(), lower_priority);
    }

    void merge() {
        while (!queue_.empty()) {
            std::pop_heap(queue_.begin(), queue_.end(), lower_priority);
            const Pair best = queue_.back();
            queue_.pop_back();
            BpeSymbol& left = symbols_[static_cast<std::size_t>(best.left)];
            BpeSymbol& right = symbols_[static_cast<std::size_t>(best.right)];
            // Stale: a side was merged away or has changed since the pair was queued.
            if (left.len == 0 || right.len == 0 || left.id != best.left_id || right.id != best.right_id) continue;
            left.len += right.len;
            left.id = best.merged;
            right.len = 0;
            left.next = right.next;
            if (right.next >= 0) symbols_[static_cast<std::size_t>(right.next)].prev = best.left;
            add_pair(left.prev, best.left);
            add_pair(best.left, left.next);
        }
    }

    void emit(SpanWriter& writer) {
        if (symbols_.empty()) return;
        for (std::int32_t i = 0; i != -1; i = symbols_[static_cast<std::size_t>(i)].next) {
            const BpeSymbol& s = symbols_[static_cast<std::size_t>(i)];
            if (vocab_.contains(s.id)) {
                writer.emit(s.id, origin_[s.start + s.len]);
            } else if (model_.byte_encoded_) {
                emit_single_bytes(s, writer);
            } else {
                emit_byte_tokens(s, writer);
            }
        }
    }

    // gpt2, a symbol that is no token: llama.cpp looks up each byte of its byte-encoded
    // spelling as a one-byte token and drops the bytes that are none (the next token's
    // span absorbs them).
    void emit_single_bytes(const BpeSymbol& s, SpanWriter& writer) {
        for (std::uint32_t k = s.start; k < s.start + s.len; ++k) {
            encoded_.clear();
            unicode::append_utf8(encoded_, byte_encoding::codepoint_of(static_cast<unsigned char>(word_[k])));
            for (const char c : encoded_) {
                const std::int32_t token = vocab_.find(std::string_view(&c, 1));
                if (token != Vocabulary::kNone) writer.emit(token, origin_[k + 1]);
            }
        }
    }

    // gemma4: each byte of a symbol that is no token becomes its <0xXX> token.
    void emit_byte_tokens(const BpeSymbol& s, SpanWriter& writer) {
        for (std::uint32_t k = s.start; k < s.start + s.len; ++k) {
            const auto byte = static_cast<unsigned char>(word_[k]);
            const std::int32_t token = vocab_.byte_token(byte);
            if (token == Vocabulary::kNone) {
                throw Error(fmt::format("the vocabulary has no byte-fallback token <0x{:02X}> for byte {} of the input",
                                        byte, origin_[k]));
            }
            writer.emit(token, origin_[k + 1]);
        }
    }

    const BpeModel& model_;
    const Vocabulary& vocab_;
    std::string_view input_;
    std::vector<char32_t> cps_;
    std::vector<std::size_t> cp_start_;
    std::vector<std::uint32_t> word_ends_;
    std::string word_;
    std::string encoded_;
    std::vector<std::size_t> origin_;
    std::vector<BpeSymbol> symbols_;
    std::vector<Pair> queue_;
};

void BpeModel::encode(const Vocabulary& vocab, std::string_view input, std::size_t start, std::size_t end,
                      std::vector<Token>& out) const {
    BpeSession(*this, vocab, input).encode_fragment(start, end, out);
}

}  // namespace ember::tokenizer
