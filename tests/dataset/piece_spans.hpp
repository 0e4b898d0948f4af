// Token byte spans computed from the tokenizer's pieces alone (not from the tokenizer's
// own spans), for tests that check selection specs independently: the pieces are
// concatenated, the prompt is found in that text (SPM adds a leading space), and a
// token's span is where its piece lies, clipped to the prompt.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace ember::test {

struct PieceSpan {
    std::size_t start, end;
};

inline std::vector<PieceSpan> spans_from_pieces(const tokenizer::Tokenizer& tok,
                                                const std::vector<tokenizer::Token>& tokens, const std::string& text) {
    std::string joined;
    std::vector<PieceSpan> in_joined;
    for (const auto& t : tokens) {
        const std::string piece = tok.piece(t.id);
        in_joined.push_back({joined.size(), joined.size() + piece.size()});
        joined += piece;
    }
    const std::size_t offset = joined.find(text);
    REQUIRE_MESSAGE(offset != std::string::npos, "the pieces do not spell the prompt");
    REQUIRE(offset + text.size() == joined.size());
    std::vector<PieceSpan> out;
    for (const PieceSpan& s : in_joined) {
        const std::size_t a = std::max(s.start, offset) - offset, b = std::max(s.end, offset) - offset;
        out.push_back({std::min(a, text.size()), std::min(b, text.size())});
    }
    return out;
}

// A token a spec anchored to bytes [a, b) selects: its position, and whether it reaches outside.
struct PieceRow {
    std::size_t position;
    bool partial;
};

// Every token overlapping [a, b), with partial marks, computed from `spans`.
inline std::vector<PieceRow> overlapping(const std::vector<PieceSpan>& spans, std::size_t a, std::size_t b) {
    std::vector<PieceRow> out;
    for (std::size_t p = 0; p < spans.size(); ++p)
        if (spans[p].start < spans[p].end && spans[p].start < b && spans[p].end > a)
            out.push_back({p, spans[p].start < a || spans[p].end > b});
    return out;
}

}  // namespace ember::test
