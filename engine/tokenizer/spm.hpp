// SentencePiece-style tokenization (tokenizer.ggml.model = "llama"; model-math §8.4).
#pragma once

#include <string_view>
#include <vector>

#include "tokenizer/token.hpp"
#include "tokenizer/vocab.hpp"

namespace ember::tokenizer {

// Tokenizes the raw-text fragment input[start, end) and appends its tokens to `out`.
// `space_prefix`: put a "▁" before the fragment (the tokenizer's own space, an empty span).
// Throws ember::Error if a byte needs a byte-fallback token the vocabulary lacks.
void encode_spm(const Vocabulary& vocab, std::string_view input, std::size_t start, std::size_t end, bool space_prefix,
                std::vector<Token>& out);

}  // namespace ember::tokenizer
