// A run's prompt, read and encoded: the text (prompt.text, or the bytes of prompt.file),
// token ids taken as they are, or a conversation rendered with a chat template
// (docs/chat.md), and what the model sees of it: its bytes, tokens with byte spans,
// whether BOS was added, and for a conversation the message each token came from.
#pragma once

#include <ember/selection.hpp>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "chat/chat_prompt.hpp"
#include "chat/thinking.hpp"
#include "config/run_config.hpp"
#include "runtime/loaded_model.hpp"
#include "tokenizer/tokenizer.hpp"

namespace ember::runtime {

// The prompt of a run config: prompt.text, or the bytes of prompt.file.
std::string read_prompt(const config::PromptSection& prompt);

// The prompt as the model sees it: its bytes, the tokens with byte spans, whether BOS was added.
struct EncodedPrompt {
    std::string text;
    std::vector<tokenizer::Token> tokens;
    std::vector<std::int32_t> ids;
    bool bos_added = false;
    // A conversation (docs/chat.md): the provenance record (template source and SHA-256,
    // variables, rendered text, BOS decision), and its messages: roles, the bytes copied
    // from each, and per token its message or -1 (template text), as selection scopes take them.
    std::optional<boost::json::object> chat;
    std::optional<selection::Conversation> conversation;
    std::optional<chat::ThinkingMarkers> thinking_markers;  // the template's, when it writes them
};
// `special`: special-token texts (<|eot_id|>) in the text are those tokens (--special).
EncodedPrompt encode_prompt(const tokenizer::Tokenizer& tok, std::string text, config::AddBos add_bos, bool special = false);
// A prompt given as token ids: each checked against the vocabulary (ember::Error naming
// `what`, the index and the id), no BOS added (the ids are the sequence); the text is the
// ids' pieces joined, each token's byte span its piece's.
EncodedPrompt encode_ids(const tokenizer::Tokenizer& tok, std::span<const std::int32_t> ids, std::string_view what);
// A conversation (a VARS object) rendered with `t`, special tokens parsed and no second
// BOS; `suffix` (a dataset target) is appended to the rendered text before tokenizing, its
// tokens template text in the message map.
EncodedPrompt encode_chat_prompt(const runtime::LoadedModel& model, const chat::LoadedTemplate& t,
                                 boost::json::object vars, std::string_view suffix = {});
// A run's prompt: prompt.text / prompt.file encoded (prompt.special), prompt.ids taken as
// they are (encode_ids), or prompt.chat rendered with the chat template (the file, else
// the model's), special tokens parsed and no second BOS.
EncodedPrompt encode_run_prompt(const runtime::LoadedModel& model, const config::PromptSection& prompt);
// The template a conversation of `prompt` is rendered with (the file, else the model's).
chat::LoadedTemplate load_run_template(const runtime::LoadedModel& model, const config::PromptSection& prompt);
// The token-to-message map as JSON: a message index per token, null for template text.
boost::json::array token_messages_json(const EncodedPrompt& prompt);

}  // namespace ember::runtime
