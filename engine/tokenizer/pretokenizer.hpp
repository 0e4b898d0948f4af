// Pre-tokenizers: cut a run of code points into the words that BPE merges within
// (model-math §8.5). llama.cpp states these as regular expressions; the rules below are
// the matches those expressions make, written out as a scanner over code points.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "tokenizer/tokenizer_info.hpp"

namespace ember::tokenizer {

// Appends to `word_ends` the exclusive end index of each word of `cps`, in order; the
// words tile `cps`. `kind` is Llama3, Qwen2 or Newlines.
void pre_tokenize(PreTokenizer kind, std::span<const char32_t> cps, std::vector<std::uint32_t>& word_ends);

}  // namespace ember::tokenizer
