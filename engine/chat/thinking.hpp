// Thinking blocks in a reply: the markers an instruct model's template uses around its
// reasoning (Qwen3 `<think>...</think>`, Gemma 4 `<|channel>thought\n...<channel|>`), found
// in the template's own text, and a generated reply split into its thinking and its answer
// (docs/chat.md, "Generation").
//
//   auto m = chat::thinking_markers(template_source);     // nullopt: the template has none
//   chat::Reply r = chat::split_reply(prompt_text, generated_text, *m);
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace ember::chat {

struct ThinkingMarkers {
    std::string_view open, close;
};

// The one table of thinking markers Ember knows. A template uses a pair when its source
// writes both texts.
inline constexpr ThinkingMarkers kThinkingMarkers[] = {
    {"<think>", "</think>"},               // Qwen3
    {"<|channel>thought\n", "<channel|>"},  // Gemma 4
};

std::optional<ThinkingMarkers> thinking_markers(std::string_view template_source);

struct Reply {
    std::optional<std::string> thinking;  // the text between the markers (none: no thinking block)
    bool thinking_closed = false;         // the close marker was generated (false: cut off while thinking)
    std::string answer;                   // the reply without its thinking block
};

// `generated` as a reply to `prompt` (the rendered text the model continued): a thinking
// block starts at the open marker the reply writes, or at the reply's first byte when the
// prompt ends inside one (an open marker after the last close marker, as a generation
// prompt that opens the block writes it).
Reply split_reply(std::string_view prompt, std::string_view generated, const ThinkingMarkers& markers);

// The markers' tokens that decoding leaves out (CONTROL tokens, as Gemma 4's <|channel>),
// and a reply decoded with them kept, so that its thinking block stays marked.
std::vector<std::int32_t> hidden_marker_tokens(const tokenizer::Tokenizer& tok, const ThinkingMarkers& markers);
std::string marked_text(const tokenizer::Tokenizer& tok, std::span<const std::int32_t> tokens, const ThinkingMarkers& markers);

}  // namespace ember::chat
